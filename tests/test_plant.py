import math

import numpy as np
import pytest

from ltc_jax.datasets import SENSOR_GROUPS, simulate_plant


HOUR = 3600.0
SLOW = (2.0, 0.5, 0.1)  # rates_hz small enough for whole lives in a test


def test_same_seed_same_streams_another_seed_different():
    kwargs = dict(machines=2, sensors=10, rates_hz=SLOW, simulated_seconds=1800.0)
    a, b = simulate_plant(seed=3, **kwargs), simulate_plant(seed=3, **kwargs)
    c = simulate_plant(seed=4, **kwargs)
    for name in ("machine", "sensor", "time", "value", "failure_time"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.failure_time, c.failure_time)
    assert a.time.size != c.time.size or not np.array_equal(a.value, c.value)


def test_machine_plant_does_not_depend_on_sensors_or_horizon():
    a = simulate_plant(machines=3, sensors=10, rates_hz=SLOW, simulated_seconds=60.0)
    b = simulate_plant(machines=5, sensors=30, rates_hz=SLOW, simulated_seconds=None)
    np.testing.assert_array_equal(a.failure_time, b.failure_time[:3])
    for m in range(3):
        np.testing.assert_array_equal(a.load_levels[m], b.load_levels[m])
        assert a.t_start[m] == a.failure_time[m] - 60.0 and b.t_start[m] == 0.0


def test_rows_sorted_typed_and_inside_each_life():
    s = simulate_plant(machines=3, sensors=20, rates_hz=SLOW, simulated_seconds=None)
    assert s.machine.dtype == s.sensor.dtype == np.int32
    assert s.time.dtype == s.value.dtype == np.float64
    key = s.machine.astype(np.int64) * s.sensors + s.sensor
    assert np.all(np.diff(key) >= 0)
    same = np.diff(key) == 0
    assert np.all(np.diff(s.time)[same] > 0)
    assert np.all(s.time >= 0) and np.all(s.time <= s.failure_time[s.machine])
    np.testing.assert_array_equal(s.duration, s.failure_time)
    # Every sensor reports on every machine (the slowest, 0.1 Hz, over >= 4 h).
    assert np.unique(key).size == 3 * 20


def test_each_sensor_samples_at_its_rate_within_jitter_and_drift():
    window, jitter, drift = 600.0, 0.02, 20e-6
    s = simulate_plant(machines=2, sensors=20, simulated_seconds=window)
    for m in range(s.machines):
        for i in np.flatnonzero(np.isfinite(s.sensor_rate_hz)).tolist():
            rate = s.sensor_rate_hz[i]
            times, _ = s.samples(m, i)
            intervals = np.diff(times)
            n = intervals.size
            # Each interval is (1 + d) (1 + u) / rate with |d| <= drift, |u| <= jitter.
            assert intervals.min() >= (1 - drift) * (1 - jitter) / rate * (1 - 1e-12)
            assert intervals.max() <= (1 + drift) * (1 + jitter) / rate * (1 + 1e-12)
            # The median of u ~ U(-j, j) over n draws has a standard deviation of
            # j / sqrt(n) (1 / (2 f(0) sqrt(n)), f(0) = 1 / 2j); allow 4 of them.
            median_tolerance = (1 + drift) * (1 + 4 * jitter / math.sqrt(n)) - 1
            assert abs(np.median(intervals) * rate - 1) <= median_tolerance
            # The count: window * rate within the drift, plus the phase (one
            # sample) and the accumulated jitter (a sum of n uniforms: standard
            # deviation sqrt(n) j / sqrt(3) intervals), 4 deviations.
            expected = window * rate
            tolerance = 2 + expected * drift + 4 * math.sqrt(n) * jitter / math.sqrt(3)
            assert abs(times.size - expected) <= tolerance


@pytest.mark.parametrize(
    "sensors, counts",
    [
        (10, (1, 3, 5, 1)),
        (500, (50, 150, 250, 50)),
        # 1.5, 4.5, 7.5, 1.5: floors 1, 4, 7, 1 leave 2, given to the earlier ties.
        (15, (2, 5, 7, 1)),
        # 3.7, 11.1, 18.5, 3.7: floors 3, 11, 18, 3 leave 2, to the largest
        # remainders (0.7, 0.7).
        (37, (4, 11, 18, 4)),
    ],
)
def test_group_counts_round_the_fractions(sensors, counts):
    s = simulate_plant(machines=1, sensors=sensors, simulated_seconds=0.5)
    groups = np.array(s.sensor_group)
    assert tuple(int(np.sum(groups == g)) for g in SENSOR_GROUPS) == counts
    # Sensors are numbered group by group, with the nominal rates.
    assert list(groups) == sorted(groups, key=SENSOR_GROUPS.index)
    np.testing.assert_array_equal(s.sensor_rate_hz[groups == "vibration"], 100.0)
    assert np.all(np.isnan(s.sensor_rate_hz[groups == "alarm"]))


