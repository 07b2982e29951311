"""What a run's configuration leaves to the data and the model: the settings
derived from the training set (solver, step, batch size, time constants, readout
times), those the model sets (readout features, gate bias), and the integrator
and model they give."""

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.random as jr
import optax
from jaxtyping import PRNGKeyArray

import ltc_jax
from ltc_jax.datasets import SequenceDataset, stratified_folds, stratified_split

from .._batch import check_labelled
from .._names import has_reverse_solve
from .config import DEFAULT_ATOL, DEFAULT_RTOL, StreamConfig, TrainConfig


FIXED_ONLY = ("euler", "rk4", "fused")
"""Solvers without an error estimate: fixed steps only."""


VALIDATION_FRACTION = 0.1
"""The share of the training set the main job holds out, where it holds one out."""

MIN_VALIDATION_SERIES = 100
"""The fewest series a held-out share chooses the epoch on: the standard error of
an accuracy on `n` series is up to `0.5 / sqrt(n)`, 5 points at 100, the size of
the differences between epochs it has to tell apart."""


def validation_share(config: TrainConfig, train: SequenceDataset) -> tuple[float, str]:
    """The share of the training set `train` a config holds out to choose the
    epoch, and why: `config.validation_fraction` where given; otherwise
    `VALIDATION_FRACTION` where the stratified split
    ([`ltc_jax.datasets.stratified_split`][], which rounds per class) holds out
    at least `MIN_VALIDATION_SERIES` series, else none (0; none either with
    `config.folds`, which choose the epochs instead): on fewer, the epoch
    chosen follows the noise of a few series, and stopping early cuts the
    learning-rate schedule short (measured on the development benchmark, 3
    seeds: without a share every dataset gained, JapaneseVowels 0.8 points to
    97.7%, ACSF1 11 points; the docs' benchmark page)."""
    if config.validation_fraction is not None:
        return config.validation_fraction, "given"
    if config.folds is not None:
        return 0.0, f"--folds {config.folds} chooses the epochs instead"
    try:
        _, held = stratified_split(train, VALIDATION_FRACTION, seed=config.seed)
    except ValueError:  # no class has two series: nothing can be held out
        held = ()
    of = "of each class of" if train.is_classification else "of"
    share = f"{VALIDATION_FRACTION:g} {of} {len(train)} training series"
    if len(held) >= MIN_VALIDATION_SERIES:
        return VALIDATION_FRACTION, (
            f"{share} holds out {len(held)}, at least {MIN_VALIDATION_SERIES}: "
            "enough to choose the epoch on"
        )
    return 0.0, (
        f"{share} would hold out {len(held)}, under {MIN_VALIDATION_SERIES}: too "
        "few to choose an epoch on, so the whole training set trains for --epochs "
        "and the last epoch is kept (--patience does not apply)"
    )


def default_solver(config: TrainConfig) -> tuple[str, str]:
    """The solver of a config that names none, and why.

    - `"tsit5"` (adaptive) where the config asks for error control (`rtol`,
      `atol`, `dtmin` or a tolerance schedule), or for a continuous adjoint
      (`backsolve`, `windowed`): the fused step cannot run backwards in time,
      and an explicit reverse solve at its one step per observation interval
      would lie far outside its stability region. The CfC and the jump model
      call no ODE solver; they get `"tsit5"` too, unused.
    - `"fused"` otherwise: the original authors' semi-implicit step (Hasani et
      al. 2021), one step per observation interval. The derived time constants
      reach down to a tenth of that interval, where an explicit solver's steps
      are limited by stability, not accuracy, while the fused step is stable at
      any step: its decay sits in a denominator. The docs' training page
      gives the measured trade-off.
    """
    if not config.solves_ode:
        return "tsit5", f"--model {config.model} calls no ODE solver (unused)"
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


DEFAULT_READOUT_FEATURES = "both"
"""The main job's readout of several times: the states side by side and their
pooled summary, for classes that lie at fixed positions in a series as well as
those that do not (the docs' benchmark page measures each choice)."""

