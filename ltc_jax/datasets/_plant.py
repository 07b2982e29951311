"""A synthetic plant: machines wearing out to failure, watched by sensors that
sample at different rates, each on its own clock."""

import dataclasses
import math
import numbers

import numpy as np

from ._streams import SensorStreams


SENSOR_GROUPS = ("vibration", "pressure", "temperature", "alarm")
"""The plant's four sensor groups, in the order their sensors are numbered."""

# How strongly each continuous group's reading responds to wear, drawn per
# sensor uniformly in these ranges (see `simulate_plant`).
_VIBRATION_WEAR = (0.5, 3.0)
_PRESSURE_WEAR = (0.0, 0.5)
_TEMPERATURE_WEAR = (0.0, 1.0)
_GAIN_RANGE = (0.5, 2.0)  # log-uniform
# The second failure mode (a leak): pressure's wear sensitivity is drawn in this
# range instead of `_PRESSURE_WEAR`, and vibration does not respond.
_LEAK_PRESSURE_WEAR = (1.0, 2.0)
_SECONDS_PER_HOUR = 3600.0


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class PlantStreams(SensorStreams):
    """The output of [`ltc_jax.datasets.simulate_plant`][]: the
    [`ltc_jax.datasets.SensorStreams`][] of every sensor of every machine (its
    fields, with `time` in seconds since each machine's start, ending at its
    failure), with the plant's hidden state alongside.

    **Fields** beyond `SensorStreams`' (whose `sensor_group` is one of
    `SENSOR_GROUPS` per sensor, `value` an alarm's severity, 1, 2 or 3, and
    `sensor_rate_hz` NaN for alarms):

    - `sensor_gain`, `sensor_offset`: `float64[sensors]` each continuous sensor's
        calibration (NaN for alarms), shared by the machines.
    - `recalibrated_gain`, `recalibrated_offset`: `float64[sensors]` the
        calibration from `recalibration_seconds` on, for the recalibrated
        sensors; NaN for the others.
    - `t_start`: `float64[machines]` the first time simulated (0, or
        `failure_time - simulated_seconds` where that is later).
    - `wear_exponent`: `float64[machines]` the exponent `p` of each machine's
        wear curve.
    - `failure_mode`: `int32[machines]` how each machine fails: 0, wear that
        shows in vibration (the first mode), or 1, a leak (the second; see
        `second_mode_share`).
    - `load_times`: one `float64[segments]` per machine, the start of each
        load segment (the first is 0).
    - `load_levels`: one `float64[segments]` per machine, the load in each.
    """

    sensor_gain: np.ndarray
    sensor_offset: np.ndarray
    recalibrated_gain: np.ndarray
    recalibrated_offset: np.ndarray
    t_start: np.ndarray
    wear_exponent: np.ndarray
    failure_mode: np.ndarray
    load_times: tuple[np.ndarray, ...]
    load_levels: tuple[np.ndarray, ...]

    @property
    def duration(self) -> np.ndarray:
        """`float64[machines]` each machine's life in seconds: its stream runs
        from its start to its failure (`failure_time`)."""
        return self.failure_time

    def load(self, machine: int, t: np.ndarray | float) -> np.ndarray:
        """The operating load (a fraction of rated load) of `machine` at times `t`
        (seconds since its start)."""
        times = self.load_times[machine]
        segment = np.searchsorted(times, np.asarray(t, dtype=np.float64), "right")
        return np.asarray(self.load_levels[machine][np.maximum(segment - 1, 0)])

    def wear(self, machine: int, t: np.ndarray | float) -> np.ndarray:
        """The hidden wear `w(t)` of `machine` at times `t` (seconds since its
        start): 0 at its start, 1 at its failure, clipped to `[0, 1]` outside."""
        knots, used = _cumulative_load(
            self.load_times[machine],
            self.load_levels[machine],
            self.failure_time[machine],
        )
        fraction = np.interp(np.asarray(t, dtype=np.float64), knots, used) / used[-1]
        return np.asarray(fraction ** self.wear_exponent[machine])


