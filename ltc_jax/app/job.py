"""The main job: train an LTC on a labelled `.ts` dataset and write a run folder."""

import csv
import dataclasses
import datetime
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import ltc_jax
from ltc_jax.datasets import (
    SequenceDataset,
    channel_statistics,
    drop_observations,
    load_japanese_vowels,
    read_ts,
    standardize_with,
    stratified_split,
)

from .._names import has_reverse_solve
from .config import DEFAULT_ATOL, DEFAULT_RTOL, TrainConfig, _flag


class RunInterrupted(Exception):
    """Training was interrupted (Ctrl-C); `run_dir` holds the run, whose newest
    checkpoint (written atomically) `--resume` continues from."""

    def __init__(self, run_dir: str):
        super().__init__(run_dir)
        self.run_dir = run_dir


def check_paths(config: TrainConfig) -> None:
    """Check the files and folders a config names, before anything is loaded,
    compiled or written.

    **Raises:** `FileNotFoundError` for a missing `.ts` file or `resume` folder;
    `FileExistsError` for an `out` that is a file or a non-empty folder.
    """
    for name in ("data", "test_data"):
        path = getattr(config, name)
        if path is not None and not os.path.isfile(path):
            raise FileNotFoundError(f"{_flag(name)} {path}: no such file.")
    if config.resume is not None and not os.path.isdir(config.resume):
        raise FileNotFoundError(f"--resume {config.resume}: no such folder.")
    if config.out is not None and os.path.exists(config.out):
        if not os.path.isdir(config.out):
            raise FileExistsError(f"--out {config.out} is a file; give a folder.")
        if os.listdir(config.out):
            raise FileExistsError(
                f"--out {config.out} already holds files; choose a new folder "
                "(runs are never overwritten)."
            )


def make_run_dir(out: str | None, parent: str) -> str:
    """Create a fresh run folder: `out`, or `<parent>/<date>-<time>` (with a
    numeric suffix if that exists already).

    **Raises:** `FileExistsError` if `out` exists and is not empty (an earlier run
    is never overwritten).
    """
    if out is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = base = os.path.join(parent, stamp)
        suffix = 1
        while os.path.exists(out):
            suffix += 1
            out = f"{base}-{suffix}"
    elif os.path.isdir(out) and os.listdir(out):
        raise FileExistsError(
            f"{out} already holds files; choose a new folder (runs are never "
            "overwritten)."
        )
    os.makedirs(out, exist_ok=True)
    return out


def load_data(config: TrainConfig) -> dict[str, Any]:
    """The data a config names: `train`, `validation` (a stratified share of
    the training file, `None` with `validation_fraction=0`) and `test`, with
    observations dropped if `drop_rate > 0`, standardised with the statistics of
    the training part only, which are returned as `statistics` `(mean, std)`.

    **Raises:** `ValueError` if the files have different channels; the errors of
    [`ltc_jax.datasets.read_ts`][].
    """
    if config.data is None:
        train, test = load_japanese_vowels()
    else:
        train = read_ts(config.data)
        test = read_ts(
            config.test_data,
            class_names=train.class_names if train.is_classification else None,
        )
        if train.num_channels != test.num_channels:
            raise ValueError(
                f"{config.test_data} has {test.num_channels} channels, "
                f"{config.data} has {train.num_channels}."
            )
    if config.drop_rate > 0:
        train = drop_observations(train, config.drop_rate, seed=config.seed)
        test = drop_observations(test, config.drop_rate, seed=config.seed + 1)
    validation = None
    if config.validation_fraction > 0:
        train, validation = stratified_split(
            train, config.validation_fraction, seed=config.seed
        )
    statistics = channel_statistics(train)
    scale = lambda data: None if data is None else standardize_with(data, *statistics)  # noqa: E731
    return dict(
        train=scale(train),
        validation=scale(validation),
        test=scale(test),
        statistics=statistics,
    )


FIXED_ONLY = ("euler", "rk4", "fused")
"""Solvers without an error estimate: fixed steps only."""


