"""Monitors: what watches a training run and acts at its steps and epochs
(validation and early stopping, checkpoints, solver-step warnings, the learning
check, progress), each an object with the init/step/close pattern of diffrax's
`AbstractProgressMeter`."""

import math
from collections.abc import Callable, Sequence
from typing import Any

import diffrax
import equinox as eqx
import jax

from ._cfc import CfC
from ._integrator import Integrator
from ._model import solves_ode
from ._objective import AbstractObjective, SupervisedLoss
from ._parallel import AbstractPlacement, SingleDevice
from ._paths import InputPath
from ._train_state import TrainState, save_train_state
from ._warn import warn
from .datasets import SequenceDataset


Say = Callable[[str], None]
"""Shows a line through every monitor's `message` (a progress bar writes it
above itself)."""


class AbstractMonitor(eqx.Module):
    """Watches a training run. Stateless, as diffrax's `AbstractProgressMeter`:
    `init` returns the monitor's own state (a progress bar, say), which the
    other methods receive; what must survive a restart lives in the
    [`ltc_jax.training.TrainState`][] instead, which `epoch` and `finish` may
    return changed.

    [`ltc_jax.train_on`][] calls `init`, `step` and `message`, and `close` at
    the end; [`ltc_jax.fit`][] also calls `epoch` after each epoch's record is
    in the history, `stop` before each epoch, and `finish` once training ends
    normally. Every method has a default that does nothing: subclass and
    override what you need.
    """

    def init(self, state: TrainState, total_steps: int | None) -> Any:
        """Before the first step: the state training starts from (a resumed run
        has done `state.step` steps already) and the steps of the whole run
        (`None` when unknown, as for a generator of batches). **Returns:** the
        monitor's own state."""
        return None

    def step(self, monitor_state: Any, state: TrainState) -> None:
        """After every step, successful or skipped."""

    def message(self, monitor_state: Any, text: str) -> None:
        """A line worth showing: a skipped update, a warning."""

    def epoch(
        self, monitor_state: Any, state: TrainState, integrator: Integrator, say: Say
    ) -> TrainState:
        """After an epoch, whose record is `state.history[-1]`, run with
        `integrator`. **Returns:** the state to go on from (with the record
        extended, say)."""
        return state

    def stop(self, state: TrainState) -> bool:
        """Whether training should stop before another epoch."""
        return False

    def finish(self, monitor_state: Any, state: TrainState) -> TrainState:
        """Once, when training ends normally. **Returns:** the final state."""
        return state

    def close(self, monitor_state: Any) -> None:
        """Once, when training ends, normally or not."""


class Running:
    """Monitors with their states, started together: what `train_on` and `fit`
    call. A context manager that closes every monitor on exit."""

    def __init__(
        self,
        monitors: Sequence[AbstractMonitor],
        state: TrainState,
        total_steps: int | None,
    ):
        self.monitors = tuple(monitors)
        self.states = [m.init(state, total_steps) for m in self.monitors]

    def __enter__(self) -> "Running":
        return self

    def __exit__(self, *exc_info) -> None:
        for monitor, monitor_state in zip(self.monitors, self.states, strict=True):
            monitor.close(monitor_state)

    def step(self, state: TrainState) -> None:
        for monitor, monitor_state in zip(self.monitors, self.states, strict=True):
            monitor.step(monitor_state, state)

    def say(self, text: str) -> None:
        for monitor, monitor_state in zip(self.monitors, self.states, strict=True):
            monitor.message(monitor_state, text)

    def epoch(self, state: TrainState, integrator: Integrator) -> TrainState:
        for monitor, monitor_state in zip(self.monitors, self.states, strict=True):
            state = monitor.epoch(monitor_state, state, integrator, self.say)
        return state

    def stop(self, state: TrainState) -> bool:
        return any(monitor.stop(state) for monitor in self.monitors)

    def finish(self, state: TrainState) -> TrainState:
        for monitor, monitor_state in zip(self.monitors, self.states, strict=True):
            state = monitor.finish(monitor_state, state)
        return state


def _with_last_record(state: TrainState, **fields: Any) -> TrainState:
    *earlier, last = state.history
    return state.replace(history=(*earlier, dict(last, **fields)))


