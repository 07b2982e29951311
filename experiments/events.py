"""Time to failure on the simulated plant: an LTC trained on when the failure
comes, by a crossing time or by a hazard readout, against a regressor on
summary features and a constant.

Each machine of the simulated plant (`ltc_jax.datasets.simulate_plant`, its
last `simulated_seconds` before failure) is cut into windows of
`window_seconds` on a slow clock (`stream_windows`), every `stride_seconds`.
The target is each window's time to failure, seen for `follow_up_seconds`
after the window's end: a failure later than that is censored there ("not
within the follow-up"), as a maintenance log that ends is. Machines are the
unit of the split: training, validation (the epoch of lowest validation loss
is kept) and held-out machines.

The models:

- **LTC, crossing time** (`ltc_jax.training.EventTimeLoss`): the LTC reads the
  window, then runs on through the follow-up with its inputs held
  (`ltc_jax.datasets.hold_last`); the failure is predicted where its readout,
  risen from the zero state, crosses 1, a time located by root finding and
  trained by its implicit derivative (squared error in units of the
  follow-up; a censored window costs only a crossing before the censoring).
- **LTC, hazard** (`ltc_jax.training.DiscreteHazardLoss`): the same LTC on the
  window alone, its readout the logits of the failure's hazard in
  `hazard_bins` equal bins of the follow-up, trained on the censored
  likelihood; the prediction is the median time.
- **Gradient-boosted trees** (scikit-learn's `HistGradientBoostingRegressor`)
  on each window's summary features (per channel: last, mean, standard
  deviation, minimum and maximum over its frames; the feature baseline of
  `benchmarks.streams`), trained on the time to failure capped at the
  follow-up (a censored window as the follow-up's length).
- **Constant:** the median of the training windows' capped times.

Both LTCs share the data-derived settings (`derive_defaults`: time constants,
one fused step per frame), units, optimiser and epochs. Scored on the
held-out machines' windows: the mean absolute error in minutes where the
failure comes within the follow-up (predictions capped to it), and Harrell's
concordance index over every window (censored ones included: a pair is
ranked where the earlier time is an observed failure).

    python -m experiments.events            # 3 seeds, about 9 minutes
    python -m experiments.events --quick    # 1 seed, a small plant, 3 epochs

Writes `results/events/<run>/`: `config.json`, `metrics.json` and
`report.txt` (`experiments._report`), and prints the table.
"""

import dataclasses
import statistics
import time

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import tyro

