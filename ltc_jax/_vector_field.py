"""The LTC vector field of Hasani et al. (2021), as a diffrax-compatible Equinox module."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from ._custom_types import AbstractInput


def inverse_softplus(y: ArrayLike) -> Array:
    """The inverse of `jax.nn.softplus`, for `y > 0`: `log(exp(y) - 1)`, computed stably."""
    y = jnp.asarray(y)
    return y + jnp.log(-jnp.expm1(-y))


class LTCVectorField(eqx.Module):
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

    Time is in the unit of the timestamps you pass: `tau` is measured in that unit.

    **Fields:**

    - `weight_in`: `Float[Array, "hidden_size input_size"]`, $W_\text{in}$.
    - `weight_rec`: `Float[Array, "hidden_size hidden_size"]`, $W_\text{rec}$.
    - `bias`: `Float[Array, "hidden_size"]`, $b$.
    - `tau_raw`: `Float[Array, "hidden_size"]`, unconstrained; see `tau`.
    - `A`: `Float[Array, "hidden_size"]`, one bias (reversal) value per unit.
    - `tau_min`: Python float $\ge 0$, a floor added to $\tau$.

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
    tau_min: float
    input_size: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        tau_init: tuple[float, float] = (0.1, 10.0),
        tau_min: float = 0.0,
        dtype=None,
        key: PRNGKeyArray,
    ):
        """**Arguments:**

        - `input_size`: number of input channels of $x(t)$.
        - `hidden_size`: number of units (the size of $h$).
        - `tau_init`: `(low, high)`; the initial $\tau$ of each unit is drawn
            log-uniformly from this range, in time units. Default `(0.1, 10.0)`, the
            range of the original write-up.
        - `tau_min`: floor on $\tau$ (time units), default 0. A floor bounds the
            stiffness `1/tau`, which a fixed-step explicit solver needs for stability.
        - `dtype`: floating dtype of the parameters; default JAX's default float
            (float32, or float64 under `jax_enable_x64`).
        - `key`: a `jax.random.PRNGKey`.

        **Raises:**

        - `ValueError` if a size is not positive, or if `tau_init` is not
            `0 <= tau_min < low <= high`.
        """
        if input_size < 1 or hidden_size < 1:
            raise ValueError(
                f"input_size and hidden_size must be positive; got {input_size} and "
                f"{hidden_size}."
            )
        low, high = tau_init
        if not 0.0 <= tau_min < low <= high:
            raise ValueError(
                f"Need 0 <= tau_min < tau_init[0] <= tau_init[1]; got tau_min={tau_min}, "
                f"tau_init={tau_init}."
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
        self.bias = jnp.zeros((hidden_size,), dtype)
        log_tau = jr.uniform(
            k_tau, (hidden_size,), dtype, math.log(low), math.log(high)
        )
        self.tau_raw = inverse_softplus(jnp.exp(log_tau) - tau_min)
        self.A = jr.normal(k_a, (hidden_size,), dtype)
        self.tau_min = float(tau_min)
        self.input_size = input_size
        self.hidden_size = hidden_size

    @property
    def tau(self) -> Float[Array, " hidden_size"]:
        """The time constant of each unit, `softplus(tau_raw) + tau_min` (time units)."""
        return jax.nn.softplus(self.tau_raw) + self.tau_min

    def gate(
        self, y: Float[Array, "*batch hidden_size"], x: Float[Array, "*batch input_size"]
    ) -> Float[Array, "*batch hidden_size"]:
        """The gate $f = \\sigma(W_\\text{in} x + W_\\text{rec} h + b)$, in (0, 1)."""
        return jax.nn.sigmoid(x @ self.weight_in.T + y @ self.weight_rec.T + self.bias)

    def drive_and_decay(
        self, y: Float[Array, "*batch hidden_size"], x: Float[Array, "*batch input_size"]
    ) -> tuple[Float[Array, "*batch hidden_size"], Float[Array, "*batch hidden_size"]]:
        """Split the field as `dh/dt = drive - decay * h`.

        **Returns:** `(drive, decay) = (f * A, 1/tau + f)`, each shaped like `y`.
        `1/decay` is the system time constant $\\tau_\\text{sys}$. The fused
        semi-implicit step and the Theorem 2 state bound both use this split.
        """
        f = self.gate(y, x)
        return f * self.A, 1.0 / self.tau + f

    def dynamics(
        self, y: Float[Array, "*batch hidden_size"], x: Float[Array, "*batch input_size"]
    ) -> Float[Array, "*batch hidden_size"]:
        """$dh/dt$ at state `y` under input `x` (same shapes as `gate`)."""
        drive, decay = self.drive_and_decay(y, x)
        return drive - decay * y

    def __call__(
        self, t: ArrayLike, y: Float[Array, "*batch hidden_size"], args: AbstractInput
    ) -> Float[Array, "*batch hidden_size"]:
        """**Arguments:**

        - `t`: time, a scalar (or one time per batch element, as `args` expects).
        - `y`: the state $h$, shape `(*batch, hidden_size)`.
        - `args`: the input path; `args.evaluate(t)` must return $x(t)$ of shape
            `(*batch, input_size)`.

        **Returns:** $dh/dt$, shaped like `y`.
        """
        return self.dynamics(y, args.evaluate(t))