def default_solver(config: TrainConfig) -> tuple[str, str]:
    """The solver of a config that names none, and why.

    - `"tsit5"` (adaptive) where the config asks for error control (`rtol`,
      `atol`, `dtmin` or a tolerance schedule), or for a continuous adjoint
      (`backsolve`, `windowed`): the fused step cannot run backwards in time,
      and an explicit reverse solve at its one step per observation interval
      would lie far outside its stability region. A CfC solves no ODE; it
      gets `"tsit5"` too, unused.
    - `"fused"` otherwise: the original authors' semi-implicit step (Hasani et
      al. 2021), one step per observation interval. The derived time constants
      reach down to a tenth of that interval, where an explicit solver's steps
      are limited by stability, not accuracy, while the fused step is stable at
      any step: its decay sits in a denominator. The docs' training page
      gives the measured trade-off.
    """
    if config.model == "cfc":
        return "tsit5", "a CfC solves no ODE (unused)"
    if (
        config.rtol is not None
        or config.atol is not None
        or config.dtmin is not None
        or config.tighten_at is not None
    ):
        return "tsit5", (
            "error control was asked for (tolerances, --dtmin or --tighten-at)"
        )
    if has_reverse_solve(config.adjoint):
        return "tsit5", (
            f"--adjoint {config.adjoint} solves backwards in time, which the fused "
            "step cannot, and an explicit reverse solve needs error control at "
            "the derived time constants"
        )
    return "fused", (
        "the original authors' semi-implicit step: stable at one step per "
        "observation interval whatever the time constants, where an explicit "
        "solver's steps shrink to the fastest of them"
    )


def resolve_settings(
    config: TrainConfig,
    train: SequenceDataset,
    others: tuple[SequenceDataset, ...] = (),
) -> dict[str, Any]:
    """The settings a config leaves to the data ([`ltc_jax.derive_defaults`][] on
    the training data; `others`, such as the test set, only widen `max_steps`
    so that every solve fits), each given option kept: `solver`
    ([`default_solver`][ltc_jax.app.job.default_solver] where the config names
    none), `dt0` (for fixed steps), `adaptive`, `max_steps`, `batch_size`,
    `tau_init`, and `derived`, naming each setting the data chose and why; also
    `batching` and `readout_times`."""
    name, solver_reason = (
        (config.solver, None) if config.solver is not None else default_solver(config)
    )
    adaptive = (
        config.rtol is not None
        or config.atol is not None
        or (config.dt0 is None and name not in FIXED_ONLY)
    )
    solver = ltc_jax.make_solver(name, ode_unfolds=config.ode_unfolds)
    bound = ltc_jax.real_stability_bound(solver)
    defaults = ltc_jax.derive_defaults(
        [train],
        stability_bound=bound,
        adaptive=adaptive,
        batch_size=config.batch_size,
        interpolation=config.interpolation,
        readout_pooling=config.readout_pooling,
    )
    every = (train, *others)
    reasons = dict(defaults.reasons)
    implicit = isinstance(solver, diffrax.AbstractImplicitSolver)
    batching = defaults.batching
    if implicit:
        batching = "vmap"
        reasons["batching"] = (
            "an implicit solver: a solve per sequence factorises a Jacobian per "
            "sequence, not one of the whole batch"
        )
    readout_times = defaults.readout_times
    if config.cell == "biophysical":
        readout_times = 1
        reasons["readout_times"] = "the biophysical cell reads its final state"
    reasons["solver"] = solver_reason
    chosen = dict(
        solver=name,
        dt0=config.dt0 if config.dt0 is not None or adaptive else defaults.dt0,
        batch_size=config.batch_size or defaults.batch_size,
        tau_init=tuple(config.tau_init or defaults.tau_init),
        batching=config.batching or batching,
        readout_times=config.readout_times or readout_times,
    )
    if config.dt0 is None and not adaptive and bound is not None:
        # Stable on the time constants actually drawn (a given --tau-init too).
        low = max(chosen["tau_init"][0], config.tau_min)
        chosen["dt0"] = min(defaults.spacing, 0.9 * bound * low / (1 + low))
    if adaptive:
        over_every = ltc_jax.derive_defaults(every)
        widest = over_every.max_steps
        reasons["max_steps"] = (
            over_every.reasons["max_steps"]
            + " (over the training, validation and test sets)"
        )
        if config.tighten_at is not None:  # the tight phase takes more steps
            widest *= 4
        chosen["max_steps"] = config.max_steps or widest
    else:
        chosen["max_steps"] = ltc_jax.fixed_max_steps(every, chosen["dt0"])
    names = (
        "solver",
        "dt0",
        "batch_size",
        "tau_init",
        "max_steps",
        "batching",
        "readout_times",
    )
    if config.model == "cfc":  # no ODE solve: only the batches and the readout
        names = ("batch_size", "readout_times")
    derived = {
        name: dict(value=chosen[name], reason=reasons[name])
        for name in names
        if getattr(config, name) is None and (name != "dt0" or not adaptive)
    }
    if not adaptive and config.max_steps is None:
        derived["max_steps"]["reason"] = "the steps of dt0 the longest sequence needs"
    return dict(chosen, adaptive=adaptive, derived=derived)


