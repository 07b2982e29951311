"""Forward-solve time per RK4 step on the memory-scaling experiment's ECG windows,
with the windows' one time grid passed once (`ts` of shape `(times,)`) and passed
per sequence (`(batch, times)`): the figures behind the docs' note on shared
time grids (docs/concepts/irregular-data.md). Both give the same loss, bit for
bit; the script checks that.

    python -m experiments.shared_grid            # default sizes, about a minute
    python -m experiments.shared_grid --quick    # smoke test, seconds

Writes `results/shared_grid/<run>/`: `config.json`, `metrics.json` and
`report.txt` with the table (`experiments._report`), and prints the table.
"""

import dataclasses

import equinox as eqx
import numpy as np
import tyro

import ltc_jax
from experiments import _problems, _run


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """Time forward solves on one shared time grid against per-sequence times.

    `--quick`: smoke-test size: windows of 101 samples, one timed solve.
    """

    steps: tuple[int, ...] = (10_000, 100_000)
    """Solver steps per solve (windows of steps + 1 samples at 360 Hz)."""
    batch_size: int = 4
    """Windows per batch."""
    hidden_size: int = 32
    """LTC units."""
    seed: int = 0
    """Seeds the model's parameters."""
    timed_steps: int = 5
    """Timed forward solves per configuration, after one warm-up."""


QUICK = dict(steps=(100,), timed_steps=1)


def main(config: Config) -> dict:
    """Time both layouts at each size; return (and write) the rows.

    **Raises:** `RuntimeError` if the two layouts give different losses."""
    config, run = _run.start_run(config, "shared_grid", QUICK)
    rows = []
    for steps in config.steps:
        model, batch = _problems.ecg_problem(
            steps + 1,
            batch_size=config.batch_size,
            hidden_size=config.hidden_size,
            horizon=36,  # 0.1 s, as memory_scaling's
            seed=config.seed,
        )
        integrator = _problems.ecg_integrator("rk4", "full", steps)
        forward = eqx.filter_jit(
            lambda model, batch, integrator=integrator: (
                ltc_jax.training.SupervisedLoss()(model, batch, integrator)[0]
            )
        )
        # The same knots with one row of times per sequence (`ts` is broadcast to
        # (batch, times); the linear interpolation's ys are the samples).
        per_sequence = ltc_jax.InputPath(batch.path.ts, batch.path.interpolation.ys)
        losses = {}
        for layout, path in (("shared", batch.path), ("per-sequence", per_sequence)):
            args = (model, batch._replace(path=path))
            losses[layout] = float(forward(*args))  # compiles
            seconds = ltc_jax.measure.time_calls(
                forward, *args, warmup=0, repeats=config.timed_steps
            )
            rows.append(
                dict(
                    steps=steps,
                    layout=layout,
                    shared_times=path.shared_times,
                    forward_seconds=float(np.median(seconds)),
                    us_per_step=float(np.median(seconds)) / steps * 1e6,
                    loss=losses[layout],
                )
            )
        if losses["shared"] != losses["per-sequence"]:
            raise RuntimeError(f"The two layouts give different losses: {losses}.")
    return run.finish(dict(rows=rows))


if __name__ == "__main__":
    main(tyro.cli(Config))
