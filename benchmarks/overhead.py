"""What ltc_jax's training step costs beyond a hand-written equinox + diffrax +
optax step of the same model, measured side by side in one process.

The hand-written step shares no code with ltc_jax: it is what a diffrax user
would write for this batch, from the papers.

- Its own LTC field (Hasani et al. 2021, Eq. 1, `dh/dt = -(1/tau + f) h + f A`
  with `f = sigmoid(W_in x + W_rec h + b)` and `tau = softplus(tau_raw) +
  tau_min`), an equinox module holding a copy of the ltc_jax model's
  parameters, so the two compute the same loss.
- Its own RK4, a `diffrax.AbstractERK` from the Butcher tableau.
- `t0 = 0.0` and `t1 = 1.0` as Python floats: the sequences share one grid, so
  the batch is one `(batch, hidden_size)` state.
- The input as one `diffrax.LinearInterpolation` of the knots, in `args`
  (`--hidden-path`: with its floats stored as integers, `HiddenPath`, so that
  `BacksolveAdjoint` integrates no cotangent for the input's data, as ltc_jax
  arranges for itself).
- The gradient modes as diffrax's own adjoints: `checkpoint` is
  `RecursiveCheckpointAdjoint()`, `full` the same with a checkpoint per step,
  `direct` is `DirectAdjoint()`, `backsolve` is `BacksolveAdjoint()`, and
  `windowed` is `BacksolveAdjoint()` with the state saved at the ends of the
  same equal windows (diffrax restarts the reverse reconstruction at every
  saved time).

ltc_jax's step is `ltc_jax.training.make_train_step` on an `ltc_jax.InputPath` of
the same knots. Both take the same fixed RK4 steps, with the same gradient mode
and Adam; the script checks that their losses agree to 1e-5 and their gradients
to `GRADIENT_RTOL`. In the exact modes, the difference in time is ltc_jax's
machinery: the per-sequence clock with traced times, the input path's interval
search, the finite-update guard and the metrics. In `windowed` it is also how
each restarts the reverse solve.

    python -m benchmarks.overhead           # the original write-up's size
    python -m benchmarks.overhead --quick   # seconds

Prints compile seconds (the first call: tracing, compiling and one step, each
in a fresh process, the fastest of `--first-calls` alternated tries) and the
median step seconds (steps of the two alternated, so that a shared machine's
load falls on both), their ratio and its spread over the repeats, and writes
`results/overhead/<run>/` (`metrics.json`, and `report.txt` with the table by
`experiments._report`).
"""

import dataclasses
import json
import time
from collections.abc import Callable
from typing import ClassVar, Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tyro

import ltc_jax
from benchmarks import _side_by_side
from experiments import _problems


Mode = Literal["checkpoint", "full", "backsolve", "windowed", "direct"]


@dataclasses.dataclass(frozen=True)
class Config(_problems.RandomClassification):
    """ltc_jax's training step against a hand-written one of the same model.

    `--quick`: tiny sizes (seconds): batch 4, 8 inputs, 16 units, 100 knots and
    steps, and 100 repeats (steps of milliseconds: fewer leave the median to
    the machine's noise).
    """

    steps: int = 1000
    """RK4 steps over [0, 1]."""
    modes: tuple[Mode, ...] = ("checkpoint", "full", "backsolve", "windowed", "direct")
    windows: int = 10
    """Windows of `windowed` (a divisor of `steps`)."""
    repeats: int = 10
    """Timed steps of each implementation (alternated), after one warm-up."""
    first_calls: int = 3
    """First calls (compile and one step) of each implementation, each in a
    fresh process, alternating which goes first; the fastest is reported (0:
    the first call in this process, after the gradient check's compilations)."""
    hidden_path: bool = False
    """Hand the hand-written step's input to diffrax with its floats stored as
    unsigned integers of the same bits (`HiddenPath`), as ltc_jax does for the
    continuous adjoints: diffrax's `BacksolveAdjoint` integrates a cotangent
    for every floating-point array in `args`, the input's data included."""


QUICK = dict(
    batch_size=4,
    input_size=8,
    hidden_size=16,
    knots=100,
    steps=100,
    repeats=100,
    first_calls=1,
)