def path_options(config: TrainConfig) -> dict[str, Any]:
    """The `InputPath` options a config asks for."""
    return dict(
        interpolation=config.interpolation,
        observation_mask=config.observation_mask,
        time_since_observation=config.time_since_observation,
    )


def make_config_integrator(
    config: TrainConfig,
    settings: dict[str, Any],
    adjoint: str | None = None,
    backward_solver: str | None = None,
) -> ltc_jax.Integrator:
    """The [`ltc_jax.Integrator`][] a config asks for, with the `settings` of
    `resolve_settings` (`solver`, `dt0`, `max_steps`, `adaptive`): fixed steps when
    `dt0` is given (or derived) without tolerances, adaptive otherwise (default
    tolerances 1e-3/1e-4)."""
    rtol = atol = None
    if settings["adaptive"]:
        rtol = DEFAULT_RTOL if config.rtol is None else config.rtol
        atol = DEFAULT_ATOL if config.atol is None else config.atol
    adjoint = config.adjoint if adjoint is None else adjoint
    return ltc_jax.make_integrator(
        settings["solver"],
        adjoint,
        dt0=settings["dt0"],
        rtol=rtol,
        atol=atol,
        dtmin=config.dtmin,
        max_steps=settings["max_steps"],
        checkpoints=config.checkpoints if adjoint == "checkpoint" else None,
        windows=config.windows if adjoint == "windowed" else None,
        backward_solver=(backward_solver or config.backward_solver)
        if has_reverse_solve(adjoint)
        else None,
        seminorm=config.seminorm and has_reverse_solve(adjoint),
        ode_unfolds=config.ode_unfolds,
        batching=settings.get("batching", config.batching),
    )


def training_schedule(
    config: TrainConfig, integrator: ltc_jax.Integrator
) -> ltc_jax.ToleranceSchedule | None:
    """The two-phase tolerance schedule of `--tighten-at`, or `None`.

    **Raises:** `ValueError` if `tighten_at` is outside (0, 1) or steps are fixed.
    """
    if config.tighten_at is None:
        return None
    if not 0.0 < config.tighten_at < 1.0:
        raise ValueError(f"--tighten-at must lie in (0, 1); got {config.tighten_at}.")
    if not integrator.is_adaptive:
        raise ValueError("--tighten-at needs adaptive steps (no --dt0 alone).")
    switch = max(1, min(config.epochs - 1, round(config.tighten_at * config.epochs)))
    controller = integrator.stepsize_controller
    return ltc_jax.ToleranceSchedule(
        integrator,
        start_epochs=(0, switch),
        rtols=(float(controller.rtol), config.tight_rtol),
        atols=(float(controller.atol), config.tight_atol),
    )


