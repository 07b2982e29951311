"""The measurement API: counts derived independently, errors, the subprocess helper."""

import math
import os
import sys

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import ltc_jax


HIDDEN = 4
STEPS = 20


def _problem(getkey, steps=STEPS, batch=2):
    """A batch of ECG windows of `steps + 1` samples (one sample per 1/360 s step)."""
    ts, millivolts = ltc_jax.datasets.load_mitbih_208()
    data = ltc_jax.datasets.forecast_windows(
        ts, millivolts, window=steps + 1, horizon=3, starts=np.arange(batch) * 500
    )
    path = ltc_jax.InputPath(data.ts - data.ts[:, :1], data.xs)
    batch = ltc_jax.Batch(path, jnp.asarray(data.labels), jnp.ones(batch))
    model = ltc_jax.LTC(1, HIDDEN, 1, key=getkey())
    return model, batch


def _fixed(solver, mode, steps=STEPS):
    """One step per sample: a step a hair over 1/360 s, so that rounding of the
    sample times never adds a step beyond `max_steps`."""
    return ltc_jax.make_integrator(solver, mode, dt0=(1 + 1e-9) / 360, max_steps=steps)


@pytest.mark.slow
@pytest.mark.parametrize(
    "solver, mode, forward, backward",
    [
        # Explicit Runge-Kutta methods evaluate the field once per stage: Euler 1,
        # Heun 2, classic RK4 4 (no first-same-as-last reuse). Backsolve's reverse
        # solve takes the same fixed steps with the same method on the adjoint
        # system, one vector-Jacobian product of the field per stage.
        ("euler", "backsolve", 1 * STEPS, 1 * STEPS),
        ("heun", "backsolve", 2 * STEPS, 2 * STEPS),
        ("rk4", "backsolve", 4 * STEPS, 4 * STEPS),
        # Backpropagating through stored steps re-evaluates each step's stages.
        ("rk4", "full", 4 * STEPS, None),
    ],
)
def test_counted_evaluations(getkey, solver, mode, forward, backward):
    model, batch = _problem(getkey)
    measurement = ltc_jax.measure.measure(
        model, batch, _fixed(solver, mode), timed_steps=1
    )
    assert measurement.forward_evaluations == forward
    if backward is not None:
        assert measurement.backward_evaluations == backward
    else:
        assert measurement.backward_evaluations >= forward
    assert measurement.num_steps == measurement.num_accepted_steps == STEPS
    assert measurement.num_rejected_steps == 0


@pytest.mark.parametrize("solver, per_step", [("euler", 1), ("rk4", 4), ("fused", 6)])
def test_counted_solve(getkey, solver, per_step):
    """Evaluations of a fixed-step forward solve: stages (unfolds) times steps;
    and the trajectory is the plain solve's."""
    model, batch = _problem(getkey)
    integrator = _fixed(solver, "checkpoint")
    trajectory, evaluations = ltc_jax.measure.counted_solve(
        model, batch.path, integrator
    )
    assert evaluations == per_step * STEPS
    plain = model.solve(batch.path, integrator=integrator)
    np.testing.assert_allclose(trajectory.ys, plain.ys, rtol=1e-12)


@pytest.mark.slow
def test_checkpointing_recomputes_more_than_full_storage(getkey):
    """Checkpointing trades memory for recomputation: fewer stored states, more
    backward evaluations; the gradient is the same."""
    model, batch = _problem(getkey, steps=60)
    full = ltc_jax.measure.measure(
        model, batch, _fixed("rk4", "full", 60), timed_steps=1
    )
    reference = ltc_jax.measure.loss_gradient(model, batch, _fixed("rk4", "full", 60))
    few = ltc_jax.measure.measure(
        model,
        batch,
        ltc_jax.make_integrator(
            "rk4", dt0=(1 + 1e-9) / 360, max_steps=60, checkpoints=4
        ),
        timed_steps=1,
        reference_gradient=reference,
    )
    assert few.forward_evaluations == full.forward_evaluations == 4 * 60
    assert few.backward_evaluations > full.backward_evaluations
    assert few.temp_bytes < full.temp_bytes
    assert few.checkpoints == 4 and full.checkpoints is None
    assert few.gradient_relative_error == 0.0


