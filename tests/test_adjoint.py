"""The windowed continuous adjoint: accuracy where plain backsolve fails, every
setting backsolve supports, its O(K) memory, its derived number of windows."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import max_relative_error, quiet_fit, ragged_batch

import ltc_jax


def _loss(model, integrator, path, save="final"):
    return jnp.sum(jnp.sin(model(path, integrator=integrator, save=save)))


def _gradient(model, integrator, path, save="final"):
    return eqx.filter_jit(eqx.filter_grad(_loss))(model, integrator, path, save)


def test_windowed_is_exact_where_backsolve_fails(getkey):
    """Float64, 40 time units with time constants down to 0.05: the plain reverse
    solve blows up (NaN, or far off), while restarting it from the forward states
    at the derived number of windows agrees with exact backpropagation."""
    model = ltc_jax.LTC(2, 4, 1, tau_init=(0.05, 0.5), key=jr.PRNGKey(0))
    ts = jnp.linspace(0.0, 40.0, 41)
    path = ltc_jax.InputPath(ts, jr.normal(jr.PRNGKey(1), (2, 41, 2)))
    grads = {}
    for mode in ("full", "backsolve", "windowed"):
        integrator = ltc_jax.make_integrator("rk4", mode, dt0=0.02, max_steps=2001)
        integrator = ltc_jax.training.resolve_windows(
            integrator, model.cell, 40.0, dtype=jnp.float64
        )
        grads[mode] = ltc_jax.measure.flatten_gradient(
            _gradient(model, integrator, path)
        )
        if mode == "windowed":
            assert integrator.adjoint.windows == 64
    backsolve = ltc_jax.measure.gradient_relative_error(
        grads["backsolve"], grads["full"]
    )
    assert math.isnan(backsolve) or backsolve > 0.1
    windowed = ltc_jax.measure.gradient_relative_error(grads["windowed"], grads["full"])
    assert windowed < 1e-6


@pytest.mark.parametrize(
    "solver, options",
    [
        ("rk4", dict(dt0=0.01, max_steps=1000)),
        ("tsit5", dict(rtol=1e-8, atol=1e-10, max_steps=4096)),
    ],
)
@pytest.mark.parametrize("interpolation", ["linear", "cubic"])
@pytest.mark.parametrize("save", ["final", "observations"])
def test_windowed_agrees_with_full_on_ragged_irregular_batches(
    getkey, solver, options, interpolation, save
):
    """Per-sequence irregular times and lengths (windows on the solver's clock),
    fixed and adaptive steps, linear and cubic inputs, losses on the final state
    and on every observation: the windowed gradient is the exact one to the
    continuous adjoint's discretisation error."""
    model = ltc_jax.LTC(2, 4, 3, tau_init=(0.2, 2.0), key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 7, 2)
    path = ltc_jax.InputPath(ts, xs, lengths, interpolation=interpolation)
    full = ltc_jax.make_integrator(solver, "full", **options)
    windowed = ltc_jax.make_integrator(solver, "windowed", windows=5, **options)
    expected = _gradient(model, full, path, save)
    assert max_relative_error(_gradient(model, windowed, path, save), expected) < 1e-6


def test_windowed_on_the_biophysical_cell_and_the_fused_step(getkey):
    """Both cells; the fused forward step with an explicit reverse solver (the
    adjoint system is not of LTC form)."""
    model = ltc_jax.LTC(2, 6, 2, cell="biophysical", wiring="ncp", key=getkey())
    ts, xs, lengths = ragged_batch(getkey(), 3, 5, 2)
    path = ltc_jax.InputPath(ts, xs, lengths)
    rk4 = ltc_jax.make_integrator("rk4", "windowed", dt0=0.01, windows=4, max_steps=300)
    full = ltc_jax.make_integrator("rk4", "full", dt0=0.01, max_steps=300)
    expected = _gradient(model, full, path)
    assert max_relative_error(_gradient(model, rk4, path), expected) < 1e-6
    fused = ltc_jax.make_integrator(
        "fused", "windowed", dt0=0.01, windows=4, max_steps=300, backward_solver="rk4"
    )
    fused_full = ltc_jax.make_integrator("fused", "full", dt0=0.01, max_steps=300)
    # The reverse solve integrates the continuous adjoint with RK4; the forward
    # steps are first order: close to, not equal to, backpropagation through them.
    assert max_relative_error(_gradient(model, fused, path), expected) < 0.05
    assert max_relative_error(_gradient(model, fused_full, path), expected) < 0.05
    with pytest.raises(NotImplementedError, match="needs a backward_solver"):
        ltc_jax.make_integrator("fused", "windowed", dt0=0.1)


def _temp_bytes(mode, steps, *, windows=None, times=None, batch=2, hidden=8):
    """Compiled temp bytes of one float32 training step over `steps` RK4 steps of
    1/250 s on an abstract input (`times` observations, default steps + 1)."""
    with jax.enable_x64(False):
        model = ltc_jax.LTC(1, hidden, 1, key=jr.PRNGKey(0))
        times = steps + 1 if times is None else times
        data = ltc_jax.measure.abstract_batch(batch, times, 1, output_size=1)
        integrator = ltc_jax.make_integrator(
            "rk4",
            mode,
            dt0=steps / 250 / (times - 1),
            max_steps=steps,
            **({} if windows is None else dict(windows=windows)),
        )
        optimizer = ltc_jax.training.make_optimizer(1e-3, 1)
        opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
        step = ltc_jax.training.make_train_step(optimizer, integrator)
        return ltc_jax.measure.compiled_memory(step, model, opt_state, data).temp_bytes


@pytest.mark.slow
def test_compiled_memory_is_linear_in_windows_and_flat_in_steps():
    """Temp memory grows by a fixed amount per window, at least a batch state
    (the forward state stored at its end), and not with the number of steps or
    the input's length at a fixed number of windows."""
    temps = {k: _temp_bytes("windowed", 10_000, windows=k) for k in (64, 512, 4096)}
    first = (temps[512] - temps[64]) / (512 - 64)
    second = (temps[4096] - temps[512]) / (4096 - 512)
    assert second == pytest.approx(first, rel=0.05)  # bytes per window
    state_bytes = 2 * 8 * 4
    assert first >= state_bytes
    small, large = (_temp_bytes("windowed", n, windows=64) for n in (1_000, 100_000))
    assert large <= 1.05 * small
    short, long = (
        _temp_bytes("windowed", 1_000, windows=64, times=n) for n in (101, 20_001)
    )
    assert abs(long - short) <= 0.01 * short  # the input is an argument, not temp


def test_default_windows_from_the_time_constants_and_the_horizon(getkey):
    """K = ceil(T / W), W = ln(eps^(-1/3)) / (1 / tau_min + 1): computed by hand
    for tau_min = 0.5 (float32, float64, and an rtol looser than eps)."""
    cell = ltc_jax.LTCVectorField(1, 3, tau_init=(0.5, 0.5), key=getkey())
    rate = 1 / 0.5 + 1
    for dtype, error in ((jnp.float32, 2.0**-23), (jnp.float64, 2.0**-52)):
        window = math.log(error ** (-1 / 3)) / rate
        expected = math.ceil(10.0 / window)
        assert ltc_jax.training.default_windows(cell, 10.0, dtype=dtype) == expected
    loose = ltc_jax.training.default_windows(cell, 10.0, dtype=jnp.float64, rtol=1e-3)
    assert loose == math.ceil(10.0 / (math.log(1e-3 ** (-1 / 3)) / rate))
    assert (
        ltc_jax.training.default_windows(cell, 10.0, dtype=jnp.float32, max_steps=4)
        == 4
    )
    # resolve_windows rounds up to a power of two, never below `at_least`.
    integrator = ltc_jax.make_integrator("tsit5", "windowed", rtol=1e-3, atol=1e-6)
    resolved = ltc_jax.training.resolve_windows(
        integrator, cell, 10.0, dtype=jnp.float64
    )
    assert resolved.adjoint.windows == 2 ** math.ceil(math.log2(loose))
    again = ltc_jax.training.resolve_windows(
        integrator, cell, 10.0, dtype=jnp.float64, at_least=512
    )
    assert again.adjoint.windows == 512


def test_fit_derives_and_records_the_windows(getkey):
    train = ltc_jax.datasets.SequenceDataset(
        ts=np.tile(np.linspace(0.0, 6.0, 13), (4, 1)),
        xs=np.asarray(jr.normal(getkey(), (4, 13, 2))),
        lengths=np.full(4, 13, dtype=np.int32),
        labels=np.array([0, 1, 0, 1], dtype=np.int32),
        class_names=("a", "b"),
    )
    model = ltc_jax.LTC(2, 4, 2, tau_init=(0.1, 2.0), key=getkey())
    integrator = ltc_jax.make_integrator("rk4", "windowed", dt0=0.05, max_steps=120)
    _, history = quiet_fit(model, train, integrator, epochs=2)
    # By hand: float64's epsilon 2**-52 amplified at most eps**(-1/3) per window,
    # over a window of W = ln(eps**(-1/3)) / (1 / tau_min + 1) time units; the 6
    # time units of the data need ceil(6 / W) windows, rounded up to a power of
    # two and at most the 120 steps.
    tau_min = float(jnp.min(model.cell.tau))
    window = (52 / 3) * math.log(2) / (1 / tau_min + 1)
    needed = math.ceil(6.0 / window)
    expected = min(2 ** math.ceil(math.log2(needed)), 120)
    assert expected > needed  # the rounding up is exercised (here 3 -> 4)
    assert history[0]["windows"] == expected
    assert history[1]["windows"] >= expected


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(adjoint="windowed", windows=0), "windows must be a positive int"),
        (dict(adjoint="windowed", windows=-3), "windows must be a positive int"),
        (dict(adjoint="checkpoint", windows=4), "windows only applies to"),
        (dict(adjoint="backsolve", windows=4), "windows only applies to"),
    ],
)
def test_bad_windows_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ltc_jax.make_integrator("heun", dt0=0.1, **kwargs)


def test_unresolved_windows_are_named_under_jit(getkey):
    """Under jit the time constants are not known: a windowed adjoint without its
    number of windows is refused by name, before anything runs."""
    model = ltc_jax.LTC(2, 4, 1, key=getkey())
    path = ltc_jax.InputPath(jnp.linspace(0.0, 1.0, 3), jnp.ones((1, 3, 2)))
    integrator = ltc_jax.make_integrator("heun", "windowed", dt0=0.1)
    with pytest.raises(ValueError, match="default_windows"):
        eqx.filter_jit(_loss)(model, integrator, path)

    class Plain(eqx.Module):
        def __call__(self, t, y, args):
            return -y

    with pytest.raises(ValueError, match="pass windows=K"):
        ltc_jax.training.default_windows(Plain(), 1.0, dtype=jnp.float32)
