"""The `ltc-jax` command line: the only place in the package that parses arguments
and prints."""

import dataclasses
import functools
import inspect
import math
import operator
import os
import re
import sys
import warnings
from typing import Annotated, Any, ClassVar

import equinox as eqx
import tyro

import ltc_jax

from .config import (
    LOG_COLUMNS,
    File,
    StreamConfig,
    TrainConfig,
    _flag,
    docstrings_as_help,
)
from .job import RunInterrupted, train_and_evaluate
from .runs import evaluate_run, predict_run


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.2f}"


def print_report(metrics: dict, memory_hint: bool = True) -> None:
    """Print the main job's summary: accuracy (the mean squared error for
    regression) beside the trivial baseline's, time, steps and the memory
    table, or, without one and with `memory_hint`, how to ask for it."""
    label, key, digits = (
        ("test MSE", "test_loss", ".4g")
        if metrics.get("task") == "regression"
        else ("test accuracy", "test_accuracy", ".4f")
    )
    print(f"{label:<19}{metrics[key]:{digits}}")
    baseline = metrics.get("baseline")  # absent from runs saved before it
    if baseline:
        print(f"{'baseline':<19}{baseline[key]:{digits}} (always {baseline['name']})")
    folds = metrics.get("folds_seconds")  # None without --folds
    print(
        f"train wall time    {metrics['train_seconds']:.1f} s"
        + ("" if folds is None else f" (after {folds:.1f} s of folds choosing epochs)")
    )
    if metrics.get("windows"):
        print(
            f"windowed adjoint   {metrics['windows']} windows (derived from the "
            "time constants and the longest sequence unless --windows was given)"
        )
    steps = metrics["steps_per_sequence"]
    if metrics.get("model") == "cfc":
        print(f"cell updates       {steps:.1f} per sequence (CfC: one per observation)")
    elif metrics.get("model") == "jump":
        print(
            f"steps and updates  {steps:.1f} per sequence (fused steps, and a GRU "
            "update at each observation)"
        )
    else:
        print(
            f"solver steps       {steps:.1f} per sequence ({metrics['solver']}, "
            f"{'adaptive' if metrics['adaptive'] else 'fixed'} steps; shared by a "
            "batch)"
        )
    memory = metrics["memory_bytes_by_mode"]
    if not memory and memory_hint:
        print(
            "\nthe compiled memory of a training step under each gradient mode: "
            "run again with --memory-table"
        )
    elif memory:
        print(
            "\ncompiled training-step memory (MiB), gradient mode = "
            f"{metrics['gradient_mode']}:"
        )
        print(f"{'mode':<12}{'temp':>10}{'arguments':>12}{'outputs':>10}{'peak':>10}")
        for mode, record in memory.items():
            if record is None:
                print(f"{mode:<12}{'n/a':>10}")
                continue
            print(
                f"{mode:<12}{_mib(record['temp_bytes']):>10}"
                f"{_mib(record['argument_bytes']):>12}"
                f"{_mib(record['output_bytes']):>10}{_mib(record['peak_bytes']):>10}"
            )
    print(f"\nrun folder         {metrics['run_dir']}")


@dataclasses.dataclass(frozen=True)
@docstrings_as_help
class EvaluateConfig:
    """Evaluate a finished run's model on new labelled data.

    The data: a labelled .ts file, or for a run of ltc-jax stream a sensor log
    and its failure table, read and standardised as the run's training data
    was."""

    command: ClassVar[str] = "evaluate"

    run_dir: Annotated[tyro.conf.Positional[str], tyro.conf.arg(metavar="RUN_DIR")]
    """The run folder of ltc-jax train or ltc-jax stream."""
    data: Annotated[str, tyro.conf.arg(metavar="FILE")]
    """The labelled .ts file (its labels among the run's classes); an
    unlabelled one (@classLabel false) is refused: use predict. For a run of
    ltc-jax stream: a sensor log (CSV or Parquet) with the run's sensors."""
    failures: File = None
    """For a run of ltc-jax stream: the log's failure table, which labels its
    windows (required)."""