@pytest.mark.slow
def test_measurement_record(getkey, monkeypatch):
    """The record, with the clock scripted: the training step's three timed runs
    take 0.9, 0.1 and 0.2 s (median 0.2, where the mean would be 0.4), the loss
    alone's 0.05, 0.08 and 0.06 s (median 0.06), so the gradient adds 0.14 s."""
    model, batch = _problem(getkey)
    integrator = _fixed("rk4", "backsolve")
    reference = ltc_jax.measure.loss_gradient(model, batch, _fixed("rk4", "full"))
    scripted = iter([[0.9, 0.1, 0.2], [0.05, 0.08, 0.06]])
    timed = []

    def time_calls(fn, *args, warmup, repeats):
        timed.append((warmup, repeats))
        return next(scripted)

    measuring = sys.modules[ltc_jax.measure.measure.__module__]
    monkeypatch.setattr(measuring, "time_calls", time_calls)
    measurement = ltc_jax.measure.measure(
        model, batch, integrator, timed_steps=3, reference_gradient=reference
    )
    record = measurement.asdict()
    assert record["gradient_mode"] == "backsolve" and record["solver"] == "RK4"
    assert record["batch_size"] == 2 and record["num_observations"] == STEPS + 1
    assert record["max_steps"] == STEPS
    assert record["dtype"] == "float64" and record["backend"] == "cpu"
    assert timed == [(1, 3), (1, 3)]  # one warm-up, then three timed runs each
    assert record["step_seconds_all"] == [0.9, 0.1, 0.2]
    assert record["step_seconds"] == 0.2 and record["forward_seconds"] == 0.06
    assert record["backward_seconds"] == pytest.approx(0.14, rel=1e-12)
    assert record["temp_bytes"] > 0 and record["argument_bytes"] > 0
    # float64 RK4 over 20 short steps: the continuous adjoint is close to, but not
    # exactly, the gradient of the discrete solve.
    assert 0 < record["gradient_relative_error"] < 1e-6
    assert record["gradient_is_finite"] is True
    assert record["backward_forward_evaluation_ratio"] == 1.0
    expected_loss = np.mean(
        (
            np.asarray(model(batch.path, integrator=integrator))
            - np.asarray(batch.labels)
        )
        ** 2
    )
    assert math.isclose(record["loss"], expected_loss, rel_tol=1e-12)


@pytest.mark.slow
def test_measure_without_counting(getkey):
    model, batch = _problem(getkey)
    measurement = ltc_jax.measure.measure(
        model, batch, _fixed("heun", "checkpoint"), count_evaluations=False
    )
    assert measurement.forward_evaluations is None
    assert measurement.backward_forward_evaluation_ratio is None
    assert measurement.gradient_relative_error is None
    assert measurement.gradient_is_finite is None


def test_measure_rejects_bad_arguments(getkey):
    model, batch = _problem(getkey)
    integrator = _fixed("euler", "full")
    with pytest.raises(ValueError, match="timed_steps must be at least 1"):
        ltc_jax.measure.measure(model, batch, integrator, timed_steps=0)
    with pytest.raises(ValueError, match="warmup_steps must be non-negative"):
        ltc_jax.measure.measure(model, batch, integrator, warmup_steps=-1)

    class NoCell(eqx.Module):
        model: ltc_jax.LTC

        def solve(self, path, *, integrator):
            return self.model.solve(path, integrator=integrator)

        def outputs(self, ys):
            return self.model.outputs(ys)

    with pytest.raises(ValueError, match="is not an LTC. Pass count_evaluations=False"):
        ltc_jax.measure.measure(NoCell(model), batch, integrator)
    with pytest.raises(ValueError, match="entries"):
        ltc_jax.measure.measure(
            model, batch, integrator, reference_gradient=np.ones(3), timed_steps=1
        )


