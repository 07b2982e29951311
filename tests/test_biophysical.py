"""The original authors' cell, wirings and fused step."""

import diffrax
import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import max_relative_error, ragged_batch

import ltc_jax


def _numpy_params(cell):
    names = [
        "gleak",
        "vleak",
        "cm",
        "w",
        "sigma",
        "mu",
        "erev",
        "sensory_w",
        "sensory_sigma",
        "sensory_mu",
        "sensory_erev",
        "input_w",
        "input_b",
        "mask",
        "sensory_mask",
    ]
    return {name: np.asarray(getattr(cell, name), dtype=np.float64) for name in names}


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def numpy_original_fused_rnn_step(p, v, x, elapsed, unfolds, eps=1e-8):
    """The original update rule (ncps LTCCell._ode_solver), written out in NumPy
    for a batch: v (batch, units), x (batch, inputs), elapsed (batch,)."""
    x = x * p["input_w"] + p["input_b"]
    s_act = p["sensory_w"] * _sigmoid(
        p["sensory_sigma"] * (x[:, :, None] - p["sensory_mu"])
    )
    s_act = s_act * p["sensory_mask"]
    s_num = np.sum(s_act * p["sensory_erev"], axis=1)
    s_den = np.sum(s_act, axis=1)
    cm_t = p["cm"] / (elapsed[:, None] / unfolds)  # per-sequence time, broadcast right
    for _ in range(unfolds):
        w_act = p["w"] * _sigmoid(p["sigma"] * (v[:, :, None] - p["mu"])) * p["mask"]
        numerator = (
            cm_t * v
            + p["gleak"] * p["vleak"]
            + np.sum(w_act * p["erev"], axis=1)
            + s_num
        )
        denominator = cm_t + p["gleak"] + np.sum(w_act, axis=1) + s_den
        v = numerator / (denominator + eps)
    return v


def numpy_biophysical_derivative(p, v, x):
    x = x * p["input_w"] + p["input_b"]
    s_act = p["sensory_w"] * _sigmoid(
        p["sensory_sigma"] * (x[:, None] - p["sensory_mu"])
    )
    s_act = s_act * p["sensory_mask"]
    w_act = p["w"] * _sigmoid(p["sigma"] * (v[:, None] - p["mu"])) * p["mask"]
    current = (
        p["gleak"] * (p["vleak"] - v)
        + np.sum(w_act * (p["erev"] - v[None, :]), axis=0)
        + np.sum(s_act * (p["sensory_erev"] - v[None, :]), axis=0)
    )
    return current / p["cm"]


def _cell(key, units=6, inputs=3, outputs=2, kind="fc"):
    wiring = ltc_jax.make_wiring(kind, units, outputs, inputs, seed=3)
    return ltc_jax.BiophysicalLTCVectorField(wiring, key=key)


@pytest.mark.parametrize("kind", ["fc", "random", "ncp"])
def test_vector_field_matches_numpy_equation(getkey, kind):
    cell = _cell(getkey(), units=7, kind=kind)
    p = _numpy_params(cell)
    v = np.asarray(jr.normal(getkey(), (7,)))
    x = np.asarray(jr.normal(getkey(), (3,)))
    np.testing.assert_allclose(
        cell.dynamics(jnp.asarray(v), jnp.asarray(x)),
        numpy_biophysical_derivative(p, v, x),
        rtol=1e-12,
    )


def test_fused_steps_match_the_original_update_rule(getkey):
    """Golden test: a few RNN steps of the original rule (inputs held over each
    step, per-sequence elapsed times, batch size equal to the number of units)
    against ltc_jax's fused solver inside diffeqsolve."""
    units = 6
    cell = _cell(getkey(), units=units)
    p = _numpy_params(cell)
    batch = units
    elapsed = np.asarray(jr.uniform(getkey(), (3, batch), minval=0.2, maxval=1.5))
    inputs = np.asarray(jr.normal(getkey(), (3, batch, 3)))
    integrator = ltc_jax.make_integrator("fused", dt0=10.0, ode_unfolds=6, max_steps=4)
    v_np = np.zeros((batch, units))
    v = jnp.zeros((batch, units))
    for step in range(3):
        v_np = numpy_original_fused_rnn_step(p, v_np, inputs[step], elapsed[step], 6)
        # One interval per sequence, input constant over it, one solver step each.
        ts = jnp.stack([jnp.zeros(batch), jnp.asarray(elapsed[step])], axis=1)
        xs = jnp.repeat(jnp.asarray(inputs[step])[:, None], 2, axis=1)
        v = ltc_jax.integrate(cell, ltc_jax.InputPath(ts, xs), v, integrator).ys
        np.testing.assert_allclose(v, v_np, rtol=1e-7, atol=1e-9)


