"""Memory, time, function evaluations and gradient error of the four gradient modes,
measured on the MIT-BIH ECG from 1e2 to 1e5 solver steps, and estimated from the
compiled program up to 21.6 million steps (24 hours at 250 Hz).

Task: an LTC reads a window of one ECG lead (millivolts, time in seconds) and
forecasts the signal `horizon_seconds` after the window's end; windows grow with the
number of steps (one fixed RK4 step per 1/360 s sample). Each configuration that
runs a training step is measured in its own process
([`ltc_jax.measure.call_in_subprocess`][]), at every size, `--quick` included, so
that its runtime peak is its own; the compile-only estimates and the mixed-precision
comparison (compiled memory and one gradient, no runtime peak) run in this one.

    python -m experiments.memory_scaling          # default size, ~11 min on 2 cores
    python -m experiments.memory_scaling --quick    # smoke test, ~2 min on 2 cores

Writes `results/memory_scaling/<run>/`: `config.json`, `records/*.json` (one per
measured or estimated configuration), `metrics.json` (all records and the
environment), `report.txt` with the tables and `memory_scaling.png`
(`experiments._report`), and prints the tables.
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
from experiments import _problems, _report, _run


Mode = Literal["full", "checkpoint", "backsolve", "windowed", "direct"]
SAMPLE_RATE_HZ = _problems.SAMPLE_RATE_HZ


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """Measure the gradient modes on the MIT-BIH ECG, from short windows to a day.

    `--quick`: smoke-test sizes (about 2 minutes on 2 cores): tiny sizes and lists in
    place of those below, each measured configuration still in its own process.
    """

    seed: int = 0
    """Seeds the model's parameters."""
    hidden_size: int = 32
    """LTC units."""
    batch_size: int = 4
    """Windows per batch (evenly spaced start times over the recording)."""
    horizon_seconds: float = 0.1
    """How far past a window's end the target lies (seconds)."""
    steps: tuple[int, ...] = (100, 1_000, 10_000, 100_000)
    """Measured sizes: solver steps per solve (a window of steps + 1 samples)."""
    checkpoints: tuple[int, ...] = (100, 1_000)
    """Checkpoint counts measured besides diffrax's default, for mode checkpoint."""
    windows: tuple[int, ...] = (16, 256)
    """Window counts measured besides the derived default, for mode windowed."""
    modes: tuple[Mode, ...] = ("full", "checkpoint", "backsolve", "windowed", "direct")
    """Gradient modes."""
    window_memory_steps: int = 100_000
    """Steps of the compile-only sweep of the windowed adjoint's memory over its
    number of windows."""
    window_memory_counts: tuple[int, ...] = (1, 4, 16, 64, 256, 1024, 4096)
    """Window counts of that sweep."""
    timed_steps: int = 3
    """Timed training steps (and forward solves) per configuration, after warm-up."""
    count_evaluations_up_to: int = 10_000
    """Count vector-field evaluations in configurations of at most this many steps
    (each evaluation counted costs a host callback, about 40 us on CPU: over a
    minute per mode at 1e5 steps)."""
    reference_substeps: int = 4
    """RK4 steps per sample of the float64 reference gradient."""
    estimate_steps: tuple[int, ...] = (1_000_000, 21_600_000)
    """Compile-only sizes: steps, with an input of as many samples."""
    estimate_rate_hz: float = 250.0
    """Sampling rate (and 1 / step) of the compile-only inputs."""
    budgets_gib: tuple[float, ...] = (24.0, 80.0)
    """Device memory sizes to check the compile-only estimates against (GiB)."""
    adaptive_max_steps: tuple[int, ...] = (64, 512, 4_096, 16_384)
    """max_steps of the adaptive solve whose memory is compared with its steps."""
    adaptive_window_seconds: float = 1.0
    """Window of that adaptive solve (cubic input, Tsit5, rtol 1e-3, atol 1e-4)."""
    saves: tuple[int, ...] = (1, 360, 3_600)
    """Saved outputs per sequence at a fixed 3,600 steps (10 s at 360 Hz)."""
    cost_solver: str = "dopri5"
    """Adaptive solver of the adjoint-cost comparison (the write-up's case)."""
    cost_rtol: float = 1e-5
    """Its relative tolerance (atol = rtol / 100)."""
    cost_window_seconds: float = 2.0
    """Its window (cubic input); short enough for backsolve to stay finite."""
    precision_steps: int = 10_000
    """Steps of the mixed-precision comparison (0: skip it)."""
    precision_modes: tuple[Mode, ...] = ("full", "checkpoint", "backsolve", "windowed")
    """Gradient modes of that comparison."""