def best_epoch(history: Sequence[dict]) -> int | None:
    """The epoch of the lowest finite validation loss (the first, on a tie), or
    `None` before any."""
    best = None
    for record in history:
        loss = record.get("validation_loss", math.nan)
        if math.isfinite(loss) and (best is None or loss < best[1]):
            best = (record["epoch"], loss)
    return None if best is None else best[0]


def best_mean_epoch(
    histories: Sequence[Sequence[dict]],
) -> tuple[int, tuple[float, ...]]:
    """How many epochs give the lowest mean validation loss over several runs
    (the folds of a cross-validation, [`ltc_jax.datasets.stratified_folds`][]),
    each weighted equally, over the epochs every run recorded (runs stopped
    early by `patience` record fewer); the fewest on a tie.

    **Arguments:** `histories`: each run's history from [`ltc_jax.fit`][] with
    `validation` (a record per epoch, in order, with `validation_loss`).

    **Returns:** `(epochs, mean_losses)`: the number of epochs (at least 1) and
    the mean validation loss after each common epoch, in order.

    **Raises:** `ValueError` for no history, or none with a finite mean
    validation loss at any common epoch (a history without validation, say).
    """
    if not histories:
        raise ValueError("best_mean_epoch needs at least one history.")
    common = min(len(history) for history in histories)
    means = tuple(
        math.fsum(h[i].get("validation_loss", math.nan) for h in histories)
        / len(histories)
        for i in range(common)
    )
    finite = [(loss, i) for i, loss in enumerate(means) if math.isfinite(loss)]
    if not finite:
        raise ValueError(
            "No epoch has a finite validation loss in every history: train each "
            "with `validation`."
        )
    return min(finite)[1] + 1, means


class Validation(AbstractMonitor):
    """Validation and early stopping: each epoch ends with the loss and accuracy
    on held-out data (`validation_loss`, `validation_accuracy` in its record;
    never the test set), the model of the lowest validation loss is kept, and
    training stops after `patience` epochs without a lower one. The model
    returned is the best epoch's, marked `best` in the history.

    **Fields:** `data` (a [`ltc_jax.datasets.SequenceDataset`][]), `path` (its
    [`ltc_jax.InputPath`][]), `batch_size`, `patience` (`None`: never stop
    early), `placement`, `objective` (the loss measured, training's own:
    default [`ltc_jax.training.SupervisedLoss`][]; a penalty's term is not part
    of `validation_loss`, which is the objective's data loss).

    **Raises:** `ValueError` for a `patience` below 1.
    """

    data: SequenceDataset = eqx.field(static=True)
    path: InputPath
    batch_size: int = eqx.field(static=True)
    patience: int | None = eqx.field(static=True, default=None)
    placement: AbstractPlacement = SingleDevice()
    objective: AbstractObjective = SupervisedLoss()

    def __check_init__(self):
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be at least 1; got {self.patience}.")

    def epoch(self, monitor_state, state, integrator, say):
        from ._evaluate import evaluate  # evaluation uses the monitors' placement

        result = evaluate(
            state.model,
            self.data,
            integrator=integrator,
            batch_size=self.batch_size,
            path=self.path,
            placement=self.placement,
            objective=self.objective,
        )
        state = _with_last_record(
            state,
            validation_loss=result["loss"],
            validation_accuracy=result["accuracy"],
        )
        if best_epoch(state.history) == state.history[-1]["epoch"]:
            state = state.replace(best_model=state.model)
        return state

    def stop(self, state):
        best = best_epoch(state.history)
        if self.patience is None or best is None:
            return False
        return state.epoch - 1 - best >= self.patience

    def finish(self, monitor_state, state):
        if not state.history:
            return state
        best = best_epoch(state.history)
        history = tuple(dict(r, best=r["epoch"] == best) for r in state.history)
        return state.replace(history=history, model=state.best_model)


