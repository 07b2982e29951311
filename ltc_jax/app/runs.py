"""A run folder of the main job: the parameters and data statistics it writes at
the end, and a finished run read back to evaluate or predict on new data."""

import csv
import datetime
import json
import os
from typing import Any

import equinox as eqx
import jax
import numpy as np

import ltc_jax
from ltc_jax.datasets import SequenceDataset, read_ts, standardize_with

from .._batch import check_labelled
from .._checkpoint import deserialise_checked, model_options
from .._paths import empty_channel_problem
from .._warn import warn
from .config import StreamConfig, TrainConfig
from .settings import (
    make_config_integrator,
    make_model,
    output_size_of,
    path_options,
    training_schedule,
)
from .streams import read_windows_for_run


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


def constant_answer(train: SequenceDataset) -> dict:
    """The answer of a model that ignores its input, from `train`'s labels
    alone: for classes, `train`'s commonest class (the first of a tie); for
    regression targets, their mean over `train`.

    **Returns:** `{"name", "class"}` (the class index) or `{"name", "targets"}`
    (a list, one mean per target), JSON-serialisable: runs record it in
    `data.json`, so that `ltc-jax evaluate` scores it on new data.
    """
    if train.is_classification:
        labels = train.labels[train.labels >= 0]
        commonest = int(np.bincount(labels, minlength=train.num_classes).argmax())
        return {
            "name": f"the training set's commonest class, "
            f"{train.class_names[commonest]!r}",
            "class": commonest,
        }
    return dict(
        name="the training targets' mean",
        targets=np.atleast_1d(np.asarray(train.labels).mean(axis=0)).tolist(),
    )


def score_constant_answer(answer: dict, test: SequenceDataset) -> dict:
    """`constant_answer`'s score on `test`: for a class, the accuracy of always
    answering it; for targets, the mean squared error of always answering
    them (averaged over the targets, as the job's loss is, in the targets'
    units squared).

    **Returns:** `{"name", "test_accuracy"}` or `{"name", "test_loss"}`.
    """
    if "class" in answer:
        accuracy = float(np.mean(test.labels == answer["class"]))
        return dict(name=answer["name"], test_accuracy=accuracy)
    mean = np.asarray(answer["targets"])
    return dict(
        name=answer["name"], test_loss=float(np.mean((test.labels - mean) ** 2))
    )


def trivial_baseline(train: SequenceDataset, test: SequenceDataset) -> dict:
    """What a model that ignores its input scores on `test`, from `train`'s
    labels alone: `score_constant_answer(constant_answer(train), test)`.

    **Returns:** `{"name", "test_accuracy"}` or `{"name", "test_loss"}`.
    """
    return score_constant_answer(constant_answer(train), test)


