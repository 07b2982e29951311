"""Terminating events: where a readout of the state crosses a threshold, located
by root finding, with gradients (float64: the tests' x64 setting)."""

import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import ltc_jax


BATCH, TIMES, CHANNELS, HIDDEN = 3, 20, 2, 4


def _problem():
    """A batch of three sequences on [0, 4], an LTC, and a threshold that unit
    0 crosses going down in every sequence (it starts at 0, and falls to
    about -0.42 by the end), each at its own time."""
    model = ltc_jax.LTC(CHANNELS, HIDDEN, 1, tau_init=(0.5, 2.0), key=jr.key(2))
    return ltc_jax.InputPath(TS, XS), model, -0.167


TS = jnp.linspace(0.0, 4.0, TIMES)
XS = jr.normal(jr.key(1), (BATCH, TIMES, CHANNELS))


def _alone(b):
    """Sequence `b` of the batch, as a batch of one."""
    return ltc_jax.InputPath(TS, XS[b : b + 1])


INTEGRATORS = {
    "tsit5": lambda mode: ltc_jax.make_integrator(
        "tsit5", mode, rtol=1e-10, atol=1e-10, dt0=0.01
    ),
    "fused": lambda mode: ltc_jax.make_integrator(
        "fused", mode, dt0=0.01, max_steps=400
    ),
}


@pytest.mark.parametrize(
    "mode, solver",
    [
        ("checkpoint", "tsit5"),
        ("full", "tsit5"),
        ("direct", "tsit5"),
        ("checkpoint", "fused"),
    ],
)
def test_event_times_and_their_gradients(mode, solver):
    """Each sequence stops where unit 0 crosses the threshold: its state there
    is the threshold; the event time's derivative with respect to the
    threshold is the closed form 1 / (d unit 0 / dt) at the event (to the
    accuracy of the solver's dense output); and with
    respect to every parameter it matches central finite differences (to
    1e-6 absolute). The threshold moved below anything reached never fires."""
    path, model, level = _problem()
    integrator = INTEGRATORS[solver](mode)

    @eqx.filter_jit
    def solve(m, threshold):
        return m.solve(path, integrator=integrator, event=ltc_jax.Crossing(threshold))

    out = solve(model, jnp.asarray(level))
    assert out.event_fired.shape == (BATCH,) and bool(jnp.all(out.event_fired))
    assert out.t_reached.shape == (BATCH,)
    assert float(jnp.ptp(out.t_reached)) > 0.01  # each its own time
    np.testing.assert_allclose(out.ys[:, 0], level, atol=1e-9)

    # d t* / d threshold = 1 / (d y0 / dt)(t*), from the field at the event:
    # the slope of the solver's dense output there, which for the fused step
    # (linear within each step of 0.01) is the field to about 1%.
    close = 1e-5 if solver == "tsit5" else 3e-2
    by_threshold = jax.jit(jax.jacrev(lambda c: solve(model, c).t_reached))(
        jnp.asarray(level)
    )
    field = model.vector_field
    for b in range(BATCH):
        slope = field(out.t_reached[b], out.ys[b : b + 1], _alone(b))[0, 0]
        np.testing.assert_allclose(by_threshold[b], 1.0 / slope, rtol=close)

    params, static = eqx.partition(model, eqx.is_inexact_array)
    flat, unravel = jax.flatten_util.ravel_pytree(params)

    @jax.jit
    def event_times(theta):
        return solve(eqx.combine(unravel(theta), static), jnp.asarray(level)).t_reached

    jacobian = jax.jit(jax.jacrev(event_times))(flat)  # (batch, parameters)
    step = 1e-6
    for i in np.random.default_rng(0).choice(flat.size, 6, replace=False):
        moved = [event_times(flat.at[i].add(s)) for s in (step, -step)]
        finite = (moved[0] - moved[1]) / (2 * step)
        np.testing.assert_allclose(jacobian[:, i], finite, atol=1e-6)

    never = solve(model, jnp.asarray(-10.0))
    assert not bool(jnp.any(never.event_fired))
    np.testing.assert_allclose(never.t_reached, 4.0, rtol=1e-12)


