"""Tolerances on real data: the same LTC trained on JapaneseVowels with Tsit5 at
each `(rtol, atol)` of the original write-up's ranges, and a tolerance schedule
(loose, then tight) against fixed-loose and fixed-tight runs on the same budget.

Per setting: test accuracy (mean ± std over seeds), training wall time, solver
steps and vector-field evaluations of one training step (at initialisation, and
per training epoch from the history), and the gradient's relative error against a
tight float64 reference at initialisation.

    python -m experiments.tolerances           # default size, about 3 min
    python -m experiments.tolerances --quick   # smoke test, under a minute

Writes `results/tolerances/<run>/`: `config.json`, `metrics.json`,
`tolerances.png`, and prints the tables.
"""

import dataclasses
import math
import os

import jax
import numpy as np
import tyro

import ltc_jax
from experiments import _problems, _report, _run


@dataclasses.dataclass(frozen=True)
class Config(_problems.VowelsTraining):
    """Sweep the tolerances, and compare a tolerance schedule with fixed ones.

    `--quick`: smoke-test sizes (under a minute).
    """

    tolerances: tuple[tuple[float, float], ...] = (
        (1e-3, 1e-4),
        (1e-4, 1e-5),
        (1e-5, 1e-6),
        (1e-6, 1e-8),
        (1e-7, 1e-9),
    )
    """`(rtol, atol)` pairs: rtol 1e-3 to 1e-7, atol 1e-4 to 1e-9, the original
    write-up's ranges (ltc_jax refuses rtol 1e-7, below float32's resolution: the
    sweep records the refusal)."""
    loose: tuple[float, float] = (1e-3, 1e-4)
    tight: tuple[float, float] = (1e-6, 1e-8)
    tighten_at: float = 0.7
    """The schedule switches from loose to tight after this fraction of epochs."""
    solver: str = "tsit5"
    max_steps: int = 8192
    reference_rtol: float = 1e-10


QUICK = dict(
    tolerances=((1e-3, 1e-4), (1e-5, 1e-6)),
    tight=(1e-5, 1e-6),
    seeds=(0,),
    epochs=2,
    hidden_size=4,
    batch_size=8,
    train_size=8,
    reference_rtol=1e-7,
)


def reference_gradient(config: dict, out_file: str) -> dict:
    """The float64 gradient at initialisation on the first batch (Tsit5 at
    `reference_rtol`, exact backpropagation), saved flat to `out_file`."""
    config = Config(**config)
    train, _ = _problems.japanese_vowels(config.train_size)
    model = _problems.cast(
        _problems.vowels_model(config.hidden_size, config.seeds[0]), "float64"
    )
    batch = next(ltc_jax.batches(train, config.batch_size))
    integrator = ltc_jax.make_integrator(
        "tsit5",
        rtol=config.reference_rtol,
        atol=config.reference_rtol,
        max_steps=config.max_steps * 4,
    )
    return _problems.save_reference_gradient(model, batch, integrator, out_file)


def train_setting(name: str, integrator, config: Config, data, optimizer) -> dict:
    """Train every seed with `integrator` (an integrator or a tolerance schedule)."""
    runs = _problems.train_seeds(config, integrator, optimizer, data, name)
    finished = [run for run in runs if run["error"] is None]
    mean, std, _ = _report.mean_std([run["accuracy"] for run in runs])
    steps = [[h["num_steps"] for h in run["history"]] for run in finished]
    return dict(
        setting=name,
        accuracies=[run["accuracy"] for run in runs],
        accuracy_mean=mean,
        accuracy_std=std,
        failures=[run["error"] for run in runs if run["error"] is not None],
        train_seconds_mean=float(np.mean([run["train_seconds"] for run in finished]))
        if finished
        else None,
        steps_per_epoch=np.mean(steps, axis=0).tolist() if steps else None,
    )


