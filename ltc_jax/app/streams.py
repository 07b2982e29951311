"""The stream job's data: a simulated plant or a historian's log cut into labelled
windows on a slow clock, split by machine, and a finished stream run's windows
of a new log."""

import collections
import dataclasses
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ltc_jax.datasets import (
    POOL_STATISTICS,
    PlantStreams,
    SensorStreams,
    SequenceDataset,
    StreamWindows,
    channel_statistics,
    concatenate,
    pool_channels,
    read_sensor_log,
    simulate_plant,
    standardize_with,
    stream_windows,
)

from .._warn import warn
from ..datasets._streams import (
    _FAST_FACTOR as FAST_FACTOR,
    _SILENT_ADVICE,
    _NoWindowError,
)
from .config import LOG_COLUMNS, StreamConfig


SIMULATED_AT_ONCE = 6
"""Machines of the simulated plant simulated at once by the stream job, whose
samples are dropped once cut into windows: at 200 sensors a machine's last
hour is 9.7 million samples (233 MB), and a plant of 48 such machines,
simulated whole, needs about twice its 11 GB at its peak."""


def log_columns(config: StreamConfig) -> dict[str, str]:
    """`read_sensor_log`'s column arguments (`time_column`, ...) for the
    config's `log_columns`: each column's name, by default its own."""
    return {
        f"{column}_column": config.log_columns.get(column, column)
        for column in LOG_COLUMNS
    }


def read_streams(config: StreamConfig) -> SensorStreams:
    """The streams a config names: `config.log` with its failure table, or the
    simulated plant (`config.machines` machines of `config.sensors` sensors,
    seeded by `config.seed`, each its last `config.simulated_seconds` before it
    fails)."""
    if config.log is not None:
        return read_sensor_log(
            config.log,
            failures=config.failures,
            event_tags=config.event_tags,
            tags=config.tags or None,
            rates_hz=config.rates_hz,
            sensor_groups=config.sensor_groups,
            **log_columns(config),
        )
    return simulate_plant(
        config.machines,
        config.sensors,
        seed=config.seed,
        simulated_seconds=config.simulated_seconds,
    )


def simulated_chunks(
    machines: range,
    sensors: int,
    *,
    seed: int,
    simulated_seconds: float,
    at_once: int = SIMULATED_AT_ONCE,
) -> Iterator[tuple[int, PlantStreams]]:
    """The simulated plant's `machines` (a range of its machine indices),
    `at_once` at a time: each chunk's first index and its
    [`ltc_jax.datasets.PlantStreams`][] (`simulate_plant(first_machine=...)`:
    the machines of the whole plant, their `machine` column counting from 0
    within the chunk), simulated only once the caller asks for it, so that a
    caller that drops each chunk when done holds one at a time.

    **Arguments:** `sensors` per machine, `seed` (of the whole plant) and
    `simulated_seconds` (each machine's last seconds before it fails), as
    [`ltc_jax.datasets.simulate_plant`][] takes them; `at_once`: machines per
    chunk (default `SIMULATED_AT_ONCE`, 6: at 200 sensors a chunk's last hour
    is about 58 million samples, 1.4 GB).

    **Raises:** `ValueError` for `at_once` below 1, or as
    [`ltc_jax.datasets.simulate_plant`][]."""
    if at_once < 1:
        raise ValueError(f"at_once must be at least 1; got {at_once}.")
    for first in range(machines.start, machines.stop, at_once):
        yield (
            first,
            simulate_plant(
                min(at_once, machines.stop - first),
                sensors,
                seed=seed,
                simulated_seconds=simulated_seconds,
                first_machine=first,
            ),
        )