def simulate_plant(
    machines: int = 4,
    sensors: int = 20,
    *,
    seed: int = 0,
    failure_seconds: tuple[float, float] = (4 * 3600.0, 12 * 3600.0),
    group_fractions: tuple[float, float, float, float] = (0.1, 0.3, 0.5, 0.1),
    rates_hz: tuple[float, float, float] = (100.0, 10.0, 1.0),
    jitter: float = 0.02,
    drift_ppm: float = 20.0,
    load_levels: tuple[float, ...] = (0.4, 0.7, 1.0),
    load_changes_per_hour: float = 1.0,
    wear_exponents: tuple[float, float] = (2.0, 4.0),
    pressure_lag_seconds: float = 5.0,
    temperature_lag_seconds: float = 600.0,
    noise: float = 0.05,
    alarms_per_hour: tuple[float, float] = (0.5, 12.0),
    simulated_seconds: float | None = 3600.0,
    recalibration_seconds: float | None = None,
    recalibrated_sensors: tuple[int, ...] = (),
    second_mode_share: float = 0.0,
    first_machine: int = 0,
) -> PlantStreams:
    """Simulate a plant of machines that wear out to failure, watched by
    asynchronous sensors at several rates: a synthetic benchmark for predictive
    maintenance.

    It is not a model of any real plant. It is designed to test what real sensor
    streams demand of a model: asynchronous, multi-rate sampling (every sensor on
    its own clock, so no two sensors' samples line up), causal prediction of a
    failure from a hidden state that no single channel shows (the load moves the
    readings too), and clocks that jitter and drift. The machines are the unit
    of a train/test split.

    **The physics** (times in seconds; a machine's time starts at 0):

    - *Failure.* Machine `m` fails at `T_m`, drawn uniformly in
        `failure_seconds`; its stream ends there. The label "fails within `H`
        seconds of `t`" is `failure_time[m] - t <= H`.
    - *Load.* A piecewise-constant operating load `L(t)` (a fraction of rated
        load, one recipe after another): it starts at a level drawn from
        `load_levels` and switches to a different level, drawn uniformly, at the
        events of a Poisson process of `load_changes_per_hour`.
    - *Wear.* A hidden degradation that accumulates with the load, accelerating:
        `w(t) = (D(t) / D(T_m)) ** p_m` with `D(t)` the integral of `L` from 0 to
        `t` and `p_m` drawn uniformly in `wear_exponents`. So `w(0) = 0`,
        `w(T_m) = 1`, `w` never decreases, grows faster under a high load, and
        most of it comes late in life (`PlantStreams.wear` evaluates it).
    - *Clocks.* Each continuous sensor on each machine samples on its own clock:
        a period `(1 + d) / rate` with a drift `d` drawn uniformly in
        `±drift_ppm` parts per million, a first sample at a phase drawn uniformly
        in one period, and each interval multiplied by `1 + u`, `u` drawn
        uniformly in `±jitter` (so the jitter accumulates, as on a free-running
        clock). Times are the true times of the samples.
    - *Readings.* Sensor `i` of a continuous group reads
        `offset_i + gain_i * (x_i(t) + noise * e)`, with `e` standard normal and
        independent per sample, `gain_i` log-uniform in [0.5, 2] and `offset_i`
        standard normal (shared by the machines: sensor `i` sits in the same
        place on each), and `k_i` a wear sensitivity drawn per sensor:
        - vibration (an RMS amplitude, immediate): `x = L(t) (1 + k w(t))`,
            `k` in [0.5, 3];
        - pressure (a first-order lag): `x = P(t) - k w(t)`, `k` in [0, 0.5],
            where `P' = (L - P) / pressure_lag_seconds`;
        - temperature (a slower lag): `x = Q(t) + k w(t)`, `k` in [0, 1], where
            `Q' = (L - Q) / temperature_lag_seconds`;

        both lags start at rest (`P(0) = Q(0) = L(0)`) and are solved exactly
        (the load is piecewise constant). The wear enters without a lag: it
        changes over hours, slower than any of the time constants.
    - *A second failure mode.* A machine fails by a leak instead with
        probability `second_mode_share`: its vibration does not respond to
        wear (`k = 0`) and its pressure falls faster, with `k` drawn per
        sensor in [1, 2] (shared by the leaking machines); temperature and
        alarms respond as in the first mode.
    - *Alarms.* Each alarm sensor raises alarms at the events of a Poisson
        process whose rate grows linearly with wear, from `alarms_per_hour[0]`
        at `w = 0` to `alarms_per_hour[1]` at `w = 1`; an alarm's value is its
        severity, `1 + Binomial(2, w(t))` (1, 2 or 3: severe alarms come late).

    **Size.** A sensor at `rate` Hz gives about `rate * seconds` rows, so the rows
    are about `seconds * sum(rates of the sensors)` per machine, at 24 bytes a row.
    With the default groups, 200 sensors (20 at 100 Hz, 60 at 10 Hz, 100 at 1
    Hz) give 2,700 rows per second: 117 million rows (2.8 GB) over a 12-hour
    life, and 9.72 million (233 MB) for its last hour (`simulated_seconds=3600`).
    The defaults (4 machines, 20 sensors) give 270 rows per second per machine:
    3.9 million rows (93 MB) for the last hour of each life, in about a second,
    and about 31 million (750 MB) for whole lives (`simulated_seconds=None`).
    Simulating holds about twice the result's bytes at its peak.

    **Arguments:**

    - `machines`: the number of machines, at least 1 (default 4).
    - `sensors`: sensors per machine, at least 1; the plant is designed for 10 to
        500 (default 20).
    - `seed`: the seed of every draw. Machine `m`'s load, wear and failure time
        depend only on `seed` and `m`, not on the number of machines or sensors.
    - `failure_seconds`: `(low, high)` the range of failure times, in seconds
        (default 4 to 12 hours).
    - `group_fractions`: the fractions of the sensors in the groups vibration,
        pressure, temperature and alarm, summing to 1 (default 10%, 30%, 50%,
        10%). The counts are the fractions times `sensors` rounded by largest
        remainder (ties to the earlier group), so each is within 1 of its
        fraction and they sum to `sensors`. Sensors are numbered group by group.
    - `rates_hz`: nominal sampling rates of vibration, pressure and temperature,
        in hertz (default 100, 10, 1).
    - `jitter`: the largest relative change of one sampling interval, in
        `[0, 1)` (default 0.02).
    - `drift_ppm`: the largest clock drift, in parts per million (default 20).
    - `load_levels`: the load levels, fractions of rated load, positive
        (default 0.4, 0.7, 1.0).
    - `load_changes_per_hour`: the rate of load changes, per hour (default 1).
    - `wear_exponents`: `(low, high)` the range of the wear curve's exponent
        `p`, at least 1 (default 2 to 4).
    - `pressure_lag_seconds`, `temperature_lag_seconds`: the time constants of
        the pressure and temperature responses, in seconds (default 5 and 600).
    - `noise`: the standard deviation of a reading's noise, in units of the
        sensor's gain (default 0.05).
    - `alarms_per_hour`: `(at w = 0, at w = 1)` each alarm sensor's rate, per
        hour (default 0.5 and 12).
    - `simulated_seconds`: simulate only the last `simulated_seconds` before each
        failure (from `t_start = max(0, failure_time - simulated_seconds)`), or
        whole lives if `None` (default 3600: the last hour, where both
        answers to "fails within 30 minutes" are common). Load, wear and failure times,
        and so the readings' noiseless part, are the same as in a whole-life
        run; each clock restarts at `t_start` (with the same drift), and the
        noise is drawn afresh.
    - `recalibration_seconds`: the time since each machine's start from which
        the `recalibrated_sensors` read with a new gain and offset (drawn as the
        first ones), or `None` (default): a drift of the data for online
        learning.
    - `recalibrated_sensors`: the continuous sensors recalibrated at
        `recalibration_seconds` (default none).
    - `second_mode_share`: the probability, in `[0, 1]`, that a machine fails
        by the second mode (default 0). With the load levels and the
        recalibration, this drifts the plant between regimes.
    - `first_machine`: the index of the first machine simulated (default 0):
        machines `first_machine, first_machine + 1, ...` of the plant, named
        by that index (`"2"` for the third), whose draws depend on `seed` and
        their index, so that regimes simulated by separate calls have
        different machines and the same sensors, and a plant simulated a few
        machines at a time has the machines of the whole. The result's
        `machine` column still counts from 0: it indexes `machine_names`.

    **Returns:** a [`ltc_jax.datasets.PlantStreams`][].

    **Raises:** `ValueError` naming the argument for a count below 1 or not
    an int, a negative or non-int `seed`, a number that is not finite (NaN or
    infinite; `recalibration_seconds` negative too), fractions
    that are negative or do not sum to 1, a range whose low end exceeds its high
    end, a non-positive rate, load level, time constant or
    `simulated_seconds`, a jitter
    outside `[0, 1)`, a negative drift, noise or alarm rate, an alarm rate that
    falls with wear, a wear exponent below 1, or a recalibrated sensor that is
    not a continuous one (or a recalibrated sensor without a time), a
    `second_mode_share` outside `[0, 1]` or a negative `first_machine`.
    """
    if not 0 <= second_mode_share <= 1 or first_machine < 0:
        raise ValueError(
            f"second_mode_share must lie in [0, 1] and first_machine be at least 0; "
            f"got {second_mode_share} and {first_machine}."
        )
    _check(
        machines=machines,
        sensors=sensors,
        failure_seconds=failure_seconds,
        group_fractions=group_fractions,
        rates_hz=rates_hz,
        jitter=jitter,
        drift_ppm=drift_ppm,
        load_levels=load_levels,
        load_changes_per_hour=load_changes_per_hour,
        wear_exponents=wear_exponents,
        lags=(pressure_lag_seconds, temperature_lag_seconds),
        noise=noise,
        alarms_per_hour=alarms_per_hour,
        simulated_seconds=simulated_seconds,
        seed=seed,
        recalibration_seconds=recalibration_seconds,
    )
    counts = _group_counts(sensors, group_fractions)
    group_index = np.repeat(np.arange(4), counts)
    sensor_group = tuple(SENSOR_GROUPS[g] for g in group_index)
    sensor_rate_hz = np.append(np.asarray(rates_hz, dtype=np.float64), np.nan)[
        group_index
    ]
    continuous = group_index < 3
    recalibrated = np.zeros(sensors, dtype=bool)
    if recalibrated_sensors:
        index = np.asarray(recalibrated_sensors)
        if recalibration_seconds is None:
            raise ValueError(
                "recalibrated_sensors needs a recalibration_seconds; got None."
            )
        if np.any((index < 0) | (index >= sensors)) or not np.all(
            continuous[np.clip(index, 0, sensors - 1)]
        ):
            raise ValueError(
                f"recalibrated_sensors must be continuous sensors, in [0, "
                f"{int(continuous.sum())}); got {tuple(recalibrated_sensors)}."
            )
        recalibrated[index] = True

    # Independent streams by purpose: spawn keys (0,) sensors, (1, m) machine m's
    # plant, (2, m, i) sensor i on machine m, (3, m) machine m's failure mode,
    # (4,) the second mode's sensitivities.
    def rng(*key: int) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))

    draw = rng(0)
    gain = np.exp(draw.uniform(*np.log(_GAIN_RANGE), size=(2, sensors)))
    offset = draw.standard_normal((2, sensors))
    sensitivity = np.select(
        [group_index == 0, group_index == 1, group_index == 2],
        [
            draw.uniform(*r, size=sensors)
            for r in (_VIBRATION_WEAR, _PRESSURE_WEAR, _TEMPERATURE_WEAR)
        ],
        np.nan,
    )
    for calibration in (gain, offset):
        calibration[:, ~continuous] = np.nan
        calibration[1, ~recalibrated] = np.nan

    leak_sensitivity = np.where(
        group_index == 1, rng(4).uniform(*_LEAK_PRESSURE_WEAR, size=sensors), 0.0
    )
    leak_sensitivity[group_index == 2] = sensitivity[group_index == 2]
    levels_all = np.asarray(load_levels, dtype=np.float64)
    lags = (None, pressure_lag_seconds, temperature_lag_seconds)
    failure_time = np.empty(machines)
    t_start = np.empty(machines)
    wear_exponent = np.empty(machines)
    failure_mode = np.zeros(machines, np.int32)
    load_times, load_values, parts = [], [], []
    for m in range(machines):
        plant_m = first_machine + m  # the machine's index in the plant
        failure, times, levels, p = _draw_machine(
            rng(1, plant_m),
            failure_seconds,
            levels_all,
            load_changes_per_hour,
            wear_exponents,
        )
        failure_time[m], wear_exponent[m] = failure, p
        if second_mode_share > 0:
            failure_mode[m] = rng(3, plant_m).uniform() < second_mode_share
        k_wear = leak_sensitivity if failure_mode[m] else sensitivity
        load_times.append(times)
        load_values.append(levels)
        start = (
            0.0 if simulated_seconds is None else max(0.0, failure - simulated_seconds)
        )
        t_start[m] = start
        knots, used = _cumulative_load(times, levels, failure)

        def wear(t, knots=knots, used=used, p=p):
            return (np.interp(t, knots, used) / used[-1]) ** p

        for i in range(sensors):
            draw = rng(2, plant_m, i)
            group = group_index[i]
            if group == 3:
                t = _poisson_times(draw, start, failure, wear, alarms_per_hour)
                value = 1.0 + draw.binomial(2, wear(t)).astype(np.float64)
                parts.append((m, i, t, value))
                continue
            t = _clock(draw, start, failure, rates_hz[group], jitter, drift_ppm)
            if group == 0:  # vibration: an RMS amplitude, immediate
                load = levels[np.searchsorted(times, t, "right") - 1]
                x = load * (1.0 + k_wear[i] * wear(t))
            else:  # pressure falls with wear, temperature rises
                sign = -1.0 if group == 1 else 1.0
                lagged = _lagged_load(times, levels, lags[group], t)
                x = lagged + sign * k_wear[i] * wear(t)
            x = x + noise * draw.standard_normal(t.shape)
            late = recalibrated[i] & (t >= (recalibration_seconds or 0.0))
            value = np.where(late, offset[1, i], offset[0, i]) + (
                np.where(late, gain[1, i], gain[0, i]) * x
            )
            parts.append((m, i, t, value))

    lengths = [p[2].size for p in parts]
    machine = np.repeat(np.array([p[0] for p in parts], np.int32), lengths)
    sensor = np.repeat(np.array([p[1] for p in parts], np.int32), lengths)
    time = np.concatenate([p[2] for p in parts])
    value = np.concatenate([p[3] for p in parts])
    del parts  # the samples once, not twice, while the streams are checked
    return PlantStreams(
        machine=machine,
        sensor=sensor,
        time=time,
        value=value,
        sensor_group=sensor_group,
        sensor_rate_hz=sensor_rate_hz,
        sensor_gain=gain[0],
        sensor_offset=offset[0],
        recalibrated_gain=gain[1],
        recalibrated_offset=offset[1],
        failure_time=failure_time,
        t_start=t_start,
        wear_exponent=wear_exponent,
        failure_mode=failure_mode,
        load_times=tuple(load_times),
        load_levels=tuple(load_values),
        machine_names=tuple(str(first_machine + m) for m in range(machines)),
    )


