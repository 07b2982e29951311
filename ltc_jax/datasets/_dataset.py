"""A labelled set of variable-length sequences, as padded NumPy arrays."""

import dataclasses
import datetime
import numbers
import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from .._times import FIX, time_resolution_problem
from .._warn import warn


UNLABELLED = -1
"""The class index of every sequence of an unlabelled set (new recordings to
predict on)."""

_FEW_CLASSES = 10
"""Float labels holding only the numbers 0 to k - 1, k at most this and each
on two sequences on average, look like class indices given as floats (a
pandas column with a missing value, say), and get a warning that they are
read as regression targets."""


@dataclasses.dataclass(frozen=True)
class SequenceDataset:
    """Variable-length multichannel sequences with one label each, padded to a
    common length. Build one from your own arrays, one per sequence, with
    [`ltc_jax.datasets.SequenceDataset.from_sequences`][].

    **Fields:**

    - `ts`: `float64[n, times]` observation times (padding: continues the grid),
        absolute ones (Unix seconds) included: batches take each sequence's
        times from its start, in float64 (see [`ltc_jax.make_input_path`][]).
    - `xs`: `float64[n, times, channels]` values; NaN marks a missing value; padding
        is 0 and is never read (see `lengths`).
    - `lengths`: `int32[n]`, observations per sequence, in `[1, times]`.
    - `labels`: `int32[n]` class indices (classification) or `float64[n, k]` targets
        (regression).
    - `class_names`: the class label strings, in index order (empty for regression;
        for integer labels without names, `"0"` to the largest label).
    - `name`: a short description, e.g. the file it came from.

    **Raises:** `ValueError` for mismatched shapes, no sequences, labels that
    are neither integers nor floats (strings: use `from_sequences`), an
    infinite value within a sequence's length (NaN marks a missing one; the
    sequence, position and channel named), times that
    are not finite and strictly increasing within a sequence's `lengths` (the
    sequence and position named), or times given in a precision below float64
    that has already rounded the gaps between them (the message names the
    resolution and the smallest gap).
    """

    # Any array-like (lists too) on construction; stored as NumPy arrays.
    ts: np.ndarray | ArrayLike
    xs: np.ndarray | ArrayLike
    lengths: np.ndarray | ArrayLike
    labels: np.ndarray | ArrayLike
    class_names: tuple[str, ...] | list[str] = ()
    name: str = ""

    def __post_init__(self):
        for name in ("ts", "xs", "lengths", "labels"):  # lists and tuples too
            object.__setattr__(self, name, np.asarray(getattr(self, name)))
        object.__setattr__(self, "class_names", tuple(self.class_names))
        if self.xs.ndim != 3:
            raise ValueError(f"xs must be (n, times, channels); got {self.xs.shape}.")
        n = self.xs.shape[0]
        if n == 0:
            raise ValueError(f"{self.name or 'The dataset'} has no sequences.")
        if self.ts.shape != self.xs.shape[:2]:
            raise ValueError(f"ts {self.ts.shape} does not match xs {self.xs.shape}.")
        if self.lengths.shape != (n,) or self.labels.shape[:1] != (n,):
            raise ValueError(
                f"lengths {self.lengths.shape} and labels {self.labels.shape} must "
                f"have {n} rows, like xs."
            )
        if not (
            np.issubdtype(self.labels.dtype, np.integer)
            or np.issubdtype(self.labels.dtype, np.floating)
        ):
            example = self.labels.ravel().tolist()[0] if self.labels.size else None
            raise ValueError(
                f"labels must be int class indices or float regression targets; "
                f"got {self.labels.dtype} (labels such as {example!r}). "
                "SequenceDataset.from_sequences takes class labels of any kind."
            )
        given = self.ts.dtype
        lower = np.issubdtype(given, np.floating) and given != np.float64
        if lower:  # times given in a lower precision were rounded before
            problem = time_resolution_problem(
                self.ts,
                self.lengths,
                given,
                fix=(
                    f"The times were given in {given.name}, so they were "
                    "rounded before they reached ltc_jax, and neither float64 "
                    "nor times relative to each start can restore them: give "
                    "the times in float64 (or integer ticks) from their source, "
                    f"not cast to {given.name}."
                ),
            )
            if problem is not None:
                raise ValueError(problem)
        object.__setattr__(self, "ts", self.ts.astype(np.float64))
        _check_values(self.xs, self.valid_mask())
        try:
            _check_times(self.ts, self.valid_mask())
        except ValueError as error:
            if not lower:
                raise
            largest = float(np.max(np.abs(self.ts[self.valid_mask()])))
            step = float(np.spacing(np.asarray(largest, given)))
            raise ValueError(
                f"{error} The times were given in {given.name}, which resolves "
                f"only steps of {step:.3g} at {largest:.6g}: {FIX}"
            ) from None
        if self.is_classification and not self.class_names:
            # Integer labels without names: the classes are 0 .. max, named so.
            count = int(np.max(self.labels, initial=-1)) + 1
            object.__setattr__(self, "class_names", tuple(map(str, range(count))))

    @classmethod
    def from_sequences(
        cls,
        ts: Sequence[ArrayLike],
        xs: Sequence[ArrayLike],
        labels: Sequence | ArrayLike | None,
        *,
        class_names: Sequence[str | int] | None = None,
        name: str = "",
    ) -> "SequenceDataset":
        """A dataset from one array per sequence, of any lengths: what your own
        recordings usually are.

        **Arguments:**

        - `ts`: `n` arrays of observation times, `(length_i,)`, strictly
            increasing, in any unit (absolute times such as Unix seconds too);
            `datetime64` times (a pandas `DatetimeIndex`, say) become Unix
            seconds and `timedelta64` ones seconds, whatever their resolution;
            so do Python date-times (naive ones read as UTC).
        - `xs`: `n` arrays of values, `(length_i, channels)`, or `(length_i,)`
            for one channel; NaN marks a value not observed.
        - `labels`: `n` class labels of any kind (strings, integers: the classes
            are the distinct labels) or `n` regression targets (floats, or
            `(n, k)` for `k` targets; floats holding only the indices `0`
            to `k - 1` of a few classes get a `UserWarning` that they are
            read as targets); `None` for
            new recordings without labels, to predict on (every class index
            `-1`, `is_labelled` false; training and evaluation refuse such a
            set).
        - `class_names`: the classes in index order, e.g. the training set's
            for a test set (taken as strings, as the labels are); default: the
            distinct labels in their own order (numbers by value, strings
            alphabetically), as strings.
        - `name`: a short description.

        **Returns:** the sequences padded to the longest (padding continues each
        sequence's grid at unit steps and is never read), with `lengths`, and
        class indices into `class_names` (or float targets).

        **Raises:** `ValueError` for lists of different lengths, no sequences,
        a sequence whose times and values differ in length or that is empty,
        times that are not finite and strictly increasing (the sequence and
        position named), float32 times that have rounded the gaps between
        them, date-times with a zone beside ones without, different channel
        counts, an infinite value, a label `None`, a list of labels that mixes
        strings with numbers (an array of them has already made every label a
        string), a label not among
        `class_names`, or `class_names` with float labels (which are targets).
        """
        unlabelled = labels is None
        if unlabelled:
            if len(ts) != len(xs):
                raise ValueError(
                    f"ts and xs must have one entry per sequence; got {len(ts)} "
                    f"and {len(xs)}."
                )
            labels = np.full(len(ts), UNLABELLED, dtype=np.int32)
        if not len(ts) == len(xs) == len(labels):
            raise ValueError(
                f"ts, xs and labels must have one entry per sequence; got "
                f"{len(ts)}, {len(xs)} and {len(labels)}."
            )
        if not len(ts):
            raise ValueError(f"{name or 'The dataset'} has no sequences.")
        times = [_seconds_if_dates(np.asarray(t), i) for i, t in enumerate(ts)]
        given = np.result_type(*(t.dtype for t in times))
        times = [t.astype(np.float64) for t in times]
        values = [np.asarray(x, dtype=np.float64) for x in xs]
        values = [x[:, None] if x.ndim == 1 else x for x in values]
        for i, (t, x) in enumerate(zip(times, values, strict=True)):
            if t.ndim != 1 or not len(t) or x.ndim != 2 or len(x) != len(t):
                raise ValueError(
                    f"Sequence {i}: ts {t.shape} and xs {x.shape} must be (length,) "
                    "and (length, channels) with the same length, at least 1."
                )
        channels = {x.shape[1] for x in values}
        if len(channels) > 1:
            raise ValueError(f"The sequences have different channels: {channels}.")
        padded_ts, padded_xs, lengths = pad_sequences(times, values)
        if np.issubdtype(given, np.floating):  # float32 times: checked as such
            padded_ts = padded_ts.astype(given)
        if unlabelled:
            names = () if class_names is None else tuple(map(str, class_names))
            return cls(padded_ts, padded_xs, lengths, labels, names, name)
        given = [label for label in labels if label is not None]  # None: below
        strings = {isinstance(label, str) for label in given}
        if len(strings) > 1:  # NumPy would make every label a string
            first = next(label for label in given if not isinstance(label, str))
            raise ValueError(
                f"The labels mix strings with other kinds ({first!r}, a "
                f"{type(first).__name__}): give the classes all as strings, or "
                "all as integers."
            )
        labels = np.asarray(labels)
        if np.issubdtype(labels.dtype, np.floating):
            if class_names is not None:  # read as targets, the names would be lost
                raise ValueError(
                    f"class_names {tuple(class_names)} were given with float labels, "
                    "which are regression targets: give the classes as integers "
                    "or strings (labels.astype(int), say)."
                )
            distinct = np.unique(labels[np.isfinite(labels)])
            k = len(distinct)
            if (
                labels.ndim == 1
                and 2 <= k <= _FEW_CLASSES
                and len(labels) >= 2 * k
                and np.array_equal(distinct, np.arange(k))
            ):
                warn(
                    f"The labels are floats holding only the whole numbers "
                    f"{distinct.tolist()}, as class indices would: read as "
                    "regression targets. For classes, give them as integers "
                    "or strings (labels.astype(int), say)."
                )
            targets = labels[:, None] if labels.ndim == 1 else labels
            return cls(padded_ts, padded_xs, lengths, targets, (), name)
        missing = [i for i, label in enumerate(labels.tolist()) if label is None]
        if missing:
            raise ValueError(
                f"Sequence {missing[0]} has no label (None); "
                f"{len(missing)} in all. Leave unlabelled sequences out."
            )
        names = [str(label) for label in labels]
        if class_names is None:  # sorted as the labels are: 2 before 10
            class_names = [str(label) for label in np.unique(labels)]
        class_names = [str(name) for name in class_names]  # 0 and "0" alike
        index = {label: i for i, label in enumerate(class_names)}
        unknown = sorted(set(names) - set(index))
        if unknown:
            raise ValueError(
                f"Labels {unknown} are not among the classes {tuple(class_names)}."
            )
        classes = np.array([index[label] for label in names], dtype=np.int32)
        return cls(padded_ts, padded_xs, lengths, classes, tuple(class_names), name)

    def __len__(self) -> int:
        return self.xs.shape[0]

    @property
    def num_channels(self) -> int:
        """Channels per observation."""
        return self.xs.shape[2]

    @property
    def num_classes(self) -> int:
        """Classes (0 for regression)."""
        return len(self.class_names)

    @property
    def is_labelled(self) -> bool:
        """False for a set read without labels (every class index -1, as
        [`ltc_jax.datasets.read_ts`][] gives for `@classLabel false`)."""
        return not (self.is_classification and np.all(self.labels == -1))

    @property
    def is_classification(self) -> bool:
        """Whether the labels are class indices (else regression targets)."""
        return np.issubdtype(self.labels.dtype, np.integer)

    @property
    def durations(self) -> np.ndarray:
        """`float64[n]`: each sequence's last observation time minus its first, in
        the unit of `ts`."""
        last = self.ts[np.arange(len(self)), self.lengths - 1]
        return (last - self.ts[:, 0]).astype(np.float64)

    def take(self, indices) -> "SequenceDataset":
        """The sequences at `indices` (a NumPy index array), as a new dataset."""
        indices = np.asarray(indices)
        return dataclasses.replace(
            self,
            ts=self.ts[indices],
            xs=self.xs[indices],
            lengths=self.lengths[indices],
            labels=self.labels[indices],
        )

    def valid_mask(self) -> np.ndarray:
        """`bool[n, times]`, True at observed (non-padding) positions."""
        return np.arange(self.ts.shape[1]) < self.lengths[:, None]

    def unobserved_channels(self) -> np.ndarray:
        """`bool[n, channels]`, True where a sequence observes a channel at no
        position of its length (every value NaN)."""
        observed = self.valid_mask()[..., None] & ~np.isnan(self.xs)
        return ~np.any(observed, axis=1)


