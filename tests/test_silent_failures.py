"""No silent wrong answers: finite divergence, low-precision step counts, NaN
parameters, hidden runtime peaks, unsupported derivatives."""

import math
import warnings

import equinox as eqx
import helpers
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import quiet_fit

import ltc_jax
from ltc_jax.datasets import SequenceDataset


def _unstable_problem():
    """The reported case: RK4 at dt0 = 0.5 with time constants down to about
    0.1, so dt0 * (1/tau_min + 1) is about 5, far outside RK4's interval of
    2.785; the state grows to ~1e14 and stays finite."""
    model = ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0))
    ts = jnp.arange(8.0)
    xs = jr.normal(jr.PRNGKey(1), (2, 8, 2))
    return model, ltc_jax.InputPath(ts, xs)


def test_a_finite_divergence_is_an_error_and_warned_about():
    model, path = _unstable_problem()
    integrator = ltc_jax.make_integrator("rk4", dt0=0.5, max_steps=16)
    with pytest.warns(
        ltc_jax.training.StabilityWarning, match="largest stable step"
    ) as caught:
        largest = ltc_jax.training.check_stability(integrator, model.cell)
    expected = 2.7852935634052813 / (1 / float(jnp.min(model.cell.tau)) + 1)
    assert largest == pytest.approx(expected, rel=1e-9)
    assert f"{largest:.3g}" in str(caught[0].message)
    assert caught[0].filename == __file__  # the caller's line
    with pytest.raises(eqx.EquinoxRuntimeError, match="left the bound"):
        model.solve(path, integrator=integrator)
    # Without the check the same solve returns a state far outside the bound.
    unchecked = ltc_jax.make_integrator("rk4", dt0=0.5, max_steps=16, check_state=False)
    ys = model.solve(path, integrator=unchecked).ys
    assert np.all(np.isfinite(ys)) and float(jnp.max(jnp.abs(ys))) > 1e6
    # A stable step passes silently.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stable = ltc_jax.make_integrator("rk4", dt0=0.5 * largest, max_steps=128)
        ltc_jax.training.check_stability(stable, model.cell)
        model.solve(path, integrator=stable)


@pytest.mark.parametrize("batching", ["batched", "vmap"])
def test_without_throw_a_failure_is_reported_by_its_result_code(batching):
    """throw=False: the unstable solve returns, with `RESULTS.diverged` (per
    sequence under vmap) and a state far outside the LTC's bound |h| <= max|A|
    (Hasani et al. 2021, Theorem 2), read here from the parameters; a stable
    step's result is `successful`; NaN parameters are `non_finite_input`; and
    diffrax's own failures keep their meaning, promoted into ltc_jax's codes."""
    model, path = _unstable_problem()

    def solve(model, path, solver="rk4", **options):
        integrator = ltc_jax.make_integrator(
            solver, throw=False, batching=batching, **options
        )
        return model.solve(path, integrator=integrator)

    def result_is(trajectory, code):
        return np.asarray(trajectory.result == code)

    unstable = solve(model, path, dt0=0.5, max_steps=16)
    bound = float(jnp.max(jnp.abs(model.cell.A)))
    # Each sequence's largest unit, against the bound: both diverge.
    largest = np.max(np.abs(np.asarray(unstable.ys)), axis=-1)
    np.testing.assert_array_less(1e6 * bound, largest)
    assert np.all(result_is(unstable, ltc_jax.RESULTS.diverged))
    if batching == "batched":
        assert "left the bound" in ltc_jax.RESULTS[unstable.result]
    stable = solve(model, path, dt0=0.05, max_steps=256)
    assert np.all(result_is(stable, ltc_jax.RESULTS.successful))
    assert float(np.max(np.abs(np.asarray(stable.ys)))) <= 1.01 * bound
    broken = eqx.tree_at(lambda m: m.cell.tau_raw, model, model.cell.tau_raw * jnp.nan)
    nan = solve(broken, path, dt0=0.05, max_steps=256)
    assert np.all(result_is(nan, ltc_jax.RESULTS.non_finite_input))
    # A linear input's 8 observations need at least 7 adaptive steps.
    short = solve(model, path, "tsit5", rtol=1e-3, atol=1e-4, max_steps=3)
    assert np.all(result_is(short, ltc_jax.RESULTS.max_steps_reached))


