"""Evaluation of a model on a dataset: loss, accuracy and solver steps."""

import math

import equinox as eqx
import numpy as np

from ._adjoint import resolve_windows
from ._batch import batches, make_input_path
from ._failures import classify_failure
from ._integrator import Integrator
from ._model import AbstractSequenceModel, solves_ode
from ._objective import (
    AbstractObjective,
    SupervisedLoss,
    check_metrics,
    jitted_objective,
)
from ._parallel import AbstractPlacement, SingleDevice
from ._paths import InputPath
from .datasets import SequenceDataset


def evaluate(
    model: eqx.Module,
    data: SequenceDataset,
    *,
    integrator: Integrator,
    batch_size: int = 64,
    path: InputPath | None = None,
    objective: AbstractObjective = SupervisedLoss(),
    placement: AbstractPlacement = SingleDevice(),
) -> dict[str, float]:
    """Mean loss, accuracy (classification) and solver steps of `model` on `data`.

    **Arguments:**

    - `model`: an [`ltc_jax.LTC`][] (anything with its `solve` and `outputs`).
    - `data`: a [`ltc_jax.datasets.SequenceDataset`][].
    - `integrator`: an [`ltc_jax.Integrator`][] (a windowed adjoint without its
        number of windows gets it from the model and `data`).
    - `batch_size`: sequences per solve (default 64); the last batch is filled up
        with weight-0 copies, so it never changes the result.
    - `path`: `make_input_path(data, ...)` when the inputs need options
        (interpolation, mask channels); default: linear interpolation.
    - `objective`: the loss measured (default
        [`ltc_jax.training.SupervisedLoss`][]); its other metrics are reported
        too, as means per sequence.
    - `placement`: [`ltc_jax.training.SingleDevice`][] (default), or
        [`ltc_jax.training.DataParallel`][] to split each batch over a mesh.

    **Returns:** `{"loss", "accuracy", "num_steps", ...}`: the mean loss per
    sequence (cross-entropy or mean squared error, as
    [`ltc_jax.training.SupervisedLoss`][]), the fraction classified correctly
    (`nan` for regression, or an objective that reports no `correct`), the
    mean number of solver steps per batch solve
    (under `"batched"` batching every sequence of a batch shares those steps),
    and the mean of any other metric the objective reports.

    **Raises:** a [`ltc_jax.SolverFailureError`][] (or
    [`ltc_jax.DivergenceError`][]) where a solve fails, saying which batch
    and how far it got, as [`ltc_jax.fit`][] does; `ValueError` if
    `batch_size < 1`, unlabelled data
    (every label `-1`), labels the objective does not read (for the default,
    labels that do not fit the model's `output_size`: see
    [`ltc_jax.training.AbstractObjective`][]'s `check_data`), or a
    `batch_size` that does not divide over the placement; `TypeError` for
    `data` that is not a `SequenceDataset` (a `StreamWindows`, whose
    `.dataset` is one).
    """
    objective.check_data(model, data, "evaluation")
    placement.check_batch_size(batch_size)
    model = placement.place(model)
    totals: dict[str, float] = {}
    solves = 0
    path = make_input_path(data) if path is None else path
    if solves_ode(model):  # the others take no integrator's options
        integrator = resolve_windows(
            integrator,
            model.vector_field if isinstance(model, AbstractSequenceModel) else None,
            float(np.max(data.durations)),
            dtype=path.ts.dtype,
        )
    for index, batch in enumerate(batches(data, batch_size, path=path)):
        batch = placement.place_batch(batch)
        try:
            _, metrics = jitted_objective(objective, model, batch, integrator)
        except eqx.EquinoxRuntimeError as error:
            where = f"in evaluation on {data.name or 'the data'}, batch {index}"
            kind, text = classify_failure(
                error, where, model, batch, integrator, training=False
            )
            raise kind(text) from error
        check_metrics(objective, metrics)
        for name, value in placement.to_host(metrics).items():
            totals[name] = totals.get(name, 0.0) + float(value)
        solves += 1
    per_sequence = {
        name: value / totals["weight"]
        for name, value in totals.items()
        if name not in ("weight", "correct", "num_steps", "num_rejected_steps")
    }
    return dict(
        per_sequence,
        accuracy=totals["correct"] / totals["weight"]
        if data.is_classification and "correct" in totals
        else math.nan,
        num_steps=totals.get("num_steps", math.nan) / solves,
    )
