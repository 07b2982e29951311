"""Reader for the UEA/UCR (sktime) `.ts` time-series format.

A `.ts` file holds `#` comment lines, `@` header lines (`@problemName`,
`@timeStamps`, `@missing`, `@univariate`, `@dimensions`, `@equalLength`,
`@seriesLength`, `@classLabel`, `@targetLabel`) and, after `@data`, one line per
series: the channels separated by `:`, each channel's values separated by `,`, and
the label last. `?` (or `NaN`) marks a missing value. Format described by Bagnall et
al. (2018) and the sktime/aeon documentation; this reader is independent of both.
"""

import os

import numpy as np

from ._dataset import SequenceDataset


class TSFormatError(ValueError):
    """A `.ts` file does not follow the format; the message names file and line."""


_MISSING = ("?", "nan", "NaN")


def _parse_bool(value: str, where: str) -> bool:
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise TSFormatError(f"{where}: expected true or false, got {value!r}.")
    return lowered == "true"


def read_ts(
    path: str | os.PathLike, *, class_names: tuple[str, ...] | None = None
) -> SequenceDataset:
    """Read a `.ts` file into a padded [`ltc_jax.datasets.SequenceDataset`][].

    Series may have different lengths; they are padded at the end and their
    lengths recorded. Times are the sample index `0, 1, 2, ...` (the format's
    untimestamped variant), so time is measured in samples.

    **Arguments:**

    - `path`: the file.
    - `class_names`: for a test file, the training set's class names: labels are
        then indexed in that order, and a label outside it is an error. Default:
        the file's own `@classLabel` list.

    **Returns:** a `SequenceDataset` (`labels` are class indices for
    `@classLabel true`, float targets for `@targetLabel true`).

    **Raises:** [`ltc_jax.datasets.TSFormatError`][] (a `ValueError`), naming the
    file and line, for: a missing `@data` line; an unknown or malformed header; a
    series with a different number of channels than `@dimensions` (or than the
    first series), channels of unequal length within one series, a non-numeric
    value, a missing label, a label not declared by `@classLabel` (or not in
    `class_names`), or a file with no series. `NotImplementedError` for
    `@timeStamps true`, which this reader does not support.
    """
    path = os.fspath(path)
    header: dict[str, str] = {}
    declared_labels: tuple[str, ...] | None = None
    has_class_label = False
    has_target = False
    in_data = False
    series: list[np.ndarray] = []
    raw_labels: list[str] = []
    channels_expected: int | None = None

    with open(path, encoding="utf-8") as file:
        for lineno, raw in enumerate(file, start=1):
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
                    if "dimensions" in header:
                        try:
                            channels_expected = int(header["dimensions"])
                        except ValueError:
                            raise TSFormatError(
                                f"{path}: @dimensions must be an integer, got "
                                f"{header['dimensions']!r}."
                            ) from None
                    continue
                if tag == "timestamps" and _parse_bool(value, where):
                    raise NotImplementedError(
                        f"{where}: @timeStamps true is not supported; export the "
                        "series without timestamps (one value per sample)."
                    )
                if tag == "classlabel":
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
                    "timestamps",
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

            parts = line.split(":")
            if has_class_label or has_target:
                if len(parts) < 2 or not parts[-1].strip():
                    raise TSFormatError(f"{where}: missing label after the last ':'.")
                raw_labels.append(parts[-1].strip())
                parts = parts[:-1]
            if channels_expected is None:
                channels_expected = len(parts)
            if len(parts) != channels_expected:
                raise TSFormatError(
                    f"{where}: {len(parts)} channels, expected {channels_expected}."
                )
            values = []
            for channel, text in enumerate(parts):
                try:
                    values.append(
                        [
                            np.nan if v.strip() in _MISSING else float(v)
                            for v in text.split(",")
                        ]
                    )
                except ValueError:
                    raise TSFormatError(
                        f"{where}: channel {channel} holds a non-numeric value."
                    ) from None
            lengths = {len(v) for v in values}
            if len(lengths) != 1:
                raise TSFormatError(
                    f"{where}: channels of one series have different lengths "
                    f"{sorted(lengths)}."
                )
            series.append(np.asarray(values, dtype=np.float64).T)  # (length, channels)

    if not in_data:
        raise TSFormatError(f"{path}: no @data line; is this a .ts file?")
    if not series:
        raise TSFormatError(f"{path}: no series after @data (empty dataset).")

    n = len(series)
    times = max(s.shape[0] for s in series)
    xs = np.zeros((n, times, channels_expected))
    lengths = np.array([s.shape[0] for s in series], dtype=np.int32)
    for i, s in enumerate(series):
        xs[i, : s.shape[0]] = s
    ts = np.broadcast_to(np.arange(times, dtype=np.float64), (n, times)).copy()

    if has_class_label:
        names = class_names if class_names is not None else declared_labels
        index = {name: i for i, name in enumerate(names)}
        labels = np.empty(n, dtype=np.int32)
        for i, label in enumerate(raw_labels):
            if label not in index:
                source = (
                    "the training set" if class_names is not None else "@classLabel"
                )
                raise TSFormatError(
                    f"{path}: series {i} has label {label!r}, which {source} does not "
                    f"declare ({', '.join(names)})."
                )
            labels[i] = index[label]
        names = tuple(names)
    elif has_target:
        try:
            labels = np.asarray([float(v) for v in raw_labels])[:, None]
        except ValueError:
            raise TSFormatError(
                f"{path}: a @targetLabel value is not numeric."
            ) from None
        names = ()
    else:
        raise TSFormatError(
            f"{path}: neither '@classLabel true' nor '@targetLabel true'; a labelled "
            "dataset is needed for training."
        )
    return SequenceDataset(
        ts=ts,
        xs=xs,
        lengths=lengths,
        labels=labels,
        class_names=names,
        name=os.path.basename(path),
    )
