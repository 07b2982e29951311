"""Where an explicit Runge-Kutta method is stable on a decaying linear field: the
real-axis interval of its stability polynomial."""

import functools

import diffrax
import numpy as np

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
    polynomial `|R(-x)| <= 1`), not from a table.

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
