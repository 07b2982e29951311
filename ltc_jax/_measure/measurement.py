"""Measure one training step: memory, time, function evaluations, gradient error."""

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import numpy as np
import optax
from jaxtyping import PyTree

from .._adjoint import resolve_windows_for_path
from .._batch import Batch
from .._integrator import Integrator
from .._model import LTC
from .._objective import SupervisedLoss, make_train_step
from .._optimizer import make_optimizer
from . import counting
from .memory import compile_ahead, memory_of, runtime_peak
from .timing import time_calls


@dataclasses.dataclass(frozen=True)
class Measurement:
    """What [`ltc_jax.measure.measure`][] returns: one training step, measured.

    Every field is either configuration or a measured figure; each name carries
    its unit (`_bytes`, `_seconds`) or says it is a count (`num_`, `_evaluations`).
    A figure the backend does not report is `None`, never a guess.

    **Configuration:**

    - `gradient_mode`: `"checkpoint"`, `"full"`, `"backsolve"`, `"windowed"` or
        `"direct"`.
    - `solver`: the diffrax solver's class name.
    - `adaptive`: whether steps were chosen by an error controller.
    - `max_steps`: the solve's step limit; `full` and `checkpoint` allocate for it.
    - `checkpoints`: the requested number of checkpoints of `"checkpoint"`
        (`None`: diffrax's default, about `sqrt(2 * max_steps)`); `None` for the
        other modes.
    - `windows`: the number of windows of `"windowed"` (derived if the integrator
        left it `None`); `None` for the other modes.
    - `batch_size`: sequences per batch.
    - `num_observations`: observation times per sequence (the input's length).
    - `dtype`: the floating dtype of the inputs, e.g. `"float32"`.
    - `backend`: JAX's backend, `"cpu"` or `"gpu"`.

    **Memory** (XLA's compiled memory analysis of the jitted training step;
    deterministic):

    - `temp_bytes`: scratch memory: intermediates, stored steps, checkpoints.
    - `argument_bytes`: the inputs: model, optimiser state, batch.
    - `output_bytes`: the outputs.
    - `runtime_peak_bytes`: what one run of the step allocates above the
        memory in use before it ([`ltc_jax.measure.runtime_peak_bytes`][]).
        GPU: at the step's first run, the allocator's `peak_bytes_in_use` after
        the run minus `bytes_in_use` before it (after compilation). CPU: at its
        second run, the first having paid the one-time cost of a compiled
        program's first run (6 to 10 MB, whatever the step): the process's
        resident high-water mark, reset just before the run, minus its resident
        memory then: `temp_bytes + output_bytes` and the working memory of
        routines outside XLA's plan (a few pages to about 0.5 MB).
        `None` where the backend reports neither, or where the figure cannot be
        isolated to the step: an earlier, larger device peak of this process,
        or (CPU) a rise below the step's own compiled temp bytes, memory the
        process held already having served it (measure in a fresh process: see
        [`ltc_jax.measure.call_in_subprocess`][]).
    - `runtime_peak_source`: `"device allocator (gpu)"` (the allocator's figure
        for the device, not comparable with a CPU process's), `"process
        high-water mark"`, or `None`.
    - `runtime_peak_note`: why `runtime_peak_bytes` is `None`, else `None`.

    **Time** (wall clock, after compilation and warm-up):

    - `compile_seconds`: lowering and compiling the training step.
    - `step_seconds`: median of `step_seconds_all`, the timed training steps.
    - `forward_seconds`: median time of the loss alone (the forward solve, no
        gradient), over as many timed runs.
    - `backward_seconds`: `step_seconds - forward_seconds`: what the gradient adds
        to the forward solve (the optimiser update included; it is tiny beside a
        solve).

    **Counts:**

    - `num_steps`, `num_accepted_steps`, `num_rejected_steps`: internal solver
        steps of the forward solve, from diffrax's `sol.stats` (`num_steps` counts
        accepted and rejected steps; the most over the batch under `"vmap"`
        batching).
    - `forward_evaluations`: vector-field evaluations of the forward pass of one
        gradient, counted at run time; `None` if not counted.
    - `backward_evaluations`: evaluations of the backward pass of the same
        gradient: recomputation of the forward solve from stored steps or
        checkpoints and, under `"backsolve"`, the reverse solve (each of its
        evaluations inside a vector-Jacobian product). Both count evaluations of
        the whole batch at once (under `"vmap"` batching too, where one
        vectorised evaluation serves every sequence).
    - `loss`: the training loss at the measured parameters.

    **Gradient error:**

    - `gradient_relative_error`: `|g - g_ref| / |g_ref|` (Euclidean norms over
        all parameters) against the reference given to `measure`; `None` without
        a reference or when the gradient is not finite.
    - `gradient_is_finite`: whether every gradient entry is finite; `None` if the
        gradient was not computed.
    """

    gradient_mode: str
    solver: str
    adaptive: bool
    max_steps: int
    checkpoints: int | None
    windows: int | None
    batch_size: int
    num_observations: int
    dtype: str
    backend: str
    temp_bytes: int | None
    argument_bytes: int | None
    output_bytes: int | None
    runtime_peak_bytes: int | None
    runtime_peak_source: str | None
    runtime_peak_note: str | None
    compile_seconds: float
    step_seconds: float
    step_seconds_all: tuple[float, ...]
    forward_seconds: float
    backward_seconds: float
    num_steps: int
    num_accepted_steps: int
    num_rejected_steps: int
    forward_evaluations: int | None
    backward_evaluations: int | None
    loss: float
    gradient_relative_error: float | None
    gradient_is_finite: bool | None

    @property
    def backward_forward_time_ratio(self) -> float:
        """`backward_seconds / forward_seconds`: the cost of the gradient in units
        of forward solves."""
        return self.backward_seconds / self.forward_seconds

    @property
    def backward_forward_evaluation_ratio(self) -> float | None:
        """`backward_evaluations / forward_evaluations`, or `None` if not counted."""
        if self.forward_evaluations is None or self.backward_evaluations is None:
            return None
        return self.backward_evaluations / self.forward_evaluations

    def asdict(self) -> dict[str, Any]:
        """The fields and both ratios, as a JSON-serialisable dict."""
        record = dataclasses.asdict(self)
        record["step_seconds_all"] = list(self.step_seconds_all)
        record["backward_forward_time_ratio"] = self.backward_forward_time_ratio
        record["backward_forward_evaluation_ratio"] = (
            self.backward_forward_evaluation_ratio
        )
        return record

    def figures(self) -> dict[str, Any]:
        """The measured figures alone (memory, time, counts, loss, gradient error
        and both ratios), without the configuration fields: a dict to merge into
        a record that describes its configuration itself."""
        configuration = {
            "gradient_mode",
            "solver",
            "adaptive",
            "max_steps",
            "checkpoints",
            "windows",
            "batch_size",
            "num_observations",
            "dtype",
            "backend",
        }
        return {k: v for k, v in self.asdict().items() if k not in configuration}


