"""Sensor streams: reading a historian's long format, and windows on a slow clock
checked against a direct frame-by-frame transcription."""

import dataclasses
import inspect
import warnings

import numpy as np
import pytest

from ltc_jax.datasets import (
    SensorStreams,
    read_sensor_log,
    simulate_plant,
    stream_windows,
)
from ltc_jax.datasets._streams import _rows_of


pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def plant():
    return simulate_plant(machines=2, sensors=10, seed=3, simulated_seconds=900.0)


def _single_sensor(times, values, group, rate_hz, failure=np.nan):
    """One machine's streams of one sensor of `group` at `rate_hz`, sampled at
    `times`, failing at `failure` (NaN: none seen)."""
    return SensorStreams(
        machine=np.zeros(times.size, np.int32),
        sensor=np.zeros(times.size, np.int32),
        time=times,
        value=values,
        sensor_group=(group,),
        sensor_rate_hz=[rate_hz],
        failure_time=[failure],
    )


def _direct(streams, machine, sensor, kind, end, window, clock):
    """The features of one sensor in one window, frame by frame with masks."""
    times, values = streams.samples(machine, sensor)
    frames = round(window * clock)
    rows = []
    for k in range(1, frames + 1):
        lo, hi = end - window + (k - 1) / clock, end - window + k / clock
        inside = values[(times > lo) & (times <= hi)]
        before = values[times <= hi]
        if kind == "fast":
            diffs = np.diff(inside)
            rows.append(
                [
                    inside.mean() if inside.size else np.nan,
                    inside.std() if inside.size else np.nan,
                    np.sqrt(np.mean(diffs**2)) if diffs.size else np.nan,
                ]
            )
        elif kind == "slow":
            rows.append([before[-1] if before.size else np.nan, float(inside.size > 0)])
        else:
            last = times[times <= hi]
            first = streams.observed_range(machine)[0]
            since = hi - (last[-1] if last.size else first)
            rows.append([inside.size, inside.sum(), since])
    return np.array(rows)


