"""Timing compiled calls: wall-clock seconds of each run, after warm-up."""

import time
from collections.abc import Callable
from typing import Any

import jax


def time_calls(
    fn: Callable[..., Any], *args: Any, warmup: int = 1, repeats: int = 3
) -> list[float]:
    """Wall-clock seconds of `repeats` calls of `fn(*args)`, each waited for with
    `jax.block_until_ready`, after `warmup` untimed calls.

    Time a function compiled already (a `jax.stages.Compiled`, or an
    `eqx.filter_jit` function after its first call) so that compilation is not
    timed; the warm-up calls absorb what remains (first-run allocation, autotuning
    on GPU). Read medians, not means: a shared machine adds outliers.

    **Arguments:** `fn`; `args` its arguments; `warmup` (default 1) and
    `repeats` (default 3) calls.

    **Returns:** `repeats` durations in seconds, in call order.

    **Raises:** `ValueError` if `repeats < 1` or `warmup < 0`.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1; got {repeats}.")
    if warmup < 0:
        raise ValueError(f"warmup must be non-negative; got {warmup}.")
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        seconds.append(time.perf_counter() - start)
    return seconds
