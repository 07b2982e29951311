"""Training: `train_on`, the steps over any iterable of batches, and `fit`, a
thin composition of it with epochs, validation, checkpoints and monitors."""

import math
import numbers
import os
import time
from collections.abc import Iterable, Sequence
from contextlib import nullcontext

import equinox as eqx
import optax

from ._adjoint import WindowedBacksolveAdjoint, resolve_windows
from ._batch import Batch, batches, epoch_order, make_input_path
from ._checkpoint import list_checkpoints
from ._errors import NonFiniteLossError
from ._failures import classify_failure, non_finite_leaves, non_finite_message
from ._integrator import Integrator
from ._model import AbstractSequenceModel, solves_ode
from ._monitors import (
    AbstractMonitor,
    Checkpointing,
    LearningCheck,
    Running,
    StepBudget,
    Validation,
)
from ._objective import (
    AbstractObjective,
    SupervisedLoss,
    check_metrics,
    jitted_train_step,
)
from ._parallel import AbstractPlacement, SingleDevice
from ._paths import InputPath
from ._policies import AbstractFailurePolicy, RaiseOnFailure, StepFailure
from ._progress import TqdmFitProgress
from ._solver.stability import check_stability
from ._tolerances import ToleranceSchedule
from ._train_state import TrainState, load_train_state
from ._warn import warn
from .datasets import SequenceDataset, check_same_classes


def train_on(
    state: TrainState,
    batches: Iterable[Batch],
    *,
    optimizer: optax.GradientTransformation,
    integrator: Integrator,
    objective: AbstractObjective = SupervisedLoss(),
    on_failure: AbstractFailurePolicy = RaiseOnFailure(),
    placement: AbstractPlacement = SingleDevice(),
    monitors: Sequence[AbstractMonitor] | Running = (),
) -> TrainState:
    """One optimiser step per batch of `batches`, from `state`; any iterable
    will do, a generator of windows as they arrive included.

    Each step is [`ltc_jax.training.make_train_step`][] of `objective`,
    compiled once per batch shape, optimiser, integrator and objective
    structure. A failed step (a solve that failed, a non-finite loss or
    gradient) never updates the parameters: it is classified and handed to
    `on_failure`, which raises or goes on. `monitors` see every step and
    message; they are started here and closed when the batches run out.

    **Arguments:**

    - `state`: a [`ltc_jax.training.TrainState`][] (`TrainState.create(model,
        optimizer)` to begin), placed as `placement` says.
    - `batches`: [`ltc_jax.Batch`][]es of one shape (each new shape
        compiles); `batch.y0` gives the sequences' initial states.
    - `optimizer`: the optax transformation `state.opt_state` belongs to.
    - `integrator`: an [`ltc_jax.Integrator`][].
    - `objective`: what is minimised (default
        [`ltc_jax.training.SupervisedLoss`][]; compose a penalty with
        [`ltc_jax.training.Penalized`][]).
    - `on_failure`: a failure policy (default
        [`ltc_jax.training.RaiseOnFailure`][]; or
        [`ltc_jax.training.SkipFailures`][]).
    - `placement`: where the arrays live (default
        [`ltc_jax.training.SingleDevice`][]; or
        [`ltc_jax.training.DataParallel`][]).
    - `monitors`: [`ltc_jax.training.AbstractMonitor`][]s, such as a progress
        bar ([`ltc_jax.training.TqdmFitProgress`][]) or checkpoints every few
        steps ([`ltc_jax.training.Checkpointing`][]).

    **Returns:** the new state: its `batch` and `step` advanced by the batches
    seen, the metrics of the successful steps added to its `totals`.

    **Raises:** what `on_failure` raises; `ValueError` if a batch does not fit
    the placement; otherwise as the model's solve.
    """
    started = isinstance(monitors, Running)
    with (
        nullcontext(monitors) if started else Running(monitors, state, None) as running
    ):
        for batch in batches:
            state = _step(
                state,
                batch,
                optimizer,
                integrator,
                objective,
                on_failure,
                placement,
                running,
            )
    return state


