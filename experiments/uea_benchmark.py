"""The development benchmark: the main job's defaults (`ltc-jax train --data TRAIN
--test-data TEST`, nothing else) on several UEA/UCR datasets, several seeds each,
next to the 1-NN baselines of the archives.

By default: JapaneseVowels (bundled in the package) and the UCR datasets
ArrowHead, OSULeaf and ACSF1 (`experiments/data/uea/`, with their provenance).
Any `.ts` pairs can be given instead with `--pairs NAME=TRAIN.ts,TEST.ts ...`,
regression sets (`@targetLabel true`) too, and `--model cfc` (or `jump`),
`--epochs`, `--readout-features`, `--gate-bias-init`, `--folds` or
`--on-failure` change the main job's options (for the ablations on the docs'
benchmark page).

Each run is the main job itself (`ltc_jax.app.train_and_evaluate`, as
`experiments._problems.main_job` calls it) in its own process, writing its run
folder under this run's. The table gives the test accuracy (mean and standard
deviation over the seeds), the training time, the solver steps per sequence,
next to:

- 1-NN Euclidean accuracy computed here on the same arrays (equal lengths only),
  a check on the loading and on the transcription of the next column;
- the archives' published 1-NN Euclidean and 1-NN DTW (full window) accuracies:
  the UCR archive's summary table (Dau et al. 2019) for the univariate sets, the
  UEA archive paper's Table 4 (Bagnall et al. 2018, DTW_D) for JapaneseVowels;
- MiniRocket (Dempster et al. 2021; aeon's `MiniRocketClassifier`, its 10,000
  features into a cross-validated ridge classifier) over the same seeds, with
  its fit-and-predict seconds, where the `baselines` extra is installed
  (`pip install ".[experiments,baselines]"` without the constraints file:
  aeon needs a numba that needs numpy < 2.4); `-` otherwise.

A regression set's rows give the test mean squared error (in its targets'
units squared) instead of the accuracy, next to that of the training targets'
mean, the trivial baseline; the 1-NN and MiniRocket columns are left empty.

    python -m experiments.uea_benchmark            # 4 datasets x 3 seeds (hours)
    python -m experiments.uea_benchmark --quick    # 2 datasets, 1 seed, 2 epochs
    python -m experiments.uea_benchmark --baselines-only   # no LTC: a minute

A run that fails (a non-finite gradient the main job refuses, say) is
recorded in its row with the seed, how its process ended and its error's
last line (`experiments._run.failure_summary`), said on
standard error, and the benchmark goes on; the row's figures are over the
runs that finished, the table's `failed` column says how many of the seeds
did not, and the command then exits with status 1. The `skipped` column
counts the steps that `--on-failure skip` skipped, over the row's runs.

Writes `results/uea_benchmark/<run>/`: `config.json`, each run's folder,
`metrics.json` and `report.txt` with the table (`experiments._report`), and
prints the table.
"""

import dataclasses
import os
import statistics
import sys
import time
from typing import Literal

import numpy as np
import tyro

import ltc_jax
from experiments import _run
from ltc_jax.app.runs import trivial_baseline
from ltc_jax.datasets import read_ts


HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.join(os.path.dirname(ltc_jax.__file__), "datasets", "data")

# Published accuracies (1 - error rate), 1-NN Euclidean and 1-NN DTW with a full
# warping window: the UCR archive's DataSummary table (Dau et al. 2019), and for
# JapaneseVowels Table 4 of Bagnall et al. (2018), ED and DTW_D.
PUBLISHED = {
    "JapaneseVowels": dict(euclidean=0.924, dtw=0.949),
    "ArrowHead": dict(euclidean=0.800, dtw=0.703),
    "OSULeaf": dict(euclidean=0.521, dtw=0.591),
    "ACSF1": dict(euclidean=0.540, dtw=0.640),
}


def default_pairs() -> tuple[str, ...]:
    """`NAME=TRAIN,TEST` for the development set."""
    uea = os.path.join(HERE, "data", "uea")
    folders = dict(JapaneseVowels=BUNDLED, ArrowHead=uea, OSULeaf=uea, ACSF1=uea)
    return tuple(
        f"{name}={folder}/{name}_TRAIN.ts,{folder}/{name}_TEST.ts"
        for name, folder in folders.items()
    )


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """The main job's defaults on a list of datasets.

    `--quick`: smoke test: JapaneseVowels and ArrowHead, one seed, 2 epochs, 8 units.
    """

    pairs: tuple[str, ...] = default_pairs()
    """Datasets as NAME=TRAIN.ts,TEST.ts."""
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int | None = None
    """Override the main job's epochs (default: its own)."""
    model: Literal["ltc", "cfc", "jump"] = "ltc"
    """The main job's --model: the LTC, the CfC or the jump model."""
    hidden_size: int | None = None
    """Override the main job's hidden size (default: its own)."""
    readout_features: Literal["states", "pooled", "both"] | None = None
    """The main job's --readout-features (default: its own)."""
    gate_bias_init: Literal["zero", "chrono"] | None = None
    """The main job's --gate-bias-init (default: its own)."""
    ode_unfolds: int | None = None
    """The main job's --ode-unfolds (default: its own)."""
    folds: int | None = None
    """The main job's --folds (default: none)."""
    on_failure: Literal["raise", "skip"] | None = None
    """The main job's --on-failure (default: raise; skip: skip a failed step)."""
    baselines_only: bool = False
    """Run the baselines alone (1-NN Euclidean, MiniRocket), not the main job."""


QUICK = dict(seeds=(0,), epochs=2, hidden_size=8)

OVERRIDES = (
    "model epochs hidden_size readout_features gate_bias_init ode_unfolds folds "
    "on_failure"
)
"""The fields of `Config` that set the main job's option of the same name (`None`:
the main job's own)."""


