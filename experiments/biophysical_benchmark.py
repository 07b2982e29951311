"""The biophysical LTC with the fused step on a 1000-step sequence: memory and time
of a training step, next to the simplified LTC under the same solver.

The original authors' code (`ncps`) keeps about 64 MiB per sequence step at batch
32 and 128 units, so 1000 steps would need some 60 GiB. Here both cells take the
fused semi-implicit step (6 unfolds) once per sample of real ECG windows
(MIT-BIH record 208, 1001 samples at 360 Hz, forecasting the signal 0.1 s after
each window), batch 32, 128 units, under full storage and checkpointing. Each
configuration is measured in its own process, so its runtime peak is its own.

    python -m experiments.biophysical_benchmark           # default, about 5 min
    python -m experiments.biophysical_benchmark --quick   # smoke test, under a minute

Writes `results/biophysical_benchmark/<run>/`: `config.json`, `metrics.json`, and
prints the table with the 1 GiB target marked.
"""

import dataclasses
import os

import jax
import tyro

import ltc_jax
from experiments import _problems, _report, _run


TARGET_BYTES = 2**30


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """Train-step memory and time of the biophysical and the simplified LTC.

    `--quick`: smoke-test sizes (under a minute), measured in this process.
    """

    steps: int = 1000
    """Sequence steps: windows of `steps + 1` ECG samples, one fused step each."""
    batch_size: int = 32
    hidden_size: int = 128
    ode_unfolds: int = 6
    horizon: int = 36
    """Forecast this many samples (0.1 s) after each window."""
    cells: tuple[str, ...] = ("biophysical", "ltc")
    adjoints: tuple[str, ...] = ("full", "checkpoint")
    wiring: str = "fc"
    seed: int = 0
    timed_steps: int = 3


QUICK = dict(steps=20, batch_size=4, hidden_size=8, timed_steps=1)


def measure_configuration(config: dict, cell: str, adjoint: str) -> dict:
    """Measure one training step of one cell and gradient mode (float32)."""
    config = Config(**config)
    model, batch = _problems.ecg_problem(
        config.steps + 1,
        batch_size=config.batch_size,
        hidden_size=config.hidden_size,
        horizon=config.horizon,
        seed=config.seed,
        cell=cell,
        wiring=config.wiring,
    )
    with jax.enable_x64(False):
        # One fused step per sample (1/360 s).
        integrator = ltc_jax.make_integrator(
            "fused",
            adjoint,
            dt0=1 / 360,
            ode_unfolds=config.ode_unfolds,
            max_steps=config.steps,
        )
        m = ltc_jax.measure(model, batch, integrator, timed_steps=config.timed_steps)
    return dict(cell=cell, adjoint=adjoint, **m.figures())


def main(config: Config) -> dict:
    """Measure every cell and gradient mode; return (and write) the metrics."""
    config, run_dir = _run.start_run(config, "biophysical_benchmark", QUICK)
    rows = []
    for cell in config.cells:
        for adjoint in config.adjoints:
            kwargs = dict(config=dataclasses.asdict(config), cell=cell, adjoint=adjoint)
            # Its own process at every size, so that its runtime peak is its own.
            row = ltc_jax.call_in_subprocess(
                "experiments.biophysical_benchmark:measure_configuration", kwargs
            )
            rows.append(row)
            print(f"{cell}/{adjoint}: {row['step_seconds']:.2f} s/step")
    metrics = dict(
        rows=rows,
        target_bytes=TARGET_BYTES,
        environment=ltc_jax.environment(),
        run_dir=run_dir,
    )
    _run.write_json(os.path.join(run_dir, "metrics.json"), metrics)
    print(format_report(metrics, config))
    return metrics


def _target(row: dict) -> str:
    peaks = [row["temp_bytes"] + row["argument_bytes"] + row["output_bytes"]]
    if row["runtime_peak_bytes"] is not None:
        peaks.append(row["runtime_peak_bytes"])
    return "met" if max(peaks) < TARGET_BYTES else "not met"


def format_report(metrics: dict, config: Config) -> str:
    table = _report.format_table(
        metrics["rows"],
        [
            ("cell", lambda r: r["cell"]),
            ("gradient", lambda r: r["adjoint"]),
            ("steps", lambda r: r["num_steps"]),
            *_report.measurement_columns(mib_digits=1, seconds_format=".2f"),
            (
                "evaluations fwd + bwd",
                lambda r: (
                    f"{r['forward_evaluations']:,} + {r['backward_evaluations']:,}"
                ),
            ),
            ("under 1 GiB", _target),
        ],
    )
    return (
        f"\nFused step ({config.ode_unfolds} unfolds) over {config.steps} steps, batch "
        f"{config.batch_size}, {config.hidden_size} units, float32:\n{table}\n\n"
        f"run folder {metrics['run_dir']}"
    )


if __name__ == "__main__":
    main(tyro.cli(Config))
