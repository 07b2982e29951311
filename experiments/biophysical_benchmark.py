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

Writes `results/biophysical_benchmark/<run>/`: `config.json`, `metrics.json` and
`report.txt` with the table, the 1 GiB target marked (`experiments._report`), and
prints the table.
"""

import dataclasses

import jax
import tyro

import ltc_jax
from experiments import _problems, _run


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
    """Measure one training step of one cell and gradient mode (float32; in a
    fresh process, so that its runtime peak is its own)."""
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
        m = ltc_jax.measure.measure(
            model, batch, integrator, timed_steps=config.timed_steps
        )
    return dict(cell=cell, adjoint=adjoint, **m.figures())


def main(config: Config) -> dict:
    """Measure every cell and gradient mode; return (and write) the metrics."""
    config, run = _run.start_run(config, "biophysical_benchmark", QUICK)
    rows = []
    for cell in config.cells:
        for adjoint in config.adjoints:
            kwargs = dict(config=dataclasses.asdict(config), cell=cell, adjoint=adjoint)
            row = ltc_jax.measure.call_in_subprocess(
                "experiments.biophysical_benchmark:measure_configuration", kwargs
            )
            rows.append(row)
            print(f"{cell}/{adjoint}: {row['step_seconds']:.2f} s/step")
    return run.finish(dict(rows=rows, target_bytes=TARGET_BYTES))


if __name__ == "__main__":
    main(tyro.cli(Config))
