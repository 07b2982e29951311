"""Training with optax: batches, loss, a jitted step, evaluation, checkpoints, `fit`."""

import dataclasses
import functools as ft
import hashlib
import io
import json
import math
import os
import re
import shutil
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, PyTree
from tqdm import tqdm

from ._paths import InputPath
from ._solve import Integrator, ToleranceSchedule
from .datasets import SequenceDataset


class NonFiniteLossError(FloatingPointError):
    """The training loss or gradient became NaN or infinite. The parameters were not
    updated with it; the message names the likely cause."""


class Batch(NamedTuple):
    """One fixed-size batch.

    - `path`: the batch's inputs, an [`ltc_jax.InputPath`][], built before the
        training step so the step receives the data as an argument and never
        copies it.
    - `labels`: `(batch,)` int class indices, or `(batch, k)` float targets.
    - `weights`: `(batch,)`, 1 for a real sequence and 0 for the copies that fill
        up the last batch (so every batch has one shape and compiles once).
    """

    path: InputPath
    labels: Array
    weights: Float[Array, " batch"]


def dataset_path(data: SequenceDataset, *, dtype=None, **options) -> InputPath:
    """All sequences of `data` as one [`ltc_jax.InputPath`][], validated once.

    **Arguments:** `data`; `dtype` of times and values (default: JAX's default
    float); `options`: keyword arguments of `InputPath` (`interpolation`,
    `observation_mask`, `time_since_observation`, `empty_channel_fill`).

    **Raises:** as `InputPath` (non-increasing times, infinite values, ...).
    """
    dtype = jnp.zeros(()).dtype if dtype is None else dtype
    return _build_path(
        jnp.asarray(data.ts, dtype),
        jnp.asarray(data.xs, dtype),
        jnp.asarray(data.lengths, jnp.int32),
        options,
    )


@eqx.filter_jit
def _build_path(ts, xs, lengths, options):
    return InputPath(ts, xs, lengths, **options)


@eqx.filter_jit
def _take(path: InputPath, index) -> InputPath:
    return path.take(index)


def batches(
    data: SequenceDataset,
    batch_size: int,
    *,
    order: np.ndarray | None = None,
    path: InputPath | None = None,
    start: int = 0,
) -> Iterator[Batch]:
    """Split `data` into batches of exactly `batch_size` sequences.

    **Arguments:**

    - `data`: the dataset.
    - `batch_size`: sequences per batch.
    - `order`: a permutation of `range(len(data))` (default: the stored order).
    - `path`: `dataset_path(data, ...)` (default: built with linear interpolation
        and JAX's default float).
    - `start`: index of the first batch to yield (to resume within an epoch).

    **Yields:** [`ltc_jax.Batch`][]es; the last is filled up with weight-0 copies.
    """
    n = len(data)
    order = np.arange(n) if order is None else np.asarray(order)
    if path is None:
        path = dataset_path(data)
    float_dtype = path.ts.dtype
    label_dtype = jnp.int32 if data.is_classification else float_dtype
    for first in range(start * batch_size, n, batch_size):
        index = order[first : first + batch_size]
        real = len(index)
        if real < batch_size:
            index = np.concatenate([index, np.resize(order, batch_size - real)])
        yield Batch(
            path=_take(path, jnp.asarray(index)),
            labels=jnp.asarray(data.labels[index], label_dtype),
            weights=jnp.asarray(np.arange(batch_size) < real, float_dtype),
        )


