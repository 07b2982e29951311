"""Feeding data to a training step: datasets as input paths, fixed-size batches,
the data order of an epoch, and abstract batches for compile-only measurement."""

from collections.abc import Iterator
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._paths import InputPath, empty_channel_problem
from ._times import time_resolution_problem
from .datasets import SequenceDataset


class Batch(NamedTuple):
    """One fixed-size batch.

    - `path`: the batch's inputs, an [`ltc_jax.InputPath`][], built before the
        training step so the step receives the data as an argument and never
        copies it.
    - `labels`: `Int[Array, "batch"]` class indices, or
        `Float[Array, "batch output_size"]` regression targets.
    - `weights`: `Float[Array, "batch"]`, 1 for a real sequence and 0 for the
        copies that fill up the last batch (so every batch has one shape and
        compiles once).
    - `y0`: `None` (default: each sequence starts from the zero state) or
        `Float[Array, "batch hidden_size"]`, the state each sequence starts
        from, e.g. the final state of the window before it in a stream.
    """

    path: InputPath
    labels: Array
    weights: Float[Array, " batch"]
    y0: Float[Array, "batch hidden_size"] | None = None


def make_input_path(data: SequenceDataset, *, dtype=None, **options) -> InputPath:
    """All sequences of `data` as one [`ltc_jax.InputPath`][], validated once.

    Each sequence's times are taken from its first observation (subtracted in
    float64, so absolute times such as Unix seconds keep their gaps in float32;
    the absolute times stay in `data.ts`). When every sequence then has the same
    times and no padding (as an equal-length UEA dataset, or windows cut at one
    rate from one recording, whose times from their starts agree to float64's
    rounding), the path is built on that one time grid (`shared_times`), which
    solves find their place in once for the whole batch, with the grid's
    duration known when tracing (`static_duration`): every batch taken from
    the path compiles to one constant end time.

    **Arguments:**

    - `data`: a [`ltc_jax.datasets.SequenceDataset`][].
    - `dtype`: floating dtype of times and values (default: JAX's default float).
    - `options`: keyword arguments of `InputPath` (`interpolation`,
        `observation_mask`, `time_since_observation` and its
        `time_since_observation_scale`, `empty_channel_fill`;
        `static_duration=None` keeps a shared grid's end traced, so that sets
        whose durations differ in their last bits share compiled functions).

    **Returns:** an `InputPath` over `len(data)` sequences; take batches of it
    with `path.take(index)` or [`ltc_jax.batches`][].

    **Raises:** `ValueError` if `dtype` cannot resolve the gaps between the
    times even from each sequence's start (a long sequence of close
    observations in float32: use float64), or for a channel of a sequence
    without any observed value (naming them) unless `empty_channel_fill`;
    otherwise as `InputPath` (non-increasing times, infinite values, ...).
    """
    dtype = jnp.zeros(()).dtype if dtype is None else dtype
    # Each sequence's times from its first observation, subtracted in float64 on
    # the host: absolute times (Unix seconds) keep their gaps, which float32
    # would round to multiples of 128 s. The model is invariant to the shift.
    ts = data.ts - data.ts[:, :1]
    problem = time_resolution_problem(
        ts, data.lengths, dtype, "The times from each sequence's start"
    )
    if problem is None and options.get("empty_channel_fill") is None:
        problem = empty_channel_problem(data.unobserved_channels())
    if problem is not None:
        raise ValueError(problem)
    if "time_since_observation_scale" in options:  # static: known when tracing
        scale = float(options["time_since_observation_scale"])
        options = {**options, "time_since_observation_scale": scale}
    if np.all(data.lengths == ts.shape[1]) and _one_grid(ts):
        # Known here, on the host: the solves of every batch end at a constant.
        grid = np.asarray(ts[0], dtype)
        options = {"static_duration": float(grid[-1] - grid[0]), **options}
        ts, lengths = jnp.asarray(grid), None
    else:
        ts, lengths = jnp.asarray(ts, dtype), jnp.asarray(data.lengths, jnp.int32)
    return _build_path(ts, jnp.asarray(data.xs, dtype), lengths, options)