def test_zero_elapsed_time_is_a_no_op():
    cell = _cell(jr.PRNGKey(0))
    path = diffrax.LinearInterpolation(jnp.array([0.0, 1.0]), jnp.ones((2, 3)))
    y0 = jnp.linspace(-1.0, 1.0, 6)
    solver = ltc_jax.FusedLTC(6)
    y1, error, _, _, result = solver.step(
        ltc_jax.LTCTerm(cell), 0.5, 0.5, y0, path, None, False
    )
    assert error is None and result == diffrax.RESULTS.successful
    np.testing.assert_array_equal(y1, y0)


def test_fused_converges_at_first_order_in_the_unfolds(getkey):
    cell = _cell(getkey(), units=5)
    ts = jnp.linspace(0.0, 4.0, 5)
    xs = jr.normal(getkey(), (1, 5, 3))
    path = ltc_jax.InputPath(ts, xs)
    y0 = jnp.zeros((1, 5))
    reference = ltc_jax.integrate(
        cell, path, y0, ltc_jax.make_integrator("tsit5", rtol=1e-12, atol=1e-12)
    ).ys
    unfolds = np.array([4, 8, 16, 32])
    errors = []
    for u in unfolds:
        integrator = ltc_jax.make_integrator(
            "fused", dt0=1.0, ode_unfolds=int(u), max_steps=8
        )
        errors.append(
            float(
                jnp.max(
                    jnp.abs(
                        ltc_jax.integrate(cell, path, y0, integrator).ys - reference
                    )
                )
            )
        )
    slope = np.polyfit(np.log(unfolds), np.log(errors), 1)[0]
    assert abs(slope + 1.0) < 0.15, (slope, errors)


def _loss(model, integrator, ts, xs, lengths):
    path = ltc_jax.InputPath(ts, xs, lengths)
    return jnp.sum(jnp.sin(model(path, integrator=integrator)))


def test_gradient_modes_agree_on_the_biophysical_cell(getkey):
    model = ltc_jax.LTC(2, 6, 2, cell="biophysical", wiring="ncp", key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 5, 2)
    grads = {}
    for mode in ltc_jax.ADJOINT_NAMES:
        integrator = ltc_jax.make_integrator("rk4", mode, dt0=0.01, max_steps=300)
        grads[mode] = eqx.filter_jit(eqx.filter_grad(_loss))(
            model, integrator, ts, xs, lengths
        )
    for mode in ("checkpoint", "direct", "backsolve"):
        assert max_relative_error(grads[mode], grads["full"]) < 1e-6, mode
    # The wiring's masks are integers: never trained, no gradient.
    assert grads["full"].cell.mask is None and grads["full"].cell.sensory_mask is None


def test_fused_solver_under_every_gradient_mode(getkey):
    model = ltc_jax.LTC(2, 6, 2, cell="biophysical", key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 6, 5, 2)  # batch == units
    grads = {}
    for mode in ltc_jax.ADJOINT_NAMES:
        backward = "heun" if mode == "backsolve" else None
        integrator = ltc_jax.make_integrator(
            "fused", mode, dt0=0.05, max_steps=64, backward_solver=backward
        )
        grads[mode] = eqx.filter_jit(eqx.filter_grad(_loss))(
            model, integrator, ts, xs, lengths
        )
    # full, checkpoint and direct differentiate the same discrete steps.
    assert max_relative_error(grads["checkpoint"], grads["full"]) < 1e-12
    assert max_relative_error(grads["direct"], grads["full"]) < 1e-12
    # backsolve integrates the continuous adjoint with Heun: close, not equal.
    assert max_relative_error(grads["backsolve"], grads["full"]) < 0.05
    with pytest.raises(ValueError, match="needs a backward_solver"):
        ltc_jax.make_integrator("fused", "backsolve", dt0=0.1)


def test_fused_batched_equals_each_sequence_alone(getkey):
    model = ltc_jax.LTC(2, 6, 2, cell="biophysical", wiring="random", key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 6, 5, 2)
    integrator = ltc_jax.make_integrator("fused", dt0=0.3, max_steps=64)
    out = model(ltc_jax.InputPath(ts, xs, lengths), integrator=integrator)
    for b in range(6):
        n = int(lengths[b])
        alone = model(
            ltc_jax.InputPath(ts[b : b + 1, :n], xs[b : b + 1, :n]),
            integrator=integrator,
        )
        np.testing.assert_allclose(out[b], alone[0], rtol=1e-12)