def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """The data order of one epoch: a permutation determined by `(seed, epoch)`
    alone, so a resumed run sees exactly the batches an uninterrupted one would."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def loss_and_metrics(
    model: eqx.Module, batch: Batch, integrator: Integrator
) -> tuple[Float[Array, ""], dict[str, Array]]:
    """Weighted mean loss of `model` on `batch`, and summed metrics.

    Cross-entropy on logits for integer labels, mean squared error for float
    targets.

    **Returns:** `(loss, metrics)` with `metrics` holding sums over the batch:
    `weight`, `loss` (weighted), `correct` (classification), and the solve's
    `num_steps` and `num_rejected_steps`.
    """
    trajectory = model.solve(batch.path, integrator=integrator)
    outputs = model.outputs(trajectory.ys)
    if jnp.issubdtype(batch.labels.dtype, jnp.integer):
        per_sequence = optax.softmax_cross_entropy_with_integer_labels(
            outputs, batch.labels
        )
        hit = jnp.argmax(outputs, -1).astype(batch.labels.dtype) == batch.labels
        correct = jnp.sum(jnp.where(hit, batch.weights, 0))
    else:
        per_sequence = jnp.mean((outputs - batch.labels) ** 2, axis=-1)
        correct = jnp.zeros((), batch.weights.dtype)
    weight = jnp.sum(batch.weights)
    loss_sum = jnp.sum(batch.weights * per_sequence)
    metrics = dict(
        weight=weight,
        loss=loss_sum,
        correct=correct,
        num_steps=jnp.max(trajectory.stats["num_steps"]),
        num_rejected_steps=jnp.max(trajectory.stats["num_rejected_steps"]),
    )
    return loss_sum / weight, metrics


def _is_finite_tree(tree: PyTree) -> Array:
    leaves = [
        jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if eqx.is_array(x)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _select(pred, on_true: PyTree, on_false: PyTree) -> PyTree:
    def pick(a, b):
        return jnp.where(pred, a, b) if eqx.is_array(a) else a

    return jax.tree.map(pick, on_true, on_false)


def train_step_fn(
    optimizer: optax.GradientTransformation, integrator: Integrator
) -> Callable:
    """The training step, unjitted: `step(model, opt_state, batch) -> (model,
    opt_state, loss, metrics, finite)`. [`ltc_jax.make_train_step`][] jits it;
    [`ltc_jax.compiled_memory`][] measures it.

    Gradients come from `eqx.filter_value_and_grad`, which keeps the primal solve
    alive, so a solve that exceeds `max_steps` raises instead of being pruned
    away (under plain `jax.grad` diffrax's check can be dead-code eliminated and
    the gradient is silently wrong). If the loss or any gradient is non-finite,
    `finite` is False and the model and optimiser state are returned unchanged:
    parameters are never updated with NaN or infinity. Only inexact arrays of the
    model are trained (`eqx.is_inexact_array`).
    """

    def step(model, opt_state, batch):
        (loss, metrics), grads = eqx.filter_value_and_grad(
            loss_and_metrics, has_aux=True
        )(model, batch, integrator)
        # optax's bias correction raises a float to an int32 step count, which
        # strict dtype promotion refuses; ltc_jax's own code is strict-clean.
        with jax.numpy_dtype_promotion("standard"):
            updates, new_opt_state = optimizer.update(
                grads, opt_state, eqx.filter(model, eqx.is_inexact_array)
            )
        new_model = eqx.apply_updates(model, updates)
        finite = jnp.isfinite(loss) & _is_finite_tree(grads)
        model = _select(finite, new_model, model)
        opt_state = _select(finite, new_opt_state, opt_state)
        return model, opt_state, loss, metrics, finite

    return step


@eqx.filter_jit
def _jitted_train_step(model, opt_state, batch, optimizer, integrator):
    return train_step_fn(optimizer, integrator)(model, opt_state, batch)


def make_train_step(
    optimizer: optax.GradientTransformation, integrator: Integrator
) -> Callable:
    """[`ltc_jax.train_step_fn`][] under `eqx.filter_jit`: compiled once per batch
    shape, optimiser and integrator; later calls with the same optimiser object
    and an equal integrator (a new `fit`, another seed) reuse the compilation."""
    return ft.partial(_jitted_train_step, optimizer=optimizer, integrator=integrator)


def make_optimizer(
    learning_rate: float,
    total_steps: int,
    *,
    warmup_steps: int = 0,
    clip_norm: float | None = 1.0,
    weight_decay: float = 0.0,
) -> optax.GradientTransformation:
    """Adam(W) with global-norm gradient clipping and a warmup + cosine schedule.

    **Arguments:**

    - `learning_rate`: peak learning rate.
    - `total_steps`: optimiser steps in the whole run (the schedule's length).
    - `warmup_steps`: linear warmup from 0 (default none).
    - `clip_norm`: clip gradients to this global norm (default 1; the original
        write-up advises 1-5); `None` disables clipping.
    - `weight_decay`: decoupled weight decay (default 0: plain Adam).

    Source: `optax.adamw`, `optax.clip_by_global_norm`,
    `optax.warmup_cosine_decay_schedule` (Kingma & Ba 2015; Loshchilov & Hutter 2019).
    """
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0 if warmup_steps else learning_rate,
        peak_value=learning_rate,
        warmup_steps=warmup_steps,
        decay_steps=max(total_steps, warmup_steps + 1),
        end_value=learning_rate * 0.01,
    )
    parts = [] if clip_norm is None else [optax.clip_by_global_norm(clip_norm)]
    parts.append(optax.adamw(schedule, weight_decay=weight_decay))
    return optax.chain(*parts)


def evaluate(
    model: eqx.Module,
    data: SequenceDataset,
    *,
    integrator: Integrator,
    batch_size: int = 64,
    path: InputPath | None = None,
) -> dict[str, float]:
    """Mean loss, accuracy (classification) and solver steps of `model` on `data`.

    `path`: `dataset_path(data, ...)` when the inputs need options (interpolation,
    mask channels); default: linear interpolation.

    **Returns:** `{"loss", "accuracy", "num_steps"}`; `accuracy` is `nan` for
    regression; `num_steps` is the mean number of solver steps per batch solve
    (under `"batched"` batching every sequence of a batch shares those steps).
    """
    step = _eval_step(integrator)
    totals = dict(weight=0.0, loss=0.0, correct=0.0, num_steps=0.0)
    solves = 0
    for batch in batches(data, batch_size, path=path):
        _, metrics = step(model, batch)
        for name in ("weight", "loss", "correct"):
            totals[name] += float(metrics[name])
        totals["num_steps"] += float(metrics["num_steps"])
        solves += 1
    return dict(
        loss=totals["loss"] / totals["weight"],
        accuracy=totals["correct"] / totals["weight"]
        if data.is_classification
        else math.nan,
        num_steps=totals["num_steps"] / solves,
    )


def _eval_step(integrator):
    return ft.partial(_jitted_loss_and_metrics, integrator=integrator)


@eqx.filter_jit
def _jitted_loss_and_metrics(model, batch, integrator):
    return loss_and_metrics(model, batch, integrator)


# --- checkpoints ------------------------------------------------------------------

_STATE = "state.eqx"
_META = "meta.json"


def save_checkpoint(
    directory: str | os.PathLike,
    step: int,
    tree: PyTree,
    meta: dict[str, Any],
    *,
    keep: int = 2,
) -> str:
    """Write `tree` (e.g. `(model, opt_state)`) and `meta` as checkpoint `step`,
    atomically.

    Both files go to a temporary folder that is renamed into place only when
    complete and flushed, so a crash mid-save leaves the previous checkpoints
    untouched. `meta` records the SHA-256 of the state file, so a later load can
    tell a damaged checkpoint from a good one. The newest `keep` checkpoints are
    kept.

    **Returns:** the checkpoint's folder. Serialisation: `eqx.tree_serialise_leaves`.
    """
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, f"step-{step:08d}")
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    state_path = os.path.join(tmp, _STATE)
    with open(state_path, "wb") as file:
        eqx.tree_serialise_leaves(file, tree)
        file.flush()
        os.fsync(file.fileno())
    with open(state_path, "rb") as file:
        digest = hashlib.sha256(file.read()).hexdigest()
    with open(os.path.join(tmp, _META), "w") as file:
        json.dump(dict(meta, step=step, sha256=digest), file, indent=2)
        file.flush()
        os.fsync(file.fileno())
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    for old in list_checkpoints(directory)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(directory: str | os.PathLike) -> list[str]:
    """Complete checkpoint folders under `directory`, oldest first."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    names = sorted(
        name
        for name in os.listdir(directory)
        if name.startswith("step-") and not name.endswith(".tmp")
    )
    return [os.path.join(directory, name) for name in names]


