"""The training state: one typed pytree with everything a run has learned and
where it stands, which checkpoints hold and resuming restores."""

import math
import os
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import optax
from jaxtyping import PyTree

from ._checkpoint import (
    load_latest_checkpoint,
    remove_interrupted_saves,
    save_checkpoint,
)
from ._errors import CheckpointError


FORMAT = 2
"""The checkpoint format `save_train_state` writes. Format 1 (before the
training state) held the same arrays with a `position` of other names;
`load_train_state` reads both."""

_POSITION = ("epoch", "batch", "totals", "history", "first_loss", "failures_in_a_row")
"""The fields of a `TrainState` that a checkpoint's metadata holds."""


class TrainState(eqx.Module):
    """Everything a training run carries from one step to the next.

    Its arrays are the model, the optimiser state and the best model so far;
    the rest is plain Python (static fields), read by the monitors and written
    to a checkpoint's metadata. [`ltc_jax.train_on`][] returns a new one after
    every pass over its batches; [`ltc_jax.fit`][] checkpoints it and resumes
    from it. Build the first with `TrainState.create(model, optimizer)`.

    **Fields:**

    - `model`: the model being trained.
    - `opt_state`: the optimiser's state.
    - `best_model`: the model of the best validation epoch so far (the initial
        model until there is one, and without validation).
    - `epoch`: epochs completed (static int).
    - `batch`: batches processed in the current epoch (static int).
    - `step`: steps attempted in the whole run, skipped ones included
        (static int).
    - `totals`: the current epoch's running sums (static dict of floats): every
        metric key the objective returns, summed; `max_num_steps`, the most
        solver steps of one batch; `batches`, the successful steps; `failures`,
        the skipped ones.
    - `history`: one record per completed epoch (static tuple of dicts).
    - `first_loss`: the loss of the run's first successful step, or `None`.
    - `failures_in_a_row`: the failed steps since the last successful one.
    """

    model: PyTree
    opt_state: PyTree
    best_model: PyTree
    epoch: int = eqx.field(static=True, default=0)
    batch: int = eqx.field(static=True, default=0)
    step: int = eqx.field(static=True, default=0)
    totals: dict = eqx.field(static=True, default_factory=dict)
    history: tuple = eqx.field(static=True, default=())
    first_loss: float | None = eqx.field(static=True, default=None)
    failures_in_a_row: int = eqx.field(static=True, default=0)

    @classmethod
    def create(
        cls, model: eqx.Module, optimizer: optax.GradientTransformation
    ) -> "TrainState":
        """The state before the first step: the optimiser initialised on the
        model's inexact arrays (`eqx.is_inexact_array`; masks and static
        structure are never trained)."""
        opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
        return cls(model, opt_state, model)

    def replace(self, **changes: Any) -> "TrainState":
        """A copy with the fields named changed (the class is immutable)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return TrainState(**(fields | changes))

    def updated(self, model, opt_state, metrics: dict[str, float]) -> "TrainState":
        """The state after a successful step whose objective reported
        `metrics` (host floats): the new model and optimiser state, the metrics
        added to the totals."""
        totals = dict(self.totals)
        for name, value in metrics.items():
            totals[name] = totals.get(name, 0.0) + value
        totals["batches"] = totals.get("batches", 0.0) + 1
        if "num_steps" in metrics:  # an objective of one's own may not report it
            steps = metrics["num_steps"]
            totals["max_num_steps"] = max(totals.get("max_num_steps", 0.0), steps)
        first = self.first_loss
        if first is None:
            first = metrics["loss"] / metrics["weight"]
        return self.replace(
            model=model,
            opt_state=opt_state,
            totals=totals,
            first_loss=first,
            failures_in_a_row=0,
        )

    def failed(self) -> "TrainState":
        """The state after a step whose update was dropped."""
        totals = dict(self.totals)
        totals["failures"] = totals.get("failures", 0.0) + 1
        return self.replace(totals=totals, failures_in_a_row=self.failures_in_a_row + 1)

    def mean(self, name: str) -> float:
        """The current epoch's total of a metric over its total weight (`nan`
        before its first successful step)."""
        weight = self.totals.get("weight", 0.0) or math.nan
        return self.totals.get(name, math.nan) / weight


def save_train_state(
    directory: str | os.PathLike, state: TrainState, **meta: Any
) -> str:
    """Checkpoint `state` as `step-<state.step>` under `directory`, atomically
    ([`ltc_jax.training.save_checkpoint`][]): its arrays in the state file, the
    rest and `meta` (JSON-serialisable, such as the run's seed) in the metadata.

    **Returns:** the checkpoint's folder."""
    arrays = (state.model, state.opt_state, state.best_model)
    position = {name: getattr(state, name) for name in _POSITION}
    position["history"] = list(state.history)
    meta = dict(meta, format=FORMAT, **position)
    meta[_OPTIMIZER] = _array_shapes(state.opt_state)
    return save_checkpoint(directory, state.step, arrays, meta)


_OPTIMIZER = "optimizer_arrays"
"""The metadata key of the shapes of the optimiser state's arrays, in leaf
order (absent from checkpoints written before it)."""


def _array_shapes(tree: PyTree) -> list[list[int]]:
    """The shapes of `tree`'s array leaves, in leaf order, as JSON lists."""
    return [list(leaf.shape) for leaf in jax.tree.leaves(tree) if eqx.is_array(leaf)]


def _check_optimizer(like: TrainState) -> Callable[[dict, str], None]:
    """A `check` for `load_latest_checkpoint`: refuses a checkpoint whose
    optimiser state has other arrays than `like`'s optimiser makes, before the
    arrays are read (they would be read into the model's places, and the error
    would name a model's array)."""

    def check(meta: dict, folder: str) -> None:
        saved, given = meta.get(_OPTIMIZER), _array_shapes(like.opt_state)
        if saved is not None and saved != given:
            raise CheckpointError(
                f"{folder}: its optimiser state holds {_arrays(saved)}; the "
                f"optimiser given makes {_arrays(given)}. Resume with the "
                "optimiser the run was started with (the same transformations "
                "in the same order)."
            )

    return check


def _arrays(shapes: list[list[int]], shown: int = 6) -> str:
    """How many arrays, and the first `shown` of their shapes."""
    if not shapes:
        return "no arrays"
    text = ", ".join(str(tuple(shape)) for shape in shapes[:shown])
    more = len(shapes) - shown
    return f"{len(shapes)} arrays, of shapes {text}" + (
        f" and {more} more" if more > 0 else ""
    )


def _position_from_format_1(meta: dict) -> dict:
    """A format-1 checkpoint's position (written before the training state) in
    the names of format 2."""
    totals = dict(meta["totals"])
    totals["num_rejected_steps"] = totals.pop("rejected", 0.0)
    return dict(
        epoch=meta["epoch"],
        batch=meta["batch"],
        totals=totals,
        history=meta["history"],
        first_loss=meta["initial_loss"],
        failures_in_a_row=meta["consecutive"],
    )


def load_train_state(
    directory: str | os.PathLike, like: TrainState
) -> tuple[TrainState, dict, list[str]]:
    """The newest usable checkpoint under `directory`, as a
    [`ltc_jax.training.TrainState`][] shaped like `like` (a freshly created
    state of the same model and optimiser), falling back past damaged
    checkpoints. The run resuming is the directory's writer: the temporary
    folders of saves that were interrupted (`step-*.tmp`) are removed first.

    **Returns:** `(state, meta, skipped)`: the state, the checkpoint's metadata,
    and a line for each damaged checkpoint passed over.

    **Raises:** [`ltc_jax.CheckpointError`][] if no checkpoint is usable, the
    newest one has a format this version cannot read (named in the message),
    its model was built with other options than `like.model` (each named,
    with both values: build the model with the saved options), or its
    optimiser state has other arrays than `like.opt_state` (both named: resume
    with the run's optimiser).
    """
    remove_interrupted_saves(directory)
    arrays = (like.model, like.opt_state, like.best_model)
    (model, opt_state, best_model), meta, skipped = load_latest_checkpoint(
        directory, arrays, check=_check_optimizer(like)
    )
    version = meta.get("format", 1)
    if version == 1 and "consecutive" in meta:
        position = _position_from_format_1(meta)
    elif version == FORMAT:
        position = {key: meta[key] for key in _POSITION}
    else:
        raise CheckpointError(
            f"{os.fspath(directory)}: checkpoint format {version!r} is not one "
            f"this version of ltc_jax reads (formats 1 and {FORMAT})."
        )
    position["history"] = tuple(position["history"])
    state = like.replace(
        model=model,
        opt_state=opt_state,
        best_model=best_model,
        step=meta["step"],
        **position,
    )
    return state, meta, skipped
