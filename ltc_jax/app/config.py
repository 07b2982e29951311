"""The main job's options: one frozen dataclass, which the command line parses with
tyro and the tests and notebooks build directly."""

import ast
import dataclasses
import inspect
import math
import textwrap
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

import tyro

from .._custom_types import Interpolation
from .._integrator import Batching
from .._model import ReadoutFeatures
from .._names import AdjointName, SolverName, has_reverse_solve
from .._vector_field import GateBiasInit


DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-4


def _optional(type_: Any, metavar: str | None = None) -> Any:
    """`type_ | None` for an option whose help text says what leaving it out
    does: shown as `metavar` (a Literal's choices by default), not as tyro's
    `{None}|...` and "(default: None)"."""
    if metavar is None:
        assert get_origin(type_) is Literal, "name the metavar of a non-Literal"
        metavar = "{" + ",".join(get_args(type_)) + "}"
    return Annotated[
        type_ | None, tyro.conf.arg(metavar=metavar, help_behavior_hint="")
    ]


def docstrings_as_help(cls: type) -> type:
    """Give each option of `cls` (a class about to become a dataclass) its
    field docstring as help text, each paragraph on one line for the terminal
    to wrap, and no "(default: False)" beside a boolean's flag.

    tyro 1.0 keeps a docstring's line break wherever the next line is indented,
    which is every line after the first in a class body, so its help came out
    ragged; an explicit `tyro.conf.arg(help=...)` is used as given.

    **Returns:** `cls`, each documented annotation wrapped in
    `Annotated[..., tyro.conf.arg(help=...)]`.

    **Raises:** `AssertionError` for string annotations (`from __future__ import
    annotations`), whose `ClassVar`s and booleans it could not tell apart.
    """
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(body, ast.ClassDef)
    annotations = dict(cls.__annotations__)
    assert not any(isinstance(a, str) for a in annotations.values()), (
        "docstrings_as_help needs evaluated annotations (no `from __future__ "
        "import annotations`)"
    )
    for statement, following in zip(body.body, body.body[1:], strict=False):
        if not (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            continue
        name = statement.target.id
        annotation = annotations[name]
        if annotation is ClassVar or get_origin(annotation) is ClassVar:
            continue
        paragraphs = inspect.cleandoc(following.value.value).split("\n\n")
        help_ = "\n\n".join(" ".join(part.split()) for part in paragraphs)
        # A boolean is one flag (FlagCreatePairsOff): its help says what it does.
        plain = (
            get_args(annotation)[0]
            if get_origin(annotation) is Annotated
            else annotation
        )
        hint = "" if plain is bool else None
        annotations[name] = Annotated[
            annotation, tyro.conf.arg(help=help_, help_behavior_hint=hint)
        ]
    cls.__annotations__ = annotations
    return cls


File = _optional(str, "FILE")
Folder = _optional(str, "FOLDER")
OptionalFloat = _optional(float, "FLOAT")
OptionalInt = _optional(int, "INT")
OptionalSolver = _optional(SolverName)


@dataclasses.dataclass(frozen=True)
@docstrings_as_help
class TrainConfig:
    """Train an LTC classifier (or regressor) on a `.ts` train/test pair.

    Defaults are the main job: the bundled JapaneseVowels, 64 units, the fused
    step at one step per observation interval (Tsit5 with adaptive steps, rtol
    1e-3 and atol 1e-4, where error control or a reverse solve is asked for),
    checkpointed gradients.
    """

    command: ClassVar[str] = "train"
    """The `ltc-jax` subcommand that runs (and resumes) this job."""

    data: File = None
    """Training set (.ts, labelled; timestamped or not). Default: the bundled
    JapaneseVowels."""
    test_data: File = None
    """Test set (.ts); required with --data."""
    out: Folder = None
    """Run folder. Default: runs/train/<date>-<time>. An existing non-empty folder is
    never overwritten."""
    seed: int = 0
    """Seeds parameter initialisation and data order."""
    model: Literal["ltc", "cfc", "jump"] = "ltc"
    """ltc: the LTC, an ODE; cfc: the closed-form cell (Hasani et al. 2022);
    jump: a GRU update at each observation (solver options: --substeps)."""
    hidden_size: int = 64
    """Units of the model."""
    substeps: int = 1
    """Fused steps per interval of --model jump."""
    cfc_mode: Literal["default", "no_gate", "pure"] = "default"
    """The CfC's variant: gated (default), without the gate, or the direct
    closed form of the LTC."""
    backbone_units: int = 128
    """Width of the CfC's backbone layers."""
    backbone_layers: int = 1
    """Layers of the CfC's backbone (0: none)."""
    time_scale: OptionalFloat = None
    """CfC and --time-since-observation time unit (default: median interval)."""
    cell: Literal["ltc", "biophysical"] = "ltc"
    """ltc: the simplified LTC (Hasani et al. 2021, Eq. 1); biophysical: the original
    authors' cell on a sparse wiring."""
    wiring: Literal["fc", "random", "ncp"] = "fc"
    """The biophysical cell's wiring: all-to-all, random or NCP."""
    solver: OptionalSolver = None
    """ODE solver. Default: fused (the original authors' semi-implicit step);
    tsit5 with tolerances, --dtmin, --tighten-at, backsolve or windowed."""
    ode_unfolds: int = 6
    """Sub-steps per step of the fused solver."""
    adjoint: AdjointName = "checkpoint"
    """Gradient mode (see the docs' gradient modes)."""
    dt0: OptionalFloat = None
    """Fixed step, or the first with tolerances (time units). Default for euler, rk4
    and fused: the median observation interval, as stability permits."""
    rtol: OptionalFloat = None
    """Relative tolerance (adaptive steps; giving it makes the default solver
    tsit5). Default 1e-3 for an adaptive solver without --dt0."""
    atol: OptionalFloat = None
    """Absolute tolerance (adaptive steps; giving it makes the default solver
    tsit5). Default 1e-4 for an adaptive solver without --dt0."""
    dtmin: OptionalFloat = None
    """Smallest adaptive step (time units); reaching it is an error."""
    tighten_at: OptionalFloat = None
    """Tolerance schedule: after this fraction of the epochs, switch to
    --tight-rtol/--tight-atol (adaptive steps only)."""
    tight_rtol: float = 1e-6
    """Relative tolerance after --tighten-at."""
    tight_atol: float = 1e-7
    """Absolute tolerance after --tighten-at."""
    seminorm: bool = False
    """Backsolve or windowed with adaptive steps: the reverse solve's error control
    skips the parameter cotangents (diffrax's adjoint_rms_seminorm)."""
    max_steps: OptionalInt = None
    """Most steps per solve. Default: 16 per observation of the longest sequence, at
    least 256; for fixed steps, exactly those it needs."""
    checkpoints: OptionalInt = None
    """Checkpoints for --adjoint checkpoint (default: diffrax's choice)."""
    windows: OptionalInt = None
    """Windows for --adjoint windowed (default: from the time constants)."""
    backward_solver: OptionalSolver = None
    """Reverse-solve solver for --adjoint backsolve or windowed (default: the
    forward one; needed with --solver fused)."""
    batching: _optional(Batching) = None
    """Solve the batch as one state (batched) or per sequence (vmap). Default:
    vmap for kvaerno5 and where batching stops over twice as often."""
    interpolation: Interpolation = "linear"
    """Input path between observations: linear, cubic (Hermite) or hold (the last
    observation until the next: causal)."""
    observation_mask: bool = False
    """Add a 0/1 channel per input channel: observed (1) or NaN (0)."""
    time_since_observation: bool = False
    """Add per channel its time since last observation, in --time-scale units."""
    empty_channel_fill: OptionalFloat = None
    """Fill for a channel a series never observes (0: its mean; none: error)."""
    drop_rate: float = 0.0
    """Drop this share of observations at random (Kidger et al.)."""
    tau_min: OptionalFloat = None
    """Floor on every time constant tau (time units; 0: none). Default: a hundredth
    of the median observation interval."""
    tau_init: _optional(tuple[float, float], "LOW HIGH") = None
    """Range of the initial time constants, log-uniform (time units). Default: a
    tenth of the median observation interval to the longest duration."""
    gate_bias_init: _optional(GateBiasInit) = None
    """The LTC gate's initial bias: chrono (default), logit(min(1/2, 1/tau)) per
    unit (Tallec & Ollivier 2018); zero, the original's."""
    readout_times: OptionalInt = None
    """The readout sees the states at this many spread times. Default: the median
    sequence's observations, at most 16 (64 if pooled alone)."""
    readout_features: _optional(ReadoutFeatures) = None
    """What the readout reads: the states at the readout times (states), their
    final, mean and maximum (pooled), or both (default; biophysical: states)."""
    epochs: OptionalInt = None
    """Passes over the training set (at most, with a validation share). Default:
    about 4,000 optimiser steps."""
    batch_size: OptionalInt = None
    """Sequences per optimiser step (the last batch padded with weight-0 copies).
    Default: about 16 steps per epoch, a power of two in [8, 64]."""
    validation_fraction: OptionalFloat = None
    """Share of each class of the training set held out to choose the epoch (0:
    none). Default: 0.1 where that holds out 100 series or more, else 0."""
    patience: Annotated[int | None, tyro.conf.arg(metavar="INT")] = 20
    """Stop after this many epochs without a lower validation loss, keeping the best
    (None: never; needs a validation share)."""
    folds: OptionalInt = None
    """Choose the epochs (at most --epochs) by K-fold cross-validation of the
    training set, each fold stopped by --patience: K trainings more."""
    learning_rate: OptionalFloat = None
    """Peak learning rate of Adam (cosine decay to 1% of it). Default: 1e-3 for
    the CfC, else 1e-2."""
    weight_decay: float = 0.0
    """Decoupled weight decay of AdamW (0: Adam)."""
    clip_norm: float = 1.0
    """Global gradient-norm clip."""
    warmup_steps: int = 0
    """Optimiser steps of linear learning-rate warm-up."""
    memory_table: bool = False
    """After training, print the compiled memory of a training step under every
    gradient mode (XLA's analysis, one compilation per mode)."""
    checkpoint_every: OptionalInt = None
    """Also checkpoint every N optimiser steps (always after each epoch)."""
    on_failure: Literal["raise", "skip"] = "raise"
    """On a failed solve or non-finite loss: stop (raise) or drop the update (skip)."""
    max_consecutive_failures: int = 10
    """With --on-failure skip: stop after this many in a row."""
    devices: OptionalInt = None
    """Devices to split each batch over (the batch size a multiple). Default: every
    device of the backend, of all processes with --coordinator."""
    coordinator: _optional(str, "HOST:PORT") = None
    """Several hosts: process 0's address for jax.distributed; each host gives its
    --process-id, the --num-processes and one --out (process 0 writes)."""
    num_processes: OptionalInt = None
    """Several hosts: how many processes train together."""
    process_id: OptionalInt = None
    """Several hosts: this process's index, 0 to --num-processes - 1."""
    precision: Literal["float32", "bf16"] = "float32"
    """bf16: the LTC gate's matrix products in bfloat16 (the rest in float32, or
    float64 with --x64)."""
    x64: bool = False
    """Run everything in float64."""
    resume: Folder = None
    """Continue the run in this folder from its newest good checkpoint, with its
    saved options (only where it runs and reports may differ)."""
    progress: bool = True
    """Whether to show a progress bar; --no-progress hides it."""

    @property
    def solves_ode(self) -> bool:
        """Whether the model integrates an ODE with the solver options (the
        LTC); the CfC and the jump model call no solver."""
        return self.model == "ltc"

    def check(self) -> None:
        """Check every option's value (the main job does, before anything is
        loaded, compiled or written).

        **Raises:** `ValueError` naming the option (as on the command line)."""
        at_least_one = (
            "seed",
            "hidden_size",
            "ode_unfolds",
            "max_steps",
            "checkpoints",
            "windows",
            "epochs",
            "batch_size",
            "checkpoint_every",
            "max_consecutive_failures",
            "patience",
            "readout_times",
            "backbone_units",
            "devices",
            "num_processes",
        )
        for name in at_least_one:
            value = getattr(self, name)
            least = 0 if name == "seed" else 1
            if value is not None and value < least:
                raise ValueError(
                    f"{_flag(name)} must be at least {least}; got {value}."
                )
        positive = (
            "dt0",
            "rtol",
            "atol",
            "dtmin",
            "tight_rtol",
            "tight_atol",
            "learning_rate",
            "clip_norm",
        )
        for name in positive:
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{_flag(name)} must be positive; got {value}.")
        for name in ("tau_min", "weight_decay", "warmup_steps"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(
                    f"{_flag(name)} must be zero or positive; got {value}."
                )
        if self.folds is not None:
            if self.folds < 2:
                raise ValueError(f"--folds must be at least 2; got {self.folds}.")
            if self.validation_fraction:
                raise ValueError(
                    "--folds chooses the epochs instead of a validation share; "
                    f"drop --validation-fraction {self.validation_fraction:g} or "
                    "--folds."
                )
        if self.validation_fraction is not None and not (
            0.0 <= self.validation_fraction < 1.0
        ):
            raise ValueError(
                "--validation-fraction must lie in [0, 1); got "
                f"{self.validation_fraction}."
            )
        if self.tau_init is not None and not 0 < self.tau_init[0] <= self.tau_init[1]:
            raise ValueError(
                "--tau-init must be LOW HIGH with 0 < LOW <= HIGH; got "
                f"{self.tau_init}."
            )
        if not 0.0 <= self.drop_rate < 1.0:
            raise ValueError(f"--drop-rate must lie in [0, 1); got {self.drop_rate}.")
        if self.tighten_at is not None and not 0.0 < self.tighten_at < 1.0:
            raise ValueError(f"--tighten-at must lie in (0, 1); got {self.tighten_at}.")
        if self.time_scale is not None and not 0 < self.time_scale < math.inf:
            raise ValueError(
                f"--time-scale must be positive and finite; got {self.time_scale}."
            )
        if self.time_scale is not None and not (
            self.model == "cfc" or self.time_since_observation
        ):
            raise ValueError(
                "--time-scale sets the unit of elapsed time of the CfC and of "
                f"--time-since-observation's channel; got --model {self.model} "
                "without that channel, whose time constants follow the data by "
                "--tau-init."
            )
        if self.backbone_layers < 0:
            raise ValueError(
                "--backbone-layers must be zero or positive; got "
                f"{self.backbone_layers}."
            )
        if self.model != "ltc" and self.precision != "float32":
            raise ValueError("--precision bf16 is an option of --model ltc.")
        if self.model == "jump" and self.cell != "ltc":
            raise ValueError(
                f"--model jump evolves the ltc cell between observations; got "
                f"--cell {self.cell}."
            )
        if self.model != "ltc" and self.adjoint != "checkpoint":
            raise ValueError(
                f"--adjoint {self.adjoint} chooses the gradient mode of the LTC's "
                f"ODE solve; --model {self.model} trains by backpropagation "
                "through its updates."
            )
        if (
            self.model == "ltc"
            and self.solver == "fused"
            and has_reverse_solve(self.adjoint)
            and self.backward_solver in (None, "fused")
        ):
            raise ValueError(
                f"--adjoint {self.adjoint} solves backwards, which the fused "
                "step cannot (the reverse solve is not of LTC form): give "
                "--backward-solver (heun, say) with --solver fused."
            )
        if self.substeps < 1:
            raise ValueError(f"--substeps must be positive; got {self.substeps}.")
        if self.substeps != 1 and self.model != "jump":
            raise ValueError(
                f"--substeps sets the steps of --model jump; got --model {self.model}."
            )
        if self.cell == "biophysical" and self.precision != "float32":
            raise ValueError(
                "--precision bf16 is an option of --cell ltc; got --cell biophysical."
            )
        if self.gate_bias_init is not None and (
            self.model == "cfc" or self.cell == "biophysical"
        ):
            raise ValueError(
                f"--gate-bias-init {self.gate_bias_init} sets the LTC gate's bias; "
                + ("--model cfc" if self.model == "cfc" else "--cell biophysical")
                + " has no such gate."
            )
        if self.cell == "biophysical" and self.readout_features not in (
            None,
            "states",
        ):
            raise ValueError(
                f"--readout-features {self.readout_features} reads several "
                "readout times; --cell biophysical reads its motor neurons' "
                "final state."
            )
        if self.cell == "biophysical" and (self.readout_times or 1) > 1:
            raise ValueError(
                "--readout-times must be 1 with --cell biophysical, which reads "
                f"its motor neurons' final state; got {self.readout_times}."
            )
        several = (self.coordinator, self.num_processes, self.process_id)
        if any(value is not None for value in several):
            if any(value is None for value in several) or (
                self.out is None and self.resume is None
            ):
                raise ValueError(
                    "--coordinator, --num-processes and --process-id go together, "
                    "with --out or --resume (the run folder every process uses)."
                )
            if not 0 <= self.process_id < self.num_processes:
                raise ValueError(
                    f"--process-id must lie in [0, {self.num_processes}); got "
                    f"{self.process_id}."
                )
        if (self.data is None) != (self.test_data is None):
            raise ValueError("--data and --test-data go together: give both .ts files.")


LOG_COLUMNS = ("time", "tag", "value", "machine")
"""The columns of a sensor log that `--log-columns` renames, by their default
names (`ltc_jax.datasets.read_sensor_log`'s `time_column`, ...)."""


@dataclasses.dataclass(frozen=True)
@docstrings_as_help
class StreamConfig(TrainConfig):
    """Train an LTC to predict failures from sensor streams, split by machine.

    The windows lie on a slow clock (`ltc_jax.datasets.stream_windows`), each
    labelled "fails within --horizon-seconds of the window's end".

    Default: a simulated plant (`ltc_jax.datasets.simulate_plant`, seeded by
    --seed); or a historian's long-format log (--log, CSV or Parquet: time,
    tag, value, machine) with its failure table (--failures). The model,
    solver, gradient-mode and training options of `ltc-jax train` apply (not
    --data, --test-data or --drop-rate: the windows have the gaps of the
    sensors' own clocks); the path holds each frame's features
    (--interpolation hold, causal) and fills a channel a window never observes
    with 0, the training mean.
    """

    command: ClassVar[str] = "stream"

    data: tyro.conf.Suppress[str | None] = None  # a .ts file: ltc-jax train's
    test_data: tyro.conf.Suppress[str | None] = None
    drop_rate: tyro.conf.Suppress[float] = 0.0  # the sensors' own gaps instead
    out: Folder = None
    """Run folder. Default: runs/stream/<date>-<time>. An existing non-empty
    folder is never overwritten."""
    log: File = None
    """Sensor log, CSV or Parquet, one row per sample: time, tag, value and
    machine columns (`ltc_jax.datasets.read_sensor_log`). Default: the
    simulated plant."""
    failures: File = None
    """Failure table for --log, CSV or Parquet: machine and time columns, one
    row per machine that failed (the others are censored at their last
    sample). Required with --log."""
    event_tags: Annotated[
        tuple[str, ...], tyro.conf.arg(metavar="TAG ...", help_behavior_hint="")
    ] = ()
    """Tags of --log whose samples are events (alarms): counted per frame
    (default: none)."""
    tags: Annotated[
        tuple[str, ...], tyro.conf.arg(metavar="TAG ...", help_behavior_hint="")
    ] = ()
    """The tags of --log to read (default: all); the rows of others are
    skipped."""
    rates_hz: Annotated[
        dict[str, float],
        tyro.conf.arg(metavar="TAG HZ ...", help_behavior_hint=""),
    ] = dataclasses.field(default_factory=dict)
    """Nominal rates of continuous tags of --log, in hertz (default: one
    over each tag's median interval between samples)."""
    sensor_groups: Annotated[
        dict[str, str],
        tyro.conf.arg(metavar="TAG GROUP ...", help_behavior_hint=""),
    ] = dataclasses.field(default_factory=dict)
    """Kinds of continuous tags of --log, e.g. TI-101 temperature; the model
    reads each kind pooled (--sensor-pooling groups, implied; not with none);
    a tag it does not name is in the group continuous."""
    log_columns: Annotated[
        dict[str, str],
        tyro.conf.arg(metavar="COLUMN NAME ...", help_behavior_hint=""),
    ] = dataclasses.field(default_factory=dict)
    """Names of the columns time, tag, value and machine in --log, --failures
    and the logs evaluate and predict read, e.g. time timestamp (default:
    those names)."""
    machines: int = 48
    """Simulated machines (without --log)."""
    sensors: int = 20
    """Sensors per simulated machine (without --log)."""
    simulated_seconds: float = 3600.0
    """Each simulated machine's stream: its last this many seconds before it
    fails, more than --window-seconds plus --horizon-seconds (without
    --log)."""
    window_seconds: float = 600.0
    """Each window's length, in seconds."""
    stride_seconds: OptionalFloat = None
    """Seconds between successive windows' ends. Default: a fifth of
    --window-seconds."""
    horizon_seconds: float = 1800.0
    """The label: fails within this many seconds of the window's end."""
    clock_hz: OptionalFloat = None
    """The slow clock, in hertz. Default: the slowest continuous sensor's rate,
    rounded down to a whole number of frames per window (up to the next where
    that is within 0.1%)."""
    fill: OptionalFloat = None
    """The value of a sensor silent for a whole window (default: such a window
    is an error naming the sensor)."""
    test_fraction: float = 0.25
    """Share of the machines held out to test (at least one)."""
    validation_fraction: OptionalFloat = None
    """Share of the other machines held out, whole, to choose the epoch on (0:
    none, train for --epochs and keep the last). Default: a sixth of them, at
    least one, where three or more remain."""
    patience: Annotated[int | None, tyro.conf.arg(metavar="INT")] = 10
    """Stop after this many epochs without a lower validation loss, and keep the
    best epoch's model (None: never stop early)."""
    interpolation: Interpolation = "hold"
    """Input path between frames: hold (default: the last frame's features
    until the next, causal), linear or cubic."""
    sensor_pooling: _optional(Literal["groups", "none"]) = None
    """How the model reads the sensors: groups, each kind's features pooled
    across its sensors (mean, std, min, max), or none, each sensor's own.
    Default: groups with --sensor-groups, or on the simulated plant where
    pooling gives fewer channels; else none."""
    frame_encoder: Literal["none", "mlp"] = "none"
    """What the cell reads of each frame: none (default), the channels
    themselves; or mlp, a learned encoder of them (one layer of 2 x
    --hidden-size tanh units, then --hidden-size outputs), trained with the
    model, by default at a peak learning rate of 3e-3; for the ltc cell of
    --model ltc only."""
    learning_rate: OptionalFloat = None
    """Peak learning rate of Adam (cosine decay to 1% of it). Default: 1e-3 for
    the CfC, 3e-3 with --frame-encoder mlp, else 1e-2."""

    def check(self) -> None:
        """Check every option, as [`ltc_jax.app.TrainConfig.check`][] does, and
        the stream options.

        **Raises:** `ValueError` naming the option."""
        super().check()
        if self.data is not None or self.test_data is not None:
            raise ValueError(
                "ltc-jax stream reads --log and --failures, not --data or "
                "--test-data (those are ltc-jax train's .ts files)."
            )
        if self.empty_channel_fill is not None:
            raise ValueError(
                "--empty-channel-fill: ltc-jax stream gives a channel a window "
                "never observes 0, the training mean (--fill is the value of a "
                "sensor silent for a whole window)."
            )
        if self.folds is not None:
            raise ValueError(
                "--folds deals windows to folds, but a machine's windows overlap "
                "and share its wear; ltc-jax stream holds out whole machines "
                "instead (--validation-fraction)."
            )
        if self.drop_rate > 0:
            raise ValueError(
                "--drop-rate drops a .ts file's observations; ltc-jax stream's "
                "windows have the gaps of the sensors' own clocks."
            )
        if (self.log is None) != (self.failures is None):
            raise ValueError("--log and --failures go together: give both files.")
        for name in ("event_tags", "tags", "rates_hz", "sensor_groups"):
            if self.log is None and getattr(self, name):
                raise ValueError(f"{_flag(name)} names tags of --log; give --log.")
        if self.sensor_groups and self.sensor_pooling == "none":
            raise ValueError(
                "--sensor-groups names the kinds to pool the sensors by, and "
                "--sensor-pooling none pools none: give one of them."
            )
        if self.frame_encoder == "mlp" and (self.model, self.cell) != ("ltc", "ltc"):
            given = (
                f"--model {self.model}"
                if self.model != "ltc"
                else f"--cell {self.cell}"
            )
            raise ValueError(
                "--frame-encoder mlp is built for the ltc cell of --model ltc; "
                f"got {given}. Give --frame-encoder none."
            )
        if self.log_columns and self.log is None:
            raise ValueError("--log-columns names columns of --log; give --log.")
        unknown = sorted(set(self.log_columns) - set(LOG_COLUMNS))
        if unknown:
            raise ValueError(
                f"--log-columns renames the columns {list(LOG_COLUMNS)}; got "
                f"{unknown}. Give each as COLUMN NAME, e.g. time timestamp."
            )
        if self.machines < 2:
            raise ValueError(
                "--machines must be at least 2 (machines are the unit of the "
                f"train/test split); got {self.machines}."
            )
        if self.sensors < 1:
            raise ValueError(f"--sensors must be at least 1; got {self.sensors}.")
        for name in (
            "simulated_seconds",
            "window_seconds",
            "stride_seconds",
            "clock_hz",
        ):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{_flag(name)} must be positive; got {value}.")
        if not self.horizon_seconds >= 0:
            raise ValueError(
                "--horizon-seconds must be zero or positive; got "
                f"{self.horizon_seconds}."
            )
        if self.fill is not None and not math.isfinite(self.fill):
            raise ValueError(f"--fill must be a finite number; got {self.fill}.")
        if self.clock_hz is not None and self.window_seconds * self.clock_hz < 1.5:
            raise ValueError(
                f"--window-seconds {self.window_seconds:g} at --clock-hz "
                f"{self.clock_hz:g} gives {self.window_seconds * self.clock_hz:g} "
                "frames per window: a window needs two or more frames, for the "
                "model to see time pass. Give a faster clock or a longer window."
            )
        simulated = self.log is None
        if simulated and self.window_seconds + self.horizon_seconds >= (
            self.simulated_seconds
        ):
            raise ValueError(
                "--simulated-seconds must exceed --window-seconds plus "
                f"--horizon-seconds ({self.window_seconds:g} + "
                f"{self.horizon_seconds:g}), so that some windows end more than "
                "the horizon before the failure (label 0); got "
                f"{self.simulated_seconds:g}."
            )
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError(
                f"--test-fraction must lie in (0, 1); got {self.test_fraction}."
            )


def _flag(name: str) -> str:
    """A field's name as the command line spells it."""
    return "--" + name.replace("_", "-")
