"""Per-sequence irregular times: one batched solve against a solve per sequence
(`jax.vmap`), epoch against epoch, side by side in one process.

Under `batching="batched"` the batch is one ODE state on a shared solver clock,
so an adaptive solve with a linear input stops at every observation time of
every sequence (the union over the batch) and takes the step size of the
hardest sequence; under `"vmap"` each sequence takes its own steps. With fixed
steps the clock counts steps and the batched solve is exact, so only adaptive
steps are compared. The cases are JapaneseVowels as recorded (the sample
index as time: the sequences share a time grid up to their lengths) and with
half of each sequence's observations dropped at random, the ArrowHead series
with the same drop, and that once more with each sequence's times rescaled to
[0, 1] (per-sequence times that no two sequences share), all at the main job's
adaptive settings (Tsit5 at rtol 1e-3, atol 1e-4, as with `--rtol 1e-3`;
`checkpoint`, the derived batch size). The main job's default fused step takes
fixed steps and is always batched.

    python -m benchmarks.batching           # a few minutes on 2 cores
    python -m benchmarks.batching --quick   # one small case, seconds

Prints, per case, the median seconds of an epoch of training steps under each
strategy (epochs alternated, after one compiling epoch), their ratio with its
spread, the mean solver steps per batch (the most over each batch), the
[`ltc_jax.training.batch_stop_ratio`][] and the strategy
[`ltc_jax.training.derive_defaults`][] chooses from it; writes
`results/batching/<run>/` (`metrics.json`, and `report.txt` with the table by
`experiments._report`).
"""

import dataclasses
import os

import equinox as eqx
import jax
import numpy as np
import tyro

import ltc_jax
from benchmarks import _side_by_side
from experiments import _problems, _run


UEA = os.path.join(os.path.dirname(__file__), "..", "experiments", "data", "uea")


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """One batched solve against a solve per sequence, per epoch.

    `--quick`: one case at 8 units and two timed epochs (seconds).
    """

    cases: tuple[str, ...] = (
        "JapaneseVowels",
        "JapaneseVowels@0.5",
        "ArrowHead@0.5",
        "ArrowHead@0.5/rescaled",
        "JapaneseVowels@0.5/rescaled",
    )
    """`name`, `name@drop_rate` or either with `/rescaled`: JapaneseVowels or a
    bundled UEA dataset (ArrowHead, OSULeaf, ACSF1), with that share of
    observations dropped at random, and with each sequence's times rescaled to
    [0, 1] (so that no two sequences share a time)."""
    hidden_size: int = 64
    repeats: int = 3
    """Timed epochs of each strategy (alternated), after one compiling epoch."""
    seed: int = 0


QUICK = dict(cases=("JapaneseVowels@0.5/rescaled",), hidden_size=8, repeats=2)


def load_case(case: str, seed: int) -> ltc_jax.datasets.SequenceDataset:
    """The standardised training set a case names."""
    case, _, rescaled = case.partition("/")
    name, _, rate = case.partition("@")
    if name == "JapaneseVowels":
        train, _ = ltc_jax.datasets.load_japanese_vowels()
    else:
        train = ltc_jax.datasets.read_ts(os.path.join(UEA, f"{name}_TRAIN.ts"))
    if rate:
        train = ltc_jax.datasets.drop_observations(train, float(rate), seed=seed)
    if rescaled:
        last = train.ts[np.arange(len(train)), train.lengths - 1]
        first = train.ts[:, :1]
        train = dataclasses.replace(
            train, ts=(train.ts - first) / (last - first[:, 0])[:, None]
        )
    return ltc_jax.datasets.standardize_with(
        train, *ltc_jax.datasets.channel_statistics(train)
    )


def epoch_step(step, batches):
    """One epoch of training steps from fixed starting parameters (every epoch
    does the same work), returning the last step's outputs."""

    def epoch(model, opt_state):
        out = None
        for batch in batches:
            out = step(model, opt_state, batch)
            model, opt_state = out[0], out[1]
        return out

    return epoch


def measure_case(config: Config, case: str) -> dict:
    train = load_case(case, config.seed)
    bound = ltc_jax.training.real_stability_bound(ltc_jax.make_solver("tsit5"))
    defaults = ltc_jax.training.derive_defaults([train], stability_bound=bound)
    model = ltc_jax.LTC(
        train.num_channels,
        config.hidden_size,
        int(np.max(train.labels)) + 1,
        tau_init=defaults.tau_init,
        key=jax.random.PRNGKey(config.seed),
    )
    path = ltc_jax.make_input_path(train)
    batches = list(ltc_jax.batches(train, defaults.batch_size, path=path))
    calls, steps = {}, {}
    for batching in ("batched", "vmap"):
        integrator = ltc_jax.make_integrator(
            "tsit5",
            "checkpoint",
            rtol=1e-3,
            atol=1e-4,
            max_steps=defaults.max_steps,
            batching=batching,
        )
        _, step, opt_state = _problems.train_step(
            model, integrator, learning_rate=1e-2, total_steps=1000
        )
        step = eqx.filter_jit(step)
        calls[batching] = (epoch_step(step, batches), (model, opt_state))
        solver_steps = [int(step(model, opt_state, b)[3]["num_steps"]) for b in batches]
        steps[batching] = float(np.mean(solver_steps))
    timed = _side_by_side.compare(
        calls, config.repeats, ("batched", "vmap"), unit="epoch", rtol=None
    )
    return dict(
        case=case,
        sequences=len(train),
        batch_size=defaults.batch_size,
        derived_reason=defaults.reasons["batching"],
        stop_ratio=ltc_jax.training.batch_stop_ratio(
            train,
            defaults.batch_size,
            min_step=bound * defaults.tau_init[0] / (1 + defaults.tau_init[0]),
        ),
        derived_batching=defaults.batching,
        mean_solver_steps_per_batch=steps,
        **timed,
    )


def main(config: Config) -> dict:
    """Measure every case; return (and write) the rows."""
    return _side_by_side.main(config, "batching", QUICK, measure_case, "cases")


if __name__ == "__main__":
    main(tyro.cli(Config))