SHARED_GRID_TOLERANCE = 1e-6
"""Sequences share one time grid when their times from their starts agree with
the first sequence's to this fraction of its smallest gap: windows cut at
different offsets from one recording differ there only by float64 rounding
(about 1e-11 of a gap for 300 s at 360 Hz), far below float32's own rounding of
the times (about 1% of that gap at 300 s)."""


def _one_grid(ts: np.ndarray) -> bool:
    """Whether every row of `ts` (`float64[n, times]`, each from its start) is
    the first row, to [`SHARED_GRID_TOLERANCE`][] of its smallest gap."""
    gaps = np.diff(ts[0])
    if not gaps.size or np.min(gaps) <= 0:
        return bool(np.all(ts == ts[:1]))
    return bool(np.max(np.abs(ts - ts[:1])) <= SHARED_GRID_TOLERANCE * np.min(gaps))


def make_batch(data: SequenceDataset, *, dtype=None, **options) -> Batch:
    """All sequences of `data` as one [`ltc_jax.Batch`][] (every weight 1).

    **Arguments:** as [`ltc_jax.make_input_path`][].

    **Returns:** the batch: its path, its labels (`int32` class indices or float
    targets of `dtype`), weights of 1.
    """
    path = make_input_path(data, dtype=dtype, **options)
    return next(batches(data, len(data), path=path))


@eqx.filter_jit
def _build_path(ts, xs, lengths, options):
    return InputPath(ts, xs, lengths, **options)


@eqx.filter_jit
def _take(path: InputPath, index) -> InputPath:
    return path.take(index)


def batches(
    data: SequenceDataset,
    batch_size: int,
    *,
    order: np.ndarray | None = None,
    path: InputPath | None = None,
    start: int = 0,
) -> Iterator[Batch]:
    """Split `data` into batches of exactly `batch_size` sequences.

    **Arguments:**

    - `data`: the dataset.
    - `batch_size`: sequences per batch.
    - `order`: a permutation of `range(len(data))` (default: the stored order).
    - `path`: `make_input_path(data, ...)` (default: built with linear
        interpolation and JAX's default float).
    - `start`: index of the first batch to yield (to resume within an epoch).

    **Yields:** [`ltc_jax.Batch`][]es; the last is filled up with weight-0 copies.

    **Raises:** `ValueError` if `batch_size < 1`.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive; got {batch_size}.")
    n = len(data)
    order = np.arange(n) if order is None else np.asarray(order)
    if path is None:
        path = make_input_path(data)
    float_dtype = path.ts.dtype
    label_dtype = jnp.int32 if data.is_classification else float_dtype
    for first in range(start * batch_size, n, batch_size):
        index = order[first : first + batch_size]
        real = len(index)
        if real < batch_size:
            index = np.concatenate([index, np.resize(order, batch_size - real)])
        yield Batch(
            path=_take(path, jnp.asarray(index)),
            labels=jnp.asarray(data.labels[index], label_dtype),
            weights=jnp.asarray(np.arange(batch_size) < real, float_dtype),
        )


def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """The data order of one epoch: a permutation determined by `(seed, epoch)`
    alone, so a resumed run sees exactly the batches an uninterrupted one would."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def abstract_batch(
    batch_size: int,
    times: int,
    input_size: int,
    *,
    output_size: int | None = None,
    dtype=jnp.float32,
    shared_times: bool = True,
    interpolation: str = "linear",
) -> Batch:
    """A [`ltc_jax.Batch`][] of `jax.ShapeDtypeStruct`s: shapes and dtypes only,
    nothing allocated. For compiled memory ([`ltc_jax.measure.compiled_memory`][]) of
    inputs too large to build, such as a day of ECG at 250 Hz.

    **Arguments:**

    - `batch_size`, `times`, `input_size`: the batch's shape.
    - `output_size`: `None` (default) for class labels, `Int[..., "batch"]`; an
        int for regression targets, `Float[..., "batch output_size"]`.
    - `dtype`: floating dtype of times, values and weights (default float32).
    - `shared_times`: one time grid `(times,)` for the batch (default), or
        `(batch, times)` with lengths.
    - `interpolation`: as `InputPath`.

    **Returns:** the abstract batch; its path has the leaves `InputPath` would
    build from such arrays.
    """
    xs = jax.ShapeDtypeStruct((batch_size, times, input_size), dtype)
    if shared_times:
        ts = jax.ShapeDtypeStruct((times,), dtype)
        path = jax.eval_shape(
            lambda ts, xs: InputPath(ts, xs, interpolation=interpolation), ts, xs
        )
    else:
        ts = jax.ShapeDtypeStruct((batch_size, times), dtype)
        lengths = jax.ShapeDtypeStruct((batch_size,), jnp.int32)
        path = jax.eval_shape(
            lambda ts, xs, n: InputPath(ts, xs, n, interpolation=interpolation),
            ts,
            xs,
            lengths,
        )
    if output_size is None:
        labels = jax.ShapeDtypeStruct((batch_size,), jnp.int32)
    else:
        labels = jax.ShapeDtypeStruct((batch_size, output_size), dtype)
    return Batch(path, labels, jax.ShapeDtypeStruct((batch_size,), dtype))


