"""The closed-form continuous-time cell (CfC) of Hasani et al. (2022), as a
sequence model with the LTC's interface, and the direct closed form of an LTC."""

import functools
import math
from collections.abc import Callable
from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from ._model import (
    AbstractSequenceModel,
    LinearReadout,
    ModelSave,
    ReadoutFeatures,
    check_readout_features,
    check_readout_times,
    check_solve,
    initial_state,
    readout_size,
)
from ._paths import InputPath
from ._solve import Trajectory
from ._vector_field import LTCVectorField, _rows_like


CFC_MODES = ("default", "no_gate", "pure")
"""The CfC's variants: gated, without the gate, and the direct closed form."""
_ACTIVATIONS = {
    "lecun_tanh": lambda x: 1.7159 * jnp.tanh(0.666 * x),
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "gelu": jax.nn.gelu,
}


STATE_GRADIENT_BOUND = 1e6
"""The default `state_gradient_bound` of [`ltc_jax.CfC`][] and
[`ltc_jax.JumpLTC`][]: the largest magnitude of each element of the loss's
gradient in the state carried back through an update, larger finite values
being clamped to it at every update, in the backward pass only. Below it the
gradient is exactly the unclamped one; a gradient in the state this large has
grown by a power of the number of updates, and would otherwise overflow
float32 (about 3e38) within a few hundred more (measured: the CfC on ACSF1's
1,460-sample series)."""


def check_state_gradient_bound(bound: float | None) -> float | None:
    """`bound` as a float (or `None`).

    **Raises:** `ValueError` unless it is `None` or a positive number
    (infinity included)."""
    if bound is None:
        return None
    if isinstance(bound, bool) or not isinstance(bound, int | float) or not bound > 0:
        raise ValueError(
            "state_gradient_bound must be a positive number, or None for no "
            f"clamp; got {bound!r}."
        )
    return float(bound)


def _linear(fan_in: int, fan_out: int, dtype, key) -> eqx.nn.Linear:
    """`eqx.nn.Linear` initialised as `ncps` does: Glorot-uniform weights
    (`xavier_uniform_`, gain 1), biases U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    (PyTorch's default)."""
    w_key, b_key = jr.split(key)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    layer = eqx.nn.Linear(fan_in, fan_out, key=w_key, dtype=dtype)
    weight = jr.uniform(w_key, (fan_out, fan_in), dtype, -limit, limit)
    bound = 1.0 / math.sqrt(fan_in)
    bias = jr.uniform(b_key, (fan_out,), dtype, -bound, bound)
    return eqx.tree_at(lambda lin: (lin.weight, lin.bias), layer, (weight, bias))


