"""Input checks at the library's API boundary: each names the problem."""

import dataclasses

import numpy as np
import pytest
from helpers import quiet_fit

import ltc_jax
from ltc_jax.datasets import SequenceDataset


def _data(labels, channels=3, times=5):
    n = len(labels)
    return SequenceDataset(
        ts=np.broadcast_to(np.arange(times, dtype=float), (n, times)).copy(),
        xs=np.random.default_rng(0).normal(size=(n, times, channels)),
        lengths=np.full(n, times, dtype=np.int32),
        labels=np.asarray(labels, dtype=np.int32),
        class_names=("a", "b"),
        name="toy",
    )


INTEGRATOR = dict(rtol=1e-3, atol=1e-4, max_steps=64)


def test_one_based_labels_are_named_before_training(getkey):
    model = ltc_jax.LTC(3, 4, 2, key=getkey())
    with pytest.raises(ValueError, match=r"labels from 1 to 2 \(1-based labels"):
        quiet_fit(model, _data([1, 2]), ltc_jax.make_integrator(**INTEGRATOR))
    with pytest.raises(ValueError, match=r"indices in \[0, 2\)"):
        ltc_jax.evaluate(
            model, _data([0, 5]), integrator=ltc_jax.make_integrator(**INTEGRATOR)
        )


def test_a_set_that_names_other_classes_than_the_model_has_is_refused(getkey):
    """A test set built without class_names names only the classes it holds:
    its labels are indices into those, not the model's, and were scored against
    the wrong classes (accuracy 0 for a set of one class, 'healthy', index 0,
    where the model's index 0 is 'faulty'). It is refused, in fit and evaluate;
    the same sequences with the training set's class_names are scored."""
    model = ltc_jax.LTC(3, 4, 2, key=getkey())
    train = _data([0, 1, 0])
    ts, xs = list(train.ts), list(train.xs)
    test = SequenceDataset.from_sequences(ts, xs, ["b", "b", "b"], name="test")
    assert test.class_names == ("b",) and list(test.labels) == [0, 0, 0]
    integrator = ltc_jax.make_integrator(**INTEGRATOR)
    message = r"test names 1 classes \('b',\), but the model has output_size=2"
    with pytest.raises(ValueError, match=message):
        ltc_jax.evaluate(model, test, integrator=integrator)
    with pytest.raises(ValueError, match=message):
        quiet_fit(model, test, integrator)
    named = SequenceDataset.from_sequences(
        ts, xs, ["b", "b", "b"], class_names=train.class_names
    )
    assert list(named.labels) == [1, 1, 1]
    # Integer labels without names index the model's classes: a set holding
    # classes 0 and 1 of a 3-class model is scored, not refused.
    three = ltc_jax.LTC(3, 4, 3, key=getkey())
    indexed = SequenceDataset(train.ts, train.xs, train.lengths, [0, 1, 0])
    assert indexed.class_names == ("0", "1")
    logits = three(ltc_jax.make_input_path(indexed), integrator=integrator)
    expected = np.mean(np.argmax(np.asarray(logits), axis=-1) == [0, 1, 0])
    scored = ltc_jax.evaluate(three, indexed, integrator=integrator)
    assert scored["accuracy"] == pytest.approx(expected)
    scored = ltc_jax.evaluate(model, named, integrator=integrator)
    logits = model(ltc_jax.make_input_path(named), integrator=integrator)
    expected = np.mean(np.argmax(np.asarray(logits), axis=-1) == 1)
    assert scored["accuracy"] == pytest.approx(expected)


def test_a_non_finite_regression_target_is_named_before_training(getkey):
    """A NaN target made the first loss NaN, and the error blamed the
    solver's step; it is refused naming the sequence, in fit and evaluate."""
    model = ltc_jax.LTC(3, 4, 1, key=getkey())
    targets = np.array([[0.5], [np.nan], [1.0], [np.inf]])
    data = dataclasses.replace(_data([0, 1, 0, 1]), labels=targets, class_names=())
    integrator = ltc_jax.make_integrator(**INTEGRATOR)
    with pytest.raises(ValueError, match=r"2 sequence\(s\) with a NaN or infinite"):
        quiet_fit(model, data, integrator)
    with pytest.raises(ValueError, match=r"the first at index 1 \(\[nan\]\)"):
        ltc_jax.evaluate(model, data, integrator=integrator)


def test_wrong_input_size_is_a_value_error(getkey):
    model = ltc_jax.LTC(3, 4, 2, key=getkey())
    path = ltc_jax.InputPath(np.arange(5.0), np.ones((2, 5, 4)))
    with pytest.raises(
        ValueError, match="takes 3 input channels; the input path has 4"
    ):
        model(path, integrator=ltc_jax.make_integrator(**INTEGRATOR))


def test_datasets_and_paths_accept_lists(getkey):
    """Lists become arrays: the same logits as from NumPy arrays."""
    arrays = _data([0, 1])
    lists = SequenceDataset(
        ts=arrays.ts.tolist(),
        xs=arrays.xs.tolist(),
        lengths=arrays.lengths.tolist(),
        labels=arrays.labels.tolist(),
        class_names=["a", "b"],
    )
    assert lists.xs.shape == (2, 5, 3) and lists.class_names == ("a", "b")
    model = ltc_jax.LTC(3, 4, 2, key=getkey())
    integrator = ltc_jax.make_integrator(**INTEGRATOR)
    from_lists = model(ltc_jax.make_input_path(lists), integrator=integrator)
    from_arrays = model(ltc_jax.make_input_path(arrays), integrator=integrator)
    np.testing.assert_array_equal(from_lists, from_arrays)
    path = ltc_jax.InputPath(arrays.ts[0].tolist(), arrays.xs.tolist())
    np.testing.assert_array_equal(model(path, integrator=integrator), from_arrays)
