"""What the state-bound divergence check costs a training step, measured side by
side in one process: the same step compiled with `check_state=True` (the default)
and `check_state=False`, alternated call by call so that a shared machine's load
falls on both.

Two sizes:

- `vowels`: the main job on JapaneseVowels with adaptive steps (64-unit LTC,
  batch 16, Tsit5 at rtol 1e-3 / atol 1e-4, `checkpoint`);
- `ecg`: 1e5 fixed RK4 steps over ECG windows of 1e5 samples at 250 Hz
  (`checkpoint`), where the check reads one saved state per sequence.

    python -m benchmarks.divergence_check           # the sizes above
    python -m benchmarks.divergence_check --quick   # seconds

Prints the median step seconds with and without the check, the ratio and its
spread over the repeats, and writes `results/divergence_check/<run>/`
(`metrics.json`, and `report.txt` with the table by `experiments._report`).
"""

import dataclasses
from typing import Literal

import equinox as eqx
import tyro

import ltc_jax
from benchmarks import _side_by_side
from experiments import _problems, _run


Case = Literal["vowels", "ecg"]


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """The divergence check's share of a training step.

    `--quick`: tiny sizes (seconds): 8 units, batch 4, ECG windows of 1,000 samples.
    """

    cases: tuple[Case, ...] = ("vowels", "ecg")
    """JapaneseVowels with Tsit5 (the main job), the ECG with fixed-step RK4."""
    hidden_size: int = 64
    """LTC units of the JapaneseVowels case."""
    batch_size: int = 16
    """Utterances per JapaneseVowels training batch."""
    ecg_window: int = 100_000
    """ECG samples per window: as many RK4 steps of 1/250 s."""
    ecg_batch_size: int = 4
    """Windows per ECG training batch."""
    ecg_hidden_size: int = 32
    """LTC units of the ECG case."""
    repeats: int = 10
    """Timed steps of each variant (alternated), after one warm-up."""
    seed: int = 0
    """Seeds the model's parameters."""


QUICK = dict(
    hidden_size=8,
    batch_size=4,
    ecg_window=1_000,
    ecg_batch_size=2,
    ecg_hidden_size=8,
    repeats=3,
)


def vowels_problem(config: Config):
    """The main job's model with Tsit5 at rtol 1e-3, and the first training batch."""
    train, _ = _problems.japanese_vowels()
    model = _problems.vowels_model(config.hidden_size, config.seed)
    batch = next(ltc_jax.batches(train, config.batch_size))
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4)
    return model, batch, integrator, "JapaneseVowels, Tsit5 rtol 1e-3"


def ecg_problem(config: Config):
    """An LTC on ECG windows, RK4 with one step per sample."""
    steps = config.ecg_window - 1  # one per sample interval
    model, batch = _problems.ecg_problem(
        config.ecg_window,
        batch_size=config.ecg_batch_size,
        hidden_size=config.ecg_hidden_size,
        horizon=1,
        seed=config.seed,
    )
    integrator = ltc_jax.make_integrator("rk4", dt0=1 / 250, max_steps=steps)
    return model, batch, integrator, f"ECG, RK4 x {steps}"


def measure_case(config: Config, case: Case) -> dict:
    problem = {"vowels": vowels_problem, "ecg": ecg_problem}[case]
    model, batch, integrator, label = problem(config)
    calls = {}
    for name, checked in (("checked", True), ("unchecked", False)):
        _, step, opt_state = _problems.train_step(
            model, dataclasses.replace(integrator, check_state=checked), total_steps=100
        )
        calls[name] = (eqx.filter_jit(step), (model, opt_state, batch))
    # The check never changes the loss (`compare` raises if it does).
    figures = _side_by_side.compare(calls, config.repeats, ("checked", "unchecked"))
    return dict(case=case, label=label, **figures)


def main(config: Config) -> dict:
    """Measure every case; return (and write) the rows."""
    return _side_by_side.main(config, "divergence_check", QUICK, measure_case, "cases")


if __name__ == "__main__":
    main(tyro.cli(Config))
