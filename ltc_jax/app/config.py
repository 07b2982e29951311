"""The main job's options: one frozen dataclass, which the command line parses with
tyro and the tests and notebooks build directly."""

import dataclasses
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

import tyro

from .._custom_types import Interpolation
from .._integrator import Batching
from .._model import ReadoutFeatures
from .._names import AdjointName, SolverName
from .._vector_field import GateBiasInit


DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-4


def _optional(type_: Any, metavar: str | None = None) -> Any:
    """`type_ | None` for an option whose help text says what leaving it out
    does: shown as `metavar` (a Literal's choices by default) and "(optional)",
    not as tyro's `{None}|...` and "(default: None)"."""
    if metavar is None:
        assert get_origin(type_) is Literal, "name the metavar of a non-Literal"
        metavar = "{" + ",".join(get_args(type_)) + "}"
    return Annotated[
        type_ | None, tyro.conf.arg(metavar=metavar, help_behavior_hint="(optional)")
    ]


File = _optional(str, "FILE")
Folder = _optional(str, "FOLDER")
OptionalFloat = _optional(float, "FLOAT")
OptionalInt = _optional(int, "INT")
OptionalSolver = _optional(SolverName)


@dataclasses.dataclass(frozen=True)
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
    model: Literal["ltc", "cfc"] = "ltc"
    """ltc: the LTC, solved as an ODE; cfc: the closed-form continuous-time cell
    (Hasani et al. 2022), no ODE solve (the solver options do not apply)."""
    hidden_size: int = 64
    """Units of the LTC or the CfC."""
    cfc_mode: Literal["default", "no_gate", "pure"] = "default"
    """The CfC's variant: gated (default), without the gate, or the direct
    closed form of the LTC."""
    backbone_units: int = 128
    """Width of the CfC's backbone layers."""
    backbone_layers: int = 1
    """Layers of the CfC's backbone (0: none)."""
    cell: Literal["ltc", "biophysical"] = "ltc"
    """ltc: the simplified LTC (Hasani et al. 2021, Eq. 1); biophysical: the original
    authors' cell on a sparse wiring."""
    wiring: Literal["fc", "random", "ncp"] = "fc"
    """Wiring of the biophysical cell: fully connected, random, or NCP."""
    solver: OptionalSolver = None
    """ODE solver; fused is the original authors' semi-implicit step. Default:
    fused (one step per observation interval, stable whatever the time
    constants); tsit5 where tolerances, --dtmin or --tighten-at are given, or
    with --adjoint backsolve or windowed."""
    ode_unfolds: int = 6
    """Sub-steps per step of the fused solver."""
    adjoint: AdjointName = "checkpoint"
    """Gradient mode: checkpoint, full, backsolve, windowed or direct."""
    dt0: OptionalFloat = None
    """Fixed step (time units) when no tolerances are given; else the first step.
    Default for the fixed-step solvers (euler, rk4, fused): derived from the
    data (one step per median observation interval, within the solver's
    stability bound)."""
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
    """With --adjoint backsolve or windowed and adaptive steps: the reverse
    solve's error control ignores the parameter-cotangent channels (diffrax's
    adjoint_rms_seminorm)."""
    max_steps: OptionalInt = None
    """Most adaptive steps per solve. Default: derived from the data (16 per
    observation of the longest sequence, at least 256); fixed steps: exactly the
    steps the longest sequence needs."""
    checkpoints: OptionalInt = None
    """Checkpoints for --adjoint checkpoint (default: diffrax's choice)."""
    windows: OptionalInt = None
    """Windows for --adjoint windowed (default: derived from the time constants
    and the longest sequence)."""
    backward_solver: OptionalSolver = None
    """Reverse-solve solver for --adjoint backsolve or windowed (default: the
    forward one; needed with --solver fused)."""
    batching: _optional(Batching) = None
    """Solve the batch as one state (batched) or per sequence (vmap). Default:
    derived from the data: vmap for adaptive steps with a linear input where a
    batched solve would stop more than twice as often as a sequence needs steps
    alone, and for the implicit kvaerno5; batched otherwise."""
    interpolation: Interpolation = "linear"
    """Input path between observations: linear, cubic (Hermite), or hold (the
    last observation until the next: causal, nothing read before it arrives)."""
    observation_mask: bool = False
    """Add a 0/1 channel per input channel: observed (1) or NaN (0)."""
    time_since_observation: bool = False
    """Add a channel per input channel: time since its previous observation."""
    drop_rate: float = 0.0
    """Drop this fraction of each sequence's observations at random (train and
    test, seeded by --seed): the irregular-sampling protocol of Kidger et al. 2020."""
    tau_min: OptionalFloat = None
    """Floor on every time constant tau (time units). Default: derived from the
    data, a hundredth of the median observation interval (0 turns it off)."""
    tau_init: _optional(tuple[float, float], "LOW HIGH") = None
    """Range the time constants are drawn from, log-uniformly (time units).
    Default: derived from the data, from a tenth of the median observation
    interval to the longest sequence's duration."""
    gate_bias_init: _optional(GateBiasInit) = None
    """The LTC gate's initial bias: chrono, logit(min(1/2, 1/tau)) per unit, so
    that each unit's memory at initialisation follows its tau (Tallec &
    Ollivier 2018); zero: the original write-up's, where every unit forgets
    within about two time units. Default: chrono. For --cell ltc only (the
    biophysical cell and the CfC have no such gate)."""
    readout_times: OptionalInt = None
    """The readout sees the states at this many evenly spread times of each
    sequence (1: the final state only). Default: derived from the data, the
    median sequence's observations, at most 16, or 64 with --readout-features
    pooled (1 for the biophysical cell)."""
    readout_features: _optional(ReadoutFeatures) = None
    """What the readout reads of the states at the readout times: states, side
    by side; pooled, their final state, mean and maximum (standardised), the
    same features wherever in a series a pattern lies; both, the two side by
    side. Default: both (states for the biophysical cell, which reads its
    final state). Pooled alone helps where the class does not lie at fixed
    positions and hurts where it does (see the docs' benchmark page)."""
    epochs: OptionalInt = None
    """Passes over the training set (at most, with a validation share). Default:
    derived from the training set's size and the batch size, about 4,000
    optimiser steps."""
    batch_size: OptionalInt = None
    """Sequences per optimiser step (the last batch is filled with weight-0
    copies). Default: derived from the training set's size (about 16 steps per
    epoch, a power of two in [8, 64])."""
    validation_fraction: OptionalFloat = None
    """Share of each class of the training set held out to choose the epoch
    (stratified, seeded by --seed); 0: none, train on the whole training set for
    --epochs and keep the last epoch. The test set is never used. Default:
    derived, 0.1 where that holds out at least 100 series, else 0."""
    patience: Annotated[int | None, tyro.conf.arg(metavar="INT")] = 20
    """Stop after this many epochs without a lower validation loss, and keep the
    best epoch's model (ignored without a validation share; None: never stop
    early)."""
    learning_rate: float = 1e-2
    """Peak learning rate of Adam (cosine decay to 1% of it)."""
    weight_decay: float = 0.0
    """Decoupled weight decay of AdamW (0: Adam)."""
    clip_norm: float = 1.0
    """Global gradient-norm clip."""
    warmup_steps: int = 0
    """Optimiser steps of linear learning-rate warm-up."""
    memory_table: bool = False
    """After training, measure the compiled training step's memory under every
    gradient mode (XLA's memory analysis, nothing run: one compilation per mode,
    which would add about 70% to the default run's time, so off unless asked)."""
    checkpoint_every: OptionalInt = None
    """Also checkpoint every N optimiser steps (always after each epoch)."""
    on_failure: Literal["raise", "skip"] = "raise"
    """On a failed solve or non-finite loss: stop (raise) or drop the update (skip)."""
    max_consecutive_failures: int = 10
    """With --on-failure skip: stop after this many failed steps in a row."""
    devices: OptionalInt = None
    """Devices to split each batch over (data parallelism; the batch size must
    be a multiple). Default: every device of the backend, over all processes
    with --coordinator."""
    coordinator: _optional(str, "HOST:PORT") = None
    """Several hosts: the address of process 0, where jax.distributed meets;
    with --num-processes and --process-id (and --out, the same on every host).
    Only process 0 writes the run folder."""
    num_processes: OptionalInt = None
    """Several hosts: how many processes train together."""
    process_id: OptionalInt = None
    """Several hosts: this process's index, 0 to --num-processes - 1."""
    precision: Literal["float32", "bf16"] = "float32"
    """bf16: mixed precision, the LTC gate's matrix products in bfloat16 (the
    state, solver, loss and optimiser stay in float32, or float64 with --x64)."""
    x64: bool = False
    """Run everything in float64."""
    resume: Folder = None
    """Continue the run in this folder from its newest good checkpoint, with its
    saved configuration (other options must match it, except --progress and
    where it runs: --devices and the several-host options)."""
    progress: bool = True
    """Show a progress bar."""

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
        if self.backbone_layers < 0:
            raise ValueError(
                "--backbone-layers must be zero or positive; got "
                f"{self.backbone_layers}."
            )
        if self.model == "cfc" and self.precision != "float32":
            raise ValueError("--precision bf16 is an option of --model ltc.")
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