def _refused(reason: str, seeds: int) -> dict:
    """The row of a setting ltc_jax refuses (a tolerance the state's float type
    cannot resolve): no training and no figures, the reason instead."""
    return dict(
        error=reason,
        accuracies=[None] * seeds,
        accuracy_mean=math.nan,
        accuracy_std=math.nan,
        failures=[],
        train_seconds_mean=None,
        steps_per_epoch=None,
    )


def measure_at_init(integrator, config: Config, batch, reference) -> dict:
    """One training step at initialisation; a failed solve is recorded as such."""
    model = _problems.vowels_model(config.hidden_size, config.seeds[0])
    return _problems.measure_or_failure(
        model, batch, integrator, reference, timed_steps=3
    )


def main(config: Config) -> dict:
    """Run the sweep and the schedule comparison; return (and write) the metrics."""
    config, run_dir = _run.start_run(config, "tolerances", QUICK)
    data = _problems.japanese_vowels(config.train_size)
    train, _ = data
    (path32,) = _problems.float32_paths(train)
    batch = next(ltc_jax.batches(train, config.batch_size, path=path32))
    with jax.enable_x64(False):
        optimizer = ltc_jax.make_optimizer(
            config.learning_rate,
            config.epochs * math.ceil(len(train) / config.batch_size),
        )
    path = os.path.join(run_dir, "reference.npy")
    ltc_jax.call_in_subprocess(
        "experiments.tolerances:reference_gradient",
        dict(config=dataclasses.asdict(config), out_file=path),
        env={"JAX_ENABLE_X64": "1"},
    )
    reference = np.load(path)

    def integrator(rtol, atol):
        return ltc_jax.make_integrator(
            config.solver, rtol=rtol, atol=atol, max_steps=config.max_steps
        )

    sweep = []
    for rtol, atol in config.tolerances:
        row = dict(rtol=rtol, atol=atol)
        try:
            row.update(
                measure_at_init(integrator(rtol, atol), config, batch, reference)
            )
        except ValueError as error:
            if "below the resolution" not in str(error):
                raise
            # Refused before any solve (float32 cannot resolve rtol): a result too.
            refusal = str(error).split("):")[0] + ")"
            row.update(_refused(f"refused: {refusal}", len(config.seeds)))
            sweep.append(row)
            print(f"rtol {rtol:g} atol {atol:g}: {row['error']}")
            continue
        row.update(
            train_setting(
                f"rtol {rtol:g}, atol {atol:g}",
                integrator(rtol, atol),
                config,
                data,
                optimizer,
            )
        )
        sweep.append(row)
        print(
            f"rtol {rtol:g} atol {atol:g}: "
            f"{_report.percent(row['accuracy_mean'], row['accuracy_std'])}%"
        )

    switch = max(1, min(config.epochs - 1, round(config.tighten_at * config.epochs)))
    schedule = ltc_jax.ToleranceSchedule(
        integrator(*config.loose),
        start_epochs=(0, switch),
        rtols=(config.loose[0], config.tight[0]),
        atols=(config.loose[1], config.tight[1]),
    )
    schedules = [
        train_setting(
            "fixed loose", integrator(*config.loose), config, data, optimizer
        ),
        train_setting(
            "fixed tight", integrator(*config.tight), config, data, optimizer
        ),
        train_setting(
            f"loose, tight from epoch {switch}", schedule, config, data, optimizer
        ),
    ]
    metrics = dict(
        sweep=sweep,
        schedules=schedules,
        switch_epoch=switch,
        environment=ltc_jax.environment(),
        run_dir=run_dir,
    )
    _run.write_json(os.path.join(run_dir, "metrics.json"), metrics)
    plot(metrics, os.path.join(run_dir, "tolerances.png"))
    print(format_report(metrics, config))
    return metrics


def _first_and_last(steps: list[float] | None) -> str:
    return "-" if steps is None else f"{steps[0]:.0f} / {steps[-1]:.0f}"


