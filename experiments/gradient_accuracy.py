"""How wrong is the continuous adjoint? Backsolve, plain and windowed, against the
exact gradient of the discretised model, over horizon, solver, tolerance,
precision and stiffness.

`backsolve` (Chen et al. 2018) recovers the state h(t) by solving the LTC backwards
in time alongside the adjoint. The LTC is dissipative forwards (every unit decays
at rate 1/tau + f >= 1/tau), so that reverse solve is expansive: an error in h
grows like exp(T / tau_min) over a horizon T. This experiment measures how far the
resulting gradient is from the exact gradient of the same discretised solve
(`full`: backpropagation through every step; computed here with `checkpoint`, which
returns the same numbers in far less memory), on windows of the MIT-BIH ECG, for
plain `backsolve` and for `windowed` (the reconstruction restarted from forward
states stored at the ends of K windows; K derived from the model and the horizon,
`ltc_jax.training.default_windows`). At 100 typical taus it also sweeps K. The
input is the cubic (Hermite) interpolation of the samples, so adaptive solvers choose
their own steps (with linear interpolation they would stop at every sample).

    python -m experiments.gradient_accuracy          # default size, over an hour
    python -m experiments.gradient_accuracy --quick  # smoke test, under a minute

Writes `results/gradient_accuracy/<run>/`: `config.json`, `metrics.json` (one record
per configuration and the environment), `report.txt` with the tables and
`gradient_accuracy.png` (`experiments._report`), and prints the tables.
"""

import dataclasses
import time
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import tyro

import ltc_jax
from experiments import _problems, _run


SAMPLE_RATE_HZ = ltc_jax.datasets.MITBIH_208_SAMPLE_RATE_HZ
Dtype = Literal["float32", "float64"]


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """Backsolve against exact backpropagation on the MIT-BIH ECG.

    `--quick`: smoke-test sizes (under a minute): replaces the sweep below by a tiny
    one.
    """

    seed: int = 0
    """Seeds the model's parameters."""
    hidden_size: int = 16
    """LTC units."""
    batch_size: int = 4
    """Windows per batch."""
    horizon_seconds: float = 0.1
    """The forecast target lies this far past each window's end (seconds)."""
    horizons: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0, 100.0)
    """Window lengths, in units of the typical time constant."""
    typical_taus: tuple[float, ...] = (1.0, 0.01)
    """Typical time constants (seconds): each unit's tau is drawn log-uniformly from
    [0.1, 10] times it. 0.01 s is stiff: units decay faster than the input is
    sampled (1/360 s)."""
    solvers: tuple[str, ...] = ("rk4", "dopri5@1e-3", "tsit5@1e-3", "tsit5@1e-6")
    """`name` for fixed steps of one sample (1/360 s), `name@rtol` for adaptive
    steps with atol = rtol / 100 (float64 adds tsit5@1e-9, see below)."""
    float64_solvers: tuple[str, ...] = ("tsit5@1e-9",)
    """Extra solvers for float64 only (their tolerance is below float32's eps)."""
    dtypes: tuple[Dtype, ...] = ("float32", "float64")
    """Precisions; each runs in its own process."""
    failure_error: float = 0.1
    """A relative gradient error above this counts as a failure."""
    max_steps_per_sample: int = 4
    """max_steps of adaptive solves, per input sample of the longest window."""
    window_counts: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)
    """Numbers of windows of the windowed adjoint swept at the longest horizon and
    the first typical tau."""
    window_sweep_solvers: tuple[str, ...] = ("rk4", "tsit5@1e-6")
    """Solvers of that sweep."""


QUICK = dict(
    hidden_size=4,
    batch_size=2,
    horizons=(1.0, 3.0),
    typical_taus=(1.0,),
    solvers=("rk4",),
    float64_solvers=(),
    window_counts=(1, 8),
    window_sweep_solvers=("rk4",),
)


def parse_solver(spec: str) -> tuple[str, float | None]:
    """`"tsit5@1e-6"` -> `("tsit5", 1e-6)`; `"rk4"` -> `("rk4", None)`."""
    name, _, rtol = spec.partition("@")
    if name not in ltc_jax.SOLVER_NAMES:
        raise ValueError(
            f"Unknown solver {name!r} in {spec!r}; choose from {ltc_jax.SOLVER_NAMES}."
        )
    return name, (float(rtol) if rtol else None)


