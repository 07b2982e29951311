"""The seminorm for backsolve's reverse solve, measured on the MIT-BIH ECG.

`BacksolveAdjoint` integrates the state, its adjoint and the parameter cotangents
backwards together. The cotangents never feed back into the solve, so their error
need not limit the step size: diffrax's `adjoint_rms_seminorm` leaves them out of
the error estimate (Kidger, Chen and Lyons 2021, "Hey, that's not an ODE", who
report a median of about 40% fewer backward evaluations on their problems). This
experiment measures backward evaluations, backward time and the gradient's error
with and without it, on ECG forecasting windows of growing length, with the
input interpolated linearly (every solve, forward and reverse, stops at each
sample: a kink of the input) and by cubic Hermite (steps chosen by the error
control alone).

    python -m experiments.seminorm           # default size, a few minutes, 2 CPUs
    python -m experiments.seminorm --quick   # smoke test, under a minute

Writes `results/seminorm/<run>/`: `config.json`, `metrics.json`, `seminorm.png`,
and prints the table.
"""

import dataclasses
import os

import numpy as np
import tyro

import ltc_jax
from experiments import _problems, _report, _run


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """Backsolve's reverse solve with and without the seminorm.

    `--quick`: smoke-test sizes (under a minute).
    """

    windows: tuple[int, ...] = (90, 360, 1440)
    """Window lengths in samples (360 Hz): 0.25 s, 1 s, 4 s."""
    interpolations: tuple[str, ...] = ("linear", "cubic")
    horizon: int = 36
    """Forecast the signal this many samples (0.1 s) after each window."""
    tolerances: tuple[tuple[float, float], ...] = ((1e-3, 1e-4), (1e-5, 1e-6))
    solver: str = "tsit5"
    hidden_size: int = 32
    batch_size: int = 16
    seed: int = 0
    max_steps: int = 16384
    reference_rtol: float = 1e-10
    timed_steps: int = 3


QUICK = dict(
    windows=(45,),
    interpolations=("cubic",),
    tolerances=((1e-3, 1e-4),),
    hidden_size=4,
    batch_size=2,
    reference_rtol=1e-8,
    timed_steps=1,
)


def problem(
    config: Config, window: int, dtype: str, interpolation: str = "linear"
) -> tuple[ltc_jax.LTC, ltc_jax.Batch]:
    """ECG windows of `window` samples (time in seconds from each window's start),
    labelled with the value `horizon` samples later; the float32 LTC of `seed`,
    cast to `dtype`."""
    return _problems.ecg_problem(
        window,
        batch_size=config.batch_size,
        hidden_size=config.hidden_size,
        horizon=config.horizon,
        seed=config.seed,
        dtype=dtype,
        interpolation=interpolation,
    )


def reference_gradient(
    config: dict, window: int, interpolation: str, out_file: str
) -> dict:
    """The float64 gradient of exact backpropagation at `reference_rtol`."""
    config = Config(**config)
    model, batch = problem(config, window, "float64", interpolation)
    integrator = ltc_jax.make_integrator(
        "tsit5",
        rtol=config.reference_rtol,
        atol=config.reference_rtol,
        max_steps=8 * config.max_steps,  # tight tolerances: many more steps
    )
    return _problems.save_reference_gradient(model, batch, integrator, out_file)


def _measure_window(
    config: Config, window: int, interpolation: str, run_dir: str
) -> list[dict]:
    """Backsolve's training step on one window length, at every tolerance, with
    and without the seminorm."""
    path = os.path.join(run_dir, f"reference_{interpolation}_{window}.npy")
    ltc_jax.call_in_subprocess(
        "experiments.seminorm:reference_gradient",
        dict(
            config=dataclasses.asdict(config),
            window=window,
            interpolation=interpolation,
            out_file=path,
        ),
        env={"JAX_ENABLE_X64": "1"},
    )
    reference = np.load(path)
    model, batch = problem(config, window, "float32", interpolation)
    rows = []
    for rtol, atol in config.tolerances:
        for seminorm in (False, True):
            integrator = ltc_jax.make_integrator(
                config.solver,
                "backsolve",
                rtol=rtol,
                atol=atol,
                max_steps=config.max_steps,
                seminorm=seminorm,
            )
            figures = _problems.measure_or_failure(
                model, batch, integrator, reference, timed_steps=config.timed_steps
            )
            rows.append(
                dict(
                    interpolation=interpolation,
                    window_samples=window,
                    window_seconds=window / 360,
                    rtol=rtol,
                    atol=atol,
                    seminorm=seminorm,
                    **figures,
                )
            )
            print(
                f"{interpolation} window {window}, rtol {rtol:g}, seminorm "
                f"{seminorm}: "
                + (
                    figures["error"]
                    if figures["error"]
                    else f"{figures['backward_evaluations']} backward evaluations"
                )
            )
    return rows