def read_windows(config: StreamConfig) -> tuple[SensorStreams, StreamWindows]:
    """The streams a config names and their windows (`cut_windows`).

    A log is read whole (`read_streams`). The simulated plant is simulated
    `SIMULATED_AT_ONCE` machines at a time (`simulated_chunks`), each chunk cut
    into windows and its samples dropped, so that memory follows the windows,
    not the samples; the windows are the whole plant's, machine by machine,
    and the streams returned are its sensors and machines without samples.

    **Raises:** as `read_streams` and `cut_windows`; for the simulated plant,
    `ValueError` where no machine's stream holds a window (naming
    --window-seconds)."""
    if config.log is not None:
        streams = read_streams(config)
        return streams, cut_windows(config, streams)
    parts, failure_times, machine_names = [], [], []
    chunks = simulated_chunks(
        range(config.machines),
        config.sensors,
        seed=config.seed,
        simulated_seconds=config.simulated_seconds,
    )
    for first, plant in chunks:
        failure_times.append(plant.failure_time)
        machine_names += plant.machine_names
        sensors = {
            name: getattr(plant, name)
            for name in ("sensor_group", "sensor_rate_hz", "sensor_names")
        }
        try:
            windows = cut_windows(config, plant)
        except _NoWindowError:  # no machine of the chunk lives a window long:
            windows = None  # passed over, as the whole plant passes them over
        del plant  # the chunk's samples, before the next chunk's
        if windows is not None:
            parts.append(dataclasses.replace(windows, machine=windows.machine + first))
    if not parts:
        raise ValueError(
            f"No window of {config.window_seconds:g} s fits in the stream of any "
            f"of the {config.machines} simulated machines (each "
            f"{config.simulated_seconds:g} s at most, up to its failure): give a "
            "shorter --window-seconds."
        )
    windows = dataclasses.replace(
        parts[0],
        dataset=concatenate([part.dataset for part in parts]),
        **{
            name: np.concatenate([getattr(part, name) for part in parts])
            for name in ("machine", "end_time", "time_to_failure")
        },
    )
    empty = np.zeros(0, dtype=np.int32)
    streams = SensorStreams(
        machine=empty,
        sensor=empty,
        time=np.zeros(0),
        value=np.zeros(0),
        failure_time=np.concatenate(failure_times),
        machine_names=machine_names,
        **sensors,
    )
    return streams, windows


def cut_windows(
    config: StreamConfig,
    streams: SensorStreams,
    *,
    clock_hz: float | None = None,
    sensors: list[str] | None = None,
    horizon_seconds: float | None = None,
) -> StreamWindows:
    """`streams` cut into windows as `config` says (window, stride, horizon,
    clock, fill), with `clock_hz`, `sensors` and `horizon_seconds` overriding
    the config's where given (a finished run's clock and sensors)."""
    return stream_windows(
        streams,
        config.window_seconds,
        horizon_seconds=config.horizon_seconds
        if horizon_seconds is None
        else horizon_seconds,
        clock_hz=config.clock_hz if clock_hz is None else clock_hz,
        stride_seconds=config.stride_seconds or config.window_seconds / 5,
        sensors=sensors,
        fill=config.fill,
    )


def warn_windowless(
    config: StreamConfig,
    streams: SensorStreams,
    windows: StreamWindows,
    source: str,
    labelled: bool,
) -> None:
    """Warn, naming `source` (the option that gave the log), where machines of
    `streams` have no window in `windows`: too short a stream for one, which
    `stream_windows` passes over."""
    cut = set(windows.machine.tolist())
    skipped = [m for i, m in enumerate(streams.machine_names) if i not in cut]
    if not skipped:
        return
    need = f"{config.window_seconds:g} s of samples (a window)"
    if labelled:
        need += (
            " before its failure, or, where none is seen, "
            f"{config.window_seconds + config.horizon_seconds:g} s (a window and the "
            "label's horizon)"
        )
    warn(
        f"{source}: no window for {len(skipped)} of its {streams.machines} machines "
        f"(e.g. {skipped[:3]}), which are left out: each needs {need}."
    )


VALIDATION_MACHINES = 1 / 6
"""The share of the training machines the stream job holds out to choose the
epoch on, where none is given."""