def ecg_windows(
    horizon_samples: tuple[int, ...], batch_size: int, horizon_seconds: float
):
    """ECG windows of the longest length for every horizon, the shorter ones
    marked by `lengths` (padding never reaches the solve, so every horizon runs
    the same compiled program). Times count seconds from each window's start."""
    ts, millivolts = ltc_jax.datasets.load_mitbih_208()
    longest = max(horizon_samples)
    ahead = max(1, round(horizon_seconds * SAMPLE_RATE_HZ))
    last_start = ts.shape[0] - longest - ahead
    starts = np.linspace(0, last_start, batch_size).astype(np.int64)
    data = ltc_jax.datasets.forecast_windows(
        ts, millivolts, window=longest, horizon=ahead, starts=starts
    )
    batches = {}
    for samples in horizon_samples:
        # Target: the signal `ahead` samples past the end of this shorter window.
        labels = millivolts[starts + samples - 1 + ahead][:, None]
        batches[samples] = (data.ts - data.ts[:, :1], data.xs, samples, labels)
    return batches


def run_dtype(dtype: str, config: dict) -> list[dict]:
    """Every configuration of one precision (called in its own process, with
    JAX_ENABLE_X64 set for float64)."""
    config = Config(**config)
    rows = []
    sample_counts = {
        tau: tuple(max(2, round(k * tau * SAMPLE_RATE_HZ) + 1) for k in config.horizons)
        for tau in config.typical_taus
    }
    all_samples = tuple(sorted({n for ns in sample_counts.values() for n in ns}))
    data = ecg_windows(all_samples, config.batch_size, config.horizon_seconds)
    longest = max(all_samples)
    solvers = list(config.solvers)
    if dtype == "float64":
        solvers += list(config.float64_solvers)
    functions = {}

    def gradient(name, rtol, mode, windows=None):
        """The jitted gradient of one solver and mode, compiled once."""
        key = (name, rtol, mode, windows)
        if key not in functions:
            functions[key] = _gradient_fn(
                _integrator(name, rtol, mode, longest, config, windows)
            )
        return functions[key]

    for spec in solvers:
        name, rtol = parse_solver(spec)
        for tau in config.typical_taus:
            model = _model(config.hidden_size, tau, config.seed, dtype)
            for k, samples in zip(config.horizons, sample_counts[tau], strict=True):
                batch = _batch(*data[samples], dtype)
                count = _default_windows(model, k * tau, name, rtol, samples, dtype)
                start = time.perf_counter()
                results = {
                    mode: gradient(name, rtol, mode)(model, batch)
                    for mode in ("checkpoint", "backsolve")
                }
                windowed = gradient(name, rtol, "windowed", count)(model, batch)
                results["windowed"] = windowed
                row = _row(spec, name, rtol, dtype, tau, k, samples, results, config)
                seconds = time.perf_counter() - start
                rows.append(dict(row, windows=count, seconds=seconds))
    return rows


def run_window_sweep(dtype: str, config: dict) -> list[dict]:
    """The windowed adjoint's error against its number of windows, at the longest
    horizon and the first typical tau (in its own process, as `run_dtype`)."""
    config = Config(**config)
    tau, k = config.typical_taus[0], max(config.horizons)
    samples = max(2, round(k * tau * SAMPLE_RATE_HZ) + 1)
    data = ecg_windows((samples,), config.batch_size, config.horizon_seconds)
    model = _model(config.hidden_size, tau, config.seed, dtype)
    batch = _batch(*data[samples], dtype)
    rows = []
    for spec in config.window_sweep_solvers:
        name, rtol = parse_solver(spec)
        checkpoint = _integrator(name, rtol, "checkpoint", samples, config)
        exact = _gradient_fn(checkpoint)(model, batch)
        default = _default_windows(model, k * tau, name, rtol, samples, dtype)
        for count in sorted({*config.window_counts, default}):
            integrator = _integrator(name, rtol, "windowed", samples, config, count)
            error, finite = _error(_gradient_fn(integrator)(model, batch), exact)
            rows.append(
                dict(
                    solver=spec,
                    dtype=dtype,
                    typical_tau_seconds=tau,
                    horizon_taus=k,
                    windows=count,
                    default=count == default,
                    relative_error=error,
                    is_finite=finite,
                )
            )
    return rows


def _default_windows(model, horizon, name, rtol, samples, dtype) -> int:
    """The number of windows `ltc_jax.fit` would use for this model and horizon."""
    integrator = _integrator(name, rtol, "windowed", samples, Config())
    resolved = ltc_jax.training.resolve_windows(
        integrator, model.cell, horizon, dtype=dtype
    )
    return resolved.adjoint.windows


def _model(hidden_size: int, tau: float, seed: int, dtype: str) -> ltc_jax.LTC:
    with jax.enable_x64(False):
        tau_init = (0.1 * tau, 10.0 * tau)
        model = ltc_jax.LTC(1, hidden_size, 1, tau_init=tau_init, key=jr.PRNGKey(seed))
    return _problems.cast(model, dtype)


