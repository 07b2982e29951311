"""Time to event: the crossing-time and hazard objectives against second
methods (a dense grid, NumPy transcriptions, finite differences; float64), the
follow-up's held inputs, the label checks, and validation with an objective."""

import dataclasses

import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import ltc_jax
from ltc_jax.datasets import SequenceDataset, hold_last
from ltc_jax.training import DiscreteHazardLoss, EventTimeLoss


BATCH, TIMES, CHANNELS, HIDDEN = 4, 20, 2, 4
TS = np.linspace(0.0, 4.0, TIMES)


def _data(labels) -> SequenceDataset:
    xs = np.asarray(jr.normal(jr.key(1), (BATCH, TIMES, CHANNELS)))
    return SequenceDataset(
        ts=np.broadcast_to(TS, (BATCH, TIMES)).copy(),
        xs=xs,
        lengths=np.full(BATCH, TIMES, np.int32),
        labels=np.asarray(labels, np.float64),
    )


def _model(outputs=1):
    """An LTC whose readout, scaled by -20, rises by up to about 1 over [0, 4],
    in each sequence by its own amount."""
    model = ltc_jax.LTC(CHANNELS, HIDDEN, outputs, tau_init=(0.5, 2.0), key=jr.key(2))
    return eqx.tree_at(lambda m: m.readout.weight, model, -20 * model.readout.weight)


def _integrator(mode="checkpoint"):
    return ltc_jax.make_integrator("tsit5", mode, rtol=1e-10, atol=1e-10, dt0=0.01)


def _rises(model, data, n=800):
    """`(batch, n)` the readout's rise from the zero state at `n` times evenly
    spread over [0, 4] (a solve without an event), and those times."""
    path = ltc_jax.make_input_path(data)
    y0 = jnp.zeros((BATCH, HIDDEN))
    ys = ltc_jax.integrate(model.vector_field, path, y0, _integrator(), save=n).ys
    out = model.outputs(ys) - model.outputs(jnp.zeros(HIDDEN))[None, None]
    return np.asarray(out)[..., 0], 4.0 * np.arange(1, n + 1) / n


def _threshold(rises):
    """A level between the second and third largest of the sequences' peak
    rises: crossed by two sequences, not by the others."""
    peaks = np.sort(rises.max(axis=1))
    assert peaks[-3] > 0
    return float(0.5 * (peaks[-2] + peaks[-3]))