def test_fused_keeps_simplified_ltc_inside_theorem2_bound_for_any_step(getkey):
    cell = ltc_jax.LTCVectorField(2, 8, tau_init=(0.01, 0.02), key=getkey())
    ts = jnp.linspace(0.0, 50.0, 11)
    xs = 5.0 * jr.normal(getkey(), (1, 11, 2))
    integrator = ltc_jax.make_integrator("fused", dt0=5.0, ode_unfolds=1, max_steps=16)
    ys = ltc_jax.integrate(
        cell,
        ltc_jax.InputPath(ts, xs),
        jnp.zeros((1, 8)),
        integrator,
        save="observations",
    ).ys
    A = np.asarray(cell.A)
    assert np.all(np.isfinite(ys))
    assert np.all(ys >= np.minimum(0, A) - 1e-12) and np.all(
        ys <= np.maximum(0, A) + 1e-12
    )


def test_positivity_by_construction(getkey):
    cell = _cell(getkey())
    pushed = eqx.tree_at(
        lambda c: (c.cm_raw, c.gleak_raw, c.w_raw, c.sensory_w_raw),
        cell,
        replace_fn=lambda raw: raw - 1e3,
    )
    for name in ("cm", "gleak", "w", "sensory_w"):
        assert float(jnp.min(getattr(pushed, name))) >= 0.0
        assert float(jnp.min(getattr(cell, name))) > 0.0


def test_initial_ranges_and_polarity(getkey):
    wiring = ltc_jax.make_wiring("fc", 40, 3, 5, seed=0)
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


def test_wiring_structure():
    fc = ltc_jax.fully_connected(5, 2, 3)
    assert fc.synapse_count == 25 and fc.sensory_synapse_count == 15
    rnd = ltc_jax.random_wiring(10, 2, 4, sparsity=0.7)
    assert rnd.synapse_count == 30 and rnd.sensory_synapse_count == 12
    w = ltc_jax.ncp(
        8,
        5,
        3,
        4,
        sensory_fanout=3,
        inter_fanout=2,
        recurrent_command_synapses=4,
        motor_fanin=2,
    )
    motor, command, inter = range(0, 3), range(3, 8), range(8, 16)
    a = w.adjacency != 0
    # Only sensory->inter, inter->command, command->command, command->motor.
    assert not w.sensory_adjacency[:, :8].any()
    assert not a[np.ix_(inter, inter)].any() and not a[np.ix_(inter, motor)].any()
    assert not a[np.ix_(command, inter)].any() and not a[np.ix_(motor, range(16))].any()
    assert all(np.count_nonzero(w.sensory_adjacency[:, i]) >= 1 for i in inter)
    assert all(np.count_nonzero(a[np.ix_(command, [m])]) >= 2 for m in motor)
    assert all(a[np.ix_([c], motor)].any() for c in command)
    assert all(np.count_nonzero(w.sensory_adjacency[s]) == 3 for s in range(4))
    auto = ltc_jax.auto_ncp(16, 4, 3)
    assert auto.units == 16 and auto.output_size == 4 and auto.kind == "ncp"
    graph = auto.to_networkx()
    assert graph.number_of_edges() == auto.synapse_count + auto.sensory_synapse_count
    assert graph.number_of_nodes() == 16 + 3


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ltc_jax.make_wiring("star", 8, 2, 3), "Unknown wiring"),
        (lambda: ltc_jax.auto_ncp(5, 3, 2), "at least 2 neurons"),
        (lambda: ltc_jax.random_wiring(5, 2, 2, sparsity=1.0), "sparsity"),
        (
            lambda: ltc_jax.ncp(
                2,
                2,
                1,
                3,
                sensory_fanout=3,
                inter_fanout=1,
                recurrent_command_synapses=1,
                motor_fanin=1,
            ),
            "sensory_fanout",
        ),
        (lambda: ltc_jax.fully_connected(4, 5, 2), "output_size"),
        (lambda: ltc_jax.FusedLTC(0), "ode_unfolds"),
        (
            lambda: ltc_jax.LTC(2, 6, 2, cell="hodgkin", key=jr.PRNGKey(0)),
            "Unknown cell",
        ),
        (
            lambda: ltc_jax.LTC(
                2,
                6,
                2,
                cell="biophysical",
                wiring=ltc_jax.fully_connected(5, 2, 2),
                key=jr.PRNGKey(0),
            ),
            "the model needs 6",
        ),
        (
            lambda: ltc_jax.make_integrator("fused", rtol=1e-3, atol=1e-3),
            "no error estimate",
        ),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
