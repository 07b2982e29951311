"""Reader for the UEA/UCR (sktime) `.ts` time-series format.

A `.ts` file holds `#` comment lines, `@` header lines (`@problemName`,
`@timeStamps`, `@missing`, `@univariate`, `@dimensions`, `@equalLength`,
`@seriesLength`, `@classLabel`, `@targetLabel`) and, after `@data`, one line per
series: the channels separated by `:`, each channel's values separated by `,`
(`(timestamp,value)` pairs under `@timeStamps true`), and the label last (none
under `@classLabel false`). `?` (or `NaN`) marks a missing value. Format described
by Bagnall et al. (2018) and the sktime/aeon documentation; this reader is
independent of both.
"""

import datetime
import os
import re

import numpy as np

from ._dataset import UNLABELLED, SequenceDataset, pad_sequences


class TSFormatError(ValueError):
    """A `.ts` file does not follow the format; the message names file and line."""


_MISSING = ("?", "nan", "NaN")


def _parse_bool(value: str, where: str) -> bool:
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise TSFormatError(f"{where}: expected true or false, got {value!r}.")
    return lowered == "true"


def _parse_values(text: str, where: str, channel: int) -> list[float]:
    """One channel of an untimestamped series: values separated by `,`."""
    try:
        return [np.nan if v.strip() in _MISSING else float(v) for v in text.split(",")]
    except ValueError:
        raise TSFormatError(
            f"{where}: channel {channel} holds a non-numeric value."
        ) from None


