"""Observations `(ts, xs)` of a batch of sequences -> a continuous input path x(t)."""

import math
from collections.abc import Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int, Real

from ._times import (
    FIX,
    MAX_ROUNDING,
    resolution_and_smallest_gap,
    time_resolution_problem,
)


_INTERPOLATIONS = ("linear", "cubic", "hold")
# Knots per block of the two-level interval search (see `InputPath.evaluate`).
_BLOCK = 64
# Searches over at most this many knots compare them all at once (`_count_below`).
_COMPARE_ALL = 1024


class InputPath(eqx.Module):
    """A batch of observed sequences, interpolated into a continuous input $x(t)$.

    Each sequence `b` has its own observation times `ts[b, :lengths[b]]` (irregular,
    and different from its neighbours' if you like) and values
    `xs[b, :lengths[b]]`. The values are joined into a path with diffrax's
    interpolations, one per sequence:

    - `"linear"` (default): `diffrax.LinearInterpolation`. Piecewise linear, with a
        kink at every observation; adaptive solvers should stop at the observation
        times (`ltc_jax` passes them as `jump_ts`).
    - `"cubic"`: cubic Hermite splines with backward differences
        (`diffrax.backward_hermite_coefficients` + `diffrax.CubicInterpolation`,
        Morrill et al. 2021). Continuously differentiable; $x(t)$ on an interval
        depends only on observations up to the interval's end, as for linear.
    - `"hold"`: the last observation, held until the next (a zero-order hold,
        as diffrax's `rectilinear_interpolation` gives): causal, so $x(t)$ never
        depends on an observation after `t`, where linear and cubic move toward
        the next observation before it arrives. A missing value holds its
        channel's last observed one; before a channel's first observation it
        reads 0. The observation-mask channel is then 0 or 1, never between,
        and the time-since-observation channel holds its value at the last knot.
        An observation acts from its own time on (at an observation time the
        path reads that observation), so the last one, at the solve's end, has
        no time to act on the final state (where a target hangs on the last
        value, linear, which moves toward each observation over the interval
        before it, lets it act). Adaptive solvers stop at the
        observation times (`jump_ts`), as for linear.

    Positions at or after `lengths[b]` are padding. They are replaced, before
    interpolation, by copies of the last observation at times after the sequence's
    end, which the solve never reaches: padding has no effect on any result and
    receives no gradient, whatever values (NaN included) it holds.

    Times are in whatever unit you choose; every time-like quantity in `ltc_jax`
    (`dt0`, `tau`, `dtmin`) is in that unit.

    Build a path once, outside any jitted function, and slice batches from it
    (`take`), as [`ltc_jax.make_input_path`][] and `fit` do. The constructor
    checks every value and fills the missing ones in passes over the whole
    input (for `"linear"` and `"cubic"`, diffrax's fill is a sequential loop
    over the times): a path built inside a jitted loss repeats that work at
    every call.

    **Fields:**

    - `interpolation`: the diffrax interpolation of every sequence, its leaves with a
        leading `batch` axis.
    - `lengths`: `Int[Array, "batch"]`, observations per sequence.
    - `block_ts`: `Float[Array, "batch blocks"]`, every 64th knot time
        (`ts[:, ::64]`, `blocks = ceil(times / 64)`), for the interval search of
        [`ltc_jax.InputPath.evaluate`][]. It is 1/64 of the size of the times and
        is stored with the data, so a solve's memory does not grow with the
        input's length. Built here from `interpolation`: replace both or neither.
    - `shared_times`: static bool; True when all sequences share one time grid and
        length, i.e. `ts` was given as `(times,)` without `lengths`. Then saving
        at the observation times costs `times` saves, not `batch * times`, and a
        solve finds its place in the input once for the whole batch (see
        [`ltc_jax.InputPath.evaluate`][]): pass windows sampled at the same times
        that way. Nothing checks it later: a path whose times are replaced must
        be built anew.
    - `static_duration`: static `float | None`; on a shared grid, its duration
        as given to the constructor (see there), else `None`. A solve then knows
        its number of steps and its end when it is traced. Nothing checks it
        later either: a path whose times are replaced keeps it, and its solves
        would end at the old end.
    """

    interpolation: diffrax.LinearInterpolation | diffrax.CubicInterpolation
    lengths: Int[Array, " batch"]
    block_ts: Float[Array, "batch blocks"]
    shared_times: bool = eqx.field(static=True)
    hold: bool = eqx.field(static=True)
    static_duration: float | None = eqx.field(static=True)

    def __init__(
        self,
        ts: ArrayLike | Sequence,
        xs: ArrayLike | Sequence,
        lengths: ArrayLike | Sequence | None = None,
        *,
        interpolation: str = "linear",
        observation_mask: bool = False,
        time_since_observation: bool = False,
        time_since_observation_scale: float = 1.0,
        empty_channel_fill: float | None = None,
        static_duration: float | None = None,
    ):
        """Shapes are checked here, with errors that name the problem (the arguments
        are annotated loosely for that reason).

        **Arguments:**

        - `ts`: observation times, `(times,)` when all sequences share them, or
            `(batch, times)`. Must be strictly increasing within each sequence's
            length. Integer times are converted to the dtype of `xs`, which must
            resolve the gaps between them: absolute times (Unix seconds) in
            float32 do not; give times from each sequence's start, subtracted in
            float64 ([`ltc_jax.make_input_path`][] does this for a dataset).
        - `xs`: observed values, `(batch, times, channels)`, floating point. NaN
            means "not observed": each channel is interpolated through its own
            observed points only; before its first observation it holds its first
            observed value, after its last its last (diffrax's
            `linear_interpolation` / `backward_hermite_coefficients` NaN filling).
        - `lengths`: `(batch,)` integers in `[1, times]`; default: every sequence
            has `times` observations.
        - `interpolation`: `"linear"` (default), `"cubic"` or `"hold"`.
        - `observation_mask`: append one channel per input channel: 1 where that
            channel was observed at an observation time, 0 where it was NaN.
        - `time_since_observation`: append one channel per input channel: the time
            since the channel's previous observation, as in GRU-D (Che et al.
            2018): `0` at the first time, else `t_i - t_{i-1}` plus the previous
            value if the channel was missing at `t_{i-1}`.
        - `time_since_observation_scale`: the unit, in the unit of the times,
            in which that channel holds its times: each is divided by it
            (default 1, the times' own unit). A number known when tracing (a
            Python or NumPy float), not a traced array. Given the median
            interval between observations, as the main job gives it, the
            channel reads the same whatever the unit of the timestamps.
        - `empty_channel_fill`: value for a channel with no observation at all in
            a sequence; by default such a channel is an error.
        - `static_duration`: with `ts` of shape `(times,)` and no `lengths`, the
            grid's duration `ts[-1] - ts[0]` (in the unit of the times, computed
            in the dtype of `xs`, as `float(ts[-1] - ts[0])` of the times in
            that dtype gives it), known on the host. Solves of the path then end
            at a Python float, as a solve written by hand on `[0.0, 1.0]` does,
            and compile without diffrax's 100 unrolled steps of round-off
            bookkeeping for a traced end time. Being static, each duration
            compiles a jitted function anew: give it where one grid serves many
            batches, as [`ltc_jax.make_input_path`][] does. Default `None`: the
            end is traced from the times.

        The path has `channels * (1 + observation_mask + time_since_observation)`
        channels, in the order values, masks, times since observation.

        **Raises:**

        - `ValueError` (when called) for wrong ranks or mismatched shapes, fewer than
            two time columns, an integer `xs`, an unknown `interpolation`, or a
            `time_since_observation_scale` that is not positive and finite; and,
            for concrete inputs, if the dtype of `xs` would round a time by more
            than a tenth of the smallest gap between observations (the message
            names the resolution, the gap and the fix), or if a channel of a
            sequence has no observed value, unless `empty_channel_fill` (the
            message names them), and for a `static_duration` without one shared
            grid. Under `jit` the two checks of values are
            `equinox.EquinoxRuntimeError`s, without the figures.
        - `equinox.EquinoxRuntimeError` (when the values are checked, eagerly or
            under `jit`) if times are not strictly increasing or are not finite, if
            a value is infinite, if a length is out of range, or if
            `static_duration` is not the grid's duration. Only positions
            inside each sequence's length are checked.
        """
        if interpolation not in _INTERPOLATIONS:
            raise ValueError(
                f"Unknown interpolation {interpolation!r}; choose one of "
                f"{_INTERPOLATIONS}."
            )
        time_since_observation_scale = float(time_since_observation_scale)
        if not 0 < time_since_observation_scale < math.inf:
            raise ValueError(
                "time_since_observation_scale must be positive and finite; got "
                f"{time_since_observation_scale}."
            )
        xs = jnp.asarray(xs)
        if xs.ndim != 3:
            raise ValueError(
                "xs must have shape (batch, times, input_size); got shape "
                f"{xs.shape}. For a single sequence use xs[None]."
            )
        if not jnp.issubdtype(xs.dtype, jnp.floating):
            raise ValueError(f"xs must be floating point; got dtype {xs.dtype}.")
        batch, times, _ = xs.shape
        given = ts
        ts = jnp.asarray(ts)
        shared_times = ts.ndim == 1 and lengths is None
        if ts.ndim == 1:
            ts = jnp.broadcast_to(ts, (batch, ts.shape[0]))
        if ts.shape != (batch, times):
            raise ValueError(
                f"ts must have shape (times,) or (batch, times) = ({times},) or "
                f"{(batch, times)} to match xs of shape {xs.shape}; got {ts.shape}."
            )
        if times < 2:
            raise ValueError(
                f"Need at least two time columns to interpolate; got {times}. Pad "
                "single observations to two columns and pass lengths=1."
            )
        ts = ts.astype(xs.dtype)
        if lengths is None:
            lengths = jnp.full((batch,), times, dtype=jnp.int32)
        else:
            lengths = jnp.asarray(lengths)
            if lengths.shape != (batch,) or not jnp.issubdtype(
                lengths.dtype, jnp.integer
            ):
                raise ValueError(
                    f"lengths must be integers of shape ({batch},); got "
                    f"{lengths.dtype} of shape {lengths.shape}."
                )
            lengths = lengths.astype(jnp.int32)
        lengths = eqx.error_if(
            lengths,
            (lengths < 1) | (lengths > times),
            f"lengths must lie in [1, {times}] (the number of time columns).",
        )
        valid = _positions(times) < lengths[:, None]
        ts = _check_resolution(given, ts, valid)
        ts = _check_times(ts, valid)
        if static_duration is not None:
            ts, static_duration = _check_static_duration(
                ts, static_duration, shared_times
            )
        xs = eqx.error_if(
            xs,
            jnp.any(valid[..., None] & jnp.isinf(xs)),
            "xs holds an infinite value inside a sequence's length (NaN marks a "
            "missing value; infinity is not allowed).",
        )
        observed = valid[..., None] & ~jnp.isnan(xs)
        empty = ~jnp.any(observed, axis=1, keepdims=True)  # (batch, 1, channels)
        if empty_channel_fill is None:
            xs = _check_observed(xs, empty)
        else:
            fill = jnp.asarray(empty_channel_fill, xs.dtype)
            xs = jnp.where(empty & valid[..., None], fill, xs)
            observed = observed | (empty & valid[..., None])
        extra = []
        if observation_mask:
            extra.append(observed.astype(xs.dtype))
        if time_since_observation:
            since = _time_since_observation(ts, observed)
            extra.append(since / jnp.asarray(time_since_observation_scale, xs.dtype))
        if extra:
            xs = jnp.concatenate([xs, *extra], axis=-1)
        ts, xs = _pad_after_end(ts, xs, lengths, valid)
        start = None if interpolation == "hold" else _first_observed(xs)
        if interpolation == "hold":
            self.interpolation = jax.vmap(diffrax.LinearInterpolation)(
                ts, _hold_values(xs)
            )
        elif interpolation == "linear":
            filled = jax.vmap(
                lambda t, x, x0: diffrax.linear_interpolation(
                    t, x, fill_forward_nans_at_end=True, replace_nans_at_start=x0
                )
            )(ts, xs, start)
            self.interpolation = jax.vmap(diffrax.LinearInterpolation)(ts, filled)
        else:
            coeffs = jax.vmap(
                lambda t, x, x0: diffrax.backward_hermite_coefficients(
                    t, x, fill_forward_nans_at_end=True, replace_nans_at_start=x0
                )
            )(ts, xs, start)
            self.interpolation = jax.vmap(diffrax.CubicInterpolation)(ts, coeffs)
        self.lengths = lengths
        self.block_ts = ts[:, ::_BLOCK]
        self.shared_times = shared_times
        self.static_duration = static_duration
        self.hold = interpolation == "hold"

    @property
    def ts(self) -> Float[Array, "batch times"]:
        """Knot times, padding replaced by times after each sequence's end."""
        return self.interpolation.ts

    @property
    def input_size(self) -> int:
        """Channels of the path (input channels plus any mask and time channels)."""
        return (
            self.interpolation.ys.shape[-1]
            if isinstance(self.interpolation, diffrax.LinearInterpolation)
            else self.interpolation.coeffs[0].shape[-1]
        )

    @property
    def t_start(self) -> Float[Array, " batch"]:
        """First observation time of each sequence."""
        return self.ts[:, 0]

    @property
    def t_end(self) -> Float[Array, " batch"]:
        """Last observation time of each sequence (`ts[b, lengths[b] - 1]`)."""
        return jnp.take_along_axis(self.ts, self.lengths[:, None] - 1, axis=1)[:, 0]

    @property
    def valid(self) -> Bool[Array, "batch times"]:
        """True at observed (non-padding) positions."""
        return _positions(self.ts.shape[1]) < self.lengths[:, None]

    def take(self, index: Int[ArrayLike, " rows"]) -> "InputPath":
        """The sequences at `index` (an integer array), as a new path."""
        return jax.tree.map(lambda leaf: leaf[index], self)

    def evaluate(
        self, t: Real[ArrayLike, "*batch"]
    ) -> Float[Array, "batch input_size"]:
        """$x(t)$ of every sequence: diffrax's interpolation, evaluated on the
        interval that holds `t` (the first or last interval extended before the
        first or after the last knot, as diffrax does), bit for bit; for a
        hold, the last observation at or before `t`.

        The interval is found by two short searches, among every 64th knot
        (`block_ts`) and then among the 65 knots of one block (comparisons all at
        once, or a bisection over single knots when there are over 1024 blocks);
        only that interval's data is then sliced out and handed to diffrax's own
        evaluation. No read or copy touches the whole sequence, so
        the cost of an evaluation and a solve's memory do not grow with the
        input's length (XLA on CPU also spreads any read of a large array over its
        threads). With `shared_times` and a scalar `t`, as [`ltc_jax.integrate`][]
        calls it on such a path, one search serves the whole batch, each of
        the interval's two knots is read by index for every sequence at once,
        not gathered per sequence, and diffrax's arithmetic on them is written
        out over the batch (the same operations, so the same bits, without a
        search of each sequence's two knots: the solve then costs what a
        hand-written `diffrax.LinearInterpolation` of the batch costs).

        **Arguments:**

        - `t`: a scalar (the same time for every sequence), or `(batch,)`: one
            time per sequence; in the unit of the observation times.

        **Returns:** `(batch, input_size)`, in the dtype of the times.
        """
        t = jnp.asarray(t, self.ts.dtype)
        if self.shared_times and t.ndim == 0:
            return self._read_shared(_interval(self.block_ts, self.ts, t), t)
        t = jnp.broadcast_to(t, self.lengths.shape)

        def evaluate_one(interpolation, block_ts, ts, ti):
            index = _interval(block_ts[None], ts[None], ti)
            return self._read(_interval_of(interpolation, index), ti)

        return jax.vmap(evaluate_one)(self.interpolation, self.block_ts, self.ts, t)

    def _read(self, piece, t) -> Float[Array, " input_size"]:
        """One sequence's value at `t` from the piece of its interval `[t_i,
        t_{i+1}]`: for a hold, the observation at `t_i`, or the one at `t_{i+1}`
        from that time on (right-continuous: at an observation time it reads
        that observation); else diffrax's interpolation."""
        if not self.hold:
            return piece.evaluate(t)
        return _hold(t, piece.ts[1], piece.ys[0], piece.ys[1])

    def _read_shared(self, index, t) -> Float[Array, "batch input_size"]:
        """Every sequence's value at `t` from the shared grid's interval `index`
        (knots `index` and `index + 1`): `_read`'s, with diffrax's
        `LinearInterpolation.evaluate` and `CubicInterpolation.evaluate` (0.7)
        transcribed over the batch, operation for operation."""

        def at(a, i):  # knot i of every sequence; a slice of (batch, 2, ...) and
            # its two halves ran 1.4x slower at 32 x 1000 x 64 on CPU
            return jax.lax.dynamic_index_in_dim(a, i, axis=1, keepdims=False)

        t_prev, t_next = jax.lax.dynamic_slice_in_dim(self.ts[0], index, 2)
        fraction = t - t_prev
        interpolation = self.interpolation
        if isinstance(interpolation, diffrax.LinearInterpolation):
            ys = interpolation.ys
            previous, following = at(ys, index), at(ys, index + 1)
            if self.hold:
                return _hold(t, t_next, previous, following)
            return previous + (following - previous) * (fraction / (t_next - t_prev))
        d, c, b, a = (at(k, index) for k in interpolation.coeffs)
        return a + fraction * (b + fraction * (c + fraction * d))