def main(config: Config) -> dict:
    """Measure every window, tolerance and seminorm setting; return the metrics."""
    config, run_dir = _run.start_run(config, "seminorm", QUICK)
    rows = []
    for interpolation in config.interpolations:
        for window in config.windows:
            rows += _measure_window(config, window, interpolation, run_dir)
    savings = [  # one per pair of rows; None where a solve failed
        1 - with_["backward_evaluations"] / without["backward_evaluations"]
        if without["error"] is None and with_["error"] is None
        else None
        for without, with_ in zip(rows[::2], rows[1::2], strict=True)
    ]
    finished = [saving for saving in savings if saving is not None]
    metrics = dict(
        rows=rows,
        backward_evaluation_savings=savings,
        median_saving=float(np.median(finished)) if finished else None,
        environment=ltc_jax.environment(),
        run_dir=run_dir,
    )
    _run.write_json(os.path.join(run_dir, "metrics.json"), metrics)
    plot(rows, os.path.join(run_dir, "seminorm.png"))
    print(format_report(metrics))
    return metrics


def format_report(metrics: dict) -> str:
    def error(r):
        if r["error"] is not None:
            return f"failed: {r['error']}"
        if r["gradient_is_finite"] is False:
            return "non-finite"
        return f"{r['gradient_relative_error']:.1e}"

    def figure(name, spec):
        return lambda r: "-" if r["error"] is not None else format(r[name], spec)

    table = _report.format_table(
        metrics["rows"],
        [
            ("input", lambda r: r["interpolation"]),
            ("window", lambda r: f"{r['window_seconds']:g} s"),
            ("rtol / atol", lambda r: f"{r['rtol']:g} / {r['atol']:g}"),
            ("seminorm", lambda r: "yes" if r["seminorm"] else "no"),
            ("evaluations fwd", figure("forward_evaluations", ",")),
            ("bwd", figure("backward_evaluations", ",")),
            ("forward s", figure("forward_seconds", ".3f")),
            ("backward s", figure("backward_seconds", ".3f")),
            ("gradient error", error),
        ],
    )
    saved = (
        "no pair finished"
        if metrics["median_saving"] is None
        else f"median {100 * metrics['median_saving']:.0f}% over the pairs that "
        "finished (each pair: "
        + ", ".join(
            "failed" if s is None else f"{100 * s:.0f}%"
            for s in metrics["backward_evaluation_savings"]
        )
        + ")"
    )
    return (
        f"\n{table}\n\nbackward evaluations saved by the seminorm: {saved}"
        f"\n\nrun folder {metrics['run_dir']}"
    )


def plot(rows: list[dict], path: str) -> None:
    """Backward evaluations with and without the seminorm, per setting."""
    plt = _report.pyplot()

    labels = [
        f"{r['interpolation']}\n{r['window_seconds']:g} s\nrtol {r['rtol']:g}"
        for r in rows[::2]
    ]
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(labels)), 3.8))

    def evaluations(half):  # a failed solve has none to show
        return [r.get("backward_evaluations", np.nan) for r in half]

    ax.bar(x - 0.2, evaluations(rows[::2]), 0.4, label="error norm over every channel")
    ax.bar(
        x + 0.2, evaluations(rows[1::2]), 0.4, label="seminorm (cotangents left out)"
    )
    ax.set(xticks=x, xticklabels=labels, ylabel="backward evaluations")
    ax.legend(fontsize=8)
    _report.save_figure(fig, path)


if __name__ == "__main__":
    main(tyro.cli(Config))
