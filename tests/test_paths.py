import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import ragged_batch

import ltc_jax


def test_linear_path_matches_numpy_interp(getkey):
    ts, xs, lengths = ragged_batch(getkey(), 3, 7, 2)
    path = ltc_jax.InputPath(ts, xs, lengths)
    for b in range(3):
        n = int(lengths[b])
        t_query = np.linspace(float(ts[b, 0]), float(ts[b, n - 1]), 23)
        for t in t_query:
            t_batch = jnp.full((3,), t)
            got = np.asarray(path.evaluate(t_batch))[b]
            want = [np.interp(t, ts[b, :n], xs[b, :n, c]) for c in range(2)]
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_cubic_path_passes_through_observations(getkey):
    ts, xs, lengths = ragged_batch(getkey(), 3, 6, 2)
    path = ltc_jax.InputPath(ts, xs, lengths, interpolation="cubic")
    for i in range(6):
        at_knot = path.evaluate(ts[:, i])
        valid = np.asarray(i < lengths)
        np.testing.assert_allclose(
            np.asarray(at_knot)[valid], np.asarray(xs[:, i])[valid], rtol=1e-10
        )


def test_shared_times_and_endpoints():
    ts = jnp.array([0.0, 0.5, 2.0])
    xs = jnp.ones((4, 3, 1))
    path = ltc_jax.InputPath(ts, xs)
    assert path.shared_times
    np.testing.assert_array_equal(path.t_end, [2.0] * 4)
    ragged = ltc_jax.InputPath(ts, xs, jnp.array([3, 2, 1, 3]))
    assert not ragged.shared_times
    np.testing.assert_array_equal(ragged.t_end, [2.0, 0.5, 0.0, 2.0])


@pytest.mark.parametrize(
    "ts, match",
    [
        ([[0.0, 1.0, 1.0]], "strictly increasing"),
        ([[0.0, 2.0, 1.0]], "strictly increasing"),
        ([[0.0, np.nan, 2.0]], "strictly increasing"),
        ([[0.0, 1.0, np.inf]], "finite"),
    ],
)
def test_bad_times(ts, match):
    with pytest.raises(eqx.EquinoxRuntimeError, match=match):
        ltc_jax.InputPath(jnp.array(ts), jnp.zeros((1, 3, 2)))


def test_bad_times_in_padding_are_ignored():
    ts = jnp.array([[0.0, 1.0, np.nan, -5.0]])
    xs = jnp.array([[[1.0], [2.0], [np.nan], [np.inf]]])
    path = ltc_jax.InputPath(ts, xs, jnp.array([2]))
    np.testing.assert_allclose(path.evaluate(jnp.array([1.0])), [[2.0]])


def test_infinite_value_inside_length():
    xs = jnp.array([[[1.0], [np.inf], [3.0]]])
    with pytest.raises(eqx.EquinoxRuntimeError, match="infinite value"):
        ltc_jax.InputPath(jnp.arange(3.0), xs)


def test_missing_values_interpolate_each_channel_through_its_own_observations():
    ts = jnp.array([[0.0, 1.0, 2.5, 3.0, 4.0, 9.0]])
    xs = jnp.array(
        [
            [
                [np.nan, 1.0],
                [2.0, np.nan],
                [np.nan, 3.0],
                [4.0, np.nan],
                [np.nan, np.nan],
                [0.0, 0.0],
            ]
        ]
    )
    path = ltc_jax.InputPath(ts, xs, jnp.array([5]))  # the last column is padding
    for t in np.linspace(0.0, 4.0, 17):
        got = np.asarray(path.evaluate(jnp.array([t])))[0]
        # Channel 0 observed at t = 1, 3; channel 1 at t = 0, 2.5; flat outside.
        np.testing.assert_allclose(
            got[0], np.interp(t, [1.0, 3.0], [2.0, 4.0]), rtol=1e-12
        )
        np.testing.assert_allclose(
            got[1], np.interp(t, [0.0, 2.5], [1.0, 3.0]), rtol=1e-12
        )
    cubic = ltc_jax.InputPath(ts, xs, jnp.array([5]), interpolation="cubic")
    for t, value in [(1.0, 2.0), (3.0, 4.0)]:
        np.testing.assert_allclose(
            cubic.evaluate(jnp.array([t]))[0, 0], value, rtol=1e-12
        )
    assert np.all(np.isfinite(cubic.evaluate(jnp.array([0.2]))))


