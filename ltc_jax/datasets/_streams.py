"""Sensor streams in long format, and their windows on a slow clock."""

import dataclasses
import difflib
import math
import operator
import os
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from .._warn import warn
from ._dataset import SequenceDataset


EVENT_GROUPS = ("alarm", "event")
"""Sensor groups whose samples are events (their times matter, not a level
between them): summarised as counts, sums and the time since the last one."""

# A continuous sensor whose rate exceeds the clock's by this factor has several
# samples in every frame (jitter included) and is summarised within frames; a
# slower one is held at its last value.
_FAST_FACTOR = 1.5

# The default clock's frames per window: the slowest rate times the window,
# rounded down, or up to the next whole number where that is within this
# relative distance.
_FRAME_SLACK = 1e-3


@dataclasses.dataclass(frozen=True, eq=False)
class SensorStreams:
    """Every sample of every sensor of every machine in long format, one row per
    sample, sorted by machine, then sensor, then time: the data a plant
    historian exports. Times are kept exactly (float64 seconds on the host);
    windows take them from their own start (see
    [`ltc_jax.datasets.stream_windows`][]).

    Read one from a CSV or Parquet file with
    [`ltc_jax.datasets.read_sensor_log`][], or simulate one with
    [`ltc_jax.datasets.simulate_plant`][].

    The four columns are kept without a copy where given as `int32` (machine,
    sensor) and `float64` (time, value) arrays, so that a plant's rows are held
    once: do not change such arrays afterwards.

    **Fields:**

    - `machine`: `int32[n]` machine of each sample, in `[0, machines)`.
    - `sensor`: `int32[n]` sensor of each sample, in `[0, sensors)`.
    - `time`: `float64[n]` seconds since `time_origin`, strictly increasing within
        each (machine, sensor).
    - `value`: `float64[n]` the reading, in the sensor's own units; for an event
        sensor (group in `EVENT_GROUPS`), the event's value (e.g. a severity).
    - `sensor_group`: `str` per sensor: its kind, e.g. `"vibration"`; a group in
        `EVENT_GROUPS` marks an event sensor.
    - `sensor_rate_hz`: `float64[sensors]` nominal sampling rate, in hertz; NaN
        for event sensors, which come at their own times.
    - `failure_time`: `float64[machines]` each machine's failure, in seconds
        since `time_origin`; NaN where none was seen (the machine is censored at
        its last sample).
    - `sensor_names`: `str` per sensor (default `"<group>_<index>"`).
    - `machine_names`: `str` per machine (default its index).
    - `time_origin`: what time 0 is, e.g. `"2026-01-05T00:00:00+00:00"` for
        date-times read from a file; empty where times were given as numbers.

    **Raises:** `ValueError` for columns of different lengths, a machine or
    sensor index that is not a whole number or is out of range, a continuous
    sensor's rate that is not positive and finite, an infinite failure time,
    repeated sensor or machine names, rows not sorted by machine, sensor and
    time (times repeated within a sensor included), a non-finite time or
    value (naming the first such row), or a machine whose failure precedes
    its first sample.
    """

    # Any array-like (lists too) on construction; stored as NumPy arrays.
    machine: np.ndarray | ArrayLike
    sensor: np.ndarray | ArrayLike
    time: np.ndarray | ArrayLike
    value: np.ndarray | ArrayLike
    sensor_group: tuple[str, ...] | list[str]
    sensor_rate_hz: np.ndarray | ArrayLike
    failure_time: np.ndarray | ArrayLike
    sensor_names: tuple[str, ...] | list[str] = ()
    machine_names: tuple[str, ...] | list[str] = ()
    time_origin: str = ""

    def __post_init__(self):
        indices = {
            name: _whole_indices(getattr(self, name), name)
            for name in ("machine", "sensor")
        }
        for name in ("time", "value"):
            object.__setattr__(
                self, name, np.asarray(getattr(self, name), dtype=np.float64)
            )
        for name in ("sensor_rate_hz", "failure_time"):
            object.__setattr__(
                self, name, np.asarray(getattr(self, name), dtype=np.float64)
            )
        for name in ("sensor_group", "sensor_names", "machine_names"):
            object.__setattr__(self, name, tuple(map(str, getattr(self, name))))
        sensors, machines = len(self.sensor_group), self.failure_time.shape[0]
        if not self.sensor_names:
            names = [f"{g}_{i}" for i, g in enumerate(self.sensor_group)]
            object.__setattr__(self, "sensor_names", tuple(names))
        if not self.machine_names:
            object.__setattr__(self, "machine_names", tuple(map(str, range(machines))))
        n = self.time.shape
        if np.any(
            (indices["machine"] < 0) | (indices["machine"] >= machines)
        ) or np.any((indices["sensor"] < 0) | (indices["sensor"] >= sensors)):
            raise ValueError(
                f"Machine indices must be in [0, {machines}) and sensor indices in "
                f"[0, {sensors})."
            )
        for name, index in indices.items():
            object.__setattr__(self, name, index.astype(np.int32, copy=False))
        del indices, index  # the columns once, not twice, through the checks
        if not (self.machine.shape == self.sensor.shape == self.value.shape == n):
            raise ValueError(
                f"machine {self.machine.shape}, sensor {self.sensor.shape}, time "
                f"{n} and value {self.value.shape} must be columns of one length."
            )
        if (
            self.sensor_rate_hz.shape != (sensors,)
            or len(self.sensor_names) != sensors
            or len(self.machine_names) != machines
        ):
            raise ValueError(
                f"{sensors} sensor groups need as many rates and names; got "
                f"{self.sensor_rate_hz.shape[0]} rates and {len(self.sensor_names)} "
                f"names. {machines} failure times need as many machine names; got "
                f"{len(self.machine_names)}."
            )
        for kind, names in (
            ("sensor", self.sensor_names),
            ("machine", self.machine_names),
        ):
            repeated = sorted(n for n, count in Counter(names).items() if count > 1)
            if repeated:
                raise ValueError(f"{kind} names must differ; {repeated} repeat.")
        continuous = ~self.is_event
        rates = self.sensor_rate_hz[continuous]
        if not np.all(np.isfinite(rates) & (rates > 0)):
            bad = np.flatnonzero(continuous)[
                np.argmin(np.isfinite(rates) & (rates > 0))
            ]
            raise ValueError(
                f"Continuous sensor {self.sensor_names[bad]!r} needs a positive, "
                f"finite sensor_rate_hz; got {self.sensor_rate_hz[bad]}."
            )
        if np.any(np.isinf(self.failure_time)):
            bad = int(np.argmax(np.isinf(self.failure_time)))
            raise ValueError(
                f"Machine {self.machine_names[bad]!r} has an infinite failure_time: "
                "give NaN where no failure was seen."
            )
        for name in ("time", "value"):
            finite = np.isfinite(getattr(self, name))
            if not np.all(finite):
                row = int(np.argmin(finite))
                raise ValueError(
                    f"Every {name} must be finite; row index {row} (0-based; "
                    f"{self._row(row)}) "
                    f"holds {float(getattr(self, name)[row])}."
                )
        step = np.diff(self.machine.astype(np.int64) * sensors + self.sensor)
        wrong = (step < 0) | ((step == 0) & (np.diff(self.time) <= 0))
        del step
        if np.any(wrong):
            row = int(np.argmax(wrong)) + 1
            raise ValueError(
                "Rows must be sorted by machine, then sensor, then strictly "
                f"increasing time; row index {row} (0-based; {self._row(row)}, time "
                f"{float(self.time[row])!r}) does not follow row index {row - 1} "
                f"({self._row(row - 1)}, time {float(self.time[row - 1])!r})."
            )
        first = np.full(machines, np.inf)
        np.minimum.at(first, self.machine, self.time)
        early = np.isfinite(first) & (self.failure_time < first)
        if np.any(early):
            bad = int(np.argmax(early))
            raise ValueError(
                f"Machine {self.machine_names[bad]!r} fails at "
                f"{float(self.failure_time[bad])!r} s, before its first sample at "
                f"{float(first[bad])!r} s (on the streams' time axis): no reading "
                "precedes the failure. Are the failure times in the log's time "
                "zone and unit?"
            )

    def _row(self, row: int) -> str:
        """`row`'s machine and sensor, by name."""
        return (
            f"machine {self.machine_names[self.machine[row]]!r}, sensor "
            f"{self.sensor_names[self.sensor[row]]!r}"
        )

    @property
    def machines(self) -> int:
        """The number of machines."""
        return self.failure_time.shape[0]

    @property
    def sensors(self) -> int:
        """The number of sensors per machine."""
        return len(self.sensor_group)

    @property
    def is_event(self) -> np.ndarray:
        """`bool[sensors]` which sensors are event sensors."""
        return np.array([g in EVENT_GROUPS for g in self.sensor_group], dtype=bool)

    def samples(
        self, machine: int | np.integer, sensor: int | np.integer
    ) -> tuple[np.ndarray, np.ndarray]:
        """`(time, value)`, `float64[k]` each, of the `k` samples of one sensor
        on one machine, in seconds since `time_origin` and the sensor's units
        (views, no copy; empty for a machine or sensor index with no rows).

        **Raises:** `TypeError` for an index that is not an integer."""
        first, last = _rows_of(self.machine, machine)
        start, stop = first + _rows_of(self.sensor[first:last], sensor)
        return self.time[start:stop], self.value[start:stop]

    def observed_range(self, machine: int | np.integer) -> tuple[float, float]:
        """`(first, last)` sample time of `machine` over all its sensors, in
        seconds since `time_origin`.

        **Raises:** `ValueError` if `machine` is not an index of the streams'
        machines or the machine has no samples; `TypeError` if it is not an
        integer.
        """
        first, last = _rows_of(self.machine, machine)
        if not 0 <= machine < len(self.machine_names):
            raise ValueError(
                f"No machine {machine}: the streams have {len(self.machine_names)} "
                "(indices from 0)."
            )
        if first == last:
            raise ValueError(
                f"Machine {self.machine_names[machine]!r} has no samples (of the "
                "tags read, where tags= chose some)."
            )
        times = self.time[first:last]
        return float(times.min()), float(times.max())


