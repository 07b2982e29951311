"""A dataset from a researcher's own arrays: ragged sequences, labels of any
kind, and classes inferred where no names are given."""

import warnings

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import ltc_jax
from ltc_jax.datasets import SequenceDataset, stratified_split


def _ragged():
    rng = np.random.default_rng(0)
    lengths = [5, 3, 7, 4]
    ts = [np.cumsum(rng.uniform(0.5, 1.5, n)) + 1.7e9 for n in lengths]
    xs = [rng.normal(size=(n, 2)) for n in lengths]
    xs[1][1, 0] = np.nan  # a value not observed
    return ts, xs, ["walk", "run", "walk", "sit"]


def test_ragged_arrays_become_a_padded_dataset_with_sorted_class_names():
    ts, xs, labels = _ragged()
    data = SequenceDataset.from_sequences(ts, xs, labels, name="mine")
    assert data.class_names == ("run", "sit", "walk")
    np.testing.assert_array_equal(data.labels, [2, 0, 2, 1])
    np.testing.assert_array_equal(data.lengths, [5, 3, 7, 4])
    assert data.xs.shape == (4, 7, 2) and data.ts.dtype == np.float64
    for i, (t, x) in enumerate(zip(ts, xs, strict=True)):
        np.testing.assert_array_equal(data.ts[i, : len(t)], t)  # exact, float64
        np.testing.assert_array_equal(data.xs[i, : len(x)], x)
        assert np.all(np.diff(data.ts[i]) > 0)  # padding continues the grid
    # The path sees each observation at its time from the sequence's start.
    path = ltc_jax.make_batch(data).path
    got = path.evaluate(jnp.asarray(ts[2][3] - ts[2][0]))[2]
    np.testing.assert_allclose(got, xs[2][3], rtol=1e-9)


def test_a_test_set_takes_the_training_classes_and_refuses_others():
    ts, xs, labels = _ragged()
    names = ("run", "sit", "stand", "walk")
    data = SequenceDataset.from_sequences(ts, xs, labels, class_names=names)
    np.testing.assert_array_equal(data.labels, [3, 0, 3, 1])
    with pytest.raises(ValueError, match=r"\['walk'\] are not among"):
        SequenceDataset.from_sequences(ts, xs, labels, class_names=("run", "sit"))
    # Class names given as numbers name the classes of numeric labels.
    numbers = SequenceDataset.from_sequences(ts, xs, [1, 0, 1, 0], class_names=[0, 1])
    assert numbers.class_names == ("0", "1")
    np.testing.assert_array_equal(numbers.labels, [1, 0, 1, 0])
    with pytest.raises(ValueError, match=r"Sequence 2 has no label \(None\)"):
        SequenceDataset.from_sequences(ts, xs, ["run", "sit", None, "walk"])


def test_new_recordings_without_labels_are_a_set_to_predict_on(getkey):
    """labels=None: every class index -1, the training set's class names kept,
    refused by evaluation; the model reads the same path as from the same
    sequences labelled, so its outputs are the same."""
    ts, xs, labels = _ragged()
    train = SequenceDataset.from_sequences(ts, xs, labels)
    new = SequenceDataset.from_sequences(ts, xs, None, class_names=train.class_names)
    assert new.class_names == train.class_names and not new.is_labelled
    np.testing.assert_array_equal(new.labels, [-1] * 4)
    np.testing.assert_array_equal(new.xs, train.xs)
    model = ltc_jax.LTC(2, 4, 3, key=getkey())
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-6, atol=1e-6, max_steps=64)
    np.testing.assert_array_equal(
        model(ltc_jax.make_input_path(new), integrator=integrator),
        model(ltc_jax.make_input_path(train), integrator=integrator),
    )
    with pytest.raises(ValueError, match="evaluation needs labelled data"):
        ltc_jax.evaluate(model, new, integrator=integrator)
    with pytest.raises(ValueError, match="ts and xs must .* got 4 and 3"):
        SequenceDataset.from_sequences(ts, xs[:3], None)


def test_one_channel_and_float_targets_make_a_regression_set():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = SequenceDataset.from_sequences(
            [np.arange(3.0), np.arange(5.0)], [np.ones(3), np.zeros(5)], [0.5, -1.0]
        )
    assert data.num_channels == 1 and not data.is_classification
    assert data.num_classes == 0
    np.testing.assert_array_equal(data.labels, [[0.5], [-1.0]])
    # Float labels of a few whole numbers may mean classes: targets, said so.
    with pytest.warns(UserWarning, match=r"only the whole numbers \[0.0, 1.0\]"):
        binary = SequenceDataset.from_sequences(
            [np.arange(3.0)] * 4, [np.ones(3)] * 4, [0.0, 1.0, 1.0, 0.0]
        )
    assert not binary.is_classification
    # Whole-number targets that are not indices 0 to k - 1 (remaining
    # lifetimes, ratings from 1), or as many values as sequences, are targets.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for targets in ([112.0, 98.0, 69.0, 40.0], [1.0, 2.0, 2.0, 1.0], [0.0, 1.0]):
            n = len(targets)
            SequenceDataset.from_sequences(
                [np.arange(3.0)] * n, [np.ones(3)] * n, targets
            )
    # Float labels with class names meant classes: refused, not read as targets.
    with pytest.raises(ValueError, match="float labels, which are regression"):
        SequenceDataset.from_sequences(
            [np.arange(3.0)] * 2, [np.ones(3)] * 2, [0.0, 1.0], class_names=["a", "b"]
        )