def _step(
    state, batch, optimizer, integrator, objective, on_failure, placement, running
) -> TrainState:
    """One optimiser step of `train_on`, its failure classified and handed to
    the policy."""
    batch = placement.place_batch(batch)
    failure = None
    try:
        model, opt_state, _, metrics, finite = jitted_train_step(
            state.model, state.opt_state, batch, optimizer, integrator, objective
        )
        metrics, finite = placement.to_host((metrics, finite))
        if not bool(finite):
            text = non_finite_message(state.epoch, state.batch, integrator, state.model)
            failure = StepFailure(NonFiniteLossError, text)
    except eqx.EquinoxRuntimeError as error:
        kind, text = classify_failure(
            error,
            f"at epoch {state.epoch}, batch {state.batch}",
            state.model,
            batch,
            integrator,
        )
        failure = StepFailure(kind, text, error)
    if failure is None:
        check_metrics(objective, metrics)
        metrics = {name: float(value) for name, value in metrics.items()}
        state = state.updated(model, opt_state, metrics)
    else:
        state = on_failure(state.failed(), failure)
        running.say(f"Skipped an update: {failure.message}")
    state = state.replace(batch=state.batch + 1, step=state.step + 1)
    running.step(state)
    return state


def fit(
    model: eqx.Module,
    train: SequenceDataset,
    *,
    integrator: Integrator | ToleranceSchedule,
    optimizer: optax.GradientTransformation,
    epochs: int,
    batch_size: int,
    seed: int = 0,
    path: InputPath | None = None,
    objective: AbstractObjective = SupervisedLoss(),
    validation: SequenceDataset | None = None,
    validation_path: InputPath | None = None,
    patience: int | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    on_failure: AbstractFailurePolicy = RaiseOnFailure(),
    placement: AbstractPlacement = SingleDevice(),
    progress: AbstractMonitor = TqdmFitProgress(),
    monitors: Sequence[AbstractMonitor] = (),
) -> tuple[eqx.Module, list[dict[str, int | float]]]:
    """Train `model` on `train` for `epochs` epochs: [`ltc_jax.train_on`][] over
    each epoch's batches, with the monitors below.

    Each epoch visits the data in an order determined by `(seed, epoch)` alone,
    in fixed-size batches (one compilation); the last batch of an epoch is filled
    up with weight-0 copies.

    **Checkpoints and exact resume.** With `checkpoint_dir`, the whole
    [`ltc_jax.training.TrainState`][] (the model, the optimiser state, the best
    model, the position in the data, the running totals and the history) is
    checkpointed atomically after every epoch and every `checkpoint_every`
    steps ([`ltc_jax.training.Checkpointing`][]). The data order derives from
    `seed`, the run's only source of randomness, so `resume=True`, which
    continues from the newest usable checkpoint (falling back past damaged
    ones), gives the same result as an uninterrupted run's, bit for bit on CPU.
    A checkpoint written before the training state existed (format 1) resumes
    too.

    **Failures.** A failed solve (`max_steps` reached, a step below `dtmin`, a
    state outside the field's bounds), or a non-finite loss or gradient, never
    updates the parameters, and no checkpoint is written from it; `on_failure`
    says whether training stops ([`ltc_jax.training.RaiseOnFailure`][], the
    default, with an error naming the epoch, the batch, how far the solve got
    and the steps it took) or goes on
    ([`ltc_jax.training.SkipFailures`][]). Fixed explicit steps outside the
    solver's stability region on the model's fastest decay are warned about
    before training ([`ltc_jax.training.check_stability`][]); with adaptive
    steps, solves that near `max_steps`, or use little of it, are warned about
    ([`ltc_jax.training.StepBudget`][]).

    **Validation and early stopping.** With `validation` (held-out training
    data, e.g. from [`ltc_jax.datasets.stratified_split`][]; never the test
    set), each epoch records its loss and accuracy there, training stops after
    `patience` epochs without a lower validation loss, and the model returned
    is the best epoch's ([`ltc_jax.training.Validation`][]).

    **Non-learning.** A `UserWarning`, and `learned: False` in the last record,
    when the loss of the epoch returned is not 5% below the first step's
    ([`ltc_jax.training.LearningCheck`][]).

    **Tolerance schedules and windows.** `integrator` may be a
    [`ltc_jax.training.ToleranceSchedule`][]: each epoch uses its phase's
    tolerances (recorded in the history). A windowed adjoint with
    `windows=None` gets its windows from the model's time constants and the
    longest sequence before each epoch
    ([`ltc_jax.training.resolve_windows`][]); they only grow, and are recorded.

    **Arguments:**

    - `model`: an [`ltc_jax.AbstractSequenceModel`][] (or any model
        `objective` accepts).
    - `train`: a [`ltc_jax.datasets.SequenceDataset`][]; integer labels train a
        classifier (cross-entropy), float targets a regressor (squared error).
    - `integrator`: an [`ltc_jax.Integrator`][] or a tolerance schedule.
    - `optimizer`: an optax transformation (e.g.
        [`ltc_jax.training.make_optimizer`][]).
    - `epochs`: passes over the data, at least 1; with `resume`, the run's
        total, the checkpoint's epochs included (a checkpoint past it is
        returned as it is, with a warning).
    - `batch_size`: sequences per optimiser step, at least 1.
    - `seed`: the data order.
    - `path`: `make_input_path(train, ...)` when the inputs need options
        (default: linear interpolation, JAX's default float).
    - `objective`: what is minimised (default
        [`ltc_jax.training.SupervisedLoss`][]).
    - `validation`, `validation_path` (as `path`), `patience` (`None`: never
        stop early): see above.
    - `checkpoint_dir`, `checkpoint_every`, `resume`: see above.
    - `on_failure`: a failure policy, see above.
    - `placement`: [`ltc_jax.training.SingleDevice`][] (default) or
        [`ltc_jax.training.DataParallel`][] over a mesh; `batch_size` must
        divide over its devices. Only process 0 writes checkpoints.
    - `progress`: a monitor for progress (default a tqdm bar;
        [`ltc_jax.training.NoFitProgress`][] for none).
    - `monitors`: more monitors of your own, after the built-in ones.

    **Returns:** `(model, history)`, one dict per epoch: `epoch`, `loss`,
    `accuracy` (training; `nan` for regression), `num_steps` (mean solver steps
    per batch), `max_num_steps`, `max_steps_used` (fraction of `max_steps` of the
    longest solve), `num_rejected_steps`, `failures`, `seconds` (wall clock),
    the mean of any other metric the objective reports (a penalty's, say),
    `rtol` and `atol` with adaptive steps, `windows` with the windowed
    adjoint, `validation_loss`, `validation_accuracy` and `best` with
    validation, and `learned` in the last. The model lives on this process's
    default device.

    **Raises:** what `on_failure` raises ([`ltc_jax.SolverFailureError`][],
    [`ltc_jax.DivergenceError`][], [`ltc_jax.NonFiniteLossError`][],
    [`ltc_jax.TrainingFailedError`][]); [`ltc_jax.CheckpointError`][] when
    resuming finds no usable checkpoint, or one of a model built with other
    options (each named, with its value on disk and the value asked for), or
    of another optimiser; `ValueError` for a resume with another `seed`, or
    from within an epoch with another `batch_size` or number of training
    sequences (which would skip or repeat sequences), for bad options, a
    `checkpoint_dir` that already holds
    checkpoints without `resume` (a new run there would mix its checkpoints
    with the old run's, and pruning by step would delete its own), a model
    whose parameters are not finite, unlabelled data (every label `-1`),
    labels that do not fit the model's `output_size`, `validation` whose
    classes are not the training set's
    ([`ltc_jax.datasets.check_same_classes`][]), or a `batch_size` that
    does not divide over the placement; `TypeError` for a `progress` or
    monitor that is not a monitor (`progress=False`, say), or a `train` that
    is not a `SequenceDataset` (a `StreamWindows`, whose `.dataset` is one).
    """
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        if not whole or value < 1:  # 1.5 epochs would run 2
            raise ValueError(f"{name} must be a positive int; got {value!r}.")
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs the checkpoint_dir to resume from.")
    if checkpoint_dir is not None and not resume:
        existing = list_checkpoints(checkpoint_dir)
        if existing:  # a new run would mix its checkpoints with the old run's
            raise ValueError(
                f"checkpoint_dir {os.fspath(checkpoint_dir)} already holds "
                f"{len(existing)} checkpoint(s), the newest "
                f"{os.path.basename(existing[-1])}: pass resume=True to continue "
                "that run, or give an empty folder for a new one."
            )
    if patience is not None and validation is None:
        raise ValueError("patience needs validation data to stop on.")
    for monitor in (progress, *monitors):
        if not isinstance(monitor, AbstractMonitor):
            raise TypeError(
                "progress and monitors must be ltc_jax.training.AbstractMonitor "
                f"objects; got {monitor!r} (no progress: "
                "progress=ltc_jax.training.NoFitProgress())."
            )
    placement.check_batch_size(batch_size)
    check_trainable(model, train, objective)
    field = model.vector_field if isinstance(model, AbstractSequenceModel) else None
    if field is not None:
        check_stability(_epoch_integrator(integrator, 0), field)
    path = make_input_path(train) if path is None else path
    built_in = [StepBudget()]
    if validation is not None:
        check_same_classes(train, validation, "validation")
        objective.check_data(model, validation, "validation")
        if validation_path is None:
            validation_path = make_input_path(validation)
        built_in.append(
            Validation(
                validation, validation_path, batch_size, patience, placement, objective
            )
        )
    built_in.append(LearningCheck())
    if checkpoint_dir is not None:
        directory = os.fspath(checkpoint_dir)
        meta = dict(seed=seed, batch_size=batch_size, train_size=len(train))
        built_in.append(Checkpointing(directory, checkpoint_every, placement, meta))
    state = TrainState.create(model, optimizer)
    if resume:
        state = _resumed(checkpoint_dir, state, seed, batch_size, len(train))
        if state.epoch > epochs:
            warn(
                f"The checkpoint has trained {state.epoch} epochs, more than "
                f"epochs={epochs} (the run's total, not more to train): the "
                "model is returned as the checkpoint holds it."
            )
    state = placement.place(state)
    total_steps = epochs * math.ceil(len(train) / batch_size)
    horizon = float(max(train.durations))
    with Running([*built_in, *monitors, progress], state, total_steps) as running:
        while state.epoch < epochs and not running.stop(state):
            current = _epoch_integrator(integrator, state.epoch)
            windows = max([r.get("windows") or 1 for r in state.history], default=1)
            if solves_ode(model):  # the others take no integrator's options
                current = resolve_windows(
                    current, field, horizon, dtype=path.ts.dtype, at_least=windows
                )
            order = epoch_order(seed, state.epoch, len(train))
            epoch_batches = batches(
                train, batch_size, order=order, path=path, start=state.batch
            )
            start = time.perf_counter()
            state = train_on(
                state,
                epoch_batches,
                optimizer=optimizer,
                integrator=current,
                objective=objective,
                on_failure=on_failure,
                placement=placement,
                monitors=running,
            )
            record = epoch_record(state, current, train.is_classification)
            record["seconds"] = time.perf_counter() - start
            state = state.replace(
                epoch=state.epoch + 1,
                batch=0,
                totals={},
                history=(*state.history, record),
            )
            state = running.epoch(state, current)
        state = running.finish(state)
    return placement.to_host(state.model), [dict(r) for r in state.history]