# Windows apart, overlapping by whole frames (which share their features), and
# overlapping by fractions of a frame.
@pytest.mark.parametrize("stride_seconds", [170.0, 20.0, 25.5])
def test_frame_features_match_a_direct_transcription(plant, stride_seconds):
    windows = stream_windows(
        plant, 60.0, horizon_seconds=300.0, stride_seconds=stride_seconds
    )
    kinds = {"vibration": "fast", "pressure": "fast", "temperature": "slow"}
    assert windows.clock_hz == 1.0  # the slowest continuous sensor: temperature
    for i in (0, 1, len(windows) // 2, len(windows) - 1):
        column = 0
        for s, group in enumerate(plant.sensor_group):
            kind = kinds.get(group, "event")
            expected = _direct(
                plant, windows.machine[i], s, kind, windows.end_time[i], 60.0, 1.0
            )
            got = windows.dataset.xs[i, :, column : column + expected.shape[1]]
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
            column += expected.shape[1]
        assert column == windows.dataset.num_channels


def test_streams_keep_integer_columns_without_a_copy(plant):
    # A plant's rows are held once: int32 indices as given, float64 columns too.
    for name in ("machine", "sensor", "time", "value"):
        given = getattr(plant, name)
        kept = getattr(dataclasses.replace(plant), name)
        assert np.shares_memory(given, kept), name
    # Other integer types are checked and stored as int32.
    fields = {f.name: getattr(plant, f.name) for f in dataclasses.fields(SensorStreams)}
    fields.update(
        machine=plant.machine.astype(np.uint64), sensor=plant.sensor.astype(np.int64)
    )
    wide = SensorStreams(**fields)
    np.testing.assert_array_equal(wide.machine, plant.machine)
    assert wide.machine.dtype == wide.sensor.dtype == np.int32


def test_samples_and_observed_range_of_indices_outside_the_streams(plant):
    # Searched in the columns' own dtype: indices beyond it hold no rows.
    for machine, sensor in ((2**31 - 1, 0), (2**40, 0), (-1, 0), (0, -(2**40))):
        assert [a.size for a in plant.samples(machine, sensor)] == [0, 0]
    expected = plant.time[(plant.machine == 1) & (plant.sensor == 2)]
    np.testing.assert_array_equal(plant.samples(np.int64(1), np.uint8(2))[0], expected)
    with pytest.raises(TypeError):
        plant.samples(0.5, 0)
    for machine in (-1, plant.machines, 2**40):
        with pytest.raises(ValueError, match=f"No machine {machine}: the streams"):
            plant.observed_range(machine)
    # A row holding its dtype's largest value is found.
    top = np.iinfo(np.int8).max
    index = np.array([0, top - 1, top, top], np.int8)
    assert _rows_of(index, top).tolist() == [2, 4]
    assert _rows_of(index, top - 1).tolist() == [1, 2]


def test_labels_and_windows_follow_the_failure_times(plant):
    horizon = 300.0
    windows = stream_windows(plant, 120.0, horizon_seconds=horizon)
    failure = plant.failure_time[windows.machine]
    np.testing.assert_array_equal(failure - windows.end_time, windows.time_to_failure)
    expected = (failure - windows.end_time <= horizon).astype(np.int32)
    np.testing.assert_array_equal(windows.dataset.labels, expected)
    assert 0 < expected.mean() < 1
    for m in range(plant.machines):
        first, _ = plant.observed_range(m)
        ends = windows.end_time[windows.machine == m]
        np.testing.assert_allclose(ends - first, 120.0 * np.arange(1, ends.size + 1))
        assert ends[-1] <= plant.failure_time[m] < ends[-1] + 120.0
    # Each window on the shared grid of its frames, from its own start.
    np.testing.assert_array_equal(windows.dataset.ts[0], np.arange(1.0, 121.0))
    assert np.all(windows.dataset.ts == windows.dataset.ts[0])


def _base(streams, **columns):
    """A `SensorStreams` with `streams`' sensors and machines and new rows."""
    rows = {k: getattr(streams, k) for k in ("machine", "sensor", "time", "value")}
    rows.update(columns)
    order = np.lexsort((rows["time"], rows["sensor"], rows["machine"]))
    shared = {
        f.name: getattr(streams, f.name)
        for f in dataclasses.fields(SensorStreams)
        if f.name not in rows
    }
    return SensorStreams(**shared, **{k: np.asarray(v)[order] for k, v in rows.items()})


def test_a_window_never_reads_past_its_end(plant):
    windows = stream_windows(plant, 60.0, horizon_seconds=300.0)
    i = len(windows) // 2
    end, m = windows.end_time[i], windows.machine[i]
    later = (plant.machine == m) & (plant.time > end)
    # Every later sample moved (closer to the end) and changed, and an alarm
    # just after the end.
    changed = _base(
        plant,
        machine=np.r_[plant.machine, m],
        sensor=np.r_[plant.sensor, plant.sensors - 1],
        time=np.r_[
            np.where(later, end + (plant.time - end) / 2, plant.time), end + 1e-6
        ],
        value=np.r_[np.where(later, plant.value * -7.0 + 3.0, plant.value), 3.0],
    )
    again = stream_windows(changed, 60.0, horizon_seconds=300.0)
    (j,) = np.flatnonzero((again.machine == m) & (again.end_time == end))
    np.testing.assert_array_equal(again.dataset.xs[j], windows.dataset.xs[i])
    assert not np.array_equal(again.dataset.xs[j + 1], windows.dataset.xs[i + 1])


def test_frame_statistics_keep_their_precision_far_from_zero():
    """A reading near 1000 that started at 0: the frame's standard deviation of
    a 1e-3 noise is its own, not cancelled against the offset."""
    times = np.arange(1, 200_001) / 100.0
    noise = 1e-3 * np.random.default_rng(0).standard_normal(times.size)
    values = np.where(times < 1.0, 0.0, 1000.0 + noise)
    streams = _single_sensor(times, values, "vibration", 100.0)
    windows = stream_windows(streams, 10.0, clock_hz=1.0, horizon_seconds=0.0)
    last = windows.dataset.xs[-1, -1]  # the last frame: samples in (t - 1, t]
    end = windows.end_time[-1]
    inside = values[(times > end - 1.0) & (times <= end)]
    np.testing.assert_allclose(last[:2], [inside.mean(), inside.std()], rtol=1e-9)
    steps = np.sqrt(np.mean(np.diff(inside) ** 2))
    np.testing.assert_allclose(last[2], steps, rtol=1e-9)


def test_windows_end_within_the_stream():
    """A stream of 0.1 s steps whose windows' count rounds up: none ends after
    the failure, so none reads past it."""
    times = 0.1 + np.arange(51) / 100.0  # to 0.6 s
    streams = _single_sensor(times, np.sin(times), "pressure", 100.0, failure=0.6)
    windows = stream_windows(
        streams, 0.2, clock_hz=10.0, stride_seconds=0.1, horizon_seconds=0.15
    )
    assert np.all(windows.end_time <= 0.6) and np.all(windows.time_to_failure >= 0)


def test_censored_machines_keep_only_windows_with_a_known_label(plant):
    censored = dataclasses.replace(plant, failure_time=np.array([np.nan, 1e9]))
    windows = stream_windows(censored, 60.0, horizon_seconds=300.0)
    _, last = plant.observed_range(0)
    ends = windows.end_time[windows.machine == 0]
    assert ends.size and np.all(ends + 300.0 <= last)
    assert np.all(np.isnan(windows.time_to_failure[windows.machine == 0]))
    assert np.all(windows.dataset.labels == 0)


def _log(sensors, start, rate_hz, seconds, machines=("pump-1", "pump-2")):
    """A long-format log: continuous sensors on their own phases, one alarm."""
    rows = []
    for m, machine in enumerate(machines):
        for s in range(sensors):
            ticks = np.arange(int(seconds * rate_hz))
            times = start + 0.001 * (s + 1) + ticks / rate_hz
            values = np.cos(times - start + m + s)
            rows += [
                (t, f"tag{s}", v, machine) for t, v in zip(times, values, strict=True)
            ]
        rows.append((start + seconds / 2 + 0.0005, "alarm", 2.0, machine))
    frame = pd.DataFrame(rows, columns=["time", "tag", "value", "machine"])
    return frame.sample(frac=1.0, random_state=0).sort_values("time", kind="stable")


def test_unix_epoch_times_at_100_hz_stay_distinct_and_in_order(tmp_path):
    start = 1.7e9
    _log(2, start, 100.0, 20.0).to_csv(tmp_path / "log.csv", index=False)
    streams = read_sensor_log(tmp_path / "log.csv", event_tags=["alarm"])
    np.testing.assert_allclose(streams.sensor_rate_hz[1:], 100.0, rtol=1e-6)
    for m in range(2):
        for s in (1, 2):
            times, values = streams.samples(m, s)
            assert times.size == 2000 and np.all(np.diff(times) > 0.0099)
            np.testing.assert_allclose(values, np.cos(times - start + m + s - 1))
    # At a 100 Hz clock each frame holds exactly one sample of each tag.
    windows = stream_windows(streams, 5.0, clock_hz=100.0, horizon_seconds=0.0)
    new = [windows.channel_names.index(f"tag{s}:new") for s in range(2)]
    assert np.all(windows.dataset.xs[..., new] == 1.0)


def test_csv_and_parquet_give_the_same_windows(tmp_path):
    frame = _log(3, 0.0, 10.0, 120.0)
    frame["time"] = pd.Timestamp("2026-03-01T06:00:00Z") + pd.to_timedelta(
        frame["time"], unit="s"
    )
    failures = pd.DataFrame({"machine": ["pump-2"], "time": ["2026-03-01T06:01:50Z"]})
    frame.assign(time=frame["time"].map(pd.Timestamp.isoformat)).to_csv(
        tmp_path / "log.csv", index=False
    )
    frame.to_parquet(tmp_path / "log.parquet")
    failures.to_csv(tmp_path / "failures.csv", index=False)
    read = {
        suffix: read_sensor_log(
            tmp_path / f"log.{suffix}",
            failures=tmp_path / "failures.csv",
            event_tags=["alarm"],
        )
        for suffix in ("csv", "parquet")
    }
    csv, parquet = read["csv"], read["parquet"]
    assert csv.time_origin == parquet.time_origin == "2026-03-01T06:00:00.001000+00:00"
    assert csv.machine_names == ("pump-1", "pump-2")
    np.testing.assert_allclose(csv.failure_time, [np.nan, 109.999])
    a, b = (stream_windows(s, 10.0, horizon_seconds=30.0) for s in (csv, parquet))
    np.testing.assert_array_equal(a.dataset.xs, b.dataset.xs)
    np.testing.assert_array_equal(a.dataset.labels, b.dataset.labels)
    # Times exact to the microsecond: tag0's samples 0.1 s apart from 0.
    times, _ = csv.samples(0, 1)
    np.testing.assert_allclose(times, np.arange(1200) / 10.0, atol=1e-9)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda f: f.drop(columns="value"),
            "log.csv: no column 'value' (value_column= names another)",
        ),
        (
            lambda f: f.assign(value=f["value"].where(f.index != 7, "n/a")),
            "log.csv: row 8, column 'value': 'n/a' of tag 'temp' is not a finite "
            "number",
        ),
        (
            lambda f: f.assign(time=f["time"].where(f.index != 4, "soon")),
            "log.csv: row 5, column 'time': 'soon' is not a date-time.",
        ),
        (
            lambda f: f.assign(time=f["time"].where(f.index != 2, f["time"] + "Z")),
            "log.csv: row 3, column 'time': '2026-01-01T00:00:00.2Z' has a time "
            "zone, unlike row 1: a date-time without a zone is read as UTC",
        ),
        (
            lambda f: f.iloc[[0, 1, 3, 2, *range(4, len(f))]],
            "log.csv: row 4, column 'time': '2026-01-01T00:00:00.2' is not after "
            "the previous sample of tag 'temp' on machine 'm': sort the rows by "
            "time within each tag",
        ),
    ],
)
def test_malformed_logs_name_the_file_row_and_column(tmp_path, change, message):
    frame = pd.DataFrame(
        {
            "time": [f"2026-01-01T00:00:00.{k}" for k in range(8)],
            "tag": "temp",
            "value": [str(v) for v in range(8)],
            "machine": "m",
        }
    )
    change(frame).to_csv(tmp_path / "log.csv", index=False)
    with pytest.raises(ValueError) as error:
        read_sensor_log(tmp_path / "log.csv")
    assert str(error.value).replace(str(tmp_path) + "/", "").startswith(message)
    assert "\n" not in str(error.value)


def test_a_failure_table_gives_a_time_zone_where_the_log_does(tmp_path):
    """A log at +02:00 fails at 08:20:30 local time, 50 s after its start at
    06:19:40 UTC (08:19:40 local): the failure written with its offset is read
    at 50 s; written without one it would be read as UTC, two hours late, and
    is refused; so is a zone in a table beside a log without one."""
    start = pd.Timestamp("2024-05-01T08:19:40+02:00")
    times = [(start + pd.Timedelta(seconds=k)).isoformat() for k in range(120)]
    frame = pd.DataFrame({"time": times, "tag": "temp", "value": 1.0, "machine": "m"})
    frame.to_csv(tmp_path / "log.csv", index=False)
    frame.assign(time=[t[:-6] for t in times]).to_csv(
        tmp_path / "naive.csv", index=False
    )
    for failed, log, expected in [
        ("2024-05-01T08:20:30+02:00", "log.csv", 50.0),
        ("2024-05-01T06:20:30Z", "log.csv", 50.0),
        ("2024-05-01T08:20:30", "naive.csv", 50.0),
        ("2024-05-01T08:20:30", "log.csv", "has no time zone, unlike the log's"),
        ("2024-05-01T08:20:30Z", "naive.csv", "has a time zone, unlike the log's"),
        ("20240501T082030+0200", "log.csv", 50.0),  # ISO 8601's basic format
        ("20240501T062030Z", "naive.csv", "has a time zone, unlike the log's"),
    ]:
        pd.DataFrame({"machine": ["m"], "time": [failed]}).to_csv(
            tmp_path / "failures.csv", index=False
        )
        if isinstance(expected, float):
            streams = read_sensor_log(
                tmp_path / log, failures=tmp_path / "failures.csv"
            )
            np.testing.assert_allclose(streams.failure_time, [expected])
            continue
        with pytest.raises(ValueError, match=f"row 1, column 'time': .* {expected}"):
            read_sensor_log(tmp_path / log, failures=tmp_path / "failures.csv")


