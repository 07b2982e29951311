"""The sequence model: encoder, cells, readouts and what a solve saves."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import jaxtyping
import numpy as np
import pytest
from helpers import max_relative_error, mode_options, ragged_batch

import ltc_jax


def _loss(model, integrator, path):
    return jnp.sum(jnp.sin(model(path, integrator=integrator)))


def test_encoder_is_trained_by_every_gradient_mode(getkey):
    """The encoder sits in the vector field, not in the solve's data, so the
    continuous adjoint differentiates it too: every mode gives the same gradient
    (float64, small RK4 steps), and the encoder's is not zero."""
    encoder = eqx.nn.Linear(3, 5, key=getkey())
    model = ltc_jax.LTC(3, 4, 2, encoder=encoder, encoded_size=5, key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 5, 3)
    path = ltc_jax.InputPath(ts, xs, lengths)
    grads = {}
    for mode in ltc_jax.ADJOINT_NAMES:
        integrator = ltc_jax.make_integrator(
            "rk4", mode, dt0=0.01, max_steps=400, **mode_options(mode)
        )
        grads[mode] = eqx.filter_jit(eqx.filter_grad(_loss))(model, integrator, path)
    for mode in ("checkpoint", "backsolve", "windowed", "direct"):
        assert max_relative_error(grads[mode], grads["full"]) < 1e-6, mode
    assert float(jnp.max(jnp.abs(grads["backsolve"].encoder.weight))) > 1e-3


def test_encoder_applies_to_each_observation_vector(getkey):
    """With an encoder the cell sees encoder(x(t)): the same solve as the cell
    alone on encoded observations (a linear encoder commutes with the linear
    interpolation)."""
    encoder = eqx.nn.Linear(3, 2, key=getkey())
    model = ltc_jax.LTC(3, 4, 2, encoder=encoder, encoded_size=2, key=getkey())
    plain = ltc_jax.LTC(2, 4, 2, key=getkey())
    plain = eqx.tree_at(
        lambda m: (m.cell, m.readout), plain, (model.cell, model.readout)
    )
    ts = jnp.linspace(0.0, 3.0, 6)
    xs = jr.normal(getkey(), (2, 6, 3))
    integrator = ltc_jax.make_integrator("heun", dt0=0.1, max_steps=64)
    encoded = jax.vmap(jax.vmap(encoder))(xs)
    np.testing.assert_allclose(
        model(ltc_jax.InputPath(ts, xs), integrator=integrator),
        plain(ltc_jax.InputPath(ts, encoded), integrator=integrator),
        rtol=1e-12,
    )


def test_readouts_on_any_leading_axes(getkey):
    linear = ltc_jax.LinearReadout(4, 3, key=getkey())
    ys = jr.normal(getkey(), (2, 5, 4))
    expected = np.einsum("btk,ok->bto", ys, linear.weight) + np.asarray(linear.bias)
    np.testing.assert_allclose(linear(ys), expected, rtol=1e-12)
    motor = ltc_jax.MotorReadout(2)
    motor = eqx.tree_at(
        lambda m: (m.weight, m.bias),
        motor,
        (jnp.array([2.0, -1.0]), jnp.array([0.5, 0.0])),
    )
    np.testing.assert_allclose(
        motor(ys), np.asarray(ys[..., :2]) * [2.0, -1.0] + [0.5, 0.0], rtol=1e-12
    )


def test_outputs_at_every_observation_end_with_the_final_output(getkey):
    model = ltc_jax.LTC(2, 4, 3, key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 6, 2)
    path = ltc_jax.InputPath(ts, xs, lengths)
    integrator = ltc_jax.make_integrator("rk4", dt0=0.05, max_steps=200)
    every = model(path, integrator=integrator, save="observations")
    final = model(path, integrator=integrator)
    assert every.shape == (3, 6, 3)
    last = np.asarray(every)[np.arange(3), np.asarray(lengths) - 1]
    np.testing.assert_allclose(last, final, rtol=1e-12)


def test_a_cell_of_your_own_gets_a_linear_readout(getkey):
    """Any vector field `(t, h, path)` works as the cell: here dh/dt = -h + x(t)
    of a constant input 1, whose solution from 0 is 1 - exp(-t)."""

    class Relax(eqx.Module):
        def __call__(self, t, y, args):
            return -y + args.evaluate(t)

    model = ltc_jax.LTC(3, 3, 1, cell=Relax(), key=getkey())
    ts = jnp.linspace(0.0, 2.0, 3)
    path = ltc_jax.InputPath(ts, jnp.ones((2, 3, 3)))
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-10, atol=1e-12)
    states = model.solve(path, integrator=integrator).ys
    np.testing.assert_allclose(states, 1 - np.exp(-2.0), rtol=1e-8)
    assert isinstance(model.readout, ltc_jax.LinearReadout)


