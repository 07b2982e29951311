"""`fit`: the training loop, its failure policy, validation, exact resume."""

import math
import os
import time
import warnings

import diffrax
import equinox as eqx
import jax
import numpy as np
import optax
from jax.sharding import Mesh

from ._adjoint import WindowedBacksolveAdjoint
from ._batch import batches, check_labels, epoch_order, make_input_path
from ._checkpoint import load_latest_checkpoint, save_checkpoint
from ._errors import NonFiniteLossError, TrainingFailedError
from ._evaluate import evaluate
from ._failures import classify_failure, non_finite_leaves, non_finite_message
from ._integrator import (
    Integrator,
    ToleranceSchedule,
    check_stability,
    resolve_windows,
)
from ._loss import jitted_train_step
from ._parallel import check_divides, replicate, shard_batch, to_host
from ._paths import InputPath
from ._progress import AbstractFitProgress, TqdmFitProgress
from .datasets import SequenceDataset


_DEFAULT_PROGRESS = TqdmFitProgress()


# What an epoch sums over its batches (`_accumulate`): the loss's weight, the
# loss and the correct predictions, the solver steps (all, rejected, and the most
# in one batch), the batches done and the batches that failed.
_TOTALS = (
    "weight",
    "loss",
    "correct",
    "num_steps",
    "rejected",
    "max_num_steps",
    "batches",
    "failures",
)