DEFAULT_READOUT_REASON = (
    "the states side by side and their final, mean and maximum: for classes at "
    "fixed positions in a series and for those anywhere in it"
)
"""Why the main job reads `DEFAULT_READOUT_FEATURES`, recorded as its reason."""


LEARNING_RATES = dict(ltc=1e-2, cfc=1e-3, jump=1e-2)
"""The main job's peak learning rate for each `--model`."""

LEARNING_RATE_REASONS = dict(
    ltc="Adam's peak rate for the LTC, at which the development benchmark measured it",
    cfc="Adam's peak rate for the CfC: its state is rebuilt from the backbone "
    "at every observation, with no leak to damp a large update; at 1e-2 its "
    "training loss jumped back up over hundreds of steps (the docs' benchmark "
    "page)",
    jump="Adam's peak rate for the LTC, whose field and time constants the jump "
    "model shares",
)
"""Why the main job uses `LEARNING_RATES`, recorded as its reason."""

FRAME_ENCODER_LEARNING_RATE = 3e-3
"""The stream job's peak learning rate for an LTC behind a frame encoder
(`--frame-encoder mlp`)."""

FRAME_ENCODER_REASON = (
    "Adam's peak rate for an LTC behind a frame encoder: at the LTC's 1e-2 "
    "its held-out AUROC fell below the plain model's in one run of three, at "
    "3e-3 it rose in all three (the docs' sensor streams page)"
)
"""Why the stream job uses `FRAME_ENCODER_LEARNING_RATE`, recorded as its
reason."""


def gate_bias_init(config: TrainConfig) -> str | None:
    """The LTC gate's initial bias a config asks for: `config.gate_bias_init`,
    else `"chrono"` for the `ltc` cell of `--model ltc` and for `--model jump`;
    `None` where there is no such gate (the biophysical cell, the CfC)."""
    if config.model == "cfc" or config.cell != "ltc":
        return None
    return config.gate_bias_init or "chrono"


def make_frame_encoder(
    input_size: int, hidden_size: int, *, key: PRNGKeyArray
) -> eqx.nn.MLP:
    """The frame encoder of `ltc-jax stream --frame-encoder mlp`: an
    `equinox.nn.MLP` from a frame's `input_size` channels through one layer
    of `2 * hidden_size` tanh units to `hidden_size` outputs, the LTC cell's
    input. It maps one frame's features, `float[input_size] ->
    float[hidden_size]`; as an [`ltc_jax.LTC`][]'s `encoder` (with
    `encoded_size=hidden_size`) it is applied wherever the solve reads the
    path (with the fused step, at each of its `ode_unfolds` sub-steps, to the
    same held frame), and every gradient mode trains it. Its parameters take
    equinox's default initialisation (uniform within 1/sqrt(fan-in)) in the
    default float dtype.

    **Arguments:** `input_size`: a frame's channels; `hidden_size`: the
    LTC's units; `key`: a `jax.random.PRNGKey`.

    **Raises:** nothing of its own; equinox's errors pass through.

    **Source:** the multi-rate LTC's learnable frame encoder (the docs'
    "Sensor streams" page measures it against the frames' own features)."""
    return eqx.nn.MLP(
        input_size, hidden_size, 2 * hidden_size, 1, activation=jax.nn.tanh, key=key
    )


def readout_features(config: TrainConfig) -> str:
    """The readout features a config asks for: `config.readout_features`, else
    `"states"` for the biophysical cell (which reads one state) and
    `DEFAULT_READOUT_FEATURES` otherwise."""
    if config.readout_features is not None:
        return config.readout_features
    return "states" if config.cell == "biophysical" else DEFAULT_READOUT_FEATURES


