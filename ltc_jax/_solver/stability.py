"""Where an explicit Runge-Kutta method is stable on a decaying linear field (the
real-axis interval of its stability polynomial), and whether an integrator's
fixed steps stay inside it on a given field."""

import functools
import warnings

import diffrax
import equinox as eqx
import numpy as np

from .._integrator import Integrator
from .._warn import warn
from .fused import needs_ltc_form


def _stability_polynomial(tableau: diffrax.ButcherTableau):
    """`R(z) = 1 + z b^T (I - z A)^-1 1` of an explicit tableau, as a callable."""
    stages = len(tableau.b_sol)
    a = np.zeros((stages, stages))
    for row, coefficients in enumerate(tableau.a_lower, start=1):
        a[row, : len(coefficients)] = coefficients
    b = np.asarray(tableau.b_sol, np.float64)
    ones = np.ones(stages)

    def value(z: float) -> float:
        return 1 + z * b @ np.linalg.solve(np.eye(stages) - z * a, ones)

    return value


@functools.cache
def _bound_of_method(method: type) -> float:
    value = _stability_polynomial(method.tableau)
    grid = np.linspace(0.0, 20.0, 20_001)[1:]
    unstable = np.flatnonzero([abs(value(-x)) > 1 + 1e-12 for x in grid])
    if unstable.size == 0:
        return float("inf")
    low, high = grid[unstable[0] - 1] if unstable[0] else 0.0, grid[unstable[0]]
    for _ in range(50):  # bisect the edge of the interval
        middle = (low + high) / 2
        low, high = (middle, high) if abs(value(-middle)) <= 1 else (low, middle)
    return float(low)


def real_stability_bound(solver: diffrax.AbstractSolver) -> float | None:
    """The largest `x` such that a fixed step of `solver` is stable for every
    `dt * lambda` in `[0, x]` on `dy/dt = -lambda y`: 2 for explicit Euler and
    Heun, about 2.51 for Bosh3, 2.785 for RK4, 3.3 for Dopri5. Computed from the
    method's Butcher tableau (the real-axis interval where its stability
    polynomial `|R(-x)| <= 1`), not from a table. Public as
    `ltc_jax.training.real_stability_bound`.

    **Returns:** the bound, or `None` for methods without an explicit tableau:
    implicit ones (stable on any decay) and [`ltc_jax.FusedLTC`][] (linearly
    implicit in the decay, stable for any step).
    """
    if needs_ltc_form(solver) or isinstance(solver, diffrax.AbstractImplicitSolver):
        return None
    if isinstance(solver, diffrax.Euler):
        return 2.0
    if not isinstance(getattr(type(solver), "tableau", None), diffrax.ButcherTableau):
        return None
    return _bound_of_method(type(solver))


class StabilityWarning(UserWarning):
    """A fixed explicit step larger than the solver's stability region allows on
    the field's fastest decay (see [`ltc_jax.training.check_stability`][]).
    Public as `ltc_jax.training.StabilityWarning`."""


def check_stability(
    integrator: Integrator, field: eqx.Module, *, stacklevel: int | None = None
) -> float | None:
    r"""Whether fixed explicit steps of `integrator` are stable on `field`, from
    the field's fastest decay rate $\lambda$ (`field.decay_bound()`, $1 /
    \tau_\text{min} + 1$ for the simplified LTC) and the solver's real-axis
    stability bound $x$ ([`ltc_jax.training.real_stability_bound`][]: 2 for
    Euler and Heun, 2.785 for RK4): a step $\Delta t$ is stable on the decay when
    $\Delta t\,\lambda \le x$. Warns ([`ltc_jax.training.StabilityWarning`][])
    with the largest stable `dt0` when `dt0` exceeds it. Public as
    `ltc_jax.training.check_stability`.

    A check of the linear decay alone: the recurrent weights move the
    eigenvalues too, so a step near the bound may still diverge, which the
    solve's state-bound check then reports.

    **Arguments:** `integrator`; `field`, the vector field (an LTC's `cell`);
    `stacklevel` of the warning, as `warnings.warn` takes it (default: the
    line of the first caller outside ltc_jax, such as the call of
    [`ltc_jax.fit`][] that checks it).

    **Returns:** the largest stable `dt0` (time units), or `None` where there is
    nothing to check: adaptive steps, implicit or fused solvers, or a field that
    does not bound its decay.
    """
    bound = real_stability_bound(integrator.solver)
    if integrator.is_adaptive or bound is None or not hasattr(field, "decay_bound"):
        return None
    try:
        rate = float(field.decay_bound())
    except NotImplementedError:
        return None
    largest = bound / rate
    if integrator.dt0 > largest:
        message = (
            f"dt0={integrator.dt0:g} is outside {type(integrator.solver).__name__}'s "
            f"stability region on this model's fastest decay (rate {rate:.3g} per "
            f"time unit): the largest stable step is about {largest:.3g}. Lower dt0, "
            "raise tau_min, or take adaptive steps."
        )
        if stacklevel is None:
            warn(message, StabilityWarning)
        else:
            warnings.warn(message, StabilityWarning, stacklevel=stacklevel)
    return largest