def _new_totals() -> dict[str, float]:
    return dict.fromkeys(_TOTALS, 0.0)


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
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    on_failure: str = "raise",
    max_consecutive_failures: int = 10,
    validation: SequenceDataset | None = None,
    validation_path: InputPath | None = None,
    patience: int | None = None,
    mesh: Mesh | None = None,
    progress: AbstractFitProgress = _DEFAULT_PROGRESS,
) -> tuple[eqx.Module, list[dict[str, int | float]]]:
    """Train `model` on `train` for `epochs` epochs.

    Each epoch visits the data in an order determined by `(seed, epoch)` alone,
    in fixed-size batches (one compilation); the last batch of an epoch is filled
    up with weight-0 copies.

    **Checkpoints and exact resume.** With `checkpoint_dir`, the model, the
    optimiser state and the position in the data (epoch, batch; the data order
    derives from `seed`, the run's only source of randomness) are checkpointed
    atomically after every epoch and every `checkpoint_every` optimiser steps,
    with the partial epoch's running totals. `resume=True` continues from the
    newest usable checkpoint (falling back past damaged ones): the result is the
    same as an uninterrupted run's, bit for bit on CPU.

    **Failures.** A failed solve (`max_steps` reached, a step below `dtmin`, a
    state outside the field's bounds), or a non-finite loss or gradient, never
    updates the parameters, and no checkpoint is written from it. Fixed explicit
    steps outside the solver's stability region on the model's fastest decay
    are warned about before training ([`ltc_jax.check_stability`][]). With
    `on_failure="raise"` (default) training stops with an error naming the
    epoch, the batch, how far the solve got and the steps it took; with
    `"skip"` the update is dropped, counted and reported, and training stops
    after `max_consecutive_failures` failures in a row. With adaptive steps, a
    `UserWarning` is issued when a solve uses more than 90% of `max_steps`, and
    when `"full"` or `"checkpoint"` (whose memory and time `max_steps` sizes)
    use under a tenth of it.

    **Validation and early stopping.** With `validation` (a held-out part of the
    training data, e.g. from [`ltc_jax.datasets.stratified_split`][]; never the
    test set), each epoch ends with its loss and accuracy there
    (`validation_loss`, `validation_accuracy` in the history); training stops
    after `patience` epochs without a lower validation loss (`None`: never
    early), and the model returned is the one of the best epoch (`best` marks
    it in the history). Checkpoints hold the best model too, so resuming
    restores the same choice.

    **Non-learning.** If the training loss of the epoch returned (the best with
    `validation`, else the last) is not at least 5% below
    the loss of the first step, a `UserWarning` says so (and the last record's
    `learned` is `False`): a model whose final state barely depends on its input
    trains at chance without any other sign.

    **Several devices and hosts.** With `mesh` (from [`ltc_jax.data_mesh`][]),
    each batch is split over the mesh's `"data"` axis and the model and
    optimiser state are replicated; the step is the same program, compiled
    for those placements, with XLA reducing the gradient over the devices.
    The history's metrics are the global batch's, and the parameters those of
    one device's run on the same batches, to round-off in the order of the
    reduction. Under `jax.distributed` (several processes, each holding the
    data and building the same batches), each process places only the rows its
    devices hold, and only process 0 writes checkpoints. The model returned
    lives on this process's default device.

    **Tolerance schedules.** `integrator` may be a [`ltc_jax.ToleranceSchedule`][]:
    each epoch then uses its phase's tolerances (recorded in the history).

    **The windowed adjoint** with `windows=None` gets its number of windows from
    the model's time constants and the longest sequence of `train`
    ([`ltc_jax.resolve_windows`][]) before each epoch; it only grows, and is
    recorded in the history.

    **Arguments:**

    - `model`: an [`ltc_jax.LTC`][] (anything [`ltc_jax.loss_and_metrics`][]
        accepts).
    - `train`: a [`ltc_jax.datasets.SequenceDataset`][]; integer labels train a
        classifier (cross-entropy), float targets a regressor (squared error).
    - `integrator`: an [`ltc_jax.Integrator`][] or a tolerance schedule.
    - `optimizer`: an optax transformation (e.g. [`ltc_jax.make_optimizer`][]).
    - `epochs`: passes over the data, at least 1.
    - `batch_size`: sequences per optimiser step, at least 1.
    - `seed`: the data order.
    - `path`: `make_input_path(train, ...)` when the inputs need options
        (default: linear interpolation, JAX's default float).
    - `checkpoint_dir`, `checkpoint_every`, `resume`: see above.
    - `on_failure`: `"raise"` or `"skip"`; `max_consecutive_failures`: see above.
    - `validation`, `validation_path` (as `path`, for `validation`), `patience`:
        see above.
    - `mesh`: a device mesh with a `"data"` axis, or `None` (default) for one
        device; `batch_size` must be a multiple of its size.
    - `progress`: where progress goes (default a tqdm bar; `NoFitProgress()`
        for none).

    **Returns:** `(model, history)`, one dict per epoch: `epoch`, `loss`,
    `accuracy` (training; `nan` for regression), `num_steps` (mean solver steps
    per batch), `max_num_steps`, `max_steps_used` (fraction of `max_steps` of the
    longest solve), `num_rejected_steps`, `failures`, `seconds` (wall clock),
    `rtol` and `atol` with adaptive steps, and `windows` with the windowed
    adjoint.

    **Raises:** [`ltc_jax.NonFiniteLossError`][], [`ltc_jax.DivergenceError`][],
    [`ltc_jax.SolverFailureError`][] (with `on_failure="raise"`),
    [`ltc_jax.TrainingFailedError`][] (with `"skip"`),
    [`ltc_jax.CheckpointError`][] when resuming finds no usable checkpoint,
    `ValueError` for bad options, a model whose parameters are not finite,
    labels that do not fit the model's `output_size`, or a `batch_size` that
    does not divide over the mesh.
    """
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if value < 1:
            raise ValueError(f"{name} must be positive; got {value}.")
    if on_failure not in ("raise", "skip"):
        raise ValueError(f"on_failure must be 'raise' or 'skip'; got {on_failure!r}.")
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs the checkpoint_dir to resume from.")
    if checkpoint_every is not None and checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be positive; got {checkpoint_every}.")
    if patience is not None and patience < 1:
        raise ValueError(f"patience must be at least 1; got {patience}.")
    if patience is not None and validation is None:
        raise ValueError("patience needs validation data to stop on.")
    if mesh is not None:
        check_divides(batch_size, mesh)
    if max_consecutive_failures < 1:
        raise ValueError(
            "max_consecutive_failures must be positive; got "
            f"{max_consecutive_failures}."
        )
    bad = non_finite_leaves(model)
    if bad:
        raise ValueError(
            "The model's parameters hold NaN or infinity before training, at "
            + ", ".join(bad)
            + ": no solve can succeed. Rebuild or reload the model."
        )
    check_labels(model, train)
    schedule = integrator if isinstance(integrator, ToleranceSchedule) else None
    if hasattr(model, "cell"):
        check_stability(
            integrator if schedule is None else schedule(0), model.cell, stacklevel=3
        )
    path = make_input_path(train) if path is None else path
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    steps_per_epoch = math.ceil(len(train) / batch_size)
    if validation is not None:
        check_labels(model, validation)
        validation_path = (
            make_input_path(validation) if validation_path is None else validation_path
        )
    position = dict(
        epoch=0,
        batch=0,
        history=[],
        totals=_new_totals(),
        consecutive=0,
        best_epoch=None,
        best_loss=None,
        initial_loss=None,
    )
    best_model = model
    if resume:
        (model, opt_state, best_model), meta, skipped = load_latest_checkpoint(
            checkpoint_dir, (model, opt_state, model)
        )
        for text in skipped:
            warnings.warn(f"Skipped a damaged checkpoint: {text}", stacklevel=2)
        if meta["seed"] != seed:
            raise ValueError(
                f"The checkpoint was written with seed {meta['seed']}, not {seed}."
            )
        position = {key: meta[key] for key in position}
    if mesh is not None:
        model, opt_state, best_model = replicate((model, opt_state, best_model), mesh)

    def save():
        if checkpoint_dir is not None and jax.process_index() == 0:
            step = position["epoch"] * steps_per_epoch + position["batch"]
            save_checkpoint(
                checkpoint_dir,
                step,
                to_host((model, opt_state, best_model)),
                dict(position, seed=seed),
            )

    done = position["epoch"] * steps_per_epoch + position["batch"]
    state = progress.init(epochs * steps_per_epoch, done)
    history = position["history"]
    horizon = float(np.max(train.durations))
    windows = max([h.get("windows", 1) for h in history], default=1)
    try:
        while position["epoch"] < epochs and not _stopped(position, patience):
            epoch, totals = position["epoch"], position["totals"]
            current = integrator if schedule is None else schedule(epoch)
            current = resolve_windows(
                current,
                getattr(model, "cell", None),
                horizon,
                dtype=path.ts.dtype,
                at_least=windows,
            )
            start = time.perf_counter()
            order = epoch_order(seed, epoch, len(train))
            for batch in batches(
                train, batch_size, order=order, path=path, start=position["batch"]
            ):
                index = position["batch"]
                failure = None
                if mesh is not None:
                    batch = shard_batch(batch, mesh, batch_size)
                try:
                    new_model, new_opt_state, _, metrics, finite = jitted_train_step(
                        model, opt_state, batch, optimizer, current
                    )
                    if mesh is not None:
                        metrics, finite = to_host((metrics, finite))
                    if not bool(finite):
                        failure = non_finite_message(epoch, index, current)
                        failure_type, cause = NonFiniteLossError, None
                except eqx.EquinoxRuntimeError as error:
                    failure_type, failure = classify_failure(
                        error, epoch, index, model, batch, current
                    )
                    cause = error
                if failure is None:
                    if position["initial_loss"] is None:
                        position["initial_loss"] = float(metrics["loss"]) / float(
                            metrics["weight"]
                        )
                    model, opt_state = new_model, new_opt_state
                    position["consecutive"] = 0
                    _accumulate(totals, metrics)
                else:
                    if on_failure == "raise":
                        raise failure_type(failure) from cause
                    totals["failures"] += 1
                    position["consecutive"] += 1
                    progress.message(state, f"Skipped an update: {failure}")
                    if position["consecutive"] >= max_consecutive_failures:
                        raise TrainingFailedError(
                            f"Training stopped after {position['consecutive']} "
                            f"failed steps in a row. The last: {failure}"
                        )
                position["batch"] += 1
                weight = totals["weight"] or math.nan
                progress.step(
                    state,
                    epoch,
                    totals["loss"] / weight,
                    totals["correct"] / weight,
                )
                step = epoch * steps_per_epoch + position["batch"]
                if checkpoint_every and step % checkpoint_every == 0:
                    save()
            record = _epoch_record(epoch, totals, train, current)
            record["seconds"] = time.perf_counter() - start
            if isinstance(current.adjoint, WindowedBacksolveAdjoint):
                windows = record["windows"] = current.adjoint.windows
            if current.is_adaptive and getattr(model, "solves_ode", True):
                record["rtol"] = float(current.stepsize_controller.rtol)
                record["atol"] = float(current.stepsize_controller.atol)
                if record["max_steps_used"] > 0.9:  # False for NaN
                    text = (
                        f"Epoch {epoch}: a solve took {int(totals['max_num_steps'])} "
                        f"of max_steps={current.max_steps} steps; raise max_steps "
                        "before it becomes an error."
                    )
                    progress.message(state, text)
                    warnings.warn(text, stacklevel=2)
                sized_by_max_steps = isinstance(
                    current.adjoint, diffrax.RecursiveCheckpointAdjoint
                )
                if epoch == 0 and sized_by_max_steps and record["max_steps_used"] < 0.1:
                    text = (
                        f"The solves took at most {int(totals['max_num_steps'])} of "
                        f"max_steps={current.max_steps} steps; adjoint="
                        f"{current.adjoint_name!r} allocates memory, and spends "
                        "time, for max_steps: lower it to a small multiple of the "
                        "steps taken."
                    )
                    progress.message(state, text)
                    warnings.warn(text, stacklevel=2)
            if validation is not None:
                result = evaluate(
                    model,
                    validation,
                    integrator=current,
                    batch_size=batch_size,
                    path=validation_path,
                    mesh=mesh,
                )
                record["validation_loss"] = result["loss"]
                record["validation_accuracy"] = result["accuracy"]
                best = position["best_loss"]
                if math.isfinite(result["loss"]) and (
                    best is None or result["loss"] < best
                ):
                    position.update(best_epoch=epoch, best_loss=result["loss"])
                    best_model = model
            history.append(record)
            position.update(epoch=epoch + 1, batch=0, totals=_new_totals())
            save()
    finally:
        progress.close(state)
    if validation is not None and history:
        for record in history:
            record["best"] = record["epoch"] == position["best_epoch"]
        model = best_model
    if mesh is not None:
        model = to_host(model)
    if history and position["initial_loss"] is not None:
        kept = [h for h in history if h.get("best")] or history[-1:]  # returned
        learned = kept[0]["loss"] < 0.95 * position["initial_loss"]
        history[-1]["learned"] = bool(learned)  # read by the main job
        if not learned:
            warnings.warn(
                "Training did not lower the loss by 5%: "
                f"{position['initial_loss']:.4g} at the first step, "
                f"{kept[0]['loss']:.4g} in the epoch kept. The "
                "model may not see its input (check the time scale: tau against the "
                "sequences' durations) or the learning rate may be too low.",
                stacklevel=2,
            )
    return model, history