def check_labelled(data: SequenceDataset, purpose: str) -> None:
    """**Raises:** `TypeError` if `data` is not a `SequenceDataset` (the windows
    of `stream_windows` hold theirs in `.dataset`); `ValueError` if it has no
    labels (an unlabelled `.ts` file, read with every label `-1`), which
    `purpose` (e.g. "training") needs."""
    if not isinstance(data, SequenceDataset):
        held = " (its .dataset is one)" if hasattr(data, "dataset") else ""
        raise TypeError(
            f"{purpose} needs a SequenceDataset; got a {type(data).__name__}{held}."
        )
    if not data.is_labelled:
        raise ValueError(
            f"{data.name or 'The data'} has no labels (every label is -1, as for a "
            f".ts file declaring @classLabel false): {purpose} needs labelled data."
        )


def check_labels(model, data: SequenceDataset, purpose: str) -> None:
    """Check that `data` is labelled (`check_labelled`, for `purpose`) and its
    labels against the model's `output_size` (where it has one), at the API
    boundary of training and evaluation.

    **Raises:** `ValueError` for unlabelled data, classification data that
    names another number of classes than `output_size` (its labels index its
    own `class_names`; names that are the indices themselves, `"0"` to
    `"k-1"`, as integer labels without names get, index the model's too and
    pass), a class index outside `[0,
    output_size)` (with a hint for 1-based labels), regression targets of
    another width, or a regression target that is NaN or infinite (the loss
    would be, with nothing to say why).
    """
    check_labelled(data, purpose)
    size = getattr(model, "output_size", None)
    if size is None:
        return
    labels = np.asarray(data.labels)
    names = tuple(data.class_names)
    if (
        data.is_classification
        and names
        and len(names) != size
        and names != tuple(map(str, range(len(names))))  # indices: the model's
    ):
        raise ValueError(
            f"{data.name or 'The data'} names {len(data.class_names)} classes "
            f"{data.class_names}, but the model has output_size={size}, one "
            "output per class: each label indexes the data's own class_names, "
            "so a set that names fewer classes (such as a test set built without "
            "class_names, which names only the classes it holds) would be scored "
            "against the wrong classes. Build it with the training set's "
            "class_names (SequenceDataset.from_sequences(..., "
            "class_names=train.class_names))."
        )
    if data.is_classification:
        low, high = int(labels.min()), int(labels.max())
        if low < 0 or high >= size:
            hint = " (1-based labels? subtract 1)" if low >= 1 and high == size else ""
            raise ValueError(
                f"Class labels must be indices in [0, {size}) for a model with "
                f"output_size={size}; {data.name or 'the data'} has labels from "
                f"{low} to {high}{hint}."
            )
    elif labels.ndim != 2 or labels.shape[1] != size:
        raise ValueError(
            f"Regression targets must be (n, {size}) for a model with "
            f"output_size={size}; got {labels.shape}."
        )
    elif not np.all(np.isfinite(labels)):
        bad = np.flatnonzero(~np.all(np.isfinite(labels), axis=1))
        raise ValueError(
            f"Regression targets must be finite; {data.name or 'the data'} has "
            f"{len(bad)} sequence(s) with a NaN or infinite target, the first at "
            f"index {bad[0]} ({labels[bad[0]].tolist()}): drop those sequences "
            f"or fill their targets before {purpose}."
        )
