"""What training minimises: objectives `(model, batch, integrator) -> (loss,
metrics)`, penalties that compose onto any of them, and the optimiser step that
differentiates one."""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, PyTree

from ._batch import Batch, check_labels
from ._integrator import Integrator
from .datasets import SequenceDataset


Metrics = dict[str, Array]
"""Scalars describing one batch: each a sum over its sequences, weighted by
`batch.weights` (so that a partly filled batch counts only its real sequences),
with `weight` their total weight. The solve's `num_steps` and
`num_rejected_steps` are the most any sequence took in this solve."""


REQUIRED_METRICS = ("weight", "loss")
"""The metrics every objective reports: the batch's total weight, and its
weighted sum of per-sequence losses."""


def check_metrics(objective: "AbstractObjective", metrics: dict) -> None:
    """Check, on the host, that an objective's metrics hold `REQUIRED_METRICS`.

    **Raises:** `ValueError` naming the keys missing and those given."""
    missing = [name for name in REQUIRED_METRICS if name not in metrics]
    if missing:
        raise ValueError(
            f"{type(objective).__name__}'s metrics hold {sorted(metrics)}, not "
            f"{missing}: every objective reports 'weight' (the batch's total "
            "weight) and 'loss' (the weighted sum of its per-sequence losses), "
            "from which means are taken (see AbstractObjective)."
        )


class AbstractObjective(eqx.Module):
    """What training minimises on a batch.

    Called as `objective(model, batch, integrator) -> (loss, metrics)`: `loss`
    a scalar of the batch's float dtype, the mean over the batch that is
    differentiated; `metrics` a dict of scalar sums over the batch (see
    `Metrics`), which must hold `weight` and `loss` (the summed data loss),
    and `correct` (weighted correct predictions) where there are classes to be
    right about, and may hold the solve's `num_steps` (without it, training
    and evaluation report NaN steps); [`ltc_jax.train_on`][] sums every key
    it receives into the epoch's running totals, whatever its name.

    An objective is an `equinox.Module`: its arrays (a penalty's anchor, say)
    are arguments of the compiled step, so new values never recompile it.
    Subclass it for a loss of your own; compose a penalty onto any objective
    with [`ltc_jax.training.Penalized`][].
    """

    @abc.abstractmethod
    def __call__(
        self, model: eqx.Module, batch: Batch, integrator: Integrator
    ) -> tuple[Float[Array, ""], Metrics]:
        """**Returns:** `(loss, metrics)` as the class docstring says."""

    def check_data(self, model: eqx.Module, data: SequenceDataset, purpose: str):
        """Check, on the host and before anything is compiled, that `data`'s
        labels are what this objective reads, for `purpose` ("training",
        "validation", "evaluation"). [`ltc_jax.fit`][] and
        [`ltc_jax.evaluate`][] call it. The default checks class indices or
        regression targets against the model's `output_size`
        (as [`ltc_jax.training.SupervisedLoss`][] reads them); an objective
        that reads labels of another form overrides it.

        **Raises:** `ValueError` naming the problem: unlabelled data (every
        label `-1`), data naming another number of classes than
        `output_size`, a class index outside `[0, output_size)`, regression
        targets of another width, or a NaN or infinite target.
        """
        check_labels(model, data, purpose)