@dataclasses.dataclass(frozen=True, eq=False)
class StreamWindows:
    """Windows of sensor streams on one slow clock, labelled "fails within
    `horizon_seconds` of the window's end": the output of
    [`ltc_jax.datasets.stream_windows`][].

    **Fields:**

    - `dataset`: a [`ltc_jax.datasets.SequenceDataset`][] of `n` windows, each on
        the clock's grid `ts = [1, 2, ..., frames] / clock_hz` seconds from the
        window's start, with `channels` frame features (`channel_names`); train
        it with [`ltc_jax.fit`][] and `interpolation="hold"`, which never reads
        a value before its time.
    - `machine`: `int32[n]` the machine of each window.
    - `end_time`: `float64[n]` each window's end, in the streams' seconds.
    - `time_to_failure`: `float64[n]` seconds from the window's end to the
        machine's failure; NaN where no failure was seen.
    - `channel_names`: `"<sensor>:<feature>"` per channel (see
        `stream_windows`).
    - `channel_groups`: `"<sensor group>:<feature>"` per channel (the group
        of `SensorStreams.sensor_group`): the channels that
        [`ltc_jax.datasets.pool_channels`][] pools together, where a group's
        sensors are interchangeable (the simulated plant's groups are its
        kinds of sensor; a log's tags are `"continuous"` or `"event"` unless
        `read_sensor_log`'s `sensor_groups` names their kinds).
    - `clock_hz`: the slow clock, in hertz.
    - `horizon_seconds`: the label's horizon, in seconds.
    """

    dataset: SequenceDataset
    machine: np.ndarray
    end_time: np.ndarray
    time_to_failure: np.ndarray
    channel_names: tuple[str, ...]
    clock_hz: float
    horizon_seconds: float
    channel_groups: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.dataset)

    def take(self, indices) -> "StreamWindows":
        """The windows at `indices` (an integer, or an integer or boolean array)."""
        indices = np.atleast_1d(np.arange(len(self))[indices])
        return dataclasses.replace(
            self,
            dataset=self.dataset.take(indices),
            machine=self.machine[indices],
            end_time=self.end_time[indices],
            time_to_failure=self.time_to_failure[indices],
        )

    def of_machines(self, machines: ArrayLike) -> "StreamWindows":
        """The windows of `machines` (indices into the streams'
        `machine_names`): the unit of a train/test split.

        **Raises:** `TypeError` for machines that are not integer indices
        (names, floats, a boolean mask); `ValueError` where none of
        `machines` has a window here (machines without windows are otherwise
        skipped)."""
        machines = np.asarray(machines)
        if machines.size and not np.issubdtype(machines.dtype, np.integer):
            raise TypeError(
                "of_machines takes machine indices, ints into the streams' "
                f"machine_names; got {machines.tolist()[:5]} ({machines.dtype}). "
                "For names, index them (streams.machine_names.index(name)); for "
                "a mask of windows, use take."
            )
        chosen = np.isin(self.machine, machines)
        if not np.any(chosen):
            raise ValueError(
                f"None of the machines {machines.tolist()} has a window here: give "
                f"machine indices, among {np.unique(self.machine).tolist()}."
            )
        return self.take(chosen)


