"""Times that keep their gaps, a floor under the time constants, and data
refused where it is built: each case with the small input that used to pass
silently or fail with a misleading message."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import quiet_fit

import ltc_jax
from ltc_jax.datasets import SequenceDataset


UNIX_EPOCH_NOW = 1.7e9  # seconds: float32 holds times this large to 128 s


def _jittered(gap: float, seed: int = 0) -> np.ndarray:
    """Two sequences of 12 observation times from 0, `gap` apart +-20%."""
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.uniform(0.8, 1.2, (2, 12)) * gap, axis=1)
    return ts - ts[:, :1]


def _float32(model):
    """`model` in float32 (the tests run with float64 enabled)."""
    return jax.tree.map(
        lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, model
    )


def _dataset(ts: np.ndarray) -> SequenceDataset:
    xs = np.random.default_rng(1).normal(size=(*ts.shape, 2))
    return SequenceDataset(ts, xs, [12, 12], [0, 1], ("a", "b"))


@pytest.mark.parametrize("gap", [300.0, 0.01])
def test_unix_epoch_times_give_the_outputs_of_times_from_zero(gap):
    """The same data at Unix-epoch times and at times from 0, in float32: the
    same outputs (they used to be solved on gaps rounded to 128 s multiples)."""
    ts = _jittered(gap)
    model = _float32(ltc_jax.LTC(2, 8, 2, tau_init=(gap, 10 * gap), key=jr.key(0)))
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-5, atol=1e-7, max_steps=1024)
    outputs = [
        model(
            ltc_jax.make_batch(_dataset(t), dtype=jnp.float32).path,
            integrator=integrator,
        )
        for t in (ts, ts + UNIX_EPOCH_NOW)
    ]
    # A time from the epoch, less its start, differs from the time from 0 by
    # float64's rounding (2.4e-7 s at 1.7e9 s): far below float32's at `gap`.
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-6)
    # And the durations the model saw are the true ones.
    path = ltc_jax.make_batch(_dataset(ts + UNIX_EPOCH_NOW), dtype=jnp.float32).path
    np.testing.assert_allclose(
        path.t_end - path.t_start, ts[:, -1] - ts[:, 0], rtol=1e-6
    )


@pytest.mark.parametrize("gap", [300.0, 1.0])
def test_float32_epoch_times_are_refused_with_the_resolution_and_the_fix(gap):
    ts = _jittered(gap) + UNIX_EPOCH_NOW
    xs = jnp.zeros((2, 12, 2), jnp.float32)
    # float64 times into a float32 path: the gaps are known, the rounding is not
    # allowed; the message names float32's step at these times (128 s).
    with pytest.raises(ValueError, match=r"resolves only steps of 128.*ts - ts"):
        ltc_jax.InputPath(ts, xs)
    rounded = ts.astype(np.float32)
    if np.all(np.diff(rounded) > 0):
        # Times already rounded to float32 in a dataset, still increasing.
        with pytest.raises(ValueError, match="resolves only steps of 128"):
            _dataset(rounded)
    else:
        # Rounded so far that they collide: the message says why times repeat.
        with pytest.raises(eqx.EquinoxRuntimeError, match="collide in float32"):
            ltc_jax.InputPath(jnp.asarray(rounded), xs)


def test_a_long_float32_sequence_of_close_times_is_refused_from_its_start():
    """A day at 250 Hz from 0: float32 holds 86,400 s to 7.8 ms, the gap is 4 ms."""
    ts = np.arange(0, 86_400, 0.004)[None, :: 21_600 * 10]  # the span, few points
    ts = np.concatenate([ts, ts[:, -1:] + 0.004], axis=1)
    data = SequenceDataset(
        ts, np.zeros((1, ts.shape[1], 1)), [ts.shape[1]], [0], ("a",)
    )
    with pytest.raises(ValueError, match="float32 resolves only steps of 0.0078"):
        ltc_jax.make_batch(data, dtype=jnp.float32)


def test_the_derived_tau_floor_keeps_an_sgd_step_from_collapsing_tau():
    data = _dataset(_jittered(2.0))
    defaults = ltc_jax.training.derive_defaults([data])
    np.testing.assert_allclose(defaults.tau_min, defaults.spacing / 100)
    assert "tau_min" in defaults.reasons
    model = _float32(
        ltc_jax.LTC(
            2, 8, 2, tau_init=defaults.tau_init, tau_min=defaults.tau_min, key=jr.key(0)
        )
    )
    # An SGD step that drives tau_raw far negative: softplus underflows to 0
    # in float32 below about -104.
    kicked = eqx.tree_at(
        lambda m: m.cell.tau_raw, model, model.cell.tau_raw - jnp.float32(1000)
    )
    unfloored = _float32(
        ltc_jax.LTC(2, 8, 2, tau_init=defaults.tau_init, key=jr.key(0))
    )
    unfloored = eqx.tree_at(lambda m: m.cell.tau_raw, unfloored, kicked.cell.tau_raw)
    assert float(jnp.min(unfloored.cell.tau)) == 0.0
    assert float(jnp.min(kicked.cell.tau)) == np.float32(defaults.tau_min)


@pytest.mark.parametrize("encoded", [False, True])
def test_a_collapsed_time_constant_is_named_not_max_steps(encoded):
    """Named with its fix, also where the LTC reads its input through an
    encoder (as `ltc-jax stream --frame-encoder mlp` builds it)."""
    data = _dataset(_jittered(1.0))
    encoder = dict(encoder=eqx.nn.Linear(2, 3, key=jr.key(1)), encoded_size=3)
    # tau_min 0: tau may collapse
    model = ltc_jax.LTC(2, 4, 2, **(encoder if encoded else {}), key=jr.key(0))
    # softplus(-1000) is 0 in float64 as in float32.
    collapsed = eqx.tree_at(lambda m: m.cell.tau_raw, model, jnp.full((4,), -1000.0))
    assert float(jnp.min(collapsed.cell.tau)) == 0.0
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4, max_steps=64)
    with pytest.raises(ltc_jax.SolverFailureError) as failure:
        quiet_fit(collapsed, data, integrator)
    message = str(failure.value)
    assert "collapsed toward 0 (tau_min=0)" in message
    assert "Raise max_steps" not in message


def test_empty_data_is_refused_where_it_is_built():
    with pytest.raises(ValueError, match="EmptySet has no sequences"):
        SequenceDataset(
            np.zeros((0, 3)), np.zeros((0, 3, 1)), [], [], ("a",), "EmptySet"
        )


def test_an_all_nan_channel_is_named_with_its_sequence():
    ts = np.tile(np.arange(4.0), (3, 1))
    xs = np.ones((3, 4, 2))
    xs[2, :, 1] = np.nan
    data = SequenceDataset(ts, xs, [4, 4, 4], [0, 1, 0], ("a", "b"))
    with pytest.raises(ValueError, match=r"channel 1 of sequence 2;"):
        ltc_jax.make_batch(data)
    filled = ltc_jax.make_batch(data, empty_channel_fill=0.0)
    np.testing.assert_allclose(filled.path.evaluate(jnp.array([1.5]))[2], [1.0, 0.0])