QUICK = dict(
    hidden_size=8,
    batch_size=2,
    steps=(100,),
    checkpoints=(),
    windows=(),
    modes=("checkpoint", "backsolve", "windowed"),
    window_memory_steps=1_000,
    window_memory_counts=(1, 4, 16),
    timed_steps=3,
    estimate_steps=(21_600_000,),
    adaptive_max_steps=(),
    saves=(),
    cost_window_seconds=0.0,
    precision_steps=100,
    precision_modes=("checkpoint", "windowed"),
)


# --- the configurations -------------------------------------------------------------


def float32_model(hidden_size: int, seed: int) -> ltc_jax.LTC:
    """The LTC of every configuration: float32, whatever JAX's default float."""
    with jax.enable_x64(False):
        return ltc_jax.LTC(1, hidden_size, 1, key=jr.PRNGKey(seed))


def mode_options(mode: str, option: int | None) -> dict:
    """The one option a mode's variants differ in: `checkpoints` of
    `"checkpoint"`, `windows` of `"windowed"` (`None`: the default)."""
    name = {"checkpoint": "checkpoints", "windowed": "windows"}.get(mode)
    return {} if name is None else {name: option}


def mode_label(mode: str, option: int | None) -> str:
    if mode in ("checkpoint", "windowed"):
        return f"{mode} ({'default' if option is None else option})"
    return mode


def default_checkpoints(max_steps: int) -> int:
    """Checkpoints diffrax stores by default: the least `c` with
    `2 * max_steps < (c + 1) * (c + 2)`, about `sqrt(2 * max_steps)` (Stumm and
    Walther 2010, Eq. 2.2, as `equinox.internal.checkpointed_while_loop` uses it)."""
    c = 1
    while max_steps > 1 and 2 * max_steps >= (c + 1) * (c + 2):
        c += 1
    return c


def stored_checkpoints(
    mode: str, option: int | None, max_steps: int, windows: int | None = None
) -> int | None:
    """Copies of the solver state that a mode stores for a solve: every step
    (`full`), its checkpoints (`checkpoint`), or the state at each window's end
    (`windowed`: `windows - 1`)."""
    if mode == "checkpoint":
        requested = default_checkpoints(max_steps) if option is None else option
        return min(requested, max_steps)
    return {"full": max_steps, "windowed": (windows or 1) - 1}.get(mode)


def input_bytes(batch: ltc_jax.Batch) -> int:
    leaves = jax.tree.leaves(batch.path)
    return int(sum(math.prod(x.shape) * jnp.dtype(x.dtype).itemsize for x in leaves))


def reference_problem(steps: int, problem: dict, substeps: int, interpolation: str):
    """The float64 problem of the reference gradient: exact backpropagation
    through RK4 with `substeps` steps per sample (a discretisation error
    `substeps**4` times smaller than the measured runs'). Checkpointing gives the
    same numbers as full storage (both backpropagate through the same discrete
    solve) in a fraction of the memory."""
    model, batch = _problems.ecg_problem(
        steps + 1, **problem, dtype="float64", interpolation=interpolation
    )
    rate = substeps * SAMPLE_RATE_HZ
    return (
        model,
        batch,
        _problems.ecg_integrator("rk4", "checkpoint", substeps * steps, rate),
    )


def measure_configuration(
    mode: str,
    option: int | None,
    steps: int,
    solver: str,
    problem: dict,
    timed_steps: int,
    reference: list[float],
    rtol: float | None = None,
    max_steps: int = 4_096,
    count_evaluations: bool = True,
) -> dict:
    """Measure one gradient mode on windows of `steps + 1` samples (in a fresh
    process): the [`ltc_jax.measure.Measurement`][] as a dict, with the input's
    size and the number of stored states.

    Fixed steps of one sample by default (`max_steps` is then the number of
    samples less one); with `rtol`, adaptive steps (atol = rtol / 100, at most
    `max_steps`) on the cubic interpolation of the samples, so the controller
    chooses the steps."""
    model, batch = _problems.ecg_problem(
        steps + 1, **problem, interpolation="linear" if rtol is None else "cubic"
    )
    options = mode_options(mode, option)
    if rtol is None:
        integrator = _problems.ecg_integrator(solver, mode, steps, **options)
    else:
        integrator = ltc_jax.make_integrator(
            solver, mode, rtol=rtol, atol=rtol / 100, max_steps=max_steps, **options
        )
    # The runs that give the runtime peak are the warm-up.
    measurement = ltc_jax.measure.measure(
        model,
        batch,
        integrator,
        warmup_steps=0,
        timed_steps=timed_steps,
        reference_gradient=np.asarray(reference),
        count_evaluations=count_evaluations,
    )
    return dict(
        measurement.asdict(),
        kind="measured" if rtol is None else "adaptive",
        label=mode_label(mode, option),
        stored_checkpoints=stored_checkpoints(
            mode, option, integrator.max_steps, measurement.windows
        ),
        input_bytes=input_bytes(batch),
        hidden_size=problem["hidden_size"],
        process_id=os.getpid(),
    )


