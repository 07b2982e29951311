"""What ltc_jax's training step costs beyond a hand-written equinox + diffrax +
optax step of the same model, measured side by side in one process.

The hand-written step is what a diffrax user would write for this batch: the
sequences share one time grid, so the batch is one `(batch, hidden_size)` state,
the input is one `diffrax.LinearInterpolation` over the knots (in the solve's
`args`), and the loss reads the final state. ltc_jax's step is
`ltc_jax.training.make_train_step` on an `ltc_jax.InputPath` of the same knots.
Both take the same fixed RK4 steps over the same model's vector field, with the
same gradient mode and Adam, so any difference is ltc_jax's machinery: the
per-sequence clock, the two-level interval search of the input path, the
finite-update guard and the metrics.

    python -m benchmarks.overhead           # the original write-up's size
    python -m benchmarks.overhead --quick   # seconds

Prints compile seconds and the median step seconds (steps of the two alternated,
so that a shared machine's load falls on both), their ratio and its spread over
the repeats, and writes `results/overhead/<run>/` (`metrics.json`, and
`report.txt` with the table by `experiments._report`).
"""

import dataclasses
from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import tyro

import ltc_jax
from benchmarks import _side_by_side
from experiments import _problems


Mode = Literal["checkpoint", "full", "backsolve"]


@dataclasses.dataclass(frozen=True)
class Config(_problems.RandomClassification):
    """ltc_jax's training step against a hand-written one of the same model.

    `--quick`: tiny sizes (seconds): batch 4, 8 inputs, 16 units, 100 knots and steps.
    """

    steps: int = 1000
    """RK4 steps over [0, 1]."""
    modes: tuple[Mode, ...] = ("checkpoint", "full", "backsolve")
    repeats: int = 10
    """Timed steps of each implementation (alternated), after one warm-up."""


QUICK = dict(
    batch_size=4, input_size=8, hidden_size=16, knots=100, steps=100, repeats=5
)


def make_problem(config: Config):
    """The model, knot times `(knots,)`, values `(batch, knots, input_size)` and
    integer labels, float32 on the default device."""
    model, *batch = _problems.random_classification(config)
    return model, *(jnp.asarray(x) for x in batch)


def hand_written_step(config: Config, mode: Mode, optimizer):
    """The training step of a plain equinox + diffrax + optax program."""
    adjoint = {
        "checkpoint": diffrax.RecursiveCheckpointAdjoint(),
        "full": diffrax.RecursiveCheckpointAdjoint(checkpoints=config.steps),
        "backsolve": diffrax.BacksolveAdjoint(),
    }[mode]

    def loss(model, ts, xs, labels):
        # ys of shape (knots, batch, input_size): evaluate(t) is (batch, input_size).
        path = diffrax.LinearInterpolation(ts, jnp.swapaxes(xs, 0, 1))
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(model.cell),
            ltc_jax.RK4(),
            t0=ts[0],
            t1=ts[-1],
            dt0=(ts[-1] - ts[0]) / config.steps,
            y0=jnp.zeros((xs.shape[0], config.hidden_size), xs.dtype),
            args=path,
            adjoint=adjoint,
            max_steps=config.steps,
        )
        logits = model.readout(solution.ys[-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    @eqx.filter_jit
    def step(model, opt_state, ts, xs, labels):
        value, grads = eqx.filter_value_and_grad(loss)(model, ts, xs, labels)
        params = eqx.filter(model, eqx.is_inexact_array)
        with jax.numpy_dtype_promotion("standard"):  # optax, under strict tests
            updates, opt_state = optimizer.update(grads, opt_state, params)
        return eqx.apply_updates(model, updates), opt_state, value

    return step


def ltc_jax_step(config: Config, mode: Mode, optimizer):
    """`ltc_jax.training.make_train_step`, compiled with `eqx.filter_jit`."""
    integrator = ltc_jax.make_integrator(
        "rk4", mode, dt0=1.0 / config.steps, max_steps=config.steps
    )
    return eqx.filter_jit(ltc_jax.training.make_train_step(optimizer, integrator))


def measure_mode(config: Config, mode: Mode) -> dict:
    model, ts, xs, labels = make_problem(config)
    optimizer = optax.adam(1e-3)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    batch = ltc_jax.Batch(
        ltc_jax.InputPath(ts, xs), labels, jnp.ones(config.batch_size, ts.dtype)
    )
    calls = {
        "ltc_jax": (ltc_jax_step(config, mode, optimizer), (model, opt_state, batch)),
        "hand-written": (
            hand_written_step(config, mode, optimizer),
            (model, opt_state, ts, xs, labels),
        ),
    }
    ratio = ("ltc_jax", "hand-written")
    figures = _side_by_side.compare(calls, config.repeats, ratio, rtol=1e-5)
    return dict(mode=mode, **figures)


def main(config: Config) -> dict:
    """Measure every mode; return (and write) the rows."""
    return _side_by_side.main(config, "overhead", QUICK, measure_mode, "modes")


if __name__ == "__main__":
    main(tyro.cli(Config))