def _hold(t, t_next, previous, following):
    """A hold's value at `t` in the interval that ends at `t_next`: the
    observation at its start, `previous`, or from `t_next` on (right-continuous:
    at an observation time it reads that observation) the one there,
    `following`."""
    return jnp.where(t >= t_next, following, previous)


def _check_static_duration(
    ts: Float[Array, "batch times"], duration: float, shared_times: bool
) -> tuple[Float[Array, "batch times"], float]:
    """`ts`, checked to span `duration` (`ts[-1] - ts[0]` in their dtype), and
    the duration rounded to that dtype, as a Python float."""
    if not shared_times:
        raise ValueError(
            "static_duration needs one shared time grid: ts of shape (times,) "
            "and no lengths."
        )
    rounded = np.asarray(duration, ts.dtype)
    ts = eqx.error_if(
        ts,
        ts[0, -1] - ts[0, 0] != rounded,
        f"static_duration={duration} is not the grid's duration (ts[-1] - ts[0] "
        "in the dtype of xs).",
    )
    return ts, float(rounded)


def _count_below(
    values: Float[Array, "rows columns"], first: Int[ArrayLike, ""], size: int, t
) -> Int[Array, ""]:
    """How many of `values[0, first : first + size]` (increasing) are below `t`.

    Up to `_COMPARE_ALL` values are compared all at once, from a slice: no loop,
    which a gradient would have to carry through every solver step. Beyond that,
    a bisection reads single entries, so that the row is never copied out (a day
    at 250 Hz holds 1.3 MB of `block_ts` per row)."""
    if size <= _COMPARE_ALL:
        window = jax.lax.dynamic_slice_in_dim(values[0], first, size)
        return jnp.sum(window < t, dtype=jnp.int32)

    def halve(_, bounds):
        low, high = bounds
        middle = (low + high) // 2
        below = (low < high) & (values[0, first + middle] < t)
        return jnp.where(below, middle + 1, low), jnp.where(below, high, middle)

    bounds = (jnp.int32(0), jnp.int32(size))
    low, _ = jax.lax.fori_loop(0, size.bit_length(), halve, bounds)
    return low


