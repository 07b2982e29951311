"""Run folders of the experiments: `results/<experiment>/<date>-<time>/` with
`config.json` at the start and `metrics.json` (with the environment) and
`report.txt` at the end. Nothing is ever overwritten."""

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ltc_jax
from experiments import _report
from ltc_jax.app import make_run_dir


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The options every experiment and benchmark starts with; each one's `Config`
    adds its own and says in its description what `--quick` runs."""

    out: str | None = None
    """Run folder. Default: results/<the script's name>/<date>-<time>. A folder
    that already holds files is never overwritten."""
    quick: bool = False
    """Smoke-test sizes: the options of the script's small `QUICK` preset that are
    at their defaults take the preset's values; options given other values keep
    theirs (the description says what it runs)."""


def apply_quick(config: Any, quick: dict) -> Any:
    """`config` with the `quick` preset where `config.quick` asks for it: the
    preset's values for the options at their defaults; options set to other
    values keep theirs. (An option given at its default value cannot be told
    from one left there: it takes the preset's value.)"""
    if not config.quick:
        return config
    defaults = type(config)()
    preset = {
        name: value
        for name, value in quick.items()
        if getattr(config, name) == getattr(defaults, name)
    }
    return dataclasses.replace(config, **preset)


def start_run(
    config: Any, experiment: str, quick: dict | None = None
) -> tuple[Any, str]:
    """The configuration to run (`config` with the `quick` preset applied, as
    `apply_quick` does) and a fresh `results/<experiment>/<date>-<time>/` (or
    `config.out`) holding it as `config.json`.

    **Raises:** `FileExistsError` for a non-empty `config.out`."""
    if quick is not None:
        config = apply_quick(config, quick)
    run_dir = make_run_dir(config.out, os.path.join("results", experiment))
    write_json(os.path.join(run_dir, "config.json"), dataclasses.asdict(config))
    return config, run_dir


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


def finish(run_dir: str, metrics: dict, report: Callable[[dict], str]) -> dict:
    """Add the environment and the run folder to `metrics`, write `metrics.json`,
    then `report(metrics)` to `report.txt` and the screen; return the metrics."""
    metrics = dict(metrics, environment=ltc_jax.environment(), run_dir=run_dir)
    write_json(os.path.join(run_dir, "metrics.json"), metrics)
    text = report(metrics)
    with open(os.path.join(run_dir, "report.txt"), "w") as file:
        file.write(text + "\n")
    print(text)
    print(f"\nrun folder {run_dir}")
    return metrics


def finish_table(
    run_dir: str,
    rows: list[dict],
    columns: Sequence[tuple[str, Callable[[dict], Any]]],
    title: Callable[[dict], str],
) -> dict:
    """`finish` with the metrics `dict(rows=rows)` and the report
    `"<title(environment)>:"` over the table of `columns` of the rows
    (`_report.format_table`); return the metrics."""

    def report(metrics):
        table = _report.format_table(metrics["rows"], columns)
        return f"{title(metrics['environment'])}:\n{table}"

    return finish(run_dir, dict(rows=rows), report)


def cpu_name() -> str | None:
    """The CPU's model name (Linux's `/proc/cpuinfo`), or `None` where unknown."""
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
