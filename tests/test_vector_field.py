import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
import pytest
from helpers import numpy_ltc

import ltc_jax


def test_matches_numpy_equation(getkey):
    input_size, hidden_size = 3, 5
    cell = ltc_jax.LTCVectorField(input_size, hidden_size, tau_min=0.05, key=getkey())
    cell = eqx.tree_at(lambda c: c.bias, cell, jnp.full((hidden_size,), 0.3))
    h = jax.random.normal(getkey(), (hidden_size,))
    x = jax.random.normal(getkey(), (input_size,))
    expected = numpy_ltc(
        np.asarray(h),
        np.asarray(x),
        np.asarray(cell.weight_in),
        np.asarray(cell.weight_rec),
        np.asarray(cell.bias),
        np.log1p(np.exp(np.asarray(cell.tau_raw))) + 0.05,
        np.asarray(cell.A),
    )
    path = diffrax.LinearInterpolation(jnp.array([0.0, 1.0]), jnp.stack([x, x]))
    np.testing.assert_allclose(cell(0.5, h, path), expected, rtol=1e-12)
    # The other written form of Eq. 1: -h/tau + (A - h) * f.
    f = np.asarray(cell.gate(h, x))
    np.testing.assert_allclose(
        expected, -np.asarray(h) / np.asarray(cell.tau) + (cell.A - h) * f, rtol=1e-12
    )


@pytest.mark.parametrize("batch", [1, 4, 5])  # 5 == hidden_size
def test_batched_rows_are_independent_sequences(getkey, batch):
    """The field takes the whole batch in matrix products (any leading axes);
    each row is still its own sequence's equation, checked against the NumPy
    transcription row by row, the decay `1/tau + f` with it."""
    cell = ltc_jax.LTCVectorField(3, 5, key=getkey())
    weights = [np.asarray(a) for a in (cell.weight_in, cell.weight_rec, cell.bias)]
    tau, A = np.asarray(cell.tau), np.asarray(cell.A)
    for leading in [(batch,), (2, batch)]:
        h = jax.random.normal(getkey(), (*leading, 5))
        x = jax.random.normal(getkey(), (*leading, 3))
        derivative, decay = cell.derivative_and_decay_at(h, x)
        assert derivative.shape == decay.shape == (*leading, 5)
        rows = np.asarray(h).reshape(-1, 5), np.asarray(x).reshape(-1, 3)
        derivative, decay = (np.asarray(a).reshape(-1, 5) for a in (derivative, decay))
        for row, (hb, xb) in enumerate(zip(*rows, strict=True)):
            expected = numpy_ltc(hb, xb, *weights, tau, A)
            np.testing.assert_allclose(derivative[row], expected, rtol=1e-12)
            f = 1 / (1 + np.exp(-(weights[0] @ xb + weights[1] @ hb + weights[2])))
            np.testing.assert_allclose(decay[row], 1 / tau + f, rtol=1e-12)


def test_tau_positive_initial_range_and_floor(getkey):
    cell = ltc_jax.LTCVectorField(2, 1000, key=getkey())
    tau = np.asarray(cell.tau)
    assert tau.min() >= 0.1 * (1 - 1e-9) and tau.max() <= 10.0 * (1 + 1e-9)
    # log-uniform: about half the units below the geometric mean 1.
    assert 0.4 < np.mean(tau < 1.0) < 0.6
    floored = ltc_jax.LTCVectorField(2, 50, tau_min=0.05, key=getkey())
    # Whatever an optimiser does to tau_raw, tau stays above the floor.
    pushed = eqx.tree_at(lambda c: c.tau_raw, floored, jnp.full((50,), -1e3))
    assert float(jnp.min(pushed.tau)) >= 0.05


def test_bad_arguments(getkey):
    with pytest.raises(ValueError, match="positive"):
        ltc_jax.LTCVectorField(0, 4, key=getkey())
    with pytest.raises(ValueError, match="tau_min"):
        ltc_jax.LTCVectorField(2, 4, tau_min=0.2, key=getkey())


def test_theorem2_bound_under_bounded_input(getkey):
    """Hasani et al. (2021), Theorem 2: with h(0) = 0, each unit stays inside
    [min(0, A_i), max(0, A_i)] for any input."""
    cell = ltc_jax.LTCVectorField(2, 8, key=getkey())
    ts = jnp.linspace(0.0, 20.0, 201)
    xs = 3.0 * jax.random.normal(getkey(), (201, 2))
    path = diffrax.LinearInterpolation(ts, xs)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(cell),
        diffrax.Tsit5(),
        0.0,
        20.0,
        None,
        jnp.zeros(8),
        args=path,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-7, atol=1e-9, jump_ts=ts),
    )
    low = np.minimum(0.0, np.asarray(cell.A)) - 1e-9
    high = np.maximum(0.0, np.asarray(cell.A)) + 1e-9
    ys = np.asarray(sol.ys)
    assert np.all(ys >= low) and np.all(ys <= high)