_PAIR = re.compile(r"\(([^(),]*),([^(),]*)\)")


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _parse_time(text: str, where: str) -> float:
    """A timestamp: a number, or a date-time (ISO 8601, e.g. `2007-01-01
    00:00:00`, with or without a zone: `Z`, `+02:00`; without one, UTC) as
    float seconds since the Unix epoch, from whole microseconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        stamp = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise TSFormatError(
            f"{where}: timestamp {text!r} is neither a number nor an ISO 8601 "
            "date-time."
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return (stamp - _EPOCH) // datetime.timedelta(microseconds=1) / 1e6


def _parse_pairs(text: str, where: str, channel: int) -> dict[float, float]:
    """One channel of a timestamped series: `(timestamp,value)` pairs separated
    by `,`. **Returns:** value by time."""
    text = text.strip()
    pairs = _PAIR.findall(text)
    if not pairs or _PAIR.sub("", text).replace(",", "").strip():
        raise TSFormatError(
            f"{where}: channel {channel} is not a list of (timestamp,value) pairs, "
            "as @timeStamps true requires."
        )
    observed: dict[float, float] = {}
    previous, previous_text = -np.inf, ""
    for time_text, value_text in pairs:
        time = _parse_time(time_text, where)
        if not np.isfinite(time):
            raise TSFormatError(
                f"{where}: channel {channel} has the timestamp {time_text!r}; "
                "every timestamp must be finite."
            )
        if time in observed:
            raise TSFormatError(
                f"{where}: channel {channel} has two values at time {time_text}."
            )
        if time < previous:
            raise TSFormatError(
                f"{where}: channel {channel}'s timestamps are not in increasing "
                f"order: {time_text} follows {previous_text}. Write each "
                "channel's pairs in time order."
            )
        previous, previous_text = time, time_text
        value_text = value_text.strip()
        try:
            observed[time] = np.nan if value_text in _MISSING else float(value_text)
        except ValueError:
            raise TSFormatError(
                f"{where}: channel {channel} holds a non-numeric value."
            ) from None
    return observed


def _merge_channels(
    channels: list[dict[float, float]],
) -> tuple[np.ndarray, np.ndarray]:
    """Channels observed at their own times, on the union of those times (NaN
    where a channel is not observed). **Returns:** `(times, values)` of shapes
    `(length,)` and `(length, channels)`."""
    times = np.unique(np.fromiter((t for c in channels for t in c), np.float64))
    index = {t: i for i, t in enumerate(times.tolist())}
    values = np.full((len(times), len(channels)), np.nan)
    for j, channel in enumerate(channels):
        for time, value in channel.items():
            values[index[time], j] = value
    return times, values


def _utf8_lines(file, path):
    """The lines of a file opened as UTF-8, read as they come.

    **Raises:** `TSFormatError` for bytes that are not UTF-8 (a binary file
    such as Parquet, or text in another encoding)."""
    try:
        yield from file
    except UnicodeDecodeError as error:
        raise TSFormatError(
            f"{path}: is not UTF-8 text, as a .ts file is ({error.reason}); a "
            "binary file, such as Parquet, or text in another encoding?"
        ) from None


def read_ts(
    path: str | os.PathLike,
    *,
    class_names: tuple[str, ...] | None = None,
    num_channels: int | None = None,
    labels: bool = True,
) -> SequenceDataset:
    """Read a `.ts` file into a padded [`ltc_jax.datasets.SequenceDataset`][].

    Series may have different lengths; they are padded at the end and their
    lengths recorded.

    **Times.** Untimestamped files (`@timeStamps false`, the UEA/UCR archives)
    are sampled at the index `0, 1, 2, ...`, so time is measured in samples.
    Timestamped files (`@timeStamps true`) give each channel as
    `(timestamp,value)` pairs, e.g. `(0,1.5),(1.2,2.0),(2.9,?)`, with each
    series' own times. A timestamp is a number (any unit: the times are kept as
    given, in float64, so Unix seconds keep their gaps) or an ISO 8601
    date-time such as `2007-01-01 00:00:00` (read as seconds since the Unix
    epoch; one without a zone, `Z` or an offset such as `+02:00`, is UTC).
    Channels of one series observed at different times are merged onto
    the union of that series' times, with NaN (not observed) where a channel
    has no value at a time. Padding continues each series' times in steps of 1.

    **Labels.** `@classLabel true` (labels are class indices) or
    `@targetLabel true` (labels are float targets, one column): the label is the
    last `:`-separated field of each line. A file declaring `@classLabel false`
    (and no `@targetLabel true`) is unlabelled, for prediction: its lines hold
    only the channels and its labels are `-1` for every series (`int32`), which
    [`ltc_jax.fit`][] and [`ltc_jax.evaluate`][] refuse.

    **Arguments:**

    - `path`: the file.
    - `class_names`: for a test file, the training set's class names: labels are
        then indexed in that order, and a label outside it is an error. Default:
        the file's own `@classLabel` list.
    - `num_channels`: the channels the data must have (e.g. those a trained
        model takes), checked on every series before its label. Default: the
        file's `@dimensions`, or the first series' channels.
    - `labels`: `False` to read a labelled file as unlabelled, for prediction:
        each line's label field is split off and not read (a class that
        `class_names` lacks, or a missing target `?`, is then no error), and
        every label is `-1`, with `class_names` (default `True`: read them).

    **Returns:** a `SequenceDataset` (`labels` are class indices for
    `@classLabel true`, float targets of shape `(n, 1)` for `@targetLabel
    true`, `-1` for an unlabelled file or one read with `labels=False`;
    `class_names` are `class_names`, or the file's own, or empty for
    regression or an unlabelled file read without `class_names`).

    **Raises:** [`ltc_jax.datasets.TSFormatError`][] (a `ValueError`), naming the
    file and line, for: a missing `@data` line; an unknown or malformed header; a
    file declaring neither `@classLabel` nor `@targetLabel`; a series with a
    different number of channels than `num_channels`, `@dimensions` (or the first
    series); a missing label (a labelled line holding only the channels, or an
    empty last field); channels of unequal length within one untimestamped
    series; a non-numeric value or timestamp, a channel of a timestamped file
    that is not `(timestamp,value)` pairs, two values of one channel at one
    time, or one channel's timestamps out of order; a label not declared by
    `@classLabel` (or not in `class_names`); a file that is not UTF-8 text (a
    binary file such as Parquet, or another encoding); or a file with no
    series.
    """
    path = os.fspath(path)
    header: dict[str, str] = {}
    declared_labels: tuple[str, ...] | None = None
    has_class_label: bool | None = None
    has_target = False
    timestamped = False
    in_data = False
    series: list[tuple[np.ndarray | None, np.ndarray]] = []
    raw_labels: list[str] = []
    channels_expected: int | None = None
    labelled = False

    with open(path, encoding="utf-8") as file:
        for lineno, raw in enumerate(_utf8_lines(file, path), start=1):
            line = raw.strip()
            where = f"{path}:{lineno}"
            if not line or line.startswith("#"):
                continue
            if not in_data:
                if not line.startswith("@"):
                    raise TSFormatError(
                        f"{where}: expected a '#' comment or '@' header before @data, "
                        f"got {line[:40]!r}."
                    )
                tag, _, value = line[1:].partition(" ")
                tag = tag.lower()
                value = value.strip()
                if tag == "data":
                    in_data = True
                    labelled = bool(has_class_label) or has_target
                    if has_class_label is None and not has_target:
                        raise TSFormatError(
                            f"{path}: neither @classLabel nor @targetLabel is "
                            "declared; a file without labels declares "
                            "'@classLabel false'."
                        )
                    channels_expected = _declared_channels(header, num_channels, path)
                    continue
                if tag == "timestamps":
                    timestamped = _parse_bool(value, where)
                elif tag == "classlabel":
                    flag, _, names = value.partition(" ")
                    has_class_label = _parse_bool(flag, where)
                    if has_class_label:
                        declared_labels = tuple(names.split())
                        if not declared_labels:
                            raise TSFormatError(
                                f"{where}: @classLabel true must list the class labels."
                            )
                elif tag == "targetlabel":
                    has_target = _parse_bool(value, where)
                elif tag in (
                    "problemname",
                    "missing",
                    "univariate",
                    "dimensions",
                    "equallength",
                    "serieslength",
                ):
                    pass
                else:
                    raise TSFormatError(f"{where}: unknown header @{tag}.")
                header[tag] = value
                continue

            parts = _split_fields(line, timestamped)
            if labelled:
                if (
                    channels_expected is not None
                    and len(parts) == channels_expected
                    and parts[-1].strip() not in (declared_labels or ())
                ):
                    raise TSFormatError(
                        f"{where}: missing label: the line holds {len(parts)} "
                        f"channels and no label, but the file declares "
                        f"{_label_header(has_class_label)}."
                    )
                if len(parts) < 2 or not parts[-1].strip():
                    raise TSFormatError(f"{where}: missing label after the last ':'.")
                if "," in parts[-1]:  # several values: a channel, not a label
                    raise TSFormatError(
                        f"{where}: missing label: the last field holds several "
                        "values, but the file declares "
                        f"{_label_header(has_class_label)}."
                    )
                raw_labels.append(parts[-1].strip())
                parts = parts[:-1]
            if channels_expected is None:
                channels_expected = len(parts)
            if len(parts) != channels_expected:
                raise TSFormatError(
                    f"{where}: {len(parts)} channels, "
                    + (
                        f"the model takes {num_channels}."
                        if num_channels is not None
                        else f"expected {channels_expected}."
                    )
                    + (
                        " (A label column? The file declares no labels.)"
                        if not labelled and len(parts) == channels_expected + 1
                        else ""
                    )
                )
            if timestamped:
                series.append(
                    _merge_channels(
                        [_parse_pairs(text, where, j) for j, text in enumerate(parts)]
                    )
                )
                continue
            values = [_parse_values(text, where, j) for j, text in enumerate(parts)]
            lengths = {len(v) for v in values}
            if len(lengths) != 1:
                raise TSFormatError(
                    f"{where}: channels of one series have different lengths "
                    f"{sorted(lengths)}."
                )
            series.append((None, np.asarray(values, dtype=np.float64).T))

    if not in_data:
        raise TSFormatError(f"{path}: no @data line; is this a .ts file?")
    if not series:
        raise TSFormatError(f"{path}: no series after @data (empty dataset).")

    n = len(series)
    ts, xs, lengths = pad_sequences(
        [np.arange(len(v), dtype=np.float64) if t is None else t for t, v in series],
        [values for _, values in series],
    )

    if not labels or not (has_class_label or has_target):  # for prediction
        return SequenceDataset(
            ts=ts,
            xs=xs,
            lengths=lengths,
            labels=np.full(n, UNLABELLED, dtype=np.int32),
            class_names=tuple(class_names) if class_names is not None else (),
            name=os.path.basename(path),
        )
    if has_class_label:
        names = class_names if class_names is not None else declared_labels
        index = {name: i for i, name in enumerate(names)}
        indices = np.empty(n, dtype=np.int32)
        for i, label in enumerate(raw_labels):
            if label not in index:
                source = (
                    "the training set" if class_names is not None else "@classLabel"
                )
                raise TSFormatError(
                    f"{path}: series {i} has label {label!r}, which {source} does not "
                    f"declare ({', '.join(names)})."
                )
            indices[i] = index[label]
        read, names = indices, tuple(names)
    else:  # @targetLabel true
        read, names = np.empty((n, 1)), ()
        for i, value in enumerate(raw_labels):
            try:
                read[i, 0] = float(value)
            except ValueError:
                raise TSFormatError(
                    f"{path}: series {i} has the @targetLabel value {value!r}, "
                    "which is not a number."
                ) from None
    return SequenceDataset(
        ts=ts,
        xs=xs,
        lengths=lengths,
        labels=read,
        class_names=names,
        name=os.path.basename(path),
    )


def _declared_channels(
    header: dict[str, str], num_channels: int | None, path: str
) -> int | None:
    """The channels every series must have: `num_channels`, which `@dimensions`
    must agree with, or `@dimensions`, or `None` (the first series decides)."""
    declared = None
    if "dimensions" in header:
        try:
            declared = int(header["dimensions"])
        except ValueError:
            raise TSFormatError(
                f"{path}: @dimensions must be an integer, got {header['dimensions']!r}."
            ) from None
    if num_channels is not None and declared not in (None, num_channels):
        raise TSFormatError(
            f"{path}: @dimensions {declared}: {declared} channels, the model takes "
            f"{num_channels}."
        )
    return num_channels if num_channels is not None else declared


def _label_header(has_class_label: bool | None) -> str:
    return "@classLabel true" if has_class_label else "@targetLabel true"


def _split_fields(line: str, timestamped: bool) -> list[str]:
    """A data line's `:`-separated fields; in a timestamped file, colons inside
    `(timestamp,value)` pairs (a date-time's) do not separate fields."""
    if not timestamped:
        return line.split(":")
    fields, depth, start = [], 0, 0
    for i, char in enumerate(line):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == ":" and depth == 0:
            fields.append(line[start:i])
            start = i + 1
    fields.append(line[start:])
    return fields