def test_bad_cell_names_the_choices(getkey):
    with pytest.raises(ValueError, match="Unknown cell 'hodgkin'; choose"):
        ltc_jax.LTC(2, 6, 2, cell="hodgkin", key=getkey())


def test_readout_times_read_the_states_at_even_fractions_of_the_sequence(getkey):
    """On a grid of 9 observations, readout_times=4 reads the states at
    observations 2, 4, 6 and 8 (fixed steps land on them): the outputs are the
    linear readout of those four states, concatenated in time order."""
    model = ltc_jax.LTC(2, 4, 3, readout_times=4, key=getkey())
    assert model.readout.weight.shape == (3, 16)
    ts = 0.25 * jnp.arange(9.0)
    xs = jr.normal(getkey(), (2, 9, 2))
    path = ltc_jax.InputPath(ts, xs)
    integrator = ltc_jax.make_integrator("rk4", dt0=0.05, max_steps=200)
    every = model.solve(path, integrator=integrator, save="observations").ys
    read = np.asarray(every)[:, [2, 4, 6, 8]].reshape(2, 16)
    weight, bias = np.asarray(model.readout.weight), np.asarray(model.readout.bias)
    expected = read @ weight.T + bias
    np.testing.assert_allclose(
        model(path, integrator=integrator), expected, rtol=1e-10, atol=1e-12
    )


def test_pooled_readout_reads_final_mean_and_max_of_the_readout_times(getkey):
    """With `readout_features="pooled"`, the readout of the states at
    observations 2, 4, 6 and 8 (as above) reads [the last, their mean, their
    maximum], per unit, standardised across those features: a NumPy
    transcription of the summary, through the same linear readout; with
    `"both"`, the four states side by side and then that summary."""
    model_key = getkey()
    ts = 0.25 * jnp.arange(9.0)
    xs = jr.normal(getkey(), (2, 9, 2))
    path = ltc_jax.InputPath(ts, xs)
    integrator = ltc_jax.make_integrator("rk4", dt0=0.05, max_steps=200)
    for features, read_size in (("pooled", 3 * 4), ("both", (4 + 3) * 4)):
        model = ltc_jax.LTC(
            2, 4, 3, readout_times=4, readout_features=features, key=model_key
        )
        assert model.readout.weight.shape == (3, read_size)
        every = model.solve(path, integrator=integrator, save="observations").ys
        read = np.asarray(every)[:, [2, 4, 6, 8]]
        summary = np.concatenate([read[:, -1], read.mean(1), read.max(1)], axis=1)
        mean, std = summary.mean(1, keepdims=True), summary.std(1, keepdims=True)
        summary = (summary - mean) / np.sqrt(std**2 + 1e-5)
        if features == "both":
            summary = np.concatenate([read.reshape(2, 16), summary], axis=1)
        weight = np.asarray(model.readout.weight)
        np.testing.assert_allclose(
            model(path, integrator=integrator),
            summary @ weight.T + np.asarray(model.readout.bias),
            rtol=1e-10,
            atol=1e-12,
        )
    # One readout time: the pooled summary of one state is not taken; the
    # outputs are those of the final-state readout with the same parameters.
    key = getkey()
    single = ltc_jax.LTC(2, 4, 3, readout_features="both", key=key)
    final = ltc_jax.LTC(2, 4, 3, key=key)
    assert single.readout.weight.shape == (3, 4)
    np.testing.assert_array_equal(
        single(path, integrator=integrator), final(path, integrator=integrator)
    )


def test_readout_times_are_checked(getkey):
    with pytest.raises(ValueError, match="positive int"):
        ltc_jax.LTC(2, 4, 3, readout_times=0, key=getkey())
    with pytest.raises(ValueError, match="motor neurons"):
        ltc_jax.LTC(2, 8, 2, cell="biophysical", readout_times=2, key=getkey())
    with pytest.raises(ValueError, match="readout_features must be 'states'"):
        ltc_jax.LTC(2, 8, 2, cell="biophysical", readout_features="both", key=getkey())
    # A ValueError, or under the tests' runtime type checks the Literal's own.
    with pytest.raises((ValueError, jaxtyping.TypeCheckError)):
        ltc_jax.LTC(2, 4, 3, readout_features="mean", key=getkey())
    model = ltc_jax.LTC(2, 4, 3, readout_times=2, key=getkey())
    path = ltc_jax.InputPath(jnp.arange(3.0), jnp.ones((1, 3, 2)))
    integrator = ltc_jax.make_integrator("rk4", dt0=0.5, max_steps=16)
    with pytest.raises(ValueError, match="readout_times"):
        model(path, integrator=integrator, save="observations")
    with pytest.raises(ValueError, match=r"\(\.\.\., 2, 4\)"):
        model.outputs(jnp.zeros((1, 4)))
