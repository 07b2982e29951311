"""The batched solve: equal to per-sequence solves, to independent references, and
across gradient modes."""

import unittest.mock

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import (
    field_params,
    max_relative_error,
    mode_options,
    numpy_solve_fixed,
    ragged_batch,
)

import ltc_jax


HIDDEN = 4
INPUT = 2


def _model(key, tau_min=0.2):
    return ltc_jax.LTC(INPUT, HIDDEN, 3, tau_init=(0.5, 3.0), tau_min=tau_min, key=key)


@eqx.filter_jit
def _outputs(model, ts, xs, lengths, integrator, save="final"):
    return model(ltc_jax.InputPath(ts, xs, lengths), integrator=integrator, save=save)


def _alone(model, ts, xs, lengths, integrator, b, save="final"):
    n = int(lengths[b])
    return _outputs(
        model, ts[b : b + 1, :n], xs[b : b + 1, :n], None, integrator, save
    )[0]


@pytest.mark.parametrize("solver", ["euler", "heun", "rk4", "tsit5"])
@pytest.mark.parametrize("batch", [1, HIDDEN, 2 * HIDDEN + 1])
def test_batched_equals_each_sequence_alone(getkey, solver, batch):
    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), batch, 6, INPUT)
    integrator = ltc_jax.make_integrator(solver, dt0=0.13, max_steps=64)
    out = _outputs(model, ts, xs, lengths, integrator)
    for b in range(batch):
        np.testing.assert_allclose(
            out[b],
            _alone(model, ts, xs, lengths, integrator, b),
            rtol=1e-12,
            atol=1e-13,
        )


def test_gradients_of_batch_equal_sum_of_gradients_alone(getkey):
    model = _model(getkey())
    batch = HIDDEN  # the case where a wrongly broadcast time step goes unnoticed
    ts, xs, lengths = ragged_batch(getkey(), batch, 6, INPUT)
    integrator = ltc_jax.make_integrator("rk4", dt0=0.2, max_steps=64)

    def loss(model, ts, xs, lengths):
        return jnp.sum(_outputs(model, ts, xs, lengths, integrator) ** 2)

    grad = eqx.filter_grad(loss)
    batched = grad(model, ts, xs, lengths)
    alone = [
        grad(
            model,
            ts[b : b + 1, : int(lengths[b])],
            xs[b : b + 1, : int(lengths[b])],
            None,
        )
        for b in range(batch)
    ]
    summed = jax.tree.map(lambda *g: sum(g), *alone)
    assert max_relative_error(batched, summed) < 1e-12


@pytest.mark.parametrize("solver", ["euler", "heun", "rk4"])
def test_fixed_steps_match_numpy_reference(getkey, solver):
    """Each sequence takes ceil(T / dt0) equal steps; checked against a plain
    NumPy Runge-Kutta loop with np.interp inputs."""
    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 7, INPUT)
    integrator = ltc_jax.make_integrator(solver, dt0=0.21, max_steps=64)
    states = eqx.filter_jit(
        lambda m, ts, xs, n: (
            m.solve(ltc_jax.InputPath(ts, xs, n), integrator=integrator).ys
        )
    )(model, ts, xs, lengths)
    for b in range(3):
        n = int(lengths[b])
        expected = numpy_solve_fixed(
            field_params(model.cell),
            np.asarray(ts[b, :n]),
            np.asarray(xs[b, :n]),
            0.21,
            solver,
        )
        np.testing.assert_allclose(states[b], expected, rtol=1e-11, atol=1e-13)


def test_vmap_batching_equals_batched_for_fixed_steps(getkey):
    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), 5, 6, INPUT)
    batched = ltc_jax.make_integrator("heun", dt0=0.1, max_steps=64)
    vmapped = ltc_jax.make_integrator("heun", dt0=0.1, max_steps=64, batching="vmap")
    np.testing.assert_allclose(
        _outputs(model, ts, xs, lengths, batched),
        _outputs(model, ts, xs, lengths, vmapped),
        rtol=1e-12,
    )


def test_adaptive_batched_close_to_per_sequence_adaptive(getkey):
    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), 5, 6, INPUT)
    kwargs = dict(rtol=1e-10, atol=1e-12, max_steps=4096)
    batched = ltc_jax.make_integrator("tsit5", **kwargs)
    vmapped = ltc_jax.make_integrator("tsit5", batching="vmap", **kwargs)
    np.testing.assert_allclose(
        _outputs(model, ts, xs, lengths, batched),
        _outputs(model, ts, xs, lengths, vmapped),
        rtol=1e-7,
        atol=1e-9,
    )


