"""What a failed training step says: the failure classified by the result code
of the batch's solve (a diverged state, a solver that gave up), or a non-finite
loss, and a message naming where it happened, how far the solve got and the
likely fix."""

import dataclasses
import re

import diffrax
import equinox as eqx
import jax
import numpy as np

from ._adjoint import WindowedBacksolveAdjoint
from ._errors import DivergenceError, SolverFailureError
from ._integrator import Integrator
from ._model import AbstractSequenceModel, _EncodedField, solves_ode
from ._names import has_reverse_solve
from ._results import RESULTS
from ._solve import Trajectory
from ._vector_field import AbstractLTCField, LTCVectorField


COLLAPSE_FACTOR = 100
"""A solve is taken to fail from collapsed time constants when its fastest unit
would need this many times `max_steps`: steps of about one time constant over
the duration. Then more `max_steps` is the wrong fix."""


def failure_reason(error: BaseException) -> str:
    """The one-line reason of a failed solve, for display (never for telling
    failures apart: that is the solve's [`ltc_jax.RESULTS`][] code). Public as
    `ltc_jax.training.failure_reason`.

    **Arguments:** `error`: the runtime error diffrax raises through equinox
    (`equinox.EquinoxRuntimeError` under `eqx.filter_jit`, a
    `jax.errors.JaxRuntimeError` wrapping it under `jax.jit`), or any exception.

    **Returns:** for a diffrax failure its reason, e.g. "The maximum number of
    solver steps was reached. Try increasing `max_steps`."; for any other error,
    the first line of its message (or its class name).
    """
    text = str(error)
    found = re.search(r"EquinoxRuntimeError: (.+)", text)
    if found:
        return found.group(1).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def non_finite_leaves(tree) -> list[str]:
    """The key paths of the inexact arrays of `tree` that hold NaN or infinity."""
    leaves = jax.tree_util.tree_flatten_with_path(
        eqx.filter(tree, eqx.is_inexact_array)
    )[0]
    return [
        jax.tree_util.keystr(key)
        for key, leaf in leaves
        if not np.all(np.isfinite(np.asarray(leaf)))
    ]


def _largest_parameter(model) -> tuple[str, float]:
    """The key path and size of the model's largest parameter entry."""
    leaves = jax.tree_util.tree_flatten_with_path(
        eqx.filter(model, eqx.is_inexact_array)
    )[0]
    sizes = [
        (jax.tree_util.keystr(key), float(np.max(np.abs(np.asarray(leaf)))))
        for key, leaf in leaves
        if np.size(leaf)
    ]
    return max(sizes, key=lambda item: item[1], default=("", 0.0))


def collapse_hint(model, duration: float, max_steps: int) -> str | None:
    """Why a failed solve failed, when the model's time constants have collapsed
    toward 0 (a unit's decay rate so large that the solve would need over
    [`COLLAPSE_FACTOR`][] times `max_steps` steps of one time constant), with
    the fix; `None` otherwise, or for a model whose field does not bound its
    decay. `duration` is in the unit of the data's times."""
    if not isinstance(model, AbstractSequenceModel) or not model.solves_ode:
        return None
    field = model.vector_field
    if not isinstance(field, AbstractLTCField):
        return None
    try:
        rate = float(field.decay_bound())
    except NotImplementedError:
        return None
    if np.isfinite(rate) and rate * duration <= COLLAPSE_FACTOR * max_steps:
        return None
    cell = field.cell if isinstance(field, _EncodedField) else field
    if isinstance(cell, LTCVectorField):  # behind an encoder or not
        cause = f"the time constants have collapsed toward 0 (tau_min={cell.tau_min:g})"
        fix = (
            "Give tau a floor (LTC(..., tau_min=...); derive_defaults derives one "
            "from the data), or lower the learning rate."
        )
    else:
        cause = "the units' decay rates have grown without bound"
        fix = "Lower the learning rate or clip the gradients."
    return (
        f" The fastest unit decays at {rate:.3g} per time unit, a time constant of "
        f"{1 / rate:.3g} against {duration:.6g} time units: {cause}, and no "
        f"max_steps is enough. {fix}"
    )


def classify_failure(error, where, model, batch, integrator, *, training=True):
    """The error class and message of a solve that failed inside a training
    step (or, with `training=False`, an evaluation's solve), `where` saying
    which ("at epoch 3, batch 2"), from the result code of the batch's forward
    solve run again without raising: `RESULTS.diverged` (the state left its
    bound) is a `DivergenceError`; any other failure, or a forward solve that
    succeeds (the reverse solve failed), a `SolverFailureError` saying how far
    it got."""
    trajectory = _solve_without_raising(model, batch, integrator)
    if np.any(np.asarray(trajectory.result == RESULTS.diverged)):
        duration = float(np.max(np.asarray(batch.path.t_end - batch.path.t_start)))
        return DivergenceError, (
            f"{where[:1].upper()}{where[1:]} (solver "
            f"{type(integrator.solver).__name__}, dt0={integrator.dt0}): "
            f"{RESULTS[RESULTS.diverged]}"
            + (" The parameters were not updated." if training else "")
            + (collapse_hint(model, duration, integrator.max_steps) or "")
        )
    return SolverFailureError, _solver_failure_message(
        where, model, batch, integrator, error, trajectory, training
    )


def _solve_without_raising(model, batch, integrator: Integrator) -> Trajectory:
    """The batch's forward solve again, reporting its failure in `result`."""
    quiet = dataclasses.replace(integrator, throw=False)
    return eqx.filter_jit(lambda m, p: m.solve(p, integrator=quiet))(model, batch.path)


