"""How wrong is the continuous adjoint? Backsolve against the exact gradient of the
discretised model, over horizon, solver, tolerance, precision and stiffness.

`backsolve` (Chen et al. 2018) recovers the state h(t) by solving the LTC backwards
in time alongside the adjoint. The LTC is dissipative forwards (every unit decays
at rate 1/tau + f >= 1/tau), so that reverse solve is expansive: an error in h
grows like exp(T / tau_min) over a horizon T. This experiment measures how far the
resulting gradient is from the exact gradient of the same discretised solve
(`full`: backpropagation through every step; computed here with `checkpoint`, which
returns the same numbers in far less memory), on windows of the MIT-BIH ECG. The
input is the cubic (Hermite) interpolation of the samples, so adaptive solvers choose
their own steps (with linear interpolation they would stop at every sample).

    python -m experiments.gradient_accuracy          # default size, ~9 min on 2 cores
    python -m experiments.gradient_accuracy --quick  # smoke test, under a minute

Writes `results/gradient_accuracy/<run>/`: `config.json`, `metrics.json` (one record
per configuration, the table and the environment), `gradient_accuracy.png`, and
prints the table.
"""

import dataclasses
import math
import os
import time
from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import tyro

import ltc_jax
from experiments import _report, _run


SAMPLE_RATE_HZ = ltc_jax.datasets.MITBIH_208_SAMPLE_RATE_HZ
Dtype = Literal["float32", "float64"]


@dataclasses.dataclass(frozen=True)
class Config:
    """Backsolve against exact backpropagation on the MIT-BIH ECG."""

    out: str | None = None
    """Run folder. Default: results/gradient_accuracy/<date>-<time>. Never
    overwritten."""
    quick: bool = False
    """Smoke-test sizes (under a minute): replaces the sweep below by a tiny one."""
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


QUICK = dict(
    hidden_size=4,
    batch_size=2,
    horizons=(1.0, 3.0),
    typical_taus=(1.0,),
    solvers=("rk4",),
    float64_solvers=(),
)


def parse_solver(spec: str) -> tuple[str, float | None]:
    """`"tsit5@1e-6"` -> `("tsit5", 1e-6)`; `"rk4"` -> `("rk4", None)`."""
    name, _, rtol = spec.partition("@")
    if name not in ltc_jax.SOLVER_NAMES:
        raise ValueError(
            f"Unknown solver {name!r} in {spec!r}; choose from {ltc_jax.SOLVER_NAMES}."
        )
    return name, (float(rtol) if rtol else None)


def windows(horizon_samples: tuple[int, ...], batch_size: int, horizon_seconds: float):
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
    data = windows(all_samples, config.batch_size, config.horizon_seconds)
    longest = max(all_samples)
    solvers = list(config.solvers)
    if dtype == "float64":
        solvers += list(config.float64_solvers)
    for spec in solvers:
        name, rtol = parse_solver(spec)
        gradients = {
            mode: _gradient_fn(name, rtol, mode, longest, config.max_steps_per_sample)
            for mode in ("checkpoint", "backsolve")
        }
        for tau in config.typical_taus:
            model = _model(config.hidden_size, tau, config.seed, dtype)
            for k, samples in zip(config.horizons, sample_counts[tau], strict=True):
                ts, xs, length, labels = data[samples]
                batch = _batch(ts, xs, length, labels, dtype)
                start = time.perf_counter()
                results = {mode: fn(model, batch) for mode, fn in gradients.items()}
                rows.append(
                    _row(spec, name, rtol, dtype, tau, k, samples, results, config)
                    | dict(seconds=time.perf_counter() - start)
                )
    return rows


def _model(hidden_size: int, tau: float, seed: int, dtype: str) -> ltc_jax.LTC:
    with jax.enable_x64(False):
        model = ltc_jax.LTC(
            1, hidden_size, 1, tau_init=(0.1 * tau, 10.0 * tau), key=jr.PRNGKey(seed)
        )
    return jax.tree.map(
        lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x, model
    )


def _batch(ts, xs, length, labels, dtype) -> ltc_jax.Batch:
    lengths = jnp.full((ts.shape[0],), length, jnp.int32)
    path = ltc_jax.InputPath(
        jnp.asarray(ts, dtype), jnp.asarray(xs, dtype), lengths, interpolation="cubic"
    )
    weights = jnp.ones((ts.shape[0],), dtype)
    return ltc_jax.Batch(path, jnp.asarray(labels, dtype), weights)


def _gradient_fn(name, rtol, mode, longest, max_steps_per_sample):
    """The jitted loss, gradient and solve statistics; failures are reported,
    never raised (`throw=False`)."""
    if rtol is None:
        # ceil(duration / dt0) steps per window; the slack absorbs rounding.
        integrator = ltc_jax.make_integrator(
            name, mode, dt0=1 / SAMPLE_RATE_HZ, max_steps=longest + 16, throw=False
        )
    else:
        integrator = ltc_jax.make_integrator(
            name,
            mode,
            rtol=rtol,
            atol=rtol / 100,
            max_steps=max_steps_per_sample * longest,
            throw=False,
        )

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
            successful=trajectory.result == diffrax.RESULTS.successful,
        )

    return fn