def test_integer_labels_without_names_are_classes_0_to_the_largest():
    ts = np.tile(np.arange(4.0), (6, 1))
    data = SequenceDataset(ts, np.zeros((6, 4, 1)), [4] * 6, [0, 2, 1, 2, 0, 1])
    assert data.class_names == ("0", "1", "2") and data.num_classes == 3
    rest, held = stratified_split(data, 0.5, seed=0)
    assert len(rest) + len(held) == 6 and len(held) == 3


def test_mismatched_sequences_are_named():
    with pytest.raises(ValueError, match="one entry per sequence; got 2, 1 and 2"):
        SequenceDataset.from_sequences([[0.0, 1.0]] * 2, [[1.0, 2.0]], [0, 1])
    with pytest.raises(ValueError, match="Sequence 1: ts"):
        SequenceDataset.from_sequences(
            [[0.0, 1.0], [0.0, 1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]], [0, 1]
        )
    with pytest.raises(ValueError, match="different channels"):
        SequenceDataset.from_sequences(
            [[0.0, 1.0], [0.0, 1.0]], [np.ones((2, 1)), np.ones((2, 3))], [0, 1]
        )


def test_bad_times_and_string_labels_are_refused_when_the_set_is_built():
    """Repeated, decreasing and NaN times name their sequence and position at
    construction (they failed inside the solve before); float32 Unix times
    whose 300 s gaps are rounded to 256 and 384 are refused by
    `from_sequences` as by the constructor; string labels given to the
    constructor point to `from_sequences`."""
    one = [np.zeros((3, 1))]
    for times, message in [
        ([0.0, 1.0, 1.0], "Sequence 0: .* time 1.0 at position 2, after 1.0"),
        ([0.0, 2.0, 1.0], "time 1.0 at position 2, after 2.0"),
        ([0.0, np.nan, 2.0], "time nan at position 1"),
    ]:
        with pytest.raises(ValueError, match=message):
            SequenceDataset.from_sequences([np.array(times)], one, ["a"])
    unix = (1.7e9 + np.arange(6) * 300.0).astype(np.float32)
    assert sorted(set(np.diff(unix.astype(np.float64)))) == [256.0, 384.0]
    for build in (
        lambda: SequenceDataset.from_sequences([unix] * 2, [np.zeros(6)] * 2, [0, 1]),
        lambda: SequenceDataset(
            np.stack([unix] * 2), np.zeros((2, 6, 1)), [6, 6], [0, 1]
        ),
    ):
        with pytest.raises(ValueError, match="lose their resolution in float32"):
            build()
        # The fix is at the source: the cast had rounded the gaps already.
        with pytest.raises(ValueError, match="from their source, not cast to float32"):
            build()
    # 1 s gaps at Unix times in float32 (steps of 128 s): equal times, named
    # with the precision that made them equal.
    seconds = (1.7e9 + np.arange(6.0)).astype(np.float32)
    with pytest.raises(ValueError, match="after 1700000000.0. The times were given in "
                       "float32, which resolves only steps of 128"):  # fmt: skip
        SequenceDataset.from_sequences([seconds] * 2, [np.zeros(6)] * 2, [0, 1])
    for labels in (["a", "b"], np.array(["a", None], dtype=object)):
        with pytest.raises(ValueError, match="from_sequences takes class labels"):
            SequenceDataset(
                np.tile(np.arange(3.0), (2, 1)), np.zeros((2, 3, 1)), [3, 3], labels
            )
    with pytest.raises(ValueError, match="from_sequences takes class labels"):
        SequenceDataset(
            np.tile(np.arange(3.0), (2, 1)), np.zeros((2, 3, 1)), [3, 3], ["a", "b"]
        )


@pytest.mark.parametrize("unit", ["s", "ms", "ns"])
def test_datetime64_times_become_unix_seconds_whatever_their_resolution(unit):
    """Times 30 and 60 s apart from 2024-01-01T00:00:00 (1,704,067,200 Unix
    seconds), as datetime64 of any resolution, as the timedelta64 from the
    first, as a zone-aware pandas index of the same instants at +01:00, or as
    naive Python date-times: the same seconds."""
    start = np.datetime64("2024-01-01T00:00:00", unit)
    dates = start + np.array([0, 30, 90], dtype="timedelta64[s]")
    import pandas as pd

    zoned = pd.DatetimeIndex(dates).tz_localize("UTC").tz_convert("Europe/Paris")
    naive = list(pd.DatetimeIndex(dates).to_pydatetime())  # Python's, read as UTC
    for times, first in [
        (dates, 1_704_067_200.0),
        (dates - start, 0.0),
        (zoned, 1_704_067_200.0),  # the same instants, at +01:00
        (naive, 1_704_067_200.0),
    ]:
        data = SequenceDataset.from_sequences(
            [times] * 2, [np.zeros(3)] * 2, ["a", "b"]
        )
        np.testing.assert_array_equal(data.ts[0, :3], first + np.array([0, 30, 90]))
    mixed = [*zoned[:2].to_pydatetime(), naive[2]]  # +01:00 beside UTC's naive
    with pytest.raises(ValueError, match="Sequence 1: its date-times mix ones with"):
        SequenceDataset.from_sequences([dates, mixed], [np.zeros(3)] * 2, ["a", "b"])