def make_problem(config: Config):
    """The model, knot times `(knots,)`, values `(batch, knots, input_size)` and
    integer labels, float32 on the default device."""
    model, *batch = _problems.random_classification(config)
    return model, *(jnp.asarray(x) for x in batch)


# --- the hand-written step: equinox, diffrax and optax only -------------------


class PlainRK4(diffrax.AbstractERK):
    """The classic fourth-order Runge-Kutta method, from its Butcher tableau."""

    tableau: ClassVar[diffrax.ButcherTableau] = diffrax.ButcherTableau(
        c=np.array([0.5, 0.5, 1.0]),
        b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
        b_error=np.zeros(4),
        a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    )
    interpolation_cls: ClassVar[Callable[..., diffrax.AbstractLocalInterpolation]] = (
        diffrax.ThirdOrderHermitePolynomialInterpolation.from_k
    )

    def order(self, terms):
        return 4


class PlainField(eqx.Module):
    """The LTC field, `dh/dt = -(1/tau + f) h + f A`."""

    weight_in: jax.Array
    weight_rec: jax.Array
    bias: jax.Array
    A: jax.Array
    tau_raw: jax.Array
    tau_min: float = eqx.field(static=True)

    def __call__(self, t, h, path):
        # h: (batch, hidden); the parameters' rows broadcast over the batch.
        pre = path.evaluate(t) @ self.weight_in.T + h @ self.weight_rec.T
        f = jax.nn.sigmoid(pre + self.bias[None])
        tau = jax.nn.softplus(self.tau_raw) + self.tau_min
        return -(1 / tau[None] + f) * h + f * self.A[None]


class HiddenPath(eqx.Module):
    """A `diffrax.LinearInterpolation` whose knots and values are stored as
    unsigned integers of the same bits, so that `BacksolveAdjoint`, which
    integrates a cotangent for every floating-point array in `args`, sees no
    float to differentiate; `evaluate` reads them back bit for bit.

    `ts`: `(knots,)` times; `ys`: `(knots, ...)` values, each float32 or
    float64. `evaluate(t)` gives the values' trailing shape, as diffrax's."""

    ts: jax.Array
    ys: jax.Array
    dtypes: tuple[np.dtype, np.dtype] = eqx.field(static=True)

    def __init__(self, ts, ys):
        self.dtypes = (np.dtype(ts.dtype), np.dtype(ys.dtype))
        self.ts, self.ys = (
            jax.lax.bitcast_convert_type(a, {4: jnp.uint32, 8: jnp.uint64}[d.itemsize])
            for a, d in zip((ts, ys), self.dtypes, strict=True)
        )

    def evaluate(self, t):
        ts, ys = (
            jax.lax.bitcast_convert_type(a, d)
            for a, d in zip((self.ts, self.ys), self.dtypes, strict=True)
        )
        return diffrax.LinearInterpolation(ts, ys).evaluate(t)


class PlainLTC(eqx.Module):
    """The field, and the weights of its linear readout of the final state."""

    field: PlainField
    readout_weight: jax.Array
    readout_bias: jax.Array


PARAMETERS = ("weight_in", "weight_rec", "bias", "A", "tau_raw")
"""The field's parameters, named as in `ltc_jax.LTCVectorField` and `PlainField`."""


def plain_copy(model: ltc_jax.LTC) -> PlainLTC:
    """The hand-written model with `model`'s parameter values."""
    cell = model.cell
    field = PlainField(
        *(jnp.array(getattr(cell, name)) for name in PARAMETERS), float(cell.tau_min)
    )
    return PlainLTC(
        field, jnp.array(model.readout.weight), jnp.array(model.readout.bias)
    )