def resolve_settings(
    config: TrainConfig,
    train: SequenceDataset,
    others: tuple[SequenceDataset, ...] = (),
) -> dict[str, Any]:
    """The settings a config leaves to the data ([`ltc_jax.training.derive_defaults`][]
    on the training data; `others`, such as the test set, only widen `max_steps`
    so that every solve fits), each given option kept: `solver`
    ([`default_solver`][ltc_jax.app.settings.default_solver] where the config names
    none), `dt0` (for fixed steps), `adaptive`, `max_steps`, `batch_size`,
    `epochs`, `tau_init`, and `derived`, naming each setting the data or the
    model chose and why; also `batching`, `readout_times`, `readout_features`,
    `gate_bias_init` and `learning_rate` (the last three from the model, not the
    data, with their reasons under `derived` where the config leaves them; the
    rate is `FRAME_ENCODER_LEARNING_RATE` behind a stream job's frame
    encoder), and
    for the CfC or a `--time-since-observation` channel `time_scale` (the
    median observation interval), the unit in which they read elapsed time."""
    name, solver_reason = (
        (config.solver, None) if config.solver is not None else default_solver(config)
    )
    adaptive = (
        config.rtol is not None
        or config.atol is not None
        or (config.dt0 is None and name not in FIXED_ONLY)
    )
    solver = ltc_jax.make_solver(name, ode_unfolds=config.ode_unfolds)
    bound = ltc_jax.training.real_stability_bound(solver)
    defaults = ltc_jax.training.derive_defaults(
        [train],
        stability_bound=bound,
        adaptive=adaptive,
        batch_size=config.batch_size,
        interpolation=config.interpolation,
        readout_features=readout_features(config),
        batch_multiple=config.devices or len(jax.devices()),
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
    reasons["readout_features"] = (
        "the biophysical cell reads one state"
        if config.cell == "biophysical"
        else DEFAULT_READOUT_REASON
    )
    reasons["gate_bias_init"] = (
        "logit(min(1/2, 1/tau)) per unit: each unit's memory at initialisation "
        "follows its time constant (Tallec & Ollivier 2018)"
    )
    learning_rate = LEARNING_RATES[config.model]
    rate_reason = LEARNING_RATE_REASONS[config.model]
    if getattr(config, "frame_encoder", "none") == "mlp":
        learning_rate, rate_reason = FRAME_ENCODER_LEARNING_RATE, FRAME_ENCODER_REASON
    chosen = dict(
        solver=name,
        dt0=config.dt0 if config.dt0 is not None or adaptive else defaults.dt0,
        batch_size=config.batch_size or defaults.batch_size,
        epochs=config.epochs or defaults.epochs,
        tau_init=tuple(config.tau_init or defaults.tau_init),
        tau_min=config.tau_min,
        batching=config.batching or batching,
        readout_times=config.readout_times or readout_times,
        readout_features=readout_features(config),
        gate_bias_init=gate_bias_init(config),
        learning_rate=config.learning_rate or learning_rate,
    )
    reasons["learning_rate"] = rate_reason
    if reads_elapsed_time(config):
        chosen["time_scale"] = config.time_scale or defaults.spacing
        reasons["time_scale"] = (
            f"the median observation interval ({defaults.spacing:g}): a typical "
            "interval reads as 1, whatever the unit of the times"
        )
    if config.tau_min is None and config.model != "cfc" and config.cell == "ltc":
        # Below the fastest time constant drawn (a given --tau-init too); the
        # CfC and the biophysical cell have no tau.
        chosen["tau_min"] = min(defaults.tau_min, chosen["tau_init"][0] / 10)
        if chosen["tau_min"] < defaults.tau_min:
            reasons["tau_min"] = "a tenth of the fastest initial time constant"
    if config.dt0 is None and not adaptive and bound is not None:
        # Stable on the time constants actually drawn (a given --tau-init too).
        low = chosen["tau_init"][0]
        chosen["dt0"] = min(defaults.spacing, 0.9 * bound * low / (1 + low))
    if adaptive:
        over_every = ltc_jax.training.derive_defaults(every)
        widest = over_every.max_steps
        reasons["max_steps"] = (
            over_every.reasons["max_steps"]
            + " (over every set the model is solved on: training, test and any "
            "validation share)"
        )
        if config.tighten_at is not None:  # the tight phase takes more steps
            widest *= 4
        chosen["max_steps"] = config.max_steps or widest
    else:
        chosen["max_steps"] = ltc_jax.training.fixed_max_steps(every, chosen["dt0"])
    names = (
        "solver",
        "dt0",
        "batch_size",
        "epochs",
        "tau_init",
        "tau_min",
        "max_steps",
        "batching",
        "readout_times",
        "readout_features",
        "gate_bias_init",
        "learning_rate",
    )
    if config.model == "cfc":  # no ODE solve: the batches, readout and rate
        names = (
            "batch_size",
            "epochs",
            "readout_times",
            "readout_features",
            "learning_rate",
        )
    elif config.model == "jump":  # the LTC's field and gate, no solver
        unused = ("solver", "dt0", "max_steps", "batching")
        names = tuple(name for name in names if name not in unused)
    if reads_elapsed_time(config):
        names = (*names, "time_scale")
    derived = {
        name: dict(value=chosen[name], reason=reasons[name])
        for name in names
        if getattr(config, name) is None
        and chosen[name] is not None  # no gate bias without the LTC's gate
        and (name != "dt0" or not adaptive)
    }
    if not adaptive and "max_steps" in derived:  # none for a model without a solve
        derived["max_steps"]["reason"] = "the steps of dt0 the longest sequence needs"
    return dict(chosen, adaptive=adaptive, derived=derived)


def reads_elapsed_time(config: TrainConfig) -> bool:
    """Whether the model a config describes reads elapsed time in a unit of
    its own, `time_scale`: the CfC's gate, and a `--time-since-observation`
    channel."""
    return config.model == "cfc" or config.time_since_observation


def path_options(config: TrainConfig, settings: dict[str, Any]) -> dict[str, Any]:
    """The `InputPath` options a config asks for, with the `settings` of
    `resolve_settings`: `--empty-channel-fill` for a channel a series never
    observes (for a stream job, a channel a window never observes, a fast
    sensor's `diff_rms` with one sample per frame, say, is 0, the training
    mean, not an error), and a `--time-since-observation` channel in units of
    the settings' `time_scale` (the times' own unit for a run saved before it
    was derived)."""
    return dict(
        interpolation=config.interpolation,
        observation_mask=config.observation_mask,
        time_since_observation=config.time_since_observation,
        time_since_observation_scale=settings.get("time_scale", 1.0),
        empty_channel_fill=0.0
        if isinstance(config, StreamConfig)
        else config.empty_channel_fill,
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
) -> ltc_jax.training.ToleranceSchedule | None:
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
    return ltc_jax.training.ToleranceSchedule(
        integrator,
        start_epochs=(0, switch),
        rtols=(float(controller.rtol), config.tight_rtol),
        atols=(float(controller.atol), config.tight_atol),
    )


def output_size_of(train: SequenceDataset) -> int:
    """The model's outputs for a training set: its classes, or its targets."""
    return train.num_classes if train.is_classification else train.labels.shape[1]


def make_model(
    config: TrainConfig, input_size: int, output_size: int, settings: dict[str, Any]
) -> ltc_jax.LTC | ltc_jax.CfC | ltc_jax.JumpLTC:
    """The freshly initialised LTC (or CfC, or jump model) a config describes,
    with the `tau_init` and `readout_times` of `settings` (from `resolve_settings`; a
    run saved before readout times existed reads its final state) and the
    config's `readout_features` and, for the `ltc` cell, `gate_bias_init`; the
    CfC's `time_scale` is the settings' (1, the times' own unit, for a run
    saved before it was derived); the LTC reads its input through
    [`make_frame_encoder`][ltc_jax.app.settings.make_frame_encoder] where a
    [`ltc_jax.app.StreamConfig`][]'s `frame_encoder` is `"mlp"`."""
    sizes = (input_size, config.hidden_size, output_size)
    shared = dict(
        readout_times=settings.get("readout_times", 1),
        readout_features=readout_features(config),
        key=jr.PRNGKey(config.seed),
    )
    if config.model == "cfc":
        return ltc_jax.CfC(
            *sizes,
            mode=config.cfc_mode,
            backbone_units=config.backbone_units,
            backbone_layers=config.backbone_layers,
            time_scale=settings.get("time_scale", 1.0),
            **shared,
        )
    gate = (
        {}
        if gate_bias_init(config) is None
        else dict(gate_bias_init=gate_bias_init(config))
    )
    if config.model == "jump":
        return ltc_jax.JumpLTC(
            *sizes,
            tau_init=tuple(settings["tau_init"]),
            tau_min=settings.get("tau_min") or config.tau_min or 0.0,
            substeps=config.substeps,
            **gate,
            **shared,
        )
    encoder = {}
    if getattr(config, "frame_encoder", "none") == "mlp":  # a stream job's LTC
        encoder = dict(
            encoder=make_frame_encoder(
                input_size, config.hidden_size, key=jr.fold_in(shared["key"], 1)
            ),
            encoded_size=config.hidden_size,
        )
    return ltc_jax.LTC(
        *sizes,
        cell=config.cell,
        wiring=config.wiring,
        tau_init=tuple(settings["tau_init"]),
        tau_min=settings.get("tau_min") or config.tau_min or 0.0,
        matmul_dtype="bfloat16" if config.precision == "bf16" else None,
        **encoder,
        **gate,
        **shared,
    )


def training_placement(
    config: TrainConfig, settings: dict[str, Any]
) -> ltc_jax.training.AbstractPlacement:
    """Where training runs: one device, or the batches split over a device
    mesh, over which the batch size of `settings` must divide (a derived one
    was rounded up to a multiple of the device count by `resolve_settings`).

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
        return ltc_jax.training.SingleDevice()
    size = settings["batch_size"]  # a derived one is a multiple of the devices
    if size % count:
        raise ValueError(
            f"--batch-size {size} does not divide over {count} devices; choose a "
            f"multiple of {count}."
        )
    return ltc_jax.training.DataParallel(ltc_jax.training.data_mesh(count))


def failure_policy(config: TrainConfig) -> ltc_jax.training.AbstractFailurePolicy:
    """What a failed training step does under `config.on_failure`: skip it
    (at most `max_consecutive_failures` in a row) or raise."""
    if config.on_failure == "skip":
        return ltc_jax.training.SkipFailures(config.max_consecutive_failures)
    return ltc_jax.training.RaiseOnFailure()


@dataclasses.dataclass(frozen=True)
class JobSetup:
    """What the main job trains, built from a config and the data by
    [`prepare`][ltc_jax.app.prepare]: the same model, integrator, optimiser and
    schedule as `ltc-jax train` with the same options and data.

    **Fields:** `config`, the config with what the data and the model chose
    filled in (`solver`, `epochs`, `readout_features`, `gate_bias_init`,
    `learning_rate`);
    `settings`, every resolved setting (`ltc_jax.app.settings.resolve_settings`),
    with `derived`, each setting the data or the model chose and why; `model`,
    the freshly initialised [`ltc_jax.LTC`][], [`ltc_jax.CfC`][] or
    [`ltc_jax.JumpLTC`][]; `integrator`, an [`ltc_jax.Integrator`][], or a
    [`ltc_jax.training.ToleranceSchedule`][]
    with `--tighten-at` (either is `fit`'s `integrator`); `optimizer`, from
    [`ltc_jax.training.make_optimizer`][] over `epochs * steps_per_epoch` steps;
    `path`, the training set's [`ltc_jax.InputPath`][]; `path_options`, the
    options of [`ltc_jax.make_input_path`][] that built it (for the other sets);
    `steps_per_epoch`, `ceil(len(train) / batch_size)`.
    """

    config: TrainConfig
    settings: dict[str, Any]
    model: ltc_jax.LTC | ltc_jax.CfC | ltc_jax.JumpLTC
    integrator: ltc_jax.Integrator | ltc_jax.training.ToleranceSchedule
    optimizer: optax.GradientTransformation
    path: ltc_jax.InputPath
    path_options: dict[str, Any]
    steps_per_epoch: int

    @property
    def epochs(self) -> int:
        """Epochs to train (at most, with a validation share and `patience`)."""
        return self.config.epochs

    @property
    def batch_size(self) -> int:
        """Sequences per batch."""
        return self.settings["batch_size"]

    @property
    def seed(self) -> int:
        """The run's seed: the model's initialisation and the batches' order."""
        return self.config.seed

    @property
    def derived(self) -> dict[str, dict[str, Any]]:
        """Each setting the data or the model chose: `{name: {"value", "reason"}}`."""
        return self.settings["derived"]

    @property
    def final_integrator(self) -> ltc_jax.Integrator:
        """The integrator after training (a schedule's last), to evaluate with."""
        if isinstance(self.integrator, ltc_jax.training.ToleranceSchedule):
            return self.integrator.final
        return self.integrator


def prepare(
    config: TrainConfig,
    train: SequenceDataset,
    others: tuple[SequenceDataset, ...] = (),
    say: Callable[[str], None] | None = None,
) -> JobSetup:
    """The main job's model, integrator, optimiser and schedule for the data,
    as `ltc-jax train` builds them: one call for a library user who wants what
    the command line trains.

    ```python
    from ltc_jax.app import TrainConfig, prepare

    job = prepare(TrainConfig(), train, others=(test,))
    model, history = ltc_jax.fit(
        job.model, train, integrator=job.integrator, optimizer=job.optimizer,
        epochs=job.epochs, batch_size=job.batch_size, seed=job.seed, path=job.path,
    )
    ```

    The data are used as given: the main job standardises them with the
    training set's statistics ([`ltc_jax.datasets.standardize`][]) and holds
    out a validation share only from 1,000 training series
    ([`validation_share`][ltc_jax.app.settings.validation_share]); do both
    first to match it. With the same config, data and seed, the parameters
    after training equal the command line's (a test checks after one epoch).

    With `config.folds`, this call trains: the epochs are chosen by that many
    folds of `train` ([`fold_epochs`][ltc_jax.app.settings.fold_epochs]), and
    the job returned trains for them, its schedule over them, with the reason
    in `derived["epochs"]` and the folds' wall time, in seconds, in its
    `seconds`.

    **Arguments:** `config`: the options, as on the command line (its `data`,
    `out` and reporting options are not used here); `train`: the training set
    (labelled), from which the settings are derived; `others`: every other set
    the model will be solved on (a validation share, the test set), which only
    widen `max_steps` so that every solve fits; `say`: called with a line
    before each fold (default: silent).

    **Returns:** a [`JobSetup`][ltc_jax.app.JobSetup].

    **Raises:** `ValueError` for a bad or inconsistent option
    ([`ltc_jax.app.TrainConfig.check`][]), an unlabelled `train`, or as
    [`ltc_jax.training.derive_defaults`][] for data it cannot derive from;
    with `config.folds`, as [`fold_epochs`][ltc_jax.app.settings.fold_epochs]
    (`KeyboardInterrupt` passes through).
    """
    config.check()
    check_labelled(train, "training")
    job = _setup(config, train, others)
    if config.folds is None:
        return job
    start = time.perf_counter()
    epochs, reason = fold_epochs(job, train, say or (lambda message: None))
    seconds = time.perf_counter() - start
    return _setup(
        dataclasses.replace(config, epochs=epochs),
        train,
        others,
        epochs=dict(value=epochs, reason=reason, seconds=seconds),
    )


def _optimizer(
    config: TrainConfig, steps_per_epoch: int
) -> optax.GradientTransformation:
    """The job's optimiser, its schedule over `config.epochs * steps_per_epoch`."""
    return ltc_jax.training.make_optimizer(
        config.learning_rate,
        config.epochs * steps_per_epoch,
        warmup_steps=config.warmup_steps,
        clip_norm=config.clip_norm,
        weight_decay=config.weight_decay,
    )


def _setup(
    config: TrainConfig,
    train: SequenceDataset,
    others: tuple[SequenceDataset, ...],
    **derived: dict[str, Any],
) -> JobSetup:
    """`prepare` without the folds; `derived` adds to the settings' reasons."""
    settings = resolve_settings(config, train, others)
    settings["derived"] = settings["derived"] | derived
    config = dataclasses.replace(
        config,
        solver=settings["solver"],
        epochs=settings["epochs"],
        readout_features=settings["readout_features"],
        gate_bias_init=settings["gate_bias_init"],
        learning_rate=settings["learning_rate"],
    )
    integrator = make_config_integrator(config, settings)
    schedule = training_schedule(config, integrator)
    options = path_options(config, settings)
    path = ltc_jax.make_input_path(train, **options)
    model = make_model(config, path.input_size, output_size_of(train), settings)
    steps_per_epoch = math.ceil(len(train) / settings["batch_size"])
    return JobSetup(
        config=config,
        settings=settings,
        model=model,
        integrator=integrator if schedule is None else schedule,
        optimizer=_optimizer(config, steps_per_epoch),
        path=path,
        path_options=options,
        steps_per_epoch=steps_per_epoch,
    )


def fold_epochs(
    job: JobSetup, train: SequenceDataset, say: Callable[[str], None]
) -> tuple[int, str]:
    """The epochs `job` should train `train` for, chosen by `job.config.folds`-fold
    cross-validation ([`ltc_jax.datasets.stratified_folds`][] by the job's
    seed): each fold trains `job.model` with the job's integrator, batch size,
    schedule (over `job.epochs` of its own batches), failure policy and
    devices, validated on its held-out part and stopped by the config's
    `patience`; the number of epochs of lowest mean validation loss over the
    epochs every fold reached ([`ltc_jax.training.best_mean_epoch`][]) is
    returned with its reason. `say` is called before each fold.

    **Raises:** `ValueError` for more folds than training series, or devices
    the machine lacks (`training_placement`);
    the errors of [`ltc_jax.fit`][].
    """
    config = job.config
    placement = training_placement(config, job.settings)
    splits = stratified_folds(train, config.folds, seed=config.seed)
    histories = []
    for k, (rest, held) in enumerate(splits, start=1):
        say(
            f"fold {k} of {config.folds}: training on {len(rest)} series, "
            f"validating on {len(held)} ..."
        )
        _, history = ltc_jax.fit(
            job.model,
            rest,
            integrator=job.integrator,
            optimizer=_optimizer(config, math.ceil(len(rest) / job.batch_size)),
            epochs=job.epochs,
            batch_size=job.batch_size,
            seed=config.seed,
            path=ltc_jax.make_input_path(rest, **job.path_options),
            validation=held,
            validation_path=ltc_jax.make_input_path(held, **job.path_options),
            patience=config.patience,
            on_failure=failure_policy(config),
            placement=placement,
            progress=ltc_jax.training.NoFitProgress(),
        )
        histories.append(history)
    epochs, means = ltc_jax.training.best_mean_epoch(histories)
    ran = (
        f"every fold ran all {job.epochs}"
        if len(means) == job.epochs
        else f"the first fold to stop did after epoch {len(means)}"
    )
    return epochs, (
        f"the lowest mean validation loss ({means[epochs - 1]:.4g}) of "
        f"{config.folds} folds of the {len(train)} training series, each trained "
        f"with this schedule over {job.epochs} epochs and stopped by --patience "
        f"{config.patience}: {ran}"
    )