def memory_by_mode(
    model,
    optimizer,
    batch,
    config: TrainConfig,
    settings: dict[str, Any],
    datasets: tuple[SequenceDataset, ...],
) -> dict[str, dict[str, int] | None]:
    """Compiled memory of one training step under every gradient mode (same model,
    batch and solver), from XLA's memory analysis; nothing is run. With the fused
    solver, the reverse solves use `config.backward_solver` or Heun; the windowed
    adjoint has the windows the run derives (or `config.windows`). A CfC
    solves no ODE: one entry, `"backprop"`, through its updates."""
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    if config.model == "cfc":
        integrator = make_config_integrator(config, settings)
        step = ltc_jax.make_train_step(optimizer, integrator)
        memory = ltc_jax.compiled_memory(step, model, opt_state, batch)
        return dict(backprop=None if memory is None else memory.asdict())
    backward = config.backward_solver
    if settings["solver"] == "fused" and backward is None:
        backward = "heun"
    table = {}
    for mode in ltc_jax.ADJOINT_NAMES:
        integrator = make_config_integrator(
            config, settings, adjoint=mode, backward_solver=backward
        )
        integrator = ltc_jax.resolve_windows(
            integrator,
            model.cell,
            max(float(np.max(data.durations)) for data in datasets),
            dtype=batch.path.ts.dtype,
        )
        step = ltc_jax.make_train_step(optimizer, integrator)
        memory = ltc_jax.compiled_memory(step, model, opt_state, batch)
        table[mode] = None if memory is None else memory.asdict()
    return table


def _resumed_config(config: TrainConfig) -> tuple[TrainConfig, dict[str, Any]]:
    """The saved configuration of the run `config.resume` continues, and the
    `derived` record saved with it (empty for runs that predate it).

    **Raises:** `FileNotFoundError` without a `config.json`; `ValueError` if
    `config` sets an option to a value the saved run does not have: a resumed
    run keeps its options, except where it runs (`PLACEMENT`), which comes from
    `config` (another device count gives the same run to round-off). The batch
    size the run derived is kept (so that another device count cannot change
    it), and a run saved before readout times and batching were derived keeps
    reading its final state and the batching it had.
    """
    saved_path = os.path.join(config.resume, "config.json")
    if not os.path.isfile(saved_path):
        raise FileNotFoundError(f"--resume {config.resume}: no config.json in it.")
    with open(saved_path) as file:
        raw = json.load(file)
    saved = _config_from_json(raw)
    conflicts = [
        f"{_flag(field.name)} {getattr(config, field.name)!r} (saved: "
        f"{getattr(saved, field.name)!r})"
        for field in dataclasses.fields(TrainConfig)
        if field.name not in ("resume", *PLACEMENT)
        and getattr(config, field.name) != field.default
        and getattr(config, field.name) != getattr(saved, field.name)
    ]
    if conflicts:
        raise ValueError(
            f"--resume {config.resume} continues that run with its saved options; "
            f"these differ: {'; '.join(conflicts)}. Start a new run to change them."
        )
    here = {name: getattr(config, name) for name in PLACEMENT}
    derived = raw.get("derived", {})
    kept = {}
    if saved.batch_size is None and "batch_size" in derived:
        kept["batch_size"] = derived["batch_size"]["value"]
    if saved.readout_times is None and "readout_times" not in derived:
        kept["readout_times"] = 1
    if saved.batching is None and "batching" not in derived:
        kept["batching"] = "vmap" if saved.solver == "kvaerno5" else "batched"
    return dataclasses.replace(saved, resume=None, **here, **kept), derived


PLACEMENT = ("progress", "devices", "coordinator", "num_processes", "process_id")
"""The options of where and how a run shows and runs, which a resumed run takes
from its new command line."""


def make_model(
    config: TrainConfig, input_size: int, output_size: int, settings: dict[str, Any]
) -> ltc_jax.LTC | ltc_jax.CfC:
    """The freshly initialised LTC (or CfC) a config describes, with the
    `tau_init` and `readout_times` of `settings` (from `resolve_settings`; a
    run saved before readout times existed reads its final state) and the
    config's `readout_pooling`."""
    sizes = (input_size, config.hidden_size, output_size)
    shared = dict(
        readout_times=settings.get("readout_times", 1),
        readout_pooling=config.readout_pooling,
        key=jr.PRNGKey(config.seed),
    )
    if config.model == "cfc":
        return ltc_jax.CfC(
            *sizes,
            mode=config.cfc_mode,
            backbone_units=config.backbone_units,
            backbone_layers=config.backbone_layers,
            **shared,
        )
    return ltc_jax.LTC(
        *sizes,
        cell=config.cell,
        wiring=config.wiring,
        tau_init=tuple(settings["tau_init"]),
        tau_min=config.tau_min,
        matmul_dtype="bfloat16" if config.precision == "bf16" else None,
        **shared,
    )


