r"""The diagonal Fisher information of a sequence model, and its online
consolidation: the weights of Elastic Weight Consolidation's penalty.

For a model $p_\theta(y \mid x)$ the Fisher information is
$F = \mathbb{E}_x\, \mathbb{E}_{y \sim p_\theta(\cdot \mid x)}
[\nabla_\theta \log p_\theta(y \mid x)^{\odot 2}]$ on its diagonal. With logits
$z(x)$ and $J = \partial z / \partial \theta$, the gradient of
$\log p(c \mid x)$ is $J^\top (e_c - p)$, so every class's gradient comes from
one forward solve and one vector-Jacobian product per class.
"""

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import PyTree

from ._batch import Batch
from ._integrator import Integrator
from ._objective import QuadraticPenalty


FisherKind = Literal["exact", "empirical"]


def diagonal_fisher(
    model: eqx.Module,
    batch: Batch,
    integrator: Integrator | None,
    *,
    kind: FisherKind = "exact",
) -> PyTree:
    r"""The diagonal of the Fisher information of `model` on `batch`, the
    weights of EWC's penalty ([`ltc_jax.training.QuadraticPenalty`][]).

    Each sequence is solved alone (`jax.vmap` over the batch) through
    `integrator`, so the gradients are per example and come through whichever
    gradient mode trains; the result is their mean, weighted by
    `batch.weights` (fill-up copies count 0).

    - `kind="exact"` (default): the expectation over the model's own predictive
        distribution, $\sum_c p_c\, (J^\top (e_c - p))^{\odot 2}$ for class
        logits, one vector-Jacobian product per class; $\sum_k (J_k)^{\odot 2}$
        (the rows of $J$) for regression outputs, the Fisher of a unit-variance
        Gaussian. van de Ven (2025, "On the computation of the Fisher
        information in continual learning", arXiv:2502.11756) compared the
        ways EWC implementations compute it: the exact expectation gave the
        best accuracy after continual training, and sampling a label or using
        the true label (the empirical Fisher) did worse.
    - `kind="empirical"`: the squared gradient of the loss at the true labels,
        one product per example: cheaper for many classes, but not the Fisher
        (it is the one van de Ven found worse).

    **Arguments:** `model`: an [`ltc_jax.AbstractSequenceModel`][] (`solve` and
    `outputs`); `batch`: an [`ltc_jax.Batch`][] (class indices or float
    targets); `integrator`: as for training (`None` for a model that solves no
    ODE).

    **Returns:** a pytree of the model's structure: for each inexact array of
    the model, `F` of its shape (non-negative, in the units of squared
    gradients); `None` for every other leaf.

    **Raises:** `ValueError` for an unknown `kind` or weights that sum to 0;
    otherwise as the model's `solve`. Under `vmap` the times are traced, so
    the windowed adjoint needs its number of windows given (`windows=K`, or
    [`ltc_jax.training.resolve_windows`][] first).
    """
    if kind not in ("exact", "empirical"):
        raise ValueError(f"kind must be 'exact' or 'empirical'; got {kind!r}.")
    total = jnp.sum(batch.weights)
    if not isinstance(total, jax.core.Tracer) and not total > 0:
        raise ValueError("The batch's weights sum to 0: no sequence to average over.")
    return _diagonal_fisher(model, batch, integrator, kind)


@eqx.filter_jit
def _diagonal_fisher(model, batch, integrator, kind):
    """`diagonal_fisher`'s computation, compiled once per model structure,
    batch shape, integrator and `kind`."""
    parameters, rest = eqx.partition(model, eqx.is_inexact_array)
    classes = jnp.issubdtype(batch.labels.dtype, jnp.integer)

    def squared_gradients(path, label, y0):
        one = jax.tree.map(lambda leaf: leaf[None], path)  # a batch of 1
        start = {} if y0 is None else dict(y0=y0[None])

        def outputs_of(parameters):
            sequence_model = eqx.combine(parameters, rest)
            trajectory = sequence_model.solve(one, integrator=integrator, **start)
            return sequence_model.outputs(trajectory.ys)[0]

        outputs, pullback = jax.vjp(outputs_of, parameters)
        size = outputs.shape[-1]
        if classes:
            p = jax.nn.softmax(outputs)
            if kind == "empirical":  # d(-log p_label)/dz = p - e_label
                cotangents = (p - jax.nn.one_hot(label, size, dtype=p.dtype))[None]
                weights = jnp.ones((1,), p.dtype)
            else:  # d(log p_c)/dz = e_c - p, for every class c
                cotangents = jnp.eye(size, dtype=p.dtype) - p[None]
                weights = p
        else:
            if kind == "empirical":  # d(|z - y|^2 / 2)/dz = z - y
                cotangents = (outputs - label)[None]
            else:  # a unit-variance Gaussian: the rows of J
                cotangents = jnp.eye(size, dtype=outputs.dtype)
            weights = jnp.ones(cotangents.shape[:1], outputs.dtype)
        (gradients,) = jax.vmap(pullback)(cotangents)
        return jax.tree.map(lambda g: jnp.tensordot(weights, g**2, axes=1), gradients)

    per_example = jax.vmap(squared_gradients)(batch.path, batch.labels, batch.y0)
    share = batch.weights / jnp.sum(batch.weights)
    return jax.tree.map(lambda f: jnp.tensordot(share, f, axes=1), per_example)


def consolidate(
    model: eqx.Module,
    fisher: PyTree,
    *,
    previous: QuadraticPenalty | None = None,
    decay: float = 1.0,
    strength: float = 1.0,
) -> QuadraticPenalty:
    r"""The EWC penalty after learning up to now, online (Schwarz et al. 2018,
    "Progress & compress", ICML; as Huszár 2018 corrects EWC for many tasks):
    one anchor at the current parameters and one running Fisher,
    $F \leftarrow \gamma F + F_\text{new}$, instead of a penalty per task.

    **Arguments:** `model`: the parameters to anchor to now; `fisher`:
    [`ltc_jax.training.diagonal_fisher`][] of `model` on recent data;
    `previous`: the penalty so far (`None` at first); `decay`: $\gamma$ in
    `[0, 1]`, how much of the earlier Fisher is kept (1: all, as EWC; below 1
    the old data's hold fades); `strength`: $\lambda$.

    **Returns:** a [`ltc_jax.training.QuadraticPenalty`][] with `anchor=model`,
    `weights` $\gamma F_\text{previous} + F_\text{new}$, and `strength`; add it
    to the loss with [`ltc_jax.training.Penalized`][].

    **Raises:** `ValueError` for a `decay` outside `[0, 1]` or a negative
    `strength`.
    """
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"decay must lie in [0, 1]; got {decay}.")
    if previous is not None and previous.weights is not None:
        fisher = jax.tree.map(
            lambda old, new: decay * old + new, previous.weights, fisher
        )
    return QuadraticPenalty(model, fisher, strength)