def test_sequence_outputs_at_observation_times(getkey):
    """States saved at every observation equal an independent diffrax solve of that
    sequence alone (ODETerm, own times, tight tolerance)."""
    import diffrax

    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 6, INPUT)
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-10, atol=1e-12)
    states = eqx.filter_jit(
        lambda m, ts, xs, n: (
            m.solve(
                ltc_jax.InputPath(ts, xs, n), integrator=integrator, save="observations"
            ).ys
        )
    )(model, ts, xs, lengths)
    assert states.shape == (3, 6, HIDDEN)
    for b in range(3):
        n = int(lengths[b])
        path = diffrax.LinearInterpolation(ts[b, :n], xs[b, :n])
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(model.cell),
            diffrax.Tsit5(),
            ts[b, 0],
            ts[b, n - 1],
            None,
            jnp.zeros(HIDDEN),
            args=path,
            saveat=diffrax.SaveAt(ts=ts[b, :n]),
            stepsize_controller=diffrax.PIDController(
                rtol=1e-10, atol=1e-12, jump_ts=ts[b, :n]
            ),
        )
        np.testing.assert_allclose(states[b, :n], sol.ys, rtol=1e-7, atol=1e-9)
        # Padding repeats the final state.
        np.testing.assert_allclose(
            states[b, n:],
            jnp.broadcast_to(sol.ys[-1], (6 - n, HIDDEN)),
            rtol=1e-7,
            atol=1e-9,
        )


def test_sequence_outputs_with_shared_times(getkey):
    model = _model(getkey())
    ts = jnp.linspace(0.0, 2.0, 5)
    xs = jr.normal(getkey(), (3, 5, INPUT))
    integrator = ltc_jax.make_integrator("heun", dt0=0.05, max_steps=64)
    shared = _outputs(model, ts, xs, None, integrator, "observations")
    per_sequence = _outputs(
        model,
        jnp.broadcast_to(ts, (3, 5)),
        xs,
        jnp.full((3,), 5),
        integrator,
        "observations",
    )
    np.testing.assert_allclose(shared, per_sequence, rtol=1e-12)
    np.testing.assert_allclose(
        shared[:, -1], _outputs(model, ts, xs, None, integrator), rtol=1e-12
    )


@pytest.mark.parametrize("mode", ["checkpoint", "backsolve"])
def test_long_shared_times_solve_like_per_sequence_times(getkey, mode):
    """A solve on one time grid evaluates its input at one scalar time for the
    whole batch; over a path of several 64-knot blocks its outputs and gradient
    equal those of the same times given per sequence."""
    times = 300
    ts = jnp.linspace(0.0, 6.0, times)
    xs = jr.normal(getkey(), (3, times, INPUT))
    model = _model(getkey())
    integrator = ltc_jax.make_integrator("rk4", mode, dt0=0.02, max_steps=times)

    def loss(model, ts):
        return jnp.sum(_outputs(model, ts, xs, None, integrator, "observations") ** 2)

    value_and_grad = eqx.filter_jit(eqx.filter_value_and_grad(loss))
    shared, grad_shared = value_and_grad(model, ts)
    per_sequence, grad_per_sequence = value_and_grad(
        model, jnp.broadcast_to(ts, (3, times))
    )
    np.testing.assert_allclose(shared, per_sequence, rtol=1e-12)
    assert max_relative_error(grad_shared, grad_per_sequence) < 1e-12


def test_shared_times_give_the_vector_field_one_time(getkey):
    """On a path with one time grid the vector field is called with a scalar time
    (the one the input path evaluates fastest); with per-sequence times, with one
    time per sequence."""
    model = _model(getkey())
    ts = jnp.linspace(0.0, 1.0, 5)
    xs = jr.normal(getkey(), (3, 5, INPUT))
    y0 = jnp.zeros((3, HIDDEN))
    integrator = ltc_jax.make_integrator("rk4", dt0=0.1, max_steps=16)

    def time_shapes(times):
        shapes = set()

        class Recorded(eqx.Module):
            cell: eqx.Module

            def __call__(self, t, y, path):
                shapes.add(jnp.shape(t))
                return self.cell(t, y, path)

        path = ltc_jax.InputPath(times, xs)
        field = Recorded(model.cell)
        jax.eval_shape(lambda: ltc_jax.integrate(field, path, y0, integrator))
        return shapes

    assert time_shapes(ts) == {()}
    assert time_shapes(jnp.broadcast_to(ts, (3, 5))) == {(3,)}