def _rows_of(index: np.ndarray, value: int | np.integer) -> np.ndarray:
    """`[first, stop)`, the rows of the sorted integer `index` that hold
    `value` (none where `value` is beyond `index`'s dtype). The query takes
    `index`'s dtype: a query of another integer type would make
    `np.searchsorted` cast (copy) all of `index` at every call.

    **Raises:** `TypeError` for a `value` that is not an integer."""
    value, bounds = operator.index(value), np.iinfo(index.dtype)
    if not bounds.min <= value <= bounds.max:
        return np.zeros(2, dtype=np.intp)
    query = np.array(value, dtype=index.dtype)
    return np.array([np.searchsorted(index, query, side) for side in ("left", "right")])


def stream_windows(
    streams: SensorStreams,
    window_seconds: float,
    *,
    horizon_seconds: float = 1800.0,
    clock_hz: float | None = None,
    stride_seconds: float | None = None,
    sensors: Sequence[str] | None = None,
    machines: Sequence[int | float | np.integer | str] | None = None,
    fill: float | None = None,
) -> StreamWindows:
    """Cut sensor streams into labelled windows on one slow clock, with a cost
    that follows each sensor's own samples, never their union, and no look-ahead.

    Each window covers `(end - window_seconds, end]` and is cut into `frames =
    window_seconds * clock_hz` frames of `1 / clock_hz` seconds; frame `k`
    covers `(start + (k - 1) / clock_hz, start + k / clock_hz]` and is read at
    its end, time `k / clock_hz` from the window's start. Each sensor gives
    channels from the samples at or before the frame's end only (times are
    compared in float64 on the host, in the streams' seconds):

    - a **fast** continuous sensor (rate above 1.5 clock rates) is summarised
        within each frame by `mean`, `std` (the standard deviation about the
        frame's mean) and `diff_rms` (the root mean square of successive
        differences: the energy above the frame's trend, a high-frequency band);
        NaN where the frame has no sample (or one, for `diff_rms`);
    - a **slow** continuous sensor gives `last`, its last value at or before the
        frame's end (held from before the window where needed; NaN before its
        first sample), and `new`, 1 where a sample arrived in the frame, else 0;
    - an **event** sensor (group in `EVENT_GROUPS`) gives `count`, the events in
        the frame, `sum`, their values' sum, and `since`, the seconds from its
        last event to the frame's end (from the machine's first sample where it
        has had none).

    The channels are ordered sensor by sensor, as `channel_names` lists them.
    The label is 1 where the machine fails within `horizon_seconds` after the
    window's end (`0 <= failure - end <= horizon`), else 0; windows of a machine
    with no failure seen are kept only where `end + horizon_seconds` is within
    its stream (so that 0 is known). No window ends after its machine's
    failure: what a machine logs after it failed (a repair, a restart) is
    another life of it, which `SensorStreams` has one failure time too few to
    label; give it as a machine of its own name.

    **Arguments:**

    - `streams`: a [`ltc_jax.datasets.SensorStreams`][] (or
        [`ltc_jax.datasets.PlantStreams`][]).
    - `window_seconds`: each window's length, in seconds.
    - `horizon_seconds`: the label's horizon, in seconds (default 1800: "fails
        within 30 minutes").
    - `clock_hz`: the slow clock, in hertz, with `window_seconds * clock_hz` a
        whole number of frames; default: the slowest continuous sensor's rate
        (the clock at which every continuous sensor has a sample per frame),
        rounded down to a whole number of frames per window, or up to the next
        where that is within 0.1% (a rate derived from jittery times is a
        little off its nominal value): at most 0.1% faster than the slowest
        sensor.
    - `stride_seconds`: seconds between successive windows' ends (default
        `window_seconds`: windows that do not overlap). The first window of a
        machine ends `window_seconds` after its first sample.
    - `sensors`: the sensors to use, by name (default all).
    - `machines`: the machines to cut, by index (a whole number) or by name
        (default all).
    - `fill`: the value given to a fast sensor with no sample in a whole window,
        or a slow one with no sample up to the window's end (its `mean` or
        `last`; `std` and `diff_rms` 0, `new` 0); default `None`, which refuses
        such a window. A slow sensor whose last sample came before the window
        holds it.

    **Returns:** a [`ltc_jax.datasets.StreamWindows`][], windows ordered by
    machine, then end time.

    **Raises:** `ValueError` naming the problem for a length, clock or stride
    that is not positive and finite, a negative or infinite horizon, a window
    that is not a whole number of frames, a default clock of fewer than two
    frames per window (the slowest sensor named), no sensor, a repeated or unknown
    sensor name, an unknown machine, a machine without samples, a sensor silent
    as `fill` says (unless `fill`; the message names the machine, the sensor
    and the window), or no window at all.
    """
    if not (0 < window_seconds < math.inf and 0 <= horizon_seconds < math.inf):
        raise ValueError(  # NaN too
            "window_seconds must be positive and finite, and horizon_seconds "
            f"finite and at least 0; got {window_seconds} and {horizon_seconds}."
        )
    chosen = _chosen_sensors(streams, sensors)
    continuous = chosen[~streams.is_event[chosen]]
    if clock_hz is None:
        if not continuous.size:
            raise ValueError("With only event sensors, give clock_hz.")
        # The slowest rate, made a whole number of frames per window: rounded
        # down, or up to the next whole frame where that is within 0.1% (a
        # rate read from jittery times is a little off its nominal value), so
        # the clock is at most 0.1% faster than the slowest sensor.
        rates = streams.sensor_rate_hz[continuous]
        slowest = float(np.min(rates))
        exact = window_seconds * slowest
        frames = math.ceil(exact)
        if frames > exact * (1 + _FRAME_SLACK):
            frames = math.floor(exact)
        if frames < 2:  # one frame has no time scale to learn from
            name = streams.sensor_names[continuous[np.argmin(rates)]]
            raise ValueError(
                f"The slowest continuous sensor, {name!r} at {slowest:.3g} Hz, "
                f"samples {exact:.3g} times in a {window_seconds:g} s window, so "
                "the default clock (its rate) would give fewer than two frames "
                "per window: give clock_hz (between its samples a sensor holds "
                "its last value), leave the sensor out (sensors=), or lengthen "
                "the window; a tag of events (alarms at irregular times) is "
                "read as such where event_tags= names it (read_sensor_log's)."
                + _milliseconds_hint(streams.time)
            )
        clock_hz = frames / window_seconds
    stride_seconds = window_seconds if stride_seconds is None else stride_seconds
    if not (0 < clock_hz < math.inf and 0 < stride_seconds < math.inf):
        raise ValueError(
            f"clock_hz and stride_seconds must be positive and finite; got "
            f"{clock_hz} and {stride_seconds}."
        )
    frames = round(window_seconds * clock_hz)
    if frames < 1 or not math.isclose(frames, window_seconds * clock_hz, rel_tol=1e-9):
        raise ValueError(
            f"window_seconds * clock_hz must be a whole number of frames; got "
            f"{window_seconds} s at {clock_hz} Hz = {window_seconds * clock_hz}. "
            "Give a clock_hz that divides the window (or none: the slowest "
            "sensor's rate, rounded to whole frames)."
        )
    machines = _chosen_machines(streams, machines)

    chosen = chosen.tolist()
    kinds = [_kind(streams, s, clock_hz) for s in chosen]
    channel_names, channel_groups = (
        tuple(
            f"{names[s]}:{feature}"
            for s, kind in zip(chosen, kinds, strict=True)
            for feature in _FEATURES[kind]
        )
        for names in (streams.sensor_names, streams.sensor_group)
    )
    offsets = np.arange(frames + 1) / clock_hz - window_seconds  # frame edges
    blocks, machine_of, ends, to_failure = [], [], [], []
    for m in machines:
        first, last = streams.observed_range(m)
        failure = streams.failure_time[m]
        final = last if np.isnan(failure) else min(last, failure)
        end = (
            first
            + window_seconds
            + stride_seconds
            * np.arange(
                math.floor((final - first - window_seconds) / stride_seconds + 1e-9) + 1
            )
        )
        end = end[end <= final]  # none past the stream (rounding of the count)
        if np.isnan(failure):  # censored: keep the windows whose label is known
            end = end[end + horizon_seconds <= last]
        if not end.size:
            continue
        edges = end[:, None] + offsets  # (windows, frames + 1), float64
        features = [
            _features(streams, m, s, kind, edges, first, fill, window_seconds)
            for s, kind in zip(chosen, kinds, strict=True)
        ]
        blocks.append(np.concatenate(features, axis=-1))
        machine_of.append(np.full(end.size, m, dtype=np.int32))
        ends.append(end)
        to_failure.append(failure - end)
    if not blocks:
        raise _NoWindowError(
            f"No window of {window_seconds} s fits in the streams of machines "
            f"{list(machines)}: a window ends at or before its machine's last "
            "sample and its failure, and a machine with no failure seen also "
            f"needs horizon_seconds={horizon_seconds} after each window."
        )
    xs = np.concatenate(blocks)
    to_failure = np.concatenate(to_failure)
    with np.errstate(invalid="ignore"):
        labels = ((to_failure >= 0) & (to_failure <= horizon_seconds)).astype(np.int32)
    ts = np.broadcast_to(np.arange(1, frames + 1) / clock_hz, xs.shape[:2])
    horizon = f"{horizon_seconds:g} s"
    dataset = SequenceDataset(
        ts=np.array(ts),
        xs=xs,
        lengths=np.full(xs.shape[0], frames, dtype=np.int32),
        labels=labels,
        class_names=(f"no failure within {horizon}", f"failure within {horizon}"),
        name=f"{window_seconds:g} s windows at {clock_hz:g} Hz",
    )
    return StreamWindows(
        dataset=dataset,
        machine=np.concatenate(machine_of),
        end_time=np.concatenate(ends),
        time_to_failure=to_failure,
        channel_names=channel_names,
        channel_groups=channel_groups,
        clock_hz=float(clock_hz),
        horizon_seconds=float(horizon_seconds),
    )