def _seconds_if_dates(t: np.ndarray, sequence: int) -> np.ndarray:
    """`datetime64` times as Unix seconds, `timedelta64` as seconds (float64),
    whatever their resolution, and Python date-times as Unix seconds too (those
    that carry a zone, as a zone-aware pandas index gives them, in their zone;
    naive ones as UTC, as NumPy reads them); other times as they are.

    **Raises:** `ValueError` naming `sequence` for date-times with a zone
    beside ones without."""
    if t.dtype == object and t.size:
        values = t.ravel().tolist()
        zones = [getattr(v, "tzinfo", None) is not None for v in values]
        if all(zones):
            return np.array([v.timestamp() for v in values]).reshape(t.shape)
        if all(isinstance(v, datetime.datetime) for v in values):
            if any(zones):
                raise ValueError(
                    f"Sequence {sequence}: its date-times mix ones with a time "
                    "zone and ones without; one without is read as UTC, which "
                    "would shift it by the others' offset. Give every date-time "
                    "a zone, or none."
                )
            t = t.astype("datetime64[ns]")  # naive date-times (pandas' ns too): UTC
    if np.issubdtype(t.dtype, np.datetime64):
        t = t - np.datetime64(0, "s")
    if np.issubdtype(t.dtype, np.timedelta64):
        return t / np.timedelta64(1, "s")
    return t