def train_and_evaluate(
    config: TrainConfig, say: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run the main job: load data, train, evaluate, and write the run folder.

    The folder (`config.out`, or a new `runs/train/<date>-<time>`) receives
    `config.json`, `checkpoints/` (the newest two, written atomically: model,
    optimiser state and position in the data), and at the end `model.eqx` (the
    trained parameters), `data.json` (the standardisation statistics and class
    names, for `ltc-jax evaluate` and `predict`), `history.csv`, `history.png`
    (where matplotlib is installed) and `metrics.json`. With `config.resume`, the
    run in that folder continues from its newest good checkpoint, with its saved
    configuration, and ends as an uninterrupted run would have (bit for bit on
    CPU); `train_seconds` then counts every part of the run.

    **Arguments:** `config`; `say`: called with one-line status messages (what is
    resumed, what is being compiled); default: silent.

    **Returns:** the metrics dict, also written to `metrics.json`, with at least
    `test_accuracy`, `train_seconds`, `gradient_mode`, `solver`,
    `steps_per_sequence` and `memory_bytes_by_mode`, plus `history`,
    `parameters_sha256` (a digest of the final parameters) and `environment`.

    **Raises:** `ValueError` for a bad or inconsistent option
    ([`ltc_jax.app.TrainConfig.check`][]); `FileNotFoundError` and
    `FileExistsError` from [`ltc_jax.app.job.check_paths`][]; the errors of
    [`ltc_jax.fit`][]; a [`ltc_jax.datasets.TSFormatError`][] for a malformed
    `.ts` file; `RunInterrupted` on Ctrl-C during training.
    """
    say = say or (lambda message: None)
    config.check()
    check_paths(config)
    resume = config.resume is not None
    if resume:
        run_dir = config.resume
        config, saved_derived = _resumed_config(config)
    if config.coordinator is not None:
        start_processes(config)
    writer = jax.process_index() == 0
    if config.x64:
        jax.config.update("jax_enable_x64", True)
    data = load_data(config)
    train, validation, test = data["train"], data["validation"], data["test"]
    held = () if validation is None else (validation,)
    settings = resolve_settings(config, train, (*held, test))
    if resume:  # what the run derived and kept (its solver, batch size) says why
        settings["derived"] = saved_derived | settings["derived"]
    config = dataclasses.replace(config, solver=settings["solver"])
    mesh = training_mesh(config, settings)
    for name, choice in settings["derived"].items():
        say(f"{name} = {choice['value']} ({choice['reason']})")
    batch_size = settings["batch_size"]
    integrator = make_config_integrator(config, settings)
    schedule = training_schedule(config, integrator)
    options = path_options(config)
    train_path = ltc_jax.make_input_path(train, **options)
    model = make_model(config, train_path.input_size, _output_size(train), settings)
    steps_per_epoch = math.ceil(len(train) / batch_size)
    optimizer = ltc_jax.make_optimizer(
        config.learning_rate,
        config.epochs * steps_per_epoch,
        warmup_steps=config.warmup_steps,
        clip_norm=config.clip_norm,
        weight_decay=config.weight_decay,
    )
    # The options are checked above; only now is the run folder made.
    if not resume:
        if writer:
            run_dir = make_run_dir(config.out, os.path.join("runs", "train"))
            with open(os.path.join(run_dir, "config.json"), "w") as file:
                saved = dict(dataclasses.asdict(config), derived=settings["derived"])
                json.dump(saved, file, indent=2)
        else:
            run_dir = config.out
    checkpoint_dir = os.path.join(run_dir, "checkpoints")
    found = ltc_jax.list_checkpoints(checkpoint_dir) if resume else []
    if resume:
        where = os.path.basename(found[-1]) if found else "its start (no checkpoint)"
        say(f"resuming {run_dir} from {where}, with its saved options")
    say(
        "compiling the training step ("
        + (
            f"CfC, {config.cfc_mode}"
            if config.model == "cfc"
            else f"{config.solver}, {config.adjoint}"
        )
        + ") ..."
    )
    start = time.perf_counter()
    try:
        model, history = ltc_jax.fit(
            model,
            train,
            integrator=integrator if schedule is None else schedule,
            optimizer=optimizer,
            epochs=config.epochs,
            batch_size=batch_size,
            seed=config.seed,
            path=train_path,
            validation=validation,
            validation_path=None
            if validation is None
            else ltc_jax.make_input_path(validation, **options),
            patience=config.patience if validation is not None else None,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=config.checkpoint_every,
            resume=bool(found),
            on_failure=config.on_failure,
            max_consecutive_failures=config.max_consecutive_failures,
            mesh=mesh,
            progress=ltc_jax.TqdmFitProgress()
            if config.progress and writer
            else ltc_jax.NoFitProgress(),
        )
    except KeyboardInterrupt:
        raise RunInterrupted(run_dir) from None
    part_seconds = time.perf_counter() - start
    if schedule is not None:
        integrator = schedule.final
    result = ltc_jax.evaluate(
        model,
        test,
        integrator=integrator,
        batch_size=batch_size,
        path=ltc_jax.make_input_path(test, **options),
        mesh=mesh,
    )
    memory = None
    if config.memory_table and writer:
        if config.model == "ltc":
            say(
                f"measuring the compiled memory of a training step under each of the "
                f"{len(ltc_jax.ADJOINT_NAMES)} gradient modes (one compilation "
                "each) ..."
            )
        batch = next(ltc_jax.batches(train, batch_size, path=train_path))
        memory = memory_by_mode(
            model, optimizer, batch, config, settings, (train, *held, test)
        )
    metrics = dict(
        test_accuracy=result["accuracy"],
        test_loss=result["loss"],
        train_seconds=sum(record["seconds"] for record in history)
        if resume
        else part_seconds,
        train_seconds_this_part=part_seconds,
        model=config.model,
        gradient_mode="backprop" if config.model == "cfc" else integrator.adjoint_name,
        windows=history[-1].get("windows") if history else None,
        solver=config.solver,
        rtol=_tolerance(integrator, "rtol"),
        atol=_tolerance(integrator, "atol"),
        cell=config.cell,
        wiring=config.wiring if config.cell == "biophysical" else None,
        adaptive=integrator.is_adaptive,
        max_steps=integrator.max_steps,
        steps_per_sequence=result["num_steps"],
        derived=settings["derived"],
        best_epoch=next((h["epoch"] for h in history if h.get("best")), None),
        learned=history[-1].get("learned") if history else None,
        memory_bytes_by_mode=memory,
        dataset=dict(
            train=train.name,
            test=test.name,
            train_size=len(train),
            validation_size=0 if validation is None else len(validation),
            test_size=len(test),
        ),
        history=history,
        parameters_sha256=ltc_jax.parameter_digest(model),
        resumed=resume,
        devices=1 if mesh is None else mesh.size,
        processes=jax.process_count(),
        environment=ltc_jax.environment(),
        run_dir=run_dir,
    )
    if writer:
        save_model(run_dir, model, train, data["statistics"], settings)
        write_history(run_dir, history)
        with open(os.path.join(run_dir, "metrics.json"), "w") as file:
            json.dump(metrics, file, indent=2, default=_json_default)
    return metrics


def start_processes(config: TrainConfig) -> None:
    """Join the `jax.distributed` run a config names (`--coordinator`,
    `--num-processes`, `--process-id`), before anything else touches JAX. On
    CPU the processes' collectives go through gloo."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=config.coordinator,
        num_processes=config.num_processes,
        process_id=config.process_id,
    )


