"""Terminating events: a solve that stops where a readout of its state crosses a
threshold, at a time located by root finding and differentiable."""

from collections.abc import Callable
from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Float


Direction = Literal["up", "down", "either"]


class _BracketState(eqx.Module):
    lower: Array
    upper: Array
    flip: Array
    error: Array
    step: Array


class SafeguardedNewton(optx.AbstractRootFinder):
    """Newton's method kept inside a shrinking bracket of the root: each
    iteration evaluates the function and its derivative at `y`, keeps the half
    of `[lower, upper]` where the sign changes (as bisection does), and takes
    the Newton step where it lands inside that bracket and at least halves the
    last step, else the bracket's midpoint; a zero of the function closes the
    bracket on it. It converges where plain Newton cycles or leaves the interval (a
    readout that flattens or curves back within a solver step), quadratically
    near a simple root. Stops when the last step is within `atol + rtol * |y|`
    and the function within `atol`, or when the bracket is that small. A
    bracket without a sign change (a sequence whose event did not fire, which
    diffrax's root find still visits under `vmap`) shrinks to an endpoint
    without error.

    Source: the safeguarded Newton-bisection of Press et al., *Numerical
    Recipes* (3rd ed., 2007), Sec. 9.4 (`rtsafe`), as an
    `optimistix.AbstractRootFinder` of scalar functions with `options`
    `lower` and `upper`.
    """

    rtol: float
    atol: float
    norm = staticmethod(jnp.abs)

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        lower = jnp.asarray(options["lower"], jnp.result_type(y))
        upper = jnp.asarray(options["upper"], jnp.result_type(y))
        lower_value, _ = fn(lower, args)
        upper_value, _ = fn(upper, args)
        return _BracketState(
            lower=lower,
            upper=upper,
            flip=lower_value > upper_value,
            error=jnp.array(jnp.inf, f_struct.dtype),
            step=jnp.array(jnp.inf, jnp.result_type(y)),
        )

    def step(self, fn, y, args, options, state, tags):
        (value, aux), (slope, _) = jax.jvp(
            lambda t: fn(t, args), (y,), (jnp.ones_like(y),)
        )
        below = state.flip ^ (value < 0)
        hit = value == 0  # the root itself: the bracket closes on it
        lower = jnp.where(below | hit, y, state.lower)
        upper = jnp.where(below & ~hit, state.upper, y)
        newton = y - (value / jnp.where(slope == 0, 1, slope)).astype(y.dtype)
        inside = (slope != 0) & jnp.isfinite(newton)
        inside = inside & (newton > jnp.minimum(lower, upper))
        inside = inside & (newton < jnp.maximum(lower, upper))
        # As rtsafe: Newton only where it at least halves the last step, so a
        # flat or multiple root does not crawl one-sidedly.
        inside = inside & (jnp.abs(newton - y) < 0.5 * state.step)
        new_y = jnp.where(inside, newton, lower + 0.5 * (upper - lower))
        new_y = jnp.where(hit, y, new_y)
        new_state = _BracketState(
            lower=lower,
            upper=upper,
            flip=state.flip,
            error=value,
            step=jnp.abs(new_y - y),
        )
        return new_y, new_state, aux

    def terminate(self, fn, y, args, options, state, tags):
        scale = self.atol + self.rtol * jnp.abs(y)
        converged = (state.step < scale) & (jnp.abs(state.error) < self.atol)
        small = jnp.abs(state.upper - state.lower) < scale
        return converged | small, optx.RESULTS.successful

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return y, aux, {}


# The adjoints whose event times diffrax differentiates: those that
# backpropagate through the forward solve. A reverse solve
# (`BacksolveAdjoint`, and the windowed adjoint built on it) raises
# `NotImplementedError` inside diffrax 0.7.2 when given an event.
EVENT_ADJOINTS = ("checkpoint", "full", "direct")

_DIRECTIONS = {"up": True, "down": False, "either": None}