def _draw_machine(draw, failure_seconds, levels_all, changes_per_hour, exponents):
    """One machine's failure time, load schedule (segment starts and levels) and
    wear exponent."""
    failure = draw.uniform(*failure_seconds)
    changes = draw.poisson(changes_per_hour * failure / _SECONDS_PER_HOUR)
    switches = np.sort(draw.uniform(0.0, failure, size=changes))
    # Each change moves to one of the other levels, uniformly.
    steps = draw.integers(1, max(levels_all.size, 2), size=changes)
    if levels_all.size == 1:
        steps[:] = 0
    which = draw.integers(levels_all.size) + np.cumsum(np.r_[0, steps])
    levels = levels_all[which % levels_all.size]
    return failure, np.r_[0.0, switches], levels, draw.uniform(*exponents)


def _group_counts(sensors: int, fractions) -> np.ndarray:
    """Largest-remainder rounding of `fractions * sensors`, ties to the earlier."""
    exact = np.asarray(fractions, dtype=np.float64) * sensors
    counts = np.floor(exact + 1e-9).astype(np.int64)
    remainder = exact - counts
    extra = sensors - counts.sum()
    order = np.argsort(-np.round(remainder, 9), kind="stable")
    counts[order[:extra]] += 1
    return counts


def _cumulative_load(times, levels, failure) -> tuple[np.ndarray, np.ndarray]:
    """The knots `(t, D(t))` of the piecewise-linear integral of the load."""
    knots = np.r_[times, failure]
    used = np.r_[0.0, np.cumsum(levels * np.diff(knots))]
    return knots, used


