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
environment), `work_precision.png`, and prints the tables.
"""

import dataclasses
import math
import os

import jax
import numpy as np
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
            max_steps=ltc_jax.fixed_max_steps(datasets, dt0),
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


def make_model(config: Config, seed: int, tau: float | None = None) -> ltc_jax.LTC:
    return _problems.vowels_model(config.hidden_size, seed, tau)


def first_batch(train, batch_size: int) -> ltc_jax.Batch:
    (path,) = _problems.float32_paths(train)
    return next(ltc_jax.batches(train, batch_size, path=path))


def reference_gradient(config: dict, tau: float | None, out_file: str) -> dict:
    """The float64 gradient at initialisation (seed of the first row) on the first
    batch: exact backpropagation through an adaptive solve at `reference_rtol`
    (Tsit5; Kvaerno5 for the stiff sweep), saved flat to `out_file`. Run in a
    float64 process."""
    config = Config(**config)
    train, _ = _problems.japanese_vowels(config.train_size)
    model = _problems.cast(make_model(config, config.seeds[0], tau), "float64")
    batch = next(ltc_jax.batches(train, config.batch_size))
    integrator = ltc_jax.make_integrator(
        "tsit5" if tau is None else "kvaerno5",
        "checkpoint",
        rtol=config.reference_rtol,
        atol=config.reference_rtol,
        max_steps=config.stiff_max_steps * 4,
    )
    return _problems.save_reference_gradient(model, batch, integrator, out_file)


def _reference(config: Config, tau: float | None, run_dir: str) -> np.ndarray:
    name = "reference" if tau is None else f"reference_tau{tau:g}"
    path = os.path.join(run_dir, name + ".npy")
    ltc_jax.call_in_subprocess(
        "experiments.solvers:reference_gradient",
        dict(config=dataclasses.asdict(config), tau=tau, out_file=path),
        env={"JAX_ENABLE_X64": "1"},
    )
    return np.load(path)


def train_row(solver: str, adjoint: str, config: Config, data, optimizer) -> dict:
    """Train every seed with `solver`/`adjoint`; failed updates are skipped and
    counted, a run with too many in a row is recorded as failed."""
    integrator = integrator_for(solver, adjoint, config, data, config.max_steps)
    if f"{solver}/{adjoint}" in config.skipped:
        runs = []
    else:
        runs = _problems.train_seeds(
            config, integrator, optimizer, data, f"{solver}/{adjoint}"
        )
    accuracies = [run["accuracy"] for run in runs]
    mean, std, finished = _report.mean_std(accuracies)
    return dict(
        solver=solver,
        adjoint=adjoint,
        trained=bool(runs),
        accuracies=accuracies,
        accuracy_mean=mean,
        accuracy_std=std,
        runs_finished=finished,
        failed_updates=sum(
            h["failures"] for run in runs for h in (run["history"] or [])
        ),
        failed_runs=sum(run["error"] is not None for run in runs),
        train_seconds=sum(run["seconds"] for run in runs),
    )


def main(config: Config) -> dict:
    """Run the comparison; return (and write) the metrics."""
    config, run_dir = _run.start_run(config, "solvers", QUICK)
    data = _problems.japanese_vowels(config.train_size)
    train, test = data
    batch = first_batch(train, config.batch_size)
    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    with jax.enable_x64(False):
        optimizer = ltc_jax.make_optimizer(
            config.learning_rate, config.epochs * steps_per_epoch
        )

    rows, stiff = [], []
    metrics = dict(
        rows=rows, stiffness=stiff, environment=ltc_jax.environment(), run_dir=run_dir
    )
    partial = os.path.join(run_dir, "metrics.partial.json")
    reference = _reference(config, None, run_dir)
    for solver in config.solvers:
        for adjoint in config.adjoints:
            row = train_row(solver, adjoint, config, data, optimizer)
            integrator = integrator_for(solver, adjoint, config, data, config.max_steps)
            if f"{solver}/{adjoint}" in config.skipped:
                row.update(error="skipped (too slow)")
            else:
                model = make_model(config, config.seeds[0])
                row.update(
                    _problems.measure_or_failure(
                        model, batch, integrator, reference, timed_steps=3
                    )
                )
            rows.append(row)
            _run.write_json(partial, metrics)  # a killed run keeps its rows
            accuracy = (
                _report.percent(row["accuracy_mean"], row["accuracy_std"]) + "%"
                if row["trained"]
                else "not trained"
            )
            print(
                f"{solver:>9}/{adjoint:<10} accuracy {accuracy} "
                f"({row['train_seconds']:.0f} s)"
            )

    for tau in config.stiff_tau:
        reference = _reference(config, tau, run_dir)
        model = make_model(config, config.seeds[0], tau)
        for solver in config.solvers:
            integrator = integrator_for(
                solver, "checkpoint", config, data, config.stiff_max_steps
            )
            row = dict(solver=solver, tau=tau)
            row.update(
                _problems.measure_or_failure(
                    model, batch, integrator, reference, timed_steps=3
                )
            )
            stiff.append(row)
            _run.write_json(partial, metrics)
            print(
                f"tau {tau:g} {solver:>9}: "
                f"{row.get('forward_evaluations', row.get('error'))}"
            )

    _run.write_json(os.path.join(run_dir, "metrics.json"), metrics)
    os.remove(partial)
    plot(rows, stiff, os.path.join(run_dir, "work_precision.png"))
    print(format_report(metrics, config))
    return metrics


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"


def _error(row: dict) -> str:
    if row.get("gradient_is_finite") is False:
        return "non-finite"
    value = row.get("gradient_relative_error")
    return "-" if value is None else f"{value:.1e}"


# Evaluations, time and gradient error of one measured training step.
_COST_COLUMNS = [
    (
        "evaluations fwd + bwd",
        lambda r: (
            f"{_count(r.get('forward_evaluations'))} + "
            f"{_count(r.get('backward_evaluations'))}"
        ),
    ),
    (
        "s/step",
        lambda r: "-" if r.get("step_seconds") is None else f"{r['step_seconds']:.3f}",
    ),
    ("gradient error", _error),
]


def format_report(metrics: dict, config: Config) -> str:
    trained = _report.format_table(
        metrics["rows"],
        [
            ("solver", lambda r: r["solver"]),
            ("gradient", lambda r: r["adjoint"]),
            (
                f"test accuracy % ({len(config.seeds)} seeds)",
                lambda r: (
                    _report.percent(r["accuracy_mean"], r["accuracy_std"])
                    if r["trained"]
                    else "not trained"
                ),
            ),
            *_COST_COLUMNS,
            (
                "failed runs",
                lambda r: (
                    f"{r['failed_runs']} of {len(config.seeds)}"
                    if r["trained"]
                    else "-"
                ),
            ),
            ("skipped updates", lambda r: r["failed_updates"]),
            ("step failure", lambda r: r.get("error") or "-"),
        ],
    )
    stiff = _report.format_table(
        metrics["stiffness"],
        [
            ("tau (frames)", lambda r: f"{r['tau']:g}"),
            ("solver", lambda r: r["solver"]),
            (
                "steps (rejected)",
                lambda r: (
                    "-"
                    if r.get("num_steps") is None
                    else f"{r['num_steps']:,} ({r['num_rejected_steps']:,})"
                ),
            ),
            *_COST_COLUMNS,
            ("failure", lambda r: r.get("error") or "-"),
        ],
    )
    return (
        f"\nTrained on JapaneseVowels ({config.epochs} epochs, batch "
        f"{config.batch_size}, {config.hidden_size} units; evaluations and time of "
        f"one training step on one batch at initialisation):\n{trained}\n\n"
        f"Stiffness sweep at initialisation (checkpoint gradients):\n{stiff}\n\n"
        f"run folder {metrics['run_dir']}"
    )


def plot(rows: list[dict], stiff: list[dict], path: str) -> None:
    """Work-precision: gradient error against evaluations per training step (left),
    test accuracy against evaluations (right)."""
    plt = _report.pyplot()

    fig, (ax_err, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    markers = {"checkpoint": "o", "backsolve": "s"}
    solvers = list(dict.fromkeys(r["solver"] for r in rows))
    colours = {s: plt.cm.tab10(i % 10) for i, s in enumerate(solvers)}
    for r in rows:
        if r.get("forward_evaluations") is None:
            continue
        work = r["forward_evaluations"] + r["backward_evaluations"]
        kwargs = dict(color=colours[r["solver"]], marker=markers.get(r["adjoint"], "x"))
        if r.get("gradient_relative_error"):
            ax_err.loglog(
                work, r["gradient_relative_error"], linestyle="none", **kwargs
            )
        if math.isfinite(r["accuracy_mean"]):
            ax_acc.errorbar(
                work, 100 * r["accuracy_mean"], yerr=100 * r["accuracy_std"], **kwargs
            )
    for s in solvers:
        ax_err.plot([], [], color=colours[s], marker="o", linestyle="none", label=s)
    for adjoint, marker in markers.items():
        ax_acc.plot(
            [], [], color="grey", marker=marker, linestyle="none", label=adjoint
        )
    ax_err.set(
        xlabel="vector-field evaluations per training step (forward + backward)",
        ylabel="gradient relative error (vs float64 reference)",
    )
    ax_acc.set(
        xscale="log",
        xlabel="vector-field evaluations per training step",
        ylabel="test accuracy (%)",
    )
    ax_err.legend(fontsize=8, ncol=2)
    ax_acc.legend(fontsize=8)
    _report.save_figure(fig, path)


if __name__ == "__main__":
    main(tyro.cli(Config))