def _interval(
    block_ts: Float[Array, "rows blocks"], ts: Float[Array, "rows times"], t
) -> Int[Array, ""]:
    """diffrax's interval of `t` in the first row of `ts`: `#(knots < t) - 1`,
    clipped to `[0, times - 2]`.

    The block holding `t` is found among every 64th knot; block k covers the
    knots from k * 64 on, the last block moved back to end at the last knot.
    Every knot before the block is below `t` and every knot after it is not, so
    the count within the block's 65 knots gives the count over the row."""
    times = ts.shape[1]
    intervals = min(_BLOCK, times - 1)  # per block
    block = jnp.maximum(_count_below(block_ts, 0, block_ts.shape[1], t) - 1, 0)
    start = jnp.minimum(block * _BLOCK, times - 1 - intervals)
    below = start + _count_below(ts, start, intervals + 1, t)
    return jnp.clip(below - 1, 0, times - 2)


def _positions(times: int) -> Int[Array, "1 times"]:
    """`[[0, 1, ..., times - 1]]`: positions along the time axis of a batch."""
    return jnp.arange(times, dtype=jnp.int32)[None]


def _check_times(
    ts: Float[Array, "batch times"], valid: Bool[Array, "batch times"]
) -> Float[Array, "batch times"]:
    increasing = ts[:, 1:] > ts[:, :-1]  # False for NaN as well.
    bad_step = valid[:, 1:] & ~increasing
    bad_value = valid & ~jnp.isfinite(ts)
    return eqx.error_if(
        ts,
        jnp.any(bad_step) | jnp.any(bad_value),
        "ts must be finite and strictly increasing within each sequence's length "
        "(found a repeated, decreasing, NaN or infinite timestamp). Repeated "
        "times can be distinct ones rounded together: large times such as Unix "
        f"seconds collide in {ts.dtype}. {FIX}",
    )


