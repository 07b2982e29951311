"""The LTC vector fields of Hasani et al. (2021), as diffrax-compatible Equinox
modules."""

import abc
import math
from collections.abc import Callable
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from ._custom_types import AbstractInput


GateBiasInit = Literal["zero", "chrono"]
"""How [`ltc_jax.LTCVectorField`][] initialises its gate's bias."""


def inverse_softplus(y: ArrayLike) -> Array:
    """The inverse of `jax.nn.softplus`, for `y > 0`: `log(exp(y) - 1)`, computed
    stably."""
    y = jnp.asarray(y)
    return y + jnp.log(-jnp.expm1(-y))


def over_batch(fn: Callable[..., Any], *arrays: Array) -> Any:
    """Apply `fn`, written for one sequence (vectors on the last axis), to arrays
    that share any number of leading batch axes, by `jax.vmap` over each of them.

    This keeps the maths of the fields as the papers write it, for one state
    vector, and every broadcast explicit (the tests run under strict rank
    promotion)."""
    for _ in range(arrays[0].ndim - 1):
        fn = jax.vmap(fn)
    return fn(*arrays)


class AbstractLTCField(eqx.Module):
    """A vector field in LTC form, `dh/dt = drive(h, x) - decay(h, x) * h` with
    `decay >= 0`, driven by an input path.

    Subclasses implement `drive_and_decay(y, x)` for one sequence (`y` of shape
    `(hidden_size,)`, `x` of shape `(input_size,)`). This base derives from it the
    diffrax call `(t, y, args)`, with `args.evaluate(t)` the input, and the pair
    `(dh/dt, decay)` that [`ltc_jax.FusedLTC`][] steps with; both accept states
    with leading batch axes, `(*batch, hidden_size)`, and map over them with
    `jax.vmap`. Being an `AbstractLTCField` is what "LTC form" means in ltc_jax:
    [`ltc_jax.integrate`][] gives such a field a term the fused step accepts.
    """

    @abc.abstractmethod
    def drive_and_decay(
        self, y: Float[Array, " hidden_size"], x: Float[Array, " input_size"]
    ) -> tuple[Float[Array, " hidden_size"], Float[Array, " hidden_size"]]:
        """`(drive, decay)` of one sequence, each shaped like `y`."""

    def decay_bound(self) -> Float[Array, ""]:
        """An upper bound on `decay` over every state and input, in 1 / time
        units: the fastest rate at which any unit can decay. It bounds how fast
        errors grow in a reverse solve ([`ltc_jax.training.default_windows`][]) and how
        large an explicit step may be. Subclasses override it.

        **Raises:** `NotImplementedError` where a field does not provide one.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not bound its decay rate; implement "
            "decay_bound(), or pass the windowed adjoint an explicit windows=K."
        )

    def state_bounds(
        self,
    ) -> tuple[Float[Array, " hidden_size"], Float[Array, " hidden_size"]] | None:
        """`(low, high)` per unit: a box the exact solution never leaves once its
        state is inside (with the initial state widening it where that lies
        outside). [`ltc_jax.integrate`][] checks the saved states against it
        (with a margin of the box's width for the solver's own error), so that
        a step that diverges to a finite value is an error, not a result.
        `None` where a field does not provide one (nothing is checked)."""
        return None

    def dynamics(
        self,
        y: Float[Array, "*batch hidden_size"],
        x: Float[Array, "*batch input_size"],
    ) -> Float[Array, "*batch hidden_size"]:
        """$dh/dt$ at state `y` under input `x` (any leading batch axes, shared by
        both)."""
        return self.derivative_and_decay_at(y, x)[0]

    def derivative_and_decay_at(
        self,
        y: Float[Array, "*batch hidden_size"],
        x: Float[Array, "*batch input_size"],
    ) -> tuple[Float[Array, "*batch hidden_size"], Float[Array, "*batch hidden_size"]]:
        """`(dh/dt, decay)` at state `y` under input `x` (any leading batch axes)."""

        def one(y, x):
            drive, decay = self.drive_and_decay(y, x)
            return drive - decay * y, decay

        return over_batch(one, y, x)

    def __call__(
        self, t: ArrayLike, y: Float[Array, "*batch hidden_size"], args: AbstractInput
    ) -> Float[Array, "*batch hidden_size"]:
        """**Arguments:**

        - `t`: time, a scalar (or one time per batch element, as `args` expects),
            in the unit of the observation times.
        - `y`: the state, shape `(*batch, hidden_size)`.
        - `args`: the input path; `args.evaluate(t)` must return $x(t)$ of shape
            `(*batch, input_size)`.

        **Returns:** $dh/dt$, shaped like `y`.
        """
        return self.dynamics(y, args.evaluate(t))

    def derivative_and_decay(
        self, t: ArrayLike, y: Float[Array, "*batch hidden_size"], args: AbstractInput
    ) -> tuple[Float[Array, "*batch hidden_size"], Float[Array, "*batch hidden_size"]]:
        """`(dh/dt, decay)` at time `t` (arguments as `__call__`)."""
        return self.derivative_and_decay_at(y, args.evaluate(t))


class LTCVectorField(AbstractLTCField):
    r"""The liquid time-constant vector field of Hasani et al. (2021), Eq. 1.

    $$\frac{dh}{dt} = -\Big(\frac{1}{\tau} + f\Big) \odot h + f \odot A,
    \qquad f = \sigma\big(W_\text{in}\, x(t) + W_\text{rec}\, h + b\big),$$

    the form the original write-up uses (equal to
    $-h/\tau + (A - h) \odot f$). $\sigma$ is the logistic sigmoid, so $0 < f < 1$ and
    the system time constant $\tau_\text{sys} = \tau / (1 + \tau f)$ varies with the
    input: that is the "liquid" time constant. $\tau > 0$ by construction:
    $\tau = \mathrm{softplus}(\tau_\text{raw}) + \tau_\text{min}$, so an optimiser
    step can never make it negative and nothing is clipped after a step.

    Called as `vector_field(t, y, args)`, like any diffrax vector field, where `args`
    is the input path: any object whose `evaluate(t)` returns $x(t)$ (for one
    sequence, `diffrax.LinearInterpolation(ts, xs)`). The maths is written on the
    last axis only, so `y` may carry leading batch axes (`(batch, hidden_size)` with
    `x(t)` of shape `(batch, input_size)`); a batch size equal to `hidden_size`
    cannot be confused with the unit axis.

    Time is in the unit of the timestamps you pass: `tau` is measured in that unit,
    and so is the gate, a rate of at most 1 per time unit.

    **The gate sets the memory.** A unit decays at rate $1/\tau + f$, so with the
    gate's bias at zero ($f \approx 1/2$) every unit forgets within about two
    time units whatever its $\tau$, and `tau_init` barely matters.
    `gate_bias_init="chrono"` sets each unit's bias to
    $b = \operatorname{logit}(\min(1/2, 1/\tau))$ instead: with the input and the
    state at zero the gate is then $\min(1/2, 1/\tau)$, a unit of $\tau \ge 2$
    relaxes at rate $2/\tau$ and its memory spans $\tau/2$, so the units'
    memories at initialisation follow the time constants `tau_init` spans.
    This is the chrono initialisation of Tallec & Ollivier (2018), "Can
    recurrent neural networks warp time?", ICLR, which sets an LSTM's
    forget-gate biases from the time scales to be remembered. The docs'
    benchmark page measures it against the zero bias.

    **Fields:**

    - `weight_in`: `Float[Array, "hidden_size input_size"]`, $W_\text{in}$.
    - `weight_rec`: `Float[Array, "hidden_size hidden_size"]`, $W_\text{rec}$.
    - `bias`: `Float[Array, "hidden_size"]`, $b$.
    - `tau_raw`: `Float[Array, "hidden_size"]`, unconstrained; see `tau`.
    - `A`: `Float[Array, "hidden_size"]`, one bias (reversal) value per unit.
    - `tau_min`: static Python float $\ge 0$, a floor added to $\tau$ (time
        units).
    - `gate_bias_init`: static, `"zero"` or `"chrono"`: how `bias` was
        initialised (see above); it is a record, the trained `bias` is a
        parameter like any other.
    - `matmul_dtype`: static, `None` or a float dtype name such as
        `"bfloat16"`: the dtype of the gate's two matrix products (mixed
        precision), which accumulate in the state's dtype.

    ??? cite "Reference"

        ```bibtex
        @inproceedings{hasani2021liquid,
            title={Liquid Time-constant Networks},
            author={Hasani, Ramin and Lechner, Mathias and Amini, Alexander and
                    Rus, Daniela and Grosu, Radu},
            booktitle={AAAI Conference on Artificial Intelligence},
            volume={35}, number={9}, pages={7657--7666}, year={2021}
        }
        ```
    """

    weight_in: Float[Array, "hidden_size input_size"]
    weight_rec: Float[Array, "hidden_size hidden_size"]
    bias: Float[Array, " hidden_size"]
    tau_raw: Float[Array, " hidden_size"]
    A: Float[Array, " hidden_size"]
    # A fixed hyperparameter, not a parameter: static, so that no transformation
    # (`jax.device_put`, a dtype cast, a gradient) turns it into an array.
    tau_min: float = eqx.field(static=True)
    input_size: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)
    matmul_dtype: str | None = eqx.field(static=True)
    gate_bias_init: str = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        tau_init: tuple[float, float] = (0.1, 10.0),
        tau_min: float = 0.0,
        gate_bias_init: GateBiasInit = "zero",
        dtype=None,
        matmul_dtype: str | None = None,
        key: PRNGKeyArray,
    ):
        r"""**Arguments:**

        - `input_size`: number of input channels of $x(t)$.
        - `hidden_size`: number of units (the size of $h$).
        - `tau_init`: `(low, high)`; the initial $\tau$ of each unit is drawn
            log-uniformly from this range, in time units. Default `(0.1, 10.0)`, the
            range of the original write-up.
        - `tau_min`: floor on $\tau$ (time units), default 0. A floor bounds the
            stiffness `1/tau`, which a fixed-step explicit solver needs for stability.
        - `gate_bias_init`: `"zero"` (default, the original write-up's) or
            `"chrono"`: the gate's bias $b = \operatorname{logit}(\min(1/2,
            1/\tau))$ per unit, from its initial $\tau$ (see above).
        - `dtype`: floating dtype of the parameters; default JAX's default float
            (float32, or float64 under `jax_enable_x64`).
        - `matmul_dtype`: mixed precision: the gate's products $W_\text{in} x$
            and $W_\text{rec} h$ take their operands in this dtype (say
            `"bfloat16"`, which GPUs and TPUs multiply fastest) and accumulate
            in the state's; everything else (the state, the solver, the loss,
            the gradients and the optimiser) keeps the parameters' dtype.
            Default `None`: no cast.
        - `key`: a `jax.random.PRNGKey`.

        **Raises:**

        - `ValueError` if a size is not positive, if `tau_init` is not
            `0 <= tau_min < low <= high`, if `gate_bias_init` is not `"zero"`
            or `"chrono"`, or if `matmul_dtype` is not a float dtype.
        """
        if matmul_dtype is not None and not jnp.issubdtype(
            jnp.dtype(matmul_dtype), jnp.floating
        ):
            raise ValueError(
                f"matmul_dtype must be a float dtype such as 'bfloat16'; got "
                f"{matmul_dtype!r}."
            )
        if matmul_dtype is not None:
            matmul_dtype = jnp.dtype(matmul_dtype).name
        self.matmul_dtype = matmul_dtype
        if input_size < 1 or hidden_size < 1:
            raise ValueError(
                f"input_size and hidden_size must be positive; got {input_size} and "
                f"{hidden_size}."
            )
        low, high = tau_init
        if not 0.0 <= tau_min < low <= high:
            raise ValueError(
                "Need 0 <= tau_min < tau_init[0] <= tau_init[1]; got "
                f"tau_min={tau_min}, "
                f"tau_init={tau_init}."
            )
        if gate_bias_init not in ("zero", "chrono"):
            raise ValueError(
                f"gate_bias_init must be 'zero' or 'chrono'; got {gate_bias_init!r}."
            )
        dtype = jnp.zeros(()).dtype if dtype is None else dtype
        k_in, k_rec, k_tau, k_a = jr.split(key, 4)
        lim_in = 1.0 / math.sqrt(input_size)
        lim_rec = 1.0 / math.sqrt(hidden_size)
        self.weight_in = jr.uniform(
            k_in, (hidden_size, input_size), dtype, -lim_in, lim_in
        )
        self.weight_rec = jr.uniform(
            k_rec, (hidden_size, hidden_size), dtype, -lim_rec, lim_rec
        )
        self.gate_bias_init = gate_bias_init
        log_tau = jr.uniform(
            k_tau, (hidden_size,), dtype, math.log(low), math.log(high)
        )
        self.tau_raw = inverse_softplus(jnp.exp(log_tau) - tau_min)
        if gate_bias_init == "chrono":
            # The gate at zero input and state: 1/tau, at most 1/2.
            rate = jnp.minimum(0.5, jnp.exp(-log_tau))
            self.bias = jnp.log(rate) - jnp.log1p(-rate)
        else:
            self.bias = jnp.zeros((hidden_size,), dtype)
        self.A = jr.normal(k_a, (hidden_size,), dtype)
        self.tau_min = float(tau_min)
        self.input_size = input_size
        self.hidden_size = hidden_size

    @property
    def tau(self) -> Float[Array, " hidden_size"]:
        """The time constant of each unit, `softplus(tau_raw) + tau_min` (time
        units)."""
        return jax.nn.softplus(self.tau_raw) + self.tau_min

    def decay_bound(self) -> Float[Array, ""]:
        """`1 / min(tau) + 1`: the decay `1/tau + f` with the gate `f < 1`
        (1 / time units)."""
        return 1 / jnp.min(self.tau) + 1

    def state_bounds(
        self,
    ) -> tuple[Float[Array, " hidden_size"], Float[Array, " hidden_size"]]:
        """`(min(0, A), max(0, A))`: Hasani et al. (2021), Theorem 2. Above
        `max(0, A)` both `-h/tau` and `(A - h) f` are negative, below `min(0, A)`
        both positive, so no solution crosses out of the box."""
        zero = jnp.zeros_like(self.A)
        return jnp.minimum(zero, self.A), jnp.maximum(zero, self.A)

    def gate(
        self,
        y: Float[Array, "*batch hidden_size"],
        x: Float[Array, "*batch input_size"],
    ) -> Float[Array, "*batch hidden_size"]:
        """The gate $f = \\sigma(W_\\text{in} x + W_\\text{rec} h + b)$, in (0, 1), of
        states `y` under inputs `x` with any leading batch axes (shared by both).

        The products are matrix products over the whole batch, `x @ W_in.T`:
        matrix-vector products mapped over its sequences (`jax.vmap`) cost
        about a tenth more per training step in `checkpoint`, `full` and
        `backsolve` at the original write-up's size on a 2-core Intel Xeon
        (`benchmarks.overhead`)."""

        def product(v, weight):
            if self.matmul_dtype is None:
                return v @ weight.T
            low = jnp.dtype(self.matmul_dtype)
            return jnp.matmul(
                v.astype(low), weight.T.astype(low), preferred_element_type=v.dtype
            )

        pre = product(x, self.weight_in) + product(y, self.weight_rec)
        return jax.nn.sigmoid(pre + _rows_like(self.bias, pre))

    def drive_and_decay(
        self,
        y: Float[Array, "*batch hidden_size"],
        x: Float[Array, "*batch input_size"],
    ) -> tuple[Float[Array, "*batch hidden_size"], Float[Array, "*batch hidden_size"]]:
        """Split the field as `dh/dt = drive - decay * h`, for one sequence or
        with any leading batch axes (shared by `y` and `x`).

        **Returns:** `(drive, decay) = (f * A, 1/tau + f)`, each shaped like `y`.
        `1/decay` is the system time constant $\\tau_\\text{sys}$. The fused
        semi-implicit step and the Theorem 2 state bound both use this split.
        """
        f = self.gate(y, x)
        return f * _rows_like(self.A, f), _rows_like(1.0 / self.tau, f) + f

    def derivative_and_decay_at(
        self,
        y: Float[Array, "*batch hidden_size"],
        x: Float[Array, "*batch input_size"],
    ) -> tuple[Float[Array, "*batch hidden_size"], Float[Array, "*batch hidden_size"]]:
        """`(dh/dt, decay)` at state `y` under input `x`, on the whole batch at
        once (see `gate`)."""
        drive, decay = self.drive_and_decay(y, x)
        return drive - decay * y, decay


def _rows_like(
    v: Float[Array, " size"], like: Float[Array, "*batch size"]
) -> Float[Array, "*ones size"]:
    """`v` with a leading axis of 1 for each batch axis of `like`, to broadcast
    against it under strict rank promotion."""
    return v.reshape((1,) * (like.ndim - 1) + v.shape)


_BIOPHYSICAL_INIT = dict(
    gleak=(0.001, 1.0),
    vleak=(-0.2, 0.2),
    cm=(0.4, 0.6),
    w=(0.001, 1.0),
    sigma=(3.0, 8.0),
    mu=(0.3, 0.8),
)


class BiophysicalLTCVectorField(AbstractLTCField):
    r"""The biophysical LTC cell of the original authors (Hasani et al. 2021;
    Lechner et al. 2020, the `ncps` package), as a diffrax-compatible vector field.

    $$c_m \frac{dv_i}{dt} = g_\text{leak}(v_\text{leak} - v_i)
        + \sum_j w_{ji}\, s\big(\sigma_{ji}(v_j - \mu_{ji})\big)(E_{ji} - v_i)
        + \sum_k \hat w_{ki}\, s\big(\hat\sigma_{ki}(\hat x_k - \mu_{ki})\big)
            (\hat E_{ki} - v_i)$$

    with $s$ the logistic sigmoid, $j$ over presynaptic neurons and $k$ over input
    channels (sensory synapses, hats), only where the wiring has a synapse, and
    $\hat x = x \odot w_\text{in} + b_\text{in}$ the affine input mapping. Grouped
    as `dv/dt = drive - decay * v`:
    `drive = (gleak * vleak + sum g E) / cm` and `decay = (gleak + sum g) / cm`,
    where `g` are the synaptic conductances (recurrent and sensory).

    **Relation to [`ltc_jax.LTCVectorField`][]** (`dh/dt = -(1/tau + f) h + f A`):
    `1/tau` <-> `gleak / cm` (the leak), `f` <-> `sum g / cm` (the input- and
    state-dependent conductance), `f * A` <-> `sum g E / cm`: the single gate
    becomes one sigmoid per synapse and `A` one reversal potential `E` per synapse;
    the leak adds a constant drive `gleak * vleak / cm`.

    **Positivity:** `cm`, `gleak`, `w` and `sensory_w` are `softplus` of raw
    parameters, so no optimiser step can make them negative and nothing is clipped
    (the original code clips after each step). `erev` and `sensory_erev` start at
    the wiring's polarities (+-1) and are trained, as in the original.

    **Initial values** (the original authors' ranges): `gleak` U(0.001, 1),
    `vleak` U(-0.2, 0.2), `cm` U(0.4, 0.6), `w` U(0.001, 1), `sigma` U(3, 8),
    `mu` U(0.3, 0.8); sensory synapses the same as their recurrent counterparts;
    input mapping `w_in = 1`, `b_in = 0`.

    Time is in the unit of your timestamps. The wiring's masks are integer arrays,
    never trained. The maths is written for one sequence and mapped over leading
    batch axes (`y`: `(*batch, hidden_size)`), so any batch size works, including
    one equal to `hidden_size`.

    **Fields:** recurrent synapses are indexed `[pre, post]` (from unit `j` to
    unit `i`), sensory ones `[channel, post]`; `*_raw` are the parameters before
    the softplus (`gleak = softplus(gleak_raw)`, as the properties give them).

    - `gleak_raw`, `vleak`, `cm_raw`: `(hidden_size,)`, the leak conductance, the
        leak reversal potential and the membrane capacitance.
    - `w_raw`, `sigma`, `mu`, `erev`: `(hidden_size, hidden_size)`, each
        recurrent synapse's maximal conductance, the steepness and midpoint (in
        presynaptic potential) of its sigmoid, and its reversal potential
        (starting at the wiring's polarity).
    - `sensory_w_raw`, `sensory_sigma`, `sensory_mu`, `sensory_erev`:
        `(input_size, hidden_size)`, the same for the sensory synapses, whose
        midpoint is in the mapped input `x * input_w + input_b`.
    - `input_w`, `input_b`: `(input_size,)`, the affine input mapping.
    - `mask`, `sensory_mask`: the wiring's synapses, 1 where one exists and 0
        elsewhere (integers, never trained).
    - static `input_size`, `hidden_size`.
    """

    gleak_raw: Float[Array, " hidden_size"]
    vleak: Float[Array, " hidden_size"]
    cm_raw: Float[Array, " hidden_size"]
    w_raw: Float[Array, "hidden_size hidden_size"]
    sigma: Float[Array, "hidden_size hidden_size"]
    mu: Float[Array, "hidden_size hidden_size"]
    erev: Float[Array, "hidden_size hidden_size"]
    sensory_w_raw: Float[Array, "input_size hidden_size"]
    sensory_sigma: Float[Array, "input_size hidden_size"]
    sensory_mu: Float[Array, "input_size hidden_size"]
    sensory_erev: Float[Array, "input_size hidden_size"]
    input_w: Float[Array, " input_size"]
    input_b: Float[Array, " input_size"]
    mask: Array
    sensory_mask: Array
    input_size: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)

    def __init__(self, wiring, *, dtype=None, key: PRNGKeyArray):
        """**Arguments:**

        - `wiring`: an [`ltc_jax.wirings.Wiring`][] (e.g. from
            [`ltc_jax.wirings.make_wiring`][]); gives the hidden size, the input size,
            the synapses and their polarities.
        - `dtype`: floating dtype of the parameters (default: JAX's default float).
        - `key`: a `jax.random.PRNGKey`.
        """
        dtype = jnp.zeros(()).dtype if dtype is None else dtype
        units, inputs = wiring.hidden_size, wiring.input_size
        keys = iter(jr.split(key, 9))

        def uniform(name, shape):
            low, high = _BIOPHYSICAL_INIT[name]
            return jr.uniform(next(keys), shape, dtype, low, high)

        self.gleak_raw = inverse_softplus(uniform("gleak", (units,)))
        self.vleak = uniform("vleak", (units,))
        self.cm_raw = inverse_softplus(uniform("cm", (units,)))
        self.w_raw = inverse_softplus(uniform("w", (units, units)))
        self.sigma = uniform("sigma", (units, units))
        self.mu = uniform("mu", (units, units))
        self.erev = jnp.asarray(wiring.adjacency, dtype)
        self.sensory_w_raw = inverse_softplus(uniform("w", (inputs, units)))
        self.sensory_sigma = uniform("sigma", (inputs, units))
        self.sensory_mu = uniform("mu", (inputs, units))
        self.sensory_erev = jnp.asarray(wiring.sensory_adjacency, dtype)
        self.input_w = jnp.ones((inputs,), dtype)
        self.input_b = jnp.zeros((inputs,), dtype)
        self.mask = jnp.asarray(wiring.adjacency != 0, jnp.int8)
        self.sensory_mask = jnp.asarray(wiring.sensory_adjacency != 0, jnp.int8)
        self.input_size = inputs
        self.hidden_size = units

    @property
    def cm(self) -> Float[Array, " hidden_size"]:
        """Membrane capacitance, positive."""
        return jax.nn.softplus(self.cm_raw)

    @property
    def gleak(self) -> Float[Array, " hidden_size"]:
        """Leak conductance, positive."""
        return jax.nn.softplus(self.gleak_raw)

    @property
    def w(self) -> Float[Array, "hidden_size hidden_size"]:
        """Maximum synaptic conductances `w[pre, post]`, positive (zero-effect
        where the wiring has no synapse)."""
        return jax.nn.softplus(self.w_raw)

    @property
    def sensory_w(self) -> Float[Array, "input_size hidden_size"]:
        """Maximum sensory conductances `sensory_w[channel, post]`, positive."""
        return jax.nn.softplus(self.sensory_w_raw)

    def decay_bound(self) -> Float[Array, ""]:
        """The largest `(gleak + sum w + sum sensory_w) / cm` over the units: the
        decay with every synapse fully open (1 / time units)."""
        recurrent = jnp.sum(self.w * self.mask.astype(self.w.dtype), axis=0)
        sensory = jnp.sum(
            self.sensory_w * self.sensory_mask.astype(self.w.dtype), axis=0
        )
        return jnp.max((self.gleak + recurrent + sensory) / self.cm)

    def state_bounds(
        self,
    ) -> tuple[Float[Array, " hidden_size"], Float[Array, " hidden_size"]]:
        """The smallest and largest of `vleak` and the reversal potentials of the
        synapses onto each unit: `cm dv/dt` is a sum of non-negative conductances
        times `(E - v)` for those potentials `E`, which pulls `v` towards them."""
        recurrent = self.mask != 0
        sensory = self.sensory_mask != 0
        inf = jnp.asarray(jnp.inf, self.vleak.dtype)

        def extreme(reduce, fill):
            pre = reduce(jnp.where(recurrent, self.erev, fill), axis=0)
            channel = reduce(jnp.where(sensory, self.sensory_erev, fill), axis=0)
            return reduce(jnp.stack([self.vleak, pre, channel]), axis=0)

        return extreme(jnp.min, inf), extreme(jnp.max, -inf)

    def drive_and_decay(
        self, y: Float[Array, " hidden_size"], x: Float[Array, " input_size"]
    ) -> tuple[Float[Array, " hidden_size"], Float[Array, " hidden_size"]]:
        """Split the field of one sequence as `dv/dt = drive - decay * v`.

        **Returns:** `(drive, decay)`, each shaped like `y`:
        `drive = (gleak * vleak + sum g E) / cm`, `decay = (gleak + sum g) / cm`.
        """
        dtype = y.dtype
        x = x * self.input_w + self.input_b
        sensory = (
            self.sensory_w
            * jax.nn.sigmoid(self.sensory_sigma * (x[:, None] - self.sensory_mu))
            * self.sensory_mask.astype(dtype)
        )  # (input_size, hidden_size): [channel, post]
        synaptic = (
            self.w
            * jax.nn.sigmoid(self.sigma * (y[:, None] - self.mu))
            * self.mask.astype(dtype)
        )  # (hidden_size, hidden_size): [pre, post]
        conductance = jnp.sum(synaptic, axis=0) + jnp.sum(sensory, axis=0)
        reversal = jnp.sum(synaptic * self.erev, axis=0) + jnp.sum(
            sensory * self.sensory_erev, axis=0
        )
        cm, gleak = self.cm, self.gleak
        return (gleak * self.vleak + reversal) / cm, (gleak + conductance) / cm
