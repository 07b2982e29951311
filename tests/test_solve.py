import diffrax
import jax.numpy as jnp
import numpy as np
import pytest

import ltc_jax


def _solve_exp_sin(solver, dt0):
    """y' = cos(t) y, y(0) = 1 on [0, 2]; exact solution exp(sin t)."""
    term = diffrax.ODETerm(lambda t, y, args: jnp.cos(t) * y)
    sol = diffrax.diffeqsolve(term, solver, 0.0, 2.0, dt0, jnp.array(1.0))
    return abs(float(sol.ys[-1]) - float(np.exp(np.sin(2.0))))


@pytest.mark.parametrize(
    "name, order", [("euler", 1), ("heun", 2), ("midpoint", 2), ("rk4", 4)]
)
def test_convergence_order(name, order):
    """Fit the slope of log(error) against log(dt0), as diffrax's test_ode_order."""
    dts = 2.0 / np.array([16, 32, 64, 128])
    errors = [_solve_exp_sin(ltc_jax.make_solver(name), dt) for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.15, slope


def test_rk4_tableau_is_classic():
    tableau = ltc_jax.RK4.tableau
    np.testing.assert_allclose(tableau.c, [0.5, 0.5, 1.0])
    np.testing.assert_allclose(tableau.b_sol, [1 / 6, 1 / 3, 1 / 3, 1 / 6])


def test_rk4_refuses_adaptive_steps():
    term = diffrax.ODETerm(lambda t, y, args: -y)
    with pytest.raises(RuntimeError, match="error estimates"):
        diffrax.diffeqsolve(
            term,
            ltc_jax.RK4(),
            0.0,
            1.0,
            0.1,
            jnp.array(1.0),
            stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-3),
        )


def test_every_name_builds():
    for name in ltc_jax.SOLVER_NAMES:
        assert isinstance(ltc_jax.make_solver(name), diffrax.AbstractSolver)
    expected = {
        "checkpoint": diffrax.RecursiveCheckpointAdjoint,
        "full": diffrax.RecursiveCheckpointAdjoint,
        "backsolve": diffrax.BacksolveAdjoint,
        "direct": diffrax.DirectAdjoint,
    }
    for name, cls in expected.items():
        integrator = ltc_jax.make_integrator("heun", name, dt0=0.1, max_steps=77)
        assert isinstance(integrator.adjoint, cls)
        assert integrator.adjoint_name == name
    full = ltc_jax.make_integrator("heun", "full", dt0=0.1, max_steps=77)
    assert full.adjoint.checkpoints == 77


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(solver="rk45"), "Unknown solver 'rk45'"),
        (dict(adjoint="adjoint"), "Unknown adjoint 'adjoint'"),
        (dict(dt0=0.0), "dt0 must be positive"),
        (dict(dt0=-0.1), "dt0 must be positive"),
        (dict(rtol=1e-3), "Pass both rtol and atol"),
        (dict(), "Fixed steps need dt0"),
        (dict(solver="rk4", rtol=1e-3, atol=1e-3), "no error estimate"),
        (dict(solver="euler", rtol=1e-3, atol=1e-3), "no error estimate"),
        (dict(solver="kvaerno5", dt0=0.1), "needs adaptive steps"),
        (dict(dt0=0.1, adjoint="full", checkpoints=3), "only applies to"),
        (dict(dt0=0.1, dtmin=1e-3), "dtmin applies to adaptive"),
        (dict(dt0=0.1, batching="loop"), "Unknown batching"),
        (dict(dt0=0.1, max_steps=0), "max_steps must be a positive"),
    ],
)
def test_bad_integrator_options(kwargs, match):
    kwargs = dict(dict(solver="heun"), **kwargs)
    with pytest.raises(ValueError, match=match):
        ltc_jax.make_integrator(**kwargs)


def test_implicit_solvers_default_to_one_solve_per_sequence():
    """Kvaerno5's Newton iterations factorise the state's Jacobian: per sequence
    by default, not (batch * hidden)^2 for the batch as one state."""
    assert ltc_jax.make_integrator("kvaerno5", rtol=1e-3, atol=1e-4).batching == "vmap"
    assert ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4).batching == "batched"
    assert ltc_jax.make_integrator("fused", dt0=1.0).batching == "batched"
    explicit = ltc_jax.make_integrator(
        "kvaerno5", rtol=1e-3, atol=1e-4, batching="batched"
    )
    assert explicit.batching == "batched"