def save_model(
    run_dir: str,
    model: ltc_jax.LTC | ltc_jax.CfC | ltc_jax.JumpLTC,
    train: SequenceDataset,
    statistics: tuple[np.ndarray, np.ndarray],
    settings: dict[str, Any],
    spacing: float | None = None,
) -> None:
    """Write `model.eqx` (the parameters, `eqx.tree_serialise_leaves`) and
    `data.json` (what reading new data needs: the training set's per-channel mean
    and standard deviation, class names, output size and time scale,
    `spacing`: the training file's median interval between observations,
    given before any were dropped, else `train`'s; `baseline`, the answer of
    a model that ignores its input (`constant_answer`), which `evaluate_run`
    scores on new data; and the model's options, `models`, which `load_run`
    checks the model it builds against)."""
    eqx.tree_serialise_leaves(os.path.join(run_dir, "model.eqx"), model)
    mean, std = statistics
    data = dict(
        mean=mean.tolist(),
        std=std.tolist(),
        class_names=list(train.class_names) if train.is_classification else None,
        output_size=output_size_of(train),
        input_channels=train.num_channels,
        input_size=model.input_size,
        spacing=training_spacing(train) if spacing is None else spacing,
        baseline=constant_answer(train),
        settings={k: v for k, v in settings.items() if k != "derived"},
        models=model_options(model),
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


def config_from_json(saved: dict) -> TrainConfig:
    """A run's `config.json` as a `TrainConfig`, or a `StreamConfig` for a run
    of `ltc-jax stream` (without the `derived` record;
    lists back to tuples). A run saved before `readout_features` and
    `gate_bias_init` existed gets the readout it had (`readout_pooling`'s
    summary, or the states) and the zero gate bias (none for the CfC and the
    biophysical cell, which have no such gate); a stream run saved before
    `sensor_pooling`, the pooling its `pool_sensor_groups` and `sensor_groups`
    gave (none without either); a CfC or jump model's run saved with another
    `adjoint` than the default (unused, and refused since), the default."""
    saved = {k: v for k, v in saved.items() if k != "derived"}
    if "readout_features" not in saved:  # saved before the option: its readout
        pooling = saved.pop("readout_pooling", False)
        saved["readout_features"] = "pooled" if pooling else "states"
    if saved.get("model", "ltc") == "cfc" or saved.get("cell", "ltc") != "ltc":
        saved["gate_bias_init"] = None  # no LTC gate to set
    else:
        saved.setdefault("gate_bias_init", "zero")  # likewise: the zero bias it had
    if saved.get("model", "ltc") != "ltc":  # the adjoint it was given went unused
        saved["adjoint"] = "checkpoint"
    if saved.get("tau_init") is not None:
        saved["tau_init"] = tuple(saved["tau_init"])
    if "window_seconds" in saved:  # a run of ltc-jax stream
        if "sensor_pooling" not in saved:  # saved before the option: as trained
            pooled = saved.pop("pool_sensor_groups", False) or saved.get(
                "sensor_groups"
            )
            saved["sensor_pooling"] = "groups" if pooled else "none"
        for name in ("event_tags", "tags"):  # tags: saved since the option
            saved[name] = tuple(saved.get(name, ()))
        return StreamConfig(**saved)
    return TrainConfig(**saved)


def load_run(
    run_dir: str,
) -> tuple[TrainConfig, ltc_jax.LTC | ltc_jax.CfC | ltc_jax.JumpLTC, dict]:
    """The configuration, trained model and data statistics of a finished run.

    **Raises:** `FileNotFoundError` if `run_dir` lacks `config.json`, `model.eqx`
    or `data.json` (an unfinished run: resume it first); `ltc_jax.CheckpointError`
    naming each option in which the model the saved configuration builds differs
    from the one saved (or the arrays, for a run saved before the options were
    recorded).
    """
    files = {
        name: os.path.join(run_dir, name)
        for name in ("config.json", "model.eqx", "data.json")
    }
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"{run_dir}: no such run folder.")
    missing = [name for name, path in files.items() if not os.path.isfile(path)]
    if missing:
        raise FileNotFoundError(
            f"{run_dir} has no {', '.join(missing)}: not a finished run of ltc-jax "
            "train or stream (resume it with ltc-jax train --resume, or ltc-jax "
            "stream --resume, first)."
        )
    with open(files["config.json"]) as file:
        config = config_from_json(json.load(file))
    with open(files["data.json"]) as file:
        data = json.load(file)
    if config.x64:
        jax.config.update("jax_enable_x64", True)
    like = make_model(config, data["input_size"], data["output_size"], data["settings"])
    saved = data.get("models")  # absent from runs saved before it was recorded
    model = deserialise_checked(files["model.eqx"], like, saved, files["model.eqx"])
    return config, model, data