def _batch(ts, xs, length, labels, dtype) -> ltc_jax.Batch:
    lengths = jnp.full((ts.shape[0],), length, jnp.int32)
    path = ltc_jax.InputPath(
        jnp.asarray(ts, dtype), jnp.asarray(xs, dtype), lengths, interpolation="cubic"
    )
    weights = jnp.ones((ts.shape[0],), dtype)
    return ltc_jax.Batch(path, jnp.asarray(labels, dtype), weights)


def _integrator(name, rtol, mode, longest, config: Config, windows=None):
    """Fixed steps of one sample (ceil(duration / dt0) steps per window; the slack
    of 16 absorbs rounding), or adaptive steps at `rtol` (atol = rtol / 100, at
    most `config.max_steps_per_sample` per sample); failures are reported, never
    raised (`throw=False`)."""
    if rtol is None:
        steps = dict(dt0=1 / SAMPLE_RATE_HZ, max_steps=longest + 16)
    else:
        max_steps = config.max_steps_per_sample * longest
        steps = dict(rtol=rtol, atol=rtol / 100, max_steps=max_steps)
    options = dict(windows=windows) if mode == "windowed" else {}
    return ltc_jax.make_integrator(name, mode, throw=False, **steps, **options)


def _gradient_fn(integrator):
    """The jitted loss, flat gradient and solve statistics under `integrator`."""

    def loss(model, batch):
        trajectory = model.solve(batch.path, integrator=integrator)
        error = model.outputs(trajectory.ys) - batch.labels
        return jnp.mean(error**2), trajectory

    @eqx.filter_jit
    def fn(model, batch):
        (value, trajectory), grads = eqx.filter_value_and_grad(loss, has_aux=True)(
            model, batch
        )
        flat = jnp.concatenate(
            [jnp.ravel(g) for g in jax.tree.leaves(eqx.filter(grads, eqx.is_array))]
        )
        return dict(
            loss=value,
            gradient=flat,
            num_steps=jnp.max(trajectory.stats["num_steps"]),
            successful=trajectory.result == ltc_jax.RESULTS.successful,
        )

    return fn


def _error(result, exact) -> tuple[float | None, bool]:
    """The relative error of a gradient against the exact one (`None` where
    either is not finite), and whether the gradient is finite."""
    approx = np.asarray(result["gradient"], np.float64)
    reference = np.asarray(exact["gradient"], np.float64)
    finite = bool(np.all(np.isfinite(approx))) and bool(result["successful"])
    if not finite or not np.all(np.isfinite(reference)):
        return None, finite
    return ltc_jax.measure.gradient_relative_error(approx, reference), finite


def _row(spec, name, rtol, dtype, tau, k, samples, results, config) -> dict:
    full = results["checkpoint"]
    forward_ok = bool(full["successful"]) and bool(np.isfinite(full["loss"]))
    row = dict(
        solver=spec,
        solver_name=name,
        rtol=rtol,
        atol=None if rtol is None else rtol / 100,
        dtype=dtype,
        typical_tau_seconds=tau,
        horizon_taus=k,
        horizon_seconds=k * tau,
        num_observations=samples,
        num_steps=int(full["num_steps"]),
        loss=float(full["loss"]),
    )
    for mode in ("backsolve", "windowed"):
        error, finite = _error(results[mode], full)
        if not forward_ok:
            status = "forward failed"
        elif not finite:
            status = f"{mode} non-finite"
        elif error is None:
            status = "exact gradient non-finite"
        else:
            status = f"{mode} fails" if error > config.failure_error else "ok"
        row.update(
            {
                f"{mode}_relative_error": error,
                f"{mode}_is_finite": finite,
                f"{mode}_status": status,
            }
        )
    row["status"] = row["backsolve_status"]
    return row


def main(config: Config) -> dict:
    """Run the sweep; returns (and writes to `metrics.json`) every record and the
    environment."""
    for spec in (
        *config.solvers,
        *config.float64_solvers,
        *config.window_sweep_solvers,
    ):
        parse_solver(spec)
    config, run = _run.start_run(config, "gradient_accuracy", QUICK)
    started = time.perf_counter()
    rows, sweep = [], []
    for dtype in config.dtypes:
        kwargs = dict(dtype=dtype, config=dataclasses.asdict(config))
        env = {"JAX_ENABLE_X64": "1" if dtype == "float64" else "0"}
        for into, function in ((rows, "run_dtype"), (sweep, "run_window_sweep")):
            into += ltc_jax.measure.call_in_subprocess(
                f"experiments.gradient_accuracy:{function}", kwargs, env=env
            )
    seconds = time.perf_counter() - started
    return run.finish(dict(records=rows, window_sweep=sweep, seconds=seconds))


if __name__ == "__main__":
    main(tyro.cli(Config))