def _row(spec, name, rtol, dtype, tau, k, samples, results, config) -> dict:
    full, back = results["checkpoint"], results["backsolve"]
    exact = np.asarray(full["gradient"], np.float64)
    approx = np.asarray(back["gradient"], np.float64)
    forward_ok = bool(full["successful"]) and bool(np.isfinite(full["loss"]))
    exact_ok = forward_ok and bool(np.all(np.isfinite(exact)))
    finite = bool(np.all(np.isfinite(approx)))
    error = None
    if exact_ok and finite:
        error = ltc_jax.gradient_relative_error(approx, exact)
    if not forward_ok:
        status = "forward failed"
    elif not exact_ok:
        status = "exact gradient non-finite"
    elif not finite:
        status = "backsolve non-finite"
    elif error > config.failure_error:
        status = "backsolve fails"
    else:
        status = "ok"
    return dict(
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
        backsolve_relative_error=error,
        backsolve_is_finite=finite,
        status=status,
    )


# --- driver --------------------------------------------------------------------------


def main(config: Config) -> dict:
    """Run the sweep; returns (and writes to `metrics.json`) every record, the table
    and the environment."""
    for spec in (*config.solvers, *config.float64_solvers):
        parse_solver(spec)
    config, run_dir = _run.start_run(config, "gradient_accuracy", QUICK)
    started = time.perf_counter()
    rows = []
    for dtype in config.dtypes:
        rows += ltc_jax.call_in_subprocess(
            f"{os.path.abspath(__file__)}:run_dtype",
            dict(dtype=dtype, config=_json_config(config)),
            env={"JAX_ENABLE_X64": "1" if dtype == "float64" else "0"},
        )
    metrics = dict(
        records=rows,
        table=format_table(rows, config),
        seconds=time.perf_counter() - started,
    )
    metrics = _run.finish(
        run_dir,
        metrics,
        lambda m: f"{m['table']}\n\nTotal {m['seconds']:.0f} s",
    )
    plot(rows, config, os.path.join(run_dir, "gradient_accuracy.png"))
    return metrics


def _json_config(config: Config) -> dict:
    return {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in dataclasses.asdict(config).items()
    }


def _cell(row: dict) -> str:
    if row["status"] == "forward failed":
        return "fwd fail"
    if row["status"] == "exact gradient non-finite":
        return "exact nan"
    if row["status"] == "backsolve non-finite":
        return "NaN *"
    error = f"{row['backsolve_relative_error']:.1e}"
    return error + (" *" if row["status"] == "backsolve fails" else "")


def format_table(rows: list[dict], config: Config) -> str:
    """Relative error of the backsolve gradient against exact backpropagation,
    one line per (typical tau, precision, solver), one column per horizon."""
    horizons = list(config.horizons)
    head = f"{'tau (s)':>7}  {'dtype':<7}  {'solver':<12}" + "".join(
        f"  {f'T={k:g} tau':>10}" for k in horizons
    )
    lines = [
        "Relative error of the backsolve gradient against exact backpropagation "
        "through the same discrete solve",
        f"(* = failure: non-finite, or error above {config.failure_error:g}; "
        "'fwd fail' = the forward solve itself failed)",
        head,
    ]
    keys = list(
        dict.fromkeys((r["typical_tau_seconds"], r["dtype"], r["solver"]) for r in rows)
    )
    for tau, dtype, solver in keys:
        cells = {
            r["horizon_taus"]: _cell(r)
            for r in rows
            if (r["typical_tau_seconds"], r["dtype"], r["solver"])
            == (tau, dtype, solver)
        }
        lines.append(
            f"{tau:>7g}  {dtype:<7}  {solver:<12}"
            + "".join(f"  {cells.get(k, '-'):>10}" for k in horizons)
        )
    return "\n".join(lines)


def plot(rows: list[dict], config: Config, path: str) -> None:
    """Error against horizon, one panel per (typical tau, precision), one line per
    solver; failures drawn as crosses at the top."""
    plt = _report.pyplot()

    taus, dtypes = list(config.typical_taus), list(config.dtypes)
    figure, axes = plt.subplots(
        len(taus),
        len(dtypes),
        figsize=(5.5 * len(dtypes), 3.6 * len(taus)),
        squeeze=False,
        sharey=True,
    )
    ceiling = 1e3
    for i, tau in enumerate(taus):
        for j, dtype in enumerate(dtypes):
            axis = axes[i][j]
            panel = [
                r
                for r in rows
                if r["typical_tau_seconds"] == tau and r["dtype"] == dtype
            ]
            for solver in dict.fromkeys(r["solver"] for r in panel):
                points = sorted(
                    (r["horizon_taus"], r) for r in panel if r["solver"] == solver
                )
                ks = [k for k, _ in points]
                errors = [
                    r["backsolve_relative_error"]
                    if r["backsolve_relative_error"] is not None
                    else math.nan
                    for _, r in points
                ]
                (line,) = axis.loglog(
                    ks, np.minimum(errors, ceiling), "o-", label=solver
                )
                failed = [
                    k
                    for k, r in points
                    if r["backsolve_relative_error"] is None
                    and r["status"] != "forward failed"
                ]
                axis.plot(
                    failed, [ceiling] * len(failed), "x", ms=9, color=line.get_color()
                )
            axis.axhline(config.failure_error, color="red", lw=0.8, ls=":")
            axis.set_title(f"typical tau {tau:g} s, {dtype}", fontsize=10)
            axis.set_xlabel("horizon (typical taus)")
            axis.set_ylabel("relative gradient error")
            axis.legend(fontsize=7)
    figure.suptitle(
        "backsolve vs exact backpropagation on the ECG "
        f"(x at {ceiling:g}: non-finite; red: failure threshold)",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    main(tyro.cli(Config))