_SOLVER_STATISTICS = ("num_steps", "num_rejected_steps", "max_num_steps")
_COUNTS = ("weight", "batches", "failures", "correct", "loss")


def epoch_record(
    state: TrainState, integrator: Integrator, classification: bool
) -> dict[str, int | float]:
    """The history record of the epoch `state` is at the end of: its running
    totals as means (per sequence of the loss, the accuracy and any other
    metric; per batch of the solver's steps), with the solve's tolerances and
    windows."""
    totals = state.totals
    done = totals.get("batches", 0.0)
    # An epoch whose every solve failed took no steps worth reporting: NaN, not 0.
    longest = totals.get("max_num_steps", math.nan) if done else math.nan
    record = dict(
        epoch=state.epoch,
        loss=state.mean("loss"),
        accuracy=state.mean("correct") if classification else math.nan,
        num_steps=totals.get("num_steps", math.nan) / (done or math.nan),
        max_num_steps=longest,
        max_steps_used=longest / integrator.max_steps,
        num_rejected_steps=totals.get("num_rejected_steps", math.nan)
        / (done or math.nan),
        failures=int(totals.get("failures", 0)),
    )
    for name in totals:
        if name not in _SOLVER_STATISTICS + _COUNTS:
            record[name] = state.mean(name)
    windowed = isinstance(integrator.adjoint, WindowedBacksolveAdjoint)
    if windowed and solves_ode(state.model):  # the others ignore the integrator
        record["windows"] = integrator.adjoint.windows
    if integrator.is_adaptive and solves_ode(state.model):
        record["rtol"] = float(integrator.stepsize_controller.rtol)
        record["atol"] = float(integrator.stepsize_controller.atol)
    return record


