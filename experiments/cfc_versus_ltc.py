"""The closed-form continuous-time cell (CfC; Hasani et al. 2022) against the
LTC it approximates: how close the LTC's direct closed form stays to the LTC's
ODE solution, and the two models trained side by side.

1. **Approximation.** An LTC (16 units) and its direct closed form
   (`ltc_jax.ltc_closed_form_step`, the same parameters) on the same inputs:
   windows of the MIT-BIH ECG (360 Hz, time in seconds) and JapaneseVowels
   utterances (the frame index as time), for typical time constants of 1, 10,
   100 and 1000 observation intervals (each unit's tau log-uniform in [0.1, 10]
   times it). The ODE is solved by Tsit5 at rtol 1e-9 in float64; the closed
   form steps from observation to observation, the input held at the mean of
   the step's two observations. The error is the RMS difference of the states
   over the first k observations, relative to the RMS of the ODE's states.
2. **Training side by side** on JapaneseVowels, 3 seeds, the main job's defaults
   otherwise (in a fresh process each, alternating the models): the LTC with
   `checkpoint` (the fused step, the main job's default) and with the windowed
   adjoint (Tsit5, the main job's solver for a continuous adjoint), and the CfC
   (`--model cfc`):
   test accuracy, median training-epoch seconds, and the compiled memory of one
   training step.
3. **A long ECG window.** One forecasting training step (batch 4, 32 units, a
   window of 1e4 and of 1e5 samples): the LTC with RK4 at one step per sample
   under `checkpoint` and `windowed`, and the CfC (its time unit the sampling
   interval, as the main job derives it; `--cfc-time-scale`): the step's
   median seconds and compiled temp memory.
4. **Trained on a long ECG window.** The same three, 32 units, trained to
   forecast the signal 0.1 s (36 samples) past the end of 1e4-sample windows
   (28 s): training windows from the first 70% of the recording, test windows
   from the rest, none overlapping a training window. `ltc_jax.fit` with Adam
   at 1e-2 (cosine decay), batch 8, a fixed number of epochs; the test mean
   squared error (mV^2) next to two baselines computed on the same windows:
   predicting the training targets' mean, and persistence (the window's last
   sample).

The UEA development benchmark with the CfC is `python -m
experiments.uea_benchmark --model cfc`.

    python -m experiments.cfc_versus_ltc           # an hour or more on 2 shared cores
    python -m experiments.cfc_versus_ltc --quick   # minutes
    python -m experiments.cfc_versus_ltc --parts ecg_trained   # part 4 alone
    python -m experiments.cfc_versus_ltc --parts ecg_trained --ecg-models cfc \
        --cfc-time-scale 1   # the CfC alone, reading its elapsed time in seconds

Writes `results/cfc_versus_ltc/<run>/`: `metrics.json`, and (`experiments._report`)
`report.txt` and, with the approximation part, `cfc_versus_ltc.png` (its error
against the horizon).
"""

import dataclasses
import statistics
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import tyro

import ltc_jax
from experiments import _problems, _report, _run


SAMPLE_RATE_HZ = _problems.SAMPLE_RATE_HZ
Part = Literal["approximation", "training", "long_windows", "ecg_trained"]
EcgModel = Literal["checkpoint", "windowed", "cfc"]


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """The CfC against the LTC it approximates.

    `--quick`: tiny sizes: one seed, 2 epochs, short windows.
    """

    typical_taus: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0)
    """Typical time constants, in observation intervals."""
    ecg_samples: int = 3_600
    """ECG window of the approximation study (samples; 10 s)."""
    horizons: tuple[int, ...] = (1, 10, 100, 1_000, 3_600)
    """Observations over which the approximation error is reported."""
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int | None = None
    """The main job's epochs (default: its own, derived from the data: about
    4,000 optimiser steps; early stopping only where it holds out a validation
    share)."""
    long_windows: tuple[int, ...] = (10_000, 100_000)
    """ECG windows (samples) of the one-step comparison."""
    timed_steps: int = 3
    trained_window: int = 10_000
    """ECG window (samples) of the trained comparison."""
    trained_windows: tuple[int, int] = (24, 8)
    """Training and test windows of the trained comparison."""
    trained_epochs: int = 30
    ecg_models: tuple[EcgModel, ...] = ("checkpoint", "windowed", "cfc")
    """The models of the ECG parts (3 and 4): the LTC under `checkpoint` or
    `windowed`, and the CfC."""
    cfc_time_scale: float | None = None
    """The CfC's time unit on the ECG, in seconds (default: the sampling
    interval, 1/360 s, the median interval the main job derives; 1: seconds,
    the CfC of the runs before it derived one)."""
    parts: tuple[Part, ...] = (
        "approximation",
        "training",
        "long_windows",
        "ecg_trained",
    )
    """Which of the four parts to run (all by default)."""