def _lagged_load(times, levels, lag, t) -> np.ndarray:
    """The exact first-order lag `y' = (L - y) / lag` of the piecewise-constant
    load, from rest (`y(0) = L(0)`), at times `t`."""
    at_switch = np.empty(levels.size)
    at_switch[0] = levels[0]
    for k in range(1, levels.size):  # one step per load change
        decay = math.exp(-(times[k] - times[k - 1]) / lag)
        at_switch[k] = levels[k - 1] + (at_switch[k - 1] - levels[k - 1]) * decay
    segment = np.searchsorted(times, t, "right") - 1
    level = levels[segment]
    return level + (at_switch[segment] - level) * np.exp(-(t - times[segment]) / lag)


def _clock(draw, start, end, rate_hz, jitter, drift_ppm) -> np.ndarray:
    """One sensor's sample times in `[start, end]`: drift, phase and jitter."""
    period = (1.0 + draw.uniform(-drift_ppm, drift_ppm) * 1e-6) / rate_hz
    phase = draw.uniform(0.0, period)
    most = int(math.ceil((end - start) / (period * (1.0 - jitter)))) + 1
    intervals = period * (1.0 + draw.uniform(-jitter, jitter, size=most))
    times = start + phase + np.cumsum(np.r_[0.0, intervals])
    return times[: np.searchsorted(times, end, "right")]