def measure(
    model: eqx.Module,
    batch: Batch,
    integrator: Integrator,
    *,
    optimizer: optax.GradientTransformation | None = None,
    warmup_steps: int = 1,
    timed_steps: int = 3,
    count_evaluations: bool = True,
    reference_gradient: PyTree | np.ndarray | None = None,
) -> Measurement:
    """Measure one training step of `model` on `batch`: memory, time, step counts,
    function evaluations and gradient error.

    In order: the training step ([`ltc_jax.training.make_train_step`][]) is compiled
    ahead of time and its memory analysis read; its first run (on GPU) or its
    second, after a warm-up run (on CPU; a third or fourth where memory the
    process held served the second), gives the runtime peak; after
    `warmup_steps` more runs, `timed_steps` runs are timed. The loss alone (the
    forward solve) is compiled, warmed up and timed the same way. Then, so that
    counting never disturbs a timing, a separate counting run of one gradient: the
    model's vector field is wrapped so that each evaluation calls back to the host
    (`jax.debug.callback(..., ordered=True)`), and a marker placed on the loss
    splits the calls into the forward and the backward pass. The gradient of that
    run is compared with `reference_gradient`.

    Run one measurement per process ([`ltc_jax.measure.call_in_subprocess`][]): the
    runtime peak is only this step's in a process that has not yet held more, and on GPU
    build the batch on the host and `jax.device_put` it, so that no temporary of
    building it sets the device's peak first.

    **Arguments:**

    - `model`: an [`ltc_jax.LTC`][] (anything with its `solve`/`outputs` interface;
        counting evaluations needs its `cell`, the vector field that is solved).
    - `batch`: an [`ltc_jax.Batch`][]: the input path, labels and weights.
    - `integrator`: the solver configuration and gradient mode, an
        [`ltc_jax.Integrator`][].
    - `optimizer`: the optax optimiser of the step; default
        [`ltc_jax.training.make_optimizer`][]`(1e-3, 1)` (Adam with gradient clipping).
    - `warmup_steps`: untimed runs after the first (default 1).
    - `timed_steps`: timed runs of the step and of the forward solve, at least 1
        (default 3).
    - `count_evaluations`: count vector-field evaluations (default True). Each
        evaluation costs a host callback (10 to 40 microseconds on CPU), so the
        counting run of a long solve takes longer than the step.
    - `reference_gradient`: the gradient to compare with, as a pytree shaped like
        [`ltc_jax.measure.loss_gradient`][]'s result or a flat array from
        [`ltc_jax.measure.flatten_gradient`][]; typically the float64 gradient of exact
        backpropagation (`"full"` or `"checkpoint"`) at tight tolerance. Default
        none: no gradient error.

    **Returns:** a [`ltc_jax.measure.Measurement`][].

    **Raises:**

    - `ValueError` if `timed_steps < 1` or `warmup_steps < 0`, if counting is asked
        of a model without a `cell`, or if `reference_gradient` does not match the
        model's parameters in size.
    - Whatever the solve raises, e.g. `equinox.EquinoxRuntimeError` when it needs
        more than `max_steps` steps.

    Method: XLA's buffer assignment (`jax.stages.Compiled.memory_analysis`);
    process high-water marks from Linux's `/proc/self/status` (`VmHWM`, reset via
    `/proc/self/clear_refs`); device allocator statistics
    (`jax.Device.memory_stats`); diffrax's `sol.stats`.
    """
    if timed_steps < 1:
        raise ValueError(f"timed_steps must be at least 1; got {timed_steps}.")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be non-negative; got {warmup_steps}.")
    if count_evaluations and not isinstance(model, LTC):
        raise ValueError(
            "Counting evaluations wraps an ltc_jax.LTC's vector field `cell`; "
            f"{type(model).__name__} is not an LTC. Pass count_evaluations=False."
        )
    if reference_gradient is not None:
        parameters = flatten_gradient(eqx.filter(model, eqx.is_inexact_array)).size
        reference_size = flatten_gradient(reference_gradient).size
        if reference_size != parameters:
            raise ValueError(
                f"reference_gradient has {reference_size} entries but the model has "
                f"{parameters} parameters; compute it for the same model."
            )
    integrator = resolve_windows_for_path(integrator, model.vector_field, batch.path)
    if optimizer is None:
        optimizer = make_optimizer(1e-3, 1)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))

    start = time.perf_counter()
    step, step_args = compile_ahead(
        make_train_step(optimizer, integrator), model, opt_state, batch
    )
    compile_seconds = time.perf_counter() - start
    memory = memory_of(step)
    peak, peak_source, peak_note = runtime_peak(
        step, step_args, expected_bytes=None if memory is None else memory.temp_bytes
    )
    step_seconds_all = time_calls(
        step, step_args, warmup=warmup_steps, repeats=timed_steps
    )

    forward, forward_args = compile_ahead(_forward_loss(integrator), model, batch)
    loss, metrics = forward(forward_args)
    forward_seconds = statistics.median(
        time_calls(forward, forward_args, warmup=warmup_steps, repeats=timed_steps)
    )
    num_steps = int(metrics["num_steps"])
    num_rejected = int(metrics["num_rejected_steps"])

    forward_evaluations = backward_evaluations = gradient = None
    if count_evaluations:
        forward_evaluations, backward_evaluations, gradient = (
            counting.count_evaluations(model, batch, integrator)
        )
    elif reference_gradient is not None:
        gradient = loss_gradient(model, batch, integrator)

    error = finite = None
    if gradient is not None:
        finite = bool(np.all(np.isfinite(flatten_gradient(gradient))))
    if reference_gradient is not None and finite:
        error = gradient_relative_error(gradient, reference_gradient)

    step_seconds = statistics.median(step_seconds_all)
    checkpoints = None
    if integrator.adjoint_name == "checkpoint":
        checkpoints = integrator.adjoint.checkpoints
    return Measurement(
        gradient_mode=integrator.adjoint_name,
        solver=type(integrator.solver).__name__,
        adaptive=integrator.is_adaptive,
        max_steps=integrator.max_steps,
        checkpoints=checkpoints,
        windows=getattr(integrator.adjoint, "windows", None),
        batch_size=int(batch.path.lengths.shape[0]),
        num_observations=int(batch.path.ts.shape[1]),
        dtype=str(batch.path.ts.dtype),
        backend=jax.default_backend(),
        temp_bytes=None if memory is None else memory.temp_bytes,
        argument_bytes=None if memory is None else memory.argument_bytes,
        output_bytes=None if memory is None else memory.output_bytes,
        runtime_peak_bytes=peak,
        runtime_peak_source=peak_source,
        runtime_peak_note=peak_note,
        compile_seconds=compile_seconds,
        step_seconds=step_seconds,
        step_seconds_all=tuple(step_seconds_all),
        forward_seconds=forward_seconds,
        backward_seconds=step_seconds - forward_seconds,
        num_steps=num_steps,
        num_accepted_steps=num_steps - num_rejected,
        num_rejected_steps=num_rejected,
        forward_evaluations=forward_evaluations,
        backward_evaluations=backward_evaluations,
        loss=float(loss),
        gradient_relative_error=error,
        gradient_is_finite=finite,
    )


