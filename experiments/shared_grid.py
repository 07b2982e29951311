"""Forward-solve time per RK4 step on the memory-scaling experiment's ECG windows,
with the windows' one time grid passed once (`ts` of shape `(times,)`) and passed
per sequence (`(batch, times)`): the figures behind the docs' note on shared
time grids (docs/concepts/irregular-data.md). Both give the same loss, bit for
bit; the script checks that.

Then the cost of training through `ltc_jax.fit` on such windows, against a
training step built by hand on the shared path: `fit` finds the one grid itself
(`ltc_jax.make_input_path`), so its time per optimiser step should be the
hand-built step's plus `fit`'s bookkeeping (batch gathering, metrics, progress).

    python -m experiments.shared_grid            # default sizes, about 8 minutes
    python -m experiments.shared_grid --quick    # smoke test, seconds

Writes `results/shared_grid/<run>/`: `config.json`, `metrics.json` and
`report.txt` with the table (`experiments._report`), and prints the table.
"""

import dataclasses
import warnings

import equinox as eqx
import jax
import jax.random as jr
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
    """Timed forward solves per configuration, after one warm-up; and rounds of
    the training comparison."""
    fit_batches: int = 3
    """Batches per epoch of the training comparison (windows: this times
    `batch_size`)."""


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
    training = [_training_row(config, steps) for steps in config.steps]
    return run.finish(dict(rows=rows, training=training))


def _training_row(config: Config, steps: int) -> dict:
    """Seconds per optimiser step of `fit` on `fit_batches` batches of windows of
    `steps + 1` samples (one epoch a call, its seconds over its steps), and of a
    step built by hand on one batch of those windows on the shared path
    (`make_train_step` under `eqx.filter_jit`), under the same `checkpoint` RK4
    integrator and Adam. After both have compiled, `timed_steps` rounds each
    time one epoch of `fit` and as many hand-built steps, alternated so that a
    shared machine's load falls on both; the medians are over the rounds."""
    data = ltc_jax.datasets.mitbih_208_windows(
        steps + 1, horizon=36, count=config.batch_size * config.fit_batches
    )
    model = ltc_jax.LTC(1, config.hidden_size, 1, key=jr.PRNGKey(config.seed))
    integrator = _problems.ecg_integrator("rk4", "checkpoint", steps)
    optimizer = ltc_jax.training.make_optimizer(1e-3, config.fit_batches)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    batch = ltc_jax.make_batch(data.take(np.arange(config.batch_size)))
    step = eqx.filter_jit(ltc_jax.training.make_train_step(optimizer, integrator))

    def one_epoch_of_fit() -> float:
        # Every call reuses the first's compilation (same optimiser, equal
        # integrator); a few steps need not learn, so the warning is dropped.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _, history = ltc_jax.fit(
                model,
                data,
                integrator=integrator,
                optimizer=optimizer,
                epochs=1,
                batch_size=config.batch_size,
                progress=ltc_jax.training.NoFitProgress(),
            )
        return history[-1]["seconds"] / config.fit_batches

    jax.block_until_ready(step(model, opt_state, batch))  # compiles
    one_epoch_of_fit()  # compiles
    by_hand, through_fit = [], []
    for _ in range(config.timed_steps):
        seconds = ltc_jax.measure.time_calls(
            step, model, opt_state, batch, warmup=0, repeats=config.fit_batches
        )
        # A mean, as fit's epoch seconds over its steps is: like for like.
        by_hand.append(float(np.mean(seconds)))
        through_fit.append(one_epoch_of_fit())
    ratios = np.asarray(through_fit) / np.asarray(by_hand)
    return dict(
        steps=steps,
        fit_shared_times=ltc_jax.make_input_path(data).shared_times,
        by_hand_seconds=float(np.median(by_hand)),
        fit_seconds=float(np.median(through_fit)),
        ratio=float(np.median(ratios)),
        ratio_range=[float(ratios.min()), float(ratios.max())],
    )


if __name__ == "__main__":
    main(tyro.cli(Config))