@pytest.mark.slow
def test_windowed_loss_gradient_under_an_outer_jit(getkey):
    """The windowed adjoint inside the user's own eqx.filter_jit: with a given
    number of windows, the gradient of the unjitted call; with windows=None,
    whose count would be derived from traced values, a refusal naming the fix."""
    model, batch = _problem(getkey)
    step = (1 + 1e-9) / 360
    derived = ltc_jax.make_integrator("euler", "windowed", dt0=step, max_steps=STEPS)
    given = ltc_jax.make_integrator(
        "euler", "windowed", dt0=step, max_steps=STEPS, windows=4
    )
    jitted = eqx.filter_jit(ltc_jax.measure.loss_gradient)
    plain = ltc_jax.measure.flatten_gradient(
        ltc_jax.measure.loss_gradient(model, batch, given)
    )
    traced = ltc_jax.measure.flatten_gradient(jitted(model, batch, given))
    assert np.all(np.isfinite(plain)) and np.any(plain != 0)
    np.testing.assert_allclose(traced, plain, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="windows=None .* traced here"):
        jitted(model, batch, derived)


def test_gradient_relative_error():
    reference = {"a": jnp.array([3.0, 0.0]), "b": jnp.array([[4.0]])}
    gradient = {"a": jnp.array([3.0, 1.0]), "b": jnp.array([[4.0]])}
    assert ltc_jax.measure.gradient_relative_error(
        gradient, reference
    ) == pytest.approx(0.2)
    flat = ltc_jax.measure.flatten_gradient(reference)
    np.testing.assert_array_equal(flat, [3.0, 0.0, 4.0])
    assert ltc_jax.measure.gradient_relative_error(flat, reference) == 0.0
    nan = {"a": jnp.array([jnp.nan, 0.0]), "b": jnp.array([[4.0]])}
    assert math.isnan(ltc_jax.measure.gradient_relative_error(nan, reference))
    with pytest.raises(ValueError, match="zero"):
        ltc_jax.measure.gradient_relative_error(reference, np.zeros(3))
    with pytest.raises(ValueError, match="2 entries and the reference 3"):
        ltc_jax.measure.gradient_relative_error(np.ones(2), reference)


def report_process(value):
    """Called in a subprocess by the tests below."""
    if value == "raise":
        raise RuntimeError("the function failed on purpose")
    return dict(
        pid=os.getpid(), value=value, x64=os.environ.get("JAX_ENABLE_X64"), pair=(1, 2)
    )


def test_call_in_subprocess():
    target = f"{__file__}:report_process"
    result = ltc_jax.measure.call_in_subprocess(
        target, dict(value=[1.5, "x"]), env={"JAX_ENABLE_X64": "1"}
    )
    assert result["pid"] != os.getpid()
    assert result == dict(pid=result["pid"], value=[1.5, "x"], x64="1", pair=[1, 2])
    with pytest.raises(ltc_jax.SubprocessError, match="the function failed on purpose"):
        ltc_jax.measure.call_in_subprocess(target, dict(value="raise"))


def test_call_in_subprocess_rejects_bad_requests():
    with pytest.raises(ValueError, match="target must look like"):
        ltc_jax.measure.call_in_subprocess("no_function_here")
    with pytest.raises(ValueError, match="JSON-serialisable"):
        ltc_jax.measure.call_in_subprocess("json:dumps", dict(obj=object()))
    with pytest.raises(ltc_jax.SubprocessError, match="No module named"):
        ltc_jax.measure.call_in_subprocess("ltc_jax_no_such_module:main")


@pytest.mark.slow
def test_seminorm_reverse_solve_stops_at_the_input_kinks(getkey):
    """With its own (seminorm) step-size controller, backsolve's reverse solve
    still stops at every knot of a linear input, as the forward solve does: at
    least one Tsit5 step, six evaluations, per knot interval."""
    model, batch = _problem(getkey, steps=60)
    integrator = ltc_jax.make_integrator(
        "tsit5", "backsolve", rtol=1e-2, atol=1e-3, seminorm=True
    )
    measurement = ltc_jax.measure.measure(model, batch, integrator, timed_steps=1)
    assert measurement.backward_evaluations >= 6 * 60