def test_training_stops_with_a_divergence_error_not_at_chance():
    model, path = _unstable_problem()
    data = SequenceDataset(
        ts=np.tile(np.arange(8.0), (4, 1)),
        xs=np.asarray(jr.normal(jr.PRNGKey(1), (4, 8, 2))),
        lengths=np.full(4, 8, dtype=np.int32),
        labels=np.array([0, 1, 0, 1], dtype=np.int32),
        class_names=("a", "b"),
    )
    integrator = ltc_jax.make_integrator("rk4", dt0=0.5, max_steps=16)
    with pytest.warns(ltc_jax.training.StabilityWarning) as caught:
        with pytest.raises(ltc_jax.DivergenceError, match="epoch 0, batch 0"):
            quiet_fit(model, data, integrator)
    assert caught[0].filename == helpers.__file__  # the line that called fit


def test_the_biophysical_state_bound_is_its_reversal_potentials(getkey):
    """Between the smallest and largest of vleak and the reversal potentials of the
    synapses onto each unit, computed here from the wiring by hand."""
    wiring = ltc_jax.wirings.make_wiring("random", 6, 2, 3, seed=1)
    cell = ltc_jax.BiophysicalLTCVectorField(wiring, key=getkey())
    low, high = cell.state_bounds()
    for unit in range(6):
        potentials = [float(cell.vleak[unit])]
        potentials += [float(e) for e in wiring.adjacency[:, unit] if e]
        potentials += [float(e) for e in wiring.sensory_adjacency[:, unit] if e]
        assert float(low[unit]) == min(potentials)
        assert float(high[unit]) == max(potentials)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_fixed_step_counts_are_exact_in_low_precision(dtype):
    """RK4 at dt0 = 0.25 over 7 time units takes ceil(7 / 0.25) = 28 steps in
    every precision (bfloat16 took 8 before), and ends near the float32 state."""
    model, path = _unstable_problem()
    path = ltc_jax.InputPath(jnp.arange(8.0), path.interpolation.ys[:, :, :2])
    integrator = ltc_jax.make_integrator("rk4", dt0=0.25, max_steps=64)
    with jax.enable_x64(False):
        cast = jax.tree.map(
            lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x,
            (model, path),
        )
        low = cast[0].solve(cast[1], integrator=integrator)
        single = jax.tree.map(
            lambda x: x.astype("float32") if eqx.is_inexact_array(x) else x,
            (model, path),
        )
        reference = single[0].solve(single[1], integrator=integrator).ys
    assert int(low.stats["num_steps"]) == 28
    np.testing.assert_allclose(np.asarray(low.ys, np.float32), reference, atol=0.05)


def test_tolerances_below_the_state_precision_are_refused():
    model, path = _unstable_problem()
    cast = jax.tree.map(
        lambda x: x.astype("bfloat16") if eqx.is_inexact_array(x) else x,
        (model, path),
    )
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-6)
    with pytest.raises(
        ValueError, match="below the resolution of the state's bfloat16"
    ) as refused:
        cast[0].solve(cast[1], integrator=integrator)
    # It names the least rtol that works: bfloat16's epsilon, 2**-7 = 0.0078125,
    # rounded up (rounded to nearest, 7.8e-03 would itself be refused).
    assert "Use rtol >= 7.9e-03," in str(refused.value)


@pytest.mark.parametrize("solver", ["tsit5", "rk4"])
def test_a_nan_parameter_is_named_before_the_solve_is_blamed(solver):
    model, path = _unstable_problem()
    broken = eqx.tree_at(
        lambda m: m.cell.weight_rec, model, model.cell.weight_rec.at[0, 0].set(jnp.nan)
    )
    options = dict(rtol=1e-3, atol=1e-4) if solver == "tsit5" else dict(dt0=0.1)
    integrator = ltc_jax.make_integrator(solver, max_steps=4096, **options)
    with pytest.raises(eqx.EquinoxRuntimeError, match="hold NaN or infinity"):
        broken.solve(path, integrator=integrator)
    data = SequenceDataset(
        ts=np.tile(np.arange(8.0), (2, 1)),
        xs=np.zeros((2, 8, 2)),
        lengths=np.full(2, 8, dtype=np.int32),
        labels=np.array([0, 1], dtype=np.int32),
        class_names=("a", "b"),
    )
    with pytest.raises(ValueError, match=r"\.cell\.weight_rec"):
        quiet_fit(broken, data, integrator)