@dataclasses.dataclass(frozen=True)
class StreamConfig(TrainConfig):
    """Train an LTC to predict failures from sensor streams: windows on a slow
    clock (`ltc_jax.datasets.stream_windows`), labelled "fails within
    --horizon-seconds of the window's end", split by machine.

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
    event_tags: tuple[str, ...] = ()
    """Tags of --log whose samples are events (alarms): counted per frame."""
    machines: int = 48
    """Simulated machines (without --log)."""
    sensors: int = 20
    """Sensors per simulated machine (without --log)."""
    simulated_seconds: float = 3600.0
    """Each simulated machine's stream: its last this many seconds before it
    fails (without --log)."""
    window_seconds: float = 600.0
    """Each window's length, in seconds."""
    stride_seconds: OptionalFloat = None
    """Seconds between successive windows' ends. Default: a fifth of
    --window-seconds."""
    horizon_seconds: float = 1800.0
    """The label: fails within this many seconds of the window's end."""
    clock_hz: OptionalFloat = None
    """The slow clock, in hertz. Default: the slowest continuous sensor's rate,
    rounded to a whole number of frames per window."""
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
        if self.drop_rate > 0:
            raise ValueError(
                "--drop-rate drops a .ts file's observations; ltc-jax stream's "
                "windows have the gaps of the sensors' own clocks."
            )
        if (self.log is None) != (self.failures is None):
            raise ValueError("--log and --failures go together: give both files.")
        if self.log is None and self.event_tags:
            raise ValueError("--event-tags names tags of --log; give --log.")
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
