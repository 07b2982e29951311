"""Time to event: objectives that train a model to predict when an event (a
failure, an alarm) happens, from labels that are either the event's time or a
time it had not yet happened by (censoring)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from ._batch import check_labelled
from ._events import Crossing
from ._integrator import Integrator
from ._model import AbstractSequenceModel, solves_ode
from ._objective import AbstractObjective, Metrics
from ._paths import InputPath
from ._solve import _clock_dtype
from .datasets import SequenceDataset


def check_event_labels(data: SequenceDataset, purpose: str) -> None:
    """Check time-to-event labels: `float[n, 2]`, each row `(time, observed)`
    with a finite time at or after the sequence's first observation and
    `observed` 1 (the event happened then) or 0 (censored: it had not happened
    by then).

    **Raises:** `ValueError` naming the problem and the first bad row.
    """
    check_labelled(data, purpose)
    labels = np.asarray(data.labels)
    name = data.name or "the data"
    if data.is_classification or labels.ndim != 2 or labels.shape[1] != 2:
        raise ValueError(
            f"Time-to-event labels are float (n, 2) rows of (time, observed); "
            f"{name} has {labels.dtype} labels of shape {labels.shape}."
        )
    bad = ~np.isfinite(labels[:, 0]) | (labels[:, 0] < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"An event time must be finite and at least 0 (from the sequence's "
            f"first observation); {name} has {labels[i, 0]} at row {i}."
        )
    bad = ~np.isin(labels[:, 1], (0.0, 1.0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"`observed` must be 1 (the event happened at the time) or 0 "
            f"(censored there); {name} has {labels[i, 1]} at row {i}."
        )


def _metrics(batch, per_sequence, trajectory) -> tuple[Float[Array, ""], Metrics]:
    weight = jnp.sum(batch.weights)
    loss_sum = jnp.sum(batch.weights * per_sequence)
    metrics = dict(
        weight=weight,
        loss=loss_sum,
        num_steps=jnp.max(trajectory.stats["num_steps"]),
        num_rejected_steps=jnp.max(trajectory.stats["num_rejected_steps"]),
    )
    return loss_sum / weight, metrics


def _rise(model: eqx.Module, output: int, y: Float[Array, " hidden"]):
    # The readout's rise from the zero state: 0 at the start whatever the
    # readout's bias, so the crossing upward of a positive threshold is always
    # ahead of a solve that starts there.
    return (model.outputs(y) - model.outputs(jnp.zeros_like(y)))[output]


class EventTimeLoss(AbstractObjective):
    r"""Time to event by a crossing: the predicted event time is where the
    model's readout, risen from the zero state, first crosses `threshold`
    upward, located by root finding ([`ltc_jax.Crossing`][]); training matches
    it to the observed time, or pushes it past a censored one.

    Each sequence's path is what the model sees before and during its
    follow-up: give its inputs past the last real observation held (see
    [`ltc_jax.datasets.hold_last`][]), so that the solve runs on into the
    time where the event is to be predicted, causally.

    **Labels:** `float[n, 2]` rows `(time, observed)`: the event's time on
    each sequence's own clock (from its first observation, the clock of
    `Trajectory.t_reached`, in the unit of the timestamps), and 1 where the
    event happened then, 0 where it had not happened by then (censored).

    **Loss** per sequence, with $\tau$ the crossing time (the solve's end
    where the readout never crossed), $T$ the label's time and $s$ = `scale`:

    - observed: $((\tau - T)/s)^2$, plus, where the readout never crossed,
        $(\theta - r)^2$ with $r$ its rise at the end and $\theta$ the
        threshold, so that a sequence that never fires still has a gradient
        toward firing (the crossing time's own gradient is 0 there);
    - censored: $(\max(T - \tau, 0)/s)^2$: only a crossing before $T$ costs.

    The loss is weighted by `batch.weights` and averaged; `metrics` hold
    `weight`, `loss`, and the solve's `num_steps` and `num_rejected_steps`
    (no `correct`: there are no classes).

    **Fields:**

    - `scale`: the time over which an error counts 1 in the loss, in the unit
        of the timestamps (the follow-up's length, say).
    - `threshold`: the readout's rise that is the event (default 1).
    - `output`: which of the model's outputs is read (static; default 0).
    - `rtol`, `atol`: the root finder's tolerances (static; see
        [`ltc_jax.Crossing`][]); default `None`: the square root of the
        clock's float epsilon: well below a step, and, with float32 times,
        above the rounding of a trained float32 readout (with float64 times
        the bracket still closes on the root).

    The model must be an [`ltc_jax.LTC`][] (or any model whose `solve` takes
    an `event`) with `readout_times=1`, starting from the zero state (or from
    `batch.y0`; the rise is still taken from the zero state), and a gradient
    mode that supports events: `checkpoint`, `full` or `direct`.

    **Raises** (when called): `ValueError` as the model's `solve` with an
    event (the reverse-solve gradient modes, `readout_times > 1`).

    Source: the event time as a differentiable root (Chen, Amos & Nickel
    2021, "Learning neural event functions for ordinary differential
    equations", ICLR); the censored squared error is a hinge on the censoring
    time, as in regression with censored targets.
    """

    scale: float
    threshold: float = 1.0
    output: int = eqx.field(static=True, default=0)
    rtol: float | None = eqx.field(static=True, default=None)
    atol: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if not (self.scale > 0 and self.threshold > 0):
            raise ValueError(
                f"scale and threshold must be positive; got {self.scale} and "
                f"{self.threshold}."
            )

    def crossing(self, model: eqx.Module, clock_dtype=jnp.float32) -> Crossing:
        """The [`ltc_jax.Crossing`][] this loss trains: the model's output
        `output` risen from the zero state crossing `threshold` upward, located
        to `rtol` and `atol` (default: the square root of `clock_dtype`'s
        epsilon, the solve's clock being the times' dtype, at least float32).
        Its readout holds the model, so the crossing time is differentiated
        with respect to the model's parameters."""
        default = float(jnp.finfo(_clock_dtype(clock_dtype)).eps) ** 0.5
        return Crossing(
            self.threshold,
            readout=eqx.Partial(_rise, model, self.output),
            direction="up",
            rtol=default if self.rtol is None else self.rtol,
            atol=default if self.atol is None else self.atol,
        )

    def check_data(self, model, data, purpose):
        """**Raises:** `NotImplementedError` for a model that solves no ODE (the
        CfC, the jump model: no event can stop them); `ValueError` unless the
        labels are time-to-event rows (`check_event_labels`), if a label's time
        lies past its sequence's last observation (where no crossing can be
        located: extend the follow-up with `hold_last`), or if `output` is not
        one of the model's outputs."""
        if not solves_ode(model):
            raise NotImplementedError(
                f"EventTimeLoss stops a solve at a crossing; {type(model).__name__} "
                "solves no ODE. Train its time to event with DiscreteHazardLoss."
            )
        check_event_labels(data, purpose)
        rows = np.arange(len(data))
        duration = data.ts[rows, data.lengths - 1] - data.ts[:, 0]
        late = np.asarray(data.labels)[:, 0] > duration * (1 + 1e-12)
        if late.any():
            i = int(np.argmax(late))
            raise ValueError(
                f"Row {i}'s event time {data.labels[i, 0]} lies past its "
                f"sequence's last observation ({duration[i]} from its first): no "
                "crossing can be located there. Extend each sequence over its "
                "follow-up (ltc_jax.datasets.hold_last)."
            )
        if isinstance(model, AbstractSequenceModel) and not (
            0 <= self.output < model.output_size
        ):
            raise ValueError(
                f"output {self.output} is not an output of a model with "
                f"output_size={model.output_size}."
            )

    def predict(
        self, model: eqx.Module, path: InputPath, integrator: Integrator
    ) -> tuple[Float[Array, " batch"], Bool[Array, " batch"]]:
        """Each sequence's predicted event time.

        **Returns:** `(times, fired)`: `(batch,)` the crossing time from each
        sequence's first observation, in the unit of the timestamps (its last
        observation where the readout never crossed), and `(batch,)` bools,
        whether it crossed.
        """
        event = self.crossing(model, path.ts.dtype)
        trajectory = model.solve(path, integrator=integrator, event=event)
        return trajectory.t_reached, trajectory.event_fired

    def __call__(self, model, batch, integrator):
        start = {} if batch.y0 is None else dict(y0=batch.y0)
        event = self.crossing(model, batch.path.ts.dtype)
        trajectory = model.solve(
            batch.path, integrator=integrator, event=event, **start
        )
        dtype = trajectory.ys.dtype
        time = batch.labels[:, 0].astype(dtype)
        observed = batch.labels[:, 1] > 0.5
        tau = trajectory.t_reached.astype(dtype)
        fired = trajectory.event_fired
        rise = jax.vmap(lambda y: _rise(model, self.output, y))(trajectory.ys)
        short = self.threshold - rise  # > 0 where it never crossed
        error = (tau - time) / self.scale
        per_sequence = jnp.where(
            observed,
            error**2 + jnp.where(fired, 0, short**2),
            jnp.maximum(-error, 0) ** 2,
        )
        return _metrics(batch, per_sequence, trajectory)


class DiscreteHazardLoss(AbstractObjective):
    r"""Time to event by a hazard readout: the model's `output_size` outputs
    at the end of each sequence are the logits of the event's hazard in equal
    bins of `horizon` after that end; training maximises the censored
    likelihood.

    With $h_k = \sigma(\text{logit}_k)$ the probability of the event in bin
    $k$ given none before, an event observed in bin $k$ has likelihood
    $h_k \prod_{j<k} (1 - h_j)$; a sequence censored in bin $k$ (no event
    yet) survived the bins before it, $\prod_{j<k} (1 - h_j)$; an event or a
    censoring time after `horizon` survived them all. The loss is the
    negative log-likelihood per sequence, weighted by `batch.weights` and
    averaged; an event time before the sequence's end counts in bin 0.

    **Labels:** as [`ltc_jax.training.EventTimeLoss`][]: `float[n, 2]` rows
    `(time, observed)`, the time from each sequence's first observation. The
    bins start at each sequence's last observation: give it the sequences
    without a follow-up (not through `hold_last`, which would move the bins
    by the follow-up's length).

    **Fields:**

    - `horizon`: the time the bins cover after each sequence's last
        observation, in the unit of the timestamps.

    **Raises** (when called): as the model's `solve`.

    Source: Gensheimer & Narasimhan 2019, "A scalable discrete-time survival
    model for neural networks", PeerJ 7:e6257 (the logistic hazard, as
    nnet-survival trains it).
    """

    horizon: float

    def __check_init__(self):
        if not self.horizon > 0:
            raise ValueError(f"horizon must be positive; got {self.horizon}.")

    def check_data(self, model, data, purpose):
        """**Raises:** `ValueError` unless the labels are time-to-event rows
        (`check_event_labels`)."""
        check_event_labels(data, purpose)

    def _hazard_logits(self, model, path, integrator, y0=None):
        start = {} if y0 is None else dict(y0=y0)
        trajectory = model.solve(path, integrator=integrator, **start)
        logits = model.outputs(trajectory.ys)
        return logits, trajectory

    def survival(
        self, model: eqx.Module, path: InputPath, integrator: Integrator
    ) -> Float[Array, "batch bins"]:
        """`(batch, bins)`: the probability of no event by the end of each bin,
        the bins `output_size` equal parts of `horizon` after each sequence's
        last observation."""
        logits, _ = self._hazard_logits(model, path, integrator)
        return jnp.exp(jnp.cumsum(jax.nn.log_sigmoid(-logits), axis=-1))

    def predict(
        self, model: eqx.Module, path: InputPath, integrator: Integrator
    ) -> tuple[Float[Array, " batch"], Bool[Array, " batch"]]:
        """Each sequence's median predicted event time.

        **Returns:** `(times, within)`: `(batch,)` the time at which the
        survival probability falls to one half (linear within a bin), from each
        sequence's first observation, in the unit of the timestamps (the end
        of `horizon` where it stays above one half), and `(batch,)` bools,
        whether it falls to one half within `horizon`.
        """
        survival = self.survival(model, path, integrator)
        bins = survival.shape[-1]
        width = self.horizon / bins
        before = jnp.concatenate([jnp.ones_like(survival[:, :1]), survival[:, :-1]], 1)
        below = survival <= 0.5
        within = jnp.any(below, axis=-1)
        k = jnp.argmax(below, axis=-1)
        s0 = jnp.take_along_axis(before, k[:, None], 1)[:, 0]
        s1 = jnp.take_along_axis(survival, k[:, None], 1)[:, 0]
        fraction = (s0 - 0.5) / jnp.maximum(s0 - s1, jnp.finfo(s0.dtype).tiny)
        after = jnp.where(
            within, (k.astype(fraction.dtype) + fraction) * width, self.horizon
        )
        end = (path.t_end - path.t_start).astype(after.dtype)
        return end + after, within

    def __call__(self, model, batch, integrator):
        logits, trajectory = self._hazard_logits(
            model, batch.path, integrator, batch.y0
        )
        bins = logits.shape[-1]
        path = batch.path
        end = (path.t_end - path.t_start).astype(logits.dtype)
        after = batch.labels[:, 0].astype(logits.dtype) - end
        observed = batch.labels[:, 1] > 0.5
        k = jnp.floor(after / (self.horizon / bins))
        # An event at the horizon itself is in the last bin, not past it.
        inside = (k < bins) | (observed & (after <= self.horizon))
        k = jnp.clip(k, 0, bins - 1).astype(jnp.int32)
        index = jnp.arange(bins, dtype=jnp.int32)[None]
        # Survived every bin before k; and bin k too where the time is past
        # the horizon.
        survived = (index < k[:, None]) | (~inside[:, None] & (index == k[:, None]))
        log_survive = jax.nn.log_sigmoid(-logits)
        log_event = jnp.take_along_axis(jax.nn.log_sigmoid(logits), k[:, None], 1)
        per_sequence = -jnp.sum(jnp.where(survived, log_survive, 0), axis=-1) - (
            jnp.where(observed & inside, log_event[:, 0], 0)
        )
        return _metrics(batch, per_sequence, trajectory)