_FEATURES = {
    "fast": ("mean", "std", "diff_rms"),
    "slow": ("last", "new"),
    "event": ("count", "sum", "since"),
}


def _whole_indices(given, name: str) -> np.ndarray:
    """`given` (any array-like of whole numbers: integers, whole floats, or
    objects that are) as an integer array: an integer array as it is (no
    copy), anything else as `int64`.

    **Raises:** `ValueError` naming `name` for anything else (a fraction, a
    bool, NaN)."""
    given = np.asarray(given)
    if given.dtype.kind in "iu":
        return given
    if given.dtype.kind == "O":
        try:
            given = given.astype(np.float64)
        except (TypeError, ValueError):
            pass
    whole = (
        given.dtype.kind == "f"
        and np.all(np.isfinite(given))
        and np.all(given == np.round(given))
    )
    if not whole:
        example = f", e.g. {given.ravel()[0]!r}" if given.size else ""
        raise ValueError(
            f"{name} must hold whole indices; got dtype {given.dtype}{example}."
        )
    return given.astype(np.int64)


def _chosen_machines(streams: SensorStreams, machines) -> list[int]:
    """Machines by index or name, as indices."""
    if machines is None:
        return list(range(streams.machines))
    if isinstance(machines, str):
        raise ValueError(f"machines must be a list; got {machines!r}.")
    index = {name: i for i, name in enumerate(streams.machine_names)}
    chosen = []
    for m in machines:
        if isinstance(m, str) and m in index:
            chosen.append(index[m])
        elif (
            not isinstance(m, str | bool | np.bool_)
            and float(m).is_integer()
            and 0 <= m < streams.machines
        ):
            chosen.append(int(m))
        else:
            raise ValueError(
                f"Unknown machine {m!r}: give an index below {streams.machines} or "
                f"a name, e.g. {list(index)[:5]}."
            )
    return chosen


def _chosen_sensors(streams: SensorStreams, names: Sequence[str] | None) -> np.ndarray:
    if names is None:
        return np.arange(streams.sensors)
    if isinstance(names, str):
        raise ValueError(f"sensors must be a list of names; got {names!r}.")
    names = list(names)
    if not names:
        raise ValueError("sensors names no sensor: give at least one, or None for all.")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"sensors names {repeated} more than once.")
    index = {name: i for i, name in enumerate(streams.sensor_names)}
    unknown = [name for name in names if name not in index]
    if unknown:
        raise ValueError(
            f"Unknown sensors {unknown}; the streams have {len(index)}, e.g. "
            f"{list(index)[:5]}."
        )
    return np.array([index[name] for name in names], dtype=np.int64)


