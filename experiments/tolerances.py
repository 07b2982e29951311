"""Tolerances on real data: the same LTC trained on JapaneseVowels with Tsit5 at
each `(rtol, atol)` of the original write-up's ranges, and a tolerance schedule
(loose, then tight) against fixed-loose and fixed-tight runs on the same budget.

Per setting: test accuracy (mean ± std over seeds), training wall time, solver
steps and vector-field evaluations of one training step (at initialisation, and
per training epoch from the history), and the gradient's relative error against a
tight float64 reference at initialisation.

    python -m experiments.tolerances           # default size, about 3 min
    python -m experiments.tolerances --quick   # smoke test, under a minute

Writes `results/tolerances/<run>/`: `config.json`, `metrics.json`, `report.txt`
with the tables and `tolerances.png` (`experiments._report`), and prints the
tables.
"""

import dataclasses
import math

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


def main(config: Config) -> dict:
    """Run the sweep and the schedule comparison; return (and write) the metrics."""
    config, run = _run.start_run(config, "tolerances", QUICK)
    data = _problems.japanese_vowels(config.train_size)
    batch = _problems.vowels_batch(data[0], config.batch_size)
    model = _problems.vowels_model(config.hidden_size, config.seeds[0])
    reference = _problems.float64_gradient(
        "experiments._problems:vowels_reference",
        config=dataclasses.asdict(config),
        max_steps=config.max_steps * 4,
    )

    def integrator(rtol, atol):
        return ltc_jax.make_integrator(
            config.solver, rtol=rtol, atol=atol, max_steps=config.max_steps
        )

    sweep = []
    for rtol, atol in config.tolerances:
        row = dict(rtol=rtol, atol=atol)
        try:
            row.update(
                _problems.measure_or_failure(
                    model, batch, integrator(rtol, atol), reference, timed_steps=3
                )
            )
        except ValueError as error:
            if "below the resolution" not in str(error):
                raise
            # Refused before any solve (float32 cannot resolve rtol): a result too,
            # with no training and no figures.
            row["error"] = "refused: " + str(error).split("):")[0] + ")"
            row.update(accuracy_mean=math.nan, accuracy_std=math.nan, failures=[])
            row.update(train_seconds_mean=None, steps_per_epoch=None)
        else:
            label = f"rtol {rtol:g}, atol {atol:g}"
            row.update(
                _problems.train_seeds(config, integrator(rtol, atol), data, label)
            )
        sweep.append(row)
        accuracy = _report.percent(row["accuracy_mean"], row["accuracy_std"])
        print(f"rtol {rtol:g} atol {atol:g}: {row.get('error') or accuracy + '%'}")

    switch = max(1, min(config.epochs - 1, round(config.tighten_at * config.epochs)))
    schedule = ltc_jax.training.ToleranceSchedule(
        integrator(*config.loose),
        start_epochs=(0, switch),
        rtols=(config.loose[0], config.tight[0]),
        atols=(config.loose[1], config.tight[1]),
    )
    schedules = [
        dict(setting=name, **_problems.train_seeds(config, setting, data, name))
        for name, setting in (
            ("fixed loose", integrator(*config.loose)),
            ("fixed tight", integrator(*config.tight)),
            (f"loose, tight from epoch {switch}", schedule),
        )
    ]
    return run.finish(dict(sweep=sweep, schedules=schedules, switch_epoch=switch))


if __name__ == "__main__":
    main(tyro.cli(Config))