def loss_gradient(model: eqx.Module, batch: Batch, integrator: Integrator) -> PyTree:
    """The gradient of the training loss ([`ltc_jax.training.SupervisedLoss`][]) with
    respect to the model's inexact arrays, jitted.

    **Returns:** a pytree shaped like `model`: gradients at its inexact arrays,
    `None` elsewhere. Same gradient as one training step uses (computed with
    `eqx.filter_value_and_grad`, so a solve past `max_steps` raises).

    It may itself be called under `jax.jit` (e.g. `eqx.filter_jit(loss_gradient)`),
    except where the windowed adjoint's number of windows is still to be derived
    from the model and the data (`windows=None`), which needs concrete values.

    **Raises:** `ValueError` under `jax.jit` with `adjoint="windowed"` and
    `windows=None`: pass `windows=K` to [`ltc_jax.make_integrator`][], or resolve
    the count before the jitted call ([`ltc_jax.training.resolve_windows`][]).
    """
    integrator = resolve_windows_for_path(integrator, model.vector_field, batch.path)
    return _gradient(integrator)(model, batch)[1]


def flatten_gradient(gradient: PyTree | np.ndarray) -> np.ndarray:
    """All inexact array leaves of `gradient`, raveled and concatenated in pytree
    order, as `float64[parameters]`; a 1-D NumPy array passes through (as
    float64). Use it to store a reference gradient (e.g. with `np.save`)."""
    if isinstance(gradient, np.ndarray) and gradient.ndim == 1:
        return gradient.astype(np.float64)
    leaves = jax.tree.leaves(eqx.filter(gradient, eqx.is_inexact_array))
    if not leaves:
        return np.zeros(0)
    return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in leaves])


