"""The closed-form continuous-time cell: against a NumPy transcription of its
equations, an ODE solve where it is exact, finite differences, and the LTC's
rules for irregular times and padding."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import quiet_fit, ragged_batch

import ltc_jax


def _numpy_cell(cell, x, h, dt):
    """Hasani et al. (2022) Eq. 10 / `ncps`'s CfCCell, in NumPy."""
    z = np.concatenate([x, h])
    for layer in cell.backbone:
        z = 1.7159 * np.tanh(0.666 * (np.asarray(layer.weight) @ z + layer.bias))

    def affine(layer):
        return np.asarray(layer.weight) @ z + np.asarray(layer.bias)

    if cell.mode == "pure":
        f1 = affine(cell.ff1)
        A, w = np.asarray(cell.A), np.asarray(cell.w_tau)
        return -A * np.exp(-dt * (np.abs(w) + np.abs(f1))) * f1 + A
    f1, f2 = np.tanh(affine(cell.ff1)), np.tanh(affine(cell.ff2))
    gate = 1 / (1 + np.exp(-(affine(cell.time_a) * dt + affine(cell.time_b))))
    if cell.mode == "no_gate":
        return f1 + gate * f2
    return f1 * (1 - gate) + gate * f2


def _numpy_final_states(cell, ts, xs, lengths):
    states = []
    for b in range(ts.shape[0]):
        h = np.zeros(cell.hidden_size)
        for t in range(int(lengths[b])):
            dt = 0.0 if t == 0 else float(ts[b, t] - ts[b, t - 1])
            h = _numpy_cell(cell, np.asarray(xs[b, t]), h, dt)
        states.append(h)
    return np.stack(states)


@pytest.mark.parametrize(
    "mode, layers", [("default", 1), ("no_gate", 2), ("pure", 0), ("pure", 1)]
)
def test_cfc_matches_numpy_on_ragged_irregular_batch(getkey, mode, layers):
    model = ltc_jax.CfC(
        2, 5, 3, mode=mode, backbone_units=7, backbone_layers=layers, key=getkey()
    )
    ts, xs, lengths = ragged_batch(getkey(), 4, 6, 2)
    path = ltc_jax.InputPath(ts, xs, lengths)
    ys = model.solve(path).ys
    expected = _numpy_final_states(model.cell, np.asarray(ts), xs, lengths)
    np.testing.assert_allclose(ys, expected, rtol=1e-12, atol=1e-12)
    weight, bias = np.asarray(model.readout.weight), np.asarray(model.readout.bias)
    np.testing.assert_allclose(model(path), expected @ weight.T + bias, rtol=1e-12)
    assert model.solve(path).stats["num_steps"].tolist() == lengths.tolist()


def test_pure_cfc_step_is_the_ltc_solution_under_a_constant_gate(getkey):
    """With no backbone, `ff1` a constant c and `w_tau = 0`, one pure step is
    A - A c exp(-c dt): the LTC dh/dt = -c h + c A (no leak, constant gate)
    started from A (1 - c), solved here by Tsit5 at rtol 1e-12."""
    cell = ltc_jax.CfCCell(2, 3, mode="pure", backbone_layers=0, key=getkey())
    c = jnp.array([0.2, 0.5, 0.9])
    A = jnp.array([1.5, -0.7, 0.3])
    cell = eqx.tree_at(
        lambda m: (m.ff1.weight, m.ff1.bias, m.A),
        cell,
        (jnp.zeros_like(cell.ff1.weight), c, A),
    )
    dt = 1.7
    step = cell(jnp.array([0.3, -1.0]), jnp.array([9.0, 9.0, 9.0]), jnp.asarray(dt))
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, h, args: -c * h + c * A),
        diffrax.Tsit5(),
        t0=0.0,
        t1=dt,
        dt0=0.01,
        y0=A * (1 - c),
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-14),
        max_steps=100_000,
    )
    np.testing.assert_allclose(step, solution.ys[-1], rtol=1e-10)