@pytest.mark.parametrize(
    "solver, mode",
    [
        ("rk4", "backsolve"),
        ("rk4", "windowed"),
        ("fused", "full"),
        ("tsit5", "checkpoint"),
    ],
)
def test_a_grid_known_when_tracing_gives_the_solve_a_constant_end(getkey, solver, mode):
    """A path given its grid's duration on the host (as `make_input_path` gives
    it) ends its solves at a Python float, which diffrax folds away at compile
    time; without it the end is traced. Outputs at the observations and
    gradients agree between the two, fixed and adaptive steps, in every kind of
    gradient mode."""
    times = 37  # a duration that is no multiple of dt0, in several 64-knot blocks
    ts = jnp.linspace(0.0, 2.9, times)
    xs = jr.normal(getkey(), (3, times, INPUT))
    model = _model(getkey())
    options = dict(dt0=0.05, max_steps=128, **mode_options(mode))
    if solver == "tsit5":
        options.update(rtol=1e-6, atol=1e-8)
    integrator = ltc_jax.make_integrator(solver, mode, **options)
    known = ltc_jax.InputPath(ts, xs, static_duration=2.9)
    traced = ltc_jax.InputPath(ts, xs)
    assert known.static_duration == 2.9 and traced.static_duration is None
    ends = []
    solve = diffrax.diffeqsolve

    def recorded(*args, t1, **kwargs):
        ends.append(t1)
        return solve(*args, t1=t1, **kwargs)

    @eqx.filter_jit
    @eqx.filter_value_and_grad
    def loss(model, path):
        return jnp.sum(model(path, integrator=integrator, save="observations") ** 2)

    with unittest.mock.patch.object(diffrax, "diffeqsolve", recorded):
        value_known, grad_known = loss(model, known)
        value_traced, grad_traced = loss(model, traced)
    assert isinstance(ends[0], float)
    assert isinstance(ends[-1], jax.core.Tracer)
    np.testing.assert_allclose(value_known, value_traced, rtol=1e-12)
    assert max_relative_error(grad_known, grad_traced) < 1e-12


@pytest.mark.parametrize(
    "dtype, duration",
    [("float64", 1.600000000000023), ("float32", 1.7500134706497192)],
)
def test_known_and_traced_ends_take_the_same_steps_near_a_multiple(
    getkey, dtype, duration
):
    """Durations a hair above a multiple of dt0, where dividing by dt0 and then
    scaling by the slack rounds otherwise than one multiplication by their
    quotient (a sweep found them): a path given its duration takes as many
    steps as one whose end is traced, to the same state."""
    ts = jnp.asarray([0.0, duration], dtype)
    xs = jr.normal(getkey(), (2, 2, INPUT), dtype)
    model = jax.tree.map(
        lambda a: a.astype(dtype) if eqx.is_inexact_array(a) else a, _model(getkey())
    )
    integrator = ltc_jax.make_integrator("rk4", dt0=0.05, max_steps=64)
    known = ltc_jax.InputPath(ts, xs, static_duration=float(ts[1] - ts[0]))

    @eqx.filter_jit
    def solve(model, path):
        return model.solve(path, integrator=integrator)

    a, b = solve(model, known), solve(model, ltc_jax.InputPath(ts, xs))
    np.testing.assert_array_equal(a.stats["num_steps"], b.stats["num_steps"])
    np.testing.assert_array_equal(a.ys, b.ys)


