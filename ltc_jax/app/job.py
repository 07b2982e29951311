"""The main job: train an LTC on a labelled `.ts` dataset and write a run folder."""

import dataclasses
import json
import os
import time
from collections.abc import Callable, Collection
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import ltc_jax
from ltc_jax._batch import check_labelled
from ltc_jax._warn import warn
from ltc_jax.datasets import (
    SequenceDataset,
    channel_statistics,
    drop_observations,
    load_japanese_vowels,
    read_ts,
    standardize_with,
    stratified_split,
)

from .config import StreamConfig, TrainConfig, _flag
from .runs import (
    check_observed,
    check_time_scale,
    config_from_json,
    make_run_dir,
    save_model,
    training_spacing,
    trivial_baseline,
    write_history,
)
from .settings import (
    failure_policy,
    make_config_integrator,
    prepare,
    reads_elapsed_time,
    training_placement,
    validation_share,
)
from .streams import load_stream_data


class RunInterrupted(Exception):
    """Training was interrupted (Ctrl-C); `run_dir` holds the run, whose newest
    checkpoint (written atomically) `ltc-jax <command> --resume` continues
    from (`command`: `"train"` or `"stream"`); `None` where it was interrupted
    before the run folder was made (in the folds of `--folds`)."""

    def __init__(self, run_dir: str | None, command: str = "train"):
        super().__init__(run_dir)
        self.run_dir = run_dir
        self.command = command


FILES = ("data", "test_data", "log", "failures")
"""The options that name input files: `config.json` records them as absolute
paths, so that a run resumes from any folder."""


def check_paths(config: TrainConfig) -> None:
    """Check the files and folders a config names, before anything is loaded,
    compiled or written.

    **Raises:** `FileNotFoundError` for a missing data file (`.ts`, or a stream
    job's log or failure table) or `resume` folder;
    `FileExistsError` for an `out` that is a file or a non-empty folder, or a
    `resume` folder of a run that has finished (its `metrics.json` written).
    """
    for name in FILES:
        path = getattr(config, name, None)
        if path is not None and not os.path.isfile(path):
            raise FileNotFoundError(f"{_flag(name)} {path}: no such file.")
    if config.resume is not None and not os.path.isdir(config.resume):
        raise FileNotFoundError(f"--resume {config.resume}: no such folder.")
    if config.resume is not None and os.path.isfile(
        os.path.join(config.resume, "metrics.json")
    ):
        raise FileExistsError(
            f"--resume {config.resume}: the run has finished (its metrics.json is "
            "written); there is nothing to resume. Start a new run to train again."
        )
    if config.out is not None and os.path.exists(config.out):
        if not os.path.isdir(config.out):
            raise FileExistsError(f"--out {config.out} is a file; give a folder.")
        if os.listdir(config.out):
            raise FileExistsError(
                f"--out {config.out} already holds files; choose a new folder "
                "(runs are never overwritten)."
            )