def _poisson_times(draw, start, end, wear, alarms_per_hour) -> np.ndarray:
    """Event times in `[start, end]` of a Poisson process of rate
    `r0 + (r1 - r0) w(t)` per hour, by thinning at the largest rate `r1`."""
    low, high = (r / _SECONDS_PER_HOUR for r in alarms_per_hour)
    count = draw.poisson(high * (end - start))
    times = np.sort(draw.uniform(start, end, size=count))
    keep = draw.uniform(0.0, high, size=count) < low + (high - low) * wear(times)
    return times[keep]


def _check(
    *,
    machines,
    sensors,
    failure_seconds,
    group_fractions,
    rates_hz,
    jitter,
    drift_ppm,
    load_levels,
    load_changes_per_hour,
    wear_exponents,
    lags,
    noise,
    alarms_per_hour,
    simulated_seconds,
    seed,
    recalibration_seconds,
) -> None:
    """Raise a `ValueError` naming the first invalid argument of `simulate_plant`:
    each rule's number (or each of its numbers) finite as well as in range."""

    def whole(value) -> bool:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)

    def finite(*values) -> bool:
        return all(math.isfinite(value) for value in np.ravel(values))

    rules = [
        ("machines", machines, whole(machines) and machines >= 1, "an int, at least 1"),
        ("sensors", sensors, whole(sensors) and sensors >= 1, "an int, at least 1"),
        ("seed", seed, whole(seed) and seed >= 0, "an int, at least 0"),
        (
            "failure_seconds",
            failure_seconds,
            finite(failure_seconds) and 0 < failure_seconds[0] <= failure_seconds[1],
            "(low, high) with 0 < low <= high, finite",
        ),
        (
            "group_fractions",
            group_fractions,
            len(group_fractions) == 4
            and min(group_fractions) >= 0
            and abs(sum(group_fractions) - 1.0) <= 1e-9,
            "four fractions (vibration, pressure, temperature, alarm), none "
            "negative, summing to 1",
        ),
        (
            "rates_hz",
            rates_hz,
            len(rates_hz) == 3 and min(rates_hz) > 0 and finite(rates_hz),
            "three positive, finite rates (vibration, pressure, temperature)",
        ),
        ("jitter", jitter, 0 <= jitter < 1, "in [0, 1)"),
        ("drift_ppm", drift_ppm, 0 <= drift_ppm < 1e6, "in [0, 1e6)"),
        (
            "load_levels",
            load_levels,
            len(load_levels) >= 1 and min(load_levels) > 0 and finite(load_levels),
            "one or more positive, finite levels",
        ),
        (
            "load_changes_per_hour",
            load_changes_per_hour,
            finite(load_changes_per_hour) and load_changes_per_hour >= 0,
            "finite and at least 0",
        ),
        (
            "wear_exponents",
            wear_exponents,
            finite(wear_exponents) and 1 <= wear_exponents[0] <= wear_exponents[1],
            "(low, high) with 1 <= low <= high, finite",
        ),
        (
            "pressure_lag_seconds",
            lags[0],
            finite(lags[0]) and lags[0] > 0,
            "positive and finite",
        ),
        (
            "temperature_lag_seconds",
            lags[1],
            finite(lags[1]) and lags[1] > 0,
            "positive and finite",
        ),
        ("noise", noise, finite(noise) and noise >= 0, "finite and at least 0"),
        (
            "alarms_per_hour",
            alarms_per_hour,
            finite(alarms_per_hour) and 0 <= alarms_per_hour[0] <= alarms_per_hour[1],
            "(at wear 0, at wear 1) with 0 <= the first <= the second, finite",
        ),
        (
            "simulated_seconds",
            simulated_seconds,
            simulated_seconds is None
            or (finite(simulated_seconds) and simulated_seconds > 0),
            "positive and finite, or None for whole lives",
        ),
    ]
    rules.append(
        (
            "recalibration_seconds",
            recalibration_seconds,
            recalibration_seconds is None
            or (finite(recalibration_seconds) and recalibration_seconds >= 0),
            "None, or finite and at least 0",
        )
    )
    for name, value, valid, requirement in rules:
        if not valid:
            raise ValueError(f"{name} must be {requirement}; got {value!r}.")
