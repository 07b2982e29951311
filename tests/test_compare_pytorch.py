"""The PyTorch comparison (experiments/compare_pytorch.py): the same model in both
stacks gives the same gradients, and the benchmark runs end to end.

The tests that run PyTorch need the optional extra `[torch]` and are skipped,
with that reason, where it is not installed (CI). Speed is reported by the
experiment, never asserted here.
"""

import importlib.util
import json

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest

import ltc_jax
from experiments import compare_pytorch


needs_torch = pytest.mark.skipif(
    any(
        importlib.util.find_spec(name) is None
        for name in ("torch", "torchdiffeq", "ncps")
    ),
    reason="PyTorch, torchdiffeq or ncps is not installed: the comparison needs the "
    'optional extra, pip install -e ".[torch]"',
)


STEPS = 20


def _tiny(getkey):
    """An ltc_jax model and a batch of 3 sequences of 11 knots on [0, 1], float64."""
    model = ltc_jax.LTC(4, 5, 3, key=getkey())
    rng = np.random.default_rng(0)
    data = compare_pytorch.Data(
        ts=np.linspace(0.0, 1.0, 11),
        xs=rng.standard_normal((3, 11, 4)),
        labels=rng.integers(0, 3, 3),
    )
    return model, data


@needs_torch
@pytest.mark.parametrize("mode", ["full", "checkpoint", "backsolve"])
def test_gradients_agree_with_torchdiffeq(getkey, mode):
    """ltc_jax and torchdiffeq integrate the same model with the same RK method
    (torchdiffeq's `rk4`, Kutta's 3/8 rule) in the same steps, so in float64 their
    gradients agree to round-off, and each counts 4 evaluations per step."""
    model, data = _tiny(getkey)
    arrays = compare_pytorch.named_arrays(model)
    scheme = compare_pytorch.Scheme("rk4", steps=STEPS, max_steps=STEPS)
    integrator = compare_pytorch.ltc_jax_integrator(scheme, mode, duration=1.0)
    batch = compare_pytorch.ltc_jax_batch(data, "linear")
    ours = compare_pytorch.ltc_jax_gradients(model, batch, integrator)
    theirs = compare_pytorch.torchdiffeq_gradients(
        arrays, data, scheme, compare_pytorch.PAIRS[mode]
    )
    assert ours["solver_steps"] == STEPS
    assert ours["forward_evaluations"] == theirs["forward_evaluations"] == 4 * STEPS
    if mode == "backsolve":  # one reverse solve, one evaluation per stage
        assert (
            ours["backward_evaluations"] == theirs["backward_evaluations"] == 4 * STEPS
        )
    else:
        assert theirs["backward_evaluations"] == 0  # autograd stores every stage
    assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-12)
    difference = compare_pytorch.relative_difference(
        compare_pytorch.named_arrays(ours["gradients"]), theirs["gradients"]
    )
    assert difference < 1e-11
    # Not a vacuous agreement: every parameter receives a gradient.
    assert all(np.max(np.abs(g)) > 0 for g in theirs["gradients"].values())


@needs_torch
def test_kutta38_is_torchdiffeqs_rk4():
    """One step of a nonlinear scalar ODE: diffrax with `Kutta38` and torchdiffeq's
    `rk4` give the same number; and the method is fourth order."""
    import torch
    import torchdiffeq

    def f(t, y):
        return jnp.sin(t) * y - y**3

    y0, dt = 0.7, 0.3
    ours = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, args: f(t, y)),
        compare_pytorch.Kutta38(),
        0.2,
        0.2 + dt,
        dt,
        jnp.array(y0),
    ).ys[-1]
    theirs = torchdiffeq.odeint(
        lambda t, y: torch.sin(t) * y - y**3,
        torch.tensor(y0, dtype=torch.float64),
        torch.tensor([0.2, 0.2 + dt], dtype=torch.float64),
        method="rk4",
        options=dict(step_size=dt),
    )[-1]
    assert float(ours) == pytest.approx(float(theirs), rel=1e-14)

    def error(n):
        term = diffrax.ODETerm(lambda t, y, args: jnp.cos(t) * y)
        sol = diffrax.diffeqsolve(
            term, compare_pytorch.Kutta38(), 0.0, 2.0, 2.0 / n, jnp.array(1.0)
        )
        return abs(float(sol.ys[-1]) - float(np.exp(np.sin(2.0))))

    ns = np.array([16, 32, 64, 128])
    slope = np.polyfit(np.log(1 / ns), np.log([error(n) for n in ns]), 1)[0]
    assert abs(slope - 4) < 0.15, slope


@needs_torch
def test_torch_linear_path_matches_diffrax():
    import torch

    from experiments import torch_ltc

    rng = np.random.default_rng(1)
    ts = np.sort(rng.uniform(0, 2, 7))
    xs = rng.standard_normal((2, 7, 3))
    path = torch_ltc.LinearPath(torch.from_numpy(ts), torch.from_numpy(xs))
    for t in [ts[0], ts[3], 0.5 * (ts[2] + ts[3]), ts[-1]]:
        expected = [
            np.asarray(diffrax.LinearInterpolation(ts, xs[b]).evaluate(t))
            for b in range(2)
        ]
        got = path.evaluate(torch.tensor(t, dtype=torch.float64)).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13)


