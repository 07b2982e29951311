"""Terminating events: a solve that stops where a readout of its state crosses a
threshold, at a time located by root finding and differentiable."""

from collections.abc import Callable
from typing import Literal

import diffrax
import equinox as eqx
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Float


Direction = Literal["up", "down", "either"]

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

    The crossing is located by root finding (Newton's method on the solver's
    dense output within the step where the sign changed), so its time is a
    differentiable function of the parameters (by the implicit function
    theorem, as `diffrax.Event` computes it): train an event time against an
    observed one, as a time-to-event model does.

    **Fields:**

    - `threshold`: the level, in the readout's units (a float, or a scalar
        array, then differentiable too).
    - `readout`: called on one sequence's state, `(hidden_size,)` -> scalar
        (for example `lambda h: model.readout(h)[0]`); a module's parameters
        in it are differentiated. Default `None`: unit `unit` of the state.
    - `unit`: the unit read without a `readout` (default 0).
    - `direction`: `"up"` (from below `threshold` to above), `"down"`, or
        `"either"` (default).
    - `rtol`, `atol`: the root finder's tolerances on the event time, in the
        solve's clock units (solver steps with fixed steps, time units with
        adaptive ones); default `None`: 100 times the clock's float epsilon.

    **Raises:** `ValueError` for an unknown `direction` (on construction).

    Source: `diffrax.Event` with an `optimistix.Newton` root finder (Kidger 2021;
    Chen, Amos & Nickel 2021, "Learning neural event functions for ordinary
    differential equations").
    """

    threshold: float | Float[Array, ""]
    readout: Callable[[Float[Array, " hidden"]], Float[Array, ""]] | None = None
    unit: int = eqx.field(static=True, default=0)
    direction: str = eqx.field(static=True, default="either")
    rtol: float | None = eqx.field(static=True, default=None)
    atol: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.direction not in _DIRECTIONS:
            raise ValueError(
                f"direction must be 'up', 'down' or 'either'; got {self.direction!r}."
            )

    def value(self, y: Float[Array, " hidden"]) -> Float[Array, ""]:
        """The readout of one sequence's state minus the threshold: the event
        fires where this changes sign."""
        read = y[self.unit] if self.readout is None else self.readout(y)
        return jnp.asarray(read) - self.threshold

    def diffrax_event(self, clock_dtype) -> diffrax.Event:
        """The `diffrax.Event` of a solve of one sequence, whose state carries a
        batch axis of size 1."""
        tolerance = 100 * float(jnp.finfo(clock_dtype).eps)
        rtol = tolerance if self.rtol is None else self.rtol
        atol = tolerance if self.atol is None else self.atol

        def condition(t, y, args, **kwargs):
            return self.value(y[0])

        return diffrax.Event(
            condition,
            root_finder=optx.Newton(rtol=rtol, atol=atol),
            direction=_DIRECTIONS[self.direction],
        )