def _check_resolution(
    given: ArrayLike | Sequence,
    ts: Float[Array, "batch times"],
    valid: Bool[Array, "batch times"],
) -> Float[Array, "batch times"]:
    """Refuse times whose gaps `ts`'s dtype rounds away (see `ltc_jax._times`):
    with the figures when the times are concrete (checked in the precision they
    were `given` in), by `eqx.error_if` under a trace."""
    if not isinstance(given, jax.core.Tracer) and not isinstance(
        valid, jax.core.Tracer
    ):
        problem = time_resolution_problem(
            np.broadcast_to(np.asarray(given), ts.shape),
            np.sum(np.asarray(valid), axis=1),
            ts.dtype,
        )
        if problem is not None:
            raise ValueError(problem)
        return ts
    resolution, smallest = resolution_and_smallest_gap(ts, valid, ts.dtype, xp=jnp)
    return eqx.error_if(
        ts,
        resolution > MAX_ROUNDING * smallest,
        f"ts lose their resolution in {ts.dtype}: at the size of these times "
        f"{ts.dtype} cannot hold the gaps between observations. {FIX}",
    )


EMPTY_CHANNEL_REMEDY = (
    "pass empty_channel_fill to give such channels a constant value, or drop "
    "those sequences."
)
"""What the library's error asks for a channel never observed."""