class Crossing(eqx.Module):
    """A terminating event: each sequence's solve stops where a scalar readout
    of its state crosses `threshold`. Public as `ltc_jax.Crossing`; pass it to
    [`ltc_jax.integrate`][] or an [`ltc_jax.LTC`][]'s `solve` as `event`.

    The crossing is located by root finding (Newton's method kept inside a
    shrinking bracket, `SafeguardedNewton`, on the solver's dense output within
    the step where the sign changed), so its time is a
    differentiable function of the parameters (by the implicit function
    theorem, as `diffrax.Event` computes it): train an event time against an
    observed one, as a time-to-event model does.

    **Fields:**

    - `threshold`: the level, in the readout's units (stored as a scalar array,
        an argument of a compiled solve: a new level does not recompile, and
        its derivative is taken like a parameter's).
    - `readout`: called on one sequence's state, `(hidden_size,)` -> scalar.
        Default `None`: unit `unit` of the state. For a readout with
        parameters, pass a module (an `eqx.Module`, or `eqx.Partial(fn,
        module)`) so that its parameters are arrays of the `Crossing`, traced
        and differentiated; a plain `lambda` closing over a model is static
        under `eqx.filter_jit` (its parameters baked in at tracing) and not
        differentiated.
    - `unit`: the unit read without a `readout` (default 0).
    - `direction`: `"up"` (from below `threshold` to above), `"down"`, or
        `"either"` (default). A readout exactly at the threshold at the
        start counts as a crossing there (the zero state crosses a threshold
        of 0 at once).
    - `rtol`, `atol`: the root finder's tolerances on the event time, in the
        solve's clock units (solver steps with fixed steps, time units with
        adaptive ones); default `None`: 100 times the clock's float epsilon.
        `atol` also bounds the readout's distance from the threshold at the
        root, relative to `1 + |threshold|` (the root finder asks both, or a
        bracket that small), so a reading in large units is located to its own
        precision.

    This is `diffrax.Event(cond_fn, root_finder, direction)` with `cond_fn`
    the readout minus the threshold on one sequence's state; `event_fired` of
    the trajectory is diffrax's `event_mask`. Its sign is compared at the
    ends of each solver step, so an excursion that crosses the threshold and
    returns within one step is not seen (the next crossing, or none, is
    reported): to catch one of duration `d`, use fixed steps shorter than
    `d`.

    **Raises:** `ValueError` for an unknown `direction`, a `threshold` that is
    not a scalar, or one that is not finite (where it is known: not under
    `jax.jit`) (on construction), a `unit` outside the state or a `readout`
    that does not return a scalar (when solved).

    Source: `diffrax.Event` (Kidger 2021; Chen, Amos & Nickel 2021, "Learning
    neural event functions for ordinary differential equations"), with a
    safeguarded Newton root finder (Press et al. 2007, Sec. 9.4) in place of
    `optimistix.Newton`, which cycled, or reported a time 0.15 late, where
    Tsit5's dense output curves within a long step (a test).
    """

    threshold: Float[Array, ""] = eqx.field(converter=jnp.asarray)
    readout: Callable[[Float[Array, " hidden"]], Float[Array, ""]] | None = None
    unit: int = eqx.field(static=True, default=0)
    direction: Direction = eqx.field(static=True, default="either")
    rtol: float | None = eqx.field(static=True, default=None)
    atol: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.direction not in _DIRECTIONS:
            raise ValueError(
                f"direction must be 'up', 'down' or 'either'; got {self.direction!r}."
            )
        if self.threshold.shape != ():
            raise ValueError(
                "A Crossing's threshold is one level (a scalar); got shape "
                f"{self.threshold.shape}."
            )
        if not isinstance(self.threshold, jax.core.Tracer) and not jnp.isfinite(
            self.threshold
        ):
            raise ValueError(
                f"A Crossing's threshold must be finite; got {self.threshold}."
            )

    def value(self, y: Float[Array, " hidden"]) -> Float[Array, ""]:
        """The readout of one sequence's state minus the threshold: the event
        fires where this changes sign."""
        if self.readout is None:
            if not 0 <= self.unit < y.shape[-1]:
                raise ValueError(
                    f"unit {self.unit} is not a unit of a state of {y.shape[-1]} units."
                )
            read = y[self.unit]
        else:
            read = jnp.asarray(self.readout(y))
            if read.shape != ():
                raise ValueError(
                    f"A Crossing's readout must return a scalar; got shape "
                    f"{read.shape}."
                )
        return read - self.threshold.astype(read.dtype)

    def diffrax_event(self, clock_dtype) -> diffrax.Event:
        """The `diffrax.Event` of a solve of one sequence, whose state carries a
        batch axis of size 1."""
        tolerance = 100 * float(jnp.finfo(clock_dtype).eps)
        rtol = tolerance if self.rtol is None else self.rtol
        atol = tolerance if self.atol is None else self.atol

        def condition(t, y, args, **kwargs):
            # Relative to the threshold's size: the root finder also asks that
            # |condition| < atol, which a reading near a large threshold meets
            # only in units of it. The root, and the event time's derivatives
            # (the implicit function theorem at the root), are unchanged.
            value = self.value(y[0])
            value = value / (1 + jnp.abs(self.threshold.astype(value.dtype)))
            # In JAX's default float: diffrax's root finder selects between
            # this and a Python 0.0 with `lax.cond`, whose branches must agree
            # (a float32 solve under `jax_enable_x64` would not).
            return value.astype(jnp.result_type(float))

        return diffrax.Event(
            condition,
            root_finder=SafeguardedNewton(rtol=rtol, atol=atol),
            direction=_DIRECTIONS[self.direction],
        )