def _check_values(xs: np.ndarray, valid: np.ndarray) -> None:
    """Refuse an infinite value where `valid`, naming the first such sequence,
    position and channel (the solve would refuse it later, without them)."""
    bad = valid[..., None] & np.isinf(xs)
    if bad.any():
        i, j, c = (int(k) for k in np.argwhere(bad)[0])
        raise ValueError(
            f"Sequence {i}: xs holds {float(xs[i, j, c])!r} at position {j}, "
            f"channel {c} ({int(bad.sum())} infinite values in all). NaN marks "
            "a value not observed; an infinity cannot be integrated."
        )


def _check_times(ts: np.ndarray, valid: np.ndarray) -> None:
    """Refuse times that are not finite and strictly increasing where `valid`
    (a dataset's `valid_mask()`), naming the first such sequence and position."""
    bad = valid & ~np.isfinite(ts)
    bad[:, 1:] |= valid[:, 1:] & ~(np.diff(ts, axis=1) > 0)
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        what = f"time {float(ts[i, j])!r} at position {j}"
        if np.isfinite(ts[i, j]):
            what += f", after {float(ts[i, j - 1])!r}"
        raise ValueError(
            f"Sequence {i}: observation times must be finite and strictly "
            f"increasing; it has {what}."
        )


def pad_sequences(
    times: Sequence[np.ndarray], values: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sequences of their own lengths as the padded arrays of a
    [`SequenceDataset`][ltc_jax.datasets.SequenceDataset].

    **Arguments:** `times`: `n` arrays `(length_i,)`, at least one time each;
    `values`: `n` arrays `(length_i, channels)`, the same channels in all.

    **Returns:** `(ts, xs, lengths)`: `ts` `float64[n, longest]`, each row's
    padding continuing its times in steps of 1 (never read); `xs`
    `float64[n, longest, channels]`, padding 0; `lengths` `int32[n]`.
    """
    lengths = np.array([len(t) for t in times], dtype=np.int32)
    longest = int(lengths.max())
    steps = np.arange(1, longest + 1, dtype=np.float64)
    ts = np.stack(
        [np.concatenate([t, t[-1] + steps[: longest - len(t)]]) for t in times]
    )
    xs = np.zeros((len(values), longest, values[0].shape[1]))
    for i, x in enumerate(values):
        xs[i, : len(x)] = x
    return ts, xs, lengths


def concatenate(datasets: Sequence[SequenceDataset]) -> SequenceDataset:
    """The sequences of `datasets`, one set after another: the windows of
    several logs, or of a plant simulated a few machines at a time.

    **Arguments:** `datasets`: one or more
    [`ltc_jax.datasets.SequenceDataset`][]s with the same channels in the same
    order and the same kind of labels (the same `class_names`; targets of the
    same width). A `SequenceDataset` does not name its channels, so only their
    number is checked: join windows cut with the same sensors and clock
    (`StreamWindows.channel_names` says which). For stream windows this joins
    their `dataset`; the machines, end times and times to failure around it
    are the caller's to join.

    **Returns:** a `SequenceDataset` of all their sequences in order, named as
    the first: `ts` of shape `(sum n_i, max times_i)` and `xs` of shape
    `(sum n_i, max times_i, channels)`, padded to the longest (padding
    continues each row's times in steps of 1 and is 0 in `xs`, as
    `SequenceDataset.from_sequences` pads), `lengths` `(sum n_i,)` and
    `labels` `(sum n_i,)` or `(sum n_i, k)`, each in the dtype NumPy's
    concatenation gives (that of the datasets where they agree).

    **Raises:** `ValueError` for no datasets, or for datasets whose channels,
    classes or targets differ (naming the first that differs from the first
    dataset, by position).
    """
    datasets = list(datasets)
    if not datasets:
        raise ValueError("concatenate needs at least one dataset.")
    first = datasets[0]
    for i, data in enumerate(datasets[1:], start=1):
        if (
            data.num_channels != first.num_channels
            or data.class_names != first.class_names
            or data.labels.shape[1:] != first.labels.shape[1:]
        ):
            raise ValueError(
                f"Dataset {i} has {data.num_channels} channels and classes "
                f"{data.class_names} (labels {data.labels.shape[1:]} each), "
                f"dataset 0 {first.num_channels} and {first.class_names} "
                f"({first.labels.shape[1:]}): concatenate joins sets of the same "
                "channels and labels (build each with the same class_names)."
            )
    longest = max(data.ts.shape[1] for data in datasets)
    ts, xs = [], []
    for data in datasets:
        extra = longest - data.ts.shape[1]
        steps = np.arange(1, extra + 1, dtype=np.float64)
        ts.append(np.concatenate([data.ts, data.ts[:, -1:] + steps], axis=1))
        xs.append(np.pad(data.xs, ((0, 0), (0, extra), (0, 0))))
    return dataclasses.replace(
        first,
        ts=np.concatenate(ts),
        xs=np.concatenate(xs),
        lengths=np.concatenate([data.lengths for data in datasets]),
        labels=np.concatenate([data.labels for data in datasets]),
    )


def channel_statistics(
    train: SequenceDataset,
) -> tuple[np.ndarray, np.ndarray]:
    """Each channel's mean and standard deviation over the observed (non-padding,
    non-NaN) values of `train`; a constant channel gets a standard deviation of 1.

    **Returns:** `(mean, std)`, float64 arrays of shape `(channels,)`, in the
    unit of the values.

    **Raises:** `ValueError` if a channel of `train` has no observed value.
    """
    observed = train.xs[train.valid_mask()]  # (points, channels)
    counts = np.sum(~np.isnan(observed), axis=0)
    if np.any(counts == 0):
        raise ValueError(
            f"Channel(s) {np.flatnonzero(counts == 0).tolist()} of {train.name!r} have "
            "no observed value; cannot standardise."
        )
    std = np.nanstd(observed, axis=0)
    return np.nanmean(observed, axis=0), np.where(std > 0, std, 1.0)


def standardize_with(
    data: SequenceDataset, mean: ArrayLike, std: ArrayLike
) -> SequenceDataset:
    """`data` with every channel shifted by `mean` and divided by `std` (both
    `(channels,)`, arrays or sequences of floats); padding becomes 0, missing
    values stay NaN.

    **Raises:** `ValueError` if `mean` or `std` does not have one entry per
    channel, or `std` is not positive.
    """
    mean, std = np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    if mean.shape != (data.num_channels,) or std.shape != (data.num_channels,):
        raise ValueError(
            f"{data.name!r} has {data.num_channels} channels; got statistics of "
            f"shapes {mean.shape} and {std.shape}."
        )
    if not np.all(std > 0):
        raise ValueError("Every standard deviation must be positive.")
    xs = np.where(data.valid_mask()[..., None], (data.xs - mean) / std, 0.0)
    return dataclasses.replace(data, xs=xs)


def check_same_classes(
    train: SequenceDataset, other: SequenceDataset, what: str = "other"
) -> None:
    """Check that a class index names the same class in `other` as in `train`:
    one's `class_names` begin with the other's (integer labels without names,
    `"0"` to the largest, agree with any set of more). A set built without the
    training set's `class_names` numbers only its own classes, so index 0 may
    be another class there, and its accuracy would be wrong without an error.

    **Raises:** `ValueError` naming both sets' classes and the fix, where
    they differ; nothing for regression targets or a set without classes.
    """
    mine, theirs = train.class_names, other.class_names
    shorter = min(len(mine), len(theirs))
    if mine and theirs and mine[:shorter] != theirs[:shorter]:
        raise ValueError(
            f"The {what} set's classes {theirs} are not the training set's "
            f"{mine}: a class index would name different classes in each. Build "
            "it with the training set's, SequenceDataset.from_sequences(..., "
            "class_names=train.class_names)."
        )


def standardize(
    train: SequenceDataset, *others: SequenceDataset
) -> tuple[SequenceDataset, ...]:
    """Scale every channel to zero mean and unit variance, using statistics of the
    observed (non-padding, non-NaN) values of `train` only
    ([`ltc_jax.datasets.channel_statistics`][]).

    **Returns:** `(train, *others)` standardised with the same mean and standard
    deviation.

    **Raises:** `ValueError` if a channel of `train` has no observed value, or
    another set's classes are not the training set's
    ([`ltc_jax.datasets.check_same_classes`][]).
    """
    for i, other in enumerate(others):
        check_same_classes(train, other, f"{other.name!r}" if other.name else f"#{i}")
    mean, std = channel_statistics(train)
    return tuple(standardize_with(data, mean, std) for data in (train, *others))


POOL_STATISTICS = ("mean", "std", "min", "max")
"""What [`ltc_jax.datasets.pool_channels`][] can compute across a group's
channels."""


def pool_channels(
    data: SequenceDataset,
    channel_groups: Sequence[str],
    statistics: Sequence[str] = POOL_STATISTICS,
) -> SequenceDataset:
    """Summarise each group of interchangeable channels by statistics across the
    group at every observation, so that a model's size follows the groups and
    not the number of channels in each.

    A plant's hundred temperature sensors read one kind of quantity. An LTC fed
    every channel has an input weight per channel and unit, so its parameters,
    their gradient, the optimiser's state and the compiled step's memory grow
    with the sensors. Fed each group's mean, standard deviation, minimum and
    maximum across its channels (a set's summary, as in Zaheer et al. 2017,
    "Deep sets", NeurIPS), it sees a fixed number of channels however many
    sensors report, and is unchanged by their order within a group. What it
    gives up is which sensor of a group read what: pool sensors that are
    interchangeable, after [`ltc_jax.datasets.standardize`][], so that
    sensors with different offsets or units compare.

    Each statistic skips missing (NaN) values: it is NaN only where no channel
    of the group is observed. Where no value is missing, pooling the
    observations equals pooling, at every time, the hold path
    (`interpolation="hold"`, which stream windows use) they would give; where
    one is, the pooled path holds the statistics of the channels observed
    then, not of each channel's last value. A linear path interpolates the
    pooled values. Standardise again after pooling: a group's mean over many
    standardised channels varies much less than each.

    **Arguments:**

    - `data`: the dataset, `xs` of shape `(n, times, channels)`.
    - `channel_groups`: each channel's group, a string per channel; channels
        with the same string are pooled together, wherever they lie. For
        windows of sensor streams, `StreamWindows.channel_groups`.
    - `statistics`: across each group's observed channels, in this order, some
        of `"mean"`, `"std"` (the population standard deviation: 0 for one
        channel), `"min"` and `"max"` (default all four).

    **Returns:** a [`ltc_jax.datasets.SequenceDataset`][] with the same times,
    lengths and labels, and `xs` of shape `(n, times, groups *
    len(statistics))`, float64, in the unit of each group's values (`std` too),
    group by group in order of first appearance in `channel_groups`, and
    within a group in the order of `statistics`; padding stays 0.

    **Raises:** `TypeError` if `data` is not a `SequenceDataset` (stream
    windows: pool their `dataset`); `ValueError` for `channel_groups` that does
    not give one group per channel of `data`, or for statistics that are not
    distinct ones of `POOL_STATISTICS` (or a string, not a list of them).
    """
    if not isinstance(data, SequenceDataset):
        windows = hasattr(data, "dataset") and hasattr(data, "channel_groups")
        hint = (
            ": for stream windows, pool_channels(windows.dataset, "
            "windows.channel_groups)"
            if windows
            else ""
        )
        raise TypeError(
            f"pool_channels pools a SequenceDataset; got {type(data).__name__}{hint}."
        )
    if isinstance(statistics, str):
        raise ValueError(
            f"statistics is a list of statistics; got the string {statistics!r}."
        )
    channel_groups = list(channel_groups)
    statistics = tuple(statistics)
    if len(channel_groups) != data.num_channels:
        raise ValueError(
            f"channel_groups must give each of the {data.num_channels} channels "
            f"of {data.name!r} its group; got {len(channel_groups)} entries."
        )
    unknown = [s for s in statistics if s not in POOL_STATISTICS]
    if not statistics or unknown or len(set(statistics)) < len(statistics):
        raise ValueError(
            f"statistics must be distinct ones of {POOL_STATISTICS}; got {statistics}."
        )
    reduce = dict(mean=np.nanmean, std=np.nanstd, min=np.nanmin, max=np.nanmax)
    groups = np.array(channel_groups)
    xs = np.asarray(data.xs, dtype=np.float64)
    pooled = []
    with warnings.catch_warnings():  # a group with no observed channel: NaN
        for message in ("Mean of empty slice", "Degrees of freedom", "All-NaN"):
            warnings.filterwarnings("ignore", message, RuntimeWarning)
        for group in dict.fromkeys(channel_groups):
            members = xs[..., groups == group]
            pooled += [reduce[s](members, axis=-1) for s in statistics]
    xs = np.where(data.valid_mask()[..., None], np.stack(pooled, axis=-1), 0.0)
    return dataclasses.replace(data, xs=xs)


def drop_observations(
    data: SequenceDataset, rate: float, *, seed: int = 0
) -> SequenceDataset:
    """Drop a fraction `rate` of each sequence's observations at random, keeping the
    times of the rest: the irregular-sampling protocol of Kidger et al. (2020),
    "Neural Controlled Differential Equations for Irregular Time Series", Sec. 4.

    Each sequence of length `L` keeps `max(1, round((1 - rate) * L))` of its time
    points (all channels together), chosen uniformly without replacement and kept
    in time order; sequences are visited in order with one
    `numpy.random.default_rng(seed)`, so the result is fixed by `seed`.

    **Returns:** a new dataset, padded to its new longest sequence.

    **Raises:** `ValueError` if `rate` is outside `[0, 1)`.
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"rate must lie in [0, 1); got {rate}.")
    rng = np.random.default_rng(seed)
    kept = []
    for length in data.lengths:
        keep = max(1, int(round((1.0 - rate) * length)))
        kept.append(np.sort(rng.choice(length, size=keep, replace=False)))
    times = max(len(k) for k in kept)
    n = len(data)
    ts = np.zeros((n, times))
    xs = np.zeros((n, times, data.num_channels))
    for i, k in enumerate(kept):
        ts[i, : len(k)] = data.ts[i, k]
        ts[i, len(k) :] = data.ts[i, k[-1]] + np.arange(1, times - len(k) + 1)
        xs[i, : len(k)] = data.xs[i, k]
    return dataclasses.replace(
        data,
        ts=ts,
        xs=xs,
        lengths=np.array([len(k) for k in kept], dtype=np.int32),
        name=f"{data.name} ({rate:.0%} of observations dropped)",
    )


