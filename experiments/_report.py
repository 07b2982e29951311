"""Tables, figures and number formats shared by the experiments' reports."""

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


MIB = 2**20
GIB = 2**30


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
    """`"97.6 ± 0.3"` from fractions; `"failed"` for NaN."""
    return "failed" if math.isnan(mean) else f"{100 * mean:.1f} ± {100 * std:.1f}"


def mib(value: int | float | None, digits: int = 2) -> str:
    """Bytes as MiB; `"-"` where not measured."""
    return "-" if value is None else f"{value / MIB:,.{digits}f}"


def error(value: float | None) -> str:
    """A relative error; `"non-finite"` where there is none."""
    return "non-finite" if value is None else f"{value:.1e}"


def ratio(value: float | None, suffix: str = "") -> str:
    """A ratio to two decimals; `"-"` where it was not measured."""
    return "-" if value is None else f"{value:.2f}{suffix}"


def count(value: int | None) -> str:
    """An integer with thousands separators; `"-"` where not counted."""
    return "-" if value is None else f"{value:,}"


def measurement_columns(
    mib_digits: int, seconds_format: str
) -> list[tuple[str, Callable[[dict], str]]]:
    """The memory and time columns of a `ltc_jax.Measurement` record (as a dict):
    compiled temp and argument MiB and the runtime peak MiB to `mib_digits`
    places, then the training step's and the forward pass's seconds in
    `seconds_format` (say `".3f"`)."""
    return [
        ("temp MiB", lambda r: mib(r["temp_bytes"], mib_digits)),
        ("args MiB", lambda r: mib(r["argument_bytes"], mib_digits)),
        ("runtime peak MiB", lambda r: mib(r["runtime_peak_bytes"], mib_digits)),
        ("step s", lambda r: format(r["step_seconds"], seconds_format)),
        ("forward s", lambda r: format(r["forward_seconds"], seconds_format)),
    ]


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend (no screen)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure, path: str, dpi: int = 110, **layout: Any) -> None:
    """Lay `figure` out (`tight_layout(**layout)`), write it to `path` at `dpi`
    dots per inch, and close it."""
    figure.tight_layout(**layout)
    figure.savefig(path, dpi=dpi)
    pyplot().close(figure)
