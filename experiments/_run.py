"""Run folders of the experiments and benchmarks: `results/<experiment>/<date>-<time>/`
with `config.json` at the start, and `metrics.json` (the records and the
environment), `report.txt` and the figures at the end. Nothing is ever overwritten."""

import dataclasses
import json
import os
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


@dataclasses.dataclass(frozen=True)
class Run:
    """A run folder, and the experiment whose report renders it."""

    experiment: str
    dir: str

    def path(self, *parts: str) -> str:
        """A path inside the run folder."""
        return os.path.join(self.dir, *parts)

    def finish(self, metrics: dict) -> dict:
        """Add the experiment's name, the environment and the run folder to
        `metrics` and write them to `metrics.json`; then render the report
        (`_report.render`: `report.txt` and the figures) and print it.

        **Returns:** the metrics as written."""
        metrics = dict(
            metrics,
            experiment=self.experiment,
            environment=dict(ltc_jax.measure.environment(), cpu=cpu_name()),
            run_dir=self.dir,
        )
        write_json(self.path("metrics.json"), metrics)
        print(_report.render(self.dir))
        print(f"\nrun folder {self.dir}")
        return metrics


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


def start_run(config: Any, experiment: str, quick: dict | None = None):
    """The configuration to run (`config` with the `quick` preset applied, as
    `apply_quick` does) and its [`Run`][]: a fresh `results/<experiment>/<date>-
    <time>/` (or `config.out`) holding the configuration as `config.json`.

    **Raises:** `FileExistsError` for a non-empty `config.out`."""
    if quick is not None:
        config = apply_quick(config, quick)
    run = Run(experiment, make_run_dir(config.out, os.path.join("results", experiment)))
    write_json(run.path("config.json"), dataclasses.asdict(config))
    return config, run


def failure_summary(error: ltc_jax.SubprocessError) -> str:
    """One line for a run whose process failed: how it ended (the message's
    first line) and its own error (the last line of its error output)."""
    lines = str(error).strip().splitlines()
    return " ".join(dict.fromkeys([lines[0], lines[-1]]))


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