def euclidean_1nn(train, test) -> float | None:
    """1-NN accuracy under the Euclidean distance over whole series (`None`
    unless every series of both sets has the same length, with no missing
    values)."""
    lengths = np.concatenate([train.lengths, test.lengths])
    missing = np.isnan(train.xs).any() or np.isnan(test.xs).any()
    if len(set(lengths.tolist())) != 1 or missing:
        return None
    a = train.xs.reshape(len(train), -1)
    b = test.xs.reshape(len(test), -1)
    distances = (b**2).sum(1)[:, None] - 2 * b @ a.T + (a**2).sum(1)[None]
    predicted = train.labels[np.argmin(distances, axis=1)]
    return float(np.mean(predicted == test.labels))


MINIROCKET_SHORTEST = 9
"""MiniRocket's shortest series: its kernels are 9 samples long."""


def equal_length(data, length: int) -> np.ndarray:
    """`data`'s values as one array `(series, channels, length)`, as MiniRocket
    takes them: a missing value is the channel's last observed one (its first,
    before any), and each series is held at its last value up to `length`.

    **Raises:** `ValueError` for a channel a series never observes."""
    out = np.empty((len(data), data.num_channels, length))
    for i, (xs, n) in enumerate(zip(data.xs, data.lengths, strict=True)):
        for c in range(data.num_channels):
            values = xs[:n, c]
            seen = ~np.isnan(values)
            if not seen.any():
                raise ValueError(
                    f"Series {i} never observes channel {c}: MiniRocket needs a "
                    "value in every channel."
                )
            last = np.maximum.accumulate(np.where(seen, np.arange(n), -1))
            first = np.argmax(seen)
            held = values[np.where(last < 0, first, last)]
            out[i, c, :n], out[i, c, n:] = held, held[-1]
    return out


def minirocket(train, test, seed: int) -> dict | None:
    """MiniRocket's test accuracy and its fit-and-predict seconds at `seed`,
    on the series held to the longest length of both sets (at least
    `MINIROCKET_SHORTEST`); `None` where aeon is not installed."""
    try:
        from aeon.classification.convolution_based import MiniRocketClassifier
    except ImportError:
        return None
    length = max(MINIROCKET_SHORTEST, int(train.lengths.max()), int(test.lengths.max()))
    start = time.perf_counter()
    classifier = MiniRocketClassifier(random_state=seed)
    classifier.fit(equal_length(train, length), train.labels)
    predicted = classifier.predict(equal_length(test, length))
    return dict(
        accuracy=float(np.mean(predicted == test.labels)),
        seconds=time.perf_counter() - start,
    )


def summary(values: list[float]) -> dict | None:
    """Mean and population standard deviation (`None` for no values)."""
    if not values:
        return None
    return dict(mean=statistics.mean(values), std=statistics.pstdev(values))


def main(config: Config) -> dict:
    """Run every dataset and seed; return (and write) the rows."""
    config, run = _run.start_run(config, "uea_benchmark", QUICK)
    pairs = config.pairs[:2] if config.quick else config.pairs
    overrides = {name: getattr(config, name) for name in OVERRIDES.split()}
    rows = []
    for pair in pairs:
        name, files = pair.split("=", 1)
        train_file, test_file = files.split(",")
        train = read_ts(train_file)
        classes = train.is_classification
        test = read_ts(test_file, class_names=train.class_names if classes else None)
        runs, failed, rocket = [], [], []
        for seed in config.seeds:
            options = dict(data=train_file, test_data=test_file, seed=seed)
            options.update(out=run.path(name, f"seed{seed}"))
            options.update({k: v for k, v in overrides.items() if v is not None})
            if not config.baselines_only:
                try:
                    runs.append(
                        ltc_jax.measure.call_in_subprocess(
                            "experiments._problems:main_job", dict(options=options)
                        )
                    )
                except ltc_jax.SubprocessError as error:  # the others still run
                    failed.append(dict(seed=seed, error=_run.failure_summary(error)))
                    print(
                        f"{name}, seed {seed}: failed: {failed[-1]['error']}",
                        file=sys.stderr,
                    )
            result = minirocket(train, test, seed) if classes else None
            rocket += [] if result is None else [result]
        rows.append(
            dict(
                dataset=name,
                train_size=len(train),
                test_size=len(test),
                longest=int(train.lengths.max()),
                runs=runs,
                failed=failed,
                skipped_steps=sum(r["skipped_steps"] for r in runs) if runs else None,
                task="classification" if classes else "regression",
                accuracy=summary([r["test_accuracy"] for r in runs])
                if classes
                else None,
                mse=None if classes else summary([r["test_loss"] for r in runs]),
                mean_mse=None
                if classes
                else trivial_baseline(train, test)["test_loss"],
                train_seconds_mean=statistics.mean(r["train_seconds"] for r in runs)
                if runs
                else None,
                steps_per_sequence=statistics.mean(
                    r["steps_per_sequence"] for r in runs
                )
                if runs
                else None,
                euclidean_1nn=euclidean_1nn(train, test) if classes else None,
                published=PUBLISHED.get(name),
                minirocket_runs=rocket,
                minirocket=summary([r["accuracy"] for r in rocket]),
                # the median: the first fit also compiles aeon's numba kernels
                minirocket_seconds=statistics.median(r["seconds"] for r in rocket)
                if rocket
                else None,
            )
        )
    return run.finish(dict(rows=rows, overrides=overrides))


if __name__ == "__main__":
    if any(row["failed"] for row in main(tyro.cli(Config))["rows"]):
        sys.exit(1)  # the table is written; some of its runs are not in it