def test_jittery_rates_give_a_whole_number_of_frames_and_failures_match_the_log(
    tmp_path,
):
    """A tag at 0.1 Hz whose times jitter reads as a rate a little off 0.1 Hz;
    the default clock still cuts whole frames. Failures given as numbers next to
    a log of date-times are refused, not read as years."""
    jitter = np.random.default_rng(0).uniform(-0.05, 0.05, 200)
    times = pd.Timestamp("2026-01-01T00:00:00Z") + pd.to_timedelta(
        np.arange(200) * 10.0 + jitter, unit="s"
    )
    frame = pd.DataFrame(
        {"time": times, "tag": "temp", "value": np.arange(200.0), "machine": "m1"}
    )
    frame.to_parquet(tmp_path / "log.parquet")
    streams = read_sensor_log(tmp_path / "log.parquet")
    assert streams.sensor_rate_hz[0] != 0.1
    assert abs(streams.sensor_rate_hz[0] - 0.1) < 1e-3
    windows = stream_windows(streams, 120.0, horizon_seconds=0.0, machines=["m1"])
    assert windows.clock_hz == 0.1 and windows.dataset.xs.shape[1] == 12
    with pytest.raises(ValueError, match="Unknown machine 'm2'"):
        stream_windows(streams, 120.0, machines=["m2"])
    pd.DataFrame({"machine": ["m1"], "time": ["1800"]}).to_csv(
        tmp_path / "failures.csv", index=False
    )
    with pytest.raises(ValueError, match="holds numbers, but the log's times are"):
        read_sensor_log(tmp_path / "log.parquet", failures=tmp_path / "failures.csv")


def test_a_failure_for_a_machine_the_log_lacks_is_named(tmp_path):
    """A failure table's machine the log does not have, or one failing twice,
    is refused naming the row; a machine numbered as a float in the log
    (a Parquet file's 1.0) and as an integer in the table gets the hint."""
    frame = pd.DataFrame(
        {
            "time": [0.0, 1.0, 0.0, 1.0],
            "tag": "t",
            "value": 1.0,
            "machine": [1.0] * 2 + [2.0] * 2,
        }
    )
    frame.to_parquet(tmp_path / "log.parquet")
    for machines, message in (
        ([3], "row 1, column 'machine': machine '3' is not in the log."),
        (
            ["2", "1"],
            "row 1, column 'machine': machine '2' is not in the log, "
            "which names it '2.0': write the machines alike",
        ),
        ([2.0, 2.0], "row 2, column 'machine': machine '2.0' fails twice."),
    ):
        table = pd.DataFrame({"machine": machines, "time": 0.5})
        table.to_csv(tmp_path / "failures.csv", index=False)
        with pytest.raises(ValueError) as error:
            read_sensor_log(
                tmp_path / "log.parquet", failures=tmp_path / "failures.csv"
            )
        assert str(error.value).startswith(f"{tmp_path / 'failures.csv'}: {message}")
    table.iloc[:1].to_csv(tmp_path / "failures.csv", index=False)
    streams = read_sensor_log(
        tmp_path / "log.parquet", failures=tmp_path / "failures.csv"
    )
    np.testing.assert_array_equal(streams.failure_time, [np.nan, 0.5])
    # A failure before the machine's first sample names both files.
    pd.DataFrame({"machine": [1.0], "time": -2.0}).to_csv(
        tmp_path / "failures.csv", index=False
    )
    with pytest.raises(ValueError) as error:
        read_sensor_log(tmp_path / "log.parquet", failures=tmp_path / "failures.csv")
    files = f"{tmp_path / 'log.parquet'} with {tmp_path / 'failures.csv'}"
    assert str(error.value).startswith(
        f"{files}: Machine '1.0' fails at -2.0 s, before its first sample at 0.0 s"
    )


def test_a_bad_time_among_numbers_is_named_by_its_row(tmp_path):
    frame = pd.DataFrame(
        {"time": ["0.0", "0.5", "1.0", "", "2.0"], "tag": "t", "value": "1"}
    )
    frame.to_csv(tmp_path / "log.csv", index=False)
    with pytest.raises(ValueError, match="row 4, column 'time': '' is not a finite"):
        read_sensor_log(tmp_path / "log.csv", machine_column=None)
    frame.assign(time=["0.0", "0.5", "1.0", "1.5", "2.0"], tag=["t"] * 4 + [""]).to_csv(
        tmp_path / "log.csv", index=False
    )
    with pytest.raises(ValueError, match="row 5, column 'tag': '' is not a name"):
        read_sensor_log(tmp_path / "log.csv", machine_column=None)


def test_unknown_sensors_and_silent_windows_are_refused(plant):
    with pytest.raises(ValueError, match="Unknown sensors \\['valve_9'\\]"):
        stream_windows(plant, 60.0, sensors=["valve_9"])
    # A pressure (fast) and a temperature (slow) that stop reporting.
    times, _ = plant.samples(0, 8)
    stop = times[300]
    quiet = ~(
        (plant.machine == 0) & np.isin(plant.sensor, [1, 8]) & (plant.time > stop)
    )
    silent = SensorStreams(
        **{
            f.name: getattr(plant, f.name)
            for f in dataclasses.fields(SensorStreams)
            if f.name not in ("machine", "sensor", "time", "value")
        },
        **{k: getattr(plant, k)[quiet] for k in ("machine", "sensor", "time", "value")},
    )
    with pytest.raises(
        ValueError,
        match="'pressure_1' of machine '0' has no sample in .* ending at "
        r"\d+\.?\d{0,3} s; give fill= .* read it as an event sensor \(event_tags=\)",
    ):
        stream_windows(silent, 60.0, horizon_seconds=300.0)
    filled = stream_windows(silent, 60.0, horizon_seconds=300.0, fill=-1.0)
    late = (filled.machine == 0) & (filled.end_time > stop + 60.0)
    assert late.any()
    mean = filled.channel_names.index("pressure_1:mean")
    assert np.all(filled.dataset.xs[late, :, mean : mean + 3] == [-1.0, 0.0, 0.0])
    # The temperature holds its last value: known, so neither refused nor filled.
    last = filled.channel_names.index("temperature_8:last")
    held = plant.samples(0, 8)[1][300]
    assert np.all(filled.dataset.xs[late, :, last] == held)
    assert np.all(filled.dataset.xs[late, :, last + 1] == 0.0)


@pytest.mark.parametrize("mode", ["checkpoint", "direct", "backsolve", "windowed"])
def test_every_gradient_mode_trains_an_encoder_on_stream_windows(mode):
    """The LTC on the slow clock with a learned frame encoder: each mode's gradient
    against `full`'s, which is checked against central finite differences. (Time
    constants of 2 to 20 frames over 10-frame windows: plain `backsolve`'s
    reverse reconstruction is stable there, as it is not over many time
    constants; the docs' gradient-modes page measures that.)"""
    import equinox as eqx
    import jax.numpy as jnp
    import jax.random as jr

    import ltc_jax

    plant = simulate_plant(machines=1, sensors=10, seed=5, simulated_seconds=200.0)
    windows = stream_windows(plant, 10.0, horizon_seconds=100.0).take(np.arange(3))
    (data,) = ltc_jax.datasets.standardize(windows.dataset)
    batch = ltc_jax.make_batch(data, dtype=jnp.float64, interpolation="hold")
    encoder = eqx.nn.MLP(data.num_channels, 5, 8, 1, key=jr.key(1))
    model = ltc_jax.LTC(
        data.num_channels,
        4,
        2,
        encoder=encoder,
        encoded_size=5,
        tau_init=(2.0, 20.0),
        key=jr.key(2),
    )

    def integrator(adjoint):
        return ltc_jax.make_integrator("tsit5", adjoint, rtol=1e-9, atol=1e-9, dt0=0.1)

    full = ltc_jax.measure.loss_gradient(model, batch, integrator("full"))
    weight = full.encoder.layers[0].weight[0, 0]

    def loss(step):
        moved = eqx.tree_at(
            lambda m: m.encoder.layers[0].weight,
            model,
            model.encoder.layers[0].weight.at[0, 0].add(step),
        )
        objective = ltc_jax.training.SupervisedLoss()
        return float(objective(moved, batch, integrator("full"))[0])

    finite = (loss(1e-5) - loss(-1e-5)) / 2e-5
    np.testing.assert_allclose(weight, finite, rtol=1e-5)
    gradient = ltc_jax.measure.loss_gradient(model, batch, integrator(mode))
    assert ltc_jax.measure.gradient_relative_error(gradient, full) < 1e-5


