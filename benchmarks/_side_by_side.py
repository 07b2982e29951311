"""Timing two (or more) compiled steps side by side in one process, call by call
alternated, so that a shared machine's load falls on each alike."""

import statistics
import time
from collections.abc import Callable
from typing import Any

import jax

import ltc_jax
from experiments import _run


Calls = dict[Any, tuple[Callable[..., Any], tuple]]
"""Per name, a compiled step and its arguments; a step returns a tuple whose third
entry is the loss (as a training step does)."""


def compare(
    calls: Calls,
    repeats: int,
    ratio: tuple[Any, Any],
    unit: str = "step",
    rtol: float | None = 0.0,
) -> dict:
    """Call each step once (compiling it) and check that the steps return the same
    loss, to `rtol` relative to the first's (`None`: not compared); then time
    `repeats` calls of each, one call of each in turn.

    **Returns:** per name, `loss` (of the first call),
    `compile_and_first_<unit>_seconds`, `<unit>_seconds` (every timed call) and
    `median_<unit>_seconds`; and `ratio_median`, `ratio_min` and `ratio_max`, of
    the call-by-call ratios of the seconds of `ratio[0]` over those of
    `ratio[1]`.

    **Raises:** `RuntimeError` where the losses differ by more than `rtol`."""
    first, losses = {}, {}
    for name, (step, args) in calls.items():
        start = time.perf_counter()
        out = jax.block_until_ready(step(*args))
        first[name] = time.perf_counter() - start
        losses[name] = float(out[2])
    reference = next(iter(losses.values()))
    if rtol is not None and any(
        abs(loss - reference) > rtol * abs(reference) for loss in losses.values()
    ):
        raise RuntimeError(f"The steps compute different losses: {losses}.")
    seconds = {name: [] for name in calls}
    for _ in range(repeats):
        for name, (step, args) in calls.items():
            seconds[name] += ltc_jax.measure.time_calls(
                step, *args, warmup=0, repeats=1
            )
    numerator, denominator = (seconds[name] for name in ratio)
    ratios = [a / b for a, b in zip(numerator, denominator, strict=True)]
    return {
        "loss": losses,
        f"compile_and_first_{unit}_seconds": first,
        f"{unit}_seconds": seconds,
        f"median_{unit}_seconds": {k: statistics.median(v) for k, v in seconds.items()},
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


def main(config: Any, name: str, quick: dict, measure: Callable, cases: str) -> dict:
    """A side-by-side benchmark's run: `measure(config, case)` for each case of
    `config.<cases>`, in float32 whatever JAX's default (with standard dtype
    promotion, as optax needs), the rows written to `results/<name>/<run>/`.

    **Returns:** the metrics as written."""
    config, run = _run.start_run(config, name, quick)
    with jax.enable_x64(False), jax.numpy_dtype_promotion("standard"):
        rows = [measure(config, case) for case in getattr(config, cases)]
    return run.finish(dict(rows=rows))