def test_failure_times_span_four_to_twelve_hours():
    s = simulate_plant(machines=200, sensors=1, simulated_seconds=1.0)
    assert s.failure_time.min() >= 4 * HOUR and s.failure_time.max() <= 12 * HOUR
    # Uniform on [4 h, 12 h]: mean 8 h, standard deviation 8 h / sqrt(12) / sqrt(200).
    assert abs(s.failure_time.mean() - 8 * HOUR) < 4 * 8 * HOUR / math.sqrt(12 * 200)


def test_wear_runs_from_zero_to_one_and_follows_the_cumulative_load():
    s = simulate_plant(machines=4, sensors=1, simulated_seconds=1.0)
    for m in range(s.machines):
        failure = s.failure_time[m]
        assert s.wear(m, 0.0) == 0.0 and s.wear(m, failure) == 1.0
        grid = np.linspace(0.0, failure, 200_001)
        wear = s.wear(m, grid)
        assert np.all(np.diff(wear) >= 0)
        # The documented law, by quadrature of the load: (D(t) / D(T)) ** p.
        load = s.load(m, grid)
        used = np.r_[0.0, np.cumsum((load[1:] + load[:-1]) / 2 * np.diff(grid))]
        np.testing.assert_allclose(
            wear, (used / used[-1]) ** s.wear_exponent[m], atol=1e-3
        )
        # Accelerating: a power of at least 2 leaves most of the wear to the end.
        assert s.wear(m, grid[np.searchsorted(used, used[-1] / 2)]) <= 0.25 + 1e-3


def test_alarms_rise_with_wear_as_the_rate_law_says():
    low, high = 0.5, 12.0  # alarms per hour at wear 0 and wear 1
    s = simulate_plant(
        machines=8,
        sensors=10,
        group_fractions=(0.0, 0.0, 0.0, 1.0),
        alarms_per_hour=(low, high),
        simulated_seconds=None,
        seed=1,
    )
    observed = np.zeros(2)
    expected = np.zeros(2)
    for m in range(s.machines):
        failure = s.failure_time[m]
        for q, (a, b) in enumerate([(0.0, 0.25), (0.75, 1.0)]):
            in_quarter = (s.machine == m) & (s.time >= a * failure)
            in_quarter &= s.time < b * failure
            observed[q] += in_quarter.sum()
            grid = np.linspace(a * failure, b * failure, 20_001)
            rate = (low + (high - low) * s.wear(m, grid)) / HOUR
            integral = np.sum((rate[1:] + rate[:-1]) / 2 * np.diff(grid))
            expected[q] += s.sensors * integral
    # Poisson counts: within 4 standard deviations of their means.
    assert np.all(np.abs(observed - expected) <= 4 * np.sqrt(expected))
    assert observed[1] > 3 * observed[0]
    assert set(np.unique(s.value)) <= {1.0, 2.0, 3.0}
    # Severity 1 + Binomial(2, w): a mean of 1 + 2 w, so larger near failure.
    late = s.time > 0.75 * s.failure_time[s.machine]
    assert s.value[late].mean() > s.value[~late].mean()


def test_recalibration_changes_one_sensors_gain_and_offset_from_its_time():
    kwargs = dict(machines=2, sensors=10, rates_hz=SLOW, noise=0.0, seed=2)
    kwargs["simulated_seconds"] = None
    plain = simulate_plant(**kwargs)
    moved = simulate_plant(
        recalibration_seconds=2 * HOUR, recalibrated_sensors=(4,), **kwargs
    )
    np.testing.assert_array_equal(plain.time, moved.time)
    changed = plain.value != moved.value
    assert np.all(moved.sensor[changed] == 4)
    assert np.all(moved.time[changed] >= 2 * HOUR)
    row = (moved.sensor == 4) & (moved.time >= 2 * HOUR)
    assert changed[row].all()
    # The same reading x through the old and the new calibration.
    x = (plain.value[row] - plain.sensor_offset[4]) / plain.sensor_gain[4]
    np.testing.assert_allclose(
        moved.value[row], moved.recalibrated_offset[4] + moved.recalibrated_gain[4] * x
    )
    assert np.isnan(moved.recalibrated_gain[3])


