import hashlib
import importlib.resources

import numpy as np
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
        ("@dimensions 2\n@data\n1,2:3,4\n", "neither '@classLabel true'"),
        ("hello\n@data\n", r"toy.ts:1: expected a '#' comment"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path, text, match):
    with pytest.raises(TSFormatError, match=match):
        read_ts(write(tmp_path, text))


def test_test_label_unseen_in_training(tmp_path):
    path = write(tmp_path, HEADER.replace("a b", "a b z") + "@data\n1,2:3,4:z\n")
    with pytest.raises(TSFormatError, match="label 'z', which the training set"):
        read_ts(path, class_names=("a", "b"))


def test_timestamped_series_not_supported(tmp_path):
    with pytest.raises(NotImplementedError, match="timeStamps"):
        read_ts(write(tmp_path, "@timeStamps true\n@data\n"))


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