def load_data(config: TrainConfig) -> dict[str, Any]:
    """The data a config names: `train`, `validation` (a stratified share of
    the training file, as `validation_share` chooses it, `None` for a share of
    0) and `test`, with observations dropped if `drop_rate > 0`, standardised
    with the statistics of the training part only, which are returned as
    `statistics` `(mean, std)`; `validation_fraction`, the share and why; and
    `spacing`, the training file's median interval between observations
    (before any are dropped), which the run records.

    A [`ltc_jax.app.StreamConfig`][] gets its windows from
    [`ltc_jax.app.streams.load_stream_data`][] instead, split by machine, with
    a `stream` record besides.

    **Raises:** `ValueError` if the test file's channels differ from the
    training file's (checked before its labels), either file is unlabelled, or
    a series of either never observes a channel and `--empty-channel-fill` is
    not given (the file and series named); the errors of
    [`ltc_jax.datasets.read_ts`][]. A test file whose times are on another
    scale than the training file's gets a warning
    ([`ltc_jax.app.runs.check_time_scale`][]).
    """
    if isinstance(config, StreamConfig):
        return load_stream_data(config)
    if config.data is None:
        train, test = load_japanese_vowels()
    else:
        train = read_ts(config.data)
        check_labelled(train, "training")
        test = read_ts(
            config.test_data,
            class_names=train.class_names if train.is_classification else None,
            num_channels=train.num_channels,
        )
        check_labelled(test, "testing")
        if config.empty_channel_fill is None:  # named by file and series
            remedy = (
                "give --empty-channel-fill (0: the channel's training mean), or "
                "leave those series out."
            )
            check_observed(train, config.data, remedy)
            check_observed(test, config.test_data, remedy)
    spacing = training_spacing(train)  # the file's, before any are dropped
    if config.test_data is not None:
        check_time_scale(spacing, test, config.test_data)
    if config.drop_rate > 0:
        train = drop_observations(train, config.drop_rate, seed=config.seed)
        test = drop_observations(test, config.drop_rate, seed=config.seed + 1)
    validation = None
    fraction, reason = validation_share(config, train)
    if fraction > 0:
        train, validation = stratified_split(train, fraction, seed=config.seed)
    statistics = channel_statistics(train)
    scale = lambda data: None if data is None else standardize_with(data, *statistics)  # noqa: E731
    return dict(
        train=scale(train),
        validation=scale(validation),
        test=scale(test),
        statistics=statistics,
        validation_fraction=dict(value=fraction, reason=reason),
        spacing=spacing,
    )


