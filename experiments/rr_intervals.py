"""A small, real irregular-time task of the development benchmark: RR intervals.

One hour of a heart's NN (RR) intervals (`experiments/data/rr_intervals/`, 4,684
beats) is cut into windows of `beats` consecutive beats every `stride` beats.
Each beat is an observation at its own time (seconds from the window's first
beat, or milliseconds with `--time-unit ms`: the cumulative sum of the
intervals) whose value is its interval in
seconds. The first `train_share` of the windows train; the test windows start
after the last training window's target beat, so no beat is in both (the few
windows in between are dropped). Two tasks:

- **classification:** is the next interval longer than the median interval of
  the training part?
- **regression:** the next interval, in seconds.

Each is trained with the main job's defaults, as `ltc-jax train` would build
them from the data (the values standardised with the training statistics, as
the main job does, then `ltc_jax.app.prepare`; no validation share on fewer
than 1,000 series), against the baselines that matter on a slowly varying
signal: persistence (the last interval, or whether it is longer than the
median), a linear autoregression on the last `AR_ORDER` (8) intervals (least
squares on the training windows; for the classification, whether its
prediction is longer than the median), and the training part's majority class
or its targets' mean. The regression's predictions are also read as the
classification's answer (longer than the median or not), as the
autoregression's are.

    python -m experiments.rr_intervals            # 3 seeds, about 11 minutes
    python -m experiments.rr_intervals --quick    # 1 seed, 2 epochs, 8 units
    python -m experiments.rr_intervals --model jump --epochs 40
    python -m experiments.rr_intervals --model cfc --time-unit ms

Writes `results/rr_intervals/<run>/`: `config.json`, `metrics.json` and
`report.txt` (`experiments._report`), and prints the table.
"""

import dataclasses
import os
import statistics
from typing import Literal

import numpy as np
import tyro

from experiments import _problems, _run
from ltc_jax.datasets import SequenceDataset


HERE = os.path.dirname(os.path.abspath(__file__))
INTERVALS = os.path.join(HERE, "data", "rr_intervals", "SampleNNISeriesLong.npy")


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """The RR-interval tasks with the main job's defaults and their baselines.

    `--quick`: smoke test: one seed, 2 epochs, 8 units.
    """

    beats: int = 32
    """Beats per window."""
    stride: int = 8
    """Beats between the starts of consecutive windows."""
    train_share: float = 0.7
    """Share of the windows, in time order, that train."""
    seeds: tuple[int, ...] = (0, 1, 2)
    model: Literal["ltc", "cfc", "jump"] = "ltc"
    """The model (the main job's `--model`): the LTC, the CfC, or the LTC with
    a GRU jump at each beat (`ltc_jax.JumpLTC`)."""
    epochs: int | None = None
    """Override the main job's epochs (default: its own)."""
    hidden_size: int | None = None
    """Override the main job's hidden size (default: its own)."""
    interpolation: Literal["linear", "cubic", "hold"] = "linear"
    """The input path between beats (the main job's default: linear)."""
    weight_decay: float = 0.0
    """Decoupled weight decay (AdamW; the main job's default: none)."""
    folds: int | None = None
    """Choose the epochs by this many folds of the training windows (the main
    job's `--folds`; default: none, the job's own epochs)."""
    readout_times: int | None = None
    """Override the main job's readout times (default: its own, derived from
    the windows' length)."""
    readout_features: Literal["states", "pooled", "both"] | None = None
    """Override what the readout reads of the states at those times (default:
    the job's own)."""
    time_unit: Literal["s", "ms"] = "s"
    """The unit of the beats' times (the intervals, the values, stay in
    seconds): the same data in another unit, which no model should notice."""
    time_scale: float | None = None
    """Override the CfC's unit of elapsed time, in `time_unit` (the main job's
    `--time-scale`; default: its own, the median interval)."""