def empty_channel_problem(
    empty: np.ndarray, remedy: str = EMPTY_CHANNEL_REMEDY
) -> str | None:
    """Which channels of which sequences hold no observed value, and `remedy`,
    or `None`.

    **Arguments:** `empty`: `bool[batch, channels]` (or with a middle axis of 1),
    True where a channel of a sequence has no observation inside its length;
    `remedy`: what to do about it (default: the library's argument; the
    command line names its option).
    """
    sequences, channels = np.nonzero(np.reshape(empty, (empty.shape[0], -1)))
    if not sequences.size:
        return None
    pairs = ", ".join(
        f"channel {c} of sequence {b}"
        for b, c in zip(sequences[:5], channels[:5], strict=True)
    )
    more = f" and {sequences.size - 5} more" if sequences.size > 5 else ""
    return f"No observed value (all NaN) in {pairs}{more}; {remedy}"


def _check_observed(
    xs: Float[Array, "batch times channels"], empty: Bool[Array, "batch 1 channels"]
) -> Float[Array, "batch times channels"]:
    """Refuse a channel without any observation in a sequence: naming them when
    the values are concrete, by `eqx.error_if` under a trace."""
    if not isinstance(empty, jax.core.Tracer):
        problem = empty_channel_problem(np.asarray(empty))
        if problem is not None:
            raise ValueError(problem)
        return xs
    return eqx.error_if(
        xs,
        jnp.any(empty),
        "A channel has no observed value (all NaN) in some sequence; pass "
        "empty_channel_fill to give such channels a constant value.",
    )


