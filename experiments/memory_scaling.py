"""Memory, time, function evaluations and gradient error of the four gradient modes,
measured on the MIT-BIH ECG from 1e2 to 1e5 solver steps, and estimated from the
compiled program up to 21.6 million steps (24 hours at 250 Hz).

Task: an LTC reads a window of one ECG lead (millivolts, time in seconds) and
forecasts the signal `horizon_seconds` after the window's end; windows grow with the
number of steps (one fixed RK4 step per 1/360 s sample). Each configuration that
runs a training step is measured in its own process
([`ltc_jax.call_in_subprocess`][]), at every size, `--quick` included, so that its
runtime peak is its own; the compile-only estimates and the mixed-precision
comparison (compiled memory and one gradient, no runtime peak) run in this one.

    python -m experiments.memory_scaling          # default size, ~11 min on 2 cores
    python -m experiments.memory_scaling --quick    # smoke test, ~2 min on 2 cores

Writes `results/memory_scaling/<run>/`: `config.json`, `records/*.json` (one per
measured or estimated configuration), `metrics.json` (all records, the tables and
the environment), `memory_scaling.png`, and prints the tables.
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
GIB = _report.GIB
# A window of n sample intervals takes ceil(duration / dt0) steps; a step a hair
# longer than one sample keeps float32 rounding of the sample times (absolute
# times near 300 s, hundreds of float32 epsilons) from adding a step.
STEP_SLACK = 1.0 + 1e-6


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


# --- the problem -----------------------------------------------------------------


def make_problem(
    steps: int,
    *,
    batch_size: int,
    hidden_size: int,
    horizon_seconds: float,
    seed: int,
    dtype: str = "float32",
    interpolation: str = "linear",
    matmul_dtype: str | None = None,
) -> tuple[ltc_jax.LTC, ltc_jax.Batch]:
    """The model and a batch of ECG forecasting windows of `steps + 1` samples
    (`_problems.ecg_problem`), the target `horizon_seconds` past each window;
    `matmul_dtype` for mixed precision (`ltc_jax.LTC`'s)."""
    return _problems.ecg_problem(
        steps + 1,
        batch_size=batch_size,
        hidden_size=hidden_size,
        horizon=max(1, round(horizon_seconds * SAMPLE_RATE_HZ)),
        seed=seed,
        dtype=dtype,
        interpolation=interpolation,
        matmul_dtype=matmul_dtype,
    )


def float32_model(hidden_size: int, seed: int) -> ltc_jax.LTC:
    """The LTC of every configuration: float32, whatever JAX's default float."""
    with jax.enable_x64(False):
        return ltc_jax.LTC(1, hidden_size, 1, key=jr.PRNGKey(seed))


def mode_options(mode: str, option: int | None) -> dict:
    """The one option a mode's variants differ in: `checkpoints` of
    `"checkpoint"`, `windows` of `"windowed"` (`None`: the default)."""
    name = {"checkpoint": "checkpoints", "windowed": "windows"}.get(mode)
    return {} if name is None else {name: option}


def fixed_integrator(
    solver: str, mode: str, steps: int, option: int | None, rate_hz: float
) -> ltc_jax.Integrator:
    """Fixed steps of one sample (1 / rate_hz seconds); `max_steps` is exactly the
    steps taken."""
    return ltc_jax.make_integrator(
        solver,
        mode,
        dt0=STEP_SLACK / rate_hz,
        max_steps=steps,
        **mode_options(mode, option),
    )


def default_checkpoints(max_steps: int) -> int:
    """Checkpoints diffrax stores by default: the least `c` with
    `2 * max_steps < (c + 1) * (c + 2)`, about `sqrt(2 * max_steps)` (Stumm and
    Walther 2010, Eq. 2.2, as `equinox.internal.checkpointed_while_loop` uses it)."""
    if max_steps == 1:
        return 1
    c = 1
    while 2 * max_steps >= (c + 1) * (c + 2):
        c += 1
    return c


# --- one configuration (run in its own process) ------------------------------------


def reference_gradient(
    steps: int, problem: dict, substeps: int, out_file: str, interpolation: str
) -> dict:
    """The float64 gradient of exact backpropagation through RK4 with `substeps`
    steps per sample (a discretisation error `substeps**4` times smaller than the
    measured runs'), saved flat to `out_file` (`.npy`).

    Computed with checkpointing, which gives the same numbers as full storage
    (both backpropagate through the same discrete solve) in a fraction of the
    memory."""
    with jax.enable_x64(True):
        model, batch = make_problem(
            steps, **problem, dtype="float64", interpolation=interpolation
        )
        integrator = ltc_jax.make_integrator(
            "rk4",
            "checkpoint",
            dt0=STEP_SLACK / (substeps * SAMPLE_RATE_HZ),
            max_steps=substeps * steps,
        )
        record = _problems.save_reference_gradient(model, batch, integrator, out_file)
    return dict(record, steps=steps)


def measure_configuration(
    mode: str,
    option: int | None,
    steps: int,
    solver: str,
    problem: dict,
    timed_steps: int,
    reference_file: str | None,
    rtol: float | None = None,
    max_steps: int = 4_096,
    count_evaluations: bool = True,
) -> dict:
    """Measure one gradient mode on windows of `steps + 1` samples: the
    [`ltc_jax.Measurement`][] as a dict, with the input's size and the number of
    stored states.

    Fixed steps of one sample by default (`max_steps` is then the number of
    samples less one); with `rtol`, adaptive steps (atol = rtol / 100, at most
    `max_steps`) on the cubic interpolation of the samples, so the controller
    chooses the steps."""
    model, batch = make_problem(
        steps, **problem, interpolation="linear" if rtol is None else "cubic"
    )
    if rtol is None:
        integrator = fixed_integrator(solver, mode, steps, option, SAMPLE_RATE_HZ)
    else:
        integrator = ltc_jax.make_integrator(
            solver,
            mode,
            rtol=rtol,
            atol=rtol / 100,
            max_steps=max_steps,
            **mode_options(mode, option),
        )
    reference = None if reference_file is None else np.load(reference_file)
    # The first run (which gives the runtime peak) is the warm-up.
    measurement = ltc_jax.measure(
        model,
        batch,
        integrator,
        warmup_steps=0,
        timed_steps=timed_steps,
        reference_gradient=reference,
        count_evaluations=count_evaluations,
    )
    return dict(
        measurement.asdict(),
        kind="measured" if rtol is None else "adaptive",
        label=mode_label(mode, option),
        stored_checkpoints=stored_checkpoints(
            mode, option, integrator.max_steps, measurement.windows
        ),
        input_bytes=_input_bytes(batch),
        hidden_size=problem["hidden_size"],
        process_id=os.getpid(),
    )


def estimate_configuration(
    mode: str,
    option: int | None,
    steps: int,
    solver: str,
    batch_size: int,
    hidden_size: int,
    rate_hz: float,
) -> dict:
    """Compile (never run) one training step on an input of `steps + 1` samples at
    `rate_hz`, and read its memory. The input is abstract (`jax.ShapeDtypeStruct`),
    an argument of the step, so building the path costs nothing here. Mode
    `"backsolve-naive"` is diffrax's `BacksolveAdjoint` with the observations among
    its differentiable `args`, as a plain diffrax user would write it."""
    times = steps + 1
    model = float32_model(hidden_size, 0)
    batch = ltc_jax.abstract_batch(batch_size, times, 1, output_size=1)
    start = time.perf_counter()
    if mode == "backsolve-naive":
        fn, args = _naive_backsolve_gradient(solver, steps, rate_hz), (model, batch)
    else:
        integrator = fixed_integrator(solver, mode, steps, option, rate_hz)
        integrator, fn, args = _train_step(model, batch, integrator, steps / rate_hz)
    memory = ltc_jax.compiled_memory(fn, *args)
    windows = None
    if mode == "windowed":
        windows = integrator.adjoint.windows
    return dict(
        kind="estimated",
        label=mode_label(mode, option),
        gradient_mode=mode,
        option=option,
        windows=windows,
        stored_checkpoints=stored_checkpoints(mode, option, steps, windows),
        num_steps=steps,
        max_steps=steps,
        num_observations=times,
        batch_size=batch_size,
        hidden_size=hidden_size,
        rate_hz=rate_hz,
        input_bytes=_input_bytes(batch),
        compile_seconds=time.perf_counter() - start,
        **(memory.asdict() if memory is not None else {}),
    )


def precision_configuration(
    mode: str, matmul_dtype: str | None, steps: int, problem: dict, reference_file: str
) -> dict:
    """One gradient mode with the gate's products in `matmul_dtype` (`None`:
    float32 throughout): the compiled training step's memory (never run) and the
    gradient's error against the float64 reference."""
    model, batch = make_problem(steps, **problem, matmul_dtype=matmul_dtype)
    integrator = fixed_integrator("rk4", mode, steps, None, SAMPLE_RATE_HZ)
    integrator, step, args = _train_step(
        model, batch, integrator, steps / SAMPLE_RATE_HZ
    )
    memory = ltc_jax.compiled_memory(step, *args)
    gradient = ltc_jax.loss_gradient(model, batch, integrator)
    error = ltc_jax.gradient_relative_error(gradient, np.load(reference_file))
    return dict(
        kind="precision",
        label=mode_label(mode, None),
        gradient_mode=mode,
        matmul_dtype=matmul_dtype or "float32",
        num_steps=steps,
        gradient_relative_error=error,
        **(memory.asdict() if memory is not None else {}),
    )


def _train_step(model, batch, integrator, horizon: float):
    """A training step of `model` on `batch` (Adam) and its arguments, with the
    windowed adjoint's default windows for `horizon` seconds as `ltc_jax.fit`
    would derive them: `(integrator, step, (model, opt_state, batch))`."""
    integrator = ltc_jax.resolve_windows(
        integrator, model.cell, horizon, dtype=jnp.float32
    )
    optimizer = ltc_jax.make_optimizer(1e-3, 1)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    step = ltc_jax.make_train_step(optimizer, integrator)
    return integrator, step, (model, opt_state, batch)


def _naive_backsolve_gradient(solver: str, steps: int, rate_hz: float):
    def loss(model, batch):
        path = jax.lax.stop_gradient(batch.path)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(model.cell),
            ltc_jax.make_solver(solver),
            # float32 times, like the data, whatever JAX's default float.
            t0=jnp.asarray(0.0, jnp.float32),
            t1=jnp.asarray(steps / rate_hz, jnp.float32),
            dt0=jnp.asarray(1.0 / rate_hz, jnp.float32),
            y0=jnp.zeros((batch.labels.shape[0], model.hidden_size), jnp.float32),
            args=path,
            adjoint=diffrax.BacksolveAdjoint(),
            max_steps=steps,
        )
        outputs = model.outputs(sol.ys[-1])
        return jnp.mean((outputs - batch.labels) ** 2)

    return eqx.filter_grad(loss)