def split_machines(
    config: StreamConfig, windows: StreamWindows
) -> tuple[list[int], list[int], list[int], dict[str, Any]]:
    """The training, validation and test machines (indices), drawn with
    `config.seed`: `config.test_fraction` of the machines with windows tested
    (rounded, at least one, and at least one left to train), and of the rest
    `config.validation_fraction` (rounded, at least one where it is positive,
    and at least one left to train) to choose the epoch on. Where it is not
    given, `VALIDATION_MACHINES` of them, at least one, where three or more
    remain: a machine's windows overlap and share its wear, so a share of
    windows would validate on the machines it trains on (on the simulated
    plant the LTC fits its training machines within a few epochs;
    `benchmarks.streams`). **Returns:** the three lists and the `derived`
    record of the validation share.

    **Raises:** `ValueError` for fewer than two machines with windows, or a
    positive validation share of a single training machine."""
    present = np.unique(windows.machine)
    if present.size < 2:
        raise ValueError(
            f"{present.size} machine(s) have windows; machines are the unit of "
            "the train/test split, so at least two are needed."
        )
    order = np.random.default_rng(config.seed).permutation(present).tolist()
    tested = min(max(round(config.test_fraction * len(order)), 1), len(order) - 1)
    test, rest = order[:tested], order[tested:]
    share, reason = config.validation_fraction, "given"
    if share is None:
        share = VALIDATION_MACHINES if len(rest) >= 3 else 0.0
        reason = (
            f"{share:.3g} of the training machines, rounded, at least one: whole "
            "machines, as in the test split, since a machine's windows overlap "
            "and share its wear"
            if share
            else "fewer than 3 training machines: none held out"
        )
    held = min(max(round(share * len(rest)), 1), len(rest) - 1) if share else 0
    if share and not held:
        raise ValueError(
            f"--validation-fraction {share:g} holds out whole machines, but one "
            "machine is left to train after the test split: give 0, or more "
            "machines."
        )
    return (
        sorted(rest[held:]),
        sorted(rest[:held]),
        sorted(test),
        # The share of whole machines, to 4 digits (it rounds back to `held`).
        dict(
            value=round(held / len(rest), 4), reason=f"{reason}; {held} of {len(rest)}"
        ),
    )


def sensor_pooling(config: StreamConfig, windows: StreamWindows) -> dict[str, Any]:
    """Whether the model reads each sensor group pooled across its sensors
    (`value` `"groups"`) or each sensor's own channels (`"none"`), with the
    `reason`: `config.sensor_pooling` where given; otherwise groups where
    `config.sensor_groups` names a log's kinds (naming them has no other use),
    or on the simulated plant, whose kinds are known, where pooling gives fewer
    channels than the sensors' own (a group of one sensor gives four channels
    where one would do, so a small plant is read per sensor); none on a log
    whose kinds are not named (pooling all its continuous tags as one group
    would mix kinds).

    On the simulated plant, pooling lifted the stream job's LTC in each of 12
    runs at 20, 50, 100 and 200 sensors (`benchmarks.streams`, the docs'
    "Sensor streams" page)."""
    if config.sensor_pooling is not None:
        return dict(value=config.sensor_pooling, reason="--sensor-pooling")
    if config.sensor_groups:
        return dict(value="groups", reason="--sensor-groups names the kinds to pool")
    if config.log is not None:
        return dict(
            value="none",
            reason="the log's kinds are not known (--sensor-groups names them)",
        )
    own = len(windows.channel_names)
    pooled = len(POOL_STATISTICS) * len(set(windows.channel_groups))
    return dict(
        value="groups" if pooled < own else "none",
        reason=f"the simulated plant's sensors give {pooled} channels pooled by "
        f"kind, {own} each on its own",
    )