_EPOCH_MILLISECONDS = 1e11
"""Times beyond this many seconds (the year 5138 as Unix seconds) are more
likely milliseconds since the epoch (1.7e12 in 2024)."""


def _milliseconds_hint(time: np.ndarray) -> str:
    """A hint, for a sensor too slow for its window, where the times look
    like Unix milliseconds, which read as seconds make every rate 1000 times
    too slow; else ""."""
    largest = float(np.max(np.abs(time), initial=0.0))
    if largest < _EPOCH_MILLISECONDS:
        return ""
    return (
        f" The times reach {largest:.3g}: if they are milliseconds since the "
        "epoch, give seconds (divide them by 1000)."
    )


def _kind(streams: SensorStreams, sensor: int, clock_hz: float) -> str:
    if streams.is_event[sensor]:
        return "event"
    fast = streams.sensor_rate_hz[sensor] > _FAST_FACTOR * clock_hz
    return "fast" if fast else "slow"


class _NoWindowError(ValueError):
    """`stream_windows`' refusal of streams in which no window fits (a part
    of a plant cut a few machines at a time may have none, where the whole
    has others)."""


_SILENT_ADVICE = "; give fill= to fill such windows"
"""Where the refusal of a window with a silent sensor turns to what to do
(the stream job's `evaluate` and `predict` give their own advice)."""


def _features(streams, machine, sensor, kind, edges, first, fill, window_seconds):
    """One sensor's frame features, `(windows, frames, features)`, from its
    samples at or before each frame's end. The cost follows the sensor's own
    samples (times the windows' overlap), never the other sensors'."""
    times, values = streams.samples(machine, sensor)
    upto = np.searchsorted(times, edges, side="right")  # samples <= each edge
    lo, hi = upto[:, :-1], upto[:, 1:]  # frame k: samples [lo, hi)
    count = (hi - lo).astype(np.float64)
    if kind == "event":
        total = np.r_[0.0, np.cumsum(values)]
        previous = np.r_[first, times][hi]  # the last event at or before the end
        return np.stack([count, total[hi] - total[lo], edges[:, 1:] - previous], -1)

    # Refused (or filled): a fast sensor with no sample in a whole window, a
    # slow one with none at or before the window's end (else its value holds).
    silent = upto[:, -1] == (upto[:, 0] if kind == "fast" else 0)
    if np.any(silent) and fill is None:
        window = int(np.argmax(silent))
        where = "in the" if kind == "fast" else "up to the end of the"
        raise ValueError(
            f"Sensor {streams.sensor_names[sensor]!r} of machine "
            f"{streams.machine_names[machine]!r} has no sample {where} "
            f"{window_seconds:g} s window ending at "
            f"{round(float(edges[window, -1]), 3)!r} s{_SILENT_ADVICE}, leave the "
            "sensor out (sensors=), or, if its samples are events such as "
            "alarms, read it as an event sensor (event_tags=)."
        )
    if kind == "slow":
        held = np.r_[np.nan, values][hi]  # NaN before the first sample
        out = np.stack([held, (count > 0).astype(np.float64)], -1)
        out[silent] = (fill, 0.0)
        return out
    # Each distinct frame once (overlapping windows share frames: a frame's
    # features follow from its samples [lo, hi) alone), its samples gathered,
    # then summed per frame: the deviations from the frame's own mean, so that
    # no offset of the readings cancels.
    span = times.size + 1
    distinct, which = np.unique(lo * span + hi, return_inverse=True)
    first_sample = distinct // span
    counts = distinct % span - first_sample
    frame = np.repeat(np.arange(counts.size), counts)
    position = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    sample = first_sample[frame] + position
    x = values[sample]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(frame, x, counts.size) / counts
        deviation = (x - mean[frame]) ** 2
        variance = np.bincount(frame, deviation, counts.size) / counts
        later = position > 0  # pairs of successive samples within a frame
        steps = (x[later] - values[sample[later] - 1]) ** 2
        diff_ms = np.bincount(frame[later], steps, counts.size) / (counts - 1)
    diff_rms = np.sqrt(np.where(counts > 1, diff_ms, np.nan))
    out = np.stack([mean, np.sqrt(variance), diff_rms], -1)[which.reshape(lo.shape)]
    out[silent] = (fill, 0.0, 0.0)
    return out


