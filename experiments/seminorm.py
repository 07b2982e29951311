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

Writes `results/seminorm/<run>/`: `config.json`, `metrics.json` and `report.txt`
with the table (`experiments._report`), and prints the table.
"""

import dataclasses
import itertools

import numpy as np
import tyro

import ltc_jax
from experiments import _problems, _run


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


def problem(config: dict, window: int, dtype: str, interpolation: str):
    """ECG windows of `window` samples (time in seconds from each window's start),
    labelled with the value `horizon` samples later; the float32 LTC of `seed`,
    cast to `dtype`."""
    keys = ("batch_size", "hidden_size", "horizon", "seed")
    return _problems.ecg_problem(
        window, **{k: config[k] for k in keys}, dtype=dtype, interpolation=interpolation
    )


def reference_problem(config: dict, window: int, interpolation: str):
    """The float64 problem of the reference gradient: exact backpropagation at
    `reference_rtol` (rtol = atol)."""
    model, batch = problem(config, window, "float64", interpolation)
    integrator = ltc_jax.make_integrator(
        "tsit5",
        rtol=config["reference_rtol"],
        atol=config["reference_rtol"],
        max_steps=8 * config["max_steps"],  # tight tolerances: many more steps
    )
    return model, batch, integrator


def main(config: Config) -> dict:
    """Backsolve's training step on every window length, interpolation and
    tolerance, with and without the seminorm; return (and write) the metrics."""
    config, run = _run.start_run(config, "seminorm", QUICK)
    settings = dataclasses.asdict(config)
    rows = []
    for interpolation in config.interpolations:
        for window in config.windows:
            reference = _problems.float64_gradient(
                "experiments.seminorm:reference_problem",
                config=settings,
                window=window,
                interpolation=interpolation,
            )
            model, batch = problem(settings, window, "float32", interpolation)
            for (rtol, atol), seminorm in itertools.product(
                config.tolerances, (False, True)
            ):
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
                setting = dict(interpolation=interpolation, window_samples=window)
                setting.update(window_seconds=window / 360, rtol=rtol, atol=atol)
                rows.append(dict(setting, seminorm=seminorm, **figures))
                print(setting, seminorm, figures.get("backward_evaluations"))
    savings = [  # one per pair of rows; None where a solve failed
        1 - with_["backward_evaluations"] / without["backward_evaluations"]
        if without["error"] is None and with_["error"] is None
        else None
        for without, with_ in zip(rows[::2], rows[1::2], strict=True)
    ]
    finished = [saving for saving in savings if saving is not None]
    return run.finish(
        dict(
            rows=rows,
            backward_evaluation_savings=savings,
            median_saving=float(np.median(finished)) if finished else None,
        )
    )


if __name__ == "__main__":
    main(tyro.cli(Config))