def _one_sensor(**changes):
    """The fields of a valid one-machine, two-sensor `SensorStreams`, changed."""
    fields = dict(
        machine=[0, 0, 0, 0],
        sensor=[0, 0, 1, 1],
        time=[1.0, 2.0, 1.5, 2.5],
        value=[0.1, 0.2, 0.3, 0.4],
        sensor_group=("temperature", "pressure"),
        sensor_rate_hz=[1.0, 1.0],
        failure_time=[np.nan],
    )
    return {**fields, **changes}


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(machine=[0, 0, 0.7, 0]), "machine must hold whole indices"),
        (dict(sensor=[False, False, True, True]), "sensor must hold whole indices"),
        (dict(sensor_rate_hz=[1.0, np.nan]), "'pressure_1' needs a positive, finite"),
        (dict(sensor_rate_hz=[0.0, 1.0]), "'temperature_0' needs a positive, finite"),
        (dict(failure_time=[np.inf]), "Machine '0' has an infinite failure_time"),
        (
            dict(failure_time=[0.5]),
            "Machine '0' fails at 0.5 s, before its first sample at 1.0 s",
        ),
        (dict(sensor_names=("t", "t")), "sensor names must differ; \\['t'\\] repeat"),
        (
            dict(value=[0.1, 0.2, np.nan, 0.4]),
            "Every value must be finite; row index 2 \\(0-based; machine '0', sensor",
        ),
        (
            dict(time=[1.0, 2.0, 1.5, 1.5]),
            "row index 3 \\(0-based; machine '0', sensor 'pressure_1', time 1.5\\)",
        ),
    ],
)
def test_sensor_streams_refuse_bad_fields_by_name(changes, message):
    SensorStreams(**_one_sensor())  # valid as it stands
    with pytest.raises(ValueError, match=message):
        SensorStreams(**_one_sensor(**changes))


def test_a_failure_at_the_first_sample_or_of_a_machine_without_samples_is_kept():
    """Only a failure before a machine's first reading is refused: one at that
    reading, or of a machine that has no samples, is valid."""
    at_first = SensorStreams(**_one_sensor(failure_time=[1.0]))
    assert at_first.failure_time.tolist() == [1.0]
    silent = SensorStreams(**_one_sensor(failure_time=[np.nan, 0.5]))
    assert silent.machines == 2 and silent.failure_time[1] == 0.5


def test_stream_windows_refuse_bad_arguments_by_name(plant):
    for arguments, message in [
        (dict(window_seconds=np.inf), "window_seconds must be positive and finite"),
        (dict(horizon_seconds=np.inf), "horizon_seconds finite and at least 0"),
        (dict(clock_hz=np.inf), "clock_hz and stride_seconds must be positive and"),
        (dict(stride_seconds=np.inf), "clock_hz and stride_seconds must be positive"),
        (dict(sensors=[]), "sensors names no sensor"),
        (dict(sensors=["vibration_0"] * 2), "sensors names \\['vibration_0'\\] more"),
        (dict(machines=[True]), "Unknown machine True"),
    ]:
        with pytest.raises(ValueError, match=message):
            stream_windows(plant, **{"window_seconds": 60.0, **arguments})
    windows = stream_windows(plant, 60.0, horizon_seconds=300.0)
    with pytest.raises(ValueError, match="None of the machines \\[7\\] has a window"):
        windows.of_machines([7])
    assert len(windows.of_machines([1, 7])) == np.sum(windows.machine == 1)
    # Names, floats and a mask are not indices: True was machine 1, 7.5 was
    # skipped, a name matched nothing.
    for machines in (["1"], [1.0, 7.5], np.ones(3, dtype=bool)):
        with pytest.raises(TypeError, match="of_machines takes machine indices"):
            windows.of_machines(machines)


def test_the_default_clock_never_outpaces_the_slowest_sensor():
    """Whole frames per window from the slowest rate times the window, rounded
    down, or up to the next whole frame where that is within 0.1%: 3.5 s of a
    1 Hz sensor gives 3 frames (rounding to even gave 4, at 1.14 Hz); 600 s
    at 0.9995 Hz (599.7) gives 600, 3600 s at 0.9995 Hz (3598.2) 3599, and at
    1.0005 Hz (3601.8) 3602. The clock is never more than 0.1% faster than
    the sensor, and where it is not faster every frame has a new sample. A
    default clock of one frame per window is refused, naming the sensor."""
    cases = [
        (1.0, 3.5, 3),
        (1.0, 2.5, 2),
        (0.9995, 600.0, 600),
        (0.9995, 3600.0, 3599),
        (1.0005, 3600.0, 3602),
    ]
    for rate, window, frames in cases:
        times = np.arange(1, int(2.2 * window * rate) + 1) / rate
        streams = _single_sensor(times, np.cos(times), "temperature", rate)
        windows = stream_windows(streams, window, horizon_seconds=0.0)
        assert windows.dataset.xs.shape[1] == frames
        assert windows.clock_hz == frames / window <= rate * 1.001
        if frames <= window * rate:
            new = windows.channel_names.index("temperature_0:new")
            assert np.all(windows.dataset.xs[..., new] == 1.0)
    # 1.5 samples of a 0.1 Hz sensor per 15 s window: one frame, no time scale.
    times = np.arange(1, 40) * 10.0
    streams = _single_sensor(times, np.cos(times), "temperature", 0.1)
    with pytest.raises(ValueError, match="'temperature_0' at 0.1 Hz, samples 1.5 "):
        stream_windows(streams, 15.0, horizon_seconds=0.0)
    with pytest.raises(ValueError, match="a tag of events .* event_tags= names it"):
        stream_windows(streams, 15.0, horizon_seconds=0.0)
    assert stream_windows(streams, 15.0, clock_hz=0.2, horizon_seconds=0.0).clock_hz


def test_whole_numbers_of_any_type_index_machines_and_sensors(plant):
    """Whole floats and object arrays index as integers did; indices beyond
    int32 are out of range, not wrapped; padded names given by the user match
    the log's stripped tags."""
    fields = _one_sensor()
    for machine in ([0.0, 0.0, 0.0, 0.0], np.array([0, 0, 0, 0], dtype=object)):
        streams = SensorStreams(**{**fields, "machine": machine})
        assert streams.machine.dtype == np.int32 and np.all(streams.machine == 0)
    with pytest.raises(ValueError, match="Machine indices must be in \\[0, 1\\)"):
        SensorStreams(**{**fields, "machine": [2**32] * 4})
    both = stream_windows(plant, 60.0, horizon_seconds=300.0)
    floats = stream_windows(plant, 60.0, horizon_seconds=300.0, machines=[0.0, 1.0])
    np.testing.assert_array_equal(floats.dataset.xs, both.dataset.xs)
    with pytest.raises(ValueError, match="Unknown machine 0.5"):
        stream_windows(plant, 60.0, machines=[0.5])


def test_a_silent_sensor_at_unix_times_is_named_with_its_window_end():
    start = 1.7e9
    times = start + np.r_[np.arange(0, 100), np.arange(130, 200)] / 10.0
    streams = _single_sensor(times, np.sin(times - start), "vibration", 10.0)
    # The 1 s windows end a second apart from 1.7e9 + 1 s; (10, 11] s is silent.
    with pytest.raises(ValueError, match="window ending at 1700000011.0 s"):
        stream_windows(streams, 1.0, clock_hz=1.0, horizon_seconds=0.0)