def load_stream_data(config: StreamConfig) -> dict[str, Any]:
    """The stream job's data, as `load_data` gives a `.ts` pair's: `train`,
    `validation` (`None` without a share) and `test` windows of their machines,
    standardised with the training windows' statistics (`statistics`), the
    `validation_fraction` record, the `sensor_pooling` record (the choice of
    [`ltc_jax.app.streams.sensor_pooling`][] and its reason), and `stream`:
    what reading a new log for the run needs (the clock, the sensors by name
    and which are events, the channel names), the slowest continuous sensor
    (`slowest_sensor`, its name, and `slowest_rate_hz`), which sets the
    default clock, and the machines of each part, by name. Where the pooling
    is `"groups"`, each part's channels are standardised, pooled
    by sensor group (`pool_windows`) and standardised again: `statistics` are
    the pooled channels', and `stream` records the groups and the first
    statistics as `channel_groups`, `channel_mean` and `channel_std`, and
    each group's number of sensors as `sensor_group_sizes`.

    **Raises:** the errors of [`ltc_jax.datasets.read_sensor_log`][] and
    [`ltc_jax.datasets.stream_windows`][]; `ValueError` from `split_machines`.
    """
    streams, windows = read_windows(config)
    if config.log is not None:
        warn_windowless(config, streams, windows, f"--log {config.log}", True)
    train, validation, test, share = split_machines(config, windows)
    parts = {
        name: windows.of_machines(machines).dataset if machines else None
        for name, machines in (
            ("train", train),
            ("validation", validation),
            ("test", test),
        )
    }
    statistics = channel_statistics(parts["train"])
    pooling = sensor_pooling(config, windows)
    pooled = {}
    if pooling["value"] == "groups":
        parts = {
            name: None
            if part is None
            else pool_windows(part, windows.channel_groups, statistics)
            for name, part in parts.items()
        }
        mean, std = statistics
        pooled = dict(
            sensor_group_sizes=dict(collections.Counter(streams.sensor_group)),
            channel_groups=list(windows.channel_groups),
            channel_mean=mean.tolist(),
            channel_std=std.tolist(),
        )
        statistics = channel_statistics(parts["train"])
    names = np.asarray(streams.machine_names)
    continuous = np.flatnonzero(~streams.is_event)
    slowest = {}
    if continuous.size:  # the sensor whose rate sets the default clock
        k = continuous[np.argmin(streams.sensor_rate_hz[continuous])]
        slowest = dict(
            slowest_sensor=streams.sensor_names[k],
            slowest_rate_hz=float(streams.sensor_rate_hz[k]),
        )
    return dict(
        **{
            name: None if part is None else standardize_with(part, *statistics)
            for name, part in parts.items()
        },
        statistics=statistics,
        validation_fraction=share,
        sensor_pooling=pooling,
        stream=dict(
            clock_hz=windows.clock_hz,
            sensors=list(streams.sensor_names),
            event_sensors=[
                name
                for name, event in zip(
                    streams.sensor_names, streams.is_event, strict=True
                )
                if event
            ],
            channel_names=list(windows.channel_names),
            **slowest,
            **pooled,
            machines={
                name: names[machines].tolist()
                for name, machines in (
                    ("train", train),
                    ("validation", validation),
                    ("test", test),
                )
            },
        ),
    )


def pool_windows(
    data: SequenceDataset,
    channel_groups: Sequence[str],
    statistics: Sequence[ArrayLike],
) -> SequenceDataset:
    """Windows `data` standardised channel by channel with `statistics`
    (`(mean, std)`, the training windows'), then pooled by sensor group
    (`channel_groups`, [`ltc_jax.datasets.pool_channels`][]): sensors with
    other offsets or units compare once standardised."""
    return pool_channels(standardize_with(data, *statistics), channel_groups)


