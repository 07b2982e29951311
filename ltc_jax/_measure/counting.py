"""Counting vector-field evaluations as they run: of a forward solve, and of the
forward and backward passes of one gradient."""

import equinox as eqx
import jax
from jaxtyping import PyTree

from .._adjoint import resolve_windows_for_path
from .._batch import Batch
from .._integrator import Integrator
from .._model import LTC
from .._objective import SupervisedLoss
from .._paths import InputPath
from .._solve import Trajectory
from .._vector_field import AbstractLTCField


class _Counter:
    """Host-side counts of vector-field evaluations, split where the loss is
    computed: evaluations before it belong to the forward pass."""

    def __init__(self):
        self.calls = 0
        self.forward_calls: int | None = None

    def count(self):
        self.calls += 1

    def mark_end_of_forward(self):
        self.forward_calls = self.calls


class _CountingField(eqx.Module):
    """A vector field that reports each of its evaluations to a host counter
    (outside any `vmap` over the batch, so that one evaluation of the whole
    batch counts once)."""

    field: eqx.Module
    counter: _Counter = eqx.field(static=True)

    def __call__(self, t, y, args):
        jax.debug.callback(self.counter.count, ordered=True)
        return self.field(t, y, args)


class _CountingLTCField(_CountingField, AbstractLTCField):
    """`_CountingField` of a field in LTC form, itself in LTC form: the fused
    step's evaluations (`derivative_and_decay`) count too."""

    def drive_and_decay(self, y, x):
        return self.field.drive_and_decay(y, x)

    def derivative_and_decay(self, t, y, args):
        jax.debug.callback(self.counter.count, ordered=True)
        return self.field.derivative_and_decay(t, y, args)

    def decay_bound(self):
        return self.field.decay_bound()

    def state_bounds(self):
        return self.field.state_bounds()


def _counted(model: eqx.Module, counter: _Counter) -> eqx.Module:
    if not isinstance(model, LTC):
        raise ValueError(
            "Counting evaluations wraps an ltc_jax.LTC's vector field `cell`; "
            f"{type(model).__name__} is not an LTC."
        )
    wrapper = (
        _CountingLTCField
        if isinstance(model.cell, AbstractLTCField)
        else _CountingField
    )
    return eqx.tree_at(lambda m: m.cell, model, wrapper(model.cell, counter))


def counted_solve(
    model: eqx.Module, path: InputPath, integrator: Integrator
) -> tuple[Trajectory, int]:
    """Solve `model` on `path` once (forward only, jitted) and count the
    vector-field evaluations it makes, as they run.

    The count is the number of times the model's `cell` was evaluated, for the
    whole batch at once (one vectorised evaluation under `"vmap"` batching too):
    per step a solver's stages, rejected steps included (4 for RK4, `ode_unfolds`
    for the fused step; 6 for Tsit5's 7 stages with first-same-as-last, plus one
    at the start and after every jump time, which adaptive solves on linear
    inputs place at each observation). An implicit solver's Jacobian
    (`jax.jacfwd` of the field) counts as one evaluation although it costs as
    many as the state has entries, and its linear solves are not counted at
    all: compare implicit solvers by time as well. Each evaluation calls back to
    the host (`jax.debug.callback`), so a counted solve is slower than a plain
    one: count, then time separately. Each call compiles afresh.

    **Arguments:** `model`, an [`ltc_jax.LTC`][] (anything with `solve` and a
    `cell`); `path`, its [`ltc_jax.InputPath`][]; `integrator`.

    **Returns:** `(trajectory, evaluations)`: the [`ltc_jax.Trajectory`][] of
    `model.solve(path, integrator=integrator)` and the count (a Python int).

    **Raises:** `ValueError` if `model` has no `cell`; otherwise as `model.solve`.
    """
    integrator = resolve_windows_for_path(integrator, model.vector_field, path)
    counter = _Counter()
    counted = _counted(model, counter)
    trajectory = eqx.filter_jit(lambda m, p: m.solve(p, integrator=integrator))(
        counted, path
    )
    jax.block_until_ready(trajectory)
    jax.effects_barrier()
    return trajectory, counter.calls


def count_evaluations(
    model: eqx.Module, batch: Batch, integrator: Integrator
) -> tuple[int, int, PyTree]:
    """Vector-field evaluations of the forward and of the backward pass of one
    gradient of the training loss ([`ltc_jax.training.SupervisedLoss`][]), counted as
    they run; and that gradient.

    The host callbacks are ordered (`jax.debug.callback(..., ordered=True)`), so
    the host sees them in program order: every evaluation of the forward solve,
    then a marker placed on the loss, then the backward pass's evaluations
    (recomputation from stored steps or checkpoints, the reverse solve of
    `"backsolve"`, each of its evaluations inside a vector-Jacobian product).
    Counted as [`ltc_jax.measure.counted_solve`][] counts.

    **Arguments:** `model` (with a `cell`), `batch` (an [`ltc_jax.Batch`][]),
    `integrator`.

    **Returns:** `(forward_evaluations, backward_evaluations, gradient)`; the
    gradient is a pytree shaped like `model` (`None` at non-trained leaves), as
    [`ltc_jax.measure.loss_gradient`][] returns.

    **Raises:** `ValueError` if `model` has no `cell`; otherwise as the solve.
    """
    integrator = resolve_windows_for_path(integrator, model.vector_field, batch.path)
    counter = _Counter()
    counted = _counted(model, counter)

    def marked_loss(model, batch):
        loss, metrics = SupervisedLoss()(model, batch, integrator)
        jax.debug.callback(counter.mark_end_of_forward, ordered=True)
        return loss, metrics

    grads, _ = eqx.filter_jit(eqx.filter_grad(marked_loss, has_aux=True))(
        counted, batch
    )
    jax.block_until_ready(grads)
    jax.effects_barrier()
    if counter.forward_calls is None:
        raise RuntimeError("The end-of-forward marker never ran; cannot split counts.")
    grads = eqx.tree_at(lambda m: m.cell, grads, grads.cell.field)
    return counter.forward_calls, counter.calls - counter.forward_calls, grads
