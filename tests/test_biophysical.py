"""The original authors' biophysical cell: its equation, gradients, positivity and
initial ranges."""

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import (
    biophysical_cell,
    max_relative_error,
    mode_options,
    numpy_biophysical_derivative,
    numpy_biophysical_params,
    ragged_batch,
)

import ltc_jax


@pytest.mark.parametrize("kind", ["fc", "random", "ncp"])
def test_vector_field_matches_numpy_equation(getkey, kind):
    cell = biophysical_cell(getkey(), units=7, kind=kind)
    p = numpy_biophysical_params(cell)
    v = np.asarray(jr.normal(getkey(), (7,)))
    x = np.asarray(jr.normal(getkey(), (3,)))
    np.testing.assert_allclose(
        cell.dynamics(jnp.asarray(v), jnp.asarray(x)),
        numpy_biophysical_derivative(p, v, x),
        rtol=1e-12,
    )


def _loss(model, integrator, ts, xs, lengths):
    path = ltc_jax.InputPath(ts, xs, lengths)
    return jnp.sum(jnp.sin(model(path, integrator=integrator)))


def test_gradient_modes_agree_on_the_biophysical_cell(getkey):
    model = ltc_jax.LTC(2, 6, 2, cell="biophysical", wiring="ncp", key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 5, 2)
    grads = {}
    for mode in ltc_jax.ADJOINT_NAMES:
        integrator = ltc_jax.make_integrator(
            "rk4", mode, dt0=0.01, max_steps=300, **mode_options(mode)
        )
        grads[mode] = eqx.filter_jit(eqx.filter_grad(_loss))(
            model, integrator, ts, xs, lengths
        )
    for mode in ("checkpoint", "direct", "backsolve", "windowed"):
        assert max_relative_error(grads[mode], grads["full"]) < 1e-6, mode
    # The wiring's masks are integers: never trained, no gradient.
    assert grads["full"].cell.mask is None and grads["full"].cell.sensory_mask is None


def test_positivity_by_construction(getkey):
    cell = biophysical_cell(getkey())
    pushed = eqx.tree_at(
        lambda c: (c.cm_raw, c.gleak_raw, c.w_raw, c.sensory_w_raw),
        cell,
        replace_fn=lambda raw: raw - 1e3,
    )
    for name in ("cm", "gleak", "w", "sensory_w"):
        assert float(jnp.min(getattr(pushed, name))) >= 0.0
        assert float(jnp.min(getattr(cell, name))) > 0.0


def test_initial_ranges_and_polarity(getkey):
    wiring = ltc_jax.wirings.make_wiring("fc", 40, 3, 5, seed=0)
    cell = ltc_jax.BiophysicalLTCVectorField(wiring, key=getkey())
    for name, (low, high) in dict(
        gleak=(0.001, 1),
        vleak=(-0.2, 0.2),
        cm=(0.4, 0.6),
        w=(0.001, 1),
        sigma=(3, 8),
        mu=(0.3, 0.8),
        sensory_w=(0.001, 1),
        sensory_sigma=(3, 8),
        sensory_mu=(0.3, 0.8),
    ).items():
        value = np.asarray(getattr(cell, name))
        assert value.min() >= low - 1e-9 and value.max() <= high + 1e-9, name
    np.testing.assert_array_equal(cell.erev, wiring.adjacency)
    assert 0.55 < np.mean(wiring.adjacency == 1) < 0.78  # two thirds excitatory