def read_for_run(
    run_dir: str, path: str, failures: str | None = None, labels: bool = True
) -> tuple[
    TrainConfig,
    ltc_jax.LTC | ltc_jax.CfC | ltc_jax.JumpLTC,
    SequenceDataset,
    dict[str, Any],
    dict[str, np.ndarray] | None,
]:
    """A finished run and the data file `path` read and standardised as its
    training data was: a `.ts` file, or for a run of `ltc-jax stream` a
    sensor log (CSV or Parquet) cut into windows as the run cut its own
    ([`ltc_jax.app.streams.read_windows_for_run`][]), labelled by the failure
    table `failures` where given; with `labels=False` (for prediction) a `.ts`
    file's labels are not read (every label becomes `-1`, the run's class
    names kept): a class the run never saw, or a target of a classifier's
    file, is no error. **Returns:** the run's config, model, the
    data, its settings, and for a log the windows' `machine` (by name),
    `end_time` (in the log's seconds) and the log's `time_origin` (empty for
    times given as numbers); `None` for a `.ts` file.

    An unlabelled file (`@classLabel false`, or a log without `failures`) is
    read with every label `-1` (a log's windows: 0). A `.ts` file whose times
    are on another scale than the training data's gets a warning
    (`check_time_scale`).

    **Raises:** `FileNotFoundError` for a missing file; `ValueError` if the file's
    channels do not match the run's (checked first, on each series), or its
    labels (class labels for a regression run, or targets for a classifier);
    for a `.ts` run, if `failures` is given, or as `read_ts` (a file that is
    not UTF-8 text, such as a Parquet log, included); for a stream run, if
    the file is not a `.csv`, `.csv.gz` or `.parquet` log.
    """
    for name, given in (("--data", path), ("--failures", failures)):
        if given is not None and not os.path.isfile(given):
            raise FileNotFoundError(f"{name} {given}: no such file.")
    config, model, stats = load_run(run_dir)
    _check_file_kind(run_dir, config, path)
    class_names = stats["class_names"]
    where = None
    if isinstance(config, StreamConfig):
        windows, machines, origin = read_windows_for_run(
            config, stats["settings"]["stream"], path, failures, class_names
        )
        data = windows.dataset
        where = dict(
            machine=np.asarray(machines)[windows.machine],
            end_time=windows.end_time,
            time_origin=origin,
        )
    elif failures is not None:
        raise ValueError(
            f"--failures labels a sensor log; {run_dir} is a run of ltc-jax "
            "train, which reads .ts files and their labels."
        )
    elif labels:
        data = read_ts(
            path,
            class_names=tuple(class_names) if class_names else None,
            num_channels=stats["input_channels"],
        )
        if data.is_labelled and data.is_classification != bool(class_names):
            has, run = (
                ("class labels", "a regression run")
                if data.is_classification
                else (
                    "regression targets",
                    f"a run classifying {', '.join(map(repr, class_names))}",
                )
            )
            raise ValueError(f"{path} holds {has}, but {run_dir} is {run}.")
    else:  # its labels, of whatever classes or kind, are not read
        data = read_ts(
            path,
            class_names=tuple(class_names or ()),
            num_channels=stats["input_channels"],
            labels=False,
        )
    if where is None:  # a log's windows are on the run's own clock
        check_time_scale(stats.get("spacing"), data, path)
    settings = dict(stats["settings"])
    settings.setdefault("solver", config.solver)  # runs saved before it was derived
    if settings["adaptive"]:  # room for the new data's longest solve too
        widest = ltc_jax.training.derive_defaults([data]).max_steps
        settings["max_steps"] = max(settings["max_steps"], widest)
    else:
        steps = ltc_jax.training.fixed_max_steps([data], settings["dt0"])
        settings["max_steps"] = max(settings["max_steps"], steps)
    data = standardize_with(data, stats["mean"], stats["std"])
    return config, model, data, settings, where


_LOG_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")
"""The file names `ltc_jax.datasets.read_sensor_log` reads."""


def _check_file_kind(run_dir: str, config: TrainConfig, path: str) -> None:
    """**Raises:** `ValueError` where a run of `ltc-jax stream` is given a file
    that is not a sensor log, before anything else is asked of it (a `.ts`
    reader names a file of another kind itself)."""
    if isinstance(config, StreamConfig) and not path.lower().endswith(_LOG_SUFFIXES):
        raise ValueError(
            f"--data {path}: {run_dir} is a run of ltc-jax stream, which reads "
            "sensor logs (.csv, .csv.gz or .parquet)."
        )


TIME_SCALE_RATIO = 10.0
"""How many times apart a file's median interval between observations and the
training data's may be before a warning says its times may be in another
unit."""


def training_spacing(train: SequenceDataset) -> float | None:
    """The training data's time scale, its median interval between observations
    ([`ltc_jax.training.observation_spacing`][]), as a run records it; `None`
    where no series has two observations."""
    try:
        return ltc_jax.training.observation_spacing([train])
    except ValueError:
        return None