def _input_bytes(batch: ltc_jax.Batch) -> int:
    leaves = jax.tree.leaves(batch.path)
    return int(sum(math.prod(x.shape) * jnp.dtype(x.dtype).itemsize for x in leaves))


def mode_label(mode: str, option: int | None) -> str:
    if mode in ("checkpoint", "windowed"):
        return f"{mode} ({'default' if option is None else option})"
    return mode


def stored_checkpoints(
    mode: str, option: int | None, max_steps: int, windows: int | None = None
) -> int | None:
    """Copies of the solver state that a mode stores for a solve: every step
    (`full`), its checkpoints (`checkpoint`), or the state at each window's end
    (`windowed`: `windows - 1`)."""
    if mode == "full":
        return max_steps
    if mode == "checkpoint":
        requested = default_checkpoints(max_steps) if option is None else option
        return min(requested, max_steps)
    if mode == "windowed":
        return windows - 1
    return None


# --- the two demonstrations done in this process -----------------------------------


def adaptive_max_steps_demo(config: Config) -> list[dict]:
    """An adaptive solve that takes ~20 steps, compiled for growing `max_steps`:
    `full` and `checkpoint` memory follow `max_steps`, not the steps taken (the
    solve, and so the steps it takes, is the same for every `max_steps`)."""
    steps = round(config.adaptive_window_seconds * SAMPLE_RATE_HZ)
    model, batch = make_problem(
        steps,
        batch_size=config.batch_size,
        hidden_size=config.hidden_size,
        horizon_seconds=config.horizon_seconds,
        seed=config.seed,
        interpolation="cubic",
    )
    optimizer = ltc_jax.make_optimizer(1e-3, 1)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    rows = []
    for max_steps in config.adaptive_max_steps:
        for mode in ("full", "checkpoint"):
            integrator = ltc_jax.make_integrator(
                "tsit5", mode, rtol=1e-3, atol=1e-4, max_steps=max_steps
            )
            step = ltc_jax.make_train_step(optimizer, integrator)
            memory = ltc_jax.compiled_memory(step, model, opt_state, batch)
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
    _, metrics = eqx.filter_jit(ltc_jax.loss_and_metrics)(model, batch, integrator)
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
        for mode in [m for m in config.modes if m != "direct"]:
            integrator = fixed_integrator("rk4", mode, steps, None, SAMPLE_RATE_HZ)
            # The windowed adjoint's default windows, as ltc_jax.fit derives them.
            integrator = ltc_jax.resolve_windows(
                integrator, model.cell, float(ts[-1] - ts[0]), dtype=jnp.float32
            )

            save = "observations" if saves > 1 else "final"

            def loss(model, path, integrator=integrator, save=save):
                outputs = model(path, integrator=integrator, save=save)
                return jnp.mean(outputs**2)

            memory = ltc_jax.compiled_memory(eqx.filter_grad(loss), model, path)
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
    """Run the experiment; returns (and writes to `metrics.json`) every record, the
    tables and the environment."""
    config, run_dir = _run.start_run(config, "memory_scaling", QUICK)
    os.makedirs(os.path.join(run_dir, "records"))
    started = time.perf_counter()
    extra = {"checkpoint": config.checkpoints, "windowed": config.windows}
    variants = [
        (mode, option)
        for mode in config.modes
        for option in (None, *extra.get(mode, ()))
    ]

    def measured_variants(steps):
        # `checkpoints >= steps` stores every step: the same program as full.
        return [(m, c) for m, c in variants if c is None or c < steps]

    problem = dict(
        batch_size=config.batch_size,
        hidden_size=config.hidden_size,
        horizon_seconds=config.horizon_seconds,
        seed=config.seed,
    )

    def measure(mode, option, steps, solver, reference_file, **options) -> dict:
        # `measure_configuration` in its own process.
        return _call(
            "measure_configuration",
            dict(
                problem=problem,
                mode=mode,
                option=option,
                steps=steps,
                solver=solver,
                timed_steps=config.timed_steps,
                reference_file=reference_file,
                **options,
            ),
        )

    def keep(into: list, record: dict) -> None:
        # Add the record to its list, write it to records/ and print its line.
        into.append(record)
        _write_record(run_dir, record)
        print(_progress(record))

    records = []
    for steps in config.steps:
        reference_file = os.path.join(run_dir, "records", f"reference-{steps}.npy")
        reference = _reference(config, problem, steps, reference_file)
        print(f"reference gradient, {steps} steps: {reference['seconds']:.1f} s")
        for mode, option in measured_variants(steps):
            count = steps <= config.count_evaluations_up_to
            record = measure(
                mode, option, steps, "rk4", reference_file, count_evaluations=count
            )
            keep(records, record)

    adaptive_cost = []
    if config.cost_window_seconds > 0:
        steps = round(config.cost_window_seconds * SAMPLE_RATE_HZ)
        reference_file = os.path.join(run_dir, "records", "reference-adaptive.npy")
        _reference(config, problem, steps, reference_file, interpolation="cubic")
        for mode in config.modes:
            record = measure(
                mode,
                None,
                steps,
                config.cost_solver,
                reference_file,
                rtol=config.cost_rtol,
            )
            keep(adaptive_cost, record)

    estimates = []
    for steps in config.estimate_steps:
        for mode, option in [*variants, ("backsolve-naive", None)]:
            record = estimate_configuration(
                mode,
                option,
                steps,
                "rk4",
                config.batch_size,
                config.hidden_size,
                config.estimate_rate_hz,
            )
            for budget in config.budgets_gib:
                record[f"fits_{budget:g}_gib"] = record["peak_bytes"] <= budget * GIB
            keep(estimates, record)

    window_memory = []
    if "windowed" in config.modes:
        for count in config.window_memory_counts:
            record = estimate_configuration(
                "windowed",
                count,
                config.window_memory_steps,
                "rk4",
                config.batch_size,
                config.hidden_size,
                SAMPLE_RATE_HZ,
            )
            window_memory.append(record)
            print(_progress(record))

    precision = []
    if config.precision_steps:
        steps = config.precision_steps
        reference_file = os.path.join(run_dir, "records", f"reference-{steps}.npy")
        if not os.path.isfile(reference_file):
            _reference(config, problem, steps, reference_file)
        for mode in config.precision_modes:
            for matmul_dtype in (None, "bfloat16"):
                # Compiled memory and a gradient, no runtime peak: as the estimates,
                # in this process.
                record = precision_configuration(
                    mode, matmul_dtype, steps, problem, reference_file
                )
                precision.append(record)
                _write_record(run_dir, record)
                print(
                    f"precision {record['label']:<12} {record['matmul_dtype']:<9}"
                    f"  temp {_mib(record['temp_bytes'])} MiB  grad error "
                    f"{_error(record['gradient_relative_error'])}"
                )

    adaptive = adaptive_max_steps_demo(config) if config.adaptive_max_steps else []
    saves = saves_versus_steps(config) if config.saves else []

    metrics = dict(
        records=records,
        estimates=estimates,
        window_memory=window_memory,
        window_memory_law=window_memory_law(window_memory),
        adaptive_cost=adaptive_cost,
        adaptive_max_steps=adaptive,
        saves_versus_steps=saves,
        precision=precision,
        cost_ratios=cost_ratios(records),
        reductions=reductions(estimates),
        seconds=time.perf_counter() - started,
    )
    metrics = _run.finish(run_dir, metrics, lambda m: format_report(m, config))
    plot(metrics, config, os.path.join(run_dir, "memory_scaling.png"))
    return metrics