QUICK = dict(
    typical_taus=(1.0, 10.0),
    ecg_samples=200,
    horizons=(1, 10, 100),
    seeds=(0,),
    epochs=2,
    long_windows=(1_000,),
    timed_steps=1,
    trained_window=400,
    trained_windows=(8, 4),
    trained_epochs=2,
)


# --- 1. approximation ---------------------------------------------------------


def approximation_error(
    ts: np.ndarray, xs: np.ndarray, typical_tau: float, horizons, seed: int = 0
) -> dict:
    """The closed form's relative RMS error against the ODE over the first k
    observations, for each k of `horizons`, on a shared time grid `ts`
    `(times,)` and inputs `xs` `(batch, times, channels)`."""
    with jax.enable_x64(True):
        spacing = float(np.median(np.diff(ts)))
        tau = typical_tau * spacing
        model = ltc_jax.LTC(
            xs.shape[-1], 16, 1, tau_init=(0.1 * tau, 10 * tau), key=jr.PRNGKey(seed)
        )
        path = ltc_jax.InputPath(jnp.asarray(ts), jnp.asarray(xs))
        integrator = ltc_jax.make_integrator(
            "tsit5", rtol=1e-9, atol=1e-11, max_steps=200_000
        )
        solution = model.solve(path, integrator=integrator, save="observations")
        exact = np.asarray(solution.ys)
        cell = model.cell
        step = jax.jit(ltc_jax.ltc_closed_form_step)
        h = jnp.zeros((xs.shape[0], 16))
        states = [np.asarray(h)]
        for k in range(1, len(ts)):
            x = jnp.asarray(0.5 * (xs[:, k - 1] + xs[:, k]))
            dt = jnp.full(xs.shape[:1], ts[k] - ts[k - 1])  # one per sequence
            h = step(cell, h, x, dt)
            states.append(np.asarray(h))
        closed = np.stack(states, axis=1)
    scale = np.sqrt(np.mean(exact**2))
    errors = {}
    for k in horizons:
        if k < len(ts):
            diff = closed[:, 1 : k + 1] - exact[:, 1 : k + 1]
            errors[str(k)] = float(np.sqrt(np.mean(diff**2)) / scale)
    return dict(typical_tau=typical_tau, errors=errors)


def approximation(config: Config) -> list[dict]:
    ecg = ltc_jax.datasets.mitbih_208_windows(config.ecg_samples, horizon=1, count=4)
    vowels, _ = ltc_jax.datasets.load_japanese_vowels()
    vowels = ltc_jax.datasets.standardize_with(
        vowels, *ltc_jax.datasets.channel_statistics(vowels)
    )
    full = vowels.take(np.flatnonzero(vowels.lengths >= 20)[:8])
    sources = {
        "ECG": (np.asarray(ecg.ts[0]), np.asarray(ecg.xs)),
        "JapaneseVowels": (np.asarray(full.ts[0, :20]), np.asarray(full.xs[:, :20])),
    }
    rows = []
    for name, (ts, xs) in sources.items():
        for typical in config.typical_taus:
            row = approximation_error(ts, xs, typical, config.horizons)
            rows.append(dict(row, source=name, observations=len(ts)))
            print(f"{name} tau {typical:g} intervals: {row['errors']}")
    return rows