class SupervisedLoss(AbstractObjective):
    """Weighted mean loss of a model on a batch: cross-entropy on logits for
    integer labels (`optax.softmax_cross_entropy_with_integer_labels`), mean
    squared error over the outputs for float targets, from what the model's
    readout reads (each sequence's final state, or its states at the model's
    `readout_times`). The model starts from `batch.y0` (zero where `None`).

    **Returns** (when called): `(loss, metrics)`, `metrics` holding `weight`,
    `loss` (the weighted sum), for class labels `correct` (weighted correct
    predictions), and the solve's `num_steps` and `num_rejected_steps`.

    **Raises:** as the model's `solve`.
    """

    def __call__(self, model, batch, integrator):
        # A model of one's own need not take y0 unless a batch gives one.
        start = {} if batch.y0 is None else dict(y0=batch.y0)
        trajectory = model.solve(batch.path, integrator=integrator, **start)
        outputs = model.outputs(trajectory.ys)
        if jnp.issubdtype(batch.labels.dtype, jnp.integer):
            per_sequence = optax.softmax_cross_entropy_with_integer_labels(
                outputs, batch.labels
            )
            hit = jnp.argmax(outputs, -1).astype(batch.labels.dtype) == batch.labels
            scores = dict(correct=jnp.sum(jnp.where(hit, batch.weights, 0)))
        else:
            per_sequence = jnp.mean((outputs - batch.labels) ** 2, axis=-1)
            scores = {}  # no classes: nothing to be correct about
        weight = jnp.sum(batch.weights)
        loss_sum = jnp.sum(batch.weights * per_sequence)
        metrics = dict(
            weight=weight,
            loss=loss_sum,
            **scores,
            num_steps=jnp.max(trajectory.stats["num_steps"]),
            num_rejected_steps=jnp.max(trajectory.stats["num_rejected_steps"]),
        )
        return loss_sum / weight, metrics


class Penalized(AbstractObjective):
    """An objective plus a penalty on the model's parameters:
    `loss = objective's loss + penalty(model)`.

    The penalty's value is reported in the metrics under `name`, multiplied by
    the batch's weight like every metric, so an epoch's history reads its mean;
    `loss` in the metrics stays the data loss, comparable with
    [`ltc_jax.evaluate`][]'s.

    **Fields:**

    - `objective`: any [`ltc_jax.training.AbstractObjective`][].
    - `penalty`: a callable `penalty(model) -> scalar`, such as
        [`ltc_jax.training.QuadraticPenalty`][]; an `equinox.Module` if it holds
        arrays, so that they are arguments of the compiled step.
    - `name`: static str, the metric's key (default `"penalty"`).

    **Raises** (when called): `ValueError` if the objective's metrics lack
    `weight` or `loss` (`REQUIRED_METRICS`), whose weight the penalty's
    metric is scaled by, or if `name` is a key they already hold.
    """

    objective: AbstractObjective
    penalty: Callable[[eqx.Module], Float[Array, ""]]
    name: str = eqx.field(static=True, default="penalty")

    def check_data(self, model, data, purpose):
        """As the wrapped objective's: the penalty reads no labels."""
        self.objective.check_data(model, data, purpose)

    def __call__(self, model, batch, integrator):
        loss, metrics = self.objective(model, batch, integrator)
        check_metrics(self.objective, metrics)
        if self.name in metrics:
            raise ValueError(
                f"The objective's metrics already hold {self.name!r}; give the "
                "penalty another name."
            )
        value = jnp.asarray(self.penalty(model), loss.dtype)
        return loss + value, dict(metrics, **{self.name: value * metrics["weight"]})


def _parameters(tree: PyTree) -> PyTree:
    return eqx.filter(tree, eqx.is_inexact_array)