def check_time_scale(spacing: float | None, data: SequenceDataset, path: str) -> None:
    """Warn where the median interval between the observations of `data`, read
    from the file `path`, is more than `TIME_SCALE_RATIO` times away from
    `spacing`, the training data's: its times may be in another unit
    (milliseconds against seconds; or a file without timestamps, whose times
    count its samples, 0, 1, 2, ..., against one with), which the model's
    time constants would read at another scale without an error. Nothing
    where either spacing is unknown (`None`: a run saved before runs recorded
    it; no series of two observations)."""
    mine = training_spacing(data)
    if spacing is None or mine is None:
        return
    ratio = max(mine / spacing, spacing / mine)
    if ratio > TIME_SCALE_RATIO:
        warn(
            f"{path}: its median interval between observations is {mine:.4g}, "
            f"{ratio:,.0f} times the training data's ({spacing:.4g}). If its "
            "times are in another unit (a file without timestamps counts its "
            "samples: 0, 1, 2, ...), the model reads them at another time scale."
        )


def check_observed(data: SequenceDataset, path: str, remedy: str) -> None:
    """Check that every series of `data`, read from the file `path`, observes
    each channel at least once, as a path without `empty_channel_fill` needs.

    **Raises:** `ValueError` naming the file, the series (by their place in
    the file) and channels, as [`ltc_jax.make_input_path`][] does, with
    `remedy` (the command's own option, where the library's error names its
    argument)."""
    problem = empty_channel_problem(data.unobserved_channels(), remedy)
    if problem is not None:
        raise ValueError(f"{path}: {problem}")


def _run_path(
    run_dir: str,
    path: str,
    config: TrainConfig,
    settings: dict,
    data: SequenceDataset,
) -> ltc_jax.InputPath:
    """The input path of `data` (read from the file `path`) as the run, of
    `config` and `settings`, built its own.

    **Raises:** `ValueError` naming the first series and channel without an
    observed value, where the run was trained without `--empty-channel-fill`
    and so has no value to give it (`check_observed`); as `make_input_path`."""
    options = path_options(config, settings)
    if options.get("empty_channel_fill") is None:
        check_observed(
            data,
            path,
            f"{run_dir} was trained without --empty-channel-fill, so it has none "
            "to give such channels: train with --empty-channel-fill (0: the "
            "channel's mean), or leave those series out.",
        )
    return ltc_jax.make_input_path(data, **options)


def _final_integrator(config: TrainConfig, settings: dict) -> ltc_jax.Integrator:
    """The integrator a run was tested with: its tolerance schedule's last phase."""
    integrator = make_config_integrator(config, settings)
    schedule = training_schedule(config, integrator)
    return integrator if schedule is None else schedule.final


def evaluate_run(
    run_dir: str, path: str, failures: str | None = None
) -> dict[str, Any]:
    """Evaluate a finished run's model on a labelled `.ts` file, or for a run of
    `ltc-jax stream` a sensor log with its failure table `failures`, read and
    standardised as its training data was. **Returns:** the dict of
    [`ltc_jax.evaluate`][]. **Raises:** as `read_for_run`; `ValueError` for an
    unlabelled file, a stream run's log without `failures`, or a series with a
    channel it never observes, for a run trained without
    `--empty-channel-fill`.

    The dict also holds `baseline`, the score on the file of the run's
    constant answer (`score_constant_answer`: `{"name", "test_accuracy"}` or
    `{"name", "test_loss"}`), or `None` for a run saved before it was
    recorded; `series`, the number scored; and for a log, `machines` (their
    names) and `trained_on`, those among them named as one the run trained or
    validated on, which a `UserWarning` names."""
    saved = os.path.join(run_dir, "config.json")
    if failures is None and os.path.isfile(saved):  # before reading the log
        with open(saved) as file:
            config = config_from_json(json.load(file))
        if isinstance(config, StreamConfig):
            _check_file_kind(run_dir, config, path)
            raise ValueError(
                f"{run_dir} is a run of ltc-jax stream: evaluate labels the log's "
                "windows from its failure table; give --failures (ltc-jax predict "
                "reads a log without one)."
            )
    config, model, data, settings, where = read_for_run(run_dir, path, failures)
    check_labelled(data, "evaluate (ltc-jax predict reads unlabelled files)")
    integrator = _final_integrator(config, settings)
    result = ltc_jax.evaluate(
        model,
        data,
        integrator=integrator,
        batch_size=settings["batch_size"],
        path=_run_path(run_dir, path, config, settings, data),
    )
    with open(os.path.join(run_dir, "data.json")) as file:
        stats = json.load(file)
    answer = stats.get("baseline")
    baseline = None if answer is None else score_constant_answer(answer, data)
    scored = dict(series=len(data))
    if where is not None:  # a log's windows: which machines, and were they seen
        machines = sorted(set(where["machine"].tolist()))
        split = stats["settings"]["stream"].get("machines", {})
        trained = {*split.get("train", []), *split.get("validation", [])}
        seen = [m for m in machines if m in trained]
        scored.update(machines=machines, trained_on=seen)
        if seen:
            warn(
                f"--data {path}: {len(seen)} of its {len(machines)} machines "
                f"share a name with machines the run trained or validated on "
                f"(e.g. {seen[:3]}): if they are the same machines, their windows "
                "overstate what the run does on machines it has not seen."
            )
    return dict(result, baseline=baseline, **scored)