def read_sensor_log(
    path: str | os.PathLike,
    *,
    failures: str | os.PathLike | None = None,
    time_column: str = "time",
    tag_column: str = "tag",
    value_column: str = "value",
    machine_column: str | None = "machine",
    event_tags: Sequence[str] = (),
    rates_hz: Mapping[str, float] | None = None,
    tags: Sequence[str] | None = None,
    sensor_groups: Mapping[str, str] | None = None,
) -> SensorStreams:
    """Read sensor streams from the long format a plant historian exports: a CSV
    or Parquet file of one row per sample, (time, tag, value), and optionally
    the machine, in any order across tags.

    Needs pandas (and pyarrow for Parquet): `pip install "ltc_jax[streams]"`.

    **Arguments:**

    - `path`: a `.csv` (or `.csv.gz`) or `.parquet` file.
    - `failures`: a second such file of failures, one row per machine that
        failed, with the columns `machine_column` and `time_column` (times as
        the log gives them: numbers, durations or date-times); machines without
        a row are taken as not failed (censored at their last sample). With
        `machine_column=None`, the time column alone, in at most one row.
    - `time_column`: the sample's time: numbers (seconds, Unix seconds
        included, kept as given), durations (Parquet or pandas timedeltas,
        taken in seconds) or date-times (ISO 8601, or Parquet timestamps; a
        date-time without a zone is taken as UTC, so the log and the failure
        table give every date-time a zone or offset, or none), which become
        seconds since
        the earliest of them, to float64's rounding of the nanoseconds between
        (`time_origin` records it).
    - `tag_column`: the sensor's name (names here, in `machine_column`, in the
        failure table, `event_tags` and `rates_hz` are taken without
        surrounding spaces: tags that differ only by them are one sensor).
    - `value_column`: the reading, a number.
    - `machine_column`: the machine's name, or `None` for a file of one machine.
    - `event_tags`: the tags whose samples are events (alarms): they form the
        group `"event"`; the others are `"continuous"`, or as `sensor_groups`
        says. An event tag that `tags` asks for and the log lacks is an alarm
        that never fired: a sensor without events, with a `UserWarning`
        (reading a run's tags from a new log, say), unless the log has it in
        another case (a misspelling, refused).
    - `sensor_groups`: a continuous tag's group, the kind of sensor it is (e.g.
        `{"TI-101": "temperature", "PI-204": "pressure"}`); default
        `"continuous"`. Sensors of one group are interchangeable: windows
        name each channel's group (`StreamWindows.channel_groups`), by which
        [`ltc_jax.datasets.pool_channels`][] pools them.
    - `rates_hz`: a continuous tag's nominal rate, in hertz; default: one over
        its median interval between samples, over all machines.
    - `tags`: the tags to read; default: every tag of the log. The rows of
        the others are checked as the file's (every value a number, every
        time a time) and otherwise skipped: a new log for a trained model may
        carry tags it never read, some too sparse to have a rate.

    **Returns:** a [`ltc_jax.datasets.SensorStreams`][]: sensors and machines in
    the sorted order of their names.

    **Raises:** `ValueError` naming the file, the row (1-based, in the file's
    order) and the column: a log without rows, a CSV row that does not parse
    (pandas' message, with the file), a missing column, a value or time that
    does not parse or is missing, date-times with a zone beside ones without
    (in the log, or between the log and the failure table), times not strictly
    increasing within a tag of a machine, a failure for a machine the log does
    not have (or two), a continuous tag with fewer than two samples on every
    machine and no rate given, an unknown name in `event_tags`,
    `rates_hz`, `tags` or `sensor_groups`, or a group for an event tag or
    one named as an event group (`EVENT_GROUPS`). `ImportError`
    naming the extra where pandas (or pyarrow) is not installed. A
    `UserWarning` names a machine that fails more than 100 times its log's
    length past its last sample (a failure table in milliseconds beside a log
    in seconds reads so).
    """
    for option, given in (("event_tags", event_tags), ("tags", tags)):
        if isinstance(given, str):
            raise ValueError(f"{option} must be a list of tags; got {given!r}.")
    # Compared as the log's tags are read: without surrounding spaces.
    event_tags = [str(tag).strip() for tag in event_tags]
    rates_hz = {str(tag).strip(): rate for tag, rate in (rates_hz or {}).items()}
    sensor_groups = {
        str(tag).strip(): group for tag, group in (sensor_groups or {}).items()
    }
    frame = _read_table(
        path,
        dict(
            time_column=time_column,
            tag_column=tag_column,
            value_column=value_column,
            machine_column=machine_column,
        ),
    )
    if not len(frame):
        raise ValueError(f"{path}: the log has no rows.")
    labels = _names(frame, tag_column, path)
    machine_labels = (
        _names(frame, machine_column, path)
        if machine_column is not None
        else np.full(len(frame), "0", dtype=object)
    )
    time, origin, zoned = _times(frame, time_column, path)
    # Every machine of the log, whatever tags are read: one without them is
    # refused by name where its windows are cut, not as a stranger to the
    # failure table.
    machine_names, machine = np.unique(machine_labels, return_inverse=True)
    rows = np.arange(len(frame))  # the rows read, by their place in the file
    if tags is not None:
        wanted = [str(tag).strip() for tag in tags]
        if not wanted:
            raise ValueError("tags is empty: give the tags to read, or None for all.")
        # An event tag without rows is an alarm that never fired: read below.
        unknown = sorted(set(wanted) - set(labels) - set(event_tags))
        if unknown:
            present = sorted(set(labels))
            hints = [
                f"{tag!r}: did you mean {close[0]!r}?"
                for tag in unknown
                if (close := _close_tags(tag, present))
            ]
            raise ValueError(
                f"{path} lacks {len(unknown)} of the {len(set(wanted))} tags to "
                f"read, e.g. {unknown[:5]}"
                + (f" ({hints[0]})" if hints else "")
                + f"; its {len(present)} tags include {present[:8]}."
            )
        rows = np.flatnonzero(np.isin(labels, wanted))
    value = _values(frame, value_column, path, rows, labels)
    read = set(labels[rows]) if tags is None else set(wanted)
    silent = sorted((set(event_tags) & read) - set(labels[rows]))
    present = sorted(set(labels))
    for tag in silent:  # a quiet alarm, unless it is a tag of the log's in
        # another case: a misspelling, refused as unknown tags are
        if same := _same_but_case(tag, present):
            raise ValueError(
                f"{path} lacks the event tag {tag!r} (did you mean {same[0]!r}?)."
            )
    if silent:
        hints = [
            f" ({tag!r}: a misspelling of {close[0]!r}?)"
            for tag in silent
            if (close := difflib.get_close_matches(tag, present, n=1))
        ]
        warn(
            f"{path}: the event tag(s) {silent[:5]} have no rows in the log: "
            "read as events that never occur (an alarm that never fired)"
            + (hints[0] if hints else "")
            + "."
        )
    sensor_names = np.array(sorted(set(labels[rows]) | set(silent)), dtype=object)
    sensor = np.searchsorted(sensor_names, labels[rows])
    machine, time = machine[rows], time[rows]

    # Times strictly increasing within each (machine, tag), in file order.
    order = np.lexsort((rows, sensor, machine))
    key = machine[order] * len(sensor_names) + sensor[order]
    backwards = (np.diff(key) == 0) & (np.diff(time[order]) <= 0)
    if np.any(backwards):
        row = int(rows[order[1:][np.argmax(backwards)]])
        raise ValueError(
            f"{path}: row {row + 1}, column {time_column!r}: "
            f"{frame[time_column].iloc[row]!r} is "
            f"not after the previous sample of tag {labels[row]!r}"
            + (f" on machine {machine_labels[row]!r}" if machine_column else "")
            + ": sort the rows by time within each tag, and drop repeated times."
        )
    names = [str(name) for name in sensor_names]
    for option, given in (
        ("event_tags", event_tags),
        ("rates_hz", rates_hz),
        ("sensor_groups", sensor_groups),
    ):
        unknown = sorted(set(given) - set(names))
        if unknown:
            among = " among the tags read (tags=)" if tags is not None else ""
            raise ValueError(f"{option} names tags {unknown} that {path} lacks{among}.")
    for tag, rate in (rates_hz or {}).items():
        if tag in event_tags or not (math.isfinite(rate) and rate > 0):
            raise ValueError(
                f"rates_hz[{tag!r}] must be a positive rate of a continuous tag; "
                f"got {rate!r}" + (" for an event tag." if tag in event_tags else ".")
            )
    for tag, group in sensor_groups.items():
        if tag in event_tags or group in EVENT_GROUPS:
            raise ValueError(
                f"sensor_groups[{tag!r}] names the kind of a continuous tag, not "
                f"an event group ({', '.join(EVENT_GROUPS)}); got {group!r}"
                + (
                    " for an event tag, which is in group 'event'."
                    if tag in event_tags
                    else "."
                )
            )
    is_event = np.isin(names, list(event_tags))
    rate = _rates(time[order], key, len(names), is_event, names, rates_hz or {}, path)
    failure_time = np.full(len(machine_names), np.nan)
    if failures is not None:
        failed = _read_table(
            failures, dict(machine_column=machine_column, time_column=time_column)
        )
        at, _, _ = _times(failed, time_column, failures, origin, zoned)
        if machine_column is None and len(failed) > 1:
            raise ValueError(
                f"{failures}: {len(failed)} rows, but a log of one machine "
                "(machine_column=None) fails at most once."
            )
        index = {str(name): i for i, name in enumerate(machine_names)}
        named = (
            _names(failed, machine_column, failures)
            if machine_column is not None
            else ["0"] * len(failed)
        )
        for row, name in enumerate(named):
            if name not in index or not np.isnan(failure_time[index[name]]):
                problem = "is not in the log" if name not in index else "fails twice"
                same = _same_number(name, index) if name not in index else None
                raise ValueError(
                    f"{failures}: row {row + 1}, column {machine_column!r}: machine "
                    f"{name!r} {problem}"
                    + (
                        f", which names it {same!r}: write the machines alike in "
                        "both files (integers in one and floats in the other?)."
                        if same
                        else "."
                    )
                )
            failure_time[index[name]] = at[row]
    try:  # the checks of the whole, which name no file
        streams = SensorStreams(
            machine=machine[order],
            sensor=sensor[order],
            time=time[order],
            value=value[order],
            sensor_group=tuple(
                "event" if e else sensor_groups.get(name, "continuous")
                for name, e in zip(names, is_event, strict=True)
            ),
            sensor_rate_hz=rate,
            failure_time=failure_time,
            sensor_names=tuple(names),
            machine_names=tuple(str(name) for name in machine_names),
            time_origin=origin,
        )
    except ValueError as error:
        files = str(path) if failures is None else f"{path} with {failures}"
        raise ValueError(f"{files}: {error}") from None
    if failures is not None:
        _warn_late_failures(streams, failures)
    return streams