def test_a_static_duration_is_the_grids_own(getkey):
    """`make_input_path` gives a dataset on one grid its duration, in the
    path's dtype, and every batch taken from it keeps it; a ragged dataset gets
    none. The constructor refuses a duration that is not the grid's, under
    `jit` too, and one for a path without one shared grid."""
    start = np.array([[100.0], [250.5], [7.25]])
    ts = start + np.linspace(0.0, 2.9, 37)[None]
    data = ltc_jax.datasets.SequenceDataset(
        ts=ts,
        xs=np.asarray(jr.normal(getkey(), (3, 37, INPUT))),
        lengths=np.full(3, 37),
        labels=np.zeros(3, np.int32),
        class_names=("a",),
    )
    for dtype in (jnp.float32, jnp.float64):
        path = ltc_jax.make_input_path(data, dtype=dtype)
        grid = np.asarray(ts[0] - ts[0, 0], dtype)  # from the start, in float64
        assert path.static_duration == float(grid[-1] - grid[0])
        assert path.take(np.array([2, 0])).static_duration == path.static_duration
    ragged = ltc_jax.datasets.SequenceDataset(
        ts=ts, xs=data.xs, lengths=np.array([37, 30, 37]), labels=data.labels
    )
    assert ltc_jax.make_input_path(ragged).static_duration is None
    grid = jnp.asarray(ts[0] - ts[0, 0])
    with pytest.raises(eqx.EquinoxRuntimeError, match="not the grid's duration"):
        ltc_jax.InputPath(grid, data.xs, static_duration=3.0)
    with pytest.raises(eqx.EquinoxRuntimeError, match="not the grid's duration"):
        eqx.filter_jit(lambda t, x: ltc_jax.InputPath(t, x, static_duration=3.0))(
            grid, data.xs
        )
    with pytest.raises(ValueError, match="one shared time grid"):
        ltc_jax.InputPath(
            jnp.asarray(ts), data.xs, jnp.full(3, 37), static_duration=2.9
        )


def test_padding_has_no_effect(getkey):
    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), 4, 6, INPUT)
    pad = jnp.arange(6)[None] >= lengths[:, None]
    xs_other = jnp.where(pad[..., None], 1e6, xs)
    ts_other = jnp.where(pad, -7.0, ts)
    for adjoint in ("checkpoint", "backsolve"):
        integrator = ltc_jax.make_integrator("heun", adjoint, dt0=0.1, max_steps=64)

        def loss(model, ts, xs, integrator=integrator):
            return jnp.sum(_outputs(model, ts, xs, lengths, integrator) ** 2)

        value, grad = eqx.filter_value_and_grad(loss)(model, ts, xs)
        value2, grad2 = eqx.filter_value_and_grad(loss)(model, ts_other, xs_other)
        assert np.isfinite(value) and value == value2
        assert max_relative_error(grad, grad2) == 0.0


def test_time_shift_invariance(getkey):
    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 6, INPUT)
    integrator = ltc_jax.make_integrator("rk4", dt0=0.1, max_steps=64)
    np.testing.assert_allclose(
        _outputs(model, ts, xs, lengths, integrator),
        _outputs(model, ts + 100.0, xs, lengths, integrator),
        rtol=1e-9,
    )


def test_single_observation_sequences(getkey):
    model = _model(getkey())
    ts = jnp.array([[0.0, 1.0], [3.0, 4.0]])
    xs = jr.normal(getkey(), (2, 2, INPUT))
    integrator = ltc_jax.make_integrator("heun", dt0=0.1, max_steps=64)
    out = _outputs(model, ts, xs, jnp.array([1, 1]), integrator)
    expected = model.outputs(jnp.zeros((2, HIDDEN)))  # nothing to integrate
    np.testing.assert_allclose(out, expected, rtol=1e-14)


@pytest.mark.parametrize(
    "scales, shifts",
    [
        # Two sequences end together at the end of the solve.
        ((1.0, 1.0, 0.5), (0.0, 2.0, 0.0)),
        # The longest sequence has padding, saved at its end.
        ((1.0, 0.5, 2.0), (0.0, 0.0, 0.0)),
    ],
    ids=["ending-together", "longest-padded"],
)
def test_gradient_modes_agree_on_sequence_outputs(getkey, scales, shifts):
    """Outputs at every observation, per-sequence times, the third sequence
    padded: the final save time repeats, in either of the two ways it can;
    backsolve's gradient stays finite and close to the exact one (diffrax
    returns NaN for a repeated final save time)."""
    model = _model(getkey())
    grid = 0.25 * jnp.arange(6.0)  # exact in binary: scales and shifts keep it so
    ts = jnp.stack(
        [scale * grid + shift for scale, shift in zip(scales, shifts, strict=True)]
    )
    xs = jr.normal(getkey(), (3, 6, INPUT))
    lengths = jnp.array([6, 6, 4])
    grads = {}
    for mode in ("full", "backsolve"):
        integrator = ltc_jax.make_integrator("rk4", mode, dt0=0.005, max_steps=800)

        def loss(model, integrator=integrator):
            outputs = _outputs(model, ts, xs, lengths, integrator, "observations")
            return jnp.sum(jnp.sin(outputs))

        grads[mode] = eqx.filter_jit(eqx.filter_grad(loss))(model)
    assert max_relative_error(grads["backsolve"], grads["full"]) < 1e-6