def test_fully_missing_channel_is_an_error_or_filled():
    xs = jnp.array([[[1.0, np.nan], [2.0, np.nan], [3.0, np.nan]]])
    with pytest.raises(ValueError, match="channel 1 of sequence 0"):
        ltc_jax.InputPath(jnp.arange(3.0), xs)
    with pytest.raises(eqx.EquinoxRuntimeError, match="no observed value"):
        eqx.filter_jit(ltc_jax.InputPath)(jnp.arange(3.0), xs)
    path = ltc_jax.InputPath(jnp.arange(3.0), xs, empty_channel_fill=0.5)
    np.testing.assert_allclose(path.evaluate(jnp.array([1.5])), [[2.5, 0.5]])


def test_mask_and_time_since_observation_channels():
    ts = jnp.array([[0.0, 1.0, 3.0, 4.0, 7.0]])
    xs = jnp.array([[[1.0], [np.nan], [np.nan], [2.0], [5.0]]])
    path = ltc_jax.InputPath(ts, xs, observation_mask=True, time_since_observation=True)
    assert path.input_size == 3
    knots = np.stack([np.asarray(path.evaluate(jnp.array([t])))[0] for t in ts[0]])
    np.testing.assert_allclose(knots[:, 1], [1, 0, 0, 1, 1])  # observed?
    # GRU-D delta: 0; 1; 2 + 1 (missing at t=1); 1 + 3 (missing at t=3); 3.
    np.testing.assert_allclose(knots[:, 2], [0, 1, 3, 4, 3])
    # In a unit of 2 time units (the times' median interval, say): halved.
    scaled = ltc_jax.InputPath(
        ts, xs, time_since_observation=True, time_since_observation_scale=2.0
    )
    np.testing.assert_allclose(
        [float(scaled.evaluate(jnp.array([t]))[0, 1]) for t in ts[0]],
        [0, 0.5, 1.5, 2, 1.5],
    )
    for scale in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="time_since_observation_scale must"):
            ltc_jax.InputPath(ts, xs, time_since_observation_scale=scale)
    # A NumPy scale (np.median's, say) through make_input_path's compiled build.
    data = ltc_jax.datasets.SequenceDataset(
        np.asarray(ts), np.asarray(xs), np.array([5]), np.zeros(1, np.int32)
    )
    built = ltc_jax.make_input_path(
        data, time_since_observation=True, time_since_observation_scale=np.float64(2)
    )
    np.testing.assert_allclose(
        [float(built.evaluate(jnp.array([t]))[0, 1]) for t in ts[0]],
        [0, 0.5, 1.5, 2, 1.5],
    )


@pytest.mark.parametrize(
    "ts_shape, xs_shape, match",
    [
        ((5,), (5, 2), "xs must have shape"),
        ((4,), (2, 5, 2), "ts must have shape"),
        ((3, 5), (2, 5, 2), "ts must have shape"),
        ((1,), (2, 1, 2), "at least two time columns"),
    ],
)
def test_bad_shapes(ts_shape, xs_shape, match):
    ts = jnp.broadcast_to(jnp.arange(ts_shape[-1], dtype=float), ts_shape)
    with pytest.raises(ValueError, match=match):
        ltc_jax.InputPath(ts, jnp.zeros(xs_shape))