def test_a_huge_finite_model_is_named_as_diverged():
    """After unclipped updates at a huge learning rate: finite parameters, an
    adaptive solve that runs out of steps, and a message that says why."""
    model, _ = _unstable_problem()
    huge = eqx.tree_at(lambda m: m.cell.weight_rec, model, model.cell.weight_rec * 1e6)
    huge = eqx.tree_at(lambda m: m.cell.tau_raw, huge, jnp.full((4,), -30.0))
    data = SequenceDataset(
        ts=np.tile(np.arange(8.0), (2, 1)),
        xs=np.asarray(jr.normal(jr.PRNGKey(2), (2, 8, 2))),
        lengths=np.full(2, 8, dtype=np.int32),
        labels=np.array([0, 1], dtype=np.int32),
        class_names=("a", "b"),
    )
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4, max_steps=64)
    with pytest.raises(ltc_jax.SolverFailureError, match="finite but large"):
        quiet_fit(huge, data, integrator)


def peak_in_fresh_process() -> dict:
    """Called in a subprocess: the runtime peak of one small training step."""
    return _measure_peaks(("backsolve",))


def _measure_peaks(modes) -> dict:
    model = ltc_jax.LTC(1, 32, 1, key=jr.PRNGKey(0))
    data = ltc_jax.datasets.mitbih_208_windows(2001, horizon=3, count=8)
    batch = ltc_jax.make_batch(data)
    records = {}
    for mode in modes:
        integrator = ltc_jax.make_integrator("rk4", mode, dt0=1 / 359, max_steps=2000)
        measurement = ltc_jax.measure.measure(
            model, batch, integrator, timed_steps=1, count_evaluations=False
        )
        records[mode] = dict(
            peak=measurement.runtime_peak_bytes,
            temp=measurement.temp_bytes,
            note=measurement.runtime_peak_note,
        )
    return records


@pytest.mark.slow
def test_a_hidden_runtime_peak_is_none_with_a_reason():
    """In a process that has already run a larger step, the high-water mark cannot
    see a smaller one: the figure is None and the reason recorded, never a rise
    below the step's own compiled temp memory."""
    if jax.default_backend() != "cpu" or not ltc_jax.measure.reset_process_peak():
        pytest.skip("needs a CPU backend on an OS with /proc/self/clear_refs")
    records = _measure_peaks(("full", "backsolve"))
    backsolve = records["backsolve"]
    assert backsolve["peak"] is None or backsolve["peak"] >= backsolve["temp"]
    if backsolve["peak"] is None:
        assert "held already" in backsolve["note"]
    fresh = ltc_jax.measure.call_in_subprocess(f"{__file__}:peak_in_fresh_process")
    assert fresh["backsolve"]["peak"] >= fresh["backsolve"]["temp"] > 0


def test_a_rise_below_what_the_program_allocates_is_not_a_peak():
    """The rule itself: a high-water mark that rose by less than the program's
    compiled temp bytes was served by memory the process held already."""
    if jax.default_backend() != "cpu" or not ltc_jax.measure.reset_process_peak():
        pytest.skip("needs a CPU backend on an OS with /proc/self/clear_refs")
    compiled = jax.jit(lambda x: jnp.sort(x * 2.0)[-1]).lower(jnp.ones(10)).compile()
    assert ltc_jax.measure.runtime_peak_bytes(compiled, jnp.ones(10)) is not None
    peak, source, note = ltc_jax._measure.memory.runtime_peak(
        compiled, jnp.ones(10), expected_bytes=2**40
    )
    assert peak is None and source == "process high-water mark"
    assert "memory this process held already served the call" in note
    assert (
        ltc_jax.measure.runtime_peak_bytes(compiled, jnp.ones(10), expected_bytes=2**40)
        is None
    )


