"""The main job: train an LTC on a labelled `.ts` dataset and write a run folder."""

import dataclasses
import datetime
import json
import math
import os
import time
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import ltc_jax
from ltc_jax.datasets import (
    SequenceDataset,
    drop_observations,
    load_japanese_vowels,
    read_ts,
    standardize,
)

from .._names import has_reverse_solve
from .config import DEFAULT_ATOL, DEFAULT_RTOL, TrainConfig


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


def load_data(config: TrainConfig) -> tuple[SequenceDataset, SequenceDataset]:
    """The `(train, test)` pair named by `config`: observations dropped if
    `drop_rate > 0`, then standardised with the training statistics.

    **Raises:** `ValueError` if only one of `data` and `test_data` is given, or the
    two have different channels.
    """
    if config.data is None and config.test_data is None:
        train, test = load_japanese_vowels()
    elif config.data is None or config.test_data is None:
        raise ValueError("--data and --test-data go together: give both .ts files.")
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
    return standardize(train, test)


def path_options(config: TrainConfig) -> dict[str, Any]:
    """The `InputPath` options a config asks for."""
    return dict(
        interpolation=config.interpolation,
        observation_mask=config.observation_mask,
        time_since_observation=config.time_since_observation,
    )


def make_config_integrator(
    config: TrainConfig,
    datasets: tuple[SequenceDataset, ...],
    adjoint: str | None = None,
    backward_solver: str | None = None,
) -> ltc_jax.Integrator:
    """The [`ltc_jax.Integrator`][] a config asks for.

    Fixed steps when `dt0` is given without tolerances; then `max_steps` is the
    number of steps the longest sequence of `datasets` needs, so `"full"` stores
    exactly the steps taken. Adaptive otherwise (default tolerances 1e-3/1e-4).
    """
    adaptive = config.rtol is not None or config.atol is not None or config.dt0 is None
    rtol = atol = None
    max_steps = config.max_steps
    if adaptive:
        rtol = DEFAULT_RTOL if config.rtol is None else config.rtol
        atol = DEFAULT_ATOL if config.atol is None else config.atol
    else:
        if not config.dt0 > 0:
            raise ValueError(f"--dt0 must be positive; got {config.dt0}.")
        max_steps = ltc_jax.fixed_max_steps(datasets, config.dt0)
    adjoint = config.adjoint if adjoint is None else adjoint
    return ltc_jax.make_integrator(
        config.solver,
        adjoint,
        dt0=config.dt0,
        rtol=rtol,
        atol=atol,
        dtmin=config.dtmin,
        max_steps=max_steps,
        checkpoints=config.checkpoints if adjoint == "checkpoint" else None,
        windows=config.windows if adjoint == "windowed" else None,
        backward_solver=(backward_solver or config.backward_solver)
        if has_reverse_solve(adjoint)
        else None,
        seminorm=config.seminorm and has_reverse_solve(adjoint),
        ode_unfolds=config.ode_unfolds,
        batching=config.batching,
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
    model, optimizer, batch, config: TrainConfig, datasets: tuple[SequenceDataset, ...]
) -> dict[str, dict[str, int] | None]:
    """Compiled memory of one training step under every gradient mode (same model,
    batch and solver), from XLA's memory analysis; nothing is run. With the fused
    solver, the reverse solves use `config.backward_solver` or Heun; the windowed
    adjoint has the windows the run derives (or `config.windows`)."""
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    backward = config.backward_solver
    if config.solver == "fused" and backward is None:
        backward = "heun"
    table = {}
    for mode in ltc_jax.ADJOINT_NAMES:
        integrator = make_config_integrator(
            config, datasets, adjoint=mode, backward_solver=backward
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


def train_and_evaluate(config: TrainConfig) -> dict[str, Any]:
    """Run the main job: load data, train, evaluate, and write the run folder.

    The folder (`config.out`, or a new `runs/train/<date>-<time>`) receives
    `config.json`, `metrics.json` and `checkpoints/` (the newest two, written
    atomically: model, optimiser state and position in the data). With
    `config.resume`, the run in that folder continues from its newest good
    checkpoint, with its saved configuration, and ends as an uninterrupted run
    would have (bit for bit on CPU).

    **Returns:** the metrics dict, also written to `metrics.json`, with at least
    `test_accuracy`, `train_seconds`, `gradient_mode`, `solver`,
    `steps_per_sequence` and `memory_bytes_by_mode`, plus `history`,
    `parameters_sha256` (a digest of the final parameters) and `environment`.

    **Raises:** `ValueError` for inconsistent options; `FileExistsError` for a
    non-empty `out`; `FileNotFoundError` for a `resume` folder without
    `config.json`; the errors of [`ltc_jax.fit`][]; a
    [`ltc_jax.datasets.TSFormatError`][] for a malformed `.ts` file.
    """
    resume = config.resume is not None
    if resume:
        run_dir = config.resume
        saved_path = os.path.join(run_dir, "config.json")
        if not os.path.isfile(saved_path):
            raise FileNotFoundError(f"--resume {run_dir}: no config.json in it.")
        with open(saved_path) as file:
            saved = json.load(file)
        config = dataclasses.replace(
            TrainConfig(**saved), resume=None, progress=config.progress
        )
    if config.x64:
        jax.config.update("jax_enable_x64", True)
    train, test = load_data(config)
    integrator = make_config_integrator(config, (train, test))
    schedule = training_schedule(config, integrator)
    options = path_options(config)
    train_path = ltc_jax.make_input_path(train, **options)
    output_size = (
        train.num_classes if train.is_classification else train.labels.shape[1]
    )
    model = ltc_jax.LTC(
        train_path.input_size,
        config.hidden_size,
        output_size,
        cell=config.cell,
        wiring=config.wiring,
        tau_min=config.tau_min,
        key=jr.PRNGKey(config.seed),
    )
    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    optimizer = ltc_jax.make_optimizer(
        config.learning_rate,
        config.epochs * steps_per_epoch,
        warmup_steps=config.warmup_steps,
        clip_norm=config.clip_norm,
        weight_decay=config.weight_decay,
    )
    # The options are checked above; only now is the run folder made.
    if config.checkpoint_every is not None and config.checkpoint_every < 1:
        raise ValueError(
            f"--checkpoint-every must be positive; got {config.checkpoint_every}."
        )
    if not resume:
        run_dir = make_run_dir(config.out, os.path.join("runs", "train"))
        with open(os.path.join(run_dir, "config.json"), "w") as file:
            json.dump(dataclasses.asdict(config), file, indent=2)
    checkpoint_dir = os.path.join(run_dir, "checkpoints")
    start = time.perf_counter()
    model, history = ltc_jax.fit(
        model,
        train,
        integrator=integrator if schedule is None else schedule,
        optimizer=optimizer,
        epochs=config.epochs,
        batch_size=config.batch_size,
        seed=config.seed,
        path=train_path,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=config.checkpoint_every,
        resume=resume and bool(ltc_jax.list_checkpoints(checkpoint_dir)),
        on_failure=config.on_failure,
        max_consecutive_failures=config.max_consecutive_failures,
        progress=ltc_jax.TqdmFitProgress()
        if config.progress
        else ltc_jax.NoFitProgress(),
    )
    train_seconds = time.perf_counter() - start
    if schedule is not None:
        integrator = schedule.final
    result = ltc_jax.evaluate(
        model,
        test,
        integrator=integrator,
        batch_size=config.batch_size,
        path=ltc_jax.make_input_path(test, **options),
    )
    memory = None
    if config.memory_table:
        batch = next(ltc_jax.batches(train, config.batch_size, path=train_path))
        memory = memory_by_mode(model, optimizer, batch, config, (train, test))
    metrics = dict(
        test_accuracy=result["accuracy"],
        test_loss=result["loss"],
        train_seconds=train_seconds,
        gradient_mode=integrator.adjoint_name,
        windows=history[-1].get("windows") if history else None,
        solver=config.solver,
        cell=config.cell,
        wiring=config.wiring if config.cell == "biophysical" else None,
        adaptive=integrator.is_adaptive,
        max_steps=integrator.max_steps,
        steps_per_sequence=result["num_steps"],
        memory_bytes_by_mode=memory,
        dataset=dict(
            train=train.name, test=test.name, train_size=len(train), test_size=len(test)
        ),
        history=history,
        parameters_sha256=ltc_jax.parameter_digest(model),
        resumed=resume,
        environment=ltc_jax.environment(),
        run_dir=run_dir,
    )
    with open(os.path.join(run_dir, "metrics.json"), "w") as file:
        json.dump(metrics, file, indent=2, default=_json_default)
    return metrics


def _json_default(value):
    if isinstance(value, np.generic | jnp.ndarray):
        return value.item()
    raise TypeError(f"Cannot serialise {type(value).__name__} to JSON.")