def _check_beats(
    metrics: dict,
    baseline: dict,
    suggest_folds: bool = True,
    epochs: int | None = None,
) -> None:
    """Warn where the model's test figure is no better than the trivial
    baseline's (a model answering the commonest class scores it exactly): on a
    small training set, usually overfitting; with `suggest_folds` (a new run of
    `ltc-jax train` that could have chosen its epochs by folds and did not),
    the warning suggests them, and with `epochs` (set by hand) says so."""
    if "test_accuracy" in baseline:
        what, key = "accuracy", "test_accuracy"
    else:
        what, key = "MSE", "test_loss"
    ours, theirs = metrics[key], baseline[key]
    no_better = ours <= theirs if key == "test_accuracy" else ours >= theirs
    if not no_better:
        return
    advice = ""
    if suggest_folds and epochs is None:
        advice = " On a small training set, choose the epochs by cross-validation "
        advice += "(--folds 5)."
    elif suggest_folds:
        advice = (
            f" Its epochs were set by hand (--epochs {epochs}): too few leave it "
            "untrained, too many overfit a small set; leave them to the data, "
            "or let cross-validation choose up to them (--folds 5)."
        )
    warn(
        f"The model's test {what}, {ours:.4g}, is no better than always answering "
        f"{baseline['name']}, {theirs:.4g}: what it learned does not generalise."
        + advice
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
    adjoint has the windows the run derives (or `config.windows`). A model
    that calls no ODE solver (the CfC, the jump model) has one entry,
    `"backprop"`, through its updates."""
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    if not config.solves_ode:
        integrator = make_config_integrator(config, settings)
        step = ltc_jax.training.make_train_step(optimizer, integrator)
        memory = ltc_jax.measure.compiled_memory(step, model, opt_state, batch)
        return dict(backprop=None if memory is None else memory.asdict())
    backward = config.backward_solver
    if settings["solver"] == "fused" and backward is None:
        backward = "heun"
    table = {}
    for mode in ltc_jax.ADJOINT_NAMES:
        integrator = make_config_integrator(
            config, settings, adjoint=mode, backward_solver=backward
        )
        integrator = ltc_jax.training.resolve_windows(
            integrator,
            model.cell,
            max(float(np.max(data.durations)) for data in datasets),
            dtype=batch.path.ts.dtype,
        )
        step = ltc_jax.training.make_train_step(optimizer, integrator)
        memory = ltc_jax.measure.compiled_memory(step, model, opt_state, batch)
        table[mode] = None if memory is None else memory.asdict()
    return table


PLACEMENT = (
    "progress",
    "memory_table",
    "devices",
    "coordinator",
    "num_processes",
    "process_id",
)
"""The options of where and how a run shows, reports and runs, which a resumed
run takes from its new command line."""


def _same_file(given: str | None, saved: str | None) -> bool:
    """Whether two spellings of an input file name the same file (as paths, or
    as the same file on disk)."""
    if given is None or saved is None:
        return given == saved
    if os.path.abspath(given) == os.path.abspath(saved):
        return True
    return (
        os.path.exists(given)
        and os.path.exists(saved)
        and os.path.samefile(given, saved)
    )


def _same_value(saved: TrainConfig, derived: dict[str, Any], name: str, value) -> bool:
    """Whether `value` is what the saved run has for option `name`: its saved
    value, the value it derived where it saved none (a JSON list standing for
    a tuple), or, for an input file, the same file under another spelling."""
    if name in FILES:
        return _same_file(value, getattr(saved, name))
    if value == getattr(saved, name):
        return True
    if getattr(saved, name) is not None or name not in derived:
        return False
    chosen = derived[name].get("value")
    return value == chosen or (isinstance(value, tuple) and list(value) == chosen)


def _saved_value(saved: TrainConfig, derived: dict[str, Any], name: str) -> str:
    """Option `name`'s value in the saved run, as a conflict names it."""
    value = getattr(saved, name)
    if value is None and name in derived:
        return f"None, derived {derived[name].get('value')!r}"
    return repr(value)


def _resumed_config(
    config: TrainConfig, given: Collection[str] | None = None
) -> tuple[TrainConfig, dict[str, Any]]:
    """The saved configuration of the run `config.resume` continues, and the
    `derived` record saved with it (empty for runs that predate it). `given`:
    the options set on the command line, where known (see
    [`train_and_evaluate`][ltc_jax.app.job.train_and_evaluate]).

    **Raises:** `FileNotFoundError` without a `config.json`, or for a saved
    input file not found from here (a run saved before its files were recorded
    as absolute paths, resumed from another folder); `ValueError` if
    `config` sets an option to a value the saved run does not have (one not
    at its default, or one in `given` even at its default; an input file
    counts as the same under any spelling of its path, and an option the run
    left to the data as the value it derived): a resumed
    run keeps its options, except where it runs (`PLACEMENT`), which comes from
    `config` (another device count gives the same run to round-off). The batch
    size and the validation share the run derived are kept (so that neither
    another device count nor a later rule can change them), the folds are
    not run again (the saved epochs are their choice), and a run saved
    before readout times and batching were derived keeps reading its final
    state and the batching it had. A CfC keeps the time scale it derived (one
    saved before it was derived, the timestamps' own unit), and a stream run
    the sensor pooling it chose.
    """
    saved_path = os.path.join(config.resume, "config.json")
    if not os.path.isfile(saved_path):
        raise FileNotFoundError(f"--resume {config.resume}: no config.json in it.")
    with open(saved_path) as file:
        raw = json.load(file)
    saved = config_from_json(raw)
    if type(saved) is not type(config):
        raise ValueError(
            f"--resume {config.resume} is a run of ltc-jax {saved.command}; resume "
            f"it with ltc-jax {saved.command} --resume."
        )
    derived = raw.get("derived", {})
    conflicts = [
        f"{_flag(field.name)} {getattr(config, field.name)!r} (saved: "
        f"{_saved_value(saved, derived, field.name)})"
        for field in dataclasses.fields(config)
        if field.name not in ("resume", *PLACEMENT)
        and (
            (given is not None and field.name in given)
            or getattr(config, field.name) != _field_default(field)
        )
        and not _same_value(saved, derived, field.name, getattr(config, field.name))
    ]
    if conflicts:
        raise ValueError(
            f"--resume {config.resume} continues that run with its saved options; "
            f"these differ: {'; '.join(conflicts)}. Start a new run to change them."
        )
    for name in FILES:
        path = getattr(saved, name, None)
        if path is not None and not os.path.exists(path):
            where = (
                "it was moved or deleted"
                if os.path.isabs(path)
                else "a relative path is relative to the folder the run started "
                "in: resume from there"
            )
            raise FileNotFoundError(
                f"--resume {config.resume}: its {_flag(name)} {path!r} is not found "
                f"from here; {where}."
            )
    here = {name: getattr(config, name) for name in PLACEMENT}
    kept = {}
    if saved.validation_fraction is None and "validation_fraction" in derived:
        kept["validation_fraction"] = derived["validation_fraction"]["value"]
    if saved.folds is not None:  # its saved epochs are the folds' choice
        kept["folds"] = None
    if saved.batch_size is None and "batch_size" in derived:
        kept["batch_size"] = derived["batch_size"]["value"]
    if saved.readout_times is None and "readout_times" not in derived:
        kept["readout_times"] = 1
    if reads_elapsed_time(saved) and saved.time_scale is None:
        # The unit of elapsed time as derived when the run started (so that no
        # later rule can change it), or for a run from before it was derived, 1.
        kept["time_scale"] = derived.get("time_scale", {}).get("value", 1.0)
    if isinstance(saved, StreamConfig) and saved.sensor_pooling is None:
        # The pooling it chose (a config written without a derived record
        # chooses again, from the same data).
        kept["sensor_pooling"] = derived.get("sensor_pooling", {}).get("value")
    if saved.batching is None and "batching" not in derived:
        kept["batching"] = "vmap" if saved.solver == "kvaerno5" else "batched"
    # The run's folder is its --out now, as the options' checks expect of a
    # multi-process run (the first part may have used the default folder).
    kept["out"] = saved.out or config.resume
    return dataclasses.replace(saved, resume=None, **here, **kept), derived


def train_and_evaluate(
    config: TrainConfig,
    say: Callable[[str], None] | None = None,
    *,
    given: Collection[str] | None = None,
) -> dict[str, Any]:
    """Run the main job: load data, train, evaluate, and write the run folder.

    The folder (`config.out`, or a new `runs/train/<date>-<time>`;
    `runs/stream/...` for a [`ltc_jax.app.StreamConfig`][], whose `data.json`
    also records its clock and sensors) receives
    `config.json`, `checkpoints/` (the newest two, written atomically: model,
    optimiser state and position in the data), and at the end `model.eqx` (the
    trained parameters), `data.json` (the standardisation statistics and class
    names, for `ltc-jax evaluate` and `predict`), `history.csv`, `history.png`
    (where matplotlib is installed) and `metrics.json`. With `config.resume`, the
    run in that folder continues from its newest good checkpoint, with its saved
    configuration, and ends as an uninterrupted run would have (bit for bit on
    CPU); `train_seconds` then counts every part of the run. With
    `config.folds`, `folds_seconds` is the wall time of the folds that chose
    the epochs, before the run trained (`None` without them).

    **Arguments:** `config`; `say`: called with one-line status messages (what is
    resumed, what is being compiled); default: silent. `given`: the names of
    the fields of `config` that were set explicitly (the command line's
    options); with `config.resume`, each must equal the saved run's value,
    even one set to its default (`--frame-encoder none` on a run trained with
    `mlp`), as must every field not at its default. Default (`None`): only
    the latter, since a config object cannot tell a default given from one
    left out.

    **Returns:** the metrics dict, also written to `metrics.json`, with at least
    `task` (`"classification"` or `"regression"`), `test_accuracy` (`nan` for
    regression), `test_loss`, `train_seconds`, `gradient_mode`, `solver`,
    `steps_per_sequence` and `memory_bytes_by_mode`, plus `baseline` (what a
    model that ignores its input scores: [`ltc_jax.app.runs.trivial_baseline`][];
    a `UserWarning` says so where the model does no better), `history`,
    `parameters_sha256` (a digest of the final parameters) and `environment`.

    **Raises:** `ValueError` for a bad or inconsistent option
    ([`ltc_jax.app.TrainConfig.check`][]), or training series all of one
    class; `FileNotFoundError` and
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
        config, saved_derived = _resumed_config(config, given)
    if config.coordinator is not None:
        start_processes(config)
    writer = jax.process_index() == 0
    if config.x64:
        jax.config.update("jax_enable_x64", True)
    data = load_data(config)
    train, validation, test = data["train"], data["validation"], data["test"]
    present = np.unique(train.labels) if train.is_classification else [0, 1]
    if len(present) < 2:
        only = train.class_names[int(present[0])]
        raise ValueError(
            f"Every training series is of one class, {only!r}: a classifier "
            "needs two or more to learn from"
            + (
                " (no training machine fails within --horizon-seconds of a "
                "window's end: give more machines or a longer horizon)."
                if "stream" in data
                else "."
            )
        )
    held = () if validation is None else (validation,)
    epochs_given = config.epochs  # None where the data chose them
    try:  # with --folds this trains, before the run folder exists
        job = prepare(config, train, (*held, test), say=say)
    except KeyboardInterrupt:
        raise RunInterrupted(None, config.command) from None
    # What was resolved; the run adds to its own copy of the derived record.
    config, settings = job.config, dict(job.settings)
    settings["derived"] = dict(settings["derived"])
    if config.validation_fraction is None:
        settings["derived"]["validation_fraction"] = data["validation_fraction"]
    if "stream" in data:  # what reading a new log for the run needs
        settings["stream"] = data["stream"]
        split = {k: len(v) for k, v in data["stream"]["machines"].items()}
        settings["derived"]["machines"] = dict(
            value=split,
            reason=f"{config.test_fraction:g} of {sum(split.values())} machines "
            "tested, drawn with --seed; machines are the unit of the split",
        )
        if config.sensor_pooling is None:
            settings["derived"]["sensor_pooling"] = data["sensor_pooling"]
        if "channel_groups" in data["stream"]:  # pooled by sensor group
            settings["derived"]["pooled_groups"] = dict(
                value=data["stream"]["sensor_group_sizes"],
                reason="sensors per group, pooled across the group"
                + (
                    "; --sensor-groups names a tag's group, 'continuous' where it "
                    "does not"
                    if config.log is not None
                    else ""
                ),
            )
        if config.clock_hz is None:
            settings["derived"]["clock_hz"] = dict(
                value=data["stream"]["clock_hz"],
                reason="the rate of the slowest continuous sensor, "
                f"{data['stream']['slowest_sensor']!r} at "
                f"{data['stream']['slowest_rate_hz']:.3g} Hz, made a whole number of "
                "frames per window (--clock-hz sets another"
                + (
                    ", or --rates-hz TAG HZ a sparse tag's rate)" if config.log else ")"
                ),
            )
    if resume:  # what the run derived and kept (its solver, batch size) says why
        settings["derived"] = saved_derived | settings["derived"]
    placement = training_placement(config, settings)
    for name, choice in settings["derived"].items():
        say(f"{name} = {_shown(choice['value'])} ({choice['reason']})")
    batch_size, optimizer, options = job.batch_size, job.optimizer, job.path_options
    # The options are checked above; only now is the run folder made.
    if not resume:
        if writer:
            run_dir = make_run_dir(config.out, os.path.join("runs", config.command))
            with open(os.path.join(run_dir, "config.json"), "w") as file:
                saved = dict(dataclasses.asdict(config), derived=settings["derived"])
                for name in FILES:  # found again from any folder on --resume
                    if saved.get(name) is not None:
                        saved[name] = os.path.abspath(saved[name])
                json.dump(saved, file, indent=2)
        else:
            run_dir = config.out
    checkpoint_dir = os.path.join(run_dir, "checkpoints")
    found = ltc_jax.training.list_checkpoints(checkpoint_dir) if resume else []
    if resume:
        where = os.path.basename(found[-1]) if found else "its start (no checkpoint)"
        say(f"resuming {run_dir} from {where}, with its saved options")
    say(
        "compiling the training step ("
        + (
            f"CfC, {config.cfc_mode}"
            if config.model == "cfc"
            else f"jump model, {config.substeps} fused step(s) per interval"
            if config.model == "jump"
            else f"{config.solver}, {config.adjoint}"
        )
        + ") ..."
    )
    start = time.perf_counter()
    try:
        model, history = ltc_jax.fit(
            job.model,
            train,
            integrator=job.integrator,
            optimizer=optimizer,
            epochs=job.epochs,
            batch_size=batch_size,
            seed=job.seed,
            path=job.path,
            validation=validation,
            validation_path=None
            if validation is None
            else ltc_jax.make_input_path(validation, **options),
            patience=config.patience if validation is not None else None,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=config.checkpoint_every,
            resume=bool(found),
            on_failure=failure_policy(config),
            placement=placement,
            progress=ltc_jax.training.TqdmFitProgress()
            if config.progress and writer
            else ltc_jax.training.NoFitProgress(),
        )
    except KeyboardInterrupt:
        raise RunInterrupted(run_dir, config.command) from None
    part_seconds = time.perf_counter() - start
    integrator = job.final_integrator
    result = ltc_jax.evaluate(
        model,
        test,
        integrator=integrator,
        batch_size=batch_size,
        path=ltc_jax.make_input_path(test, **options),
        placement=placement,
    )
    memory = None
    if config.memory_table and writer:
        if config.model == "ltc":
            say(
                f"measuring the compiled memory of a training step under each of the "
                f"{len(ltc_jax.ADJOINT_NAMES)} gradient modes (one compilation "
                "each) ..."
            )
        batch = next(ltc_jax.batches(train, batch_size, path=job.path))
        memory = memory_by_mode(
            model, optimizer, batch, config, settings, (train, *held, test)
        )
    metrics = dict(
        task="classification" if train.is_classification else "regression",
        test_accuracy=result["accuracy"],
        test_loss=result["loss"],
        baseline=trivial_baseline(train, test),
        train_seconds=sum(record["seconds"] for record in history)
        if resume
        else part_seconds,
        train_seconds_this_part=part_seconds,
        folds_seconds=settings["derived"].get("epochs", {}).get("seconds"),
        model=config.model,
        gradient_mode=integrator.adjoint_name if config.solves_ode else "backprop",
        windows=history[-1].get("windows") if history else None,
        solver=config.solver,
        rtol=_tolerance(integrator, "rtol"),
        atol=_tolerance(integrator, "atol"),
        cell=config.cell,
        frame_encoder=getattr(config, "frame_encoder", None),
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
        parameters_sha256=ltc_jax.training.parameter_digest(model),
        resumed=resume,
        devices=placement.device_count,
        processes=jax.process_count(),
        environment=ltc_jax.measure.environment(),
        run_dir=run_dir,
    )
    if writer:
        save_model(
            run_dir, model, train, data["statistics"], settings, data.get("spacing")
        )
        write_history(run_dir, history)
        with open(os.path.join(run_dir, "metrics.json"), "w") as file:
            json.dump(metrics, file, indent=2, default=_json_default)
        suggest = (  # a resumed run's config no longer says whether it folded
            not resume
            and config.folds is None
            and not config.validation_fraction  # which refuses the folds
            and not isinstance(config, StreamConfig)
        )
        _check_beats(metrics, metrics["baseline"], suggest, epochs_given)
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


def _field_default(field: dataclasses.Field) -> Any:
    """A config field's default, made by its factory where it has one (a
    dict of tags): what an option left off the command line holds."""
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _shown(value: Any) -> str:
    """A derived setting as printed: floats rounded to 6 significant digits
    (a spacing read from float64 times, 0.6015000000000015, is 0.6015), within
    tuples and lists too; `metrics.json` keeps the exact value."""
    if isinstance(value, float):
        return repr(float(f"{value:.6g}"))  # 1.0 as 1.0, not 1
    if isinstance(value, tuple | list):
        inner = ", ".join(_shown(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return str(value)


def _tolerance(integrator: ltc_jax.Integrator, name: str) -> float | None:
    """The rtol or atol adaptive steps used (`None` for fixed steps)."""
    value = getattr(integrator.stepsize_controller, name, None)
    return None if value is None else float(value)


def _json_default(value):
    if isinstance(value, np.generic | jnp.ndarray):
        return value.item()
    raise TypeError(f"Cannot serialise {type(value).__name__} to JSON.")