def _progress(r: dict) -> str:
    line = f"{r['kind']:>9} {r['label']:<20} {r['num_steps']:>9} steps"
    line += f"  temp {_mib(r['temp_bytes'])} MiB"
    if r["kind"] != "estimated":
        line += f"  step {r['step_seconds']:.3f} s"
        line += f"  grad error {_error(r['gradient_relative_error'])}"
    return line


def _reference(config, problem, steps, out_file, interpolation="linear") -> dict:
    """The float64 reference gradient of a size, in a float64 process."""
    kwargs = dict(
        steps=steps,
        problem=problem,
        substeps=config.reference_substeps,
        out_file=out_file,
        interpolation=interpolation,
    )
    return _call("reference_gradient", kwargs, env={"JAX_ENABLE_X64": "1"})


def _call(function: str, kwargs: dict, env: dict | None = None):
    """`function(**kwargs)` in a fresh process, so that its runtime peak is its own
    (at every size, `--quick` included)."""
    return ltc_jax.call_in_subprocess(
        f"{os.path.abspath(__file__)}:{function}", kwargs, env=env
    )


def _write_record(run_dir: str, record: dict) -> None:
    name = f"{record['kind']}-{record['label']}-{record['num_steps']}"
    if "matmul_dtype" in record:  # the precision comparison: one per dtype
        name += f"-{record['matmul_dtype']}"
    name = name.replace(" ", "_").replace("(", "").replace(")", "")
    _run.write_json(os.path.join(run_dir, "records", name + ".json"), record)