class CfCCell(eqx.Module):
    r"""One update of the closed-form continuous-time cell (Hasani et al. 2022,
    "Closed-form continuous-time neural networks", Eq. 10; the `ncps` package's
    `CfCCell`), from the state `h` after an elapsed time `dt` under the input `x`:

    $$z = \text{backbone}([x, h]),\quad
    g = \sigma\big(t_a(z)\,\Delta t + t_b(z)\big),$$

    - `"default"` (gated): $h' = \tanh(f_1(z)) \odot (1 - g) + g \odot \tanh(f_2(z))$;
    - `"no_gate"`: $h' = \tanh(f_1(z)) + g \odot \tanh(f_2(z))$;
    - `"pure"` (the direct closed form of the LTC, Eq. 5):
      $h' = A - A \odot e^{-\Delta t\,(|w_\tau| + |f_1(z)|)} \odot f_1(z)$.

    `backbone` is `backbone_layers` affine maps of width `backbone_units`, each
    followed by `backbone_activation` (none: $z = [x, h]$); $f_1, f_2, t_a, t_b$
    are affine maps to `hidden_size`. Time (`dt`) is in the unit of the data's
    timestamps ([`ltc_jax.CfC`][] passes it divided by its `time_scale`).

    **Fields:** `backbone` (a list of `eqx.nn.Linear`), `ff1`, `ff2`, `time_a`,
    `time_b` (`eqx.nn.Linear`; the last three `None` in `"pure"` mode),
    `w_tau`, `A` (`(hidden_size,)`, `"pure"` only, else `None`), and static
    `mode`, `activation`, `hidden_size`.

    **Initial values** (`ncps`): Glorot-uniform weights, biases U(+-1/sqrt(fan_in)),
    `w_tau = 0`, `A = 1`.
    """

    backbone: list
    ff1: eqx.nn.Linear
    ff2: eqx.nn.Linear | None
    time_a: eqx.nn.Linear | None
    time_b: eqx.nn.Linear | None
    w_tau: Float[Array, " hidden_size"] | None
    A: Float[Array, " hidden_size"] | None
    mode: str = eqx.field(static=True)
    activation: str = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        mode: str = "default",
        backbone_units: int = 128,
        backbone_layers: int = 1,
        backbone_activation: str = "lecun_tanh",
        dtype=None,
        key: PRNGKeyArray,
    ):
        """**Arguments:** `input_size`, `hidden_size`; `mode`: `"default"`,
        `"no_gate"` or `"pure"`; `backbone_units`, `backbone_layers` (0: no
        backbone), `backbone_activation`: `"lecun_tanh"` (default, `1.7159
        tanh(0.666 x)`), `"tanh"`, `"relu"`, `"silu"` or `"gelu"`; `dtype` of
        the parameters (default JAX's default float); `key`.

        **Raises:** `ValueError` for an unknown mode or activation, or a size
        below 1 (`backbone_layers` below 0).
        """
        if mode not in CFC_MODES:
            raise ValueError(
                f"Unknown CfC mode {mode!r}; choose 'default', 'no_gate' or 'pure'."
            )
        if backbone_activation not in _ACTIVATIONS:
            raise ValueError(
                f"Unknown backbone_activation {backbone_activation!r}; choose one of "
                f"{tuple(_ACTIVATIONS)}."
            )
        if min(input_size, hidden_size, backbone_units) < 1 or backbone_layers < 0:
            raise ValueError(
                "input_size, hidden_size and backbone_units must be positive and "
                f"backbone_layers at least 0; got {input_size}, {hidden_size}, "
                f"{backbone_units}, {backbone_layers}."
            )
        dtype = jnp.zeros(()).dtype if dtype is None else dtype
        keys = jr.split(key, backbone_layers + 4)
        width = input_size + hidden_size
        self.backbone = []
        for layer_key in keys[:backbone_layers]:
            self.backbone.append(_linear(width, backbone_units, dtype, layer_key))
            width = backbone_units
        ff1, ff2, ta, tb = keys[backbone_layers:]
        self.ff1 = _linear(width, hidden_size, dtype, ff1)
        if mode == "pure":
            self.ff2 = self.time_a = self.time_b = None
            self.w_tau = jnp.zeros((hidden_size,), dtype)
            self.A = jnp.ones((hidden_size,), dtype)
        else:
            self.ff2 = _linear(width, hidden_size, dtype, ff2)
            self.time_a = _linear(width, hidden_size, dtype, ta)
            self.time_b = _linear(width, hidden_size, dtype, tb)
            self.w_tau = self.A = None
        self.mode = mode
        self.activation = backbone_activation
        self.hidden_size = hidden_size

    def __call__(
        self,
        x: Float[Array, " input_size"],
        h: Float[Array, " hidden_size"],
        dt: Float[Array, ""],
    ) -> Float[Array, " hidden_size"]:
        """The state after `dt` time units, for one sequence."""
        z = jnp.concatenate([x, h])
        for layer in self.backbone:
            z = _ACTIVATIONS[self.activation](layer(z))
        if self.mode == "pure":
            f1 = self.ff1(z)
            decay = jnp.exp(-dt * (jnp.abs(self.w_tau) + jnp.abs(f1)))
            return self.A - self.A * decay * f1
        f1, f2 = jnp.tanh(self.ff1(z)), jnp.tanh(self.ff2(z))
        gate = jax.nn.sigmoid(self.time_a(z) * dt + self.time_b(z))
        if self.mode == "no_gate":
            return f1 + gate * f2
        return f1 * (1 - gate) + gate * f2


