"""Property tests (hypothesis): ragged irregular batches, padding, time shifts,
and the state bound of Hasani et al. (2021), Theorem 2."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ltc_jax


HIDDEN = 3
TIMES = 6
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True)


def _batch(seed, batch):
    """Random lengths in [1, TIMES], random gaps (some tiny, some long), random
    start times, NaN padding."""
    rng = np.random.default_rng(seed)
    gaps = rng.choice([1e-3, 0.1, 0.5, 2.0], size=(batch, TIMES)) * rng.uniform(
        0.5, 1.5, (batch, TIMES)
    )
    ts = rng.uniform(-5, 5, (batch, 1)) + np.cumsum(gaps, axis=1)
    xs = rng.normal(size=(batch, TIMES, 2))
    lengths = rng.integers(1, TIMES + 1, batch)
    pad = np.arange(TIMES) >= lengths[:, None]
    ts[pad] = np.nan
    xs[pad] = np.nan
    return jnp.asarray(ts), jnp.asarray(xs), jnp.asarray(lengths, jnp.int32)


MODEL = ltc_jax.LTC(2, HIDDEN, 2, tau_init=(0.3, 3.0), key=jr.PRNGKey(0))
FIXED = ltc_jax.make_integrator("heun", dt0=0.07, max_steps=256)


@eqx.filter_jit
def _outputs(model, ts, xs, lengths):
    return model(ltc_jax.InputPath(ts, xs, lengths), integrator=FIXED)


@pytest.mark.parametrize("batch", [1, HIDDEN, 2 * HIDDEN + 1])
@SETTINGS
@given(seed=st.integers(0, 2**31 - 1))
def test_ragged_batch_equals_per_sequence_solves(batch, seed):
    ts, xs, lengths = _batch(seed, batch)
    out = _outputs(MODEL, ts, xs, lengths)
    for b in range(batch):
        n = int(lengths[b])
        # Alone, padded to the same width with the sequence's own last row.
        ts_b = jnp.concatenate(
            [ts[b, :n], ts[b, n - 1] + jnp.arange(1.0, TIMES - n + 1)]
        )
        xs_b = jnp.concatenate([xs[b, :n], jnp.repeat(xs[b, n - 1 : n], TIMES - n, 0)])
        alone = _outputs(MODEL, ts_b[None], xs_b[None], jnp.array([n], jnp.int32))
        np.testing.assert_allclose(out[b], alone[0], rtol=1e-11, atol=1e-12)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), fill=st.sampled_from([0.0, 1e8, -3.0, np.nan]))
def test_padding_has_no_influence_on_outputs_or_gradients(seed, fill):
    ts, xs, lengths = _batch(seed, 4)
    pad = jnp.arange(TIMES, dtype=jnp.int32)[None] >= lengths[:, None]

    def loss(model, xs):
        return jnp.sum(_outputs(model, ts, xs, lengths) ** 2)

    value, grads = eqx.filter_value_and_grad(loss)(MODEL, xs)
    other = jnp.where(pad[..., None], fill, xs)
    value2, grads2 = eqx.filter_value_and_grad(loss)(MODEL, other)
    assert value == value2
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads2), strict=True):
        np.testing.assert_array_equal(a, b)
    # The observations are constants of the solve: no gradient reaches them.
    xs_grad = jax.grad(loss, argnums=1)(MODEL, xs)
    assert np.all(np.asarray(xs_grad)[np.asarray(pad)] == 0)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), shift=st.floats(-50.0, 50.0))
def test_shifting_all_times_leaves_outputs_unchanged(seed, shift):
    ts, xs, lengths = _batch(seed, 4)
    np.testing.assert_allclose(
        _outputs(MODEL, ts + shift, xs, lengths),
        _outputs(MODEL, ts, xs, lengths),
        rtol=1e-8,
        atol=1e-10,
    )


ADAPTIVE = ltc_jax.make_integrator("tsit5", rtol=1e-8, atol=1e-10, max_steps=4096)


@eqx.filter_jit
def _states(model, ts, xs, lengths):
    path = ltc_jax.InputPath(ts, xs, lengths)
    return model.solve(path, integrator=ADAPTIVE, save="observations").ys


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    scale=st.floats(0.1, 20.0),
    tau_low=st.floats(0.02, 1.0),
)
def test_state_stays_inside_theorem2_bound(seed, scale, tau_low):
    """Hasani et al. (2021), Theorem 2: from h(0) = 0, unit i stays inside
    [min(0, A_i), max(0, A_i)] whatever the (bounded) input."""
    key = jr.PRNGKey(seed % 2**31)
    model = ltc_jax.LTC(2, HIDDEN, 2, tau_init=(tau_low, 2 * tau_low + 1.0), key=key)
    ts, xs, lengths = _batch(seed, 3)
    xs = scale * jnp.nan_to_num(xs)
    states = _states(model, ts, xs, lengths)
    A = np.asarray(model.cell.A)
    assert np.all(np.asarray(states) >= np.minimum(0, A) - 1e-8)
    assert np.all(np.asarray(states) <= np.maximum(0, A) + 1e-8)
