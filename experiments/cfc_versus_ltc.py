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
   under `checkpoint` and `windowed`, and the CfC: the step's median seconds and
   compiled temp memory.
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

Writes `results/cfc_versus_ltc/<run>/`: `metrics.json`, `report.txt`, and
with the approximation part `cfc_versus_ltc.png` (its error against the
horizon).
"""

import dataclasses
import os
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


Part = Literal["approximation", "training", "long_windows", "ecg_trained"]


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
            h = step(cell, h, x, float(ts[k] - ts[k - 1]))
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


def run_main_job(model: str, adjoint: str, seed: int, epochs, out: str) -> dict:
    """One main-job run on JapaneseVowels (in a fresh process)."""
    from ltc_jax import app

    options = dict(model=model, adjoint=adjoint, seed=seed, out=out, progress=False)
    if epochs is not None:
        options["epochs"] = epochs
    metrics = app.train_and_evaluate(app.TrainConfig(**options))
    memory = metrics["memory_bytes_by_mode"]
    mode = "backprop" if model == "cfc" else adjoint
    return dict(
        test_accuracy=metrics["test_accuracy"],
        solver=None if model == "cfc" else metrics["solver"],
        epoch_seconds=statistics.median(h["seconds"] for h in metrics["history"]),
        epochs_run=len(metrics["history"]),
        train_seconds=metrics["train_seconds"],
        temp_bytes=memory[mode]["temp_bytes"] if memory and memory[mode] else None,
        memory=memory,
    )


def training(config: Config, run_dir: str) -> list[dict]:
    variants = [("ltc", "checkpoint"), ("ltc", "windowed"), ("cfc", "checkpoint")]
    runs = []
    for seed in config.seeds:
        for model, adjoint in variants:
            label = "CfC" if model == "cfc" else f"LTC {adjoint}"
            record = ltc_jax.call_in_subprocess(
                "experiments.cfc_versus_ltc:run_main_job",
                dict(
                    model=model,
                    adjoint=adjoint,
                    seed=seed,
                    epochs=config.epochs,
                    out=os.path.join(run_dir, "runs", f"{model}-{adjoint}-{seed}"),
                ),
            )
            runs.append(dict(record, label=label, seed=seed))
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
    # The windowed LTC's memory is in the checkpoint run's table too.
    return rows


# --- 3. a long ECG window -------------------------------------------------------


def long_window_step(kind: str, samples: int, timed_steps: int) -> dict:
    """One forecasting training step on `samples`-sample ECG windows (in a
    fresh process): median seconds and compiled memory."""
    with jax.enable_x64(False):
        model, batch = _problems.ecg_problem(
            samples, batch_size=4, hidden_size=32, horizon=36, seed=0
        )
        if kind == "cfc":
            model = ltc_jax.CfC(1, 32, 1, key=jr.PRNGKey(0))
            mode = "checkpoint"
        else:
            mode = kind
        integrator = ltc_jax.make_integrator(
            "rk4",
            mode,
            dt0=(1 + 1e-6) / ltc_jax.datasets.MITBIH_208_SAMPLE_RATE_HZ,
            max_steps=samples - 1,
        )
        rate = ltc_jax.datasets.MITBIH_208_SAMPLE_RATE_HZ
        integrator = ltc_jax.resolve_windows(
            integrator, model.cell, (samples - 1) / rate, dtype=jnp.float32
        )
        optimizer = ltc_jax.make_optimizer(1e-3, 1)
        opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
        step = ltc_jax.make_train_step(optimizer, integrator)
        memory = ltc_jax.compiled_memory(step, model, opt_state, batch)
        seconds = ltc_jax.time_calls(
            eqx.filter_jit(step), model, opt_state, batch, warmup=1, repeats=timed_steps
        )
    return dict(
        kind=kind,
        samples=samples,
        step_seconds=statistics.median(seconds),
        temp_bytes=None if memory is None else memory.temp_bytes,
    )


def long_windows(config: Config) -> list[dict]:
    rows = []
    for samples in config.long_windows:
        for kind in ("checkpoint", "windowed", "cfc"):
            row = ltc_jax.call_in_subprocess(
                "experiments.cfc_versus_ltc:long_window_step",
                dict(kind=kind, samples=samples, timed_steps=config.timed_steps),
            )
            rows.append(row)
            print(
                f"{kind} {samples}: {row['step_seconds']:.3f} s, "
                f"{_report.mib(row['temp_bytes'])} MiB"
            )
    return rows


# --- 4. trained on a long ECG window -------------------------------------------


def ecg_split(window: int, train_count: int, test_count: int, horizon: int = 36):
    """Training windows spread over the first 70% of the MIT-BIH 208 recording,
    test windows over the rest (none overlaps a training window or its target);
    times in seconds from each window's start."""
    ts, millivolts = ltc_jax.datasets.load_mitbih_208()
    boundary = int(0.7 * ts.shape[0])
    last = boundary - window - horizon
    if last < 0 or ts.shape[0] - boundary - window - horizon < 0:
        raise ValueError(f"{window}-sample windows do not fit on both sides.")
    grid = (
        np.arange(window, dtype=np.float64) / ltc_jax.datasets.MITBIH_208_SAMPLE_RATE_HZ
    )
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