def test_logs_of_durations_empty_tables_and_one_machine_failures(tmp_path):
    """Parquet durations are read in seconds; a header-only failure table means
    no failure, beside date-times too; a log without rows, or with a ragged
    CSV row, is refused naming the file; a one-machine log takes a failure
    table of its time alone."""
    seconds = np.arange(0, 20, 0.5)
    frame = pd.DataFrame(
        {"time": pd.to_timedelta(seconds, unit="s"), "tag": "x", "value": seconds}
    )
    frame.to_parquet(tmp_path / "durations.parquet")
    pd.DataFrame({"time": pd.to_timedelta([12.5], unit="s")}).to_parquet(
        tmp_path / "fails.parquet"
    )
    streams = read_sensor_log(
        tmp_path / "durations.parquet",
        machine_column=None,
        failures=tmp_path / "fails.parquet",
    )
    np.testing.assert_array_equal(streams.time, seconds)
    assert streams.time_origin == "" and streams.sensor_rate_hz[0] == 2.0
    np.testing.assert_array_equal(streams.failure_time, [12.5])

    dated = frame.assign(time=pd.Timestamp("2026-01-01", tz="UTC") + frame["time"])
    dated.assign(machine="m").to_parquet(tmp_path / "dated.parquet")
    (tmp_path / "none.csv").write_text("machine,time\n")
    streams = read_sensor_log(
        tmp_path / "dated.parquet", failures=tmp_path / "none.csv"
    )
    assert np.isnan(streams.failure_time).all()

    (tmp_path / "empty.csv").write_text("time,tag,value,machine\n")
    with pytest.raises(ValueError, match="empty.csv: the log has no rows"):
        read_sensor_log(tmp_path / "empty.csv")
    (tmp_path / "ragged.csv").write_text("time,tag,value\n0,x,1\n1,x,2,3\n")
    with pytest.raises(ValueError, match="ragged.csv: Error tokenizing data"):
        read_sensor_log(tmp_path / "ragged.csv", machine_column=None)
    # A file of no bytes at all, and a CSV named as Parquet, name the file.
    (tmp_path / "blank.csv").write_text("")
    with pytest.raises(ValueError, match="blank.csv: No columns to parse"):
        read_sensor_log(tmp_path / "blank.csv")
    (tmp_path / "text.parquet").write_text("time,tag,value,machine\n")
    with pytest.raises(ValueError, match="text.parquet: .*Parquet"):
        read_sensor_log(tmp_path / "text.parquet")