_LATE_FAILURE = 100.0
"""A failure more than this many times its machine's logged span past its
last sample is warned about: no horizon a window of that log would use
reaches it, and a failure table in milliseconds beside a log in seconds puts
it about 1,000 times further."""


def _warn_late_failures(streams: SensorStreams, failures) -> None:
    """Warn where a machine fails further past its last sample than
    `_LATE_FAILURE` times its log's span (machines without samples of the tags
    read are not judged): a failure table in another unit than the log
    (milliseconds against seconds) reads so."""
    machines = len(streams.machine_names)
    first, last = np.full(machines, np.inf), np.full(machines, -np.inf)
    np.minimum.at(first, streams.machine, streams.time)
    np.maximum.at(last, streams.machine, streams.time)
    sampled = np.isfinite(first)
    span = np.where(sampled, last - first, 0.0)
    late = (
        sampled
        & np.isfinite(streams.failure_time)
        & (streams.failure_time - np.where(sampled, last, 0.0) > _LATE_FAILURE * span)
    )
    if np.any(late):
        bad = int(np.argmax(late))
        warn(
            f"{failures}: {int(np.sum(late))} machine(s) fail more than "
            f"{_LATE_FAILURE:g} times their log's length past their last "
            f"sample, e.g. {streams.machine_names[bad]!r}, logged from "
            f"{first[bad]:.6g} s to {last[bad]:.6g} s, fails at "
            f"{streams.failure_time[bad]:.6g} s. Are the failure times in the "
            "log's unit (milliseconds against seconds?) and time zone?"
        )


def _same_but_case(tag: str, present: Sequence[str]) -> list[str]:
    """The log's tags equal to `tag` but for case (a historian's `PUMP3.FLOW`
    for `pump3.flow`)."""
    return [name for name in present if name.casefold() == tag.casefold()]


def _close_tags(tag: str, present: Sequence[str]) -> list[str]:
    """The log's tags that `tag` may have meant: those equal to it but for
    case, else the closest by `difflib`."""
    return _same_but_case(tag, present) or difflib.get_close_matches(tag, present, n=1)


def _same_number(name: str, names) -> str | None:
    """The name among `names` that is the number `name` written another way
    (`"1.0"` for `"1"`), or `None`."""

    def number(text):
        try:
            return float(text)
        except ValueError:
            return None

    value = number(name)
    if value is None:
        return None
    return next((other for other in names if number(other) == value), None)


def _read_table(path, columns: Mapping[str, str | None]):
    """A CSV or Parquet file as a pandas frame with `columns`, given by the
    argument that names each (`{"time_column": "time", ...}`; None skipped)."""
    try:
        import pandas as pd
    except ImportError as error:
        raise ImportError(
            'Reading sensor logs needs pandas: pip install "ltc_jax[streams]".'
        ) from error
    name = os.fspath(path).lower()
    if name.endswith((".parquet", ".pq")):
        try:
            frame = pd.read_parquet(path)
        except ValueError as error:  # pyarrow's ArrowInvalid: not Parquet
            raise ValueError(f"{path}: {error}") from error
    elif name.endswith((".csv", ".csv.gz")):
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
            raise ValueError(f"{path}: {error}") from error
    else:
        raise ValueError(f"{path}: give a .csv, .csv.gz or .parquet file.")
    missing = [
        (argument, column)
        for argument, column in columns.items()
        if column is not None and column not in frame.columns
    ]
    if missing:
        argument, column = missing[0]
        raise ValueError(
            f"{path}: no column {column!r} ({argument}= names another); the "
            f"columns are {list(frame.columns)}."
        )
    return frame


def _first_bad(valid: np.ndarray, frame, column, path, text: str):
    row = int(np.argmin(valid))
    raise ValueError(
        f"{path}: row {row + 1}, column {column!r}: {frame[column].iloc[row]!r} {text}."
    )


