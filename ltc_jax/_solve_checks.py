"""The checks of a solve, each once per solve and never per evaluation: before
it, the options and derivatives it cannot serve (by name, at trace time) and a
state or parameters that are not finite; after it, saved states outside the
bound the exact solution keeps (Hasani et al. 2021, Theorem 2), which is how a
fixed explicit step outside its stability region shows while staying finite.
The last two are result codes ([`ltc_jax.RESULTS`][]`.non_finite_input` and
`.diverged`): under `throw` they fail the solve through the code's
`error_if`, as diffrax's own results do; without it the solve reports them."""

import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jax._src.interpreters.ad import LinearizeTracer
from jax._src.interpreters.batching import BatchTracer
from jax.interpreters.ad import JVPTracer
from jaxtyping import Array, Bool

from ._results import RESULTS
from ._vector_field import AbstractLTCField


def check_inputs(vector_field, y0, integrator) -> tuple:
    """`(y0, non_finite)`: whether `y0` or the field's parameters hold NaN or
    infinity (under `check_state`; else `False`), and `y0`, which under `throw`
    fails the solve with `RESULTS.non_finite_input` if so, before it runs. One
    reduction per solve, not per evaluation."""
    if not integrator.check_state:
        return y0, jnp.asarray(False)
    leaves = jax.tree.leaves(eqx.filter((vector_field, y0), eqx.is_inexact_array))
    non_finite = ~jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))
    if integrator.throw:
        y0 = RESULTS.non_finite_input.error_if(y0, non_finite)
    return y0, non_finite


def is_outside_bounds(vector_field, y0, ys, integrator) -> Bool[Array, ""]:
    """Whether a saved state lies outside the field's state bounds (widened to
    hold `y0`) by more than their width (and at least 1% of their size): room
    for any solver's inaccuracy near the bound, none for what a fixed explicit
    step outside its stability region produces, a state that grows without end
    while staying finite. `False` where the field has no bounds, or without
    `check_state`."""
    bounds = None
    if isinstance(vector_field, AbstractLTCField):
        bounds = vector_field.state_bounds()
    if bounds is None or not integrator.check_state:
        return jnp.asarray(False)
    y0 = y0.astype(ys.dtype)
    low, high = (jnp.broadcast_to(b.astype(ys.dtype), y0.shape) for b in bounds)
    low, high = jnp.minimum(low, y0), jnp.maximum(high, y0)  # (batch, hidden)
    low, high = low[None], high[None]  # against (saves, batch, hidden)
    slack = (high - low) + 0.01 * (1 + jnp.maximum(jnp.abs(low), jnp.abs(high)))
    outside = (ys < low - slack) | (ys > high + slack) | ~jnp.isfinite(ys)
    return jnp.any(outside)


def solve_result(diffrax_result, non_finite, diverged) -> RESULTS:
    """The solve's [`ltc_jax.RESULTS`][]: `non_finite_input` before all else
    (the cause of whatever followed), then diffrax's own failure, then
    `diverged` for a solve diffrax counts a success. (A solve that stopped early
    leaves its unreached saves infinite: not a divergence.)"""
    result = RESULTS.promote(diffrax_result)
    result = RESULTS.where(
        diverged & (result == RESULTS.successful), RESULTS.diverged, result
    )
    return RESULTS.where(non_finite, RESULTS.non_finite_input, result)


HIGHER_ORDER = (
    "Forward-mode and higher-order derivatives (jax.jvp, jax.hessian, a gradient "
    "of a gradient) go through the solver's loop only with adjoint='direct' "
    "(diffrax.DirectAdjoint); adjoint={mode!r} computes first-order reverse-mode "
    "gradients only. Use make_integrator(..., adjoint='direct')."
)


def derivatives_taken(tree) -> tuple[int, bool]:
    """How many derivatives are being taken of the arrays of `tree` (the nesting
    depth of JAX's autodiff tracers over them), and whether any is forward mode.

    Read off JAX's tracer classes: `LinearizeTracer` for reverse mode,
    `JVPTracer` for forward mode, `BatchTracer` under vmap passed through. JAX
    0.10 exports `JVPTracer` from `jax.interpreters.ad`; the other two only
    from `jax._src.interpreters`. The only way to name an unsupported
    derivative before diffrax's loop fails with a message about
    `lax.while_loop`."""
    deepest, forward = 0, False
    for leaf in jax.tree.leaves(eqx.filter(tree, eqx.is_array)):
        depth, tracer = 0, leaf
        for _ in range(64):
            if isinstance(tracer, LinearizeTracer | JVPTracer):
                depth += 1
                forward = forward or isinstance(tracer, JVPTracer)
                tracer = tracer.primal
            elif isinstance(tracer, BatchTracer):
                tracer = tracer.val
            else:
                break
        deepest = max(deepest, depth)
    return deepest, forward


def check_derivative_order(vector_field, y0, integrator):
    """Refuse, by name, derivatives only DirectAdjoint supports."""
    if isinstance(integrator.adjoint, diffrax.DirectAdjoint):
        return
    depth, forward = derivatives_taken((vector_field, y0))
    if depth > 1 or forward:
        raise NotImplementedError(HIGHER_ORDER.format(mode=integrator.adjoint_name))


def check_precision(y0, integrator):
    """Refuse tolerances the state's float type cannot resolve."""
    if not integrator.is_adaptive:
        return
    eps = float(jnp.finfo(y0.dtype).eps)
    rtol = float(integrator.stepsize_controller.rtol)
    if rtol < eps:
        scale = 10.0 ** (math.floor(math.log10(eps)) - 1)
        least = math.ceil(eps / scale) * scale  # eps rounded up to 2 digits
        raise ValueError(
            f"rtol={rtol:g} is below the resolution of the state's {y0.dtype} "
            f"(machine epsilon {eps:.1e}): round-off alone can exceed the error "
            f"control, and the solve may exhaust max_steps. Use rtol >= {least:.1e}, "
            "a wider state (float64 with jax_enable_x64; mixed precision keeps the "
            "state in float32 and runs the matrix products alone in bfloat16), or "
            "fixed steps."
        )