def test_ltc_closed_form_step_matches_its_equation(getkey):
    """Hasani et al. (2022) Eq. 5 with an LTC's parameters, in NumPy."""
    cell = ltc_jax.LTCVectorField(3, 4, key=getkey())
    cell = eqx.tree_at(lambda c: c.bias, cell, jax.random.normal(getkey(), (4,)))
    h = jax.random.normal(getkey(), (2, 4))
    x = jax.random.normal(getkey(), (2, 3))
    dt = jnp.array([0.3, 2.0])
    out = ltc_jax.ltc_closed_form_step(cell, h, x, dt)
    w_in, w_rec = np.asarray(cell.weight_in), np.asarray(cell.weight_rec)
    b, A, tau = np.asarray(cell.bias), np.asarray(cell.A), np.asarray(cell.tau)
    for i in range(2):
        hi, xi = np.asarray(h[i]), np.asarray(x[i])
        f = 1 / (1 + np.exp(-(w_in @ xi + w_rec @ hi + b)))
        g = 1 / (1 + np.exp(-(-(w_in @ xi) - w_rec @ hi + b)))
        expected = (hi - A) * np.exp(-(1 / tau + f) * float(dt[i])) * g + A
        np.testing.assert_allclose(out[i], expected, rtol=1e-12)


def test_ltc_closed_form_step_rounds_both_gates_products_with_matmul_dtype(getkey):
    """With `matmul_dtype="bfloat16"` both gates, f(h, x) and f(-h, -x), take
    the field's rounded products: Eq. 5 in NumPy on operands rounded to
    bfloat16, everything else in float32, over two leading batch axes."""
    with jax.enable_x64(False):
        cell = ltc_jax.LTCVectorField(3, 4, matmul_dtype="bfloat16", key=getkey())
        cell = eqx.tree_at(lambda c: c.bias, cell, jax.random.normal(getkey(), (4,)))
        h = jax.random.normal(getkey(), (2, 3, 4))
        x = jax.random.normal(getkey(), (2, 3, 3))
        dt = jnp.array([[0.3, 2.0, 0.7], [1.0, 0.1, 5.0]])
        out = ltc_jax.ltc_closed_form_step(cell, h, x, dt)

        def rounded(a):
            a = jnp.asarray(a).astype(jnp.bfloat16)
            return np.asarray(a.astype(jnp.float32), np.float64)

        w_in, w_rec = rounded(cell.weight_in), rounded(cell.weight_rec)
        b, A, tau = (np.asarray(v, np.float64) for v in (cell.bias, cell.A, cell.tau))
        pre = rounded(x) @ w_in.T + rounded(h) @ w_rec.T
        f, g = 1 / (1 + np.exp(-(pre + b))), 1 / (1 + np.exp(-(b - pre)))
        hs = np.asarray(h, np.float64)
        decay = np.exp(-(1 / tau + f) * np.asarray(dt, np.float64)[..., None])
        expected = (hs - A) * decay * g + A
        assert out.dtype == jnp.float32
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_cfc_gradient_matches_finite_differences(getkey):
    """Float64: the directional derivative of a loss of the outputs (pooled
    readout, whose maximum is differentiated too) along a random direction in
    parameter space, by central differences."""
    model = ltc_jax.CfC(
        2,
        4,
        2,
        backbone_units=6,
        readout_times=2,
        readout_features="pooled",
        key=getkey(),
    )
    ts, xs, lengths = ragged_batch(getkey(), 3, 6, 2)
    path = ltc_jax.InputPath(ts, xs, lengths)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(params):
        return jnp.sum(jnp.sin(eqx.combine(params, static)(path)))

    grad = jax.grad(loss)(params)
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(getkey(), len(leaves))
    noise = [jax.random.normal(k, x.shape) for k, x in zip(keys, leaves, strict=True)]
    direction = jax.tree.unflatten(treedef, noise)
    eps = 1e-6
    shifted = [
        loss(jax.tree.map(lambda p, d, s=s: p + s * eps * d, params, direction))
        for s in (1, -1)
    ]
    numeric = (shifted[0] - shifted[1]) / (2 * eps)
    pairs = zip(jax.tree.leaves(grad), jax.tree.leaves(direction), strict=True)
    analytic = sum(jnp.vdot(g, d) for g, d in pairs)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-7)


def _gradient_in_inputs(update, xs, bound):
    """The gradient of the summed final state of `scan_observations` (the CfC's
    and the jump model's recurrence) with the update `h <- update(h) + x`, one
    unit, in each observation's value `xs` (`(2, n, 1)`, at times 0..n-1),
    with the state's gradient clamped to `bound`."""
    from ltc_jax import _cfc

    n = xs.shape[1]
    ts = jnp.broadcast_to(jnp.arange(n, dtype=xs.dtype), (2, n))
    path = ltc_jax.InputPath(ts, xs, jnp.full((2,), n))
    # Only its sizes are read: one unit, the final state.
    sizes = ltc_jax.CfC(1, 1, 1, key=jax.random.PRNGKey(0))

    def loss(values):
        trajectory = _cfc.scan_observations(
            lambda x, h, dt: update(h) + x,
            eqx.tree_at(lambda p: p.interpolation.ys, path, values),
            None,
            sizes,
            "final",
            updates_per_observation=1,
            state_gradient_bound=bound,
        )
        return jnp.sum(trajectory.ys)

    return np.asarray(jax.grad(loss)(path.interpolation.ys))[..., 0]