def _loss_fn(integrator, ts, xs, lengths):
    def loss(model):
        return jnp.sum(jnp.sin(_outputs(model, ts, xs, lengths, integrator)))

    return loss


def test_gradient_modes_agree_and_match_finite_differences(getkey):
    """Float64, fixed RK4 steps: full, checkpoint and direct give the exact gradient
    of the discretised solve; backsolve's continuous adjoint agrees to O(dt^4)."""
    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 6, INPUT)
    grads = {}
    for mode in ltc_jax.ADJOINT_NAMES:
        integrator = ltc_jax.make_integrator(
            "rk4", mode, dt0=0.01, max_steps=400, **mode_options(mode)
        )
        grads[mode] = eqx.filter_jit(
            eqx.filter_grad(_loss_fn(integrator, ts, xs, lengths))
        )(model)
    for mode in ("checkpoint", "direct", "backsolve", "windowed"):
        assert max_relative_error(grads[mode], grads["full"]) < 1e-6, mode
    assert max_relative_error(grads["checkpoint"], grads["full"]) < 1e-12

    # Central finite differences along a random direction of parameter space.
    integrator = ltc_jax.make_integrator("rk4", "full", dt0=0.01, max_steps=400)
    loss = eqx.filter_jit(_loss_fn(integrator, ts, xs, lengths))
    params, static = eqx.partition(model, eqx.is_inexact_array)
    leaves, treedef = jax.tree.flatten(params)
    keys = jr.split(getkey(), len(leaves))
    direction = jax.tree.unflatten(
        treedef, [jr.normal(k, x.shape) for k, x in zip(keys, leaves, strict=True)]
    )
    eps = 1e-5

    def shifted(sign):
        moved = jax.tree.map(lambda p, d: p + sign * eps * d, params, direction)
        return loss(eqx.combine(moved, static))

    fd = (shifted(1.0) - shifted(-1.0)) / (2 * eps)
    for mode, grad in grads.items():
        directional = sum(
            jnp.vdot(g, d)
            for g, d in zip(
                jax.tree.leaves(eqx.filter(grad, eqx.is_inexact_array)),
                jax.tree.leaves(direction),
                strict=True,
            )
        )
        np.testing.assert_allclose(directional, fd, rtol=1e-6, err_msg=mode)


@pytest.mark.parametrize("mode", ltc_jax.ADJOINT_NAMES)
def test_exceeding_max_steps_is_an_error_not_a_wrong_gradient(getkey, mode):
    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), 2, 6, INPUT)
    integrator = ltc_jax.make_integrator(
        "heun", mode, dt0=0.01, max_steps=20, **mode_options(mode)
    )
    with pytest.raises(eqx.EquinoxRuntimeError, match="maximum number of solver steps"):
        eqx.filter_value_and_grad(_loss_fn(integrator, ts, xs, lengths))(model)


@pytest.mark.slow
def test_a_failed_reverse_solve_names_the_reverse_solve(getkey):
    """Backsolve with max_steps exactly the forward solve's count, at rtol 1e-4,
    and a reverse solve at rtol 1e-10: a fifth-order solver then needs about
    (1e6)^(1/5), some 16 times, as many steps backwards. The forward solve
    succeeds; the failure says it is the reverse solve's, not the forward's."""
    model = _model(getkey())
    path = ltc_jax.InputPath(
        jnp.linspace(0.0, 4.0, 9), jr.normal(getkey(), (2, 9, INPUT))
    )

    def integrator(max_steps):
        return ltc_jax.Integrator(
            solver=diffrax.Tsit5(),
            stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-4),
            adjoint=ltc_jax.make_adjoint(
                "backsolve",
                max_steps=max_steps,
                backward_stepsize_controller=diffrax.PIDController(
                    rtol=1e-10, atol=1e-10
                ),
            ),
            dt0=None,
            max_steps=max_steps,
        )

    loose = integrator(4096)
    steps = int(np.max(model.solve(path, integrator=loose).stats["num_steps"]))
    tight = integrator(steps)
    assert model.solve(path, integrator=tight).result == ltc_jax.RESULTS.successful

    def loss(model, integrator):
        return jnp.sum(model(path, integrator=integrator))

    gradient = eqx.filter_jit(eqx.filter_grad(loss))
    assert np.all(np.isfinite(ltc_jax.measure.flatten_gradient(gradient(model, loose))))
    with pytest.raises(
        eqx.EquinoxRuntimeError, match=r"The reverse \(adjoint\) solve .* max_steps"
    ):
        gradient(model, tight)