def _other_channels(
    stream: dict[str, Any], channel_names: Sequence[str], streams: SensorStreams
) -> str:
    """Why a new log's windows give other channels than a run's: the first
    sensor whose channels differ (`sensor:feature` names), with its rate in
    the log against the clock's fast/slow line."""

    def features(names: Sequence[str]) -> dict[str, list[str]]:
        by_sensor: dict[str, list[str]] = collections.defaultdict(list)
        for name in names:
            sensor, _, feature = name.rpartition(":")
            by_sensor[sensor].append(feature)
        return by_sensor

    run, log = features(stream["channel_names"]), features(channel_names)
    sensor = next(
        (name for name in run if run[name] != log.get(name)),
        next(iter(set(log) - set(run)), None),
    )
    if sensor is None or sensor not in streams.sensor_names:
        return (
            "its sensors give other channels than the run's; the run reads "
            f"{stream['channel_names'][:6]}..., the log gives "
            f"{list(channel_names)[:6]}...."
        )
    rate = streams.sensor_rate_hz[streams.sensor_names.index(sensor)]
    line = FAST_FACTOR * stream["clock_hz"]
    return (
        f"sensor {sensor!r} gives the channels {log.get(sensor, [])} here and "
        f"{run.get(sensor, [])} in the run: at {rate:.4g} Hz in this log it is "
        f"on the other side of the clock's fast/slow line ({line:.4g} Hz, "
        f"{FAST_FACTOR} times the run's clock) from where it was in training. "
        "Give the log that sensor at its training rate, or train a run without "
        "it (--tags)."
    )


def read_windows_for_run(
    config: StreamConfig,
    stream: dict[str, Any],
    path: str,
    failures: str | None,
    class_names: Sequence[str],
) -> tuple[StreamWindows, tuple[str, ...], str]:
    """A new log's windows as a finished stream run cut its own: its clock,
    sensors (by name, in its order; the log's other tags are skipped), window,
    stride and fill; labelled with
    `failures` where given, and otherwise every window (labels 0, unused);
    its classes are the run's `class_names` either way; for a run that pooled
    its sensor groups, the windows' dataset is pooled as the run's was
    (`pool_windows`, with the run's groups and channel statistics, whatever
    groups the log's reading gives).
    **Returns:** the windows, the log's machine names (by index) and its
    `time_origin` (empty where its times are numbers).

    **Raises:** `ValueError` if the log lacks one of the run's sensors (named),
    or its sensors give other channels (a rate on the other side of the clock's
    fast/slow line), or as [`ltc_jax.datasets.read_sensor_log`][] and
    `stream_windows`.
    """
    # The run's sensors alone (the log may carry others), at the rates it
    # read them at where it was given them.
    given = {t: r for t, r in config.rates_hz.items() if t in stream["sensors"]}
    try:
        streams = read_sensor_log(
            path,
            failures=failures,
            event_tags=stream["event_sensors"],
            tags=stream["sensors"],
            rates_hz=given,
            **log_columns(config),
        )
    except ValueError as error:  # a column named by the run, not by an option
        message = re.sub(
            r" \((\w+)_column= names another\)",
            lambda match: (
                f", which the run reads its {match[1]}s from: rename the file's column"
            ),
            str(error),
        )
        if message == str(error):
            raise
        raise ValueError(message) from None
    try:
        windows = cut_windows(
            config,
            streams,
            clock_hz=stream["clock_hz"],
            sensors=stream["sensors"],
            horizon_seconds=None if failures is not None else 0.0,
        )
    except ValueError as error:  # the library's advice is for a new run
        problem, advice, _ = str(error).partition(_SILENT_ADVICE)
        if not advice:
            raise
        raise ValueError(
            f"--data {path}: {problem}. The run was trained without --fill, so "
            "it reads only windows in which each of its sensors reports: give "
            "the log that sensor's samples, or train a run with --fill (or "
            "without the sensor, --tags)."
        ) from None
    warn_windowless(config, streams, windows, f"--data {path}", failures is not None)
    if list(windows.channel_names) != stream["channel_names"]:
        raise ValueError(
            f"--data {path}: " + _other_channels(stream, windows.channel_names, streams)
        )
    dataset = dataclasses.replace(windows.dataset, class_names=tuple(class_names))
    if "channel_groups" in stream:  # pooled by the run's sensor groups
        dataset = pool_windows(
            dataset,
            stream["channel_groups"],
            (stream["channel_mean"], stream["channel_std"]),
        )
    return (
        dataclasses.replace(windows, dataset=dataset),
        tuple(streams.machine_names),
        streams.time_origin,
    )