def test_crossing_time_matches_a_dense_grid_and_the_loss_its_transcription():
    """`EventTimeLoss.predict` finds where the rise first crosses the
    threshold upward, as linear interpolation on 800 dense states finds it
    (to 1e-4); where it never does, the last time. The loss is its NumPy
    transcription in all four cases: observed and fired, observed and never
    fired (with the readout's shortfall), censored before and after the
    crossing."""
    model = _model()
    probe = _data(np.zeros((BATCH, 2)))
    rises, times = _rises(model, probe)
    threshold = _threshold(rises)
    objective = EventTimeLoss(scale=2.0, threshold=threshold)
    path = ltc_jax.make_input_path(probe)
    predicted, fired = eqx.filter_jit(objective.predict)(model, path, _integrator())
    predicted, fired = np.asarray(predicted), np.asarray(fired)

    expected = np.full(BATCH, 4.0)
    for b in range(BATCH):
        above = np.flatnonzero(rises[b] >= threshold)
        if above.size:
            i = above[0]  # the rise starts at 0, below: i > 0
            fraction = (threshold - rises[b, i - 1]) / (rises[b, i] - rises[b, i - 1])
            expected[b] = times[i - 1] + fraction * (times[i] - times[i - 1])
    np.testing.assert_array_equal(fired, expected < 4.0)
    assert fired.any() and not fired.all()
    np.testing.assert_allclose(predicted, expected, atol=1e-4)

    # Labels: every sequence observed at 1.0, then every one censored at 1.0
    # and at 3.9 (before and after any crossing, or none).
    end_rise = rises[:, -1]
    call = eqx.filter_jit(lambda m, b: objective(m, b, _integrator()))
    for observed, time in ((1.0, 1.0), (0.0, 1.0), (0.0, 3.9), (1.0, 3.9)):
        data = _data(np.stack([np.full(BATCH, time), np.full(BATCH, observed)], 1))
        batch = ltc_jax.make_batch(data)
        loss, metrics = call(model, batch)
        error = (predicted - time) / 2.0
        if observed:
            per = error**2 + np.where(fired, 0.0, (threshold - end_rise) ** 2)
        else:
            per = np.maximum(-error, 0.0) ** 2
        np.testing.assert_allclose(float(loss), per.mean(), rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(float(metrics["loss"]), per.sum(), rtol=1e-6)
        assert float(metrics["weight"]) == BATCH


@pytest.mark.parametrize("mode", ["checkpoint", "full", "direct"])
def test_crossing_loss_gradient_matches_finite_differences(mode):
    """The gradient of the crossing-time loss (through the event time's
    implicit derivative, and the shortfall of the sequences that never fire)
    along random directions matches central finite differences, to 1e-6."""
    model = _model()
    probe = _data(np.zeros((BATCH, 2)))
    threshold = _threshold(_rises(model, probe)[0])
    labels = np.stack([np.array([1.0, 2.0, 3.0, 1.5]), np.array([1, 1, 0, 0.0])], 1)
    batch = ltc_jax.make_batch(_data(labels))
    objective = EventTimeLoss(scale=2.0, threshold=threshold)
    integrator = _integrator(mode)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    flat, unflatten = jax.flatten_util.ravel_pytree(params)

    @jax.jit
    def loss(theta):
        m = eqx.combine(unflatten(theta), static)
        return objective(m, batch, integrator)[0]

    gradient = jax.grad(loss)(flat)
    assert np.all(np.isfinite(gradient)) and float(jnp.max(jnp.abs(gradient))) > 0
    for seed in range(3):
        v = jr.normal(jr.key(10 + seed), flat.shape, flat.dtype)
        v = v / jnp.linalg.norm(v)
        h = 1e-5
        fd = (loss(flat + h * v) - loss(flat - h * v)) / (2 * h)
        np.testing.assert_allclose(float(gradient @ v), float(fd), atol=1e-6)


def test_crossing_loss_refuses_the_reverse_solve_modes():
    """The event time is not differentiated by a reverse solve: `backsolve`
    is refused, naming the modes that work."""
    batch = ltc_jax.make_batch(_data(np.ones((BATCH, 2))))
    integrator = ltc_jax.make_integrator("tsit5", "backsolve", dt0=0.01)
    with pytest.raises(ValueError, match="checkpoint"):
        EventTimeLoss(scale=1.0)(_model(), batch, integrator)


def _numpy_hazard(logits, after, observed, horizon):
    """Negative log-likelihood of the discrete hazard, term by term, and the
    median time (from the end) by walking the survival curve."""
    bins = logits.shape[-1]
    width = horizon / bins
    hazard = 1.0 / (1.0 + np.exp(-logits))
    nll, median = [], []
    for h, t, o in zip(hazard, after, observed, strict=True):
        k = int(np.floor(t / width))
        if k >= bins and not (o and t <= horizon):  # past: survived every bin
            nll.append(-np.sum(np.log(1 - h)))
        else:  # an event at the horizon itself is in the last bin
            k = min(max(k, 0), bins - 1)
            value = -np.sum(np.log(1 - h[:k]))
            nll.append(value - (np.log(h[k]) if o else 0.0))
        survival, time = 1.0, horizon
        for j in range(bins):
            after_bin = survival * (1 - h[j])
            if after_bin <= 0.5:
                time = (j + (survival - 0.5) / (survival - after_bin)) * width
                break
            survival = after_bin
        median.append(time)
    return np.array(nll), np.array(median)


def test_hazard_loss_and_median_match_their_transcription():
    """`DiscreteHazardLoss`: the censored negative log-likelihood (an event in
    a bin, censored in one, past the horizon, before the sequence's end, and
    at the horizon itself) and the median predicted time equal a term-by-term
    NumPy transcription."""
    horizon, bins = 3.0, 6
    model = _model(bins)
    # Times from the first observation: the sequences end at 4.
    labels = np.array([[4.2, 1.0], [5.9, 0.0], [7.5, 1.0], [3.5, 1.0]])
    data = _data(labels)
    objective = DiscreteHazardLoss(horizon=horizon)
    batch = ltc_jax.make_batch(data)
    loss, metrics = objective(model, batch, _integrator())
    logits = np.asarray(model(batch.path, integrator=_integrator()))
    nll, median = _numpy_hazard(logits, labels[:, 0] - 4.0, labels[:, 1], horizon)
    np.testing.assert_allclose(float(loss), nll.mean(), rtol=1e-9)
    np.testing.assert_allclose(float(metrics["loss"]), nll.sum(), rtol=1e-9)
    at_horizon = ltc_jax.make_batch(_data(np.array([[7.0, 1.0]] * BATCH)))
    loss = objective(model, at_horizon, _integrator())[0]
    logits = np.asarray(model(at_horizon.path, integrator=_integrator()))
    expected = _numpy_hazard(logits, np.full(BATCH, 3.0), np.ones(BATCH), horizon)[0]
    np.testing.assert_allclose(float(loss), expected.mean(), rtol=1e-9)

    # A readout bias that makes the hazard high, so the median falls inside.
    model = eqx.tree_at(lambda m: m.readout.bias, model, jnp.full(bins, -0.5))
    logits = np.asarray(model(batch.path, integrator=_integrator()))
    _, median = _numpy_hazard(logits, labels[:, 0] - 4.0, labels[:, 1], horizon)
    times, within = objective.predict(model, batch.path, _integrator())
    np.testing.assert_allclose(np.asarray(times), 4.0 + median, rtol=1e-9)
    np.testing.assert_array_equal(np.asarray(within), median < horizon)
    assert np.asarray(within).any()


def test_hold_last_extends_each_sequence_with_its_last_observation():
    """Each sequence, of its own length, gets `knots` observations spread over
    `duration` after its last, each a copy of it; labels are kept."""
    data = SequenceDataset.from_sequences(
        [np.array([0.0, 1.0, 3.0]), np.array([0.5, 2.0])],
        [np.array([[1.0, np.nan], [2.0, 3.0], [4.0, np.nan]]), np.ones((2, 2))],
        labels=[0.5, 1.5],
    )
    held = hold_last(data, 2.0, 4)
    np.testing.assert_array_equal(held.lengths, [7, 6])
    np.testing.assert_allclose(held.ts[0], [0, 1, 3, 3.5, 4, 4.5, 5])
    np.testing.assert_allclose(held.ts[1, :6], [0.5, 2, 2.5, 3, 3.5, 4])
    np.testing.assert_array_equal(held.xs[0, 3:, 0], 4.0)
    assert np.isnan(held.xs[0, 3:, 1]).all()
    np.testing.assert_array_equal(held.labels, data.labels)
    with pytest.raises(ValueError, match="duration"):
        hold_last(data, 0.0, 2)
    with pytest.raises(ValueError, match="knots"):
        hold_last(data, 1.0, 0)


@pytest.mark.parametrize(
    "labels, match",
    [
        (np.zeros((BATCH, 1)), "shape"),
        (np.array([[1.0, 1.0], [-1.0, 1.0], [1.0, 0.0], [1.0, 0.0]]), "row 1"),
        (np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 0.5], [1.0, 0.0]]), "row 2"),
        (np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [4.5, 0.0]]), "Row 3.*past"),
    ],
)
def test_event_labels_are_checked_before_training(labels, match):
    """Labels that are not `(time, observed)` rows, a negative time, an
    `observed` other than 0 or 1, or a time past the sequence's end (4) are
    refused by `fit` before any compilation, each naming the problem; event
    labels under the default loss are refused as targets of the wrong
    width."""
    data = _data(labels)
    fit = dict(
        integrator=_integrator(),
        optimizer=ltc_jax.training.make_optimizer(1e-3, 1),
        epochs=1,
        batch_size=BATCH,
        progress=ltc_jax.training.NoFitProgress(),
    )
    with pytest.raises(ValueError, match=match):
        ltc_jax.fit(_model(), data, objective=EventTimeLoss(scale=1.0), **fit)
    with pytest.raises(ValueError, match="output_size=1"):
        ltc_jax.fit(_model(), _data(np.ones((BATCH, 2))), **fit)


