"""The fused semi-implicit step: the original update rule, its order, its protocol
with the term, and the gradient modes."""

import diffrax
import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import (
    biophysical_cell,
    max_relative_error,
    mode_options,
    numpy_biophysical_params,
    numpy_original_fused_rnn_step,
    ragged_batch,
)

import ltc_jax


def test_fused_steps_match_the_original_update_rule(getkey):
    """Golden test: a few RNN steps of the original rule (inputs held over each
    step, per-sequence elapsed times, batch size equal to the number of units)
    against ltc_jax's fused solver inside diffeqsolve."""
    units = 6
    cell = biophysical_cell(getkey(), units=units)
    p = numpy_biophysical_params(cell)
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
    cell = biophysical_cell(jr.PRNGKey(0))
    path = diffrax.LinearInterpolation(jnp.array([0.0, 1.0]), jnp.ones((2, 3)))
    y0 = jnp.linspace(-1.0, 1.0, 6)
    solver = ltc_jax.FusedLTC(6)
    y1, error, _, _, result = solver.step(
        ltc_jax.LTCTerm(cell), 0.5, 0.5, y0, path, None, False
    )
    assert error is None and result == diffrax.RESULTS.successful
    np.testing.assert_array_equal(y1, y0)


def test_fused_converges_at_first_order_in_the_unfolds(getkey):
    cell = biophysical_cell(getkey(), units=5)
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


def test_fused_solver_under_every_gradient_mode(getkey):
    model = ltc_jax.LTC(2, 6, 2, cell="biophysical", key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 6, 5, 2)  # batch == units
    grads = {}
    for mode in ltc_jax.ADJOINT_NAMES:
        backward = "heun" if mode in ("backsolve", "windowed") else None
        integrator = ltc_jax.make_integrator(
            "fused",
            mode,
            dt0=0.05,
            max_steps=64,
            backward_solver=backward,
            **mode_options(mode),
        )
        grads[mode] = eqx.filter_jit(eqx.filter_grad(_loss))(
            model, integrator, ts, xs, lengths
        )
    # full, checkpoint and direct differentiate the same discrete steps.
    assert max_relative_error(grads["checkpoint"], grads["full"]) < 1e-12
    assert max_relative_error(grads["direct"], grads["full"]) < 1e-12
    # backsolve integrates the continuous adjoint with Heun: close, not equal;
    # windowed too, its reconstruction restarted from the fused forward states.
    for mode in ("backsolve", "windowed"):
        assert max_relative_error(grads[mode], grads["full"]) < 0.05, mode
    with pytest.raises(NotImplementedError, match="needs a backward_solver"):
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
    ys = np.asarray(ys)
    assert np.all(np.isfinite(ys))
    assert np.all(ys >= np.minimum(0, A) - 1e-12) and np.all(
        ys <= np.maximum(0, A) + 1e-12
    )


def test_a_field_not_in_ltc_form_is_refused_by_name(getkey):
    """The fused step needs `(dh/dt, decay)`; a plain vector field gets a
    ValueError naming the problem before anything is traced."""

    class Plain(eqx.Module):
        def __call__(self, t, y, args):
            return -y

    ts = jnp.linspace(0.0, 1.0, 3)
    path = ltc_jax.InputPath(ts, jr.normal(getkey(), (2, 3, 1)))
    integrator = ltc_jax.make_integrator("fused", dt0=0.5)
    with pytest.raises(ValueError, match="steps only vector fields in LTC form"):
        ltc_jax.integrate(Plain(), path, jnp.zeros((2, 3)), integrator)
    # The same field with another solver is fine.
    heun = ltc_jax.make_integrator("heun", dt0=0.5)
    ys = ltc_jax.integrate(Plain(), path, jnp.ones((2, 3)), heun).ys
    np.testing.assert_allclose(ys, (1 - 0.5 + 0.5**2 / 2) ** 2, rtol=1e-12)


def test_ltc_term_is_an_ordinary_ode_term_for_other_solvers(getkey):
    """`LTCTerm` in a user's own diffeqsolve: the fused step and Tsit5 both solve
    it, and agree as the unfolds grow."""
    cell = ltc_jax.LTCVectorField(2, 4, key=getkey())
    ts = jnp.linspace(0.0, 2.0, 5)
    path = diffrax.LinearInterpolation(ts, jr.normal(getkey(), (5, 2)))
    term = ltc_jax.LTCTerm(cell)

    def solve(solver, **kwargs):
        return diffrax.diffeqsolve(
            term, solver, 0.0, 2.0, 0.5, jnp.zeros(4), args=path, **kwargs
        ).ys[-1]

    reference = solve(
        diffrax.Tsit5(),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10, jump_ts=ts),
    )
    coarse = float(jnp.max(jnp.abs(solve(ltc_jax.FusedLTC(4)) - reference)))
    fine = float(jnp.max(jnp.abs(solve(ltc_jax.FusedLTC(64)) - reference)))
    assert fine < coarse / 8