def estimate_configuration(
    mode: str, option: int | None, steps: int, config: Config, rate_hz: float
) -> dict:
    """Compile (never run) one RK4 training step on an input of `steps + 1`
    samples at `rate_hz`, and read its memory. The input is abstract
    (`jax.ShapeDtypeStruct`), an argument of the step, so building the path costs
    nothing here. Mode `"backsolve-naive"` is diffrax's `BacksolveAdjoint` with the
    observations among its differentiable `args`, as a plain diffrax user would
    write it."""
    model = float32_model(config.hidden_size, 0)
    batch = ltc_jax.measure.abstract_batch(
        config.batch_size, steps + 1, 1, output_size=1
    )
    start = time.perf_counter()
    windows = None
    if mode == "backsolve-naive":
        fn, args = _naive_backsolve_gradient(steps, rate_hz), (model, batch)
    else:
        integrator = _problems.ecg_integrator(
            "rk4", mode, steps, rate_hz, **mode_options(mode, option)
        )
        integrator, fn, opt_state = _problems.train_step(
            model, integrator, steps / rate_hz
        )
        args = (model, opt_state, batch)
        windows = integrator.adjoint.windows if mode == "windowed" else None
    memory = ltc_jax.measure.compiled_memory(fn, *args)
    return dict(
        kind="estimated",
        label=mode_label(mode, option),
        gradient_mode=mode,
        option=option,
        windows=windows,
        stored_checkpoints=stored_checkpoints(mode, option, steps, windows),
        num_steps=steps,
        max_steps=steps,
        num_observations=steps + 1,
        batch_size=config.batch_size,
        hidden_size=config.hidden_size,
        rate_hz=rate_hz,
        input_bytes=input_bytes(batch),
        compile_seconds=time.perf_counter() - start,
        **(memory.asdict() if memory is not None else {}),
        **{
            f"fits_{budget:g}_gib": memory.peak_bytes <= budget * _report.GIB
            for budget in config.budgets_gib
        },
    )


def precision_configuration(
    mode: str, matmul_dtype: str | None, steps: int, problem: dict, reference
) -> dict:
    """One gradient mode with the gate's products in `matmul_dtype` (`None`:
    float32 throughout): the compiled training step's memory (never run) and the
    gradient's error against the float64 reference."""
    model, batch = _problems.ecg_problem(
        steps + 1, **problem, matmul_dtype=matmul_dtype
    )
    integrator = _problems.ecg_integrator("rk4", mode, steps)
    horizon = steps / SAMPLE_RATE_HZ
    integrator, step, opt_state = _problems.train_step(model, integrator, horizon)
    memory = ltc_jax.measure.compiled_memory(step, model, opt_state, batch)
    gradient = ltc_jax.measure.loss_gradient(model, batch, integrator)
    return dict(
        kind="precision",
        label=mode_label(mode, None),
        gradient_mode=mode,
        matmul_dtype=matmul_dtype or "float32",
        num_steps=steps,
        gradient_relative_error=ltc_jax.measure.gradient_relative_error(
            gradient, reference
        ),
        **(memory.asdict() if memory is not None else {}),
    )


def _naive_backsolve_gradient(steps: int, rate_hz: float):
    def loss(model, batch):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(model.cell),
            ltc_jax.make_solver("rk4"),
            # float32 times, like the data, whatever JAX's default float.
            t0=jnp.asarray(0.0, jnp.float32),
            t1=jnp.asarray(steps / rate_hz, jnp.float32),
            dt0=jnp.asarray(1.0 / rate_hz, jnp.float32),
            y0=jnp.zeros((batch.labels.shape[0], model.hidden_size), jnp.float32),
            args=jax.lax.stop_gradient(batch.path),
            adjoint=diffrax.BacksolveAdjoint(),
            max_steps=steps,
        )
        return jnp.mean((model.outputs(sol.ys[-1]) - batch.labels) ** 2)

    return eqx.filter_grad(loss)


# --- the two demonstrations done in this process -----------------------------------