@pytest.mark.filterwarnings("ignore:.*max_steps")
@pytest.mark.filterwarnings("ignore:Training did not lower the loss")
def test_validation_measures_the_training_objective():
    """With a time-to-event objective, `fit`'s validation loss is that
    objective's loss on the validation set (as `evaluate` measures it), not
    the default loss's."""
    labels = np.stack([np.array([1.0, 2.0, 3.0, 1.5]), np.array([1, 1, 0, 0.0])], 1)
    data = _data(labels)
    objective = DiscreteHazardLoss(horizon=2.0)
    model, history = ltc_jax.fit(
        _model(3),
        data,
        integrator=_integrator(),
        optimizer=ltc_jax.training.make_optimizer(1e-3, 1),
        epochs=1,
        batch_size=BATCH,
        objective=objective,
        validation=data,
        progress=ltc_jax.training.NoFitProgress(),
    )
    measured = ltc_jax.evaluate(
        model, data, integrator=_integrator(), objective=objective
    )
    np.testing.assert_allclose(history[-1]["validation_loss"], measured["loss"])


def test_a_root_finder_that_cannot_converge_is_named():
    """Tolerances no float64 readout can meet: training stops with a
    `SolverFailureError` that names the event's root finder and what to
    loosen, not a backward solve (there is none under `checkpoint`)."""
    model = _model()
    threshold = _threshold(_rises(model, _data(np.zeros((BATCH, 2))))[0])
    labels = np.stack([np.array([1.0, 2.0, 3.0, 1.5]), np.array([1, 1, 0, 0.0])], 1)
    objective = EventTimeLoss(scale=2.0, threshold=threshold, rtol=1e-300, atol=1e-300)
    with pytest.raises(ltc_jax.SolverFailureError, match="root finder.*rtol and atol"):
        ltc_jax.fit(
            model,
            _data(labels),
            integrator=_integrator(),
            optimizer=ltc_jax.training.make_optimizer(1e-3, 1),
            epochs=1,
            batch_size=BATCH,
            objective=objective,
            progress=ltc_jax.training.NoFitProgress(),
        )


