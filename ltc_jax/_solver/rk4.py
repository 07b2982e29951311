"""The classic fourth-order Runge-Kutta method, which diffrax does not ship."""

from collections.abc import Callable
from typing import ClassVar

import diffrax
import numpy as np


_rk4_tableau = diffrax.ButcherTableau(
    a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
    # Classic RK4 has no embedded lower-order method (its weights are the only
    # third-order solution on its stages); `step` reports no error estimate.
    b_error=np.zeros(4),
    c=np.array([0.5, 0.5, 1.0]),
)


class RK4(diffrax.AbstractERK):
    r"""The classic fourth-order Runge-Kutta method (Kutta 1901). Public as
    `ltc_jax.RK4`.

    Four stages at $c = (0, 1/2, 1/2, 1)$ with weights $(1/6, 1/3, 1/3, 1/6)$.
    Fixed step sizes only: the method has no embedded error estimate, so diffrax
    refuses an adaptive step-size controller rather than accepting every step.
    Dense output (`SaveAt(ts=...)`) is third-order Hermite interpolation.

    Its real-axis stability interval is about $[-2.785, 0]$: on a decaying field
    with fastest rate $\lambda$ a step must satisfy $\Delta t\,\lambda < 2.785$
    (for an LTC, $\lambda \le 1/\tau_\text{min} + 1$).

    Built on `diffrax.AbstractERK` from the Butcher tableau, so it works in
    `diffrax.diffeqsolve` with every adjoint.

    ??? cite "Reference"

        ```bibtex
        @article{kutta1901beitrag,
            title={Beitrag zur n{\"a}herungsweisen Integration totaler
                   Differentialgleichungen},
            author={Kutta, Wilhelm},
            journal={Zeitschrift f{\"u}r Mathematik und Physik},
            volume={46}, pages={435--453}, year={1901}
        }
        ```
    """

    tableau: ClassVar[diffrax.ButcherTableau] = _rk4_tableau
    interpolation_cls: ClassVar[Callable[..., diffrax.AbstractLocalInterpolation]] = (
        diffrax.ThirdOrderHermitePolynomialInterpolation.from_k
    )

    def order(self, terms):
        return 4

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        y1, _, dense_info, solver_state, result = super().step(
            terms, t0, t1, y0, args, solver_state, made_jump
        )
        return y1, None, dense_info, solver_state, result
