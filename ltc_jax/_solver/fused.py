"""The original authors' fused semi-implicit LTC step, as a diffrax solver, and the
"LTC form" protocol it needs from its term."""

import abc
from collections.abc import Callable
from typing import ClassVar

import diffrax
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, PyTree


def _expand(control: ArrayLike, y: Array) -> Array:
    """Broadcast a per-sequence control `(*batch,)` against a state
    `(*batch, hidden_size)`."""
    control = jnp.asarray(control, y.dtype)
    return control.reshape(control.shape + (1,) * (y.ndim - control.ndim))


class AbstractLTCFormTerm(diffrax.AbstractTerm):
    """A term whose vector field is in LTC form, `dh/dt = drive - decay * h` with
    `decay >= 0`, and says so. Public as `ltc_jax.AbstractLTCFormTerm`.

    Besides diffrax's `vf`, `contr` and `prod` (through which every diffrax solver
    and adjoint uses it as an ordinary term), it provides `vf_and_decay(t, y,
    args) -> (dh/dt, decay)`, each shaped like `y`. This is the whole protocol
    between [`ltc_jax.FusedLTC`][] and its term: the solver declares it as its
    `term_structure`, so diffrax itself refuses any other term.
    """

    @abc.abstractmethod
    def vf_and_decay(self, t, y: PyTree, args: PyTree) -> tuple[PyTree, PyTree]:
        """`(dh/dt, decay)` at time `t` (the time of `vf`), each shaped like `y`."""


def _vf_and_decay(terms: diffrax.AbstractTerm, t, y, args):
    """`terms.vf_and_decay(t, y, args)` of the LTC-form term a solver was given.

    diffrax 0.7.2 checks a solver's `term_structure` against the terms passed to
    `diffeqsolve`, then hands the solver each term wrapped in its internal
    `WrapTerm(term, direction)`, which forwards only `vf`, `contr` and `prod`
    (mapping `t` to `t * direction`); reach through it to the term itself."""
    if isinstance(terms, AbstractLTCFormTerm):
        return terms.vf_and_decay(t, y, args)
    return _vf_and_decay(terms.term, t * terms.direction, y, args)


class LTCTerm(diffrax.ODETerm, AbstractLTCFormTerm):
    """`diffrax.ODETerm` of a vector field in LTC form, for use with
    [`ltc_jax.FusedLTC`][] in your own `diffrax.diffeqsolve`. Public as
    `ltc_jax.LTCTerm`.

    **Arguments:** `vector_field`: an [`ltc_jax.AbstractLTCField`][] such as
    [`ltc_jax.LTCVectorField`][] or [`ltc_jax.BiophysicalLTCVectorField`][]; the
    solve's `args` is its input (anything with `evaluate(t)`). It is an ODE term
    like any other (`vf` is `dh/dt`), so it works with every diffrax solver and
    adjoint too. (`ltc_jax.LTC` models and [`ltc_jax.integrate`][] build their
    terms themselves.)
    """

    def vf_and_decay(self, t, y, args):
        return self.vector_field.derivative_and_decay(t, y, args)


class FusedLTC(diffrax.AbstractSolver):
    r"""The fused semi-implicit LTC step of the original authors (Hasani et al. 2021,
    Eq. 3; the `ncps` package), as a diffrax solver. Public as `ltc_jax.FusedLTC`.

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

    **Its term** must be an [`ltc_jax.AbstractLTCFormTerm`][] (its
    `term_structure`): [`ltc_jax.LTCTerm`][] in your own `diffeqsolve`;
    `ltc_jax.LTC` models and [`ltc_jax.integrate`][] build one for any
    [`ltc_jax.AbstractLTCField`][]. Works with `SaveAt` and with the exact
    gradient modes. The continuous adjoint's reverse solve is not of LTC form, so
    it needs another solver there (`make_integrator(..., backward_solver="heun")`).

    **Arguments:** `ode_unfolds`: sub-steps per solver step (default 6, the
    original authors' choice).

    **Raises:** `ValueError` if `ode_unfolds < 1`.
    """

    ode_unfolds: int = eqx.field(static=True, default=6)

    term_structure: ClassVar = AbstractLTCFormTerm
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
            derivative, decay = _vf_and_decay(terms, t, y, args)
            return y + sub_step * derivative / (1 + sub_step * decay)

        y1 = y0
        for k in range(unfolds):  # a few sub-steps: unrolled, no inner loop
            y1 = unfold(k, y1)
        dense_info = dict(y0=y0, y1=y1)
        return y1, None, dense_info, None, diffrax.RESULTS.successful

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


def needs_ltc_form(solver: diffrax.AbstractSolver) -> bool:
    """Whether `solver` steps only terms in LTC form (its `term_structure` is an
    [`ltc_jax.AbstractLTCFormTerm`][]), as [`ltc_jax.FusedLTC`][] does."""
    structure = getattr(solver, "term_structure", None)
    return isinstance(structure, type) and issubclass(structure, AbstractLTCFormTerm)