@dataclasses.dataclass(frozen=True)
@docstrings_as_help
class PredictConfig:
    """Write a finished run's predictions as CSV, a row per series or window.

    The data: a .ts file's series, or for a run of ltc-jax stream the windows
    of a sensor log, read and standardised as the run's training data was."""

    command: ClassVar[str] = "predict"

    run_dir: Annotated[tyro.conf.Positional[str], tyro.conf.arg(metavar="RUN_DIR")]
    """The run folder of ltc-jax train or ltc-jax stream."""
    data: Annotated[str, tyro.conf.arg(metavar="FILE")]
    """A .ts file with the run's channels, labelled or not (@classLabel false);
    labels, if any, are not read. For a
    run of ltc-jax stream: a sensor log (CSV or Parquet) with the run's
    sensors; a row per window, with its machine and end time (also in UTC for
    a log of date-times)."""
    failures: File = None
    """For a run of ltc-jax stream: the log's failure table (optional; without
    it, every window of the log is predicted)."""
    out: File = None
    """The CSV file to write. Default: RUN_DIR/predictions-<data file name>.csv.
    An existing file is never overwritten."""


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """A warning as one line of the command's own, naming its category unless
    it is a `UserWarning` (`--debug`: Python's, with the line that raised
    it)."""
    kind = "" if category is UserWarning else f" ({category.__name__})"
    _say(f"ltc-jax: warning{kind}: {' '.join(str(message).split())}")


def _given_options(config: TrainConfig, args: list[str]) -> frozenset[str]:
    """The fields of `config` that `args` set: `--name`, `--name=value` and a
    boolean's `--no-name`, with dashes or underscores (tyro takes both)."""
    names = {field.name for field in dataclasses.fields(config)}
    given = set()
    for arg in args:
        if not arg.startswith("--"):
            continue
        name = arg[2:].split("=", 1)[0].replace("-", "_")
        if name not in names and name.startswith("no_"):
            name = name.removeprefix("no_")
        if name in names:
            given.add(name)
    return frozenset(given)


def _run(config, args: list[str]) -> int:
    """Run one parsed subcommand, parsed from `args`; return the exit status."""
    if isinstance(config, TrainConfig):
        metrics = train_and_evaluate(
            config, say=_say, given=_given_options(config, args)
        )
        print_report(metrics, memory_hint=not config.memory_table)
    elif isinstance(config, EvaluateConfig):
        result = evaluate_run(config.run_dir, config.data, config.failures)
        regression = math.isnan(result["accuracy"])
        if regression:  # the loss is the MSE
            print(f"loss       {result['loss']:.4f} (mean squared error)")
        else:
            print(f"accuracy   {result['accuracy']:.4f}")
            print(f"loss       {result['loss']:.4f}")
        baseline = result["baseline"]  # None for a run saved before it
        if baseline is not None:
            score = baseline["test_loss" if regression else "test_accuracy"]
            print(f"baseline   {score:.4f} (always {baseline['name']})")
        print(f"steps      {result['num_steps']:.1f} per sequence")
        machines = result.get("machines")
        print(
            f"scored     {result['series']} series"
            if machines is None
            else f"scored     {result['series']} windows of {len(machines)} machines"
        )
    else:
        name = os.path.splitext(os.path.basename(config.data))[0]
        out = config.out or os.path.join(config.run_dir, f"predictions-{name}.csv")
        count = predict_run(config.run_dir, config.data, out, config.failures)
        print(f"{count} predictions written to {out}")
    return 0


# What a user can get wrong, reported in one line with exit status 2.
# (ImportError: an optional extra a file needs, e.g. pyarrow for Parquet.)
_USER_ERRORS = (ValueError, OSError, ImportError, ltc_jax.CheckpointError)
# A run that failed (a diverged or failed solve): one line, exit status 1.
_RUN_FAILURES = (
    ltc_jax.SolverFailureError,
    ltc_jax.NonFiniteLossError,
    ltc_jax.DivergenceError,
    ltc_jax.TrainingFailedError,
    eqx.EquinoxRuntimeError,  # a failed solve outside training (validation, test)
)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `ltc-jax` (and `python -m ltc_jax`): subcommands `train`,
    `stream` (failure prediction from sensor streams), `evaluate` and
    `predict`; `--version`; `--debug` (anywhere) shows the traceback of an
    error instead of its one-line message, and warnings as Python shows them
    (with the line that raised them) instead of one line each,
    `ltc-jax: warning: ...`.

    **Returns:** the exit status: 0 on success, 1 when training fails (a diverged
    or failed solve), 2 for a user error (a bad option or file), 130 on Ctrl-C,
    141 (quietly) when the reader of its output has left (`| head`).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [arg for arg in args if arg != "--debug"]
    if args == ["--version"]:
        print(f"ltc-jax {ltc_jax.__version__}")
        return 0
    with warnings.catch_warnings():  # restores Python's own display after
        if not debug:
            warnings.showwarning = _show_warning
        return _main(args, debug)