def _names(frame, column, path) -> np.ndarray:
    """A column of names as strings without surrounding spaces (a historian's
    padded tags); a missing one is refused."""
    names = frame[column]
    stripped = names.astype(str).str.strip()
    valid = (names.notna() & (stripped != "")).to_numpy()
    if not np.all(valid):
        _first_bad(valid, frame, column, path, "is not a name")
    return stripped.to_numpy()


def _numbers(frame, column, path) -> np.ndarray:
    return _values(frame, column, path, np.arange(len(frame)))


def _values(
    frame, column, path, rows: np.ndarray, labels: np.ndarray | None = None
) -> np.ndarray:
    """The values of `column` in the log's `rows` as float64; one that is not
    a finite number is refused, naming its row and, given the rows' `labels`,
    its tag (a tag of text values, such as a digital state, is left out by
    the tags read)."""
    import pandas as pd

    text = frame[column].iloc[rows]
    numbers = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
    valid = np.isfinite(numbers)
    if not np.all(valid):
        row = int(rows[np.argmin(valid)])
        of_tag = "" if labels is None else f" of tag {labels[row]!r}"
        raise ValueError(
            f"{path}: row {row + 1}, column {column!r}: "
            f"{frame[column].iloc[row]!r}{of_tag} is not a finite number"
            + (
                "."
                if labels is None
                else "; a tag of text values (a digital state, say) is left "
                "out by reading the others (tags=)."
            )
        )
    return numbers


def _times(
    frame, column, path, origin: str | None = None, zoned: bool | None = None
) -> tuple[np.ndarray, str, bool | None]:
    """Seconds as float64, their origin and whether they carry a time zone:
    numbers as given (origin "", zone `None`), or date-times as seconds since
    the earliest (or since `origin`, for a second table of the same log, whose
    date-times must carry a zone where the log's do: `zoned`), to float64's
    rounding of the nanoseconds between. Date-times with a zone and without
    one are not mixed: a time without one is taken as UTC, which would shift
    it by the other times' offset."""
    import pandas as pd

    values = frame[column]
    if pd.api.types.is_timedelta64_dtype(values):  # durations, in seconds
        if origin:
            raise ValueError(
                f"{path}: column {column!r} holds durations, but the log's times "
                f"are date-times (from {origin}): give date-times here too."
            )
        seconds = values.dt.total_seconds().to_numpy(np.float64)
        valid = np.isfinite(seconds)
        if not np.all(valid):
            _first_bad(valid, frame, column, path, "is not a duration")
        return seconds, "", None
    if origin is None and not pd.api.types.is_datetime64_any_dtype(values):
        # The log itself: numbers if most times are (a bad one is named below).
        parsed = pd.to_numeric(values, errors="coerce")
        origin = "" if parsed.notna().mean() > 0.5 else None
    if origin == "":
        if (
            zoned is None  # the log's times are numbers, and these date-times
            and len(values)
            and (
                pd.api.types.is_datetime64_any_dtype(values)
                or (
                    pd.to_numeric(values, errors="coerce").isna().all()
                    and pd.to_datetime(
                        values, errors="coerce", utc=True, format="ISO8601"
                    )
                    .notna()
                    .any()
                )
            )
        ):
            raise ValueError(
                f"{path}: column {column!r} holds date-times, but the log's "
                "times are numbers: give numbers here too, in the log's unit."
            )
        return _numbers(frame, column, path), "", None
    if (
        len(values)
        and not pd.api.types.is_datetime64_any_dtype(values)
        and pd.to_numeric(values, errors="coerce").notna().all()
    ):
        raise ValueError(
            f"{path}: column {column!r} holds numbers, but the log's times are "
            f"date-times (from {origin}): give date-times here too."
        )
    stamps = pd.to_datetime(values, errors="coerce", utc=True, format="ISO8601")
    valid = stamps.notna().to_numpy()
    if not np.all(valid):
        _first_bad(valid, frame, column, path, "is not a date-time")
    has_zone = _has_zone(values)
    expected = has_zone[0] if zoned is None and len(has_zone) else zoned
    if np.any(has_zone != expected):
        row = int(np.argmax(has_zone != expected))
        given = "has a" if has_zone[row] else "has no"
        unlike = "the log's times" if zoned is not None else "row 1"
        raise ValueError(
            f"{path}: row {row + 1}, column {column!r}: "
            f"{frame[column].iloc[row]!r} {given} time zone, unlike {unlike}: "
            "a date-time without a zone is read as UTC, which would shift it by "
            "the others' offset. Give every date-time a zone, or none."
        )
    ns = stamps.dt.tz_localize(None).to_numpy("datetime64[ns]").astype(np.int64)
    zero = pd.Timestamp(origin).value if origin else int(ns.min())
    seconds = (ns - zero) / 1e9
    origin = origin or pd.Timestamp(zero, tz="UTC").isoformat()
    return seconds, origin, bool(expected) if len(has_zone) else zoned


def _has_zone(values) -> np.ndarray:
    """`bool[n]`: whether each date-time (a string, a timestamp, or a column of
    timestamps) names its time zone or offset."""
    import pandas as pd

    if pd.api.types.is_datetime64_any_dtype(values):
        return np.full(len(values), getattr(values.dt, "tz", None) is not None)
    text = values.astype(str).str.strip()
    # A zone or offset after the time of day, extended or basic format
    # ("12:00:00+02:00", "120000+0200", "12Z"); a date alone, "2024-05-01",
    # has none: its "-01" is the day.
    zone = (
        r"[T ]\d{2}(?::?\d{2}(?::?\d{2}(?:[.,]\d+)?)?)?\s*"
        r"(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$"
    )
    zoned = text.str.contains(zone, regex=True).to_numpy(bool)
    if values.dtype == object:  # timestamps given as objects
        stamps = [isinstance(v, pd.Timestamp) and v.tzinfo is not None for v in values]
        zoned |= np.array(stamps, dtype=bool)
    return zoned


def _rates(time, key, sensors, is_event, names, given, path) -> np.ndarray:
    """Each continuous tag's rate: given, or one over its median interval."""
    same = np.diff(key) == 0
    gaps, owner = np.diff(time)[same], (key[1:][same] % sensors)
    rate = np.full(sensors, np.nan)
    for s in np.flatnonzero(~is_event):
        if names[s] in given:
            rate[s] = given[names[s]]
            continue
        mine = gaps[owner == s]
        if not mine.size:
            raise ValueError(
                f"{path}: tag {names[s]!r} has fewer than two samples on every "
                "machine, so its rate is unknown; give it in rates_hz."
            )
        rate[s] = 1.0 / np.median(mine)
    return rate
