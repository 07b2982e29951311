"""Real sensors made asynchronous: the sensor-stream path (`stream_windows`) on
a smart watch's recordings, against the union of the sensors' timestamps.

BasicMotions (`experiments/data/uea/`, UEA archive: 40 train / 40 test
recordings of a watch's 3-axis accelerometer and 3-axis gyroscope at 10 Hz for
10 s; standing, walking, running, badminton) has every channel on one grid. The
protocol makes it asynchronous, as a plant's sensors are:

- the accelerometer's three channels keep every sample (10 Hz, fast);
- each gyroscope channel keeps every `gyroscope_step`-th sample (every 7th,
  1.43 Hz, by default: slow), from a phase drawn per recording and channel
  (seeded), so the three gyroscope channels are (almost always) sampled at
  different times;
- the samples keep their recorded times (`i / 10` s) and values: nothing is
  interpolated or invented.

Each recording becomes one "machine" of a `ltc_jax.datasets.SensorStreams`,
and its window `(0, window_seconds]` is read in two layouts:

- *multi-rate*: `stream_windows` on a slow clock (`clock_hz`, 2 Hz): the
  accelerometer summarised within each frame (mean, standard deviation, rms of
  successive differences), each gyroscope channel's last value and whether it
  is new (the gyroscope's period is not the frame's, so some frames hold the
  last value);
- *union grid*: every sample at its own time on the union of the channels'
  times, NaN where a channel has no sample, with the observation mask (the
  layout the docs gave before streams; `benchmarks.streams.union_dataset`).

Each layout trains the main job's defaults (`ltc_jax.app.prepare` after
standardising with the training statistics; the hold path, causal). The
maintenance engineer's baselines train on the multi-rate windows' summary
features (`benchmarks.streams.summary_features`): logistic regression and
gradient-boosted trees (scikit-learn; at least `len(train) // 20` recordings
per leaf, since the default of 20 allows one split on 40 recordings). All are
scored on the 40 test recordings; every seed draws new phases and new initial
parameters.

    python -m experiments.async_motions            # 3 seeds, about 8 minutes
    python -m experiments.async_motions --quick    # 1 seed, 2 epochs, 8 units

Writes `results/async_motions/<run>/`: `config.json`, `metrics.json` and
`report.txt` (`experiments._report`), and prints the table.
"""

import dataclasses
import os
import statistics
import time

import numpy as np
import tyro

import ltc_jax
from benchmarks.streams import summary_baselines, summary_features, union_dataset
from experiments import _problems, _run
from ltc_jax.datasets import SensorStreams, SequenceDataset


HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "uea")
RATE_HZ = 10.0
"""BasicMotions' sampling rate."""
GROUPS = ("accelerometer",) * 3 + ("gyroscope",) * 3
"""The six channels' sensors, in the file's order."""


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """BasicMotions resampled per channel: the multi-rate path against the
    union grid, with the main job's defaults, and trees on summary features.

    `--quick`: smoke test: one seed, 2 epochs, 8 units.
    """

    gyroscope_step: int = 7
    """Each gyroscope channel keeps every this-many-th sample (7: 1.43 Hz)."""
    clock_hz: float = 2.0
    """The multi-rate windows' slow clock, in hertz: frames of 0.5 s, in which
    a gyroscope channel has a new sample or holds its last."""
    window_seconds: float = 9.0
    """The window read from each recording, `(0, window_seconds]`: a whole
    number of frames that ends within the 9.9 s of every channel."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Seeds of the phases and of the models."""
    epochs: int | None = None
    """Override the main job's epochs (default: its own)."""
    hidden_size: int | None = None
    """Override the main job's hidden size (default: its own)."""


QUICK = dict(seeds=(0,), epochs=2, hidden_size=8)


def load_basic_motions() -> tuple[SequenceDataset, SequenceDataset]:
    """BasicMotions' training and test sets, with times in seconds (`i / 10`):
    `ts` `(n, 100)`, `xs` `(n, 100, 6)` (accelerometer x, y, z, then gyroscope
    x, y, z), class labels."""
    train = ltc_jax.datasets.read_ts(os.path.join(DATA, "BasicMotions_TRAIN.ts"))
    test = ltc_jax.datasets.read_ts(
        os.path.join(DATA, "BasicMotions_TEST.ts"), class_names=train.class_names
    )
    return tuple(dataclasses.replace(d, ts=d.ts / RATE_HZ) for d in (train, test))


