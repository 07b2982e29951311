"""Forward-solve time per RK4 step on the memory-scaling experiment's ECG windows,
with the windows' one time grid passed once (`ts` of shape `(times,)`) and passed
per sequence (`(batch, times)`): the figures behind the docs' note on shared
time grids (docs/concepts/irregular-data.md). Both give the same loss, bit for
bit; the script checks that.

    python -m experiments.shared_grid            # default sizes, about a minute
    python -m experiments.shared_grid --quick    # smoke test, seconds

Writes `results/shared_grid/<run>/`: `config.json`, `metrics.json`, and prints the
table.
"""

import dataclasses
import os

import equinox as eqx
import jax
import numpy as np
import tyro

import ltc_jax
from experiments import _report, _run, memory_scaling


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
    config, run_dir = _run.start_run(config, "shared_grid", QUICK)
    rows = []
    for steps in config.steps:
        model, batch = memory_scaling.make_problem(
            steps,
            batch_size=config.batch_size,
            hidden_size=config.hidden_size,
            horizon_seconds=memory_scaling.Config.horizon_seconds,
            seed=config.seed,
        )
        shared = batch.path
        # The same knots with one row of times per sequence (`ts` is broadcast to
        # (batch, times); the linear interpolation's ys are the samples).
        per_sequence = ltc_jax.InputPath(shared.ts, shared.interpolation.ys)
        integrator = memory_scaling.fixed_integrator(
            "rk4", "full", steps, None, memory_scaling.SAMPLE_RATE_HZ
        )
        forward = eqx.filter_jit(
            lambda model, batch, integrator=integrator: ltc_jax.loss_and_metrics(
                model, batch, integrator
            )[0]
        )
        losses = {}
        for layout, path in (("shared", shared), ("per-sequence", per_sequence)):
            layout_batch = batch._replace(path=path)
            losses[layout] = float(forward(model, layout_batch))  # compiles
            seconds = ltc_jax.time_calls(
                forward, model, layout_batch, warmup=0, repeats=config.timed_steps
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
    metrics = dict(backend=jax.default_backend(), rows=rows)
    _run.write_json(os.path.join(run_dir, "metrics.json"), metrics)
    print(
        _report.format_table(
            rows,
            [
                ("steps", lambda r: r["steps"]),
                ("times", lambda r: r["layout"]),
                ("forward s", lambda r: f"{r['forward_seconds']:.3f}"),
                ("us/step", lambda r: f"{r['us_per_step']:.1f}"),
            ],
        )
    )
    return metrics


if __name__ == "__main__":
    main(tyro.cli(Config))
