"""The original authors' fused semi-implicit LTC step, as a diffrax solver."""

from collections.abc import Callable
from typing import ClassVar

import diffrax
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike


def _expand(control: ArrayLike, y: Array) -> Array:
    """Broadcast a per-sequence control `(*batch,)` against a state
    `(*batch, units)`."""
    control = jnp.asarray(control, y.dtype)
    return control.reshape(control.shape + (1,) * (y.ndim - control.ndim))


class LTCTerm(diffrax.ODETerm):
    """An ODE term for a vector field in LTC form, `dh/dt = drive - decay * h`, for
    use with [`ltc_jax.FusedLTC`][] in your own `diffrax.diffeqsolve`.

    Its vector-field value is the pair `(dh/dt, decay)`: the fused solver uses the
    decay; every other solver (and `BacksolveAdjoint`) reaches the field through
    `prod`, which uses `dh/dt` alone, so the term works with any diffrax solver.

    **Arguments:** `vector_field`: an [`ltc_jax.AbstractLTCField`][] such as
    [`ltc_jax.LTCVectorField`][] or [`ltc_jax.BiophysicalLTCVectorField`][];
    `args` of the solve is its input path. (`ltc_jax.LTC` models and
    [`ltc_jax.integrate`][] build their terms themselves.)
    """

    def vf(self, t, y, args):
        return self.vector_field.derivative_and_decay(t, y, args)

    def prod(self, vf, control):
        derivative, _ = vf
        return derivative * _expand(control, derivative)


class FusedLTC(diffrax.AbstractSolver):
    r"""The fused semi-implicit LTC step of the original authors (Hasani et al. 2021,
    Eq. 3; the `ncps` package), as a diffrax solver.

    For a field in LTC form $\dot h = a(t, h) - d(t, h) \odot h$ (drive $a$,
    decay $d \ge 0$), each solver step of size $\Delta t$ makes `ode_unfolds`
    sub-steps of $\delta = \Delta t / U$:

    $$h \leftarrow \frac{h + \delta\, a(t, h)}{1 + \delta\, d(t, h)}
        = h + \frac{\delta\, \dot h}{1 + \delta\, d},$$

    which, for the biophysical cell ($a = (g_\text{leak} v_\text{leak} + \sum g
    E)/c_m$, $d = (g_\text{leak} + \sum g)/c_m$), is exactly the original update
    `v <- (cm/δ v + gleak vleak + Σ g E) / (cm/δ + gleak + Σ g)`, written with the
    step multiplied through (no `cm/δ`), so an elapsed time of zero is a no-op
    instead of `inf/inf`. (The original adds `eps = 1e-8` to the denominator; this
    form needs none: the denominator is at least 1.)

    **What it is:** a linearly implicit Euler step with the conductances (the
    gates, hence $a$ and $d$) frozen at the old state: implicit in the linear decay,
    explicit in the gates. First order: the global error is $O(\Delta t / U)$.
    Because $d \ge 0$ the step is unconditionally stable for the linear part, and
    for the simplified cell the state stays inside the bound of Hasani et al.
    Theorem 2 for any step. Fixed steps only (no error estimate). Inputs are
    evaluated at each sub-step's start; with inputs held constant over a step it
    reproduces the original update rule.

    Needs a term whose vector field returns `(dh/dt, decay)`: `ltc_jax.LTC` models
    build it; for your own `diffeqsolve` use [`ltc_jax.LTCTerm`][]. Works with
    `SaveAt` and every adjoint; under `BacksolveAdjoint` the reverse solve needs
    another solver (`make_integrator(..., backward_solver="heun")`), since the
    adjoint system is not of LTC form.

    **Arguments:** `ode_unfolds`: sub-steps per solver step (default 6, the
    original authors' choice).
    """

    ode_unfolds: int = eqx.field(static=True, default=6)

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable[..., diffrax.LocalLinearInterpolation]] = (
        diffrax.LocalLinearInterpolation
    )

    def __check_init__(self):
        if self.ode_unfolds < 1:
            raise ValueError(f"ode_unfolds must be at least 1; got {self.ode_unfolds}.")

    def order(self, terms):
        return 1

    def init(self, terms, t0, t1, y0, args):
        return None

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        del solver_state, made_jump
        unfolds = self.ode_unfolds
        sub_step = _expand(terms.contr(t0, t1), y0) / unfolds

        def unfold(k, y):
            t = t0 + (t1 - t0) * (k / unfolds)
            derivative, decay = terms.vf(t, y, args)
            return y + sub_step * derivative / (1 + sub_step * decay)

        y1 = y0
        for k in range(unfolds):  # a few sub-steps: unrolled, no inner loop
            y1 = unfold(k, y1)
        dense_info = dict(y0=y0, y1=y1)
        return y1, None, dense_info, None, diffrax.RESULTS.successful

    def func(self, terms, t0, y0, args):
        derivative, _ = terms.vf(t0, y0, args)
        return derivative