def parameter_digest(tree: PyTree) -> str:
    """SHA-256 of a pytree's serialised leaves (`eqx.tree_serialise_leaves`): equal
    digests mean bit-identical parameters."""
    buffer = io.BytesIO()
    eqx.tree_serialise_leaves(buffer, tree)
    return hashlib.sha256(buffer.getvalue()).hexdigest()


class CheckpointError(RuntimeError):
    """No usable checkpoint: missing, truncated or corrupted."""


def load_checkpoint(path: str | os.PathLike, like: PyTree) -> tuple[PyTree, dict]:
    """Load one checkpoint folder written by [`ltc_jax.save_checkpoint`][].

    **Arguments:** `path`: the folder; `like`: a pytree of the same structure
    (e.g. a freshly built `(model, opt_state)`), giving shapes and dtypes.

    **Returns:** `(tree, meta)`.

    **Raises:** [`ltc_jax.CheckpointError`][] naming the file if it is missing,
    truncated, or fails its checksum.
    """
    path = os.fspath(path)
    state_path = os.path.join(path, _STATE)
    meta_path = os.path.join(path, _META)
    try:
        with open(meta_path) as file:
            meta = json.load(file)
        with open(state_path, "rb") as file:
            blob = file.read()
    except (OSError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: unreadable checkpoint ({error}).") from error
    if hashlib.sha256(blob).hexdigest() != meta.get("sha256"):
        raise CheckpointError(
            f"{state_path}: checksum mismatch; the file is truncated or corrupted."
        )
    with open(state_path, "rb") as file:
        tree = eqx.tree_deserialise_leaves(file, like)
    return tree, meta


def load_latest_checkpoint(
    directory: str | os.PathLike, like: PyTree
) -> tuple[PyTree, dict, list[str]]:
    """Load the newest usable checkpoint under `directory`, falling back to older
    ones past any that is truncated or corrupted.

    **Returns:** `(tree, meta, skipped)`, `skipped` naming each damaged checkpoint
    passed over and why.

    **Raises:** [`ltc_jax.CheckpointError`][] if no checkpoint is usable.
    """
    skipped = []
    for path in reversed(list_checkpoints(directory)):
        try:
            tree, meta = load_checkpoint(path, like)
        except CheckpointError as error:
            skipped.append(str(error))
            continue
        return tree, meta, skipped
    detail = "; ".join(skipped) if skipped else "none found"
    raise CheckpointError(f"No usable checkpoint in {os.fspath(directory)} ({detail}).")


class SolverFailureError(RuntimeError):
    """A solve failed during training (`max_steps` reached, a step below `dtmin`,
    ...); the message names the epoch, the batch, how far the solve got, and the
    steps it took."""


class TrainingFailedError(RuntimeError):
    """Training stopped after too many failed steps in a row (`on_failure="skip"`)."""


def _new_totals() -> dict[str, float]:
    return dict(
        weight=0.0,
        loss=0.0,
        correct=0.0,
        num_steps=0.0,
        rejected=0.0,
        max_num_steps=0.0,
        batches=0.0,
        failures=0.0,
    )


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
    progress: bool = True,
) -> tuple[eqx.Module, list[dict[str, int | float]]]:
    """Train `model` on `train` for `epochs` epochs.

    Each epoch visits the data in the order [`ltc_jax.epoch_order`][]`(seed,
    epoch)`, in fixed-size batches (one compilation). A tqdm bar shows the loss
    and accuracy.

    **Checkpoints and exact resume.** With `checkpoint_dir`, the model, the
    optimiser state and the position in the data (epoch, batch; the data order
    derives from `seed`, the run's only source of randomness) are checkpointed
    atomically after every epoch and every `checkpoint_every` optimiser steps,
    with the partial epoch's running totals. `resume=True` continues from the
    newest usable checkpoint (falling back past damaged ones): the result is the
    same as an uninterrupted run's, bit for bit on CPU.

    **Failures.** A failed solve (`max_steps` reached, a step below `dtmin`) or a
    non-finite loss or gradient never updates the parameters. With
    `on_failure="raise"` (default) training stops with an error naming the epoch,
    the batch, how far the solve got and the steps it took; with `"skip"` the
    update is dropped, counted and logged, and training stops after
    `max_consecutive_failures` failures in a row. With adaptive steps, a warning
    is issued when a solve uses more than 90% of `max_steps`.

    **Tolerance schedules.** `integrator` may be a [`ltc_jax.ToleranceSchedule`][]:
    each epoch then uses its phase's tolerances (recorded in the history).

    **Arguments:** `model`; `train`; `integrator`; `optimizer` (an optax
    transformation, e.g. from [`ltc_jax.make_optimizer`][]); `epochs`;
    `batch_size`; `seed` (data order); `path`: `dataset_path(train, ...)` when
    the inputs need options (default: linear interpolation);
    `checkpoint_dir`, `checkpoint_every`, `resume`; `on_failure`,
    `max_consecutive_failures`; `progress` (show the bar).

    **Returns:** `(model, history)`, one dict per epoch: `epoch`, `loss`,
    `accuracy`, `num_steps` (mean solver steps per batch), `max_num_steps`,
    `max_steps_used` (fraction of `max_steps` of the longest solve),
    `num_rejected_steps`, `failures`, `seconds`, and `rtol`, `atol` with
    adaptive steps.

    **Raises:** [`ltc_jax.NonFiniteLossError`][], [`ltc_jax.SolverFailureError`][]
    (with `on_failure="raise"`), [`ltc_jax.TrainingFailedError`][] (with
    `"skip"`), [`ltc_jax.CheckpointError`][] when resuming finds no usable
    checkpoint, `ValueError` for bad options.
    """
    if on_failure not in ("raise", "skip"):
        raise ValueError(f"on_failure must be 'raise' or 'skip'; got {on_failure!r}.")
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs the checkpoint_dir to resume from.")
    if checkpoint_every is not None and checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be positive; got {checkpoint_every}.")
    schedule = integrator if isinstance(integrator, ToleranceSchedule) else None
    step_fns = {}
    path = dataset_path(train) if path is None else path
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    steps_per_epoch = math.ceil(len(train) / batch_size)
    position = dict(epoch=0, batch=0, history=[], totals=_new_totals(), consecutive=0)
    if resume:
        (model, opt_state), meta, skipped = load_latest_checkpoint(
            checkpoint_dir, (model, opt_state)
        )
        for message in skipped:
            warnings.warn(f"Skipped a damaged checkpoint: {message}", stacklevel=2)
        if meta["seed"] != seed:
            raise ValueError(
                f"The checkpoint was written with seed {meta['seed']}, not {seed}."
            )
        position = {key: meta[key] for key in position}

    def save():
        if checkpoint_dir is not None:
            step = position["epoch"] * steps_per_epoch + position["batch"]
            save_checkpoint(
                checkpoint_dir, step, (model, opt_state), dict(position, seed=seed)
            )

    done = position["epoch"] * steps_per_epoch + position["batch"]
    bar = tqdm(
        total=epochs * steps_per_epoch, initial=done, disable=not progress, unit="step"
    )
    history = position["history"]
    while position["epoch"] < epochs:
        epoch, totals = position["epoch"], position["totals"]
        current = integrator if schedule is None else schedule(epoch)
        phase = 0 if schedule is None else schedule.phase(epoch)
        if phase not in step_fns:
            step_fns[phase] = make_train_step(optimizer, current)
        step_fn = step_fns[phase]
        start = time.perf_counter()
        order = epoch_order(seed, epoch, len(train))
        for batch in batches(
            train, batch_size, order=order, path=path, start=position["batch"]
        ):
            index = position["batch"]
            try:
                new_model, new_opt_state, _, metrics, finite = step_fn(
                    model, opt_state, batch
                )
                failure = None if bool(finite) else "non-finite"
            except eqx.EquinoxRuntimeError as error:
                failure, cause = "solver", error
            if failure is None:
                model, opt_state = new_model, new_opt_state
                position["consecutive"] = 0
                _accumulate(totals, metrics)
            else:
                if failure == "non-finite":
                    message = _non_finite_message(epoch, index, current)
                    if on_failure == "raise":
                        bar.close()
                        raise NonFiniteLossError(message)
                else:
                    message = _solver_failure_message(
                        epoch, index, model, batch, current, cause
                    )
                    if on_failure == "raise":
                        bar.close()
                        raise SolverFailureError(message) from cause
                totals["failures"] += 1
                position["consecutive"] += 1
                bar.write(f"Skipped an update: {message}")
                if position["consecutive"] >= max_consecutive_failures:
                    bar.close()
                    raise TrainingFailedError(
                        f"Training stopped after {position['consecutive']} failed "
                        f"steps in a row. The last: {message}"
                    )
            position["batch"] += 1
            bar.update()
            if totals["weight"] > 0:
                bar.set_postfix(
                    epoch=epoch,
                    loss=f"{totals['loss'] / totals['weight']:.4f}",
                    acc=f"{totals['correct'] / totals['weight']:.3f}",
                )
            step = epoch * steps_per_epoch + position["batch"]
            if checkpoint_every and step % checkpoint_every == 0:
                save()
        record = _epoch_record(epoch, totals, train, current)
        record["seconds"] = time.perf_counter() - start
        if current.is_adaptive:
            record["rtol"] = float(current.stepsize_controller.rtol)
            record["atol"] = float(current.stepsize_controller.atol)
        if current.is_adaptive and record["max_steps_used"] > 0.9:
            message = (
                f"Epoch {epoch}: a solve took {int(totals['max_num_steps'])} of "
                f"max_steps={current.max_steps} steps; raise max_steps before it "
                "becomes an error."
            )
            bar.write(message)
            warnings.warn(message, stacklevel=2)
        history.append(record)
        position.update(epoch=epoch + 1, batch=0, totals=_new_totals())
        save()
    bar.close()
    return model, history