# --- 2. training on JapaneseVowels ---------------------------------------------


def training(config: Config, run: _run.Run) -> list[dict]:
    """Part 2: the main job on JapaneseVowels per seed and model, each run in a
    fresh process (`_problems.main_job`), the models alternated."""
    variants = [("ltc", "checkpoint"), ("ltc", "windowed"), ("cfc", "checkpoint")]
    runs = []
    for seed in config.seeds:
        for model, adjoint in variants:
            label = "CfC" if model == "cfc" else f"LTC {adjoint}"
            options = dict(model=model, adjoint=adjoint, seed=seed, memory_table=True)
            options["out"] = run.path("runs", f"{model}-{adjoint}-{seed}")
            if config.epochs is not None:
                options["epochs"] = config.epochs
            record = ltc_jax.measure.call_in_subprocess(
                "experiments._problems:main_job", dict(options=options)
            )
            memory = (record["memory"] or {}).get(
                "backprop" if model == "cfc" else adjoint
            )
            record.update(
                label=label, seed=seed, temp_bytes=(memory or {}).get("temp_bytes")
            )
            runs.append(record)
            print(
                f"{label} seed {seed}: {record['test_accuracy']:.4f}, "
                f"{record['epoch_seconds']:.3f} s/epoch"
            )
    rows = []
    for label in dict.fromkeys(r["label"] for r in runs):
        mine = [r for r in runs if r["label"] == label]
        mean, std, _ = _report.mean_std([r["test_accuracy"] for r in mine])
        rows.append(
            dict(
                label=label,
                accuracy_mean=mean,
                accuracy_std=std,
                epoch_seconds=statistics.median(r["epoch_seconds"] for r in mine),
                temp_bytes=mine[0]["temp_bytes"],
                runs=mine,
            )
        )
    return rows


# --- 3. and 4. long ECG windows ------------------------------------------------


def ecg_model(kind: str, window: int, seed: int, time_scale: float | None = None):
    """The model (32 units) and integrator of a kind on `window`-sample ECG
    windows: the LTC with RK4 at one step per sample under `kind` (`checkpoint`
    or `windowed`, its windows derived for the window as `ltc_jax.fit` derives
    them), or the CfC (`cfc`) with `time_scale` seconds as its time unit
    (default: the sampling interval)."""
    with jax.enable_x64(False):
        if kind == "cfc":
            model = ltc_jax.CfC(
                1,
                32,
                1,
                time_scale=1 / SAMPLE_RATE_HZ if time_scale is None else time_scale,
                key=jr.PRNGKey(seed),
            )
        else:
            model = ltc_jax.LTC(1, 32, 1, key=jr.PRNGKey(seed))
        mode = "checkpoint" if kind == "cfc" else kind
        integrator = _problems.ecg_integrator("rk4", mode, window - 1)
        integrator = ltc_jax.training.resolve_windows(
            integrator, model.cell, (window - 1) / SAMPLE_RATE_HZ, dtype=jnp.float32
        )
    return model, integrator


def long_window_step(
    kind: str, samples: int, timed_steps: int, time_scale: float | None = None
) -> dict:
    """Part 3: one forecasting training step on `samples`-sample ECG windows
    (batch 4; in a fresh process): median seconds and compiled memory."""
    with jax.enable_x64(False):
        _, batch = _problems.ecg_problem(
            samples, batch_size=4, hidden_size=32, horizon=36, seed=0
        )
        model, integrator = ecg_model(kind, samples, seed=0, time_scale=time_scale)
        _, step, opt_state = _problems.train_step(model, integrator)
        memory = ltc_jax.measure.compiled_memory(step, model, opt_state, batch)
        seconds = ltc_jax.measure.time_calls(
            eqx.filter_jit(step), model, opt_state, batch, warmup=1, repeats=timed_steps
        )
    return dict(
        kind=kind,
        samples=samples,
        step_seconds=statistics.median(seconds),
        temp_bytes=None if memory is None else memory.temp_bytes,
    )