def training_mesh(config: TrainConfig, settings: dict[str, Any]):
    """The device mesh the batches are split over (`None` for one device), with
    a derived batch size rounded up to a multiple of the device count (and its
    reason updated in `settings`).

    **Raises:** `ValueError` for more devices than there are, fewer than all of
    them in a multi-process run, or a given `--batch-size` that does not divide
    over them."""
    every = len(jax.devices())
    count = config.devices or every
    if count > every:
        raise ValueError(
            f"--devices {count}: there are {every} {jax.default_backend()} devices."
        )
    if jax.process_count() > 1 and count != every:
        raise ValueError(
            f"--devices {count}: a run of {jax.process_count()} processes uses all "
            f"{every} devices."
        )
    if count == 1:
        return None
    size = settings["batch_size"]
    if size % count:
        if config.batch_size is not None:
            raise ValueError(
                f"--batch-size {size} does not divide over {count} devices; choose a "
                f"multiple of {count}."
            )
        settings["batch_size"] = size = count * math.ceil(size / count)
        settings["derived"]["batch_size"] = dict(
            value=size,
            reason=settings["derived"]["batch_size"]["reason"]
            + f", rounded up to a multiple of the {count} devices",
        )
    return ltc_jax.data_mesh(count)


def _output_size(train: SequenceDataset) -> int:
    return train.num_classes if train.is_classification else train.labels.shape[1]