def cost_ratios(records: list[dict]) -> list[dict]:
    """Backward/forward time and evaluation ratios per mode, at each measured size."""
    return [
        dict(
            label=r["label"],
            num_steps=r["num_steps"],
            backward_forward_time_ratio=r["backward_forward_time_ratio"],
            backward_forward_evaluation_ratio=r["backward_forward_evaluation_ratio"],
        )
        for r in records
    ]


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
            rows.append(
                dict(
                    num_steps=steps,
                    label=label,
                    temp_bytes=e["temp_bytes"],
                    full_over_this=at["full"]["temp_bytes"] / max(e["temp_bytes"], 1),
                )
            )
    return rows


# --- report --------------------------------------------------------------------------


_mib = _report.mib
_error = _report.error
_ratio = _report.ratio


MEASURED_COLUMNS = [
    ("mode", lambda r: r["label"]),
    ("steps", lambda r: r["num_steps"]),
    ("observations", lambda r: r["num_observations"]),
    ("compile s", lambda r: f"{r['compile_seconds']:.1f}"),
    *_report.measurement_columns(mib_digits=2, seconds_format=".3f"),
    ("bwd/fwd time", lambda r: f"{r['backward_forward_time_ratio']:.2f}"),
    ("fwd evals", lambda r: r["forward_evaluations"] or "-"),
    ("bwd evals", lambda r: r["backward_evaluations"] or "-"),
    ("bwd/fwd evals", lambda r: _ratio(r["backward_forward_evaluation_ratio"])),
    ("grad rel. error", lambda r: _error(r["gradient_relative_error"])),
]


