"""The LTC with jumps at observations (`ltc_jax.JumpLTC`) against a NumPy
transcription of its flow and update, on ragged irregular batches (float64);
its training; its refusals (the command line: tests/test_cli.py)."""

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import ragged_batch

import ltc_jax
from ltc_jax.datasets import SequenceDataset


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def numpy_jump(model, ts, xs, length):
    """One sequence's state after its last observation, written out: before
    each observation, `substeps` fused steps `h <- (h + dt f A) / (1 + dt (1 /
    tau + f))` of the gate `f = sigmoid(W_rec h + b)` (its input held at 0)
    over the elapsed time; then the GRU update of PyTorch's convention (reset,
    update and new gates)."""
    field, gru = model.field, model.update
    w_rec, b = np.asarray(field.weight_rec), np.asarray(field.bias)
    tau, A = np.asarray(field.tau), np.asarray(field.A)
    w_ih, w_hh = np.asarray(gru.weight_ih), np.asarray(gru.weight_hh)
    bias, bias_n = np.asarray(gru.bias), np.asarray(gru.bias_n)
    hidden = w_rec.shape[0]
    h = np.zeros(hidden)
    for i in range(length):
        elapsed = 0.0 if i == 0 else ts[i] - ts[i - 1]
        dt = elapsed / model.substeps
        for _ in range(model.substeps):
            f = _sigmoid(w_rec @ h + b)
            h = (h + dt * f * A) / (1 + dt * (1 / tau + f))
        i_r, i_z, i_n = np.split(w_ih @ xs[i] + bias, 3)
        h_r, h_z, h_n = np.split(w_hh @ h, 3)
        r, z = _sigmoid(i_r + h_r), _sigmoid(i_z + h_z)
        n = np.tanh(i_n + r * (h_n + bias_n))
        h = (1 - z) * n + z * h
    return h


@pytest.mark.parametrize("substeps", [1, 3])
def test_jump_states_match_a_numpy_transcription(substeps):
    """Each sequence of a ragged batch at its own irregular times: the state
    after its last observation, and after each observation (`save=
    "observations"`, padding repeating the last), equal the transcription's to
    1e-10; the readout reads the final state."""
    ts, xs, lengths = ragged_batch(jr.key(0), 3, 9, 2)
    model = ltc_jax.JumpLTC(
        2, 5, 3, tau_init=(0.2, 3.0), substeps=substeps, key=jr.key(1)
    )
    path = ltc_jax.InputPath(ts, xs, lengths=lengths)
    final = model.solve(path).ys
    every = model.solve(path, save="observations").ys
    for b in range(3):
        n = int(lengths[b])
        expected = numpy_jump(model, np.asarray(ts[b]), np.asarray(xs[b]), n)
        np.testing.assert_allclose(final[b], expected, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(every[b, n - 1], expected, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(
            every[b, n:], np.broadcast_to(expected, every[b, n:].shape), rtol=1e-12
        )
        before = numpy_jump(model, np.asarray(ts[b]), np.asarray(xs[b]), n - 1)
        np.testing.assert_allclose(every[b, n - 2], before, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model(path), model.outputs(final), rtol=1e-12)
    assert model.options()["substeps"] == substeps


def test_jump_options_are_checked():
    """A non-positive `substeps` is refused, naming it."""
    with pytest.raises(ValueError, match="substeps"):
        ltc_jax.JumpLTC(2, 4, 2, substeps=0, key=jr.key(0))


def test_jump_model_learns_a_gap_it_only_sees_through_time():
    """Two classes whose observations are all 1 and differ only in their gaps
    (0.5 against 2): the jump model reads time through its flow between
    observations, and fits them (training accuracy 1)."""
    rng = np.random.default_rng(0)
    n, length = 32, 6
    labels = np.arange(n) % 2
    gaps = np.where(labels[:, None] == 1, 2.0, 0.5) * np.ones((n, length))
    ts = np.cumsum(gaps + 0.01 * rng.random((n, length)), axis=1)
    xs = np.ones((n, length, 1))
    data = SequenceDataset(
        ts, xs, np.full(n, length, np.int32), labels.astype(np.int32)
    )
    model = ltc_jax.JumpLTC(1, 8, 2, tau_init=(0.5, 4.0), key=jr.key(0))
    model, history = ltc_jax.fit(
        model,
        data,
        integrator=ltc_jax.make_integrator("tsit5", "checkpoint", rtol=1e-3, atol=1e-3),
        optimizer=ltc_jax.training.make_optimizer(1e-2, 60 * 2),
        epochs=60,
        batch_size=16,
        progress=ltc_jax.training.NoFitProgress(),
    )
    assert history[-1]["accuracy"] == 1.0
    assert float(jnp.max(history[-1]["num_steps"])) == 2 * length