def _solver_failure_message(
    where, model, batch, integrator, cause, trajectory, training
) -> str:
    """Where the solve failed and how far it got (the trajectory of the batch's
    forward solve without raising), or that the reverse solve failed, or (with
    no reverse solve, or in evaluation) that a solve the objective added
    failed."""
    result = trajectory.result
    failed = np.atleast_1d(np.asarray(result != RESULTS.successful))
    if not failed.any() and not (
        training and has_reverse_solve(integrator.adjoint_name)
    ):
        # No reverse solve to blame: a solve the objective added failed, such
        # as an event's root finder (an EventTimeLoss's crossing).
        return (
            f"A solve failed {where}: {failure_reason(cause)} The model's own "
            "forward solve succeeds, so a solve the objective adds failed: with "
            "an event (a Crossing, an EventTimeLoss), its root finder did not "
            "converge; loosen its rtol and atol."
        )
    if not failed.any():
        return (
            f"The backward (adjoint) solve failed {where}: {failure_reason(cause)} "
            "The forward solve succeeds; give the reverse solve more max_steps or "
            "looser tolerances, or use adjoint='checkpoint'."
        )
    if failed.size > 1:  # one result per sequence under vmap batching
        result = jax.tree.map(lambda value: value[np.argmax(failed)], result)
    reason = RESULTS[result]
    steps = int(np.max(trajectory.stats["num_steps"]))
    duration = np.asarray(batch.path.t_end - batch.path.t_start)
    reached = np.asarray(trajectory.t_reached)
    slowest = int(np.argmax(duration - reached))
    name, largest = _largest_parameter(model)
    hint = (
        collapse_hint(model, float(duration[slowest]), integrator.max_steps) or ""
    ) + (
        f" The parameters are finite but large (|{name}| reaches {largest:.3g}): "
        "the model has diverged; lower the learning rate or clip the gradients."
        if largest > 1e4
        else ""
    )
    if not hint:
        hint = " Raise max_steps, loosen rtol/atol, lower dtmin, or check the data."
    return (
        f"The solve failed {where}: {reason} After {steps} steps "
        f"(max_steps={integrator.max_steps}) sequence {slowest} of the batch was "
        f"integrated to {reached[slowest]:.6g} of its {duration[slowest]:.6g} time "
        "units." + hint
    )


def non_finite_message(
    epoch: int, index: int, integrator: Integrator, model: eqx.Module | None = None
) -> str:
    """Why a training step's loss or gradient was not finite, and what to try:
    for a model that solves no ODE (`model.solves_ode` false, the CfC), its
    recurrence; otherwise the gradient mode and steps of `integrator`."""
    solver = type(integrator.solver).__name__
    where = f"at epoch {epoch}, batch {index}"
    if model is not None and not solves_ode(model):
        bound = getattr(model, "state_gradient_bound", None)
        if bound is None:  # turned off, or a model of your own without it
            cause = (
                "once the weights make an update expansive, the gradient through "
                "a sequence's updates grows like a power of their number and "
                "overflows"
            )
            if hasattr(model, "state_gradient_bound"):
                cause += " (state_gradient_bound=None: nothing clamps it)"
        else:
            cause = (
                "weights that make the states, or one update's gradient, overflow "
                "at once (the gradient in the state is clamped to "
                f"state_gradient_bound={bound:g} at each update, so it cannot "
                "overflow by growing over many)"
            )
        return (
            f"The training loss or its gradient became NaN or infinite {where} "
            f"({type(model).__name__}, no ODE solve). The parameters were not "
            f"updated with it. A likely cause is the recurrence: {cause}. Lower "
            "the learning rate, add weight decay, shorten the sequences, or skip "
            "such steps (on_failure=SkipFailures(...), --on-failure skip)."
        )
    if isinstance(integrator.adjoint, WindowedBacksolveAdjoint):
        cause = (
            "With adjoint='windowed' a likely cause is the reverse solve within a "
            f"window ({integrator.adjoint.windows} windows): it re-integrates the "
            "state backwards, which expands like exp(window / tau). Use more "
            "windows, float64, a larger tau_min, or adjoint='checkpoint'."
        )
    elif isinstance(integrator.adjoint, diffrax.BacksolveAdjoint):
        cause = (
            "With adjoint='backsolve' a likely cause is the reverse solve: it "
            "re-integrates the state backwards in time, and a dissipative system "
            "(an LTC, whose units decay at rate 1/tau + f) is expansive backwards, "
            "so round-off grows like exp(duration / tau). Use adjoint='windowed', "
            "which restarts it from stored states, adjoint='checkpoint', float64, "
            "a larger tau_min, or shorter sequences."
        )
    elif integrator.is_adaptive:
        cause = (
            "With adaptive steps this points at the model itself (exploding weights "
            "or inputs): lower the learning rate or check the data."
        )
    else:
        cause = (
            f"With fixed steps (dt0={integrator.dt0}) the usual cause is a step "
            f"outside {solver}'s stability region: an explicit solver needs roughly "
            "dt0 * (1/tau + 1) < 2, and tau can be as small as tau_min. Use "
            "adaptive steps (rtol/atol), a smaller dt0, or a larger tau_min."
        )
    return (
        f"The training loss or its gradient became NaN or infinite {where} "
        f"(solver {solver}). The parameters were not updated with it. " + cause
    )