def _main(args: list[str], debug: bool) -> int:
    """`main` after `--version` and `--debug`."""
    config = None  # until parsed
    try:
        # Building a TrainConfig validates its options, so parsing can fail too.
        config = tyro.cli(
            functools.reduce(
                operator.or_,
                (
                    Annotated[
                        Any,
                        tyro.conf.subcommand(
                            name=config_class.command,
                            constructor=config_class,
                            # The summary alone: tyro keeps a docstring's line
                            # breaks wherever a line starts with a symbol.
                            description=_summary(config_class),
                        ),
                    ]
                    for config_class in _COMMANDS
                ),
            ),
            args=args,
            prog="ltc-jax",
            # One flag per boolean, the one that changes its default.
            config=(tyro.conf.FlagCreatePairsOff,),
            description=(
                "Liquid Time-Constant networks in JAX. --version prints the "
                "version; --debug shows tracebacks."
            ),
        )
        return _run(config, args)
    except RunInterrupted as interrupted:
        if interrupted.run_dir is None:
            _say("ltc-jax: interrupted before training began; nothing was written.")
        else:
            _say(
                "ltc-jax: interrupted; the run's newest checkpoint is intact. "
                f"Continue with: ltc-jax {interrupted.command} --resume "
                f"{interrupted.run_dir}"
            )
        return 130
    except BrokenPipeError as error:
        if not _output_closed():  # another pipe (a socket, --out a FIFO)
            if debug:
                raise
            _say(f"ltc-jax: error: {_one_line(error)} (--debug shows the traceback)")
            return 2
        _discard_output()  # the reader left (ltc-jax ... | head): say nothing
        return 141  # as a process stopped by SIGPIPE
    except _RUN_FAILURES as error:
        if debug:
            raise
        _say(f"ltc-jax: training failed: {_one_line(error)}")
        return 1
    except _USER_ERRORS as error:
        if debug:
            raise
        message = _in_options(_one_line(error), config)
        _say(f"ltc-jax: error: {message} (--debug shows the traceback)")
        return 2


_COMMANDS = (TrainConfig, StreamConfig, EvaluateConfig, PredictConfig)


def _summary(config_class: type) -> str:
    """The first paragraph of a command's docstring, on one line."""
    return " ".join(
        inspect.cleandoc(config_class.__doc__ or "").split("\n\n")[0].split()
    )


_ARGUMENT = re.compile(
    r"(?<![\w.'\"/\\-])"  # not inside a word, a quote, an attribute, a path, a flag
    r"([a-z][a-z0-9]*(?:_[a-z0-9]+)+|fill|sensors|tags)"
    r"(?![\w/\\]|\.\w)"  # nor followed by a path's next part or an extension
    r"(=?)"
)
"""A library argument's name in a message, with its `=` where it has one."""

_WORDS = ("fill", "sensors", "tags")
"""Arguments whose names are also plain words: renamed only as `name=`."""


def _in_options(text: str, config: Any) -> str:
    """A library message in the words of the command that raised it: each
    library argument that one of the command's options gives is named as the
    option (`clock_hz` as `--clock-hz`, `horizon_seconds=60.0` as
    `--horizon-seconds 60.0`, `fill=` as `--fill`; `sensors=`, the sensors a
    stream's windows read, as `--tags` where a log is read, and a log's
    `time_column=` as `--log-columns time NAME`). The library
    names its arguments; a user of the command line has only the options.
    Names in paths, quotes and attributes are left as they are."""
    if not isinstance(config, TrainConfig):
        return text
    options = {field.name: _flag(field.name) for field in dataclasses.fields(config)}
    options.pop("sensors", None)  # the simulated plant's sensor count
    if isinstance(config, StreamConfig) and config.log is not None:
        options["sensors"] = "--tags"
        for column in LOG_COLUMNS:  # read_sensor_log's time_column, ...
            options[f"{column}_column"] = f"--log-columns {column} NAME"

    def rename(match: re.Match) -> str:
        name, equals = match[1], match[2]
        flag = options.get(name)
        if flag is None or (name in _WORDS and not equals):
            return match[0]  # not an option, or the word, not the argument
        after = match.string[match.end() : match.end() + 1]
        value = equals and after and not (after.isspace() or after in "),;")
        return flag + " " if value else flag

    return _ARGUMENT.sub(rename, text)


def _output_closed() -> bool:
    """Whether standard output's reader has left: its flush fails."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return True
    return False


def _discard_output() -> None:
    """Point standard output at the null device, so that Python's last flush
    at exit does not fail on the closed pipe again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a captured stream)
        pass


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return (
        text
        if isinstance(error, ValueError | ltc_jax.CheckpointError)
        else (text or type(error).__name__)
    )


def run() -> None:
    """The console script: `main()`'s status as the process's exit status."""
    sys.exit(main())


if __name__ == "__main__":
    run()
