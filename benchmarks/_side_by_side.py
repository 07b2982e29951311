"""Timing two (or more) compiled steps side by side in one process, call by call
alternated, so that a shared machine's load falls on each alike."""

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

import ltc_jax
from experiments import _run


Calls = dict[Any, tuple[Callable[..., Any], tuple]]


def compile_and_run(calls: Calls) -> tuple[dict, dict]:
    """Call each step once (compiling it). **Returns:** per name, the seconds of
    that first call and the loss it returned (its output's third entry)."""
    seconds, losses = {}, {}
    for name, (step, args) in calls.items():
        start = time.perf_counter()
        out = jax.block_until_ready(step(*args))
        seconds[name] = time.perf_counter() - start
        losses[name] = float(out[2])
    return seconds, losses


def time_alternately(calls: Calls, repeats: int) -> dict[Any, list[float]]:
    """Seconds of `repeats` calls of each step, one call of each in turn."""
    seconds = {name: [] for name in calls}
    for _ in range(repeats):
        for name, (step, args) in calls.items():
            seconds[name] += ltc_jax.time_calls(step, *args, warmup=0, repeats=1)
    return seconds


def ratio_figures(numerator: list[float], denominator: list[float]) -> dict:
    """The median, least and largest of the call-by-call ratios."""
    ratios = [a / b for a, b in zip(numerator, denominator, strict=True)]
    return dict(
        ratio_median=statistics.median(ratios),
        ratio_min=min(ratios),
        ratio_max=max(ratios),
    )


def timed_figures(
    calls: Calls,
    repeats: int,
    compile_seconds: dict,
    ratio: tuple[Any, Any],
    unit: str = "step",
) -> dict:
    """Time `repeats` calls of each step alternately (`time_alternately`).

    **Returns:** `compile_and_first_<unit>_seconds` (`compile_seconds`, from
    `compile_and_run`), `<unit>_seconds` (every timed call, in seconds),
    `median_<unit>_seconds`, each per name, and the `ratio_figures` of the
    seconds of the call named `ratio[0]` over those of `ratio[1]`."""
    seconds = time_alternately(calls, repeats)
    first, second = (seconds[name] for name in ratio)
    return {
        f"compile_and_first_{unit}_seconds": compile_seconds,
        f"{unit}_seconds": seconds,
        f"median_{unit}_seconds": {k: statistics.median(v) for k, v in seconds.items()},
        **ratio_figures(first, second),
    }


def ratio_column(title: str, digits: int = 2) -> tuple[str, Callable[[dict], str]]:
    """A report column `median (min-max)` of a row holding `ratio_figures`."""

    def cell(row):
        return (
            f"{row['ratio_median']:.{digits}f}x "
            f"({row['ratio_min']:.{digits}f}-{row['ratio_max']:.{digits}f})"
        )

    return title, cell


def pair_column(
    field: str, first: str, second: str, unit: str = "step s", digits: int = 4
) -> tuple[str, Callable[[dict], str]]:
    """A report column `first / second` of `row[field]`, titled
    `"<unit>: <first> / <second>"`."""

    def cell(row):
        return f"{row[field][first]:.{digits}f} / {row[field][second]:.{digits}f}"

    return f"{unit}: {first} / {second}", cell


def finish(
    run_dir: str,
    rows: list[dict],
    columns: Sequence[tuple[str, Callable[[dict], str]]],
    title: str,
) -> dict:
    """`_run.finish_table` under the title `"<title> (float32, <backend>, <n>
    CPUs, <CPU model>)"`: the rows written, the table printed; return the
    metrics."""

    def machine(env):
        return (
            f"{title} (float32, {env['backend']}, {env['cpu_count']} CPUs, "
            f"{_run.cpu_name()})"
        )

    return _run.finish_table(run_dir, rows, columns, machine)