def hold_last(data: SequenceDataset, duration: float, knots: int) -> SequenceDataset:
    """Each sequence followed by `duration` more time in which nothing new is
    observed: `knots` observations at `t_last + duration * k / knots`, `k = 1,
    ..., knots`, each a copy of the sequence's last observation (NaN where it
    was NaN). A model solved on it runs on past the last real observation with
    its inputs held, causally: the follow-up in which a time-to-event model
    ([`ltc_jax.training.EventTimeLoss`][]) predicts its event. Labels are kept.

    **Arguments:** `data`, a [`ltc_jax.datasets.SequenceDataset`][];
    `duration`, the follow-up's length in the unit of its timestamps; `knots`,
    the observations added (with fixed steps, `duration / knots` a multiple of
    `dt0` keeps a step edge at each).

    **Returns:** a new dataset of `knots` more observations per sequence.

    **Raises:** `ValueError` for a `duration` that is not positive and finite,
    or `knots` below 1.
    """
    if not (np.isfinite(duration) and duration > 0):
        raise ValueError(f"duration must be positive and finite; got {duration}.")
    if isinstance(knots, bool) or not (
        isinstance(knots, numbers.Integral) and knots >= 1
    ):
        raise ValueError(f"knots must be a positive int; got {knots!r}.")
    knots = int(knots)
    rows = np.arange(len(data))
    last = data.lengths - 1
    times = data.ts[rows, last][:, None] + duration * np.arange(1, knots + 1) / knots
    values = np.repeat(data.xs[rows, last][:, None], knots, axis=1)
    sequences = zip(data.ts, data.xs, data.lengths, times, values, strict=True)
    ts, xs, lengths = pad_sequences(
        *zip(
            *[
                (np.concatenate([t[:n], u]), np.concatenate([x[:n], v]))
                for t, x, n, u, v in sequences
            ],
            strict=True,
        )
    )
    return dataclasses.replace(data, ts=ts, xs=xs, lengths=lengths)


