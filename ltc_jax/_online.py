r"""Learning online from a stream of windows: causal predictions from a hidden
state carried from window to window, labels that arrive late, replay, Elastic
Weight Consolidation, and checkpoints of the whole state.

The loop is prequential (Dawid 1984): each window is predicted when it ends,
before its label exists, and trained on once its label has arrived.
[`ltc_jax.training.OnlineLearner`][] holds what stays fixed (the optimiser,
integrator, objective and strategies); [`ltc_jax.training.OnlineState`][] holds
everything that changes, so that a checkpoint of it resumes a stream exactly.
"""

import os
from collections.abc import Sequence
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import PyTree

from ._batch import Batch, make_input_path
from ._checkpoint import (
    _read,
    _restore,
    list_checkpoints,
    remove_interrupted_saves,
    save_checkpoint,
)
from ._errors import CheckpointError
from ._fisher import consolidate, diagonal_fisher
from ._integrator import Integrator
from ._model import AbstractSequenceModel
from ._objective import AbstractObjective, Penalized, QuadraticPenalty, SupervisedLoss
from ._policies import AbstractFailurePolicy, RaiseOnFailure
from ._survival import DiscreteHazardLoss, EventTimeLoss
from ._times import MAX_ROUNDING
from ._train import train_on
from ._train_state import TrainState
from .datasets import SequenceDataset


class WindowBuffer(eqx.Module):
    """Windows the learner holds (awaiting a label, awaiting training, or kept
    for replay), as NumPy arrays on the host, one row per window. Every window
    is on the learner's time grid `ts`.

    **Fields:** `xs`: `float64[n, frames, channels]` values (NaN missing);
    `y0`: `float64[n, hidden_size]` the state the window starts from (as it was
    predicted); `labels`: `int32[n]` class indices (-1: not yet known) or
    `float64[n, output_size]` targets (NaN: not yet known); `stream`: `int64[n]`
    the stream (machine) of each window; `end_time`: `float64[n]` its end, in
    the stream's time unit.
    """

    xs: np.ndarray
    y0: np.ndarray
    labels: np.ndarray
    stream: np.ndarray
    end_time: np.ndarray

    def __len__(self) -> int:
        return self.end_time.shape[0]

    def take(self, index) -> "WindowBuffer":
        """The rows at `index` (an integer or boolean array)."""
        return jax.tree.map(lambda a: a[index], self)

    def append(self, other: "WindowBuffer") -> "WindowBuffer":
        """These rows followed by `other`'s."""
        return jax.tree.map(lambda a, b: np.concatenate([a, b]), self, other)

    def resized(self, n: int) -> "WindowBuffer":
        """A buffer of `n` zero rows of these shapes (a template to load into)."""
        return _zero_rows(self, n)


class CarriedState(eqx.Module):
    """The hidden state at the end of each stream's latest window: where its
    next window starts from, if that begins where this one ended.

    **Fields:** `stream`: `int64[k]`; `end_time`: `float64[k]`, the window's
    end; `y`: `float64[k, hidden_size]`, the state there.
    """

    stream: np.ndarray
    end_time: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return self.stream.shape[0]

    def resized(self, n: int) -> "CarriedState":
        """A template of `n` zero rows."""
        return _zero_rows(self, n)


class Replay(eqx.Module):
    """Experience replay: a uniform sample of the labelled windows seen so far
    (reservoir sampling, Vitter 1985, "Random sampling with a reservoir", ACM
    TOMS 11(1), Algorithm R), mixed into every update's batches.

    **Fields:**

    - `capacity`: windows kept, at least 1.
    - `share`: the fraction of each batch drawn from the buffer, in `[0, 1)`
        (default 0.5); the rest are the new windows.
    - `weight`: the weight of a replayed window in the loss, through
        `Batch.weights` (default 1: as a new one).

    **Raises:** `ValueError` for a capacity below 1, a share outside `[0, 1)`
    or a negative weight.
    """

    capacity: int = eqx.field(static=True)
    share: float = eqx.field(static=True, default=0.5)
    weight: float = eqx.field(static=True, default=1.0)

    def __check_init__(self):
        if self.capacity < 1 or not 0 <= self.share < 1 or not self.weight >= 0:
            raise ValueError(
                "Replay needs capacity >= 1, share in [0, 1) and weight >= 0; got "
                f"{self.capacity}, {self.share} and {self.weight}."
            )


class EWC(eqx.Module):
    r"""Online Elastic Weight Consolidation (Kirkpatrick et al. 2017; online as
    Schwarz et al. 2018): a quadratic pull toward an anchor, weighted by the
    diagonal Fisher information.

    A stream has no task boundaries, so consolidation comes every `every`
    labelled windows: the Fisher of each update's new windows (at the
    parameters after the update, through the training integrator) is averaged
    over those windows, then $F \leftarrow \gamma F + F_\text{new}$ and the
    anchor moves to the current parameters
    ([`ltc_jax.training.consolidate`][]).

    **Fields:**

    - `strength`: $\lambda$, non-negative.
    - `decay`: $\gamma$ in `[0, 1]` (default 1: every consolidation is kept in
        full, as EWC; below 1 old ones fade).
    - `every`: labelled windows between consolidations, at least 1 (default
        64).
    - `kind`: `"exact"` (default), the expectation over the model's predicted
        classes, or `"empirical"`, the squared gradient at the true labels; see
        [`ltc_jax.training.diagonal_fisher`][] for why the exact one is better
        (van de Ven 2025).

    **Raises:** `ValueError` for a negative strength, a decay outside `[0, 1]`
    or `every` below 1.
    """

    strength: float = eqx.field(static=True)
    decay: float = eqx.field(static=True, default=1.0)
    every: int = eqx.field(static=True, default=64)
    kind: Literal["exact", "empirical"] = eqx.field(static=True, default="exact")

    def __check_init__(self):
        if not self.strength >= 0 or not 0 <= self.decay <= 1 or self.every < 1:
            raise ValueError(
                "EWC needs strength >= 0, decay in [0, 1] and every >= 1; got "
                f"{self.strength}, {self.decay} and {self.every}."
            )


