"""Plumbing shared by the experiments: run folders, JSON, plain-text tables, and the
JapaneseVowels training setup of the solver and tolerance studies."""

import dataclasses
import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import ltc_jax


def start_run(config: Any, experiment: str) -> str:
    """A fresh `results/<experiment>/<date>-<time>/` (or `config.out`) holding
    `config.json`. **Raises:** `FileExistsError` for a non-empty `config.out`."""
    run_dir = ltc_jax.make_run_dir(config.out, os.path.join("results", experiment))
    write_json(os.path.join(run_dir, "config.json"), dataclasses.asdict(config))
    return run_dir


def write_json(path: str, value: Any) -> None:
    """`value` as indented JSON; NumPy scalars and arrays become numbers and lists."""

    def default(item):
        if isinstance(item, np.generic):
            return item.item()
        if isinstance(item, np.ndarray):
            return item.tolist()
        raise TypeError(f"Cannot write {type(item).__name__} as JSON.")

    with open(path, "w") as file:
        json.dump(value, file, indent=2, default=default)


def format_table(
    rows: Sequence[dict], columns: Sequence[tuple[str, Callable[[dict], Any]]]
) -> str:
    """A fixed-width table: one line per row, `columns` as `(header, cell_of_row)`."""
    cells = [[str(cell(row)) for _, cell in columns] for row in rows]
    widths = [
        max([len(header)] + [len(line[i]) for line in cells])
        for i, (header, _) in enumerate(columns)
    ]
    lines = ["  ".join(h.ljust(w) for (h, _), w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True))
        for line in cells
    ]
    return "\n".join(lines)


def mean_std(values: Sequence[float | None]) -> tuple[float, float, int]:
    """Mean and sample standard deviation of the finite values, and their count."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, 0
    std = float(np.std(finite, ddof=1)) if len(finite) > 1 else 0.0
    return float(np.mean(finite)), std, len(finite)


def percent(mean: float, std: float) -> str:
    return "failed" if math.isnan(mean) else f"{100 * mean:.1f} ± {100 * std:.1f}"


def cast(tree: Any, dtype: str) -> Any:
    """Every floating-point array of `tree` cast to `dtype`."""

    def convert(x):
        return x.astype(dtype) if eqx.is_inexact_array(x) else x

    return jax.tree.map(convert, tree)


def japanese_vowels(train_size: int | None = None, seed: int = 0):
    """Standardised `(train, test)` JapaneseVowels, optionally a training subset."""
    train, test = ltc_jax.datasets.standardize(*ltc_jax.datasets.load_japanese_vowels())
    if train_size is not None:
        order = np.random.default_rng(seed).permutation(len(train))
        train = train.take(order[:train_size])
    return train, test


def longest_duration(*datasets) -> float:
    """The longest sequence's duration (last minus first observation time)."""
    return max(
        float(np.max(d.ts[np.arange(len(d)), d.lengths - 1] - d.ts[:, 0]))
        for d in datasets
    )


def vowels_model(hidden_size: int, seed: int, tau: float | None = None) -> ltc_jax.LTC:
    """The float32 JapaneseVowels LTC of a seed (whatever JAX's default float);
    `tau` draws the initial time constants from `[tau / 2, 2 tau]` frames instead
    of `[0.1, 10]`."""
    tau_init = (0.1, 10.0) if tau is None else (tau / 2, 2 * tau)
    with jax.enable_x64(False):
        return ltc_jax.LTC(
            12, hidden_size, 9, tau_init=tau_init, key=jax.random.PRNGKey(seed)
        )


def float32_paths(*datasets) -> list[ltc_jax.InputPath]:
    """Each dataset's input path in float32, the experiments' precision, whatever
    JAX's default float (the tests run in float64)."""
    return [ltc_jax.dataset_path(data, dtype=np.float32) for data in datasets]


def ecg_batch(
    window: int,
    *,
    horizon: int,
    batch_size: int,
    dtype: str = "float32",
    interpolation: str = "linear",
) -> ltc_jax.Batch:
    """`batch_size` windows of `window` samples of the MIT-BIH 208 ECG, evenly
    spaced from the recording's start, each labelled with the value `horizon`
    samples after its end (millivolts); times in seconds from each window's
    start, everything in `dtype`."""
    ts, millivolts = ltc_jax.datasets.load_mitbih_208()
    spacing = (len(ts) - window - horizon) // batch_size
    data = ltc_jax.datasets.forecast_windows(
        ts,
        millivolts,
        window=window,
        horizon=horizon,
        starts=np.arange(batch_size) * spacing,
    )
    path = ltc_jax.InputPath(
        jnp.asarray(data.ts - data.ts[:, :1], dtype),
        jnp.asarray(data.xs, dtype),
        interpolation=interpolation,
    )
    return ltc_jax.Batch(
        path, jnp.asarray(data.labels, dtype), jnp.ones(batch_size, dtype)
    )


def train_skipping_failures(
    model: ltc_jax.LTC, train, integrator, optimizer, *, epochs, batch_size, seed, path
):
    """`ltc_jax.fit` as the experiments train: a failed update (a solve past
    `max_steps`, a non-finite loss or gradient) is skipped and counted; five in a
    row end the run with `ltc_jax.TrainingFailedError`, which the experiments
    record as a result."""
    return ltc_jax.fit(
        model,
        train,
        integrator=integrator,
        optimizer=optimizer,
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        path=path,
        on_failure="skip",
        max_consecutive_failures=5,
        progress=False,
    )