def adaptive_max_steps_demo(config: Config, problem: dict) -> list[dict]:
    """An adaptive solve that takes ~20 steps, compiled for growing `max_steps`:
    `full` and `checkpoint` memory follow `max_steps`, not the steps taken (the
    solve, and so the steps it takes, is the same for every `max_steps`)."""
    steps = round(config.adaptive_window_seconds * SAMPLE_RATE_HZ)
    model, batch = _problems.ecg_problem(steps + 1, **problem, interpolation="cubic")
    rows = []
    for max_steps in config.adaptive_max_steps:
        for mode in ("full", "checkpoint"):
            integrator = ltc_jax.make_integrator(
                "tsit5", mode, rtol=1e-3, atol=1e-4, max_steps=max_steps
            )
            _, step, opt_state = _problems.train_step(model, integrator)
            memory = ltc_jax.measure.compiled_memory(step, model, opt_state, batch)
            rows.append(
                dict(
                    gradient_mode=mode,
                    max_steps=max_steps,
                    num_observations=steps + 1,
                    stored_checkpoints=stored_checkpoints(mode, None, max_steps),
                    temp_bytes=memory.temp_bytes,
                )
            )
    # The steps taken, from one forward solve (the largest max_steps allows it).
    loss = eqx.filter_jit(ltc_jax.training.SupervisedLoss())
    _, metrics = loss(model, batch, integrator)
    for row in rows:
        row["num_steps"] = int(metrics["num_steps"])
        row["num_rejected_steps"] = int(metrics["num_rejected_steps"])
    return rows


def saves_versus_steps(config: Config) -> list[dict]:
    """Compiled gradient memory at a fixed 3,600 solver steps (RK4, 10 s at 360 Hz)
    with 1 to 3,600 saved outputs: the two counts are different things."""
    steps = 3_600
    model = float32_model(config.hidden_size, config.seed)
    ts_all, millivolts = ltc_jax.datasets.load_mitbih_208()
    rows = []
    for saves in config.saves:
        # The solve spans 10 s whatever `saves` is. With one save the input has
        # two observations (start and end) and the solve saves the final state;
        # otherwise it has `saves` evenly spaced observations, saved at each.
        times = max(saves, 2)
        index = np.round(np.linspace(0, steps, times)).astype(int)
        ts = jnp.asarray(ts_all[index], jnp.float32)
        xs = np.tile(millivolts[index][None, :, None], (config.batch_size, 1, 1))
        path = ltc_jax.InputPath(ts, jnp.asarray(xs, jnp.float32))
        save = "observations" if saves > 1 else "final"
        for mode in [m for m in config.modes if m != "direct"]:
            # The windowed adjoint's default windows, as ltc_jax.fit derives them.
            integrator = ltc_jax.training.resolve_windows(
                _problems.ecg_integrator("rk4", mode, steps),
                model.cell,
                float(ts[-1] - ts[0]),
                dtype=jnp.float32,
            )

            def loss(model, path, integrator=integrator, save=save):
                return jnp.mean(model(path, integrator=integrator, save=save) ** 2)

            memory = ltc_jax.measure.compiled_memory(eqx.filter_grad(loss), model, path)
            rows.append(
                dict(
                    gradient_mode=mode,
                    num_steps=steps,
                    num_saved_outputs=saves,
                    num_observations=times,
                    temp_bytes=memory.temp_bytes,
                )
            )
    return rows


# --- driver --------------------------------------------------------------------------