def gradient_relative_error(
    gradient: PyTree | np.ndarray, reference: PyTree | np.ndarray
) -> float:
    """`|gradient - reference| / |reference|`, Euclidean norms over all parameters,
    computed in float64.

    **Arguments:** two gradients, each a pytree (e.g. from
    [`ltc_jax.measure.loss_gradient`][]) or a flat array from
    [`ltc_jax.measure.flatten_gradient`][], with the same number of entries in the same
    order.

    **Returns:** the relative error; `inf` or `nan` if `gradient` is not finite.

    **Raises:** `ValueError` if the sizes differ or `reference` is zero.
    """
    g, r = flatten_gradient(gradient), flatten_gradient(reference)
    if g.shape != r.shape:
        raise ValueError(
            f"The gradient has {g.size} entries and the reference {r.size}; they "
            "must come from the same model."
        )
    norm = float(np.linalg.norm(r))
    if norm == 0.0:
        raise ValueError("The reference gradient is zero; no relative error exists.")
    with np.errstate(invalid="ignore", over="ignore"):
        return float(np.linalg.norm(g - r)) / norm


# --- internals ---------------------------------------------------------------------


def _forward_loss(integrator: Integrator) -> Callable:
    def forward(model, batch):
        return SupervisedLoss()(model, batch, integrator)

    return forward


def _gradient(integrator: Integrator) -> Callable:
    @eqx.filter_jit
    def value_and_gradient(model, batch):
        (loss, _), grads = eqx.filter_value_and_grad(SupervisedLoss(), has_aux=True)(
            model, batch, integrator
        )
        return loss, grads

    return value_and_gradient
