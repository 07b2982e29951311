"""The diagonal Fisher against per-example gradients taken one sequence and
one class at a time, and the online consolidation of EWC's penalty."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import ltc_jax
from ltc_jax.datasets import SequenceDataset


INTEGRATOR = ltc_jax.make_integrator("tsit5", "checkpoint", rtol=1e-10, atol=1e-12)


def _data(labels):
    rng = np.random.default_rng(0)
    ts = np.cumsum(rng.uniform(0.5, 1.5, (len(labels), 6)), axis=1)
    xs = rng.normal(size=(len(labels), 6, 2))
    return SequenceDataset(ts, xs, [6, 4, 6, 5][: len(labels)], labels)


def _outputs(model, path):
    return model(path, integrator=INTEGRATOR)[0]


@eqx.filter_grad
def _log_probability(model, path, c):
    return jax.nn.log_softmax(_outputs(model, path))[c]


@eqx.filter_grad
def _half_squared_error(model, path, target):
    return 0.5 * jnp.sum((_outputs(model, path) - target) ** 2)


@eqx.filter_grad
def _output(model, path, k):
    return _outputs(model, path)[k]


def _by_hand(model, data, kind):
    """Mean over sequences of squared gradients, each from a solve of that
    sequence alone and one class (or output) at a time."""
    terms = []
    for i in range(len(data)):
        path = ltc_jax.make_batch(data.take([i])).path
        outputs = _outputs(model, path)
        if data.is_classification:
            p = jax.nn.softmax(outputs)
            classes = [int(data.labels[i])] if kind == "empirical" else range(len(p))
            for c in classes:
                weight = 1.0 if kind == "empirical" else float(p[c])
                grad = _log_probability(model, path, c)
                terms.append(jax.tree.map(lambda g, w=weight: w * g**2, grad))
        elif kind == "empirical":
            grad = _half_squared_error(model, path, data.labels[i])
            terms.append(jax.tree.map(lambda g: g**2, grad))
        else:
            for k in range(outputs.shape[0]):
                terms.append(jax.tree.map(lambda g: g**2, _output(model, path, k)))
    total = jax.tree.map(lambda *fs: sum(fs), *terms)
    return jax.tree.map(lambda f: f / len(data), total)


@pytest.mark.parametrize("kind", ["exact", "empirical"])
@pytest.mark.parametrize("task", ["classes", "regression"])
def test_the_diagonal_fisher_is_the_mean_of_per_example_squared_gradients(kind, task):
    if task == "classes":
        data = _data(np.array([0, 2, 1, 2], dtype=np.int32))
        data = SequenceDataset(
            data.ts, data.xs, data.lengths, data.labels, ("a", "b", "c")
        )
    else:
        data = _data(np.array([[0.5, -1.0], [1.0, 0.0], [-0.3, 0.2], [0.0, 2.0]]))
    model = ltc_jax.LTC(2, 4, 3 if task == "classes" else 2, key=jr.key(0))
    # Five per batch: the fifth is a weight-0 copy, which must not count.
    (batch,) = ltc_jax.batches(data, 5)
    assert float(batch.weights[-1]) == 0.0
    fisher = ltc_jax.training.diagonal_fisher(model, batch, INTEGRATOR, kind=kind)
    expected = _by_hand(model, data, kind)
    for got, want in zip(
        jax.tree.leaves(fisher), jax.tree.leaves(expected), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-14)
    assert all(float(jnp.min(f)) >= 0 for f in jax.tree.leaves(fisher))


def test_online_consolidation_decays_the_old_fisher_and_moves_the_anchor():
    model = ltc_jax.LTC(2, 3, 2, key=jr.key(0))
    later = ltc_jax.LTC(2, 3, 2, key=jr.key(1))
    ones = jax.tree.map(jnp.ones_like, eqx.filter(model, eqx.is_inexact_array))
    first = ltc_jax.training.consolidate(model, ones, strength=3.0)
    twos = jax.tree.map(lambda f: 2 * f, ones)
    second = ltc_jax.training.consolidate(
        later, twos, previous=first, decay=0.5, strength=3.0
    )
    assert second.anchor is later and second.strength == 3.0
    for f in jax.tree.leaves(second.weights):
        np.testing.assert_array_equal(f, 0.5 * 1.0 + 2.0)
    # The penalty is zero at the new anchor and (lambda / 2) sum F d^2 away.
    assert float(second(later)) == 0.0
    shifted = jax.tree.map(lambda x: x + 0.1 if eqx.is_inexact_array(x) else x, later)
    count = sum(f.size for f in jax.tree.leaves(second.weights))
    np.testing.assert_allclose(float(second(shifted)), 1.5 * 2.5 * 0.01 * count)
    with pytest.raises(ValueError, match="decay must lie in"):
        ltc_jax.training.consolidate(model, ones, previous=first, decay=1.5)