def test_each_sequence_s_event_in_a_batch_is_a_plain_diffrax_solve_s():
    """The batch's event times and states, whatever the integrator's batching,
    equal those of a plain `diffrax.diffeqsolve` of each sequence alone with
    its own `diffrax.Event` on the model's field (no ltc_jax clock, vmap or
    condition), to the tolerances of the two solves."""
    import diffrax
    import optimistix as optx

    path, model, level = _problem()
    event = ltc_jax.Crossing(level, direction="down")

    def plain(b):
        one = _alone(b)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, args: model.vector_field(t, y[None], one)[0]),
            diffrax.Tsit5(),
            t0=0.0,
            t1=4.0,
            dt0=0.01,
            y0=jnp.zeros(HIDDEN),
            stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
            event=diffrax.Event(
                lambda t, y, args, **kwargs: y[0] - level,
                root_finder=optx.Newton(rtol=1e-12, atol=1e-12),
            ),
        )
        return sol.ts[-1], sol.ys[-1]

    reference = [plain(b) for b in range(BATCH)]
    for batching in ("batched", "vmap"):
        integrator = ltc_jax.make_integrator(
            "tsit5", "checkpoint", rtol=1e-10, atol=1e-10, dt0=0.01, batching=batching
        )
        out = model.solve(path, integrator=integrator, event=event)
        for b, (time, state) in enumerate(reference):
            np.testing.assert_allclose(out.t_reached[b], time, rtol=1e-7)
            np.testing.assert_allclose(out.ys[b], state, rtol=1e-6, atol=1e-9)


def test_a_readout_and_a_direction_choose_the_crossing():
    """A readout of the state crosses as unit 0 does (unit 0 times 1e5, in
    large units, crosses 1e5 times its threshold at the same time), times
    count from each sequence's first observation (the same inputs at times
    10 to 14 fire at the same times), a fired event is a successful solve,
    and an upward crossing of a level only ever fallen to does not fire."""
    path, model, level = _problem()
    integrator = ltc_jax.make_integrator(
        "tsit5", "checkpoint", rtol=1e-10, atol=1e-10, dt0=0.01, throw=False
    )
    by_unit = model.solve(path, integrator=integrator, event=ltc_jax.Crossing(level))
    assert bool(jnp.all(by_unit.result == ltc_jax.RESULTS.successful))
    scale = 1e5
    by_readout = model.solve(
        path,
        integrator=integrator,
        event=ltc_jax.Crossing(
            scale * level, readout=eqx.Partial(lambda s, h: s * h[0], scale)
        ),
    )
    np.testing.assert_allclose(by_readout.t_reached, by_unit.t_reached, rtol=1e-9)
    later = model.solve(
        ltc_jax.InputPath(TS + 10.0, XS),
        integrator=integrator,
        event=ltc_jax.Crossing(level),
    )
    np.testing.assert_allclose(later.t_reached, by_unit.t_reached, rtol=1e-9)
    upward = model.solve(
        path, integrator=integrator, event=ltc_jax.Crossing(level, direction="up")
    )
    assert not bool(jnp.any(upward.event_fired))


@pytest.mark.parametrize("mode", ["backsolve", "windowed"])
def test_reverse_solve_modes_refuse_events_naming_those_that_work(mode):
    path, model, level = _problem()
    integrator = ltc_jax.make_integrator("tsit5", mode, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="checkpoint, full, direct"):
        model.solve(path, integrator=integrator, event=ltc_jax.Crossing(level))


def test_an_event_needs_the_final_save_and_one_readout_time():
    path, model, level = _problem()
    integrator = INTEGRATORS["tsit5"]("checkpoint")
    event = ltc_jax.Crossing(level)
    with pytest.raises(ValueError, match="save='final'"):
        model.solve(path, integrator=integrator, save="observations", event=event)
    spread = ltc_jax.LTC(CHANNELS, HIDDEN, 1, readout_times=4, key=jr.key(2))
    with pytest.raises(ValueError, match="readout_times=1"):
        spread.solve(path, integrator=integrator, event=event)
    # The tests' runtime type checker refuses it first, as a TypeError.
    with pytest.raises((ValueError, TypeError), match="direction"):
        ltc_jax.Crossing(level, direction="sideways")
    with pytest.raises(ValueError, match="unit 4 is not a unit"):
        model.solve(path, integrator=integrator, event=ltc_jax.Crossing(0.1, unit=4))
    # A NaN level would fire at once on every sequence.
    with pytest.raises(ValueError, match="threshold must be finite; got nan"):
        ltc_jax.Crossing(jnp.nan)