import ltc_jax
from benchmarks.streams import summary_features
from experiments import _problems, _run
from ltc_jax.datasets import (
    SequenceDataset,
    hold_last,
    simulate_plant,
    standardize,
    stream_windows,
)


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """Time to failure on the simulated plant: the crossing-time LTC, the hazard
    LTC, gradient-boosted trees and a constant.

    `--quick`: one seed, 4 + 2 + 3 machines of 10 sensors, 3 epochs.
    """

    machines: tuple[int, int, int] = (30, 6, 12)
    """Training, validation and held-out machines."""
    sensors: int = 20
    """Sensors per machine."""
    simulated_seconds: float = 3600.0
    """Each machine's stream: its last hour before failure."""
    window_seconds: float = 300.0
    """Window length, in seconds."""
    clock_hz: float = 0.2
    """The windows' slow clock, in hertz (a frame of 5 s)."""
    stride_seconds: float = 60.0
    """Seconds between successive windows' ends."""
    follow_up_seconds: float = 1800.0
    """How long after a window's end its failure is seen; a later failure is
    censored there."""
    follow_up_knots: int = 30
    """Held inputs over the follow-up, for the crossing-time LTC."""
    hazard_bins: int = 30
    """Bins of the follow-up, for the hazard LTC."""
    hidden_size: int = 16
    """LTC units."""
    epochs: int = 30
    """Most training epochs."""
    patience: int = 5
    """Stop after this many epochs without a lower validation loss."""
    batch_size: int = 32
    """Windows per training step."""
    learning_rate: float = 1e-2
    """Adam's peak learning rate, cosine-decayed over the epochs."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """One run per seed, each seeding its plant (with `seed + 1`), its models
    and its data order: the report gives their mean and spread."""


QUICK = dict(machines=(4, 2, 3), sensors=10, epochs=3, seeds=(0,))


def event_labels(windows, follow_up_seconds: float) -> np.ndarray:
    """`float64[n, 2]` time-to-event labels of stream windows: `(time,
    observed)`, the time from each window's first frame to its machine's
    failure, or to the end of the follow-up where the failure comes later
    (censored: `observed` 0)."""
    ttf = windows.time_to_failure
    frames = windows.dataset.ts
    window = frames[:, -1] - frames[:, 0]
    observed = ttf <= follow_up_seconds
    time = window + np.where(observed, ttf, follow_up_seconds)
    return np.stack([time, observed.astype(np.float64)], axis=1)


def concordance_index(
    time: np.ndarray, observed: np.ndarray, predicted: np.ndarray
) -> float:
    """Harrell's concordance index: over pairs whose earlier time is an observed
    event (and whose times differ), the share in which that one is predicted
    the earlier; equal predictions count one half (Harrell et al. 1982,
    "Evaluating the yield of medical tests", JAMA 247(18))."""
    earlier = (time[:, None] < time[None, :]) & observed[:, None].astype(bool)
    right = predicted[:, None] < predicted[None, :]
    tied = predicted[:, None] == predicted[None, :]
    pairs = np.sum(earlier)
    if pairs == 0:
        return float("nan")
    return float((np.sum(earlier & right) + 0.5 * np.sum(earlier & tied)) / pairs)


def scores(true: np.ndarray, observed: np.ndarray, predicted, follow_up: float):
    """MAE in minutes over the observed failures (predictions capped to
    `[0, follow_up]`) and the concordance index over every window."""
    predicted = np.clip(np.asarray(predicted, np.float64), 0.0, follow_up)
    mae = np.mean(np.abs(predicted - true)[observed]) / 60.0
    return dict(
        mae_minutes=float(mae), concordance=concordance_index(true, observed, predicted)
    )


def _without_classes(data: SequenceDataset, labels: np.ndarray) -> SequenceDataset:
    return dataclasses.replace(data, labels=labels, class_names=())


def run_seed(config: Config, seed: int) -> list[dict]:
    """One plant: every model trained on its training machines and scored on its
    held-out machines."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    trained, validating, held_out = config.machines
    plant = simulate_plant(
        machines=trained + validating + held_out,
        sensors=config.sensors,
        seed=seed + 1,
        simulated_seconds=config.simulated_seconds,
    )
    windows = stream_windows(
        plant,
        config.window_seconds,
        clock_hz=config.clock_hz,
        stride_seconds=config.stride_seconds,
        horizon_seconds=config.follow_up_seconds,
    )
    labels = event_labels(windows, config.follow_up_seconds)
    data = _without_classes(windows.dataset, labels)
    first = np.cumsum([0, trained, validating, held_out])
    parts = [
        np.flatnonzero(np.isin(windows.machine, np.arange(first[i], first[i + 1])))
        for i in range(3)
    ]
    train, validation, test = standardize(*(data.take(p) for p in parts))
    # The time from a window's first frame to its end: a prediction's origin.
    window = windows.dataset.ts[:, -1] - windows.dataset.ts[:, 0]
    true = windows.time_to_failure[parts[2]]
    observed = labels[parts[2], 1] > 0
    capped = np.minimum(windows.time_to_failure, config.follow_up_seconds)
    rows = []

    def score(model, predicted, seconds, epochs=None):
        rows.append(
            dict(
                model=model,
                seed=seed,
                **scores(true, observed, predicted, config.follow_up_seconds),
                train_seconds=seconds,
                epochs=epochs,
                train_windows=len(train),
                test_windows=len(test),
                observed_share=float(np.mean(observed)),
            )
        )

    fit_parts = np.concatenate(parts[:2])
    score(
        "constant (training median)",
        np.full(len(test), np.median(capped[fit_parts])),
        0.0,
    )
    trees = HistGradientBoostingRegressor(random_state=seed)
    start = time.perf_counter()
    trees.fit(
        np.concatenate([summary_features(train), summary_features(validation)]),
        capped[fit_parts],
    )
    seconds = time.perf_counter() - start
    score("gradient-boosted trees", trees.predict(summary_features(test)), seconds)

    defaults = ltc_jax.training.derive_defaults([train], adaptive=False)
    options = dict(dtype=jnp.float32, interpolation="hold", empty_channel_fill=0.0)
    follow = config.follow_up_seconds
    for name, objective, outputs, held in (
        (
            "LTC, crossing time",
            ltc_jax.training.EventTimeLoss(scale=follow),
            1,
            lambda d: hold_last(d, follow, config.follow_up_knots),
        ),
        (
            "LTC, hazard",
            ltc_jax.training.DiscreteHazardLoss(horizon=follow),
            config.hazard_bins,
            lambda d: d,
        ),
    ):
        fit_train, fit_validation, fit_test = (
            held(d) for d in (train, validation, test)
        )
        model = ltc_jax.LTC(
            train.num_channels,
            config.hidden_size,
            outputs,
            tau_init=defaults.tau_init,
            tau_min=defaults.tau_min,
            gate_bias_init="chrono",
            key=jr.key(seed),
        )
        model = _problems.cast(model, "float32")
        max_steps = ltc_jax.training.fixed_max_steps([fit_train], defaults.dt0)
        integrator = ltc_jax.make_integrator(
            "fused", "checkpoint", dt0=defaults.dt0, max_steps=max_steps
        )
        steps = config.epochs * -(-len(train) // config.batch_size)
        optimizer = optax.adam(optax.cosine_decay_schedule(config.learning_rate, steps))
        start = time.perf_counter()
        model, history = ltc_jax.fit(
            model,
            fit_train,
            integrator=integrator,
            optimizer=optimizer,
            epochs=config.epochs,
            batch_size=config.batch_size,
            seed=seed,
            path=ltc_jax.make_input_path(fit_train, **options),
            objective=objective,
            validation=fit_validation,
            validation_path=ltc_jax.make_input_path(fit_validation, **options),
            patience=config.patience,
            progress=ltc_jax.training.NoFitProgress(),
        )
        seconds = time.perf_counter() - start
        times, _ = objective.predict(
            model, ltc_jax.make_input_path(fit_test, **options), integrator
        )
        predicted = np.asarray(times, np.float64) - window[parts[2]]
        score(name, predicted, seconds, len(history))
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per model: the mean and standard deviation over seeds of each score."""
    out = []
    for model in dict.fromkeys(row["model"] for row in rows):
        mine = [row for row in rows if row["model"] == model]
        entry = dict(model=model, seeds=len(mine))
        for key in ("mae_minutes", "concordance", "train_seconds"):
            values = [row[key] for row in mine]
            entry[f"{key}_mean"] = statistics.fmean(values)
            entry[f"{key}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        out.append(entry)
    return out


def main(config: Config) -> dict:
    """Train and score every model on each seed's plant; return (and write) the
    rows and their summary."""
    config, run = _run.start_run(config, "events", QUICK)
    rows = [row for seed in config.seeds for row in run_seed(config, seed)]
    return run.finish(dict(rows=rows, summary=summary(rows)))


if __name__ == "__main__":
    main(tyro.cli(Config))