def format_report(metrics: dict, config: Config) -> str:
    """The tables printed at the end of a run (also written to `report.txt`)."""
    environment = metrics["environment"]
    largest = max(r["num_steps"] for r in metrics["records"])
    counted = [
        r["num_steps"]
        for r in metrics["cost_ratios"]
        if r["backward_forward_evaluation_ratio"] is not None
    ]
    largest_counted = max(counted, default=None)
    evaluation_ratio = {
        r["label"]: r["backward_forward_evaluation_ratio"]
        for r in metrics["cost_ratios"]
        if r["num_steps"] == largest_counted
    }
    budgets = [
        (f"fits {b:g} GiB", lambda r, b=b: "yes" if r[f"fits_{b:g}_gib"] else "no")
        for b in config.budgets_gib
    ]
    mode, steps = ("mode", lambda r: r["label"]), ("steps", lambda r: r["num_steps"])
    temp = ("temp MiB", lambda r: _mib(r["temp_bytes"]))
    sections = [
        (
            f"Measured on the ECG ({environment['backend']}, {environment['device']}; "
            "times are medians; gradient error against the float64 reference):",
            metrics["records"],
            MEASURED_COLUMNS,
        ),
        (
            "Compile-only estimates (an input of as many samples at "
            f"{config.estimate_rate_hz:g} Hz; peak = temp + arguments + outputs):",
            metrics["estimates"],
            [
                mode,
                steps,
                temp,
                ("input MiB", lambda r: _mib(r["input_bytes"])),
                ("peak MiB", lambda r: _mib(r["peak_bytes"])),
                *budgets,
            ],
        ),
        (
            "Windowed adjoint, compile-only at "
            f"{config.window_memory_steps:,} steps: temp memory against windows "
            + (
                "({bytes_per_window:,.0f} bytes per window, largest deviation from "
                "a line {largest_relative_deviation:.1%}):".format(
                    **metrics["window_memory_law"]
                )
                if metrics["window_memory_law"]
                else ":"
            ),
            metrics["window_memory"],
            [
                ("windows", lambda r: r["windows"]),
                temp,
                ("stored states", lambda r: r["stored_checkpoints"]),
            ],
        ),
        (
            "Temp memory of full storage divided by each mode's:",
            metrics["reductions"],
            [mode, steps, ("full / mode", lambda r: f"{r['full_over_this']:.1f}x")],
        ),
        (
            f"Adaptive Tsit5 on a {config.adaptive_window_seconds:g} s window (cubic "
            "input): memory follows max_steps, not the steps taken:",
            metrics["adaptive_max_steps"],
            [
                ("mode", lambda r: r["gradient_mode"]),
                ("max_steps", lambda r: r["max_steps"]),
                ("steps taken", lambda r: r["num_steps"]),
                ("rejected", lambda r: r["num_rejected_steps"]),
                ("stored states", lambda r: r["stored_checkpoints"]),
                temp,
            ],
        ),
        (
            f"Mixed precision, RK4 x {config.precision_steps:,} steps: the gate's "
            "matrix products in bfloat16 (state, solver, loss and optimiser in "
            "float32); compiled temp memory and the gradient's error against the "
            "float64 reference:",
            metrics["precision"],
            [
                ("mode", lambda r: r["label"]),
                ("products", lambda r: r["matmul_dtype"]),
                temp,
                ("grad error", lambda r: _error(r["gradient_relative_error"])),
            ],
        ),
        (
            "Saved outputs are not solver steps (RK4, 3,600 steps over 10 s):",
            metrics["saves_versus_steps"],
            [
                ("mode", lambda r: r["gradient_mode"]),
                ("solver steps", lambda r: r["num_steps"]),
                ("saved outputs", lambda r: r["num_saved_outputs"]),
                temp,
            ],
        ),
        (
            f"Cost of the gradient (backward / forward): time at {largest} steps, "
            f"evaluations at {largest_counted} steps (the largest size counted):",
            [r for r in metrics["cost_ratios"] if r["num_steps"] == largest],
            [
                mode,
                ("time", lambda r: _ratio(r["backward_forward_time_ratio"], "x")),
                (
                    "evaluations",
                    lambda r: _ratio(evaluation_ratio.get(r["label"]), "x"),
                ),
            ],
        ),
        (
            f"Cost of the gradient with adaptive {config.cost_solver} (rtol "
            f"{config.cost_rtol:g}, atol {config.cost_rtol / 100:g}) on "
            f"{config.cost_window_seconds:g} s windows (cubic input); steps are the "
            "forward solve's, accepted + rejected:",
            metrics["adaptive_cost"],
            [
                mode,
                steps,
                ("rejected", lambda r: r["num_rejected_steps"]),
                ("max_steps", lambda r: r["max_steps"]),
                temp,
                ("fwd evals", lambda r: r["forward_evaluations"]),
                ("bwd evals", lambda r: r["backward_evaluations"]),
                (
                    "bwd/fwd evals",
                    lambda r: _ratio(r["backward_forward_evaluation_ratio"]),
                ),
                ("bwd/fwd time", lambda r: f"{r['backward_forward_time_ratio']:.2f}"),
                ("grad rel. error", lambda r: _error(r["gradient_relative_error"])),
            ],
        ),
    ]
    text = "\n\n".join(
        f"{title}\n{_report.format_table(rows, columns)}"
        for title, rows, columns in sections
        if rows
    )
    return text + f"\n\nTotal {metrics['seconds']:.0f} s"