def hand_written_loss(config: Config, mode: Mode):
    """The loss of a plain equinox + diffrax + optax program, as
    `loss(model, ts, xs, labels)`."""
    adjoint = {
        "checkpoint": diffrax.RecursiveCheckpointAdjoint(),
        "full": diffrax.RecursiveCheckpointAdjoint(checkpoints=config.steps),
        "backsolve": diffrax.BacksolveAdjoint(),
        "windowed": diffrax.BacksolveAdjoint(),
        "direct": diffrax.DirectAdjoint(),
    }[mode]
    if mode == "windowed":  # diffrax restarts the reverse solve at saved times
        saveat = diffrax.SaveAt(
            ts=[(k + 1) / config.windows for k in range(config.windows)]
        )
    else:
        saveat = diffrax.SaveAt(t1=True)

    def loss(model, ts, xs, labels):
        # ys of shape (knots, batch, input_size): evaluate(t) is (batch, input_size).
        interpolation = (
            HiddenPath if config.hidden_path else diffrax.LinearInterpolation
        )
        path = interpolation(ts, jnp.swapaxes(xs, 0, 1))
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(model.field),
            PlainRK4(),
            t0=0.0,
            t1=1.0,
            dt0=1.0 / config.steps,
            y0=jnp.zeros((xs.shape[0], config.hidden_size), xs.dtype),
            args=path,
            saveat=saveat,
            adjoint=adjoint,
            max_steps=config.steps,
        )
        logits = solution.ys[-1] @ model.readout_weight.T + model.readout_bias[None]
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    return loss


def hand_written_step(config: Config, mode: Mode, optimizer):
    """The training step of a plain equinox + diffrax + optax program."""
    loss = hand_written_loss(config, mode)

    @eqx.filter_jit
    def step(model, opt_state, ts, xs, labels):
        value, grads = eqx.filter_value_and_grad(loss)(model, ts, xs, labels)
        params = eqx.filter(model, eqx.is_inexact_array)
        with jax.numpy_dtype_promotion("standard"):  # optax, under strict tests
            updates, opt_state = optimizer.update(grads, opt_state, params)
        return eqx.apply_updates(model, updates), opt_state, value

    return step


# --- ltc_jax's step -----------------------------------------------------------


def ltc_jax_integrator(config: Config, mode: Mode) -> ltc_jax.Integrator:
    """`config.steps` fixed RK4 steps over [0, 1] in `mode` (with
    `config.windows` windows for `windowed`)."""
    windows = dict(windows=config.windows) if mode == "windowed" else {}
    return ltc_jax.make_integrator(
        "rk4", mode, dt0=1.0 / config.steps, max_steps=config.steps, **windows
    )


def ltc_jax_step(config: Config, mode: Mode, optimizer):
    """`ltc_jax.training.make_train_step`, compiled with `eqx.filter_jit`."""
    integrator = ltc_jax_integrator(config, mode)
    return eqx.filter_jit(ltc_jax.training.make_train_step(optimizer, integrator))


def ltc_jax_batch(ts, xs, labels) -> ltc_jax.Batch:
    """The knots as the batch `fit` would train on: one shared grid, whose
    duration is known on the host (`make_input_path` gives `static_duration`
    to such a path)."""
    path = ltc_jax.InputPath(ts, xs, static_duration=float(ts[-1] - ts[0]))
    return ltc_jax.Batch(path, labels, jnp.ones(xs.shape[0], ts.dtype))


GRADIENT_RTOL = 1e-3
"""How far the two steps' gradients may differ (relative, over all parameters):
float32 round-off of the same arithmetic in another order, which a continuous
adjoint's reverse reconstruction of the state amplifies (1.8e-4 for `windowed`
at `--quick`; a wrong gradient differs at order 1)."""


def gradient_difference(
    config: Config, mode: Mode, model, plain, batch, ts, xs, labels
):
    """`|g_ltc_jax - g_hand| / |g_hand|` over every parameter, in the same order."""
    integrator = ltc_jax_integrator(config, mode)
    ours = ltc_jax.measure.loss_gradient(model, batch, integrator)
    theirs = eqx.filter_jit(eqx.filter_grad(hand_written_loss(config, mode)))(
        plain, ts, xs, labels
    )
    cell = ours.cell
    ours = [
        *(getattr(cell, name) for name in PARAMETERS),
        ours.readout.weight,
        ours.readout.bias,
    ]
    theirs = [
        *(getattr(theirs.field, name) for name in PARAMETERS),
        theirs.readout_weight,
        theirs.readout_bias,
    ]
    return ltc_jax.measure.gradient_relative_error(ours, theirs)