def asynchronous_streams(
    data: SequenceDataset, gyroscope_step: int, seed: int
) -> SensorStreams:
    """The protocol: each recording of `data` as one machine, the accelerometer
    channels at every sample, each gyroscope channel at every
    `gyroscope_step`-th from a phase in `[0, gyroscope_step)` drawn per
    recording and channel by `numpy.random.default_rng(seed)`; recorded times
    and values kept. No failures (every machine censored).

    **Raises:** `ValueError` if `data` has padding or not six channels."""
    if data.num_channels != len(GROUPS) or np.any(data.lengths != data.ts.shape[1]):
        raise ValueError("Expected BasicMotions: equal lengths and six channels.")
    rng = np.random.default_rng(seed)
    steps = [1 if g == "accelerometer" else gyroscope_step for g in GROUPS]
    columns = {name: [] for name in ("machine", "sensor", "time", "value")}
    for machine in range(len(data)):
        for sensor, step in enumerate(steps):
            kept = np.arange(rng.integers(step), data.ts.shape[1], step)
            columns["machine"].append(np.full(kept.size, machine))
            columns["sensor"].append(np.full(kept.size, sensor))
            columns["time"].append(data.ts[machine, kept])
            columns["value"].append(data.xs[machine, kept, sensor])
    return SensorStreams(
        **{name: np.concatenate(parts) for name, parts in columns.items()},
        sensor_group=GROUPS,
        sensor_rate_hz=[RATE_HZ / step for step in steps],
        failure_time=np.full(len(data), np.nan),
        sensor_names=[f"{g}_{axis}" for g, axis in zip(GROUPS, "xyzxyz", strict=True)],
    )


def layouts(data: SequenceDataset, config: Config, seed: int) -> dict:
    """Both layouts of `data`'s recordings, labelled with their classes:
    `multi_rate` (`stream_windows` on the slow clock) and `union` (the union
    grid), each a `SequenceDataset` in the recordings' order."""
    streams = asynchronous_streams(data, config.gyroscope_step, seed)
    # One window per recording, `(0, window_seconds]`; the label horizon is 0
    # (no failures here): the class labels replace it below.
    windows = ltc_jax.datasets.stream_windows(
        streams, config.window_seconds, horizon_seconds=0.0, clock_hz=config.clock_hz
    )
    if not np.array_equal(windows.machine, np.arange(len(data))):
        raise RuntimeError("Expected one window per recording.")
    labelled = dict(labels=data.labels, class_names=data.class_names)
    return dict(
        multi_rate=dataclasses.replace(windows.dataset, **labelled),
        union=dataclasses.replace(union_dataset(streams, windows), **labelled),
    )


def baselines(train: SequenceDataset, test: SequenceDataset, seed: int) -> dict:
    """`benchmarks.streams.summary_baselines` on the windows' summary features
    (trees with at least `len(train) // 20` windows per leaf): each one's
    `accuracy` on `test` and `seconds` of training, as `logistic` and
    `trees`."""
    estimators = summary_baselines(seed, min_samples_leaf=max(1, len(train) // 20))
    results = {}
    for name, estimator in zip(("logistic", "trees"), estimators.values(), strict=True):
        start = time.perf_counter()
        estimator.fit(summary_features(train), train.labels)
        seconds = time.perf_counter() - start
        predicted = estimator.predict(summary_features(test))
        accuracy = float(np.mean(predicted == test.labels))
        results[name] = dict(accuracy=accuracy, seconds=seconds)
    return results


def main(config: Config) -> dict:
    """Every seed's layouts and models; return (and write) the results."""
    config, run = _run.start_run(config, "async_motions", QUICK)
    train, test = load_basic_motions()
    runs = []
    for seed in config.seeds:
        # The test recordings' phases from a seed of their own.
        ours, theirs = layouts(train, config, seed), layouts(test, config, seed + 1000)
        # The main job's defaults on the hold path (causal), at `seed`.
        options = dict(
            seed=seed,
            interpolation="hold",
            epochs=config.epochs,
            hidden_size=config.hidden_size,
        )
        runs.append(
            dict(
                seed=seed,
                multi_rate=_problems.train_main_job(
                    ours["multi_rate"], theirs["multi_rate"], **options
                ),
                union=_problems.train_main_job(
                    ours["union"], theirs["union"], observation_mask=True, **options
                ),
                **baselines(ours["multi_rate"], theirs["multi_rate"], seed),
            )
        )
    summary = {}
    for name in ("multi_rate", "union", "logistic", "trees"):
        accuracies = [r[name]["accuracy"] for r in runs]
        summary[name] = dict(
            mean=statistics.mean(accuracies),
            # The sample standard deviation over the seeds (0 for one seed).
            std=statistics.stdev(accuracies) if len(runs) > 1 else 0.0,
            seconds=statistics.median(r[name]["seconds"] for r in runs),
        )
    return run.finish(
        dict(train_size=len(train), test_size=len(test), runs=runs, summary=summary)
    )


if __name__ == "__main__":
    main(tyro.cli(Config))
