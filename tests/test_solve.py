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


def test_rk4_step_is_the_textbook_formula():
    """One step of y' = t y^2 + sin(y), nonlinear and non-autonomous, against
    Kutta's classic formula written out by hand (which Kutta's 3/8 rule, the
    other four-stage fourth-order method, does not match)."""

    def f(t, y):
        return t * y**2 + np.sin(y)

    t0, y0, h = 0.3, 0.7, 0.4
    k1 = f(t0, y0)
    k2 = f(t0 + h / 2, y0 + h / 2 * k1)
    k3 = f(t0 + h / 2, y0 + h / 2 * k2)
    k4 = f(t0 + h, y0 + h * k3)
    expected = y0 + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    term = diffrax.ODETerm(lambda t, y, args: t * y**2 + jnp.sin(y))
    sol = diffrax.diffeqsolve(term, ltc_jax.RK4(), t0, t0 + h, h, jnp.array(y0))
    assert float(sol.ys[-1]) == pytest.approx(expected, rel=1e-14)


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
        (dict(dt0=0.1, adjoint="checkpoint", checkpoints=0), "must be positive"),
        (dict(dt0=0.1, backward_solver="heun"), "only applies to adjoint='backsolve'"),
        (dict(dt0=0.1, adjoint="backsolve", seminorm=True), "adaptive steps"),
        (
            dict(adjoint="backsolve", rtol=1e-3, atol=1e-3, backward_solver="rk4"),
            "backward_solver='rk4' has no error estimate",
        ),
        (
            dict(adjoint="windowed", rtol=1e-3, atol=1e-3, backward_solver="euler"),
            "backward_solver='euler' has no error estimate",
        ),
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


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(solver="fused", adjoint="backsolve", dt0=1.0), "backward_solver='heun'"),
        (
            dict(adjoint="backsolve", rtol=1e-3, atol=1e-3, backward_solver="fused"),
            "adjoint system is not one",
        ),
        (dict(adjoint="checkpoint", rtol=1e-3, atol=1e-3, seminorm=True), "backsolve"),
    ],
)
def test_unsupported_combinations_name_what_works(kwargs, match):
    with pytest.raises(NotImplementedError, match=match):
        ltc_jax.make_integrator(**kwargs)


_PID = dict(rtol=1e-3, atol=1e-3)


def _by_hand(solver, adjoint, dt0=None, *, fixed=None, **kwargs):
    """An integrator built directly from diffrax objects, as a user may: fixed
    steps where `dt0` is given (or `fixed`), else a PID controller."""
    if dt0 is not None if fixed is None else fixed:
        controller = diffrax.ConstantStepSize()
    else:
        controller = diffrax.PIDController(**_PID)
    return lambda: ltc_jax.Integrator(
        solver, controller, adjoint, dt0, max_steps=4096, **kwargs
    )


@pytest.mark.parametrize(
    "by_name, by_hand, error",
    [
        (
            dict(solver="fused", adjoint="backsolve", dt0=0.1),
            _by_hand(ltc_jax.FusedLTC(), diffrax.BacksolveAdjoint(), 0.1),
            NotImplementedError,
        ),
        (
            dict(solver="fused", adjoint="windowed", dt0=0.1, windows=4),
            _by_hand(ltc_jax.FusedLTC(), ltc_jax.WindowedBacksolveAdjoint(4), 0.1),
            NotImplementedError,
        ),
        (
            dict(adjoint="backsolve", backward_solver="fused", **_PID),
            _by_hand(
                diffrax.Tsit5(), diffrax.BacksolveAdjoint(solver=ltc_jax.FusedLTC())
            ),
            NotImplementedError,
        ),
        (
            dict(
                solver="heun", adjoint="backsolve", dt0=0.1, backward_solver="kvaerno5"
            ),
            _by_hand(
                diffrax.Heun(), diffrax.BacksolveAdjoint(solver=diffrax.Kvaerno5()), 0.1
            ),
            ValueError,
        ),
        (
            dict(solver="heun", adjoint="backsolve", dt0=0.1, seminorm=True),
            _by_hand(
                diffrax.Heun(),
                diffrax.BacksolveAdjoint(
                    stepsize_controller=diffrax.PIDController(
                        **_PID, norm=diffrax.adjoint_rms_seminorm
                    )
                ),
                0.1,
            ),
            ValueError,
        ),
        (
            dict(solver="rk4", **_PID),
            _by_hand(ltc_jax.RK4(), diffrax.RecursiveCheckpointAdjoint()),
            ValueError,
        ),
        (
            dict(solver="kvaerno5", dt0=0.1),
            _by_hand(
                diffrax.Kvaerno5(),
                diffrax.RecursiveCheckpointAdjoint(),
                0.1,
                batching="vmap",
            ),
            ValueError,
        ),
        (
            dict(solver="heun"),
            _by_hand(diffrax.Heun(), diffrax.RecursiveCheckpointAdjoint(), fixed=True),
            ValueError,
        ),
    ],
)
def test_a_hand_built_integrator_is_refused_as_make_integrator_refuses(
    by_name, by_hand, error
):
    """Every combination make_integrator refuses is refused with the same error
    and message when the integrator is built directly from diffrax objects."""
    with pytest.raises(error) as named:
        ltc_jax.make_integrator(**by_name)
    with pytest.raises(error) as built:
        by_hand()
    assert str(built.value) == str(named.value)


def test_every_gradient_mode_name_round_trips():
    """`make_adjoint` and the name an integrator reports agree for every mode, and
    an adjoint object from outside ltc_jax keeps its class name."""
    for name in ltc_jax.ADJOINT_NAMES:
        integrator = ltc_jax.make_integrator("heun", name, dt0=0.1, max_steps=9)
        assert integrator.adjoint_name == name
    foreign = ltc_jax.Integrator(
        diffrax.Heun(),
        diffrax.ConstantStepSize(),
        diffrax.ForwardMode(),
        0.1,
        max_steps=9,
    )
    assert foreign.adjoint_name == "ForwardMode"


def _dataset(durations):
    ts = np.stack([np.linspace(2.0, 2.0 + d, 4) for d in durations])
    return ltc_jax.datasets.SequenceDataset(
        ts=ts,
        xs=np.zeros(ts.shape + (1,)),
        lengths=np.full(len(durations), 4, dtype=np.int32),
        labels=np.zeros(len(durations), dtype=np.int32),
        class_names=("a",),
    )


def test_fixed_max_steps_is_what_the_longest_sequence_takes():
    """ceil(duration / dt0) of the longest sequence, over several datasets; an
    exact multiple of dt0 takes that many steps, not one more."""
    train, test = _dataset([1.0, 2.9]), _dataset([3.05])
    assert ltc_jax.training.fixed_max_steps([train], 0.5) == 6  # 2.9 / 0.5 = 5.8
    assert ltc_jax.training.fixed_max_steps([train, test], 0.5) == 7  # 3.05 / 0.5 = 6.1
    assert (
        ltc_jax.training.fixed_max_steps([_dataset([0.3])], 0.1) == 3
    )  # 0.3 / 0.1 in floats
    with pytest.raises(ValueError, match="dt0 must be positive"):
        ltc_jax.training.fixed_max_steps([train], 0.0)