class OnlineState(eqx.Module):
    """Everything an online learner carries from one chunk of the stream to
    the next; [`ltc_jax.training.save_online_state`][] checkpoints it whole.

    **Fields:**

    - `train`: the [`ltc_jax.training.TrainState`][] (the model, the optimiser
        state, the step count).
    - `penalty`: the EWC penalty ([`ltc_jax.training.QuadraticPenalty`][]:
        its anchor and Fisher), or `None` before the first consolidation.
    - `fisher_sum`: the Fisher of the windows since the last consolidation,
        summed over them (a pytree of the model's parameters), or `None`.
    - `pending`: windows predicted whose labels have not arrived (a window
        whose label never comes stays here: drop such windows with
        `state.replace(pending=state.pending.take(keep))`).
    - `fresh`: windows labelled and not yet trained on.
    - `replay`: the replay buffer.
    - `carried`: each stream's latest state ([`ltc_jax.training.CarriedState`][]).
    - `now`: the latest time the stream has reached (static float; `-inf`
        before the first chunk).
    - `predicted`: windows predicted so far (static int).
    - `labelled`: labels received so far (static int).
    - `seen`: labelled windows trained on so far (static int).
    - `since_consolidation`: of those, the ones since the last consolidation.
    - `updates`: updates made (static int).
    """

    train: TrainState
    penalty: QuadraticPenalty | None
    fisher_sum: PyTree | None
    pending: WindowBuffer
    fresh: WindowBuffer
    replay: WindowBuffer
    carried: CarriedState
    now: float = eqx.field(static=True, default=-np.inf)
    predicted: int = eqx.field(static=True, default=0)
    labelled: int = eqx.field(static=True, default=0)
    seen: int = eqx.field(static=True, default=0)
    since_consolidation: int = eqx.field(static=True, default=0)
    updates: int = eqx.field(static=True, default=0)

    @property
    def model(self) -> eqx.Module:
        """The current model."""
        return self.train.model

    def replace(self, **changes: Any) -> "OnlineState":
        """A copy with the fields named changed."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return OnlineState(**(fields | changes))


_ROUNDING = 64
"""Units in the last place of a window's end time within which its first
frame counts as its stream's previous end: the round-off of `end - (ts[-1] -
ts[0])`, a few ulps at any magnitude (Unix seconds included), never a
share of the time itself."""


def _streams(stream) -> np.ndarray:
    """Windows' streams as `int64[n]` (floats that are whole numbers, as pandas
    may give them, included).

    **Raises:** `ValueError` for a stream that is not an integer (a machine's
    name, say), which would otherwise fail in NumPy's conversion."""
    given = np.asarray(stream).reshape(-1)
    whole = np.issubdtype(given.dtype, np.integer) or (
        np.issubdtype(given.dtype, np.floating)
        and np.all(np.isfinite(given) & (given == np.round(given)))
    )
    if given.size and not whole:
        raise ValueError(
            f"Streams must be integers, one per stream (machine); got "
            f"{given[0]!r} ({given.dtype}). Number named streams first, e.g. "
            "with pandas.factorize, and keep the mapping."
        )
    return given.astype(np.int64)


def _end_times(end_time, step: float, name: str = "end_time") -> np.ndarray:
    """Windows' end times (or `now`, `name` saying which) as `float64[n]`,
    checked finite (a NaN would compare false with every time, and be refused
    for the wrong reason) and, where given in a float narrower than float64,
    fine enough: that float must resolve a tenth (`MAX_ROUNDING`) of the
    learner's grid `step` at their size. Unix seconds in float32 are multiples
    of 128 s, rounded before the learner sees them, so two windows could share
    an end and every message would quote times never given. (The check reads
    the dtype and the size, not the values: whole seconds near 1e7 in
    float32, exact as they are, are refused too.)"""
    given = np.asarray(end_time)
    times = given.astype(np.float64).reshape(-1)
    if not np.all(np.isfinite(times)):
        i = int(np.argmin(np.isfinite(times)))
        if not given.ndim:
            raise ValueError(f"{name} must be a finite time; got {times[i]}.")
        raise ValueError(f"{name} must be finite; {name}[{i}] is {times[i]}.")
    narrow = np.issubdtype(given.dtype, np.floating) and given.dtype.itemsize < 8
    if narrow and times.size:
        largest = float(np.max(np.abs(times)))
        resolution = float(np.spacing(given.dtype.type(largest)))
        if resolution > MAX_ROUNDING * step:
            raise ValueError(
                f"{name} was given in {given.dtype.name}, which resolves only "
                f"steps of {resolution:.3g} at {largest:.6g}, more than a tenth "
                f"of the learner's grid step ({step:.6g}): the times were "
                "rounded before they arrived. Give them in float64 (or "
                "integers), as the stream's clock holds them."
            )
    return times


class OnlineLearner(eqx.Module):
    r"""A learner over a stream of windows that end one after another, each of
    a stream (a machine) and labelled some time after it ends: prequential
    learning (predict, then train) with a persistent state.

    Use it in a loop over the stream's chunks, for example every minute:

    1. `outputs, state = learner.predict(state, windows, stream, end_time, now)`
        for the windows that ended in the chunk: causal predictions, from the
        state its stream's previous window ended in;
    2. `state = learner.label(state, stream, end_time, labels, now)` for the
        labels that arrived (a label for "fails within H" is known H after its
        window's end);
    3. `state, record = learner.update(state)`: one pass of optimiser steps over
        the windows labelled since the last update, with replayed windows mixed
        in, then EWC's consolidation when due;
    4. [`ltc_jax.training.save_online_state`][] now and then.

    **The state carried.** A window's solve runs from its first time to its
    last (as every solve in ltc_jax). A window continues its stream when its
    first time (its end minus `ts[-1] - ts[0]`) is at or after the end of
    that stream's latest predicted window, by at most the grid's largest
    spacing (up to a few units in the last place of the end time, for its
    rounding, at any magnitude: Unix seconds included): it starts from the
    state that window ended in, else from zero.
    Windows cut back to back by [`ltc_jax.datasets.stream_windows`][] (stride
    equal to the window) are one frame apart, over which the state is held;
    windows that share their boundary frame chain into one continuous solve.
    Training starts each window from the state it was predicted from, with no
    gradient through it (truncated backpropagation through time).

    **Fields:**

    - `ts`: `float64[frames]`, the windows' shared time grid from each window's
        start (its last time at the window's end), in the stream's time unit.
    - `optimizer`: an optax transformation, such as
        [`ltc_jax.training.make_optimizer`][] with `total_steps=None` (a
        constant learning rate) or `restart_steps` (warm restarts): a schedule
        that decays to an end would stop the learning.
    - `integrator`: an [`ltc_jax.Integrator`][].
    - `batch_size`: windows per optimiser step (default 16).
    - `task`: `"classes"` (default; `int32` labels) or `"regression"`.
    - `objective`: what is minimised (default
        [`ltc_jax.training.SupervisedLoss`][]); EWC's penalty is composed onto
        it. It reads the labels the learner keeps: class indices, or one
        target per output. The time-to-event objectives, whose labels are
        `(time, observed)` rows, are refused.
    - `replay`: a [`ltc_jax.training.Replay`][] or `None` (default).
    - `ewc`: an [`ltc_jax.training.EWC`][] or `None` (default).
    - `passes`: passes over each update's new windows (default 1).
    - `path_options`: keyword arguments of [`ltc_jax.make_input_path`][] for
        the windows' paths (default `interpolation="hold"`, which never reads a
        value before its time, and `empty_channel_fill=0.0`); a
        `time_since_observation` channel holds its times in the unit of the
        timestamps unless `time_since_observation_scale` gives another.
    - `on_failure`: a failure policy (default raise).
    - `seed`: the replay's draws, which depend on `(seed, updates)` alone, so a
        resumed stream draws what an uninterrupted one would.

    **Raises:** `ValueError` for a `batch_size` below 1 (below 2 with replay),
    `passes` below 1, an unknown `task`, or a `ts` that is not one increasing
    grid of at least two times; `NotImplementedError` for a time-to-event
    objective ([`ltc_jax.training.EventTimeLoss`][],
    [`ltc_jax.training.DiscreteHazardLoss`][]).

    Source: prequential evaluation (Dawid 1984, "Present position and
    potential developments: the prequential approach", JRSS A 147(2));
    replay by reservoir sampling (Vitter 1985); online EWC (Kirkpatrick et al.
    2017; Schwarz et al. 2018).
    """

    ts: np.ndarray = eqx.field(converter=lambda ts: np.asarray(ts, np.float64))
    optimizer: optax.GradientTransformation
    integrator: Integrator
    batch_size: int = eqx.field(static=True, default=16)
    task: Literal["classes", "regression"] = eqx.field(static=True, default="classes")
    objective: AbstractObjective = SupervisedLoss()
    replay: Replay | None = None
    ewc: EWC | None = None
    passes: int = eqx.field(static=True, default=1)
    path_options: dict = eqx.field(
        default_factory=lambda: dict(interpolation="hold", empty_channel_fill=0.0)
    )
    on_failure: AbstractFailurePolicy = RaiseOnFailure()
    seed: int = eqx.field(static=True, default=0)

    def __check_init__(self):
        ts = np.asarray(self.ts)
        if ts.ndim != 1 or ts.size < 2 or np.any(np.diff(ts) <= 0):
            raise ValueError(
                "ts must be one increasing grid of the windows' times, of at "
                f"least two (a window's solve runs from its first to its last); "
                f"got shape {ts.shape}."
            )
        if self.batch_size < 1 or self.passes < 1:
            raise ValueError(
                f"batch_size and passes must be positive; got {self.batch_size} "
                f"and {self.passes}."
            )
        if self.replay is not None and self.batch_size < 2:
            raise ValueError(
                "Replay needs batch_size >= 2: each batch holds at least one new "
                f"window and one replayed; got batch_size={self.batch_size}."
            )
        if self.task not in ("classes", "regression"):
            raise ValueError(
                f"task must be 'classes' or 'regression'; got {self.task!r}."
            )
        if isinstance(self.objective, EventTimeLoss | DiscreteHazardLoss):
            raise NotImplementedError(
                f"The online learner keeps class indices or one target per output "
                f"as labels; {type(self.objective).__name__} reads (time, "
                "observed) rows. Label each window with a class, such as 'fails "
                "within H' (ltc_jax.datasets.stream_windows' labels), instead."
            )

    def init(self, model: AbstractSequenceModel) -> OnlineState:
        """The state before the stream: `model` untrained by it, a fresh
        optimiser state, empty buffers, no carried state."""
        empty = self._unlabelled(model, np.zeros((0, len(self.ts), model.input_size)))
        carried = CarriedState(
            np.zeros((0,), np.int64), np.zeros((0,)), np.zeros((0, model.hidden_size))
        )
        return OnlineState(
            train=TrainState.create(model, self.optimizer),
            penalty=None,
            fisher_sum=None,
            pending=empty,
            fresh=empty,
            replay=empty,
            carried=carried,
        )

    # -- prediction ---------------------------------------------------------

    def predict(
        self,
        state: OnlineState,
        windows: SequenceDataset | np.ndarray,
        stream: Sequence[int] | np.ndarray,
        end_time: Sequence[float] | np.ndarray,
        now: float | None = None,
    ) -> tuple[np.ndarray, OnlineState]:
        """The model's outputs for windows that have ended, before any label:
        each from the state its stream's previous window ended in (see the
        class docstring), in order of their ends. The windows join the
        pending ones, awaiting their labels, and their final states are
        carried.

        **Arguments:**

        - `windows`: the windows' values, `float64[n, frames, channels]` (or a
            [`ltc_jax.datasets.SequenceDataset`][] whose every `ts` row is the
            learner's grid shifted to its start; its labels are not read).
        - `stream`: `int[n]`, each window's stream.
        - `end_time`: `float[n]`, each window's end, in the stream's time unit.
        - `now`: the stream's time (default the latest end).

        **Returns:** `(outputs, state)`: `float[n, output_size]` (logits for
        classes), in the order given.

        **Raises:** `ValueError` for no windows, windows off the learner's
        grid or of another channel count, mismatched lengths, a window ending
        after `now`, a `now` before the state's, a window given twice, one
        that does not end after its stream's latest predicted window, a
        stream that is not an integer, or an end time or `now` that is not
        finite or was given in a float too coarse for the learner's grid at
        its size (Unix seconds in float32).
        """
        xs = self._values(windows)
        stream = _streams(stream)
        end_time = _end_times(end_time, self._step)
        n = xs.shape[0]
        if n == 0:
            raise ValueError("No windows to predict: give at least one.")
        if stream.shape != (n,) or end_time.shape != (n,):
            raise ValueError(
                f"{n} windows need as many streams and end times; got "
                f"{stream.shape[0]} and {end_time.shape[0]}."
            )
        if now is None:
            now = self._advance(state, float(end_time.max()), latest_end=True)
        else:
            now = self._advance(state, now)
        late = end_time > now
        if np.any(late):
            i = int(np.argmax(late))
            raise ValueError(
                f"The window of stream {stream[i]} ending at {end_time[i]} has not "
                f"ended at now={now}: predict windows once they have ended."
            )
        pairs = _distinct_windows(stream, end_time, "given twice")
        carried_end = dict(
            zip(
                state.carried.stream.tolist(),
                state.carried.end_time.tolist(),
                strict=True,
            )
        )
        for s, t in pairs:
            if s in carried_end and t <= carried_end[s]:
                raise ValueError(
                    f"The window of stream {s} ending at {t} does not end after "
                    f"that stream's latest predicted window ({carried_end[s]}): "
                    "predict each stream's windows once, in order."
                )
        model = state.model
        outputs = np.zeros((n, model.output_size))
        y0 = np.zeros((n, model.hidden_size))
        carried = state.carried
        # Rank by end within each stream: windows of one rank are independent.
        order = np.lexsort((end_time, stream))
        rank = np.zeros(n, np.int64)
        first = np.r_[True, stream[order][1:] != stream[order][:-1]]
        run_start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
        rank[order] = np.arange(n) - run_start
        spacing = float(np.max(np.diff(self.ts))) if len(self.ts) > 1 else 0.0
        for r in range(int(rank.max()) + 1 if n else 0):
            index = np.flatnonzero(rank == r)
            first_time = end_time[index] - (self.ts[-1] - self.ts[0])
            for j, i in enumerate(index):
                hit = np.flatnonzero(carried.stream == stream[i])
                if hit.size:
                    gap = first_time[j] - carried.end_time[hit[0]]
                    tolerance = _ROUNDING * np.spacing(max(1.0, abs(end_time[i])))
                    if -tolerance <= gap <= spacing * (1 + 1e-9) + tolerance:
                        y0[i] = carried.y[hit[0]]
            out, final = self._solve(model, xs[index], y0[index])
            outputs[index] = out
            carried = _carry(carried, stream[index], end_time[index], final)
        new = self._unlabelled(model, xs, y0, stream, end_time)
        state = state.replace(
            pending=state.pending.append(new),
            carried=carried,
            now=now,
            predicted=state.predicted + n,
        )
        return outputs, state

    def _unlabelled(self, model, xs, y0=None, stream=None, end_time=None):
        """Windows as a buffer whose labels are not yet known."""
        n = xs.shape[0]
        if self.task == "classes":
            labels = np.full((n,), -1, np.int32)
        else:
            labels = np.full((n, model.output_size), np.nan)
        return WindowBuffer(
            xs=xs,
            y0=np.zeros((n, model.hidden_size)) if y0 is None else y0,
            labels=labels,
            stream=np.zeros((n,), np.int64) if stream is None else stream,
            end_time=np.zeros((n,)) if end_time is None else end_time,
        )

    def _values(self, windows) -> np.ndarray:
        """The windows' values, checked against the learner's grid."""
        if isinstance(windows, SequenceDataset):
            shifted = windows.ts - windows.ts[:, :1] + self.ts[0]
            if windows.ts.shape[1] != len(self.ts) or not np.allclose(
                shifted, self.ts[None], rtol=1e-9, atol=0
            ):
                raise ValueError(
                    "The windows are not on the learner's time grid ts "
                    f"({len(self.ts)} times, {self.ts[0]} to {self.ts[-1]})."
                )
            windows = windows.xs
        xs = np.asarray(windows, np.float64)
        if xs.ndim != 3 or xs.shape[1] != len(self.ts):
            raise ValueError(
                f"windows must be (n, {len(self.ts)}, channels): one value per "
                f"time of the learner's grid ts; got {xs.shape}."
            )
        return xs

    @property
    def _step(self) -> float:
        """The smallest step of the learner's grid, in the stream's time unit."""
        return float(np.min(np.diff(np.asarray(self.ts, np.float64))))

    def _advance(
        self, state: OnlineState, now: float, latest_end: bool = False
    ) -> float:
        """`now`, checked to be finite, fine enough, and not to go back
        (`latest_end`: `now` was not given, but taken as the windows' latest
        end, which the message then names)."""
        now = float(_end_times(now, self._step, "now")[0])
        if not now >= state.now:
            raise ValueError(
                (
                    f"The windows end by {now}, before the stream's time so far "
                    f"({state.now}): windows arrive in time order, each after "
                    "the last predicted (give now=state.now for a late one of "
                    "another stream)."
                )
                if latest_end
                else f"now={now} is before the stream's time so far "
                f"({state.now}): the stream's time cannot go back."
            )
        return now

    def _path(self, xs: np.ndarray, dtype):
        """The windows' input path on the learner's grid."""
        n = xs.shape[0]
        data = SequenceDataset(
            ts=np.broadcast_to(self.ts, (n, len(self.ts))),
            xs=xs,
            lengths=np.full(n, len(self.ts), np.int32),
            labels=np.zeros(n, np.int32),
        )
        return make_input_path(data, dtype=dtype, **self.path_options)

    def _solve(self, model, xs, y0):
        """Outputs and final states of windows, in batches of `batch_size`."""
        outputs, finals = [], []
        dtype = self._dtype(model)
        for first in range(0, xs.shape[0], self.batch_size):
            index = np.arange(first, min(first + self.batch_size, xs.shape[0]))
            real = index.size
            index = np.resize(index, self.batch_size)  # one shape, one compile
            path = self._path(xs[index], dtype)
            out, final = _outputs_and_final(
                model, path, jnp.asarray(y0[index], dtype), self.integrator
            )
            outputs.append(np.asarray(out)[:real])
            finals.append(np.asarray(final)[:real])
        return np.concatenate(outputs), np.concatenate(finals)

    @staticmethod
    def _dtype(model):
        floats = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
        return floats[0].dtype if floats else jnp.zeros(()).dtype

    # -- labels -------------------------------------------------------------

    def label(
        self,
        state: OnlineState,
        stream: Sequence[int] | np.ndarray,
        end_time: Sequence[float] | np.ndarray,
        labels: np.ndarray | Sequence,
        now: float,
    ) -> OnlineState:
        """Labels that arrived at `now` for pending windows (named by stream
        and end, as predicted): those windows become trainable at the next
        `update`.

        **Arguments:** `stream`, `end_time`: `[n]` the windows; `labels`:
        `int[n]` class indices or `float[n, output_size]` targets; `now`: the
        stream's time the labels arrived at.

        **Raises:** `ValueError` for a label that arrives before its window
        has ended (`now < end_time`: it would be known before its window's
        data), a window not pending (never predicted, or labelled already), a
        window labelled twice in the call, a class outside `[0, output_size)`,
        a target of another shape or not finite, a `now` before the state's,
        a stream that is not an integer, or an end time or `now` that is not
        finite or was given in a float too coarse for the learner's grid at
        its size (Unix seconds in float32).
        """
        stream = _streams(stream)
        end_time = _end_times(end_time, self._step)
        now = self._advance(state, now)
        early = end_time > now
        if np.any(early):
            i = int(np.argmax(early))
            raise ValueError(
                f"A label for the window of stream {stream[i]} ending at "
                f"{end_time[i]} arrived at {now}, before the window ended: a label "
                "cannot be known before its window's data."
            )
        size = state.model.output_size
        if self.task == "classes":
            labels = np.asarray(labels).reshape(-1)
            if not np.issubdtype(labels.dtype, np.integer) or np.any(
                (labels < 0) | (labels >= size)
            ):
                raise ValueError(
                    f"Class labels must be integers in [0, {size}); got {labels} "
                    f"({labels.dtype})."
                )
            labels = labels.astype(np.int32)
        else:
            labels = np.asarray(labels, np.float64)
            if labels.shape != (stream.shape[0], size) or not np.all(
                np.isfinite(labels)
            ):
                raise ValueError(
                    f"Regression targets must be finite, ({stream.shape[0]}, "
                    f"{size}) for {stream.shape[0]} windows; got {labels.shape}."
                )
        if labels.shape[0] != stream.shape[0] or end_time.shape != stream.shape:
            raise ValueError(
                f"{stream.shape[0]} windows need as many end times and labels; got "
                f"{end_time.shape[0]} and {labels.shape[0]}."
            )
        _distinct_windows(stream, end_time, "labelled twice in one call")
        pending = state.pending
        where = []
        for s, t in zip(stream, end_time, strict=True):
            hit = np.flatnonzero((pending.stream == s) & (pending.end_time == t))
            if not hit.size:
                raise ValueError(
                    f"No pending window of stream {s} ends at {t}: label windows "
                    "after predicting them, once each, by the end times they were "
                    f"predicted with.{_nearest_end(pending, int(s), float(t))}"
                )
            where.append(hit[0])
        where = np.asarray(where, np.int64)
        arrived = pending.take(where)
        arrived = eqx.tree_at(lambda b: b.labels, arrived, labels)
        keep = np.ones(len(pending), bool)
        keep[where] = False
        return state.replace(
            pending=pending.take(keep),
            fresh=state.fresh.append(arrived),
            now=now,
            labelled=state.labelled + len(where),
        )

    # -- updates ------------------------------------------------------------

    def update(self, state: OnlineState) -> tuple[OnlineState, dict[str, int | float]]:
        """Train on the windows labelled since the last update: `passes` passes
        in batches of `batch_size`, each batch its new windows plus, with
        replay, `round(share * batch_size)` windows (at least 1, at most
        `batch_size - 1`) drawn from the buffer
        (without replacement, by `(seed, updates)`), weighted `replay.weight`.
        Then the new windows enter the replay buffer, and with EWC their Fisher
        is added to the running sum and, every `ewc.every` windows, consolidated
        into the penalty. Nothing happens without new windows.

        **Returns:** `(state, record)`: `record` holds `windows` (the new
        ones), `steps`, `loss` (the data loss per unit of weight over the
        steps' batches, replayed windows included; `nan` where no step
        succeeded) and, with a penalty, `penalty` (its mean).

        **Raises:** what the failure policy raises; as the model's solve.
        """
        fresh = state.fresh
        if not len(fresh):
            return state, dict(windows=0, steps=0, loss=np.nan)
        draw = np.random.default_rng([self.seed, state.updates])
        replayed = 0
        if self.replay is not None and self.replay.share > 0 and len(state.replay):
            # At least one replayed window and one new one per batch.
            wanted = round(self.replay.share * self.batch_size)
            replayed = min(max(wanted, 1), self.batch_size - 1, len(state.replay))
        new_per_batch = self.batch_size - replayed
        objective = self.objective
        if state.penalty is not None:
            objective = Penalized(objective, state.penalty, name="ewc_penalty")
        dtype = self._dtype(state.model)

        def batches():
            for _ in range(self.passes):
                for first in range(0, len(fresh), new_per_batch):
                    rows = fresh.take(
                        np.arange(first, min(first + new_per_batch, len(fresh)))
                    )
                    weights = [np.ones(len(rows))]
                    if replayed:
                        pick = draw.choice(len(state.replay), replayed, replace=False)
                        rows = rows.append(state.replay.take(pick))
                        weights.append(np.full(replayed, self.replay.weight))
                    yield self._batch(rows, np.concatenate(weights), dtype)

        train = state.train.replace(totals={})
        train = train_on(
            train,
            batches(),
            optimizer=self.optimizer,
            integrator=self.integrator,
            objective=objective,
            on_failure=self.on_failure,
        )
        weight = train.totals.get("weight", 0.0)
        record = dict(
            windows=len(fresh),
            steps=train.batch,
            loss=train.totals.get("loss", np.nan) / weight if weight else np.nan,
        )
        if state.penalty is not None:
            penalty = train.totals.get("ewc_penalty", np.nan)
            record["penalty"] = penalty / weight if weight else np.nan
        state = state.replace(
            train=train.replace(batch=0, best_model=train.model),  # no epochs
            fresh=fresh.take(np.zeros(0, np.int64)),
            updates=state.updates + 1,
        )
        if self.replay is not None:
            state = self._remember(state, fresh, draw)
        if self.ewc is not None:
            state = self._consolidate(state, fresh, dtype)
        return state.replace(seen=state.seen + len(fresh)), record

    def _batch(self, rows: WindowBuffer, weights: np.ndarray, dtype) -> Batch:
        """Rows as one batch of `batch_size`, filled up with weight-0 copies."""
        real = len(rows)
        index = np.resize(np.arange(real), self.batch_size)
        rows = rows.take(index)
        weights = np.where(np.arange(self.batch_size) < real, weights[index], 0.0)
        path = self._path(rows.xs, dtype)
        label_dtype = jnp.int32 if self.task == "classes" else dtype
        return Batch(
            path=path,
            labels=jnp.asarray(rows.labels, label_dtype),
            weights=jnp.asarray(weights, dtype),
            y0=jnp.asarray(rows.y0, dtype),
        )

    def _remember(self, state, fresh, draw) -> OnlineState:
        """Reservoir sampling: each labelled window seen so far is in the buffer
        with probability `capacity / seen`."""
        buffer, seen = state.replay, state.seen
        for i in range(len(fresh)):
            row = fresh.take(np.array([i]))
            if len(buffer) < self.replay.capacity:
                buffer = buffer.append(row)
            else:
                slot = draw.integers(0, seen + i + 1)
                if slot < self.replay.capacity:
                    buffer = jax.tree.map(
                        lambda a, b, s=slot: np.concatenate([a[:s], b, a[s + 1 :]]),
                        buffer,
                        row,
                    )
        return state.replace(replay=buffer)

    def _consolidate(self, state, fresh, dtype) -> OnlineState:
        """Add the new windows' Fisher to the running sum; consolidate when
        `ewc.every` windows have gathered."""
        total = None
        for first in range(0, len(fresh), self.batch_size):
            rows = fresh.take(
                np.arange(first, min(first + self.batch_size, len(fresh)))
            )
            batch = self._batch(rows, np.ones(len(rows)), dtype)
            fisher = diagonal_fisher(
                state.model, batch, self.integrator, kind=self.ewc.kind
            )
            fisher = _scaled(fisher, float(len(rows)))
            total = fisher if total is None else jax.tree.map(np.add, total, fisher)
        if state.fisher_sum is not None:
            total = jax.tree.map(np.add, state.fisher_sum, total)
        count = state.since_consolidation + len(fresh)
        if count < self.ewc.every:
            return state.replace(fisher_sum=total, since_consolidation=count)
        mean = jax.tree.map(lambda f: jnp.asarray(f / count, dtype), total)
        penalty = consolidate(
            state.model,
            mean,
            previous=state.penalty,
            decay=self.ewc.decay,
            strength=self.ewc.strength,
        )
        return state.replace(penalty=penalty, fisher_sum=None, since_consolidation=0)


@eqx.filter_jit
def _outputs_and_final(model, path, y0, integrator):
    """A batch's outputs and the state at its end."""
    trajectory = model.solve(path, integrator=integrator, y0=y0)
    ys = trajectory.ys
    final = ys if ys.ndim == 2 else ys[:, -1]
    return model.outputs(ys), final


def _zero_rows(tree: PyTree, n: int) -> PyTree:
    """`tree` with every array replaced by `n` zero rows of its row shape."""
    return jax.tree.map(lambda a: np.zeros((n, *a.shape[1:]), a.dtype), tree)


def _nearest_end(pending: WindowBuffer, stream: int, end_time: float) -> str:
    """A hint naming the pending window of `stream` whose end is nearest
    `end_time`, where the two are equal in float32 (an end time passed through
    float32), else `""`."""
    ends = pending.end_time[pending.stream == stream]
    if not ends.size:
        return ""
    nearest = float(ends[np.argmin(np.abs(ends - end_time))])
    if np.float32(nearest) != np.float32(end_time):
        return ""
    return (
        f" Stream {stream}'s pending window nearest it ends at {nearest!r}: "
        "give end times in float64, exactly as predicted."
    )


def _distinct_windows(stream, end_time, what: str) -> list[tuple[int, float]]:
    """The windows' `(stream, end)` pairs.

    **Raises:** `ValueError` naming the first window that appears twice, as
    `what` says."""
    pairs = list(zip(stream.tolist(), end_time.tolist(), strict=True))
    twice = [pair for pair in pairs if pairs.count(pair) > 1]
    if twice:
        raise ValueError(
            f"The window of stream {twice[0][0]} ending at {twice[0][1]} is {what}."
        )
    return pairs


def _scaled(tree: PyTree, factor: float) -> PyTree:
    """Every array leaf of `tree` times `factor`, as NumPy arrays."""
    return jax.tree.map(lambda leaf: factor * np.asarray(leaf), tree)


def _carry(carried: CarriedState, stream, end_time, final) -> CarriedState:
    """Carried states with these streams' replaced by their new ones."""
    keep = ~np.isin(carried.stream, stream)
    return CarriedState(
        np.concatenate([carried.stream[keep], stream]),
        np.concatenate([carried.end_time[keep], end_time]),
        np.concatenate([carried.y[keep], np.asarray(final, np.float64)]),
    )


# -- checkpoints ------------------------------------------------------------

_BUFFERS = ("pending", "fresh", "replay")
_STATIC = ("now", "predicted", "labelled", "seen", "since_consolidation", "updates")


def save_online_state(
    directory: str | os.PathLike, state: OnlineState, *, keep: int = 2, **meta: Any
) -> str:
    """Checkpoint an online learner's whole state as `step-<n>` under
    `directory`, `n` the windows predicted, the labels received and the
    updates made so far (so a state that has changed is never saved under an
    earlier name), atomically and checksummed
    ([`ltc_jax.training.save_checkpoint`][]): the model, the optimiser state,
    the EWC penalty and Fisher sum, every buffer and the carried states, and
    the stream's position. A stream resumed from it with
    [`ltc_jax.training.load_online_state`][] continues exactly as an
    uninterrupted one (bit for bit on CPU). The newest `keep` checkpoints
    under `directory` are kept and older ones deleted; `meta`'s items are
    recorded with it.

    **Returns:** the checkpoint's folder.
    """
    train = state.train
    arrays = dict(
        model=train.model,
        opt_state=train.opt_state,
        penalty=state.penalty,
        fisher_sum=state.fisher_sum,
        carried=state.carried,
        **{name: getattr(state, name) for name in _BUFFERS},
    )
    sizes = {name: len(getattr(state, name)) for name in (*_BUFFERS, "carried")}
    position = {name: getattr(state, name) for name in _STATIC}
    position |= dict(
        step=train.step,
        failures_in_a_row=train.failures_in_a_row,
        first_loss=train.first_loss,
    )
    position["now"] = None if np.isinf(state.now) else state.now
    record = dict(
        meta,
        online=dict(
            position,
            sizes=sizes,
            penalty=state.penalty is not None,
            fisher_sum=state.fisher_sum is not None,
        ),
    )
    step = state.predicted + state.labelled + state.updates
    return save_checkpoint(directory, step, arrays, record, keep=keep)


def load_online_state(
    directory: str | os.PathLike,
    learner: OnlineLearner,
    model: AbstractSequenceModel,
) -> tuple[OnlineState, dict, list[str]]:
    """The newest usable online checkpoint under `directory`, falling back past
    damaged ones; the temporary folders of interrupted saves are removed first.

    **Arguments:** `directory`; `learner`, the learner that saved it (its
    optimiser and task shape the state); `model`, a model built with the saved
    options (its arrays are replaced).

    **Returns:** `(state, meta, skipped)`: the state, the checkpoint's metadata
    and a line for each damaged checkpoint passed over.

    The learner's settings apply from here on: its EWC's strength to the
    penalty saved (a stream resumed by the learner that saved it continues
    exactly); its replay must hold the windows saved (a smaller capacity is
    refused, not applied).

    **Raises:** [`ltc_jax.CheckpointError`][] if no checkpoint is usable, the
    newest intact one is not an online learner's, holds a model built with
    other options (each named), another optimiser's state (the first array
    that differs named), an EWC penalty the learner has no EWC for, or more
    replayed windows than the learner's replay keeps.
    """
    remove_interrupted_saves(directory)
    fresh = learner.init(model)
    skipped = []
    for folder in reversed(list_checkpoints(directory)):
        try:
            meta, blob = _read(folder)
        except CheckpointError as error:  # damaged: an older one may serve
            skipped.append(str(error))
            continue
        if "online" not in meta:
            raise CheckpointError(f"{folder} is not an online learner's checkpoint.")
        online = meta["online"]
        sizes = online["sizes"]
        penalty = None
        if online["penalty"] and learner.ewc is None:
            raise CheckpointError(
                f"{folder} holds an EWC penalty and the learner has no EWC: "
                "build the learner with the EWC it was saved with."
            )
        capacity = None if learner.replay is None else learner.replay.capacity
        if sizes["replay"] and (capacity is None or sizes["replay"] > capacity):
            raise CheckpointError(
                f"{folder} holds {sizes['replay']} replayed windows and the "
                f"learner keeps {capacity or 'none'}: build the learner with the "
                "Replay it was saved with (or a larger capacity)."
            )
        if online["penalty"]:
            parameters = eqx.filter(model, eqx.is_inexact_array)
            penalty = QuadraticPenalty(model, parameters, learner.ewc.strength)
        like = dict(
            model=model,
            opt_state=fresh.train.opt_state,
            penalty=penalty,
            fisher_sum=eqx.filter(model, eqx.is_inexact_array)
            if online["fisher_sum"]
            else None,
            carried=fresh.carried.resized(sizes["carried"]),
            **{name: fresh.pending.resized(sizes[name]) for name in _BUFFERS},
        )
        arrays = _restore(folder, meta, blob, like)
        for name in (*_BUFFERS, "carried"):  # host arrays, as the learner keeps
            arrays[name] = jax.tree.map(np.asarray, arrays[name])
        train = fresh.train.replace(
            model=arrays["model"],
            opt_state=arrays["opt_state"],
            best_model=arrays["model"],
            step=online["step"],
            failures_in_a_row=online["failures_in_a_row"],
            first_loss=online["first_loss"],
        )
        now = -np.inf if online["now"] is None else online["now"]
        penalty = arrays["penalty"]
        if penalty is not None:  # the learner's strength, not the one saved
            penalty = eqx.tree_at(lambda p: p.strength, penalty, learner.ewc.strength)
        state = OnlineState(
            train=train,
            penalty=penalty,
            fisher_sum=arrays["fisher_sum"],
            carried=arrays["carried"],
            now=now,
            predicted=online["predicted"],
            labelled=online["labelled"],
            seen=online["seen"],
            since_consolidation=online["since_consolidation"],
            updates=online["updates"],
            **{name: arrays[name] for name in _BUFFERS},
        )
        return state, meta, skipped
    detail = "; ".join(skipped) if skipped else "none found"
    raise CheckpointError(f"No usable checkpoint in {os.fspath(directory)} ({detail}).")
