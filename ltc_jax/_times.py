"""Whether a floating dtype can hold a batch's observation times without
rounding away the gaps between them.

A float keeps about 7 significant digits in float32 and 16 in float64, so what
it can resolve depends on how large the times are, not on how far apart they
are. Unix times (about 1.7e9 s) are held in float32 to multiples of 128 s: gaps
of 300 s become 256 or 384 s, and gaps under a minute vanish. The check below
compares the dtype's resolution at the largest time with the smallest gap.
"""

import numpy as np
from jaxtyping import ArrayLike


MAX_ROUNDING = 0.1
"""The largest rounding of a time accepted, as a fraction of the smallest gap
between observations: above it, a gap could change by more than a tenth. (A
day of ECG at 250 Hz in float32 rounds each 4 ms gap to 0 or 8 ms and is
refused; 280 s of it at 360 Hz rounds by 1.1% of a gap and is accepted.)"""

FIX = (
    "Give each sequence's times relative to its start, subtracted in float64 "
    "(ts - ts[:, :1]; make_input_path does this for a SequenceDataset), or "
    "enable float64 (jax.config.update('jax_enable_x64', True))."
)


def resolution_and_smallest_gap(ts, valid, dtype, xp=np) -> tuple:
    """The resolution of `dtype` at the largest `|ts|`, and the smallest positive
    gap between consecutive times, over the positions where `valid` is True.

    **Arguments:** `ts` and `valid` of shape `(batch, times)`, as arrays of `xp`
    (`numpy`, or `jax.numpy` under a trace); `dtype`, the floating dtype the
    times are (or will be) held in.

    **Returns:** two scalars of `xp`, in the unit of `ts`; the gap is infinite
    without two valid times (or no positive gap: equal or decreasing times are
    another error, reported where the times are checked).
    """
    gaps = xp.diff(ts, axis=1)
    usable = valid[:, 1:] & (gaps > 0)
    smallest = xp.min(xp.where(usable, gaps, xp.inf), initial=xp.inf)
    largest = xp.max(xp.where(valid, xp.abs(ts), 0), initial=0)
    return xp.spacing(xp.asarray(largest, dtype)), smallest


def time_resolution_problem(
    ts: ArrayLike,
    lengths: ArrayLike | None,
    dtype,
    name: str = "ts",
    fix: str = FIX,
) -> str | None:
    """Why `dtype` cannot hold the times `ts`, or `None` when it can.

    **Arguments:**

    - `ts`: `(batch, times)` (or `(times,)`) observation times, in the precision
        they were given in (a NumPy or concrete JAX array).
    - `lengths`: `(batch,)` observations per sequence; `None`: every position.
    - `dtype`: the floating dtype the times are held in for the solve.
    - `name`: what to call the times in the message.
    - `fix`: what the message advises (default [`FIX`][]).

    **Returns:** a message naming the resolution, the smallest gap and the fix
    when rounding the times to `dtype` could change a gap by more
    than [`MAX_ROUNDING`][] of the smallest gap; else `None`.
    """
    ts = np.atleast_2d(np.asarray(ts))
    if lengths is None:
        valid = np.ones(ts.shape, dtype=bool)
    else:
        valid = np.arange(ts.shape[1])[None] < np.asarray(lengths)[:, None]
    resolution, smallest = resolution_and_smallest_gap(
        ts.astype(np.float64), valid, np.dtype(dtype)
    )
    if not resolution > MAX_ROUNDING * smallest:
        return None
    largest = float(np.max(np.abs(ts[valid])))
    return (
        f"{name} lose their resolution in {np.dtype(dtype).name}: the times reach "
        f"{largest:.6g}, where {np.dtype(dtype).name} resolves only steps of "
        f"{float(resolution):.3g}, but the smallest gap between observations is "
        f"{float(smallest):.6g}, so the gaps would be rounded. {fix}"
    )