def test_bad_lengths_and_options():
    xs = jnp.zeros((2, 3, 1))
    with pytest.raises(ValueError, match="lengths must be integers"):
        ltc_jax.InputPath(jnp.arange(3.0), xs, jnp.array([1.0, 2.0]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="lengths must lie in"):
        ltc_jax.InputPath(jnp.arange(3.0), xs, jnp.array([0, 2]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="lengths must lie in"):
        ltc_jax.InputPath(jnp.arange(3.0), xs, jnp.array([4, 2]))
    with pytest.raises(ValueError, match="Unknown interpolation"):
        ltc_jax.InputPath(jnp.arange(3.0), xs, interpolation="spline")
    with pytest.raises(ValueError, match="floating point"):
        ltc_jax.InputPath(jnp.arange(3.0), jnp.zeros((2, 3, 1), int))


@pytest.mark.parametrize("compare_all", [1024, 2])
@pytest.mark.parametrize("interpolation", ["linear", "cubic"])
def test_long_paths_evaluate_like_diffrax_on_the_whole_sequence(
    getkey, interpolation, compare_all, monkeypatch
):
    """Paths are evaluated by a two-level interval search (blocks of 64 knots);
    the values are those of diffrax's interpolation of the whole sequence, bit for
    bit: at random times, exactly at knots and block boundaries, before the first
    knot, past the last, and in ragged sequences whose padding sits in the last
    block. Both ways of searching (comparing every knot at once, and bisection,
    which paths of over 1024 blocks use) give the same."""
    monkeypatch.setattr("ltc_jax._paths._COMPARE_ALL", compare_all)
    times = 5 * 64 + 37
    gaps = jr.uniform(getkey(), (3, times), minval=0.1, maxval=2.0)
    ts = jnp.cumsum(gaps, axis=1)
    xs = jr.normal(getkey(), (3, times, 2))
    lengths = jnp.array([times, times - 50, 3 * 64 + 1])
    path = ltc_jax.InputPath(ts, xs, lengths, interpolation=interpolation)
    assert path.block_ts.shape == (3, 6)  # ceil(357 / 64)

    def whole(t):
        return jax.vmap(lambda p, ti: p.evaluate(ti))(path.interpolation, t)

    end = float(ts.max())
    queries = [
        jr.uniform(getkey(), (40, 3), minval=-1.0, maxval=end + 5.0),
        path.ts[:, ::32].T,  # knots, block boundaries among them
        path.ts[:, 1::64].T,
        jnp.full((1, 3), -3.0),
        jnp.full((1, 3), 10 * end),
    ]
    evaluate = jax.jit(lambda path, t: path.evaluate(t))
    for t in jnp.concatenate(queries):
        np.testing.assert_array_equal(evaluate(path, t), whole(t))


@pytest.mark.parametrize("times", [2, 5, 64, 65, 66, 128, 129, 5 * 64 + 37])
@pytest.mark.parametrize("interpolation", ["linear", "cubic", "hold"])
def test_shared_times_evaluate_like_diffrax_on_the_whole_sequence(
    getkey, interpolation, times
):
    """With one time grid (`ts` of shape `(times,)`) and a scalar time, the whole
    batch is evaluated on one block, sliced rather than gathered, with
    diffrax's arithmetic written out over the batch; the values are still
    diffrax's interpolation of each whole sequence, bit for bit (a hold's: the
    last observation at or before the time, in NumPy), and the same as with
    one time per sequence."""
    ts = jnp.cumsum(jr.uniform(getkey(), (times,), minval=0.1, maxval=2.0))
    xs = jr.normal(getkey(), (3, times, 2))
    path = ltc_jax.InputPath(ts, xs, interpolation=interpolation)
    assert path.shared_times

    def whole(t):
        if interpolation == "hold":
            return np.stack([_numpy_hold(np.asarray(ts), np.asarray(x), t) for x in xs])
        return jax.vmap(lambda p: p.evaluate(t))(path.interpolation)

    end = float(ts[-1])
    queries = jnp.concatenate(
        [
            jr.uniform(getkey(), (40,), minval=-1.0, maxval=end + 5.0),
            ts[::32],  # knots, block boundaries among them
            ts[1::64],
            ts[63::64],
            jnp.array([-3.0, 10 * end]),
        ]
    )
    evaluate = jax.jit(lambda path, t: path.evaluate(t))
    for t in queries:
        got = evaluate(path, t)
        np.testing.assert_array_equal(got, whole(t))
        np.testing.assert_array_equal(got, evaluate(path, jnp.full((3,), t)))


def _numpy_hold(ts, xs, t):
    """A zero-order hold in NumPy, one sequence: at `t` in `[t_i, t_{i+1})`,
    each channel's last non-NaN value at or before `t_i`, 0 before its first."""
    i = min(max(int(np.sum(ts <= t)) - 1, 0), len(ts) - 1)
    out = np.zeros(xs.shape[1])
    for c in range(xs.shape[1]):
        seen = [v for v in xs[: i + 1, c] if not np.isnan(v)]
        out[c] = seen[-1] if seen else 0.0
    return out


def test_hold_reads_the_last_observation_and_a_0_or_1_mask():
    ts = np.array([[0.0, 1.0, 2.5, 4.0, 7.0], [0.0, 0.5, 3.0, 3.5, 9.0]])
    xs = np.array(
        [
            [[np.nan, 1.0], [2.0, np.nan], [3.0, 5.0], [np.nan, np.nan], [4.0, 6.0]],
            [[1.0, 2.0], [np.nan, 3.0], [5.0, np.nan], [6.0, 7.0], [8.0, 9.0]],
        ]
    )
    path = ltc_jax.InputPath(ts, xs, interpolation="hold", observation_mask=True)
    for t in (0.0, 0.3, 1.0, 1.7, 2.5, 3.2, 4.0, 5.5, 7.0):
        values = np.asarray(path.evaluate(jnp.array(t)))
        for b in range(2):
            np.testing.assert_array_equal(values[b, :2], _numpy_hold(ts[b], xs[b], t))
            mask = ~np.isnan(xs[b])
            np.testing.assert_array_equal(values[b, 2:], _numpy_hold(ts[b], mask, t))
    # On a shared grid, with one scalar time for the batch: the same values.
    shared = ltc_jax.InputPath(ts[0], xs, interpolation="hold")
    assert shared.shared_times
    np.testing.assert_array_equal(
        shared.evaluate(jnp.array(3.2)),
        [_numpy_hold(ts[0], xs[b], 3.2) for b in range(2)],
    )


@pytest.mark.parametrize("interpolation, causal", [("hold", True), ("linear", False)])
def test_outputs_before_a_time_do_not_read_observations_after_it(interpolation, causal):
    """Every observation after t = 4 changed: with a hold, the states at the
    observations up to 4 are unchanged to the bit. A linear fill of a channel
    observed only at 0 and 8 (a slow sensor among fast ones) moves toward its
    next sample before that sample arrives, so with it they change."""
    ts = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.5, 7.0, 8.0])
    xs = np.array(jr.normal(jr.key(0), (2, 8, 3)))
    xs[:, 1:-1, 2] = np.nan
    later = xs.copy()
    later[:, ts > 4.0] += 10.0
    model = ltc_jax.LTC(3, 6, 2, key=jr.key(1))
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-8, atol=1e-8)

    def states(values):
        path = ltc_jax.InputPath(ts, values, interpolation=interpolation)
        return np.asarray(
            model.solve(path, integrator=integrator, save="observations").ys
        )

    before = ts <= 4.0
    a, b = states(xs)[:, before], states(later)[:, before]
    if causal:
        np.testing.assert_array_equal(a, b)
    else:
        assert np.max(np.abs(a - b)) > 1e-3