def test_the_docs_example_runs_and_fires(tmp_path):
    """The example of the docs' "Events" page, as written (float32 there): every
    sequence's event fires, and the gradient of the mean event time is finite
    and not zero."""
    import pathlib
    import re
    import subprocess
    import sys

    page = pathlib.Path(__file__).parents[1] / "docs" / "concepts" / "events.md"
    (example,) = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    check = (
        "\nassert bool(trajectory.event_fired.all())\n"
        "leaves = jax.tree.leaves(gradient)\n"
        "assert all(bool(jnp.isfinite(g).all()) for g in leaves)\n"
        "assert any(bool((g != 0).any()) for g in leaves)\n"
    )
    script = tmp_path / "example.py"
    script.write_text(example + check)
    # A fresh process: the page's example runs in JAX's default float32.
    subprocess.run([sys.executable, str(script)], check=True, timeout=300)


def test_a_float32_solve_fires_under_x64():
    """A float32 model and path with an event, in a process where JAX's default
    float is float64 (the tests' setting): the condition is returned in the
    default float, as diffrax's root finder needs, and the event time is the
    float64 solve's to float32 precision."""
    path, model, level = _problem()
    integrator = INTEGRATORS["fused"]("checkpoint")
    as32 = lambda tree: jax.tree.map(  # noqa: E731
        lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, tree
    )
    event = ltc_jax.Crossing(level)
    out64 = model.solve(path, integrator=integrator, event=event)
    out32 = as32(model).solve(as32(path), integrator=integrator, event=event)
    assert out32.ys.dtype == jnp.float32 and bool(jnp.all(out32.event_fired))
    np.testing.assert_allclose(out32.t_reached, out64.t_reached, rtol=1e-4)


def test_the_bracketed_newton_converges_where_newton_cycles():
    """The root finder of `Crossing`: on t^3 - 2t + 2 from 0, where Newton's
    iterates cycle 0, 1, 0, ..., it finds the real root -1.7692923542386314
    (Cardano's formula); an exact root is kept at once; a bracket without a
    sign change (a sequence whose event did not fire) ends at its upper end,
    successfully."""
    import optimistix as optx

    from ltc_jax._events import SafeguardedNewton

    finder = SafeguardedNewton(rtol=1e-12, atol=1e-12)

    def root(fn, lower, upper, start):
        return optx.root_find(
            lambda t, _: fn(t),
            finder,
            y0=jnp.asarray(start),
            options=dict(lower=lower, upper=upper),
            throw=False,
        )

    cycling = root(lambda t: t**3 - 2 * t + 2, -3.0, 0.0, 0.0)
    assert cycling.result == optx.RESULTS.successful
    np.testing.assert_allclose(cycling.value, -1.7692923542386314, atol=1e-11)
    newton = optx.root_find(
        lambda t, _: t**3 - 2 * t + 2,
        optx.Newton(rtol=1e-12, atol=1e-12),
        y0=jnp.asarray(0.0),
        max_steps=64,
        throw=False,
    )
    assert newton.result != optx.RESULTS.successful  # the cycle
    exact = root(lambda t: t - 0.25, 0.0, 1.0, 1.0)
    assert float(exact.value) == 0.25 and int(exact.stats["num_steps"]) <= 3
    no_root = root(lambda t: 1.0 - t, 0.0, 1.0, 1.0)
    assert no_root.result == optx.RESULTS.successful and float(no_root.value) == 1.0


class _Sine(eqx.Module):
    """dy/dt = cos(t) from y = 0: y(t) = sin(t), whatever the input."""

    def __call__(self, t, y, path):
        return jnp.broadcast_to(jnp.cos(jnp.asarray(t)).reshape(-1, 1), y.shape)


def test_a_crossing_and_its_return_within_one_step_is_not_seen():
    """As the docstring says: the event compares the readout with the level at
    the ends of each step, so sin(t) rising above 0.99 at asin(0.99) and back
    below it at pi - asin(0.99), both inside the step from 1 to 2, does not
    fire with steps of 1; with steps of 0.05 it fires at asin(0.99)."""
    path = ltc_jax.InputPath(jnp.linspace(0.0, 3.0, 4), jnp.zeros((1, 4, 1)))
    event = ltc_jax.Crossing(0.99, direction="up")
    reached = {}
    for dt0 in (1.0, 0.05):
        integrator = ltc_jax.make_integrator("rk4", "checkpoint", dt0=dt0)
        trajectory = ltc_jax.integrate(
            _Sine(), path, jnp.zeros((1, 1)), integrator, event=event
        )
        reached[dt0] = (bool(trajectory.event_fired[0]), float(trajectory.t_reached[0]))
    assert reached[1.0] == (False, 3.0)
    assert reached[0.05][0]
    np.testing.assert_allclose(reached[0.05][1], np.arcsin(0.99), rtol=1e-4)