def test_label_checks_pass_through_a_penalty_and_refuse_models_without_events():
    """`Penalized` checks the labels as the objective it wraps does (event rows
    pass under a penalty on an `EventTimeLoss`, and are refused under one on
    the default loss); a model that solves no ODE cannot take a crossing and
    is refused with the hazard loss named."""
    model = _model()
    data = _data(np.ones((BATCH, 2)))
    penalty = ltc_jax.training.QuadraticPenalty(model)
    Penalized = ltc_jax.training.Penalized
    Penalized(EventTimeLoss(scale=1.0), penalty).check_data(model, data, "training")
    with pytest.raises(ValueError, match="output_size=1"):
        Penalized(ltc_jax.training.SupervisedLoss(), penalty).check_data(
            model, data, "training"
        )
    jump = ltc_jax.JumpLTC(CHANNELS, HIDDEN, 1, key=jr.key(0))
    with pytest.raises(NotImplementedError, match="DiscreteHazardLoss"):
        EventTimeLoss(scale=1.0).check_data(jump, data, "training")
    DiscreteHazardLoss(horizon=1.0).check_data(jump, data, "training")


def test_crossing_is_located_at_loose_adaptive_tolerances():
    """At rtol = atol = 1e-3, Tsit5's steps are long and its dense output
    within one curves enough that plain Newton (diffrax's usual root finder)
    cycled and reported a failure, and without `throw` a time 0.15 late. The
    bracketed Newton of `Crossing` finds every crossing, as the tight solve's
    to 1e-3."""
    model = _model()
    rng = np.random.default_rng(0)
    data = _data(np.zeros((BATCH, 2)))
    data = dataclasses.replace(data, xs=rng.standard_normal(data.xs.shape))
    path = ltc_jax.make_input_path(data)
    objective = EventTimeLoss(scale=1.0, threshold=0.3)
    times = {}
    for tolerance in (1e-3, 1e-10):
        integrator = ltc_jax.make_integrator(
            "tsit5", "checkpoint", rtol=tolerance, atol=tolerance, dt0=0.01
        )
        solve = eqx.filter_jit(lambda m, p, i=integrator: objective.predict(m, p, i))
        times[tolerance], fired = solve(model, path)
        assert bool(jnp.all(fired))
    np.testing.assert_allclose(times[1e-3], times[1e-10], atol=1e-3)
