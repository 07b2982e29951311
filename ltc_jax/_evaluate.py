"""Evaluation of a model on a dataset: loss, accuracy and solver steps."""

import math

import equinox as eqx
import numpy as np
from jax.sharding import Mesh

from ._batch import batches, check_labels, make_input_path
from ._integrator import Integrator, resolve_windows
from ._loss import jitted_loss_and_metrics
from ._parallel import check_divides, replicate, shard_batch, to_host
from ._paths import InputPath
from .datasets import SequenceDataset


def evaluate(
    model: eqx.Module,
    data: SequenceDataset,
    *,
    integrator: Integrator,
    batch_size: int = 64,
    path: InputPath | None = None,
    mesh: Mesh | None = None,
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
    - `mesh`: a device mesh with a `"data"` axis ([`ltc_jax.data_mesh`][]) to
        split each batch over, or `None` (default) for one device.

    **Returns:** `{"loss", "accuracy", "num_steps"}`: the mean loss per sequence
    (cross-entropy or mean squared error, as [`ltc_jax.loss_and_metrics`][]),
    the fraction classified correctly (`nan` for regression) and the mean number
    of solver steps per batch solve (under `"batched"` batching every sequence of
    a batch shares those steps).

    **Raises:** as the solve; `ValueError` if `batch_size < 1`, labels that do
    not fit the model's `output_size`, or a `batch_size` that does not divide
    over the mesh.
    """
    check_labels(model, data)
    if mesh is not None:
        check_divides(batch_size, mesh)
        model = replicate(model, mesh)
    totals = dict(weight=0.0, loss=0.0, correct=0.0, num_steps=0.0)
    solves = 0
    path = make_input_path(data) if path is None else path
    integrator = resolve_windows(
        integrator,
        getattr(model, "cell", None),
        float(np.max(data.durations)),
        dtype=path.ts.dtype,
    )
    for batch in batches(data, batch_size, path=path):
        if mesh is not None:
            batch = shard_batch(batch, mesh, batch_size)
        _, metrics = jitted_loss_and_metrics(model, batch, integrator)
        if mesh is not None:
            metrics = to_host(metrics)
        for name in totals:
            totals[name] += float(metrics[name])
        solves += 1
    return dict(
        loss=totals["loss"] / totals["weight"],
        accuracy=totals["correct"] / totals["weight"]
        if data.is_classification
        else math.nan,
        num_steps=totals["num_steps"] / solves,
    )