def test_the_gradient_in_a_recurrent_state_is_clamped_where_it_would_overflow(getkey):
    """An expansive update, `h <- 2 h + x`, over 300 observations in float32,
    the loss the final state: the loss's gradient in observation `k` is
    `2**(299 - k)`, which overflows float32 past `2**128`. Clamped to the
    default bound at every update it is `min(2**(299 - k), bound)` exactly
    (the closed form of the clamped recursion `g_(k-1) = min(2 g_k,
    bound)`), finite, and exact below the bound; without the clamp (`None`)
    it is not finite. A step that overflows at once (`h <- 3e38 h + x`) is
    not hidden: its infinity passes the clamp, where clamping it would give a
    finite gradient. The CfC and the jump model
    take the bound (default 1e6) and refuse one that is not positive; with
    `None` forward mode runs through the CfC."""
    from ltc_jax import _cfc

    n, bound = 300, _cfc.STATE_GRADIENT_BOUND
    xs = jnp.ones((2, n, 1), jnp.float32)
    powers = 2.0 ** np.arange(n - 1, -1, -1)
    expected = np.minimum(powers, bound).astype(np.float32)
    got = _gradient_in_inputs(lambda h: 2 * h, xs, bound)
    assert got.dtype == np.float32 and bound == 1e6
    np.testing.assert_array_equal(got, np.broadcast_to(expected, (2, n)))
    assert (got[0] < bound).sum() == 20  # 2**19 < 1e6 < 2**20: exact there
    assert not np.all(np.isfinite(_gradient_in_inputs(lambda h: 2 * h, xs, None)))
    # The states stay 0, 0, 1; the gradient 1, then 3e38 (clamped to 1e6),
    # then 3e38 * 1e6 = inf, which passes (0 * inf at the path's knots: NaN).
    spike = jnp.zeros((2, 3, 1), jnp.float32).at[:, 2].set(1.0)
    at_once = _gradient_in_inputs(lambda h: 3e38 * h, spike, bound)
    assert not np.isfinite(at_once[0, 0])
    np.testing.assert_array_equal(at_once[0, 2], 1.0)

    for model in (ltc_jax.CfC, ltc_jax.JumpLTC):
        assert model(2, 3, 2, key=getkey()).state_gradient_bound == 1e6
        for wrong in (0.0, -1.0, float("nan")):
            with pytest.raises(ValueError, match="state_gradient_bound must be a"):
                model(2, 3, 2, state_gradient_bound=wrong, key=getkey())
    model = ltc_jax.CfC(2, 3, 2, state_gradient_bound=None, key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 2, 5, 2)
    path = ltc_jax.InputPath(ts, xs, lengths)
    tangent = jax.jvp(
        lambda v: model(eqx.tree_at(lambda p: p.interpolation.ys, path, v)),
        (path.interpolation.ys,),
        (jnp.ones_like(path.interpolation.ys),),
    )[1]
    assert np.all(np.isfinite(tangent))


def test_cfc_irregular_times_and_padding_behave_as_for_the_ltc(getkey):
    """Each sequence of a ragged batch gives what it gives alone; padding values
    and a shift of a sequence's times change nothing; the readout times read
    the states at the last observation at or before 1/3, 2/3 and 1 of each
    duration."""
    model = ltc_jax.CfC(2, 4, 3, backbone_units=6, key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 6, 2)
    out = model(ltc_jax.InputPath(ts, xs, lengths))
    for b in range(3):
        n = int(lengths[b])
        alone = model(ltc_jax.InputPath(ts[b : b + 1, :n], xs[b : b + 1, :n]))
        np.testing.assert_allclose(out[b], alone[0], rtol=1e-12)
    pad = np.arange(6)[None] >= np.asarray(lengths)[:, None]
    other = jnp.where(pad[..., None], 123.0, xs)
    np.testing.assert_allclose(model(ltc_jax.InputPath(ts, other, lengths)), out)
    shifted = model(ltc_jax.InputPath(ts + 7.25, xs, lengths))
    np.testing.assert_allclose(shifted, out, rtol=1e-12)

    spread = ltc_jax.CfC(2, 4, 3, backbone_units=6, readout_times=3, key=getkey())
    path = ltc_jax.InputPath(ts, xs, lengths)
    every = np.asarray(spread.solve(path, save="observations").ys)
    read = np.asarray(spread.solve(path).ys)
    for b in range(3):
        n = int(lengths[b])
        times = np.asarray(ts[b, :n])
        for j, fraction in enumerate((1 / 3, 2 / 3, 1.0)):
            target = times[0] + fraction * (times[-1] - times[0])
            index = np.searchsorted(times, target, side="right") - 1
            if j == 2:
                index = n - 1
            np.testing.assert_allclose(read[b, j], every[b, index], rtol=1e-12)