QUICK = dict(seeds=(0,), epochs=2, hidden_size=8)

AR_ORDER = 8
"""The linear baseline's intervals: each window's last 8 (all of a shorter
window's), with an intercept."""


def load_intervals() -> np.ndarray:
    """The hour of NN intervals, in seconds, `(4684,)` float64."""
    return np.load(INTERVALS).astype(np.float64) / 1000.0


def rr_windows(
    intervals: np.ndarray,
    beats: int,
    stride: int,
    train_share: float,
    time_unit: Literal["s", "ms"] = "s",
) -> dict:
    """The windows of both tasks, split in time.

    **Arguments:** `intervals`: the NN intervals in seconds, `(beats_total,)`,
    interval `k` ending at beat `k`; `beats`: beats per window; `stride`: beats
    between window starts; `train_share`: the share of the windows, in time
    order, that train; `time_unit`: the unit of the windows' times, seconds
    or milliseconds.

    **Returns:** `classification` and `regression`, each with `train` and
    `test` datasets of `n` windows: `ts` `(n, beats)` float64, time from the
    window's first beat in `time_unit` (the sums of its intervals after the
    first); `xs` `(n, beats, 1)`, the intervals in seconds; labels the class
    indices (0 `"not longer"`, 1 `"longer"` than the median) or the next
    interval `(n, 1)` in seconds; and `median`, the median interval (seconds)
    of the training part, beats 0 to the last training target.

    **Raises:** `ValueError` unless `beats` and `stride` are at least 1 and
    `train_share` lies in (0, 1), or if no window fits on either side of the
    split.
    """
    if beats < 1 or stride < 1 or not 0 < train_share < 1:
        raise ValueError(
            "beats and stride must be at least 1 and train_share in (0, 1); got "
            f"{beats}, {stride}, {train_share}."
        )
    starts = np.arange(0, len(intervals) - beats, stride)  # a target follows
    count = int(train_share * len(starts))
    train_starts = starts[:count]
    if count == 0:
        raise ValueError("No training window: raise train_share or shorten windows.")
    last_target = train_starts[-1] + beats
    test_starts = starts[starts > last_target]
    if len(test_starts) == 0:
        raise ValueError("No test window after the training part.")
    median = float(np.median(intervals[: last_target + 1]))
    per_second = {"s": 1.0, "ms": 1000.0}[time_unit]

    def windows(chosen: np.ndarray, classify: bool, class_names=None):
        ts, xs, labels = [], [], []
        for start in chosen:
            values = intervals[start : start + beats]
            times = np.concatenate([[0.0], np.cumsum(values[1:])]) * per_second
            ts.append(times)
            xs.append(values)
            target = intervals[start + beats]
            labels.append(
                ("longer" if target > median else "not longer") if classify else target
            )
        kind = "classification" if classify else "regression"
        return SequenceDataset.from_sequences(
            ts,
            xs,
            labels if classify else np.asarray(labels),
            class_names=class_names,
            name=f"rr_intervals {kind}",
        )

    names = ("not longer", "longer")
    return dict(
        classification=dict(
            train=windows(train_starts, True, names),
            test=windows(test_starts, True, names),
        ),
        regression=dict(
            train=windows(train_starts, False),
            test=windows(test_starts, False),
        ),
        median=median,
    )


def last_intervals(data: SequenceDataset, k: int) -> np.ndarray:
    """Each window's last `k` intervals (seconds), `(n, k)`, oldest first."""
    index = data.lengths[:, None] - k + np.arange(k)[None]
    return np.take_along_axis(data.xs[..., 0], index, axis=1)