def _class_groups(data: SequenceDataset) -> list[np.ndarray]:
    """Each class's sequence indices, in class order (for regression, one group
    of all): what the stratified splits deal from."""
    if not data.is_classification:
        return [np.arange(len(data))]
    return [np.flatnonzero(data.labels == c) for c in range(data.num_classes)]


def stratified_split(
    data: SequenceDataset, fraction: float, *, seed: int = 0
) -> tuple[SequenceDataset, SequenceDataset]:
    """Split `data` into `(rest, held_out)`, `held_out` holding `fraction` of the
    sequences of each class (rounded, at least one of every class with two or
    more sequences, never a class's last), drawn at random by `seed`. For
    regression the split is a plain random one.

    **Returns:** two datasets, disjoint, together `data` (order within each kept).

    **Raises:** `ValueError` unless `0 < fraction < 1`, or if no sequence can be
    held out.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must lie in (0, 1); got {fraction}.")
    rng = np.random.default_rng(seed)
    groups = _class_groups(data)
    held = []
    for members in groups:
        if len(members) < 2:
            continue
        count = min(len(members) - 1, max(1, round(fraction * len(members))))
        held.extend(rng.choice(members, size=count, replace=False).tolist())
    if not held:
        raise ValueError(f"{data.name or 'The data'} is too small to hold any out.")
    mask = np.zeros(len(data), dtype=bool)
    mask[held] = True
    return data.take(np.flatnonzero(~mask)), data.take(np.flatnonzero(mask))


def stratified_folds(
    data: SequenceDataset, folds: int, *, seed: int = 0
) -> list[tuple[SequenceDataset, SequenceDataset]]:
    """`folds`-fold cross-validation splits of `data`: `folds` pairs `(rest,
    held_out)`, each sequence held out in exactly one. Each class's sequences
    (all of them, for regression) are shuffled by `seed` and dealt to the folds
    in turn, the deal continuing from class to class, so every fold holds each
    class in proportion (to one sequence) and the folds' sizes differ by at
    most one.

    **Returns:** a list of `folds` pairs of datasets, each pair disjoint and
    together `data` (order within each kept).

    **Raises:** `ValueError` unless `2 <= folds <= len(data)`, or for a class
    index outside `[0, num_classes)` (an unlabelled set's `-1`).
    """
    if not 2 <= folds <= len(data):
        raise ValueError(
            f"folds must lie in [2, {len(data)}] (the number of sequences of "
            f"{data.name or 'the data'}); got {folds}."
        )
    rng = np.random.default_rng(seed)
    groups = _class_groups(data)
    if data.is_classification and not np.all(
        (data.labels >= 0) & (data.labels < data.num_classes)
    ):
        raise ValueError(
            f"{data.name or 'The data'} has labels outside its {data.num_classes} "
            "classes (-1: unlabelled); folds deal labelled sequences."
        )
    fold_of = np.empty(len(data), dtype=int)
    dealt = 0
    for members in groups:
        fold_of[rng.permutation(members)] = (dealt + np.arange(len(members))) % folds
        dealt += len(members)
    return [
        (
            data.take(np.flatnonzero(fold_of != k)),
            data.take(np.flatnonzero(fold_of == k)),
        )
        for k in range(folds)
    ]