def predict_run(run_dir: str, path: str, out: str, failures: str | None = None) -> int:
    """Write a finished run's predictions for the series of a `.ts` file (or a
    stream run's windows of a sensor log) to the CSV file `out`: one row per
    series, its index (for windows, also the machine and the window's end, in
    the log's seconds, and for a log of date-times that end as a UTC date-time,
    `end_utc`), the predicted class and each class's probability (for
    regression, the predicted targets). The file may be unlabelled
    (`@classLabel false`, or a log without `failures`: then every window the
    log holds); a `.ts` file's labels are not read (a class the run never
    saw, or a missing target, is no error), and a log's failure table only
    chooses the windows. **Returns:**
    the number of series. **Raises:** as `read_for_run`; `ValueError` for a
    series with a channel it never observes, for a run trained without
    `--empty-channel-fill`; `FileExistsError` if `out` exists,
    `IsADirectoryError` if it is a folder, and `FileNotFoundError` if its
    folder does not."""
    if os.path.isdir(out):
        raise IsADirectoryError(f"--out {out} is a folder: give a file name.")
    if os.path.exists(out):
        raise FileExistsError(
            f"{out} exists; predictions never overwrite a file: give another with "
            "--out."
        )
    config, model, data, settings, where = read_for_run(
        run_dir, path, failures, labels=False
    )
    folder = os.path.dirname(out)  # after the run folder, the default's, is found
    if folder and not os.path.isdir(folder):
        raise FileNotFoundError(f"--out {out}: no folder {folder}.")
    integrator = _final_integrator(config, settings)
    forward = eqx.filter_jit(lambda m, p: m(p, integrator=integrator))
    # One path, validated once, in chunks of the run's batch size: the chunks
    # share its static settings (one grid's duration), so equal ones compile
    # once.
    whole = _run_path(run_dir, path, config, settings, data)
    size = settings["batch_size"]
    outputs = np.concatenate(
        [
            np.asarray(
                forward(model, whole.take(np.arange(i, min(i + size, len(data)))))
            )
            for i in range(0, len(data), size)
        ]
    )
    # A window's machine and end, in the log's seconds (and as a date-time for
    # a log of date-times), after its index.
    place, row_place = [], [[] for _ in outputs]
    if where is not None:
        origin = where["time_origin"]
        zero = datetime.datetime.fromisoformat(origin) if origin else None
        place = ["machine", "end_time"] + (["end_utc"] if origin else [])
        for i, end in enumerate(where["end_time"]):
            row_place[i] = [where["machine"][i], repr(float(end))]
            if zero is not None:
                at = zero + datetime.timedelta(seconds=float(end))
                row_place[i].append(at.isoformat())
    with open(out, "w", newline="") as file:
        writer = csv.writer(file)
        # The run's classes (an unlabelled file is read with them too); none
        # for a regression run, whatever the file's labels.
        if data.num_classes > 0:
            probabilities = np.asarray(jax.nn.softmax(outputs, axis=-1))
            writer.writerow(["index", *place, "prediction", *data.class_names])
            for i, row in enumerate(probabilities):
                prediction = data.class_names[int(np.argmax(row))]
                writer.writerow(
                    [i, *row_place[i], prediction, *(f"{p:.6g}" for p in row)]
                )
        else:
            writer.writerow(
                ["index", *place, *(f"target_{j}" for j in range(outputs.shape[1]))]
            )
            for i, row in enumerate(outputs):
                writer.writerow([i, *row_place[i], *(f"{v:.6g}" for v in row)])
    return len(outputs)