def measure_mode(config: Config, mode: Mode) -> dict:
    """Time both steps in `mode` and compare their gradients.

    **Raises:** `ValueError` if `windows` does not divide `steps` (the two
    windowed adjoints would restart at different times); `RuntimeError` if the
    losses or gradients differ beyond round-off."""
    if mode == "windowed" and config.steps % config.windows:
        raise ValueError(
            f"--windows {config.windows} must divide --steps {config.steps}."
        )
    model, ts, xs, labels = make_problem(config)
    plain = plain_copy(model)
    optimizer = optax.adam(1e-3)
    batch = ltc_jax_batch(ts, xs, labels)
    difference = gradient_difference(config, mode, model, plain, batch, ts, xs, labels)
    if not difference <= GRADIENT_RTOL:
        raise RuntimeError(
            f"{mode}: the gradients differ by {difference:.2e} (relative), more "
            f"than {GRADIENT_RTOL:g}."
        )

    calls = training_steps(config, mode, optimizer, model, batch, ts, xs, labels)
    ratio = ("ltc_jax", "hand-written")
    figures = _side_by_side.compare(calls, config.repeats, ratio, rtol=1e-5)
    if config.first_calls:  # the in-process first calls share tracing caches
        figures["compile_and_first_step_seconds"] = fresh_first_calls(config, mode)
    return dict(mode=mode, gradient_difference=difference, **figures)


def training_steps(
    config: Config, mode: Mode, optimizer, model, batch, ts, xs, labels
) -> _side_by_side.Calls:
    """Per implementation (`"ltc_jax"`, `"hand-written"`), its compiled
    training step in `mode` and the arguments of a call: `model` (or its
    hand-written copy) with a fresh optimiser state, and the data (`batch`,
    `ltc_jax_batch` of the knots, for ltc_jax; the knots themselves for the
    hand-written step)."""

    def start(model):
        return model, optimizer.init(eqx.filter(model, eqx.is_inexact_array))

    return {
        "ltc_jax": (ltc_jax_step(config, mode, optimizer), (*start(model), batch)),
        "hand-written": (
            hand_written_step(config, mode, optimizer),
            (*start(plain_copy(model)), ts, xs, labels),
        ),
    }


def first_call(config: dict, mode: Mode, implementation: str) -> float:
    """Seconds of one implementation's first training step in `mode` (tracing,
    compiling and one step) in this process, after JAX's own start-up (one
    small compiled call): call it in a fresh process (`fresh_first_calls`).
    `config` holds `Config`'s fields; `implementation` is `"ltc_jax"` or
    `"hand-written"`."""
    config = Config(**config)
    with jax.enable_x64(False), jax.numpy_dtype_promotion("standard"):
        model, ts, xs, labels = make_problem(config)
        jax.block_until_ready(jax.jit(jnp.sin)(xs))
        batch = ltc_jax_batch(ts, xs, labels)
        optimizer = optax.adam(1e-3)
        steps = training_steps(config, mode, optimizer, model, batch, ts, xs, labels)
        step, args = steps[implementation]
        start = time.perf_counter()
        jax.block_until_ready(step(*args))
        return time.perf_counter() - start


def fresh_first_calls(config: Config, mode: Mode) -> dict[str, float]:
    """Each implementation's first call in `mode` (`first_call`), each in a
    fresh process, `config.first_calls` times in alternating order; the
    fastest of each. A first call in this process would reuse what the
    other step's tracing left in JAX's and the libraries' caches."""
    fields = json.loads(json.dumps(dataclasses.asdict(config)))
    order = ["ltc_jax", "hand-written"]
    seconds = {name: [] for name in order}
    for round_ in range(config.first_calls):
        for name in order[:: 1 if round_ % 2 == 0 else -1]:
            seconds[name].append(
                ltc_jax.measure.call_in_subprocess(
                    "benchmarks.overhead:first_call",
                    dict(config=fields, mode=mode, implementation=name),
                )
            )
    return {name: min(values) for name, values in seconds.items()}


def main(config: Config) -> dict:
    """Measure every mode; return (and write) the rows."""
    return _side_by_side.main(config, "overhead", QUICK, measure_mode, "modes")


if __name__ == "__main__":
    main(tyro.cli(Config))