def _first_observed(
    xs: Float[Array, "batch times channels"],
) -> Float[Array, "batch channels"]:
    """Each channel's first non-NaN value (NaN if it has none)."""
    first = jnp.argmax(~jnp.isnan(xs), axis=1)  # (batch, channels)
    return jnp.take_along_axis(xs, first[:, None, :], axis=1)[:, 0, :]


def _time_since_observation(
    ts: Float[Array, "batch times"], observed: Bool[Array, "batch times channels"]
) -> Float[Array, "batch times channels"]:
    """GRU-D's delta (Che et al. 2018): time since each channel's previous
    observation, at every observation time."""
    gaps = jnp.diff(ts, axis=1, prepend=ts[:, :1])  # 0 at the first time

    def step(previous, inputs):
        gap, was_observed = inputs
        delta = gap[:, None] + jnp.where(was_observed, 0, previous)
        return delta, delta

    zeros = jnp.zeros(observed.shape[::2], ts.dtype)  # (batch, channels)
    shifted = jnp.concatenate(
        [jnp.ones_like(observed[:, :1]), observed[:, :-1]], axis=1
    )
    _, deltas = jax.lax.scan(step, zeros, (gaps.T, jnp.swapaxes(shifted, 0, 1)))
    return jnp.swapaxes(deltas, 0, 1)