def _stopped(position: dict, patience: int | None) -> bool:
    """Whether early stopping has ended training: `patience` epochs have passed
    since the best validation loss."""
    if patience is None or position["best_epoch"] is None:
        return False
    return position["epoch"] - 1 - position["best_epoch"] >= patience


def _accumulate(totals: dict[str, float], metrics: dict[str, jax.Array]) -> None:
    totals["weight"] += float(metrics["weight"])
    totals["loss"] += float(metrics["loss"])
    totals["correct"] += float(metrics["correct"])
    totals["num_steps"] += float(metrics["num_steps"])
    totals["rejected"] += float(metrics["num_rejected_steps"])
    totals["max_num_steps"] = max(totals["max_num_steps"], float(metrics["num_steps"]))
    totals["batches"] += 1


def _epoch_record(epoch, totals, train, integrator) -> dict[str, int | float]:
    weight = totals["weight"] or math.nan
    batches_done = totals["batches"] or math.nan
    # An epoch whose every solve failed took no steps worth reporting: NaN, not 0.
    longest = totals["max_num_steps"] if totals["batches"] else math.nan
    return dict(
        epoch=epoch,
        loss=totals["loss"] / weight,
        accuracy=totals["correct"] / weight if train.is_classification else math.nan,
        num_steps=totals["num_steps"] / batches_done,
        max_num_steps=longest,
        max_steps_used=longest / integrator.max_steps,
        num_rejected_steps=totals["rejected"] / batches_done,
        failures=int(totals["failures"]),
    )