def ecg_split(window: int, train_count: int, test_count: int, horizon: int = 36):
    """Training windows spread over the first 70% of the MIT-BIH 208 recording,
    test windows over the rest (none overlaps a training window or its target);
    times in seconds from each window's start."""
    ts, millivolts = ltc_jax.datasets.load_mitbih_208()
    boundary = int(0.7 * ts.shape[0])
    last = boundary - window - horizon
    if last < 0 or ts.shape[0] - boundary - window - horizon < 0:
        raise ValueError(f"{window}-sample windows do not fit on both sides.")
    grid = np.arange(window, dtype=np.float64) / SAMPLE_RATE_HZ
    parts = []
    for first, stop, count in (
        (0, last, train_count),
        (boundary, ts.shape[0] - window - horizon, test_count),
    ):
        starts = np.linspace(first, stop, count).astype(np.int64)
        data = ltc_jax.datasets.forecast_windows(
            ts, millivolts, window=window, horizon=horizon, starts=starts
        )
        parts.append(dataclasses.replace(data, ts=np.tile(grid, (count, 1))))
    return parts


def ecg_training(
    kind: str,
    window: int,
    counts: tuple,
    epochs: int,
    seed: int,
    time_scale: float | None = None,
) -> dict:
    """Part 4: train one model on the ECG split (in a fresh process): test mean
    squared error, the baselines', and seconds per epoch; `time_scale` is the
    CfC's (`ecg_model`)."""
    train, test = ecg_split(window, *counts)
    batch_size = 8
    with jax.enable_x64(False):
        model, integrator = ecg_model(kind, window, seed, time_scale)
        model, history = ltc_jax.fit(
            model,
            train,
            integrator=integrator,
            optimizer=ltc_jax.training.make_optimizer(
                1e-2, epochs * -(-len(train) // batch_size)
            ),
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            progress=ltc_jax.training.NoFitProgress(),
        )
        result = ltc_jax.evaluate(model, test, integrator=integrator, batch_size=8)
    targets = test.labels[:, 0]
    return dict(
        kind=kind,
        window=window,
        seed=seed,
        test_mse=result["loss"],
        mean_mse=float(np.mean((targets - train.labels[:, 0].mean()) ** 2)),
        persistence_mse=float(np.mean((targets - test.xs[:, -1, 0]) ** 2)),
        first_loss=history[0]["loss"],
        last_loss=history[-1]["loss"],
        epoch_seconds=statistics.median(h["seconds"] for h in history[1:] or history),
    )


def in_processes(function: str, calls: list[dict]) -> list[dict]:
    """`function(**kwargs)` of this module for each `kwargs` of `calls`, each in a
    fresh process."""
    rows = []
    for kwargs in calls:
        rows.append(
            ltc_jax.measure.call_in_subprocess(
                f"experiments.cfc_versus_ltc:{function}", kwargs
            )
        )
        print(function, {k: v for k, v in rows[-1].items() if not isinstance(v, dict)})
    return rows


PARTS = {
    "approximation": lambda config, run: approximation(config),
    "training": training,
    "long_windows": lambda config, run: in_processes(
        "long_window_step",
        [
            dict(
                kind=kind,
                samples=samples,
                timed_steps=config.timed_steps,
                time_scale=config.cfc_time_scale,
            )
            for samples in config.long_windows
            for kind in config.ecg_models
        ],
    ),
    "ecg_trained": lambda config, run: in_processes(
        "ecg_training",
        [
            dict(
                kind=kind,
                window=config.trained_window,
                counts=config.trained_windows,
                epochs=config.trained_epochs,
                seed=config.seeds[0],
                time_scale=config.cfc_time_scale,
            )
            for kind in config.ecg_models
        ],
    ),
}
"""The four parts, each run as `part(config, run)`."""


def main(config: Config) -> dict:
    if not config.parts or len(set(config.parts)) != len(config.parts):
        raise ValueError(f"--parts names each part once; got {config.parts}.")
    config, run = _run.start_run(config, "cfc_versus_ltc", QUICK)
    return run.finish({name: PARTS[name](config, run) for name in config.parts})


if __name__ == "__main__":
    main(tyro.cli(Config))