def plot(metrics: dict, config: Config, path: str) -> None:
    """Log-log compiled temp memory against internal solver steps (one line per
    mode: measured solid, compile-only dashed), and median step time."""
    plt = _report.pyplot()

    labels = list(dict.fromkeys(r["label"] for r in metrics["records"]))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colours = {label: palette[i % len(palette)] for i, label in enumerate(labels)}
    figure, (memory_axis, time_axis) = plt.subplots(1, 2, figsize=(12, 4.6))
    for label in labels:
        measured = sorted(
            (r["num_steps"], r["temp_bytes"], r["step_seconds"])
            for r in metrics["records"]
            if r["label"] == label
        )
        estimated = sorted(
            (r["num_steps"], r["temp_bytes"])
            for r in metrics["estimates"]
            if r["label"] == label
        )
        x, memory, seconds = zip(*measured, strict=True)
        memory_axis.loglog(x, memory, "o-", color=colours[label], label=label)
        if estimated:
            ex, ememory = zip(*estimated, strict=True)
            memory_axis.loglog(
                [x[-1], *ex],
                [memory[-1], *ememory],
                "s--",
                color=colours[label],
                mfc="none",
            )
        time_axis.loglog(x, seconds, "o-", color=colours[label], label=label)
    naive = sorted(
        (r["num_steps"], r["temp_bytes"])
        for r in metrics["estimates"]
        if r["label"] == "backsolve-naive"
    )
    if naive:
        memory_axis.loglog(
            *zip(*naive, strict=True),
            "x:",
            color="grey",
            label="backsolve, data not frozen",
        )
    inputs = sorted(
        {
            (r["num_steps"], r["input_bytes"])
            for r in metrics["records"] + metrics["estimates"]
        }
    )
    memory_axis.loglog(
        *zip(*inputs, strict=True), color="black", lw=0.8, ls="-.", label="input data"
    )
    for budget in config.budgets_gib:
        memory_axis.axhline(budget * GIB, color="red", lw=0.8, ls=":")
        memory_axis.text(
            110, budget * GIB * 1.15, f"{budget:g} GiB", color="red", fontsize=8
        )
    memory_axis.set_xlabel(
        "internal solver steps per solve (1 saved output per sequence)"
    )
    memory_axis.set_ylabel("compiled temp bytes of one training step")
    memory_axis.set_title(
        f"Memory (batch {config.batch_size}, {config.hidden_size} units, RK4, "
        "float32)\n"
        "solid: measured on ECG; dashed: compile-only",
        fontsize=10,
    )
    memory_axis.legend(fontsize=7)
    time_axis.set_xlabel("internal solver steps per solve")
    time_axis.set_ylabel("median training-step seconds")
    backend = metrics["environment"]["backend"]
    time_axis.set_title(
        f"Time ({backend}, {metrics['environment']['device']})", fontsize=10
    )
    time_axis.legend(fontsize=7)
    _report.save_figure(figure, path)


if __name__ == "__main__":
    main(tyro.cli(Config))