class CfC(AbstractSequenceModel):
    """The CfC as a sequence model, with [`ltc_jax.LTC`][]'s interface: `solve`,
    `outputs` and `__call__` on an [`ltc_jax.InputPath`][], so that
    [`ltc_jax.fit`][], [`ltc_jax.evaluate`][], checkpoints and the command line
    (`--model cfc`) take it as they take the LTC.

    No ODE is solved: the cell is applied once per observation (a `jax.lax.scan`
    over the times), from a zero state, with the elapsed time since the previous
    observation of the same sequence (0 at the first), divided by `time_scale`,
    so irregular per-sequence times enter through `dt`. The inputs are the
    path's values at its observation times (missing channels filled as the
    path interpolates them, mask and time channels included). Padding leaves
    the state unchanged. The `integrator` argument is accepted and ignored.
    Parameters and states are in the `dtype` given (default JAX's default
    float) and must match the inputs'.

    Source: Hasani, Lechner, Amini, Liebenwein, Ray, Tschaikowski, Teschl and
    Rus (2022), "Closed-form continuous-time neural networks", *Nature Machine
    Intelligence* 4, 992-1003; the variants and initial values of the `ncps`
    package.

    **Time scale.** The cell's gate reads `t_a(z) dt`, so the same data in
    milliseconds instead of seconds would change what the model computes.
    `time_scale` is the unit the elapsed time is measured in, in the unit of
    the timestamps: with the data's median observation interval
    ([`ltc_jax.training.observation_spacing`][], as the main job derives it)
    a typical step has `dt = 1`, the `ncps` package's default timespan, and the
    model computes the same whatever the unit of the times.

    **Gradients.** Backpropagation runs through every update, and the
    gradient in the state is clamped elementwise to `state_gradient_bound`
    (default 1e6) before each one (derivative clipping, after Graves 2013):
    once training makes the update expansive, that gradient grows like a
    power of the number of updates, and over a long sequence it would
    overflow to a non-finite value (ACSF1's 1,460 samples did). Below the
    bound the gradient is exact. Forward-mode derivatives (`jax.jvp`,
    `jax.jacfwd`) are not defined through the clamp: pass
    `state_gradient_bound=None` for them.

    **Fields:** `cell` ([`ltc_jax.CfCCell`][]), `readout`
    ([`ltc_jax.LinearReadout`][]), static `input_size`, `hidden_size`,
    `output_size`, `readout_times`, `readout_features`, `time_scale`,
    `state_gradient_bound`.
    """

    cell: CfCCell
    readout: LinearReadout
    time_scale: float = eqx.field(static=True)
    state_gradient_bound: float | None = eqx.field(static=True)
    solves_ode: ClassVar[bool] = False
    """No ODE solve: training checks no solver steps for it (its `num_steps`
    count the cell's updates)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int,
        *,
        mode: str = "default",
        backbone_units: int = 128,
        backbone_layers: int = 1,
        backbone_activation: str = "lecun_tanh",
        readout_times: int = 1,
        readout_features: ReadoutFeatures = "states",
        time_scale: float = 1.0,
        state_gradient_bound: float | None = STATE_GRADIENT_BOUND,
        dtype=None,
        key: PRNGKeyArray,
    ):
        """**Arguments:** as [`ltc_jax.CfCCell`][] (`input_size`, `hidden_size`,
        `mode`, the backbone's options, `dtype`); `output_size`: classes or
        regression targets; `readout_times`, `readout_features`: as
        [`ltc_jax.LTC`][]'s (the readout reads the state at the last observation
        at or before each of `n` evenly spread times, side by side, pooled or
        both); `time_scale`: the unit of the elapsed time the cell reads, in
        the unit of the timestamps (default 1: the timestamps' own; the data's
        median observation interval makes the model independent of that unit);
        `state_gradient_bound`: the largest magnitude of the loss's gradient in
        the state carried back through an update (see "Gradients"; `None`: no
        clamp); `key`.

        **Raises:** `ValueError` as [`ltc_jax.CfCCell`][], for `readout_times`
        not a positive int, an unknown `readout_features`, a `time_scale`
        that is not a positive, finite number, or a `state_gradient_bound`
        that is not a positive number or `None`.
        """
        check_readout_times(readout_times)
        check_readout_features(readout_features)
        self.state_gradient_bound = check_state_gradient_bound(state_gradient_bound)
        self.time_scale = float(time_scale)  # a NumPy scalar is welcome too
        if not 0 < self.time_scale < math.inf:
            raise ValueError(
                "time_scale must be a positive, finite number (the unit of the "
                f"elapsed time, in the timestamps' unit); got {time_scale!r}."
            )
        cell_key, readout_key = jr.split(key)
        self.cell = CfCCell(
            input_size,
            hidden_size,
            mode=mode,
            backbone_units=backbone_units,
            backbone_layers=backbone_layers,
            backbone_activation=backbone_activation,
            dtype=dtype,
            key=cell_key,
        )
        self.readout_features = readout_features
        self.readout = LinearReadout(
            readout_size(readout_times, hidden_size, readout_features),
            output_size,
            dtype=dtype,
            key=readout_key,
        )
        self.input_size, self.hidden_size = input_size, hidden_size
        self.output_size, self.readout_times = output_size, readout_times

    def options(self) -> dict[str, int | float | str | None]:
        """As [`ltc_jax.AbstractSequenceModel.options`][], with `mode` and
        `backbone_layers`, `backbone_units` where there is a backbone, and
        `time_scale`: no array's shape, but a static field that checkpoints do
        not hold, so loading into a CfC of another time scale is named, not
        silently a different model."""
        backbone = self.cell.backbone
        options = super().options()
        options |= dict(
            mode=self.cell.mode,
            backbone_layers=len(backbone),
            time_scale=self.time_scale,
        )
        if backbone:
            options["backbone_units"] = backbone[0].out_features
        return options

    def solve(
        self,
        path: InputPath,
        *,
        integrator=None,
        save: ModelSave = "final",
        y0: Float[Array, "batch hidden_size"] | None = None,
    ) -> Trajectory:
        """The state over the batch, as [`ltc_jax.LTC.solve`][] returns it: `ys`
        of shape `(batch, hidden_size)` at each sequence's last observation,
        `(batch, n, hidden_size)` at the readout times (`readout_times=n > 1`),
        or `(batch, times, hidden_size)` at every observation
        (`save="observations"`); `stats["num_steps"]` counts the cell's updates.
        `y0` (`(batch, hidden_size)`, default zero) is the state before the
        first observation.

        **Raises:** `ValueError` if the inputs do not have `input_size` channels,
        if the parameters and the inputs have different float types, or for an
        unknown `save`.
        """
        check_solve(self, path, save)
        cell = jax.vmap(self.cell)

        def step(x, h, dt):
            return cell(x, h, dt / self.time_scale)

        return scan_observations(
            step,
            path,
            y0,
            self,
            save,
            updates_per_observation=1,
            state_gradient_bound=self.state_gradient_bound,
        )


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def bound_cotangent(h: Array, bound: float) -> Array:
    """The identity on `h`, whose cotangent (the loss's gradient in `h`) has
    each finite element clamped to `[-bound, bound]` on its way back
    (infinities and NaN pass unchanged, so that a step that overflows at once
    is still reported as such). Adapted from the derivative clipping of
    Graves (2013), "Generating sequences with recurrent neural networks",
    Sec. 2.1, which clips the derivatives at an LSTM layer's inputs: here at
    a recurrent state, before each update, with a bound far above an ordinary
    gradient's."""
    return h


def _bound_cotangent_forward(h, bound):
    return h, None


def _bound_cotangent_backward(bound, _, cotangent):
    clamped = jnp.clip(cotangent, -bound, bound)
    return (jnp.where(jnp.isfinite(cotangent), clamped, cotangent),)


bound_cotangent.defvjp(_bound_cotangent_forward, _bound_cotangent_backward)


def scan_observations(
    step: Callable,
    path: InputPath,
    y0: Float[Array, "batch hidden"] | None,
    model: AbstractSequenceModel,
    save: ModelSave,
    *,
    updates_per_observation: int,
    state_gradient_bound: float | None,
) -> Trajectory:
    """The trajectory of a model that updates its state once per observation:
    `h <- step(x(t_i), h, t_i - t_{i-1})` over the batch (`jax.lax.scan` over
    the times; the elapsed time is 0 at each sequence's first observation, and
    padding leaves `h` unchanged), from `y0` (default zero). `ys` is the final
    state `(batch, hidden)`, the states at `model.readout_times` spread times
    `(batch, n, hidden)`, or every state `(batch, times, hidden)` with
    `save="observations"`; `stats["num_steps"]` counts
    `updates_per_observation` per observation. The CfC and the jump model
    solve through it.

    In the backward pass the gradient in the state is clamped elementwise to
    `state_gradient_bound` before each update (`bound_cotangent`; `None`: no
    clamp): an expansive recurrence multiplies it at every update, and over a
    long sequence it would overflow to infinity (a non-finite gradient)
    instead of reaching the optimiser's norm clip."""
    ts, valid = path.ts, path.valid
    previous = jnp.concatenate([ts[:, :1], ts[:, :-1]], axis=1)
    elapsed = jnp.where(valid, ts - previous, 0)

    def update(h, column):
        t, dt, real = column
        if state_gradient_bound is not None:
            h = bound_cotangent(h, state_gradient_bound)
        h = jnp.where(real[:, None], step(path.evaluate(t), h, dt), h)
        return h, h

    h0 = initial_state(y0, path, model.hidden_size)
    final, every = jax.lax.scan(update, h0, (ts.T, elapsed.T, valid.T))
    every = jnp.swapaxes(every, 0, 1)  # (batch, times, hidden)
    if save == "observations":
        ys = every
    elif model.readout_times == 1:
        ys = final
    else:
        ys = _at_spread_times(every, path, model.readout_times)
    count = path.lengths * updates_per_observation
    stats = dict(
        num_steps=count,
        num_accepted_steps=count,
        num_rejected_steps=jnp.zeros_like(count),
        max_steps=ts.shape[1] * updates_per_observation,
    )
    return Trajectory(
        ys=ys,
        stats=stats,
        result=diffrax.RESULTS.successful,
        t_reached=path.t_end - path.t_start,
    )


def _at_spread_times(
    every: Float[Array, "batch times hidden"], path: InputPath, n: int
) -> Float[Array, "batch n hidden"]:
    """The state at the last observation at or before each of the times `1/n,
    ..., 1` of each sequence's duration (the last is the final state)."""
    fractions = jnp.arange(1, n + 1, dtype=path.ts.dtype) / n
    duration = path.t_end - path.t_start
    targets = path.t_start[:, None] + duration[:, None] * fractions[None]
    # Round-off at the end must not step back past the last observation.
    targets = targets.at[:, -1].set(path.t_end)
    ts = jnp.where(path.valid, path.ts, jnp.inf)
    index = jax.vmap(lambda row, t: jnp.searchsorted(row, t, side="right"))(ts, targets)
    index = jnp.clip(index - 1, 0, every.shape[1] - 1)
    return jnp.take_along_axis(every, index[..., None], axis=1)


def ltc_closed_form_step(
    cell: LTCVectorField,
    h: Float[Array, "*batch hidden_size"],
    x: Float[Array, "*batch input_size"],
    dt: Float[Array, "*batch"] | float,
) -> Float[Array, "*batch hidden_size"]:
    r"""The direct closed-form approximation of an LTC's solution over `dt`
    (Hasani et al. 2022, Eq. 5), with `cell`'s own parameters:

    $$h(t + \Delta t) \approx (h - A) \odot e^{-(1/\tau + f(h, x))\,\Delta t}
        \odot f(-h, -x) + A,$$

    $f(h, x) = \sigma(W_\text{in} x + W_\text{rec} h + b)$ the LTC's gate and
    $f(-h, -x)$ the same gate with its arguments negated (the bias kept); the
    input `x` is held over the step. Where the gate is a constant $f$, the exact
    solution is $h_\infty + (h - h_\infty) e^{-(1/\tau + f)\Delta t}$ with
    $h_\infty = f A / (1/\tau + f)$: the closed form has its decay rate, but
    relaxes towards $A$, and scales the initial gap by $f(-h, -x)$. It is an
    approximation; `python -m experiments.cfc_versus_ltc` measures its error
    against the ODE.

    **Arguments:** `cell`: an [`ltc_jax.LTCVectorField`][] (both gates are its
    `gate`, so a `matmul_dtype` rounds their products' operands alike); `h`,
    `x`: states and inputs with shared leading batch axes; `dt`: the step (time
    units), a scalar or one per sequence.

    **Returns:** the approximate state after `dt`, shaped like `h`, in its
    dtype (`dt` is cast to it).

    **Raises:** `AttributeError` for a field that is not an
    `LTCVectorField` (it reads `weight_in`, `weight_rec`, `bias`, `tau`, `A`).
    """

    f = cell.gate(h, x)
    negated = cell.gate(-h, -x)  # sigma(-W_in x - W_rec h + b): the bias kept
    dt = jnp.broadcast_to(jnp.asarray(dt, h.dtype), h.shape[:-1])[..., None]
    A, tau = (_rows_like(v, h) for v in (cell.A, cell.tau))
    return (h - A) * jnp.exp(-(1 / tau + f) * dt) * negated + A
