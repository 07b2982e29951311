import hashlib
import importlib.resources
import warnings

import jax
import numpy as np
import optax
import pytest

import ltc_jax
from ltc_jax.datasets import (
    TSFormatError,
    drop_observations,
    load_japanese_vowels,
    read_ts,
    standardize,
)


def test_japanese_vowels_known_shapes():
    train, test = load_japanese_vowels()
    assert (len(train), len(test)) == (270, 370)
    assert train.num_channels == test.num_channels == 12
    lengths = np.concatenate([train.lengths, test.lengths])
    assert (lengths.min(), lengths.max()) == (7, 29)
    assert train.num_classes == 9 and train.class_names == tuple("123456789")
    # 30 training utterances per speaker (UCI description).
    np.testing.assert_array_equal(np.bincount(train.labels), [30] * 9)
    assert not np.isnan(train.xs[train.valid_mask()]).any()
    # First value of the first series, as printed in the file.
    assert train.xs[0, 0, 0] == pytest.approx(1.860936)


def test_standardize_uses_train_statistics_only():
    train, test = standardize(*load_japanese_vowels())
    observed = train.xs[train.valid_mask()]
    np.testing.assert_allclose(observed.mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(observed.std(0), 1, atol=1e-10)
    assert np.all(test.xs[~test.valid_mask()] == 0)


HEADER = "@problemName toy\n@dimensions 2\n@equalLength false\n@classLabel true a b\n"


def write(tmp_path, text, name="toy.ts"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reads_unequal_lengths_missing_values_and_labels(tmp_path):
    path = write(tmp_path, "# comment\n" + HEADER + "@data\n1,2,3:4,5,6:a\n7,?:8,9:b\n")
    data = read_ts(path)
    assert data.xs.shape == (2, 3, 2)
    np.testing.assert_array_equal(data.lengths, [3, 2])
    np.testing.assert_array_equal(data.labels, [0, 1])
    np.testing.assert_array_equal(data.xs[0, :, 1], [4, 5, 6])
    assert np.isnan(data.xs[1, 1, 0])


def test_regression_targets(tmp_path):
    path = write(
        tmp_path, "@dimensions 1\n@targetLabel true\n@data\n1,2:0.5\n3,4,5:1.5\n"
    )
    data = read_ts(path)
    assert not data.is_classification
    np.testing.assert_array_equal(data.labels[:, 0], [0.5, 1.5])


@pytest.mark.parametrize(
    "text, match",
    [
        (HEADER, "no @data line"),
        (HEADER + "1,2:3,4:a\n", r"toy.ts:5: expected a .#. comment or .@. header"),
        (HEADER + "@data\n", "empty dataset"),
        (HEADER + "@data\n1,2:3,4:a\n1,2:a\n", r"toy.ts:7: 1 channels, expected 2"),
        (HEADER + "@data\n1,x:3,4:a\n", r"toy.ts:6: channel 0 holds a non-numeric"),
        (HEADER + "@data\n1,2:3,4:\n", r"toy.ts:6: missing label"),
        (HEADER + "@data\n1,2:3,4:c\n", "label 'c'"),
        (HEADER + "@data\n1,2:3:a\n", "different lengths"),
        ("@dimensions 2\n@frobnicate yes\n@data\n", r"toy.ts:2: unknown header"),
        ("@dimensions 2\n@data\n1,2:3,4\n", "declares '@classLabel false'"),
        # A labelled line holding only the channels names its missing label.
        (HEADER + "@data\n1,2:3,4\n", r"toy.ts:6: missing label: .* 2 channels"),
        (
            "@classLabel true a b\n@data\n1,2:3,4\n",
            r"toy.ts:3: missing label: the last field holds several values",
        ),
        (
            "@dimensions 1\n@classLabel false\n@data\n1,2:3,4\n",
            r"toy.ts:4: 2 channels, expected 1. \(A label column\?",
        ),
        ("@timeStamps true\n" + HEADER + "@data\n1,2:3,4:a\n", "not a list of"),
        (
            "@timeStamps true\n" + HEADER + "@data\n(0,1),(x,2):(0,3):a\n",
            r"toy.ts:7: timestamp 'x' is neither a number nor",
        ),
        (
            "@timeStamps true\n" + HEADER + "@data\n(0,1),(0,2):(0,3):a\n",
            "channel 0 has two values at time 0",
        ),
        (
            "@timeStamps true\n" + HEADER + "@data\n(0,1),(2,2),(1,3):(0,3):a\n",
            r"toy.ts:7: channel 0's timestamps are not in increasing order: 1 "
            "follows 2",
        ),
        ("hello\n@data\n", r"toy.ts:1: expected a '#' comment"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path, text, match):
    with pytest.raises(TSFormatError, match=match):
        read_ts(write(tmp_path, text))


def test_a_binary_file_is_named_as_not_a_ts_file(tmp_path):
    """A Parquet file (its magic bytes, then a byte that is not UTF-8) given
    where a `.ts` file is read."""
    path = tmp_path / "new.parquet"
    path.write_bytes(b"PAR1\x15\x04\x15\x80\x01\x15")
    with pytest.raises(TSFormatError, match="new.parquet: is not UTF-8 text, as a"):
        read_ts(path)


def test_test_label_unseen_in_training(tmp_path):
    path = write(tmp_path, HEADER.replace("a b", "a b z") + "@data\n1,2:3,4:z\n")
    with pytest.raises(TSFormatError, match="label 'z', which the training set"):
        read_ts(path, class_names=("a", "b"))


def test_channels_are_checked_before_labels(tmp_path):
    """A file of other channels than the model takes fails on its channels, not
    on a label the training set does not declare."""
    three = "@dimensions 3\n@classLabel true x y\n@data\n1:2:3:x\n"
    with pytest.raises(TSFormatError, match=r"@dimensions 3: 3 channels, the model"):
        read_ts(write(tmp_path, three), class_names=("a", "b"), num_channels=2)
    undeclared = "@classLabel true x y\n@data\n1:2:3:x\n"
    with pytest.raises(TSFormatError, match=r"toy.ts:3: 3 channels, the model takes 2"):
        read_ts(write(tmp_path, undeclared), class_names=("a", "b"), num_channels=2)


def test_unlabelled_file_reads_with_label_minus_one(tmp_path):
    path = write(tmp_path, "@dimensions 2\n@classLabel false\n@data\n1,2:3,4\n5:6\n")
    data = read_ts(path)
    np.testing.assert_array_equal(data.labels, [-1, -1])
    assert data.labels.dtype == np.int32 and data.class_names == ()
    np.testing.assert_array_equal(data.xs[0], [[1, 3], [2, 4]])
    np.testing.assert_array_equal(data.lengths, [2, 1])
    # Read for a trained model, it carries that model's classes.
    assert read_ts(path, class_names=("a", "b")).class_names == ("a", "b")
    # Training and evaluation refuse it, naming the problem.
    model = ltc_jax.LTC(2, 3, 2, key=jax.random.key(0))
    integrator = ltc_jax.make_integrator("euler", "full", dt0=0.5, max_steps=8)
    with pytest.raises(ValueError, match="toy.ts has no labels .* evaluation needs"):
        ltc_jax.evaluate(model, data, integrator=integrator)
    with pytest.raises(ValueError, match="toy.ts has no labels .* training needs"):
        ltc_jax.fit(
            model,
            data,
            integrator=integrator,
            optimizer=optax.sgd(0.1),
            epochs=1,
            batch_size=2,
        )


def test_timestamped_file_is_the_same_data_as_arrays(tmp_path):
    """Each series keeps its own times, float64 (Unix seconds exactly); channels
    observed at different times are merged onto the union of the series' times,
    NaN where a channel is not observed."""
    epoch = 1_700_000_000.0
    text = (
        "@dimensions 2\n@timeStamps true\n@classLabel true a b\n@data\n"
        "(0,1.5),(1.25,2.0),(2.5,?):(0,7),(2.5,9):b\n"
        f"({epoch},3),({epoch + 0.125},4):({epoch + 0.5},5):a\n"
    )
    data = read_ts(write(tmp_path, text))
    nan = np.nan
    expected = ltc_jax.datasets.SequenceDataset(
        ts=np.array([[0.0, 1.25, 2.5], [epoch, epoch + 0.125, epoch + 0.5]]),
        xs=np.array(
            [
                [[1.5, 7.0], [2.0, nan], [nan, 9.0]],
                [[3.0, nan], [4.0, nan], [nan, 5.0]],
            ]
        ),
        lengths=np.array([3, 3], dtype=np.int32),
        labels=np.array([1, 0], dtype=np.int32),
        class_names=("a", "b"),
    )
    assert data.ts.dtype == np.float64
    np.testing.assert_array_equal(data.ts, expected.ts)
    np.testing.assert_array_equal(data.xs, expected.xs)  # NaN where NaN
    np.testing.assert_array_equal(data.lengths, expected.lengths)
    np.testing.assert_array_equal(data.labels, expected.labels)
    assert data.class_names == expected.class_names
    # A shorter series is padded past its own last time; ISO date-times are
    # seconds since the Unix epoch.
    text = (
        "@dimensions 1\n@timeStamps true\n@classLabel false\n@data\n"
        "(1970-01-01 00:00:10,1),(1970-01-01 00:00:12.5,2),(1970-01-01 00:00:13,3)\n"
        "(1970-01-02 00:00:00,4)\n"
    )
    data = read_ts(write(tmp_path, text))
    np.testing.assert_array_equal(data.lengths, [3, 1])
    np.testing.assert_array_equal(data.ts[0], [10.0, 12.5, 13.0])
    assert data.ts[1, 0] == 86_400.0 and np.all(np.diff(data.ts[1]) > 0)
    np.testing.assert_array_equal(data.xs[:, 0, 0], [1.0, 4.0])
    # A zone, as Z or an offset, gives the instant it names, without a warning.
    text = (
        "@dimensions 1\n@timeStamps true\n@classLabel false\n@data\n"
        "(1970-01-01T00:00:10Z,1),(1970-01-01T01:00:12.5+01:00,2)\n"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = read_ts(write(tmp_path, text))
    np.testing.assert_array_equal(data.ts[0], [10.0, 12.5])


def test_concatenated_sets_are_the_set_of_all_their_sequences():
    """Two sets of other lengths, joined: the same arrays as one set built from
    all their sequences (padding to the longest); sets of other channels or
    classes are refused."""
    from ltc_jax.datasets import SequenceDataset, concatenate

    rng = np.random.default_rng(0)
    lengths = [3, 5, 2, 7, 4]
    times = [np.cumsum(rng.uniform(0.5, 1.5, n)) for n in lengths]
    values = [rng.normal(size=(n, 2)) for n in lengths]
    labels = ["a", "b", "a", "b", "b"]

    def built(part):
        return SequenceDataset.from_sequences(
            [times[i] for i in part],
            [values[i] for i in part],
            [labels[i] for i in part],
            class_names=["a", "b"],
        )

    joined = concatenate([built([0, 1, 2]), built([3, 4])])
    whole = built(range(5))
    for name in ("xs", "lengths", "labels"):
        np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name))
    valid = whole.valid_mask()
    np.testing.assert_array_equal(joined.ts[valid], whole.ts[valid])
    assert joined.class_names == ("a", "b") and joined.ts.shape == whole.ts.shape
    assert np.all(np.diff(joined.ts, axis=1) > 0)  # padding continues the times
    wide = SequenceDataset.from_sequences(
        times[:1], [np.zeros((3, 3))], ["a"], class_names=["a", "b"]
    )
    with pytest.raises(ValueError, match="Dataset 1 has 3 channels"):
        concatenate([built([0]), wide])
    with pytest.raises(ValueError, match="at least one dataset"):
        concatenate([])


def test_drop_observations_keeps_a_random_ordered_subset():
    train, _ = load_japanese_vowels()
    dropped = drop_observations(train, 0.5, seed=1)
    np.testing.assert_array_equal(
        dropped.lengths, np.maximum(1, np.round(0.5 * train.lengths))
    )
    np.testing.assert_array_equal(dropped.labels, train.labels)
    for i in range(len(train)):
        n = dropped.lengths[i]
        kept_times = dropped.ts[i, :n]
        assert np.all(np.diff(kept_times) > 0)  # in time order
        index = kept_times.astype(int)  # JapaneseVowels times are frame indices
        np.testing.assert_array_equal(dropped.xs[i, :n], train.xs[i, index])
    again = drop_observations(train, 0.5, seed=1)
    np.testing.assert_array_equal(again.ts, dropped.ts)
    with pytest.raises(ValueError, match="rate"):
        drop_observations(train, 1.0)


def test_mitbih_208_is_the_documented_file_in_millivolts():
    resource = importlib.resources.files("ltc_jax.datasets") / "data"
    blob = (resource / "mitbih_208_ecg.dat").read_bytes()
    readme = (resource / "README.md").read_text()
    assert hashlib.sha256(blob).hexdigest() in readme
    ts, millivolts = ltc_jax.datasets.load_mitbih_208()
    assert ts.shape == millivolts.shape == (108_000,)
    assert ts.dtype == millivolts.dtype == np.float64
    np.testing.assert_allclose(np.diff(ts), 1 / 360, rtol=1e-9)
    assert ts[0] == 0.0 and ts[-1] == pytest.approx(107_999 / 360)
    # The first raw values are 975, 981, 987 (ADC units, zero 1024, gain 200/mV).
    np.testing.assert_allclose(millivolts[:3], [-0.245, -0.215, -0.185])


def test_forecast_windows():
    ts = np.arange(10) * 0.5
    values = np.arange(10.0) ** 2
    data = ltc_jax.datasets.forecast_windows(
        ts, values, window=3, horizon=2, starts=np.array([0, 5])
    )
    np.testing.assert_array_equal(data.ts, [[0.0, 0.5, 1.0], [2.5, 3.0, 3.5]])
    np.testing.assert_array_equal(data.xs[..., 0], [[0, 1, 4], [25, 36, 49]])
    np.testing.assert_array_equal(data.labels, [[16.0], [81.0]])  # 2 samples on
    np.testing.assert_array_equal(data.lengths, [3, 3])
    assert not data.is_classification
    with pytest.raises(ValueError, match=r"needs starts in \[0, 5\]"):
        ltc_jax.datasets.forecast_windows(
            ts, values, window=3, horizon=2, starts=np.array([6])
        )
    with pytest.raises(ValueError, match="window must be at least 2"):
        ltc_jax.datasets.forecast_windows(
            ts, values, window=1, horizon=1, starts=np.array([0])
        )
    with pytest.raises(ValueError, match="horizon must be at least 1"):
        ltc_jax.datasets.forecast_windows(
            ts, values, window=2, horizon=0, starts=np.array([0])
        )
    with pytest.raises(ValueError, match="same n"):
        ltc_jax.datasets.forecast_windows(
            ts[:-1], values, window=2, horizon=1, starts=np.array([0])
        )
    with pytest.raises(ValueError, match="1-D integer array"):
        ltc_jax.datasets.forecast_windows(
            ts, values, window=2, horizon=1, starts=np.array([0.5])
        )


def test_mitbih_208_windows_spread_over_the_record_on_one_grid():
    ts, millivolts = ltc_jax.datasets.load_mitbih_208()
    data = ltc_jax.datasets.mitbih_208_windows(5, horizon=2, count=3)
    # Starts 0, (108000 - 7) / 2 and 108000 - 7: the last target is the last sample.
    starts = np.array([0, 53_996, 107_993])
    np.testing.assert_array_equal(
        data.xs[..., 0], millivolts[starts[:, None] + np.arange(5)]
    )
    np.testing.assert_array_equal(data.labels[:, 0], millivolts[starts + 6])
    assert data.labels[-1, 0] == millivolts[-1]
    np.testing.assert_array_equal(data.ts, np.tile(np.arange(5) / 360, (3, 1)))
    np.testing.assert_allclose(data.durations, 4 / 360)
    with pytest.raises(ValueError, match="does not fit"):
        ltc_jax.datasets.mitbih_208_windows(108_000, horizon=1, count=2)
    with pytest.raises(ValueError, match="count must be at least 1"):
        ltc_jax.datasets.mitbih_208_windows(5, horizon=1, count=0)


def test_durations_read_each_sequence_to_its_length():
    data = ltc_jax.datasets.SequenceDataset(
        ts=np.array([[1.0, 2.5, 4.0], [0.0, 0.5, 99.0]]),
        xs=np.zeros((2, 3, 1)),
        lengths=np.array([3, 2], dtype=np.int32),
        labels=np.array([0, 1], dtype=np.int32),
        class_names=("a", "b"),
    )
    np.testing.assert_array_equal(data.durations, [3.0, 0.5])