def test_windows_at_absolute_times_take_one_shared_grid():
    """Windows cut at different offsets of one 360 Hz recording, each keeping
    its absolute times: from their starts they agree to float64 rounding, so
    the path is one shared grid, with the losses of the per-sequence layout."""
    ts, millivolts = ltc_jax.datasets.load_mitbih_208()
    starts = np.array([0, 1234, 50_001, 99_999])
    data = ltc_jax.datasets.forecast_windows(
        ts, millivolts, window=50, horizon=5, starts=starts
    )
    assert not np.all(data.ts == data.ts[:1])  # absolute: different rows
    relative = data.ts - data.ts[:, :1]
    assert np.any(relative != relative[:1])  # and not bitwise equal from 0
    path = ltc_jax.make_input_path(data)
    assert path.shared_times
    per_sequence = ltc_jax.InputPath(relative, data.xs)
    model = ltc_jax.LTC(1, 4, 1, key=jr.key(0))
    # Adaptive steps to a tight tolerance: both layouts solve the same ODE (a
    # fixed-step count can differ by one where a duration is a whole number of
    # steps to float64's rounding).
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        model(path, integrator=integrator),
        model(per_sequence, integrator=integrator),
        rtol=1e-8,
    )


def test_integer_labels_are_classes_in_their_numeric_order():
    labels = [10, 2, 0, 2, 10, 7]
    data = SequenceDataset.from_sequences(
        [np.arange(3.0)] * 6, [np.ones(3)] * 6, labels
    )
    assert data.class_names == ("0", "2", "7", "10")  # not "10" before "2"
    np.testing.assert_array_equal(data.labels, [3, 1, 0, 1, 3, 2])


def test_a_set_numbering_its_own_classes_is_refused_beside_the_training_set():
    """A test set built without the training set's class_names numbers only
    its own classes ('b' becomes 0, which is 'a' in training): standardize and
    fit's validation refuse it, naming both; a set of integer labels whose
    names are a prefix of the other's numbers the same classes, and passes."""
    ts, xs, _ = _ragged()
    train = SequenceDataset.from_sequences(ts, xs, ["a", "b", "c", "a"])
    test = SequenceDataset.from_sequences(ts, xs, ["b", "c", "b", "c"], name="new")
    assert test.labels[0] == train.labels[0] == 0  # 'b' and 'a': the trap
    with pytest.raises(ValueError, match=r"'new' set's classes \('b', 'c'\) are"):
        ltc_jax.datasets.standardize(train, test)
    model = ltc_jax.LTC(2, 4, 3, key=jr.key(0))
    with pytest.raises(ValueError, match="validation set's classes"):
        ltc_jax.fit(
            model,
            train,
            integrator=ltc_jax.make_integrator("euler", dt0=0.1, max_steps=64),
            optimizer=__import__("optax").sgd(0.0),
            epochs=1,
            batch_size=4,
            validation=test,
            progress=ltc_jax.training.NoFitProgress(),
        )
    same = SequenceDataset.from_sequences(
        ts, xs, ["b", "c", "b", "c"], class_names=train.class_names
    )
    ltc_jax.datasets.standardize(train, same)  # built as the docs say: accepted
    numbered = SequenceDataset.from_sequences(ts, xs, [0, 1, 2, 0])
    fewer = SequenceDataset.from_sequences(ts, xs, [0, 1, 1, 0])  # "0", "1"
    ltc_jax.datasets.standardize(numbered, fewer)
    ltc_jax.datasets.standardize(fewer, numbered)


def test_infinite_values_and_labels_of_mixed_kinds_are_refused_when_built():
    """An infinity is named by sequence, position and channel when the set is
    built (the solve refused it later, without them); padding is never read,
    so an infinity there is no error. Labels mixing strings and numbers would
    all become strings; they are refused."""
    ts, xs, labels = _ragged()
    xs[2][4, 1] = -np.inf
    with pytest.raises(ValueError, match=r"Sequence 2: xs holds -inf at position 4"):
        SequenceDataset.from_sequences(ts, xs, labels)
    data = SequenceDataset.from_sequences(*_ragged())
    padded = data.xs.copy()
    padded[1, 5, 0] = np.inf  # sequence 1 has 3 observations
    SequenceDataset(data.ts, padded, data.lengths, data.labels, data.class_names)
    for mixed in (["a", 1, "b", "a"], ["a", "b", 2.5, "a"]):
        with pytest.raises(ValueError, match="mix strings with other kinds"):
            SequenceDataset.from_sequences(ts[:], _ragged()[1], mixed)