def _tolerance(integrator: ltc_jax.Integrator, name: str) -> float | None:
    """The rtol or atol adaptive steps used (`None` for fixed steps)."""
    value = getattr(integrator.stepsize_controller, name, None)
    return None if value is None else float(value)


def save_model(
    run_dir: str,
    model: ltc_jax.LTC | ltc_jax.CfC,
    train: SequenceDataset,
    statistics: tuple[np.ndarray, np.ndarray],
    settings: dict[str, Any],
) -> None:
    """Write `model.eqx` (the parameters, `eqx.tree_serialise_leaves`) and
    `data.json` (what reading new data needs: the training set's per-channel mean
    and standard deviation, class names, and output size)."""
    eqx.tree_serialise_leaves(os.path.join(run_dir, "model.eqx"), model)
    mean, std = statistics
    data = dict(
        mean=mean.tolist(),
        std=std.tolist(),
        class_names=list(train.class_names) if train.is_classification else None,
        output_size=_output_size(train),
        input_channels=train.num_channels,
        input_size=model.input_size,
        settings={k: v for k, v in settings.items() if k != "derived"},
    )
    with open(os.path.join(run_dir, "data.json"), "w") as file:
        json.dump(data, file, indent=2)


def write_history(run_dir: str, history: list[dict]) -> None:
    """Write the per-epoch history as `history.csv`, and its loss and training
    accuracy curves as `history.png` where matplotlib is installed."""
    if not history:
        return
    columns = [k for k, v in history[0].items() if np.isscalar(v) or v is None]
    with open(os.path.join(run_dir, "history.csv"), "w", newline="") as file:
        writer = csv.DictWriter(file, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(history)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the plot needs the experiments extra
        return
    epochs = [record["epoch"] + 1 for record in history]
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(9, 3.2))
    loss_axis.plot(epochs, [record["loss"] for record in history], marker=".")
    loss_axis.set(xlabel="epoch", ylabel="training loss", yscale="log")
    accuracy_axis.plot(epochs, [record["accuracy"] for record in history], marker=".")
    accuracy_axis.set(xlabel="epoch", ylabel="training accuracy")
    figure.tight_layout()
    figure.savefig(os.path.join(run_dir, "history.png"), dpi=120)
    plt.close(figure)


def load_run(run_dir: str) -> tuple[TrainConfig, ltc_jax.LTC | ltc_jax.CfC, dict]:
    """The configuration, trained model and data statistics of a finished run.

    **Raises:** `FileNotFoundError` if `run_dir` lacks `config.json`, `model.eqx`
    or `data.json` (an unfinished run: resume it first).
    """
    files = {
        name: os.path.join(run_dir, name)
        for name in ("config.json", "model.eqx", "data.json")
    }
    missing = [name for name, path in files.items() if not os.path.isfile(path)]
    if missing:
        raise FileNotFoundError(
            f"{run_dir} has no {', '.join(missing)}: not a finished run of ltc-jax "
            "train (resume it with ltc-jax train --resume first)."
        )
    with open(files["config.json"]) as file:
        config = _config_from_json(json.load(file))
    with open(files["data.json"]) as file:
        data = json.load(file)
    if config.x64:
        jax.config.update("jax_enable_x64", True)
    like = make_model(config, data["input_size"], data["output_size"], data["settings"])
    model = eqx.tree_deserialise_leaves(files["model.eqx"], like)
    return config, model, data