def _resumed(
    directory, state: TrainState, seed: int, batch_size: int, train_size: int
) -> TrainState:
    """The state `fit` resumes from: the newest usable checkpoint, if it was
    written with the same `seed` and, where it stopped within an epoch, the
    same `batch_size` and number of training sequences, which with the seed
    place it in the epoch's order (checkpoints from before those were recorded
    are taken as they are)."""
    state, meta, skipped = load_train_state(directory, state)
    for text in skipped:
        warn(f"Skipped a damaged checkpoint: {text}")
    if meta["seed"] != seed:
        raise ValueError(
            f"The checkpoint was written with seed {meta['seed']}, not {seed}."
        )
    given = dict(batch_size=batch_size, train_size=train_size)
    differ = [
        f"{name} {meta[name]} there, {value} now"
        for name, value in given.items()
        if meta.get(name, value) != value
    ]
    if differ and state.batch:
        raise ValueError(
            f"The checkpoint stopped after batch {state.batch} of epoch "
            f"{state.epoch} of a run with another batching ({'; '.join(differ)}; "
            "train_size is the number of training sequences): resuming there "
            "would skip or repeat sequences. Resume with the run's batch size "
            "and data."
        )
    return state


def _epoch_integrator(
    integrator: Integrator | ToleranceSchedule, epoch: int
) -> Integrator:
    """The integrator of an epoch: a tolerance schedule's phase, or the one
    integrator."""
    return (
        integrator(epoch) if isinstance(integrator, ToleranceSchedule) else integrator
    )


def check_trainable(
    model: eqx.Module,
    data: SequenceDataset,
    objective: AbstractObjective = SupervisedLoss(),
) -> None:
    """**Raises:** `ValueError` for a model whose parameters hold NaN or
    infinity (naming them), unlabelled `data` (every label `-1`), or labels of
    `data` that `objective` does not read (`objective.check_data`)."""
    bad = non_finite_leaves(model)
    if bad:
        raise ValueError(
            "The model's parameters hold NaN or infinity before training, at "
            + ", ".join(bad)
            + ": no solve can succeed. Rebuild or reload the model."
        )
    objective.check_data(model, data, "training")