def test_a_leaking_machine_shows_its_wear_in_pressure_not_vibration():
    """The second failure mode, against the same machines failing by the
    first: vibration reads the load alone; pressure falls faster with wear,
    its sensitivity k in [1, 2] in place of the first mode's in [0, 0.5], so
    the two readings differ by a per-sensor constant in [0.5, 2] times the
    wear; temperature and alarms are unchanged (noise 0: exact readings)."""
    kwargs = dict(machines=2, sensors=10, rates_hz=SLOW, noise=0.0, seed=1)
    kwargs["simulated_seconds"] = HOUR
    worn = simulate_plant(**kwargs)
    leak = simulate_plant(second_mode_share=1.0, **kwargs)
    np.testing.assert_array_equal(worn.failure_mode, [0, 0])
    np.testing.assert_array_equal(leak.failure_mode, [1, 1])
    np.testing.assert_array_equal(worn.time, leak.time)
    for m in range(2):
        for i, group in enumerate(leak.sensor_group):
            t, value = leak.samples(m, i)
            _, before = worn.samples(m, i)
            if group == "vibration":
                x = (value - leak.sensor_offset[i]) / leak.sensor_gain[i]
                np.testing.assert_allclose(x, leak.load(m, t), rtol=1e-12)
            elif group == "pressure":
                extra = (before - value) / leak.sensor_gain[i]
                k = extra / leak.wear(m, t)
                late = leak.wear(m, t) > 0.05
                assert np.ptp(k[late]) < 1e-9 * np.max(np.abs(extra))
                assert 0.5 <= np.median(k[late]) <= 2.0
            else:
                np.testing.assert_array_equal(value, before)
    # A share in between: each machine draws its mode, as its own draw says.
    some = simulate_plant(machines=40, sensors=2, rates_hz=SLOW, second_mode_share=0.5)
    assert 10 <= some.failure_mode.sum() <= 30


def test_first_machine_simulates_the_plants_later_machines():
    kwargs = dict(sensors=6, rates_hz=SLOW, simulated_seconds=600.0, seed=5)
    three = simulate_plant(machines=3, **kwargs)
    later = simulate_plant(machines=1, first_machine=2, **kwargs)
    assert later.machine_names == ("2",) and three.machine_names == ("0", "1", "2")
    assert later.failure_time[0] == three.failure_time[2]
    np.testing.assert_array_equal(later.load_levels[0], three.load_levels[2])
    for i in range(6):
        np.testing.assert_array_equal(later.samples(0, i)[1], three.samples(2, i)[1])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(sensors=0), "sensors must be an int, at least 1; got 0"),
        (dict(seed=-1), "seed must be an int, at least 0; got -1"),
        (dict(rates_hz=(np.inf, 10.0, 1.0)), "rates_hz must be three positive, fin"),
        (dict(failure_seconds=(10.0, np.inf)), "failure_seconds must be .* finite"),
        (dict(load_changes_per_hour=np.inf), "load_changes_per_hour must be finite"),
        (dict(alarms_per_hour=(1.0, np.inf)), "alarms_per_hour must be .* finite"),
        (dict(recalibration_seconds=np.nan), "recalibration_seconds must be None, or"),
        (dict(recalibration_seconds=-5.0), "recalibration_seconds must be None, or"),
        (dict(group_fractions=(0.5, 0.5, 0.5, 0.0)), "group_fractions must be"),
        (dict(jitter=1.0), r"jitter must be in \[0, 1\); got 1.0"),
        (dict(failure_seconds=(5.0, 4.0)), "failure_seconds must be"),
        (dict(alarms_per_hour=(2.0, 1.0)), "alarms_per_hour must be"),
        (dict(simulated_seconds=0.0), "simulated_seconds must be positive"),
        (dict(recalibrated_sensors=(1,)), "needs a recalibration_seconds"),
        (
            dict(recalibration_seconds=1.0, recalibrated_sensors=(19,)),
            "recalibrated_sensors must be continuous sensors",
        ),
        (dict(second_mode_share=1.5), r"second_mode_share must lie in \[0, 1\]"),
        (dict(first_machine=-1), "first_machine be at least 0; got 0.0 and -1"),
    ],
)
def test_invalid_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate_plant(**kwargs)