def _temp_bytes(mode, times, key):
    model = ltc_jax.LTC(1, 8, 1, key=key)
    path = ltc_jax.InputPath(jnp.linspace(0.0, 1.0, times), jnp.zeros((4, times, 1)))
    integrator = ltc_jax.make_integrator(
        "heun", mode, dt0=1 / 200, max_steps=200, **mode_options(mode)
    )

    def loss(model, path):
        return jnp.sum(model(path, integrator=integrator))

    memory = ltc_jax.measure.compiled_memory(eqx.filter_grad(loss), model, path)
    return memory.temp_bytes, memory.argument_bytes


@pytest.mark.parametrize("mode", ["backsolve", "windowed", "checkpoint"])
def test_memory_does_not_grow_with_input_length(getkey, mode):
    """O(1) memory in the input length: the compiled gradient's temp bytes are the
    same for 100 and 20,000 observations. The data is an argument of the step; a
    naive backsolve, with the data among the differentiated `args`, would hold
    a cotangent of it (about twice the input) in temp."""
    key = getkey()
    short, _ = _temp_bytes(mode, 100, key)
    long, input_bytes = _temp_bytes(mode, 20_000, key)
    assert long <= 1.05 * short, (short, long, input_bytes)


def test_naive_backsolve_memory_grows_with_input_length(getkey):
    """The failure the test above guards against: diffrax's BacksolveAdjoint with
    the observations among the float `args` integrates a cotangent for them."""
    import diffrax

    cell = ltc_jax.LTCVectorField(1, 8, key=getkey())

    def temp_bytes(times):
        data = diffrax.LinearInterpolation(
            jnp.linspace(0.0, 1.0, times), jnp.zeros((times, 1))
        )

        def loss(cell, data):
            sol = diffrax.diffeqsolve(
                diffrax.ODETerm(cell),
                diffrax.Heun(),
                0.0,
                1.0,
                1 / 200,
                jnp.zeros(8),
                args=jax.lax.stop_gradient(data),
                adjoint=diffrax.BacksolveAdjoint(),
            )
            return jnp.sum(sol.ys)

        return ltc_jax.measure.compiled_memory(
            eqx.filter_grad(loss), cell, data
        ).temp_bytes

    short, long = temp_bytes(100), temp_bytes(20_000)
    assert long > short + 20_000 * 8 * 2  # at least a copy of ts and xs


def test_linear_encoder_equals_folding_it_into_the_input_weights(getkey):
    """An affine encoder x -> E x + c in front of the cell equals a cell with
    W_in' = W_in E and b' = b + W_in c: derived by hand, not by the library."""
    encoder = eqx.nn.Linear(INPUT, 3, key=getkey())
    encoded = ltc_jax.LTC(
        INPUT, HIDDEN, 2, encoder=encoder, encoded_size=3, key=getkey()
    )
    cell = encoded.cell
    folded_cell = eqx.tree_at(
        lambda c: (c.weight_in, c.weight_rec, c.bias, c.tau_raw, c.A),
        ltc_jax.LTCVectorField(INPUT, HIDDEN, key=getkey()),
        (
            cell.weight_in @ encoder.weight,
            cell.weight_rec,
            cell.bias + cell.weight_in @ encoder.bias,
            cell.tau_raw,
            cell.A,
        ),
    )
    folded = eqx.tree_at(
        lambda m: (m.cell, m.encoder),
        encoded,
        (folded_cell, None),
        is_leaf=lambda x: x is None,
    )
    ts, xs, lengths = ragged_batch(getkey(), 3, 6, INPUT)
    integrator = ltc_jax.make_integrator("heun", dt0=0.1, max_steps=64)
    np.testing.assert_allclose(
        _outputs(encoded, ts, xs, lengths, integrator),
        _outputs(folded, ts, xs, lengths, integrator),
        rtol=1e-12,
    )