def baselines(split: dict) -> dict:
    """The baselines on the test windows of `split` (from `rr_windows`):
    accuracies of `persistence_accuracy` (the last interval longer than the
    median; `persistence_train_accuracy` the same rule on the training
    windows, the level a fit of the training set reaches by it),
    `ar_accuracy` (the autoregression's prediction longer than it) and
    `majority_accuracy` (the training part's commonest class); and
    root-mean-square errors in seconds of `persistence_rmse` (the last
    interval), `ar_rmse` (a least-squares fit of the next interval on the last
    `ar_order` intervals and an intercept, over the training windows) and
    `mean_rmse` (the training targets' mean); and `ar_order`, `AR_ORDER` or
    the windows' length if shorter."""
    median = split["median"]
    train, test = split["classification"]["train"], split["classification"]["test"]
    majority = np.bincount(train.labels, minlength=2).argmax()
    r_train, r_test = split["regression"]["train"], split["regression"]["test"]
    target = r_test.labels[:, 0]
    order = min(AR_ORDER, int(r_train.lengths.min()), int(r_test.lengths.min()))

    def design(data):
        recent = last_intervals(data, order)
        return np.concatenate([recent, np.ones((len(data), 1))], axis=1)

    weights = np.linalg.lstsq(design(r_train), r_train.labels[:, 0], rcond=None)[0]
    predicted = design(r_test) @ weights

    def rmse(estimate):
        return float(np.sqrt(np.mean((estimate - target) ** 2)))

    def accuracy(estimate):
        return float(np.mean((estimate > median).astype(int) == test.labels))

    return dict(
        persistence_accuracy=accuracy(last_intervals(test, 1)[:, 0]),
        persistence_train_accuracy=float(
            np.mean((last_intervals(train, 1)[:, 0] > median) == train.labels)
        ),
        ar_accuracy=accuracy(predicted),
        majority_accuracy=float(np.mean(test.labels == majority)),
        persistence_rmse=rmse(last_intervals(r_test, 1)[:, 0]),
        ar_rmse=rmse(predicted),
        mean_rmse=rmse(np.full_like(target, r_train.labels.mean())),
        ar_order=order,
    )


def main(config: Config) -> dict:
    """Both tasks at every seed, and the baselines; return (and write) them."""
    config, run = _run.start_run(config, "rr_intervals", QUICK)
    split = rr_windows(
        load_intervals(),
        config.beats,
        config.stride,
        config.train_share,
        config.time_unit,
    )
    options = dict(
        model=config.model,
        epochs=config.epochs,
        hidden_size=config.hidden_size,
        interpolation=config.interpolation,
        weight_decay=config.weight_decay,
        folds=config.folds,
        readout_times=config.readout_times,
        readout_features=config.readout_features,
        time_scale=config.time_scale,
    )
    classification = [
        _problems.train_main_job(
            *split["classification"].values(), seed=seed, **options
        )
        for seed in config.seeds
    ]
    regression = [
        _problems.train_main_job(
            *split["regression"].values(), seed=seed, with_outputs=True, **options
        )
        for seed in config.seeds
    ]
    test_classes = split["classification"]["test"].labels
    for result in regression:  # its prediction longer than the median, as the AR's
        predicted = result.pop("outputs")[:, 0] > split["median"]
        result["threshold_accuracy"] = float(np.mean(predicted == test_classes))
    accuracies = [r["accuracy"] for r in classification]
    errors = [float(np.sqrt(r["loss"])) for r in regression]
    thresholded = [r["threshold_accuracy"] for r in regression]
    return run.finish(
        dict(
            train_size=len(split["classification"]["train"]),
            test_size=len(split["classification"]["test"]),
            median=split["median"],
            baselines=baselines(split),
            classification=classification,
            regression=regression,
            accuracy_mean=statistics.mean(accuracies),
            accuracy_std=statistics.pstdev(accuracies),
            rmse_mean=statistics.mean(errors),
            rmse_std=statistics.pstdev(errors),
            threshold_accuracy_mean=statistics.mean(thresholded),
            threshold_accuracy_std=statistics.pstdev(thresholded),
        )
    )


if __name__ == "__main__":
    main(tyro.cli(Config))