def test_cfc_time_scale_is_the_unit_of_the_elapsed_time(getkey):
    """The cell reads the elapsed time divided by `time_scale` (the NumPy
    transcription fed `ts / 0.25`), so the same data in another unit, with the
    time scale in that unit, give the same outputs, where the timestamps' own
    unit does not; a time scale that is not positive and finite is refused."""
    key = getkey()
    ts, xs, lengths = ragged_batch(getkey(), 4, 6, 2)
    path = ltc_jax.InputPath(ts, xs, lengths)

    def cfc(time_scale):
        return ltc_jax.CfC(
            2, 5, 3, backbone_units=7, readout_times=3, time_scale=time_scale, key=key
        )

    final = ltc_jax.CfC(2, 5, 3, backbone_units=7, time_scale=0.25, key=key)
    expected = _numpy_final_states(final.cell, np.asarray(ts) / 0.25, xs, lengths)
    np.testing.assert_allclose(final.solve(path).ys, expected, rtol=1e-12, atol=1e-12)
    reference = cfc(0.25)(path)
    for unit in (1e-3, 3600.0):  # milliseconds to seconds, hours to seconds
        other = ltc_jax.InputPath(ts * unit, xs, lengths)
        np.testing.assert_allclose(cfc(0.25 * unit)(other), reference, rtol=1e-9)
        assert not np.allclose(cfc(0.25)(other), reference, rtol=1e-3)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="time_scale must be a positive, finite"):
            cfc(bad)


def test_cfc_trains_with_fit_and_checks_its_options(getkey):
    """Two epochs of `fit` on separable toy data lower the loss."""
    rng = np.random.default_rng(0)
    n, times = 32, 8
    ts = np.cumsum(rng.uniform(0.5, 1.5, (n, times)), axis=1)
    labels = (np.arange(n) % 2).astype(np.int32)
    xs = rng.normal(size=(n, times, 1)) + 2.0 * (2 * labels[:, None, None] - 1)
    data = ltc_jax.datasets.SequenceDataset(
        ts=ts,
        xs=xs,
        lengths=np.full(n, times, np.int32),
        labels=labels,
        class_names=("a", "b"),
    )
    model = ltc_jax.CfC(1, 8, 2, backbone_units=8, key=getkey())
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4)
    _, history = quiet_fit(
        model, data, integrator, optimizer=optax.adam(1e-2), epochs=3, batch_size=8
    )
    assert history[-1]["loss"] < history[0]["loss"]
    assert history[0]["num_steps"] == times
    # An integrator is ignored, the windowed adjoint's too (it has no field
    # to derive windows from): the same parameters as with any other.
    windowed = ltc_jax.make_integrator("tsit5", "windowed", rtol=1e-3, atol=1e-4)
    for chosen in (integrator, windowed):
        trained, history = quiet_fit(
            model, data, chosen, optimizer=optax.adam(1e-2), epochs=3, batch_size=16
        )
        assert "windows" not in history[-1]
        if chosen is integrator:
            reference = trained
    assert eqx.tree_equal(trained, reference)
    ltc_jax.evaluate(trained, data, integrator=windowed)
    with pytest.raises(ValueError, match="Unknown CfC mode"):
        ltc_jax.CfC(1, 4, 2, mode="gated", key=getkey())
    with pytest.raises(ValueError, match="backbone_activation"):
        ltc_jax.CfC(1, 4, 2, backbone_activation="swish", key=getkey())
    with pytest.raises(ValueError, match="readout_times"):
        ltc_jax.CfC(1, 4, 2, readout_times=0, key=getkey())
