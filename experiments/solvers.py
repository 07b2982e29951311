"""The solvers compared on real data: the same LTC trained on JapaneseVowels with the
same budget and seeds under every solver and two gradient modes; then a stiffness
sweep (small time constants) measured at initialisation.

Per solver and gradient mode: test accuracy (mean ± std over seeds), vector-field
evaluations of one training step (forward and backward, counted as they run),
median seconds per training step, the gradient's relative error against a tight
float64 reference, and failures (solves that reached `max_steps`, non-finite
losses or gradients).

    python -m experiments.solvers           # default size, about 16 min on 2 CPU cores
    python -m experiments.solvers --quick   # smoke test, under a minute

Writes `results/solvers/<run>/`: `config.json`, `metrics.json` (every row and the
environment), `report.txt` with the tables and `work_precision.png`
(`experiments._report`), and prints the tables.
"""

import dataclasses
import math
import os

import tyro

import ltc_jax
from experiments import _problems, _report, _run


FIXED = ("euler", "rk4")
ADAPTIVE = ("heun", "bosh3", "tsit5", "dopri5", "dopri8", "kvaerno5")


@dataclasses.dataclass(frozen=True)
class Config(_problems.VowelsTraining):
    """Compare the solvers on JapaneseVowels, and on a stiff initialisation.

    `--quick`: smoke-test sizes (under a minute).
    """

    solvers: tuple[str, ...] = FIXED + ADAPTIVE + ("fused",)
    adjoints: tuple[str, ...] = ("checkpoint", "backsolve")
    fixed_dt0: float = 0.1
    """Step of euler and rk4, in frames: stable for tau >= 0.1 at initialisation
    (explicit Euler needs dt0 * (1/tau + 1) < 2)."""
    fused_dt0: float = 1.0
    """Step of the fused solver, in frames (one input step, as the original)."""
    ode_unfolds: int = 6
    rtol: float = 1e-3
    atol: float = 1e-4
    max_steps: int = 4096
    """Most steps of an adaptive solve."""
    reference_rtol: float = 1e-10
    """Tolerances (rtol = atol) of the float64 reference gradient (tsit5)."""
    skipped: tuple[str, ...] = ("kvaerno5/backsolve",)
    """solver/adjoint pairs neither trained nor measured: Kvaerno5's reverse solve
    factorises the Jacobian of the state, its adjoint and the parameter
    cotangents together; one measurement ran over 9 minutes here."""
    stiff_tau: tuple[float, ...] = (0.1, 0.01)
    """Stiffness sweep: initial time constants drawn around each value (frames)."""
    stiff_max_steps: int = 16384


QUICK = dict(
    solvers=("euler", "fused"),
    seeds=(0,),
    epochs=1,
    hidden_size=4,
    batch_size=8,
    train_size=8,
    max_steps=256,
    stiff_tau=(0.5,),
    stiff_max_steps=512,
    reference_rtol=1e-7,
)


def integrator_for(
    solver: str, adjoint: str, config: Config, datasets, max_steps: int
) -> ltc_jax.Integrator:
    """The integrator of one row: fixed `fixed_dt0` steps (euler, rk4), the fused
    step of `fused_dt0` (with Heun for backsolve's reverse solve), both with the
    `max_steps` the longest sequence of `datasets` needs; or adaptive steps at
    `rtol`/`atol` with `max_steps`."""
    if solver in FIXED or solver == "fused":
        dt0 = config.fixed_dt0 if solver in FIXED else config.fused_dt0
        return ltc_jax.make_integrator(
            solver,
            adjoint,
            dt0=dt0,
            max_steps=ltc_jax.training.fixed_max_steps(datasets, dt0),
            ode_unfolds=config.ode_unfolds,
            backward_solver="heun"
            if solver == "fused" and adjoint == "backsolve"
            else None,
        )
    # (Kvaerno5 solves each sequence alone by default: its Newton iterations
    # factorise the Jacobian of the state.)
    return ltc_jax.make_integrator(
        solver, adjoint, rtol=config.rtol, atol=config.atol, max_steps=max_steps
    )


def main(config: Config) -> dict:
    """Run the comparison; return (and write) the metrics."""
    config, run = _run.start_run(config, "solvers", QUICK)
    data = _problems.japanese_vowels(config.train_size)
    batch = _problems.vowels_batch(data[0], config.batch_size)
    model = _problems.vowels_model(config.hidden_size, config.seeds[0])
    rows, stiff = [], []
    partial = run.path("metrics.partial.json")  # a killed run keeps its rows

    def reference(tau):
        return _problems.float64_gradient(
            "experiments._problems:vowels_reference",
            config=dataclasses.asdict(config),
            tau=tau,
            max_steps=config.stiff_max_steps * 4,
        )

    gradient = reference(None)
    for solver in config.solvers:
        for adjoint in config.adjoints:
            integrator = integrator_for(solver, adjoint, config, data, config.max_steps)
            row = dict(solver=solver, adjoint=adjoint, trained=False)
            if f"{solver}/{adjoint}" in config.skipped:
                row.update(accuracy_mean=math.nan, accuracy_std=math.nan)
                row.update(failed_runs=0, failed_updates=0, train_seconds=0)
                row["error"] = "skipped (too slow)"
            else:
                runs = _problems.train_seeds(
                    config, integrator, data, f"{solver}/{adjoint}"
                )
                row.update(runs, trained=True)
                row.update(
                    _problems.measure_or_failure(
                        model, batch, integrator, gradient, timed_steps=3
                    )
                )
            rows.append(row)
            _run.write_json(partial, dict(rows=rows, stiffness=stiff))
            accuracy = _report.percent(row["accuracy_mean"], row["accuracy_std"])
            accuracy = f"{accuracy}%" if row["trained"] else "not trained"
            print(
                f"{solver:>9}/{adjoint:<10} {accuracy} ({row['train_seconds']:.0f} s)"
            )
    for tau in config.stiff_tau:
        gradient = reference(tau)
        model = _problems.vowels_model(config.hidden_size, config.seeds[0], tau)
        for solver in config.solvers:
            integrator = integrator_for(
                solver, "checkpoint", config, data, config.stiff_max_steps
            )
            row = _problems.measure_or_failure(
                model, batch, integrator, gradient, timed_steps=3
            )
            stiff.append(dict(solver=solver, tau=tau, **row))
            _run.write_json(partial, dict(rows=rows, stiffness=stiff))
            print(
                f"tau {tau:g} {solver:>9}: "
                f"{row.get('forward_evaluations', row.get('error'))}"
            )
    os.remove(partial)
    return run.finish(dict(rows=rows, stiffness=stiff))


if __name__ == "__main__":
    main(tyro.cli(Config))