def _hold_values(
    xs: Float[Array, "batch times channels"],
) -> Float[Array, "batch times channels"]:
    """Each missing (NaN) value replaced by its channel's last observed value
    before it, and by 0 before the channel's first observation: what a hold
    reads on the interval after each knot, from nothing later."""
    observed = ~jnp.isnan(xs)
    position = jnp.arange(xs.shape[1], dtype=jnp.int32)[None, :, None]
    last = jax.lax.cummax(jnp.where(observed, position, -1), axis=1)
    held = jnp.take_along_axis(xs, jnp.maximum(last, 0), axis=1)
    return jnp.where(last >= 0, held, jnp.zeros((), xs.dtype))


def _pad_after_end(ts, xs, lengths, valid):
    """Replace padding by the last observation, at increasing times after the end."""
    last = lengths[:, None] - 1
    t_last = jnp.take_along_axis(ts, last, axis=1)
    x_last = jnp.take_along_axis(xs, last[..., None], axis=1)
    steps_past_end = (_positions(ts.shape[1]) - last).astype(ts.dtype)
    spacing = jnp.maximum(1.0, jnp.abs(t_last))  # stays distinct in low precision
    ts = jnp.where(valid, ts, t_last + steps_past_end * spacing)
    xs = jnp.where(valid[..., None], xs, x_last)
    return ts, xs


def _interval_of(
    interpolation: diffrax.LinearInterpolation | diffrax.CubicInterpolation,
    index: Int[Array, ""],
) -> diffrax.LinearInterpolation | diffrax.CubicInterpolation:
    """One sequence's interpolation restricted to its interval `index` (knots
    `index` and `index + 1`). diffrax evaluates it exactly as the whole
    interpolation on that interval."""

    def piece(a, size):
        return jax.lax.dynamic_slice_in_dim(a, index, size)

    ts = piece(interpolation.ts, 2)
    if isinstance(interpolation, diffrax.LinearInterpolation):
        ys = jax.tree.map(lambda a: piece(a, 2), interpolation.ys)
        return eqx.tree_at(lambda i: (i.ts, i.ys), interpolation, (ts, ys))
    coeffs = jax.tree.map(lambda a: piece(a, 1), interpolation.coeffs)
    return eqx.tree_at(lambda i: (i.ts, i.coeffs), interpolation, (ts, coeffs))