def _number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_report(metrics: dict, config: Config) -> str:
    sweep = _report.format_table(
        metrics["sweep"],
        [
            ("rtol", lambda r: f"{r['rtol']:g}"),
            ("atol", lambda r: f"{r['atol']:g}"),
            (
                f"test accuracy % ({len(config.seeds)} seeds)",
                lambda r: (
                    "-"
                    if (r.get("error") or "").startswith("refused")
                    else _report.percent(r["accuracy_mean"], r["accuracy_std"])
                ),
            ),
            ("train s", lambda r: _number(r["train_seconds_mean"], ".1f")),
            ("steps", lambda r: _number(r.get("num_steps"), ",")),
            (
                "evaluations fwd + bwd",
                lambda r: (
                    f"{_number(r.get('forward_evaluations'), ',')} + "
                    f"{_number(r.get('backward_evaluations'), ',')}"
                ),
            ),
            ("s/step", lambda r: _number(r.get("step_seconds"), ".3f")),
            (
                "gradient error",
                lambda r: _number(r.get("gradient_relative_error"), ".1e"),
            ),
            ("failures", lambda r: r.get("error") or len(r["failures"]) or "-"),
        ],
    )
    schedules = _report.format_table(
        metrics["schedules"],
        [
            ("tolerances", lambda r: r["setting"]),
            (
                f"test accuracy % ({len(config.seeds)} seeds)",
                lambda r: _report.percent(r["accuracy_mean"], r["accuracy_std"]),
            ),
            ("train s", lambda r: _number(r["train_seconds_mean"], ".1f")),
            (
                "steps per batch, first / last epoch",
                lambda r: _first_and_last(r["steps_per_epoch"]),
            ),
        ],
    )
    return (
        f"\nTolerance sweep ({config.solver}, {config.epochs} epochs; steps, "
        f"evaluations, time and gradient error of one training step at "
        f"initialisation):\n{sweep}\n\nSchedules on the same budget:\n{schedules}\n\n"
        f"run folder {metrics['run_dir']}"
    )


def plot(metrics: dict, path: str) -> None:
    """Accuracy and training time against rtol (left); the schedules (right)."""
    plt = _report.pyplot()

    sweep = [r for r in metrics["sweep"] if not math.isnan(r["accuracy_mean"])]
    fig, (ax, ax_sched) = plt.subplots(1, 2, figsize=(11, 4))
    rtol = [r["rtol"] for r in sweep]
    ax.errorbar(
        rtol,
        [100 * r["accuracy_mean"] for r in sweep],
        yerr=[100 * r["accuracy_std"] for r in sweep],
        marker="o",
        color="C0",
    )
    ax.set(xscale="log", xlabel="rtol (atol in the table)", ylabel="test accuracy (%)")
    ax.invert_xaxis()
    twin = ax.twinx()
    twin.plot(
        rtol,
        [
            np.nan if r["train_seconds_mean"] is None else r["train_seconds_mean"]
            for r in sweep
        ],
        marker="s",
        color="C1",
    )
    twin.set_ylabel("training time (s)", color="C1")
    names = [r["setting"] for r in metrics["schedules"]]
    ax_sched.bar(
        names,
        [100 * r["accuracy_mean"] for r in metrics["schedules"]],
        yerr=[100 * r["accuracy_std"] for r in metrics["schedules"]],
        color=["C0", "C1", "C2"],
    )
    ax_sched.set(ylabel="test accuracy (%)")
    for i, r in enumerate(metrics["schedules"]):
        if r["train_seconds_mean"] is not None:
            ax_sched.annotate(
                f"{r['train_seconds_mean']:.0f} s", (i, 5), ha="center", color="white"
            )
    ax_sched.tick_params(axis="x", labelsize=8)
    _report.save_figure(fig, path)


if __name__ == "__main__":
    main(tyro.cli(Config))
