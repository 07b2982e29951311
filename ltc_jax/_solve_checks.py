"""The checks of a solve, each once per solve and never per evaluation: before
it, the options and derivatives it cannot serve (by name, at trace time) and a
state or parameters that are not finite; after it, saved states outside the
bound the exact solution keeps (Hasani et al. 2021, Theorem 2), which is how a
fixed explicit step outside its stability region shows while staying finite.
Under `jit` they fail the solve through `eqx.error_if`, as diffrax's own
checks do, so they need `throw=True` (and `check_state`)."""

import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ._vector_field import AbstractLTCField


NON_FINITE_INPUT = (
    "The vector field's parameters or the initial state y0 hold NaN or infinity, "
    "so no solve can succeed"
)
DIVERGED = "The solve diverged: its state left the bound the exact solution keeps"


def check_inputs(vector_field, y0, integrator):
    """`y0`, failing the solve (under `throw`) if it or the field's parameters
    are not finite: one reduction per solve, not per evaluation."""
    if not (integrator.throw and integrator.check_state):
        return y0
    leaves = jax.tree.leaves(eqx.filter((vector_field, y0), eqx.is_inexact_array))
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))
    return eqx.error_if(
        y0,
        ~finite,
        f"{NON_FINITE_INPUT} (in training: a diverged update; lower the learning "
        "rate, clip the gradients, or check the data).",
    )


def check_bounds(vector_field, y0, ys, integrator):
    """`ys`, failing the solve (under `throw`) if a saved state lies outside the
    field's state bounds (widened to hold `y0`) by more than their width (and
    at least 1% of their size): room for any solver's inaccuracy near the
    bound, none for what a fixed explicit step outside its stability region
    produces, a state that grows without end while staying finite."""
    bounds = None
    if isinstance(vector_field, AbstractLTCField):
        bounds = vector_field.state_bounds()
    if bounds is None or not (integrator.throw and integrator.check_state):
        return ys
    y0 = y0.astype(ys.dtype)
    low, high = (jnp.broadcast_to(b.astype(ys.dtype), y0.shape) for b in bounds)
    low, high = jnp.minimum(low, y0), jnp.maximum(high, y0)  # (batch, hidden)
    low, high = low[None], high[None]  # against (saves, batch, hidden)
    slack = (high - low) + 0.01 * (1 + jnp.maximum(jnp.abs(low), jnp.abs(high)))
    outside = (ys < low - slack) | (ys > high + slack) | ~jnp.isfinite(ys)
    return eqx.error_if(
        ys,
        jnp.any(outside),
        f"{DIVERGED} (Hasani et al. 2021, Theorem 2: each unit between min(0, A) "
        "and max(0, A); for the biophysical cell, between its reversal potentials). "
        "With fixed explicit steps this is a step outside the solver's stability "
        "region: lower dt0, raise tau_min, or take adaptive steps.",
    )


HIGHER_ORDER = (
    "Forward-mode and higher-order derivatives (jax.jvp, jax.hessian, a gradient "
    "of a gradient) go through the solver's loop only with adjoint='direct' "
    "(diffrax.DirectAdjoint); adjoint={mode!r} computes first-order reverse-mode "
    "gradients only. Use make_integrator(..., adjoint='direct')."
)


def derivatives_taken(tree) -> tuple[int, bool]:
    """How many derivatives are being taken of the arrays of `tree` (the nesting
    depth of JAX's autodiff tracers over them), and whether any is forward mode.

    Read off JAX 0.10's tracer classes by name (`LinearizeTracer` for reverse
    mode, `JVPTracer` for forward mode, `BatchTracer` under vmap passed
    through): the only way to name an unsupported derivative before diffrax's
    loop fails with a message about `lax.while_loop`."""
    deepest, forward = 0, False
    for leaf in jax.tree.leaves(eqx.filter(tree, eqx.is_array)):
        depth, tracer = 0, leaf
        for _ in range(64):
            kind = type(tracer).__name__
            if kind in ("LinearizeTracer", "JVPTracer"):
                depth += 1
                forward = forward or kind == "JVPTracer"
                tracer = tracer.primal
            elif kind == "BatchTracer":
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