class QuadraticPenalty(eqx.Module):
    r"""A quadratic anchor on the parameters, the form of Elastic Weight
    Consolidation (Kirkpatrick et al. 2017, "Overcoming catastrophic forgetting
    in neural networks", PNAS 114(13), Eq. 3):

    $$\frac{\lambda}{2} \sum_i F_i\, (\theta_i - \theta^*_i)^2$$

    over every inexact array of the model ($\theta$), with anchor
    $\theta^*$, per-parameter weights $F$ (a diagonal Fisher information for
    EWC; 1 for plain L2 toward the anchor) and strength $\lambda$.

    **Fields:**

    - `anchor`: the model to anchor to ($\theta^*$), of the trained model's
        structure; only its inexact arrays are read.
    - `weights`: `None` (every weight 1) or a pytree of the anchor's structure
        whose inexact arrays have the parameters' shapes ($F \ge 0$).
    - `strength`: $\lambda$, a float (default 1).

    **Raises:** `ValueError` at construction for a negative `strength`; when
    called, `ValueError` if the model's parameters do not match the anchor's
    structure.
    """

    anchor: PyTree
    weights: PyTree | None = None
    strength: float = 1.0

    def __check_init__(self):
        if isinstance(self.strength, float | int) and self.strength < 0:
            raise ValueError(f"strength must be non-negative; got {self.strength}.")

    def __call__(self, model: eqx.Module) -> Float[Array, ""]:
        theta = jax.tree.leaves(_parameters(model))
        anchor = jax.tree.leaves(_parameters(self.anchor))
        if len(theta) != len(anchor) or any(
            a.shape != b.shape for a, b in zip(theta, anchor, strict=False)
        ):
            raise ValueError(
                "The model's parameters do not match the penalty's anchor: "
                f"{len(theta)} arrays against {len(anchor)}, or other shapes."
            )
        if self.weights is None:
            weights = [None] * len(theta)
        else:
            weights = jax.tree.leaves(_parameters(self.weights))
        total = jnp.zeros((), theta[0].dtype if theta else jnp.float32)
        for p, a, f in zip(theta, anchor, weights, strict=True):
            square = (p - jax.lax.stop_gradient(a)) ** 2
            if f is not None:
                square = jax.lax.stop_gradient(f) * square
            total = total + jnp.sum(square)
        return 0.5 * self.strength * total


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
    optimizer: optax.GradientTransformation,
    integrator: Integrator,
    objective: AbstractObjective | None = None,
) -> Callable:
    """One optimiser step, as a pure function: `step(model, opt_state, batch) ->
    (model, opt_state, loss, metrics, finite)`. Compile it with
    `eqx.filter_jit`; [`ltc_jax.train_on`][] does, once per batch shape, and
    [`ltc_jax.measure.compiled_memory`][] measures it as it is.

    Gradients come from `eqx.filter_value_and_grad` of the objective, which
    keeps the primal solve alive, so a solve that exceeds `max_steps` raises
    instead of being pruned away (under plain `jax.grad` diffrax's check can be
    dead-code eliminated and the gradient is silently wrong). If the loss or any
    gradient is non-finite, `finite` is False and the model and optimiser state
    are returned unchanged: parameters are never updated with NaN or infinity.
    Only inexact arrays of the model are trained (`eqx.is_inexact_array`).

    **Arguments:** `optimizer`, an optax transformation (for example
    [`ltc_jax.training.make_optimizer`][]); `integrator`, an
    [`ltc_jax.Integrator`][]; `objective`, an
    [`ltc_jax.training.AbstractObjective`][] (default
    [`ltc_jax.training.SupervisedLoss`][]).

    **Returns:** the step function; `loss` is a scalar, `finite` a boolean
    scalar, `metrics` the objective's.
    """
    objective = SupervisedLoss() if objective is None else objective

    def step(model, opt_state, batch):
        (loss, metrics), grads = eqx.filter_value_and_grad(objective, has_aux=True)(
            model, batch, integrator
        )
        # optax's bias correction raises a float to an int32 step count, which
        # strict dtype promotion refuses; ltc_jax's own code is strict-clean.
        with jax.numpy_dtype_promotion("standard"):
            updates, new_opt_state = optimizer.update(
                grads, opt_state, _parameters(model)
            )
        new_model = eqx.apply_updates(model, updates)
        finite = jnp.isfinite(loss) & _is_finite_tree(grads)
        model = _select(finite, new_model, model)
        opt_state = _select(finite, new_opt_state, opt_state)
        return model, opt_state, loss, metrics, finite

    return step


@eqx.filter_jit
def jitted_train_step(model, opt_state, batch, optimizer, integrator, objective):
    """`make_train_step(optimizer, integrator, objective)(model, opt_state,
    batch)`, compiled once per batch shape, optimiser, integrator and objective
    structure: a new run with the same optimiser object and an equal integrator
    (another seed, say) reuses the compilation."""
    return make_train_step(optimizer, integrator, objective)(model, opt_state, batch)


@eqx.filter_jit
def jitted_objective(objective, model, batch, integrator):
    """An objective's `(loss, metrics)`, compiled once per batch shape and
    integrator."""
    return objective(model, batch, integrator)