@needs_torch
def test_bad_options_name_the_problem():
    import torch

    from experiments import torch_ltc

    with pytest.raises(ValueError, match="rk4 takes a positive number of steps"):
        torch_ltc.make_solve("rk4", "odeint")
    with pytest.raises(ValueError, match="dopri5 takes rtol and atol"):
        torch_ltc.make_solve("dopri5", "odeint", steps=10)
    with pytest.raises(ValueError, match="Unknown mode"):
        torch_ltc.make_solve("rk4", "adjoint", steps=10)
    with pytest.raises(ValueError, match="Unknown method"):
        torch_ltc.make_solve("tsit5", "odeint", rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="strictly increasing"):
        torch_ltc.LinearPath(torch.tensor([0.0, 0.0]), torch.zeros(1, 2, 1))
    with pytest.raises(ValueError, match="Missing parameters"):
        torch_ltc.LTC({"cell.weight_in": np.zeros((2, 2))})


@needs_torch
@pytest.mark.slow
def test_benchmark_runs_end_to_end(tmp_path):
    """The whole benchmark at its `--quick` size (4 RK4 steps of 4 units, 6
    knots, sequences of 3 and 4 frames): every configuration in its own process,
    JSON and report written, float32 gradients of the two stacks at round-off."""
    config = compare_pytorch.Config(out=str(tmp_path / "run"), quick=True)
    import torch

    metrics = compare_pytorch.main(config)
    with open(tmp_path / "run" / "metrics.json") as file:
        written = json.load(file)
    assert written["target"] == metrics["target"]
    assert "target at rk4 N=1000" in (tmp_path / "run" / "report.txt").read_text()
    rows = written["rows"]
    assert [r["error"] for r in rows] == [None] * len(rows)
    assert len(rows) == 5 + 2 * len(compare_pytorch.SEQUENCE_MODELS)
    for row in rows:
        assert row["median_step_seconds"] > 0
        if row["scheme"] is not None:
            assert row["forward_evaluations"] == 4 * 4
    ncps = [r for r in rows if r["stack"] == "ncps"]
    assert [r["forward_evaluations"] for r in ncps] == [3 * 6, 4 * 6]
    for comparison in written["comparisons"]:
        assert comparison["relative_gradient_difference"] < 1e-5
    checks = written["target"]["checks"]["full vs odeint"]
    assert checks["met"] is None and checks["met_cpu_time"] is None  # no N=1000
    # The version read without importing PyTorch is the one imported (a local
    # build label such as "+cpu" aside).
    version = written["machine"]["versions"]["torch"]
    assert version.split("+")[0] == torch.__version__.split("+")[0]


def test_target_is_judged_on_the_paired_modes_at_1000_steps():
    """backsolve is judged against odeint_adjoint (8x) and full against odeint (3x),
    at RK4 N = 1000 only, on wall time and on CPU time separately."""
    comparisons = [
        dict(group="rk4 N=1000", ltc_jax="backsolve", speedup=9.0, cpu_speedup=7.9),
        dict(group="rk4 N=1000", ltc_jax="full", speedup=2.9, cpu_speedup=3.0),
        dict(group="rk4 N=1000", ltc_jax="checkpoint", speedup=1.0, cpu_speedup=1.0),
        dict(group="rk4 N=100", ltc_jax="full", speedup=0.1, cpu_speedup=0.1),
    ]
    checks = compare_pytorch.target_check(comparisons)["checks"]
    assert set(checks) == {"backsolve vs odeint_adjoint", "full vs odeint"}
    backsolve, full = checks["backsolve vs odeint_adjoint"], checks["full vs odeint"]
    assert (backsolve["met"], backsolve["met_cpu_time"]) == (True, False)
    assert (full["met"], full["met_cpu_time"]) == (False, True)
    missing = compare_pytorch.target_check(comparisons[3:])["checks"]["full vs odeint"]
    assert missing["measured"] is None and missing["met"] is None


def test_relative_difference_is_max_error_over_max_magnitude():
    x = {"a": np.array([1.0, 2.0]), "b": np.array([[0.5]])}
    y = {"a": np.array([1.0, 4.0]), "b": np.array([[-0.5]])}
    assert compare_pytorch.relative_difference(x, y) == pytest.approx(2.0 / 4.0)
    with pytest.raises(ValueError, match="Different parameters"):
        compare_pytorch.relative_difference(x, {"a": y["a"]})


def test_bad_config_names_the_problem(monkeypatch):
    Config = compare_pytorch.Config
    with pytest.raises(ValueError, match="threads must be a positive int"):
        compare_pytorch.main(Config(threads=0))
    with pytest.raises(ValueError, match="sequence_lengths must lie in"):
        compare_pytorch.main(Config(knots=50, sequence_lengths=(60,)))
    with pytest.raises(ValueError, match="min_repeats"):
        compare_pytorch.main(Config(repeats=2, min_repeats=3))
    monkeypatch.setattr(compare_pytorch, "_installed", lambda name: name != "ncps")
    with pytest.raises(ModuleNotFoundError, match=r"needs ncps: pip install"):
        compare_pytorch.main(Config())