def test_mixed_precision_rounds_the_products_operands_to_bfloat16(getkey):
    """With `matmul_dtype="bfloat16"` the field is the NumPy equation on
    operands of the two products rounded to bfloat16 (float32 products summed
    exactly enough), everything else in float32; the state stays float32 and
    the gradient is finite."""
    with jax.enable_x64(False):
        cell = ltc_jax.LTCVectorField(
            3, 5, tau_min=0.05, matmul_dtype="bfloat16", key=getkey()
        )
        h = jax.random.normal(getkey(), (5,))
        x = jax.random.normal(getkey(), (3,))
        path = diffrax.LinearInterpolation(jnp.array([0.0, 1.0]), jnp.stack([x, x]))
        out = cell(0.5, h, path)

        def rounded(a):
            return np.asarray(jnp.asarray(a).astype(jnp.bfloat16).astype(jnp.float32))

        def expected(h, x):  # rows of h and x: one sequence each
            pre = (
                rounded(x) @ rounded(cell.weight_in).astype(np.float64).T
                + rounded(h) @ rounded(cell.weight_rec).astype(np.float64).T
                + np.asarray(cell.bias)
            )
            f = 1 / (1 + np.exp(-pre))
            tau = np.log1p(np.exp(np.asarray(cell.tau_raw, np.float64))) + 0.05
            return -(1 / tau + f) * np.asarray(h) + f * np.asarray(cell.A)

        assert out.dtype == jnp.float32
        np.testing.assert_allclose(out, expected(h, x), rtol=1e-5, atol=1e-6)
        # A batch takes the same rounded products, a row per sequence.
        hs = jax.random.normal(getkey(), (4, 5))
        xs = jax.random.normal(getkey(), (4, 3))
        batched = cell.dynamics(hs, xs)
        assert batched.dtype == jnp.float32
        np.testing.assert_allclose(batched, expected(hs, xs), rtol=1e-5, atol=1e-6)
        grad = jax.grad(lambda c: jnp.sum(c(0.5, h, path)))(cell)
        assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grad))
    with pytest.raises(ValueError, match="float dtype"):
        ltc_jax.LTCVectorField(3, 5, matmul_dtype="int8", key=getkey())
    with pytest.raises(ValueError, match="'ltc' cell"):
        ltc_jax.LTC(2, 8, 2, cell="biophysical", matmul_dtype="bfloat16", key=getkey())


def test_chrono_gate_bias_gives_each_unit_a_memory_of_half_its_tau(getkey):
    """With the input and recurrent weights at zero the field is linear,
    dh/dt = -(1/tau + g) h + g A with the constant gate g = sigmoid(b), whose
    solution from h(0) = 0 is h(t) = h_inf (1 - exp(-(1/tau + g) t)). Chrono's
    g = 1/tau (tau >= 2) reaches 1 - 1/e of the way at t = tau/2; the zero
    bias's g = 1/2 does so within 2 time units whatever tau."""
    hidden = 8
    tau_init = (0.5, 200.0)
    for gate_bias_init in ("chrono", "zero"):
        cell = ltc_jax.LTCVectorField(
            1, hidden, tau_init=tau_init, gate_bias_init=gate_bias_init, key=getkey()
        )
        cell = eqx.tree_at(
            lambda c: (c.weight_in, c.weight_rec),
            cell,
            (jnp.zeros_like(cell.weight_in), jnp.zeros_like(cell.weight_rec)),
        )
        tau = np.asarray(cell.tau)
        gate = np.minimum(0.5, 1 / tau) if gate_bias_init == "chrono" else 0.5
        np.testing.assert_allclose(jax.nn.sigmoid(cell.bias), gate, rtol=1e-12)
        rate = 1 / tau + gate
        # The solve reaches the closed form at t = tau/2 per unit.
        term = diffrax.ODETerm(lambda t, y, cell: cell.dynamics(y, jnp.zeros((1,))))
        for unit in range(hidden):
            t1 = tau[unit] / 2
            sol = diffrax.diffeqsolve(
                term,
                diffrax.Tsit5(),
                0.0,
                t1,
                t1 / 100,
                jnp.zeros(hidden),
                args=cell,
                stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-12),
                max_steps=100_000,
            )
            h_inf = np.asarray(cell.A) * gate / rate
            expected = h_inf * (1 - np.exp(-rate * t1))
            np.testing.assert_allclose(sol.ys[-1], expected, rtol=1e-7, atol=1e-12)
            fraction = float(sol.ys[-1][unit] / h_inf[unit])  # the solve's own
            if gate_bias_init == "chrono" and tau[unit] >= 2:
                assert fraction == pytest.approx(1 - np.exp(-1), rel=1e-6)
            if gate_bias_init == "zero":  # a rate of at least 1/2 whatever tau
                assert fraction >= 1 - np.exp(-t1 / 2) - 1e-9
    # A ValueError, or under the tests' runtime type checks the Literal's own.
    with pytest.raises((ValueError, jaxtyping.TypeCheckError)):
        ltc_jax.LTCVectorField(1, 2, gate_bias_init="ones", key=getkey())
    with pytest.raises(ValueError, match="gate_bias_init is an option"):
        ltc_jax.LTC(1, 2, 2, cell="biophysical", gate_bias_init="chrono", key=getkey())