def read_for_run(
    run_dir: str, path: str
) -> tuple[TrainConfig, ltc_jax.LTC | ltc_jax.CfC, SequenceDataset, dict[str, Any]]:
    """A finished run and the `.ts` file `path` read and standardised as its
    training data was.

    **Raises:** `FileNotFoundError` for a missing file; `ValueError` if the file's
    channels or labels do not match the run's.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--data {path}: no such file.")
    config, model, stats = load_run(run_dir)
    class_names = stats["class_names"]
    data = read_ts(path, class_names=tuple(class_names) if class_names else None)
    if data.num_channels != stats["input_channels"]:
        raise ValueError(
            f"{path} has {data.num_channels} channels; the run was trained on "
            f"{stats['input_channels']}."
        )
    settings = dict(stats["settings"])
    settings.setdefault("solver", config.solver)  # runs saved before it was derived
    if settings["adaptive"]:  # room for the new data's longest solve too
        widest = ltc_jax.derive_defaults([data]).max_steps
        settings["max_steps"] = max(settings["max_steps"], widest)
    else:
        steps = ltc_jax.fixed_max_steps([data], settings["dt0"])
        settings["max_steps"] = max(settings["max_steps"], steps)
    data = standardize_with(data, stats["mean"], stats["std"])
    return config, model, data, settings


def _final_integrator(config: TrainConfig, settings: dict) -> ltc_jax.Integrator:
    """The integrator a run was tested with: its tolerance schedule's last phase."""
    integrator = make_config_integrator(config, settings)
    schedule = training_schedule(config, integrator)
    return integrator if schedule is None else schedule.final


def evaluate_run(run_dir: str, path: str) -> dict[str, Any]:
    """Evaluate a finished run's model on a labelled `.ts` file, read and
    standardised as its training data was. **Returns:** the dict of
    [`ltc_jax.evaluate`][]. **Raises:** as `read_for_run`."""
    config, model, data, settings = read_for_run(run_dir, path)
    integrator = _final_integrator(config, settings)
    return ltc_jax.evaluate(
        model,
        data,
        integrator=integrator,
        batch_size=settings["batch_size"],
        path=ltc_jax.make_input_path(data, **path_options(config)),
    )


def predict_run(run_dir: str, path: str, out: str) -> int:
    """Write a finished run's predictions for the series of a `.ts` file to the
    CSV file `out`: one row per series, its index, the predicted class and each
    class's probability (for regression, the predicted targets). Labels in the
    file are read but not used. **Returns:** the number of series. **Raises:** as
    `read_for_run`; `FileExistsError` if `out` exists."""
    if os.path.exists(out):
        raise FileExistsError(f"--out {out} exists; choose a new file.")
    config, model, data, settings = read_for_run(run_dir, path)
    integrator = _final_integrator(config, settings)
    options = path_options(config)
    forward = eqx.filter_jit(lambda m, p: m(p, integrator=integrator))
    outputs = np.concatenate(
        [
            np.asarray(forward(model, ltc_jax.make_input_path(chunk, **options)))
            for chunk in (
                data.take(np.arange(i, min(i + settings["batch_size"], len(data))))
                for i in range(0, len(data), settings["batch_size"])
            )
        ]
    )
    with open(out, "w", newline="") as file:
        writer = csv.writer(file)
        if data.is_classification:
            probabilities = np.asarray(jax.nn.softmax(outputs, axis=-1))
            writer.writerow(["index", "prediction", *data.class_names])
            for i, row in enumerate(probabilities):
                prediction = data.class_names[int(np.argmax(row))]
                writer.writerow([i, prediction, *(f"{p:.6g}" for p in row)])
        else:
            writer.writerow(
                ["index", *(f"target_{j}" for j in range(outputs.shape[1]))]
            )
            for i, row in enumerate(outputs):
                writer.writerow([i, *(f"{v:.6g}" for v in row)])
    return len(outputs)


def _json_default(value):
    if isinstance(value, np.generic | jnp.ndarray):
        return value.item()
    raise TypeError(f"Cannot serialise {type(value).__name__} to JSON.")


def _config_from_json(saved: dict) -> TrainConfig:
    """A run's `config.json` as a `TrainConfig` (without the `derived` record;
    lists back to tuples)."""
    saved = {k: v for k, v in saved.items() if k != "derived"}
    if saved.get("tau_init") is not None:
        saved["tau_init"] = tuple(saved["tau_init"])
    return TrainConfig(**saved)