def _accumulate(totals: dict[str, float], metrics: dict[str, Array]) -> None:
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
    return dict(
        epoch=epoch,
        loss=totals["loss"] / weight,
        accuracy=totals["correct"] / weight if train.is_classification else math.nan,
        num_steps=totals["num_steps"] / batches_done,
        max_num_steps=totals["max_num_steps"],
        max_steps_used=totals["max_num_steps"] / integrator.max_steps,
        num_rejected_steps=totals["rejected"] / batches_done,
        failures=int(totals["failures"]),
    )


def failure_reason(error: BaseException) -> str:
    """The one-line reason of a failed solve, from the runtime error diffrax raises
    through equinox (`equinox.EquinoxRuntimeError` under `eqx.filter_jit`, a
    `jax.errors.JaxRuntimeError` wrapping it under `jax.jit`), e.g. "The maximum
    number of solver steps was reached. Try increasing `max_steps`."; for any other
    error, its first line."""
    text = str(error)
    found = re.search(r"EquinoxRuntimeError: (.+)", text)
    if found:
        return found.group(1).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _solver_failure_message(epoch, index, model, batch, integrator, cause) -> str:
    """Re-run the batch's forward solve without raising, to say how far it got."""
    quiet = dataclasses.replace(integrator, throw=False)
    trajectory = eqx.filter_jit(lambda m, p: m.solve(p, integrator=quiet))(
        model, batch.path
    )
    where = f"at epoch {epoch}, batch {index}"
    result = trajectory.result
    failed = np.atleast_1d(np.asarray(result != diffrax.RESULTS.successful))
    if not failed.any():
        return (
            f"The backward (adjoint) solve failed {where}: {failure_reason(cause)} "
            "The forward "
            "solve succeeds; give the reverse solve more max_steps or looser "
            "tolerances, or use adjoint='checkpoint'."
        )
    if failed.size > 1:  # one result per sequence under vmap batching
        result = jax.tree.map(lambda value: value[np.argmax(failed)], result)
    reason = diffrax.RESULTS[result]
    steps = int(np.max(trajectory.stats["num_steps"]))
    duration = np.asarray(batch.path.t_end - batch.path.t_start)
    reached = np.asarray(trajectory.t_reached)
    slowest = int(np.argmax(duration - reached))
    return (
        f"The solve failed {where}: {reason} After {steps} steps "
        f"(max_steps={integrator.max_steps}) sequence {slowest} of the batch was "
        f"integrated to {reached[slowest]:.6g} of its {duration[slowest]:.6g} time "
        "units. Raise max_steps, loosen rtol/atol, lower dtmin, or check the data."
    )


def _non_finite_message(epoch: int, index: int, integrator: Integrator) -> str:
    solver = type(integrator.solver).__name__
    if integrator.adjoint_name == "backsolve":
        cause = (
            "With adjoint='backsolve' a likely cause is the reverse solve: it "
            "re-integrates the state backwards in time, and a dissipative system "
            "(an LTC, whose units decay at rate 1/tau + f) is expansive backwards, "
            "so round-off grows like exp(duration / tau). Use adjoint='checkpoint', "
            "float64 (--x64), larger tau_min, or shorter sequences."
        )
    elif integrator.is_adaptive:
        cause = (
            "With adaptive steps this points at the model itself (exploding weights "
            "or inputs): lower the learning rate or check the data."
        )
    else:
        cause = (
            f"With fixed steps (dt0={integrator.dt0}) the usual cause is a step "
            f"outside {solver}'s stability region: an explicit solver needs roughly "
            "dt0 * (1/tau + 1) < 2, and tau can be as small as tau_min. Use "
            "adaptive steps (rtol/atol), a smaller dt0, or a larger tau_min."
        )
    return (
        f"The training loss or its gradient became NaN or infinite at epoch {epoch}, "
        f"batch {index} (solver {solver}). The parameters were not updated with it. "
        + cause
    )