def ecg_training(kind: str, window: int, counts: tuple, epochs: int, seed: int) -> dict:
    """Train one model on the ECG split (in a fresh process): test mean squared
    error, the baselines', and seconds per epoch."""
    train, test = ecg_split(window, *counts)
    with jax.enable_x64(False):
        if kind == "cfc":
            model = ltc_jax.CfC(1, 32, 1, key=jr.PRNGKey(seed))
        else:
            model = ltc_jax.LTC(1, 32, 1, key=jr.PRNGKey(seed))
        rate = ltc_jax.datasets.MITBIH_208_SAMPLE_RATE_HZ
        integrator = ltc_jax.make_integrator(
            "rk4",
            "checkpoint" if kind == "cfc" else kind,
            dt0=(1 + 1e-6) / rate,
            max_steps=window - 1,
        )
        integrator = ltc_jax.resolve_windows(
            integrator, model.cell, (window - 1) / rate, dtype=jnp.float32
        )
        batch_size = 8
        steps = epochs * -(-len(train) // batch_size)
        model, history = ltc_jax.fit(
            model,
            train,
            integrator=integrator,
            optimizer=ltc_jax.make_optimizer(1e-2, steps),
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            progress=ltc_jax.NoFitProgress(),
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


def ecg_trained(config: Config) -> list[dict]:
    """Part 4: each model trained on the ECG split, in its own process."""
    rows = []
    for kind in ("checkpoint", "windowed", "cfc"):
        row = ltc_jax.call_in_subprocess(
            "experiments.cfc_versus_ltc:ecg_training",
            dict(
                kind=kind,
                window=config.trained_window,
                counts=config.trained_windows,
                epochs=config.trained_epochs,
                seed=config.seeds[0],
            ),
        )
        rows.append(row)
        print(f"{kind} trained: test MSE {row['test_mse']:.4g}")
    return rows


PARTS = {
    "approximation": lambda config, run_dir: approximation(config),
    "training": training,
    "long_windows": lambda config, run_dir: long_windows(config),
    "ecg_trained": lambda config, run_dir: ecg_trained(config),
}
"""The four parts, each run as `part(config, run_dir)`."""


def _approximation_report(config: Config, rows: list[dict]) -> str:
    table = _report.format_table(
        rows,
        [
            ("input", lambda r: r["source"]),
            ("tau (intervals)", lambda r: f"{r['typical_tau']:g}"),
            *[
                (
                    f"k={k}",
                    lambda r, k=k: (
                        _report.error(r["errors"][str(k)])
                        if str(k) in r["errors"]
                        else "-"
                    ),
                )
                for k in config.horizons
            ],
        ],
    )
    return (
        "Relative RMS error of the LTC's direct closed form against its ODE "
        f"solution over the first k observations:\n{table}"
    )


def _training_report(config: Config, rows: list[dict], env: dict) -> str:
    table = _report.format_table(
        rows,
        [
            ("model", lambda r: r["label"]),
            (
                "test accuracy",
                lambda r: f"{r['accuracy_mean']:.4f} +- {r['accuracy_std']:.4f}",
            ),
            ("epoch s (median)", lambda r: f"{r['epoch_seconds']:.3f}"),
            ("step temp MiB", lambda r: _report.mib(r["temp_bytes"])),
        ],
    )
    cfc = next(r for r in rows if r["label"] == "CfC")
    ltc = next(r for r in rows if r["label"] == "LTC checkpoint")
    ratio = ltc["epoch_seconds"] / cfc["epoch_seconds"]
    return (
        f"JapaneseVowels, the main job's defaults, {len(config.seeds)} seed(s) "
        f"({env['backend']}, {env['cpu_count']} CPUs; the LTC's epoch took "
        f"{ratio:.1f}x the CfC's):\n{table}"
    )


def _model_name(row: dict) -> str:
    return {"cfc": "CfC"}.get(row["kind"], "LTC " + row["kind"])


def _long_windows_report(rows: list[dict]) -> str:
    table = _report.format_table(
        rows,
        [
            ("model", _model_name),
            ("samples", lambda r: f"{r['samples']:,}"),
            ("step s", lambda r: f"{r['step_seconds']:.3f}"),
            ("temp MiB", lambda r: _report.mib(r["temp_bytes"])),
        ],
    )
    return f"One ECG forecasting training step (batch 4, 32 units):\n{table}"


def _ecg_trained_report(config: Config, rows: list[dict]) -> str:
    table = _report.format_table(
        rows,
        [
            ("model", _model_name),
            ("test MSE", lambda r: f"{r['test_mse']:.4f}"),
            ("train loss first", lambda r: f"{r['first_loss']:.4f}"),
            ("last", lambda r: f"{r['last_loss']:.4f}"),
            ("epoch s", lambda r: f"{r['epoch_seconds']:.2f}"),
            ("mean MSE", lambda r: f"{r['mean_mse']:.4f}"),
            ("persistence MSE", lambda r: f"{r['persistence_mse']:.4f}"),
        ],
    )
    train, test = config.trained_windows
    return (
        f"Trained on {config.trained_window:,}-sample ECG windows ({train} "
        f"training, {test} test; {config.trained_epochs} epochs; seed "
        f"{config.seeds[0]}; forecast 0.1 s ahead, mV^2):\n{table}"
    )


def main(config: Config) -> dict:
    if not config.parts or len(set(config.parts)) != len(config.parts):
        raise ValueError(f"--parts names each part once; got {config.parts}.")
    config, run_dir = _run.start_run(config, "cfc_versus_ltc", QUICK)
    metrics = {name: PARTS[name](config, run_dir) for name in config.parts}

    def report(metrics):
        sections = {
            "approximation": lambda: _approximation_report(
                config, metrics["approximation"]
            ),
            "training": lambda: _training_report(
                config, metrics["training"], metrics["environment"]
            ),
            "long_windows": lambda: _long_windows_report(metrics["long_windows"]),
            "ecg_trained": lambda: _ecg_trained_report(config, metrics["ecg_trained"]),
        }
        return "\n\n".join(sections[name]() for name in config.parts)

    metrics = _run.finish(run_dir, metrics, report)
    if "approximation" in metrics:
        plot(metrics, os.path.join(run_dir, "cfc_versus_ltc.png"))
    return metrics


def plot(metrics: dict, path: str) -> None:
    plt = _report.pyplot()
    figure, axes = plt.subplots(figsize=(6, 4))
    for row in metrics["approximation"]:
        ks = sorted(int(k) for k in row["errors"])
        values = [row["errors"][str(k)] for k in ks]
        axes.loglog(
            ks, values, marker="o", label=f"{row['source']}, tau {row['typical_tau']:g}"
        )
    axes.set_xlabel("observations k")
    axes.set_ylabel("relative RMS error over the first k")
    axes.set_title("The LTC's direct closed form against its ODE")
    axes.legend(fontsize=7)
    _report.save_figure(figure, path, dpi=120)


if __name__ == "__main__":
    main(tyro.cli(Config))
