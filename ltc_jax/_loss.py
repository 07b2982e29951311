"""The training loss of a batch and one optimiser step on it."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, PyTree

from ._batch import Batch
from ._integrator import Integrator


def loss_and_metrics(
    model: eqx.Module, batch: Batch, integrator: Integrator
) -> tuple[Float[Array, ""], dict[str, Array]]:
    """Weighted mean loss of `model` on `batch`, and summed metrics.

    Cross-entropy on logits for integer labels (`optax.
    softmax_cross_entropy_with_integer_labels`), mean squared error over the
    outputs for float targets; either from what the model's readout reads (each
    sequence's final state, or its states at the model's `readout_times`).

    **Returns:** `(loss, metrics)`, the loss a scalar of the batch's float dtype,
    `metrics` holding sums over the batch: `weight`, `loss` (weighted), `correct`
    (classification; 0 for regression), and the solve's `num_steps` and
    `num_rejected_steps` (the most over the batch).

    **Raises:** as `model.solve`.
    """
    trajectory = model.solve(batch.path, integrator=integrator)
    outputs = model.outputs(trajectory.ys)
    if jnp.issubdtype(batch.labels.dtype, jnp.integer):
        per_sequence = optax.softmax_cross_entropy_with_integer_labels(
            outputs, batch.labels
        )
        hit = jnp.argmax(outputs, -1).astype(batch.labels.dtype) == batch.labels
        correct = jnp.sum(jnp.where(hit, batch.weights, 0))
    else:
        per_sequence = jnp.mean((outputs - batch.labels) ** 2, axis=-1)
        correct = jnp.zeros((), batch.weights.dtype)
    weight = jnp.sum(batch.weights)
    loss_sum = jnp.sum(batch.weights * per_sequence)
    metrics = dict(
        weight=weight,
        loss=loss_sum,
        correct=correct,
        num_steps=jnp.max(trajectory.stats["num_steps"]),
        num_rejected_steps=jnp.max(trajectory.stats["num_rejected_steps"]),
    )
    return loss_sum / weight, metrics


def _is_finite_tree(tree: PyTree) -> Array:
    leaves = [
        jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if eqx.is_array(x)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _select(pred, on_true: PyTree, on_false: PyTree) -> PyTree:
    def pick(a, b):
        return jnp.where(pred, a, b) if eqx.is_array(a) else a

    return jax.tree.map(pick, on_true, on_false)


def make_train_step(
    optimizer: optax.GradientTransformation, integrator: Integrator
) -> Callable:
    """One optimiser step, as a pure function: `step(model, opt_state, batch) ->
    (model, opt_state, loss, metrics, finite)`. Compile it with
    `eqx.filter_jit`; [`ltc_jax.fit`][] does, once per batch shape, and
    [`ltc_jax.compiled_memory`][] measures it as it is.

    Gradients come from `eqx.filter_value_and_grad` of
    [`ltc_jax.loss_and_metrics`][], which keeps the primal solve alive, so a solve
    that exceeds `max_steps` raises instead of being pruned away (under plain
    `jax.grad` diffrax's check can be dead-code eliminated and the gradient is
    silently wrong). If the loss or any gradient is non-finite, `finite` is False
    and the model and optimiser state are returned unchanged: parameters are
    never updated with NaN or infinity. Only inexact arrays of the model are
    trained (`eqx.is_inexact_array`).

    **Arguments:** `optimizer`, an optax transformation (for example
    [`ltc_jax.make_optimizer`][]); `integrator`, an [`ltc_jax.Integrator`][].

    **Returns:** the step function; `loss` is a scalar, `finite` a boolean
    scalar, `metrics` as in [`ltc_jax.loss_and_metrics`][].
    """

    def step(model, opt_state, batch):
        (loss, metrics), grads = eqx.filter_value_and_grad(
            loss_and_metrics, has_aux=True
        )(model, batch, integrator)
        # optax's bias correction raises a float to an int32 step count, which
        # strict dtype promotion refuses; ltc_jax's own code is strict-clean.
        with jax.numpy_dtype_promotion("standard"):
            updates, new_opt_state = optimizer.update(
                grads, opt_state, eqx.filter(model, eqx.is_inexact_array)
            )
        new_model = eqx.apply_updates(model, updates)
        finite = jnp.isfinite(loss) & _is_finite_tree(grads)
        model = _select(finite, new_model, model)
        opt_state = _select(finite, new_opt_state, opt_state)
        return model, opt_state, loss, metrics, finite

    return step


@eqx.filter_jit
def jitted_train_step(model, opt_state, batch, optimizer, integrator):
    """`make_train_step(optimizer, integrator)(model, opt_state, batch)`, compiled
    once per batch shape, optimiser and integrator: a new `fit` with the same
    optimiser object and an equal integrator (another seed, say) reuses the
    compilation."""
    return make_train_step(optimizer, integrator)(model, opt_state, batch)


@eqx.filter_jit
def jitted_loss_and_metrics(model, batch, integrator):
    """[`ltc_jax.loss_and_metrics`][], compiled once per batch shape and
    integrator."""
    return loss_and_metrics(model, batch, integrator)