def test_a_failure_far_past_its_log_is_named(tmp_path):
    """A failure table in milliseconds beside a log in seconds: the failure
    lies about 1,500 times the log's length past its last sample, and a
    warning says so; the table in seconds, a failure 30 s after a 60 s log,
    is read without one, as is a failure 1,000 s after it of a machine with
    no samples of the tags read."""
    frame = pd.DataFrame(
        {"time": np.arange(120) * 0.5, "tag": "temp", "value": 1.0, "machine": "m"}
    )
    frame.to_csv(tmp_path / "log.csv", index=False)
    pd.DataFrame({"machine": ["m"], "time": [89.5]}).to_csv(
        tmp_path / "seconds.csv", index=False
    )
    pd.DataFrame({"machine": ["m"], "time": [89500.0]}).to_csv(
        tmp_path / "millis.csv", index=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        streams = read_sensor_log(
            tmp_path / "log.csv", failures=tmp_path / "seconds.csv"
        )
        assert streams.failure_time.tolist() == [89.5]
        other = pd.DataFrame({"time": [0.0, 1.0], "tag": "state", "value": 0.0})
        pd.concat([frame, other.assign(machine="n")]).to_csv(
            tmp_path / "two.csv", index=False
        )
        pd.DataFrame({"machine": ["m", "n"], "time": [89.5, 1001.0]}).to_csv(
            tmp_path / "both.csv", index=False
        )
        read = read_sensor_log(
            tmp_path / "two.csv", failures=tmp_path / "both.csv", tags=["temp"]
        )
        assert read.failure_time.tolist() == [89.5, 1001.0]
    with pytest.warns(UserWarning, match=r"millis.csv: 1 machine\(s\) fail more than"):
        read_sensor_log(tmp_path / "log.csv", failures=tmp_path / "millis.csv")
    # Date-times beside a log in numbers are named as such.
    pd.DataFrame({"machine": ["m"], "time": ["2023-11-14T22:34:20"]}).to_csv(
        tmp_path / "dated.csv", index=False
    )
    with pytest.raises(ValueError, match="dated.csv: column 'time' holds date-times"):
        read_sensor_log(tmp_path / "log.csv", failures=tmp_path / "dated.csv")
    # A blank time is named by its row, as before.
    (tmp_path / "blank.csv").write_text("machine,time\nm,\n")
    with pytest.raises(ValueError, match="blank.csv: row 1, column 'time': '' is not"):
        read_sensor_log(tmp_path / "log.csv", failures=tmp_path / "blank.csv")


def test_an_event_tag_asked_for_and_absent_is_an_alarm_that_never_fired(tmp_path):
    """A new log in which one of the run's alarm tags never fired has no rows
    of it: asked for by tags= as an event tag, it is read with a warning as
    an event sensor without events (its count 0 in every frame, its time
    since the last event the time since the stream began, as for an alarm
    before its first event); a continuous tag or an event tag not asked for
    by tags= that the log lacks is still refused."""
    t = np.arange(0.0, 200.0, 0.5)
    frame = pd.concat(
        [
            pd.DataFrame({"time": t, "tag": "temp", "value": np.sin(t)}),
            pd.DataFrame({"time": [50.0, 120.0], "tag": "alarm", "value": 1.0}),
        ]
    ).assign(machine="m")
    frame.to_csv(tmp_path / "log.csv", index=False)
    events = ["alarm", "siren"]
    with pytest.warns(UserWarning, match=r"event tag\(s\) \['siren'\] have no rows"):
        streams = read_sensor_log(
            tmp_path / "log.csv", tags=["temp", *events], event_tags=events
        )
    assert streams.sensor_names == ("alarm", "siren", "temp")
    assert streams.sensor_group == ("event", "event", "continuous")
    assert streams.samples(0, 1)[0].size == 0
    windows = stream_windows(streams, 20.0, horizon_seconds=0.0)
    names = list(windows.channel_names)
    count, since = names.index("siren:count"), names.index("siren:since")
    assert np.all(windows.dataset.xs[..., count] == 0.0)
    # An alarm before its first event reads the same as one that never fires.
    first = names.index("alarm:since")
    before = windows.end_time < 50.0
    np.testing.assert_array_equal(
        windows.dataset.xs[before][..., since], windows.dataset.xs[before][..., first]
    )
    with pytest.raises(
        ValueError, match=r"lacks 1 of the 2 tags to read, e.g. \['p'\]"
    ):
        read_sensor_log(tmp_path / "log.csv", tags=["temp", "p"])
    with pytest.raises(ValueError, match="event_tags names tags \\['siren'\\]"):
        read_sensor_log(tmp_path / "log.csv", event_tags=events)
    # A tag of the log's in another case is a misspelling, not a quiet alarm.
    with pytest.raises(ValueError, match="lacks the event tag 'Alarm' \\(did you"):
        read_sensor_log(
            tmp_path / "log.csv", tags=["temp", "Alarm"], event_tags=["Alarm"]
        )
    # A near name is suggested in the warning.
    with pytest.warns(UserWarning, match="'alarn': a misspelling of 'alarm'"):
        read_sensor_log(
            tmp_path / "log.csv", tags=["temp", "alarn"], event_tags=["alarn"]
        )


def test_a_tag_of_text_values_is_read_around_when_left_out(tmp_path):
    """A historian's digital tag ('ON', 'OFF') beside numeric ones: reading
    every tag names its first text value and tag; reading the others skips
    it, and their values are the file's."""
    frame = pd.DataFrame(
        {
            "time": [0.0, 0.0, 0.5, 1.0, 1.0, 1.5],
            "tag": ["temp", "state", "temp", "temp", "state", "temp"],
            "value": ["20.5", "ON", "20.75", "21.0", "OFF", "21.25"],
        }
    )
    frame.to_csv(tmp_path / "log.csv", index=False)
    with pytest.raises(
        ValueError, match="row 2, column 'value': 'ON' of tag 'state' is not a"
    ):
        read_sensor_log(tmp_path / "log.csv", machine_column=None)
    streams = read_sensor_log(tmp_path / "log.csv", machine_column=None, tags=["temp"])
    assert streams.sensor_names == ("temp",)
    times, values = streams.samples(0, 0)
    np.testing.assert_array_equal(times, [0.0, 0.5, 1.0, 1.5])
    np.testing.assert_array_equal(values, [20.5, 20.75, 21.0, 21.25])


def test_padded_names_are_read_without_their_spaces(tmp_path):
    """A historian's padded tags and machines (' temp ', 'm1 ') match the
    names given elsewhere, padded or not (' alarm' in event_tags, 'temp ' in
    rates_hz, '  m1' in the failure table)."""
    frame = pd.DataFrame(
        {
            "time": ["0", "1", "2", "1.5"],
            "tag": [" temp ", " temp ", " temp ", "alarm  "],
            "value": ["1", "2", "3", "1"],
            "machine": ["m1 "] * 4,
        }
    )
    frame.to_csv(tmp_path / "log.csv", index=False)
    pd.DataFrame({"machine": ["  m1"], "time": ["2.5"]}).to_csv(
        tmp_path / "failures.csv", index=False
    )
    streams = read_sensor_log(
        tmp_path / "log.csv",
        failures=tmp_path / "failures.csv",
        event_tags=[" alarm"],
        rates_hz={"temp ": 2.0},
    )
    assert streams.sensor_names == ("alarm", "temp")
    assert streams.sensor_rate_hz[1] == 2.0
    assert streams.machine_names == ("m1",)
    assert streams.sensor_group == ("event", "continuous")
    np.testing.assert_array_equal(streams.failure_time, [2.5])


def test_the_stream_jobs_validation_machines_and_their_reason_agree():
    """Five machines: a quarter tested (one), and of the four left a sixth,
    rounded up to at least one, validates: the record's value is the share of
    whole machines held out (1 of 4), and its reason says how that came from a
    sixth."""
    from ltc_jax.app import StreamConfig
    from ltc_jax.app.streams import split_machines

    plant = simulate_plant(machines=5, sensors=4, seed=0, simulated_seconds=300.0)
    windows = stream_windows(plant, 60.0, horizon_seconds=0.0)
    train, validation, test, record = split_machines(StreamConfig(), windows)
    assert (len(train), len(validation), len(test)) == (3, 1, 1)
    assert sorted(train + validation + test) == [0, 1, 2, 3, 4]
    assert record["value"] == 0.25
    assert record["reason"].startswith("0.167 of the training machines, rounded")
    assert record["reason"].endswith("; 1 of 4")


@pytest.mark.parametrize("sensors", [12, 20])
def test_the_stream_job_pools_a_simulated_plant_where_that_gives_fewer_channels(
    sensors,
):
    """The stream job's default pooling on the simulated plant: 11 features of
    its 4 kinds, 4 statistics each, against the sensors' own channels, counted
    from the plant's groups (3 per vibration, pressure or alarm sensor, 2 per
    temperature sensor: 30 at 12 sensors, 50 at 20). A log is pooled where
    --sensor-groups names its kinds, and not otherwise; --sensor-pooling
    decides wherever it is given."""
    from ltc_jax.app import StreamConfig
    from ltc_jax.app.streams import sensor_pooling

    plant = simulate_plant(machines=2, sensors=sensors, seed=0, simulated_seconds=200.0)
    windows = stream_windows(plant, 60.0, horizon_seconds=0.0)
    per_channel = {"vibration": 3, "pressure": 3, "temperature": 2, "alarm": 3}
    own = sum(per_channel[group] for group in plant.sensor_group)
    assert own == {12: 30, 20: 50}[sensors]
    chosen = sensor_pooling(StreamConfig(sensors=sensors), windows)
    assert chosen == dict(
        value="groups" if 44 < own else "none",
        reason=f"the simulated plant's sensors give 44 channels pooled by kind, "
        f"{own} each on its own",
    )
    log = dict(log="log.csv", failures="failures.csv")
    assert sensor_pooling(StreamConfig(**log), windows)["value"] == "none"
    named = StreamConfig(**log, sensor_groups={"a": "pressure"})
    assert sensor_pooling(named, windows)["value"] == "groups"
    for given in ("groups", "none"):
        config = StreamConfig(sensors=sensors, sensor_pooling=given)
        assert sensor_pooling(config, windows) == dict(
            value=given, reason="--sensor-pooling"
        )


@pytest.mark.parametrize(
    "options, skipped",
    [
        (dict(machines=8, sensors=5, simulated_seconds=400.0), []),
        # The seventh machine, alone in its chunk, fails 4.2 hours in: too
        # soon for a window, which the whole plant passes over.
        (
            dict(machines=7, sensors=4, seed=37, simulated_seconds=46800.0),
            [6],
        ),
    ],
)
def test_the_stream_job_simulates_the_plant_a_few_machines_at_a_time(options, skipped):
    """Simulated six machines at a time, the stream job's windows, machines
    and names are those of the plant simulated whole, a chunk whose machines
    have no window included."""
    from ltc_jax.app import StreamConfig
    from ltc_jax.app.streams import SIMULATED_AT_ONCE, read_windows, simulated_chunks

    long = options["simulated_seconds"] > 3600.0
    window = dict(
        window_seconds=15300.0 if long else 60.0,
        horizon_seconds=600.0 if long else 120.0,
        clock_hz=1 / 900 if long else None,
        fill=0.0 if long else None,
    )
    config = StreamConfig(**options, **window)
    assert SIMULATED_AT_ONCE < config.machines
    streams, windows = read_windows(config)
    plant = simulate_plant(
        config.machines,
        config.sensors,
        seed=config.seed,
        simulated_seconds=config.simulated_seconds,
    )
    whole = stream_windows(
        plant,
        config.window_seconds,
        horizon_seconds=config.horizon_seconds,
        stride_seconds=config.window_seconds / 5,
        clock_hz=config.clock_hz,
        fill=config.fill,
    )
    assert sorted(set(range(config.machines)) - set(whole.machine)) == skipped
    assert streams.machine_names == plant.machine_names
    assert streams.sensor_names == plant.sensor_names and streams.time.size == 0
    np.testing.assert_array_equal(streams.failure_time, plant.failure_time)
    for name in ("machine", "end_time", "time_to_failure"):
        np.testing.assert_array_equal(getattr(windows, name), getattr(whole, name))
    for name in ("ts", "xs", "lengths", "labels"):
        got, want = getattr(windows.dataset, name), getattr(whole.dataset, name)
        np.testing.assert_array_equal(got, want)
    assert windows.channel_names == whole.channel_names
    # Where no machine lives a window long, the job says so and what to give.
    short = dataclasses.replace(config, window_seconds=9e5)  # 1000 frames
    with pytest.raises(ValueError, match="any of the .* simulated machines"):
        read_windows(short)
    with pytest.raises(ValueError, match="at_once must be at least 1; got 0"):
        next(simulated_chunks(range(2), 4, seed=0, simulated_seconds=9.0, at_once=0))


@pytest.mark.parametrize("sensors", [17, 18])
def test_the_stream_jobs_data_follow_its_pooling_choice(sensors):
    """At 17 sensors the plant's own 43 channels are fewer than the 44 pooled,
    at 18 its 45 are more: the stream job's windows have the fewer channels,
    pooled (with the groups recorded for reading a new log) only at 18, and
    each sensor's own wherever `sensor_pooling="none"` asks."""
    from ltc_jax.app import StreamConfig
    from ltc_jax.app.streams import load_stream_data

    options = dict(machines=4, sensors=sensors, simulated_seconds=300.0)
    options |= dict(window_seconds=60.0, horizon_seconds=120.0)
    plant = simulate_plant(4, sensors, seed=0, simulated_seconds=300.0)
    per_channel = {"vibration": 3, "pressure": 3, "temperature": 2, "alarm": 3}
    own = sum(per_channel[group] for group in plant.sensor_group)
    assert own == {17: 43, 18: 45}[sensors]
    data = load_stream_data(StreamConfig(**options))
    assert data["train"].num_channels == min(own, 44)
    assert ("channel_groups" in data["stream"]) == (sensors == 18)
    assert data["sensor_pooling"]["value"] == ("groups" if sensors == 18 else "none")
    plain = load_stream_data(StreamConfig(**options, sensor_pooling="none"))
    assert plain["train"].num_channels == own
    assert "channel_groups" not in plain["stream"]


def test_tags_to_read_skip_the_others_rows_and_keep_every_machine(tmp_path):
    """`tags=` reads those tags alone: the samples, rates and windows are those
    of the log without the other tags' rows, though one of them (a lone
    'alarm' per machine, read as continuous) has no rate; a machine with
    only skipped rows is still the log's, with no samples; a tag the log
    lacks, and times out of order in a tag read, are named (by the row in
    the file)."""
    frame = _log(2, 0.0, 10.0, 60.0)
    extra = pd.DataFrame([(5.0, "alarm", 1.0, "pump-3")], columns=frame.columns)
    pd.concat([frame, extra]).to_csv(tmp_path / "log.csv", index=False)
    with pytest.raises(ValueError, match="'alarm' has fewer than two samples"):
        read_sensor_log(tmp_path / "log.csv")
    read = read_sensor_log(tmp_path / "log.csv", tags=["tag1", "tag0"])
    frame[frame["tag"] != "alarm"].to_csv(tmp_path / "without.csv", index=False)
    alone = read_sensor_log(tmp_path / "without.csv")
    assert read.sensor_names == alone.sensor_names == ("tag0", "tag1")
    assert read.machine_names == ("pump-1", "pump-2", "pump-3")
    np.testing.assert_array_equal(read.sensor_rate_hz, alone.sensor_rate_hz)
    for m in range(2):
        for s in range(2):
            for got, want in zip(read.samples(m, s), alone.samples(m, s), strict=True):
                np.testing.assert_array_equal(got, want)
    assert read.samples(2, 0)[0].size == 0
    with pytest.raises(ValueError, match=r"lacks 1 of the 2 tags to read, e.g. \['x'"):
        read_sensor_log(tmp_path / "log.csv", tags=["tag0", "x"])
    with pytest.raises(
        ValueError,
        match=r"\['aaa', 'tag_1'\] \('tag_1': did you mean 'tag1'\?\); its 3 tags "
        r"include \['alarm', 'tag0', 'tag1'\]",
    ):
        read_sensor_log(tmp_path / "log.csv", tags=["aaa", "tag_1"])
    # A tag in another case than the log's is pointed to it.
    with pytest.raises(ValueError, match=r"\('TAG0': did you mean 'tag0'\?\)"):
        read_sensor_log(tmp_path / "log.csv", tags=["TAG0"])
    with pytest.raises(ValueError, match="tags is empty"):
        read_sensor_log(tmp_path / "log.csv", tags=[])
    with pytest.raises(ValueError, match="'pump-3' has no samples \\(of the tags read"):
        stream_windows(read, 10.0, horizon_seconds=0.0)
    rows = pd.concat([frame, extra]).reset_index(drop=True)
    mine = (rows["tag"] == "tag1") & (rows["machine"] == "pump-1")
    second = int(np.flatnonzero(mine)[1])
    rows.loc[second, "time"] = 0.0  # before the tag's first sample
    rows.to_csv(tmp_path / "unsorted.csv", index=False)
    with pytest.raises(ValueError, match=rf"row {second + 1}, column 'time'"):
        read_sensor_log(tmp_path / "unsorted.csv", tags=["tag1"])


def test_a_clock_too_slow_for_unix_milliseconds_says_so():
    """Milliseconds since the epoch read as seconds make a 1 Hz sensor a
    0.001 Hz one, too slow for a minute's window: the error says the times
    may be milliseconds; at seconds-sized times it does not."""
    for start, hinted in [(1.7e12, True), (1.7e9, False)]:
        times = start + 1000.0 * np.arange(600.0)  # 1 Hz, in milliseconds
        streams = _single_sensor(times, np.sin(np.arange(600.0)), "continuous", 1e-3)
        with pytest.raises(ValueError, match="samples 0.06 times") as error:
            stream_windows(streams, 60.0, horizon_seconds=0.0)
        assert ("milliseconds since the epoch" in str(error.value)) == hinted


def test_pooled_channels_match_a_direct_transcription():
    """Each group's statistics over its observed channels, at each observation,
    against a loop over groups written from the definition; padding stays 0."""
    from ltc_jax.datasets import SequenceDataset, pool_channels

    rng = np.random.default_rng(0)
    xs = rng.normal(size=(3, 6, 5))
    xs[0, 1, [0, 2]] = np.nan  # group "a" half observed
    xs[1, 2, [0, 2, 4]] = np.nan  # group "a" unobserved
    lengths = np.array([6, 4, 5])
    ts = np.broadcast_to(np.arange(6.0), (3, 6))
    data = SequenceDataset(ts, xs, lengths, np.zeros(3, np.int32))
    groups = ["a", "b", "a", "b", "a"]  # interleaved: "a" first
    pooled = pool_channels(data, groups, ("max", "mean", "std", "min"))
    assert pooled.xs.shape == (3, 6, 8)
    for i in range(3):
        for k in range(6):
            got = pooled.xs[i, k]
            if k >= lengths[i]:
                np.testing.assert_array_equal(got, 0.0)
                continue
            for g, channels in enumerate(([0, 2, 4], [1, 3])):
                seen = [xs[i, k, c] for c in channels if not np.isnan(xs[i, k, c])]
                if not seen:
                    assert np.all(np.isnan(got[4 * g : 4 * g + 4]))
                    continue
                mean = sum(seen) / len(seen)
                std = (sum((v - mean) ** 2 for v in seen) / len(seen)) ** 0.5
                expected = [max(seen), mean, std, min(seen)]
                np.testing.assert_allclose(got[4 * g : 4 * g + 4], expected)
    np.testing.assert_array_equal(pooled.ts, data.ts)
    np.testing.assert_array_equal(pooled.lengths, lengths)


def test_pooling_equals_pooling_the_hold_path_where_nothing_is_missing():
    """Without missing values, the hold path of the pooled windows is, at any
    time, the statistics of the per-channel hold path there."""
    import jax.numpy as jnp

    import ltc_jax
    from ltc_jax.datasets import pool_channels

    rng = np.random.default_rng(1)
    ts = np.sort(rng.uniform(0, 10, size=(2, 7)), axis=1)
    data = ltc_jax.datasets.SequenceDataset(
        ts, rng.normal(size=(2, 7, 4)), np.array([7, 7]), np.zeros(2, np.int32)
    )
    groups = ["x", "y", "x", "x"]
    pooled = pool_channels(data, groups, ("mean", "max"))
    options = dict(dtype=jnp.float64, interpolation="hold")
    path = ltc_jax.make_input_path(data, **options)
    pooled_path = ltc_jax.make_input_path(pooled, **options)
    for t in rng.uniform(ts[:, 0].max(), ts[:, -1].min(), size=5):
        x = np.asarray(path.evaluate(jnp.asarray(t)))
        members = x[:, [0, 2, 3]]
        expected = np.stack([members.mean(1), members.max(1), x[:, 1], x[:, 1]], axis=1)
        got = np.asarray(pooled_path.evaluate(jnp.asarray(t)))
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_pooled_sensor_groups_keep_the_compiled_step_whatever_the_sensors():
    """Stream windows' channel groups name each channel's sensor group and
    feature; pooled by them, a plant of 10 sensors and one of 40 give the model
    the same channels, so its parameters and the compiled training step's
    temporary memory (XLA's analysis, deterministic) do not change, where the
    per-channel model's grow with the sensors."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import jax.random as jr
    import optax

    import ltc_jax
    from ltc_jax.datasets import pool_channels

    figures = {}
    for sensors in (10, 40):
        plant = simulate_plant(
            machines=1, sensors=sensors, seed=2, simulated_seconds=60.0
        )
        windows = stream_windows(plant, 10.0, horizon_seconds=0.0).take(np.arange(4))
        for name, feature in zip(
            windows.channel_names, windows.channel_groups, strict=True
        ):
            sensor, kind = name.split(":")
            group = plant.sensor_group[plant.sensor_names.index(sensor)]
            assert feature == f"{group}:{kind}"
        (data,) = ltc_jax.datasets.standardize(windows.dataset)
        pooled = pool_channels(data, windows.channel_groups)
        for layout, dataset in (("channels", data), ("pooled", pooled)):
            model = ltc_jax.LTC(dataset.num_channels, 8, 2, key=jr.key(0))
            optimizer = optax.adam(1e-3)
            opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
            step = ltc_jax.training.make_train_step(
                optimizer, ltc_jax.make_integrator("fused", "checkpoint", dt0=1.0)
            )
            batch = ltc_jax.make_batch(
                dataset, dtype=jnp.float64, interpolation="hold", empty_channel_fill=0.0
            )
            memory = ltc_jax.measure.compiled_memory(step, model, opt_state, batch)
            parameters = sum(
                x.size for x in jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
            )
            figures[sensors, layout] = (parameters, memory.temp_bytes)
    # 4 groups: vibration and pressure fast (3 features), temperature slow (2),
    # alarms events (3); 4 statistics each.
    assert pooled.num_channels == (3 + 3 + 2 + 3) * 4
    assert figures[10, "pooled"] == figures[40, "pooled"]
    assert figures[40, "channels"][0] > figures[10, "channels"][0]
    assert figures[40, "channels"][1] > figures[10, "channels"][1]


def test_pooling_groups_of_one_sensor_each_gives_their_values():
    """A plant with one sensor per group (its windows' channel groups all
    differ) pools to each channel's own value, a zero spread, and itself as
    minimum and maximum, where observed."""
    from ltc_jax.datasets import pool_channels, simulate_plant

    plant = simulate_plant(4, 2, seed=0, simulated_seconds=900.0)
    windows = stream_windows(plant, 60.0, horizon_seconds=300.0)
    groups = windows.channel_groups
    assert len(set(groups)) == len(groups)
    data = windows.dataset
    pooled = pool_channels(data, groups)
    xs = np.asarray(data.xs)
    expected = np.stack([xs, np.zeros_like(xs), xs, xs], axis=-1)
    expected = np.where(np.isnan(xs)[..., None], np.nan, expected)
    expected = np.where(data.valid_mask()[..., None, None], expected, 0.0)
    np.testing.assert_array_equal(
        pooled.xs, expected.reshape(*xs.shape[:2], 4 * xs.shape[2])
    )


def test_pooling_refuses_groups_and_statistics_that_do_not_fit():
    from ltc_jax.datasets import SequenceDataset, pool_channels

    data = SequenceDataset(
        np.arange(3.0)[None], np.zeros((1, 3, 2)), [3], np.zeros(1, np.int32)
    )
    with pytest.raises(
        ValueError, match="each of the 2 channels .* its group; got 3 entries"
    ):
        pool_channels(data, ["a", "a", "b"])
    with pytest.raises(
        ValueError, match="distinct ones of .*got \\('mean', 'median'\\)"
    ):
        pool_channels(data, ["a", "b"], ("mean", "median"))
    with pytest.raises(ValueError, match="distinct ones of .*got \\('max', 'max'\\)"):
        pool_channels(data, ["a", "b"], ("max", "max"))
    with pytest.raises(ValueError, match="a list of statistics; got the string"):
        pool_channels(data, ["a", "b"], "mean")


def test_pooling_names_stream_windows_given_for_their_dataset(tmp_path):
    """Stream windows themselves are refused, as users call `pool_channels`
    (the tests' runtime type checker would refuse them first), with the call
    that pools them."""
    from ltc_jax.datasets import pool_channels

    _log(2, 0.0, 10.0, 60.0).to_csv(tmp_path / "log.csv", index=False)
    read = read_sensor_log(tmp_path / "log.csv", event_tags=["alarm"])
    windows = stream_windows(read, 10.0, horizon_seconds=0.0)
    unchecked = inspect.unwrap(pool_channels)
    with pytest.raises(TypeError, match=r"pool_channels\(windows.dataset, windows"):
        unchecked(windows, windows.channel_groups)
    with pytest.raises(TypeError, match="pools a SequenceDataset; got ndarray.$"):
        unchecked(np.zeros((1, 3, 2)), ["a", "a"])
    pooled = unchecked(windows.dataset, windows.channel_groups)
    assert pooled.num_channels == 4 * len(set(windows.channel_groups))


def test_a_logs_groups_name_its_tags_kinds_for_pooling(tmp_path):
    """`sensor_groups=` gives continuous tags their kind, which the windows' channel
    groups carry; other tags stay "continuous", event tags "event"; a group
    for a tag the log lacks, for an event tag, or named as an event group is
    refused."""
    _log(2, 0.0, 10.0, 60.0).to_csv(tmp_path / "log.csv", index=False)
    path, alarm = tmp_path / "log.csv", ["alarm"]
    read = read_sensor_log(path, event_tags=alarm, sensor_groups={" tag1 ": "pressure"})
    assert read.sensor_group == ("event", "continuous", "pressure")
    windows = stream_windows(read, 10.0, horizon_seconds=0.0)
    assert windows.channel_groups == (
        "event:count",
        "event:sum",
        "event:since",
        "continuous:last",
        "continuous:new",
        "pressure:last",
        "pressure:new",
    )
    with pytest.raises(ValueError, match=r"sensor_groups names tags \['x'\] that"):
        read_sensor_log(path, event_tags=alarm, sensor_groups={"x": "pressure"})
    with pytest.raises(ValueError, match="for an event tag, which is in group"):
        read_sensor_log(path, event_tags=alarm, sensor_groups={"alarm": "pressure"})
    with pytest.raises(ValueError, match="not an event group .*got 'alarm'\\.$"):
        read_sensor_log(path, event_tags=alarm, sensor_groups={"tag0": "alarm"})


def test_the_stream_jobs_frame_encoder_is_the_mlp_its_help_describes():
    """`ltc-jax stream --frame-encoder mlp` feeds the ltc cell `W2 tanh(W1 x +
    b1) + b2` of each frame's channels `x` (a NumPy transcription, at the
    sizes the option's help gives), trains at its own learning rate unless
    one is given, and the job's gradient in the encoder's first layer is the
    loss's central finite difference (float64). By default, and in a run
    saved before the option, there is none; the encoder is refused for the
    CfC, the jump model and the biophysical cell."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from ltc_jax.app import StreamConfig, prepare
    from ltc_jax.app.runs import config_from_json
    from ltc_jax.app.settings import FRAME_ENCODER_LEARNING_RATE, FRAME_ENCODER_REASON
    from ltc_jax.app.streams import load_stream_data

    options = dict(machines=4, sensors=6, simulated_seconds=300.0, hidden_size=3)
    options |= dict(window_seconds=30.0, horizon_seconds=120.0, epochs=1)
    plain = StreamConfig(**options)
    train = load_stream_data(plain)["train"].take(np.arange(5))
    assert prepare(plain, train).model.encoder is None
    saved = {k: v for k, v in dataclasses.asdict(plain).items() if k != "frame_encoder"}
    assert config_from_json(saved).frame_encoder == "none"
    for other in [dict(model="cfc"), dict(model="jump"), dict(cell="biophysical")]:
        with pytest.raises(ValueError, match="--frame-encoder mlp is built for"):
            StreamConfig(**other, frame_encoder="mlp").check()
        StreamConfig(**other).check()  # without it: accepted
    job = prepare(dataclasses.replace(plain, frame_encoder="mlp"), train)
    # Its own learning rate where none is given, with the reason.
    assert job.settings["derived"]["learning_rate"] == dict(
        value=FRAME_ENCODER_LEARNING_RATE, reason=FRAME_ENCODER_REASON
    )
    assert prepare(plain, train).settings["learning_rate"] == 1e-2
    given = dataclasses.replace(plain, frame_encoder="mlp", learning_rate=0.02)
    assert prepare(given, train).settings["learning_rate"] == 0.02

    encoder = job.model.encoder
    first, second = (np.asarray(layer.weight) for layer in encoder.layers)
    assert first.shape == (6, train.num_channels) and second.shape == (3, 6)
    x = np.linspace(-2.0, 2.0, train.num_channels)
    hidden = np.tanh(first @ x + np.asarray(encoder.layers[0].bias))
    expected = second @ hidden + np.asarray(encoder.layers[1].bias)
    np.testing.assert_allclose(encoder(jnp.asarray(x)), expected, rtol=1e-12)

    def loss(model):
        return jnp.sum(jnp.sin(model(job.path, integrator=job.integrator)))

    grad = eqx.filter_grad(loss)(job.model).encoder.layers[0].weight[0, 0]
    step = 1e-6

    def moved(by):
        where = lambda m: m.encoder.layers[0].weight  # noqa: E731
        weight = where(job.model)
        return loss(eqx.tree_at(where, job.model, weight.at[0, 0].add(by)))

    difference = (moved(step) - moved(-step)) / (2 * step)
    assert abs(float(grad)) > 1e-6
    np.testing.assert_allclose(float(grad), float(difference), rtol=1e-5)
    jax.clear_caches()