def test_adaptive_checkpointing_keeps_no_copy_of_observation_times_per_checkpoint(
    getkey,
):
    """With adaptive steps, the observation times are jump times of the step-size
    controller. diffrax's ClipStepSizeController carries them in the solver state,
    which every checkpoint stores; ltc_jax keeps them out of it. Growth from 100 to
    2,000 observations must stay within a few copies of the times themselves."""
    model = ltc_jax.LTC(1, 8, 1, key=getkey())
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4, max_steps=4096)

    def loss(model, path):
        return jnp.sum(model(path, integrator=integrator))

    def temp_bytes(times):
        path = ltc_jax.InputPath(
            jnp.linspace(0.0, 1.0, times), jnp.zeros((4, times, 1))
        )
        return ltc_jax.measure.compiled_memory(
            eqx.filter_grad(loss), model, path
        ).temp_bytes

    growth = temp_bytes(2000) - temp_bytes(100)
    one_copy = 4 * (2000 - 100) * 8  # batch x extra observations x float64
    assert growth <= 3 * one_copy, (growth, one_copy)


class _Relax(eqx.Module):
    """dh/dt = -h + x(t): from h = 0 under a constant input 1, h = 1 - exp(-t)."""

    def __call__(self, t, y, args):
        return -y + args.evaluate(t)


@pytest.mark.parametrize("batching", ["batched", "vmap"])
@pytest.mark.parametrize("solver", ["rk4", "tsit5"])
def test_spread_saves_are_the_state_at_even_fractions_of_each_duration(
    getkey, solver, batching
):
    """`save=n` against the closed form at `j/n` of each sequence's own duration
    (per-sequence starts and lengths); fixed steps read the nearest step."""
    ts, _, lengths = ragged_batch(getkey(), 3, 7, 1)
    xs = jnp.where(jnp.isnan(ts), jnp.nan, 1.0)[..., None]
    path = ltc_jax.InputPath(ts, xs, lengths)
    adaptive = solver == "tsit5"
    integrator = ltc_jax.make_integrator(
        solver,
        dt0=None if adaptive else 0.01,
        rtol=1e-10 if adaptive else None,
        atol=1e-12 if adaptive else None,
        max_steps=4096,
        batching=batching,
    )
    n = 4
    ys = ltc_jax.integrate(_Relax(), path, jnp.zeros((3, 1)), integrator, save=n).ys
    assert ys.shape == (3, n, 1)
    durations = np.asarray(path.t_end - path.t_start)
    fractions = np.arange(1, n + 1) / n
    if adaptive:
        elapsed = durations[:, None] * fractions
    else:
        steps = np.ceil(durations / 0.01 * (1 - 64 * np.finfo(float).eps))
        elapsed = np.round(steps[:, None] * fractions) * (durations / steps)[:, None]
    np.testing.assert_allclose(ys[..., 0], 1 - np.exp(-elapsed), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("mode", ["backsolve", "windowed"])
def test_spread_saves_give_the_continuous_adjoints_gradient(getkey, mode):
    """A loss on the states at 3 spread times of ragged sequences: plain and
    windowed backsolve agree with backpropagation through the steps to O(dt^4)."""
    model = _model(getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 6, INPUT)
    path = ltc_jax.InputPath(ts, xs, lengths)
    grads = {}
    for name in ("full", mode):
        integrator = ltc_jax.make_integrator(
            "rk4", name, dt0=0.005, max_steps=800, **mode_options(name)
        )

        def loss(model, integrator=integrator):
            y0 = jnp.zeros((3, HIDDEN))
            ys = ltc_jax.integrate(model.cell, path, y0, integrator, save=3).ys
            return jnp.sum(jnp.sin(ys))

        grads[name] = eqx.filter_jit(eqx.filter_grad(loss))(model)
    assert max_relative_error(grads[mode], grads["full"]) < 1e-6


def test_save_must_be_a_known_mode_or_a_positive_count(getkey):
    ts, xs, lengths = ragged_batch(getkey(), 2, 4, INPUT)
    integrator = ltc_jax.make_integrator("rk4", dt0=0.1, max_steps=64)
    for save in (0, -2, True):
        with pytest.raises(ValueError, match="save must be"):
            ltc_jax.integrate(
                _model(getkey()).cell,
                ltc_jax.InputPath(ts, xs, lengths),
                jnp.zeros((2, HIDDEN)),
                integrator,
                save=save,
            )