class Checkpointing(AbstractMonitor):
    """Checkpoints of the whole training state
    ([`ltc_jax.training.save_train_state`][]) after every epoch and every
    `every` steps, written by process 0 only. Atomic: a run killed mid-write
    keeps its previous checkpoints. Nothing is checkpointed after a step that
    failed (and was skipped, under [`ltc_jax.training.SkipFailures`][]), at a
    step or an epoch's end, until a step succeeds: a run that then stops on
    too many failures in a row keeps its last checkpoints from before them,
    which its pruning would otherwise push out.

    **Fields:** `directory`; `every` (`None`: epochs only); `placement` (to
    read the state back to the host); `meta`, a dict recorded with each
    checkpoint (the run's `seed`).

    **Raises:** `ValueError` for an `every` below 1.
    """

    directory: str = eqx.field(static=True)
    every: int | None = eqx.field(static=True, default=None)
    placement: AbstractPlacement = SingleDevice()
    meta: dict = eqx.field(static=True, default_factory=dict)

    def __check_init__(self):
        if self.every is not None and self.every < 1:
            raise ValueError(f"checkpoint_every must be positive; got {self.every}.")

    def _save(self, state: TrainState) -> None:
        if state.failures_in_a_row:  # nothing after a failure until a success
            return
        if jax.process_index() == 0:
            host = state.replace(
                **self.placement.to_host(
                    dict(
                        model=state.model,
                        opt_state=state.opt_state,
                        best_model=state.best_model,
                    )
                )
            )
            save_train_state(self.directory, host, **self.meta)

    def step(self, monitor_state, state):
        if self.every and state.step % self.every == 0:
            self._save(state)

    def epoch(self, monitor_state, state, integrator, say):
        self._save(state)
        return state


class StepBudget(AbstractMonitor):
    """Warnings about adaptive solves and their `max_steps`: when a solve uses
    more than 90% of it (raise it before it becomes an error), and, after the
    first epoch, when `"full"` or `"checkpoint"` (whose memory and time
    `max_steps` sizes) use under a tenth of it. Each is a `UserWarning` and a
    message."""

    def epoch(self, monitor_state, state, integrator, say):
        record = state.history[-1]
        if not (integrator.is_adaptive and solves_ode(state.model)):
            return state
        texts = []
        longest = record["max_num_steps"]
        if record["max_steps_used"] > 0.9:  # False for NaN
            texts.append(
                f"Epoch {record['epoch']}: a solve took {int(longest)} of "
                f"max_steps={integrator.max_steps} steps; raise max_steps before "
                "it becomes an error."
            )
        sized = isinstance(integrator.adjoint, diffrax.RecursiveCheckpointAdjoint)
        if record["epoch"] == 0 and sized and record["max_steps_used"] < 0.1:
            texts.append(
                f"The solves took at most {int(longest)} of max_steps="
                f"{integrator.max_steps} steps; adjoint={integrator.adjoint_name!r} "
                "allocates memory, and spends time, for max_steps: lower it to a "
                "small multiple of the steps taken."
            )
        for text in texts:
            say(text)
            warn(text)
        return state


class LearningCheck(AbstractMonitor):
    """The check that training learned: unless the training loss of the epoch
    returned (the best with validation, else the last) is `fraction` below the
    loss of the first step, a `UserWarning` says so, and the last record's
    `learned` is `False`. A model whose final state barely depends on its input
    trains at chance without any other sign. After a single optimiser step
    the epoch's loss is the first step's, and nothing is checked; where no
    step succeeded (each skipped by the failure policy), the warning says so.

    **Fields:** `fraction`, the relative decrease asked for (default 0.05).
    """

    fraction: float = eqx.field(static=True, default=0.05)

    def finish(self, monitor_state, state):
        if state.history and state.first_loss is None:  # every step failed
            n = state.step
            steps = "its one step" if n == 1 else f"each of its {n} steps"
            warn(
                f"No optimiser step of the run succeeded: {steps} failed and was "
                "skipped by the failure policy, so the "
                "model returned is the one training started from. The skipped "
                "steps' messages (progress, or the history's failures) say why."
            )
            return _with_last_record(state, learned=False)
        if not state.history or state.step < 2:
            return state
        kept = [r for r in state.history if r.get("best")] or list(state.history[-1:])
        learned = kept[0]["loss"] < (1 - self.fraction) * state.first_loss
        if not learned:
            time_scale = (  # the CfC has no time constants to check
                ""
                if isinstance(state.model, CfC)
                else " (check the time scale: tau against the sequences' durations)"
            )
            warn(
                f"Training did not lower the loss by {self.fraction:.0%}: "
                f"{state.first_loss:.4g} at the first step, "
                f"{kept[0]['loss']:.4g} in the epoch kept. The model may not see "
                f"its input{time_scale} or the learning rate may be too low."
            )
        return _with_last_record(state, learned=bool(learned))