def main(config: Config) -> dict:
    """Run the experiment; returns (and writes to `metrics.json`) every record and
    the environment."""
    config, run = _run.start_run(config, "memory_scaling", QUICK)
    os.makedirs(run.path("records"))
    started = time.perf_counter()
    extra = {"checkpoint": config.checkpoints, "windowed": config.windows}
    variants = [
        (mode, option)
        for mode in config.modes
        for option in (None, *extra.get(mode, ()))
    ]
    problem = dict(
        batch_size=config.batch_size,
        hidden_size=config.hidden_size,
        horizon=max(1, round(config.horizon_seconds * SAMPLE_RATE_HZ)),
        seed=config.seed,
    )
    references = {}

    def reference(steps, interpolation="linear"):
        # The float64 reference gradient of a size, computed once.
        if (steps, interpolation) not in references:
            references[steps, interpolation] = _problems.float64_gradient(
                "experiments.memory_scaling:reference_problem",
                steps=steps,
                problem=problem,
                substeps=config.reference_substeps,
                interpolation=interpolation,
            )
        return references[steps, interpolation]

    def keep(into: list, record: dict, write: bool = True) -> None:
        # Add the record to its list, write it to records/ and print its line.
        into.append(record)
        name = f"{record['kind']}-{record['label']}-{record['num_steps']}"
        name += f"-{record['matmul_dtype']}" if "matmul_dtype" in record else ""
        name = name.replace(" ", "_").replace("(", "").replace(")", "")
        if write:
            _run.write_json(run.path("records", name + ".json"), record)
        line = f"{record['kind']:>9} {record['label']:<20} {record['num_steps']:>9} "
        line += f"steps  temp {_report.mib(record['temp_bytes'])} MiB"
        if "gradient_relative_error" in record:
            line += f"  grad error {_report.error(record['gradient_relative_error'])}"
        print(line)

    def measure(mode, option, steps, solver, interpolation="linear", **options):
        # `measure_configuration` in its own process, so that its runtime peak is
        # its own (at every size, `--quick` included).
        kwargs = dict(mode=mode, option=option, steps=steps, solver=solver)
        kwargs.update(problem=problem, timed_steps=config.timed_steps, **options)
        kwargs["reference"] = reference(steps, interpolation).tolist()
        return ltc_jax.measure.call_in_subprocess(
            "experiments.memory_scaling:measure_configuration", kwargs
        )

    records, adaptive_cost, estimates, window_memory, precision = [], [], [], [], []
    for steps in config.steps:
        # `checkpoints >= steps` stores every step: the same program as full.
        for mode, option in [(m, c) for m, c in variants if c is None or c < steps]:
            count = steps <= config.count_evaluations_up_to
            keep(records, measure(mode, option, steps, "rk4", count_evaluations=count))
    if config.cost_window_seconds > 0:
        steps = round(config.cost_window_seconds * SAMPLE_RATE_HZ)
        for mode in config.modes:
            record = measure(
                mode, None, steps, config.cost_solver, "cubic", rtol=config.cost_rtol
            )
            keep(adaptive_cost, record)
    for steps in config.estimate_steps:
        for mode, option in [*variants, ("backsolve-naive", None)]:
            rate = config.estimate_rate_hz
            keep(estimates, estimate_configuration(mode, option, steps, config, rate))
    if "windowed" in config.modes:
        for count in config.window_memory_counts:
            steps = config.window_memory_steps
            record = estimate_configuration(
                "windowed", count, steps, config, SAMPLE_RATE_HZ
            )
            keep(window_memory, record, write=False)
    if config.precision_steps:
        steps = config.precision_steps
        for mode in config.precision_modes:
            for matmul_dtype in (None, "bfloat16"):
                # Compiled memory and a gradient, no runtime peak: as the estimates,
                # in this process.
                record = precision_configuration(
                    mode, matmul_dtype, steps, problem, reference(steps)
                )
                keep(precision, record)

    metrics = dict(
        records=records,
        estimates=estimates,
        window_memory=window_memory,
        window_memory_law=window_memory_law(window_memory),
        adaptive_cost=adaptive_cost,
        adaptive_max_steps=adaptive_max_steps_demo(config, problem)
        if config.adaptive_max_steps
        else [],
        saves_versus_steps=saves_versus_steps(config) if config.saves else [],
        precision=precision,
        reductions=reductions(estimates),
        seconds=time.perf_counter() - started,
    )
    return run.finish(metrics)


def window_memory_law(rows: list[dict]) -> dict | None:
    """The windowed adjoint's compiled temp memory against its windows: the
    least-squares line `temp = intercept + slope * windows`, and the largest
    relative deviation of any row from it (a linear law has none)."""
    if len(rows) < 2:
        return None
    windows = np.array([r["windows"] for r in rows], np.float64)
    temp = np.array([r["temp_bytes"] for r in rows], np.float64)
    slope, intercept = np.polyfit(windows, temp, 1)
    fitted = intercept + slope * windows
    return dict(
        bytes_per_window=float(slope),
        intercept_bytes=float(intercept),
        largest_relative_deviation=float(np.max(np.abs(temp - fitted) / temp)),
    )


def reductions(estimates: list[dict]) -> list[dict]:
    """Temp memory of `full` divided by that of each other mode, per estimated size."""
    rows = []
    for steps in sorted({e["num_steps"] for e in estimates}):
        at = {e["label"]: e for e in estimates if e["num_steps"] == steps}
        if "full" not in at:
            continue
        for label, e in at.items():
            full_over_this = at["full"]["temp_bytes"] / max(e["temp_bytes"], 1)
            rows.append(
                dict(
                    num_steps=steps,
                    label=label,
                    temp_bytes=e["temp_bytes"],
                    full_over_this=full_over_this,
                )
            )
    return rows


if __name__ == "__main__":
    main(tyro.cli(Config))