class _Decay(eqx.Module):
    """dy/dt = -z y."""

    z: jax.Array

    def __call__(self, t, y, args):
        return -self.z * y


def _y_at_one(z, mode):
    path = ltc_jax.InputPath(jnp.array([0.0, 1.0]), jnp.zeros((1, 2, 1)))
    integrator = ltc_jax.make_integrator(
        "dopri5",
        mode,
        dt0=0.1,
        rtol=1e-10,
        atol=1e-10,
        **({"windows": 4} if mode == "windowed" else {}),
    )
    y0 = jnp.array([[2.0, 3.0]])
    return jnp.sum(ltc_jax.integrate(_Decay(z), path, y0, integrator).ys)


def test_second_derivative_under_direct_matches_the_closed_form():
    """y(1) = y0 e^{-z}: d^2 (y1 + y2) / dz^2 = t^2 e^{-z t} (2 + 3) at t = 1."""
    z = jnp.array(2.3)
    second = jax.grad(jax.grad(_y_at_one))(z, "direct")
    assert float(second) == pytest.approx(5 * math.exp(-2.3), rel=1e-8)
    forward = jax.jvp(lambda z: _y_at_one(z, "direct"), (z,), (1.0,))[1]
    assert float(forward) == pytest.approx(-5 * math.exp(-2.3), rel=1e-8)


@pytest.mark.parametrize("mode", ["checkpoint", "full", "backsolve", "windowed"])
@pytest.mark.parametrize("derivative", ["jvp", "grad of grad", "hessian"])
def test_unsupported_derivatives_name_the_mode_that_works(mode, derivative):
    z = jnp.array(2.3)
    take = {
        "jvp": lambda: jax.jvp(lambda z: _y_at_one(z, mode), (z,), (1.0,)),
        "grad of grad": lambda: jax.grad(jax.grad(_y_at_one))(z, mode),
        "hessian": lambda: jax.hessian(_y_at_one)(z, mode),
    }[derivative]
    with pytest.raises(NotImplementedError, match="adjoint='direct'"):
        take()
    # First-order reverse mode is what these modes are for.
    assert float(jax.grad(_y_at_one)(z, mode)) == pytest.approx(
        -5 * math.exp(-2.3), rel=1e-6
    )


def _two_sequences():
    return SequenceDataset(
        ts=np.tile(np.arange(6.0), (2, 1)),
        xs=np.zeros((2, 6, 2)),
        lengths=np.full(2, 6, dtype=np.int32),
        labels=np.array([0, 1], dtype=np.int32),
        class_names=("a", "b"),
    )


def test_far_fewer_steps_than_max_steps_is_warned_about():
    model = ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0))
    integrator = ltc_jax.make_integrator(
        "tsit5", "full", rtol=1e-3, atol=1e-4, max_steps=65_536
    )
    with pytest.warns(UserWarning, match="allocates memory, and spends time, for"):
        quiet_fit(model, _two_sequences(), integrator)


def test_an_epoch_of_failed_solves_reports_no_steps_used():
    """Every solve of the epoch fails (six observations need five adaptive steps
    on a linear input, max_steps is 3): no step count is reported as 0."""
    model = ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0))
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4, max_steps=3)
    _, history = quiet_fit(
        model,
        _two_sequences(),
        integrator,
        batch_size=1,
        on_failure=ltc_jax.training.SkipFailures(),
    )
    assert history[0]["failures"] == 2
    assert math.isnan(history[0]["max_steps_used"])
    assert math.isnan(history[0]["max_num_steps"])


def test_float32_data_and_a_float64_model_are_named():
    model = ltc_jax.LTC(2, 4, 2, key=jr.PRNGKey(0))  # float64 under the tests
    path = ltc_jax.make_input_path(_two_sequences(), dtype=jnp.float32)
    integrator = ltc_jax.make_integrator("heun", dt0=0.5)
    with pytest.raises(
        ValueError, match="parameters are float64 but the inputs are float32"
    ):
        model(path, integrator=integrator)
