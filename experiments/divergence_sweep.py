"""Fixed-step training runs swept over `dt0` and the time constants on
JapaneseVowels: does any end silently at chance instead of training or stopping
with `ltc_jax.DivergenceError`?

Every run trains the same LTC budget (`VowelsTraining`) with RK4 at one `dt0`,
the time constants drawn from `[tau / 2, 2 tau]` frames, and `on_failure="raise"`
so that a divergence stops it. Each run is classified:

- `trained`: it finished and its test accuracy beats the majority class by
  `margin`;
- `divergence error` / `non-finite error` / `solver failure`: it stopped with
  that ltc_jax error;
- `silent`: it finished at chance, with no error. The check exists so that this
  never happens.

Independently of training, each setting's initial model is also solved once with
the check off, and the state's largest excursion beyond its bound (Hasani et al.
2021, Theorem 2) is recorded, so the table shows which settings diverge at all.

    python -m experiments.divergence_sweep           # 4 x 4 settings, ~10 min
    python -m experiments.divergence_sweep --quick   # 2 x 2 settings, 64 series

Writes `results/divergence_sweep/<run>/`: `config.json`, `metrics.json` and
`report.txt` with the table (`experiments._report`), and prints the table.
"""

import dataclasses
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import tyro

import ltc_jax
from experiments import _problems, _run


@dataclasses.dataclass(frozen=True)
class Config(_problems.VowelsTraining):
    """A dt0 x tau sweep of fixed-step RK4 training on JapaneseVowels.

    `--quick`: tiny sizes: 2 x 2 settings, 64 training series, 2 epochs.
    """

    dt0s: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)
    """RK4 steps, in frames."""
    taus: tuple[float, ...] = (0.25, 1.0, 4.0, 16.0)
    """Centre of the initial time constants' range `[tau / 2, 2 tau]`, frames."""
    seeds: tuple[int, ...] = (0,)
    epochs: int = 8
    margin: float = 0.1
    """Accuracy above the majority class's share that counts as trained."""


QUICK = dict(dt0s=(0.25, 2.0), taus=(0.25, 4.0), train_size=64, epochs=2)


def excursion(model: ltc_jax.LTC, path: ltc_jax.InputPath, integrator) -> float:
    """How far the unchecked solve's saved states leave the cell's bounds, in
    units of the bounds' width (0 inside; `inf` for a non-finite state)."""
    quiet = dataclasses.replace(integrator, check_state=False, throw=False)
    ys = model.solve(path, integrator=quiet, save="observations").ys
    low, high = (bound[None, None] for bound in model.cell.state_bounds())
    width = jnp.maximum(high - low, jnp.finfo(ys.dtype).tiny)
    beyond = jnp.maximum(jnp.maximum(ys - high, low - ys), 0.0) / width
    return float(jnp.max(jnp.where(jnp.isfinite(ys), beyond, jnp.inf)))


def run_setting(config: Config, data, dt0: float, tau: float, seed: int) -> dict:
    """Train one setting; return its record."""
    train, test = data
    train_path, test_path = _problems.float32_paths(train, test)
    max_steps = ltc_jax.training.fixed_max_steps([train, test], dt0)
    integrator = ltc_jax.make_integrator("rk4", dt0=dt0, max_steps=max_steps)
    model = _problems.vowels_model(config.hidden_size, seed, tau=tau)
    record = dict(dt0=dt0, tau=tau, seed=seed, accuracy=None, error=None)
    record["dt0_times_decay_bound"] = dt0 * float(model.cell.decay_bound())
    record["initial_excursion"] = excursion(model, test_path, integrator)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ltc_jax.training.StabilityWarning)
        try:
            model, _ = _problems.fit_vowels(
                model, config, train, integrator, seed, train_path
            )
            result = ltc_jax.evaluate(
                model, test, integrator=integrator, path=test_path
            )
            record["accuracy"] = result["accuracy"]
        except ltc_jax.DivergenceError as error:
            record["outcome"], record["error"] = "divergence error", str(error)
        except ltc_jax.NonFiniteLossError as error:
            record["outcome"], record["error"] = "non-finite error", str(error)
        except ltc_jax.SolverFailureError as error:
            record["outcome"], record["error"] = "solver failure", str(error)
    record["stability_warning"] = any(
        issubclass(w.category, ltc_jax.training.StabilityWarning) for w in caught
    )
    record["seconds"] = time.perf_counter() - start
    if record["error"] is None:
        chance = np.bincount(test.labels).max() / len(test)
        trained = record["accuracy"] > chance + config.margin
        record["outcome"] = "trained" if trained else "silent"
    return record


def main(config: Config) -> dict:
    """Run the sweep; return (and write) the records."""
    config, run = _run.start_run(config, "divergence_sweep", QUICK)
    data = _problems.japanese_vowels(config.train_size)
    with jax.enable_x64(False):
        rows = [
            run_setting(config, data, dt0, tau, seed)
            for dt0 in config.dt0s
            for tau in config.taus
            for seed in config.seeds
        ]
    silent = [r for r in rows if r["outcome"] == "silent"]
    return run.finish(dict(rows=rows, silent=silent))


if __name__ == "__main__":
    main(tyro.cli(Config))
