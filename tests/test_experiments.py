"""Smoke tests: each experiment's `main` at its `--quick` size, into a temporary
folder, writes the records it promises."""

import importlib.util
import json
import os
import pathlib

import pytest


EXPERIMENTS = pathlib.Path(__file__).parent.parent / "experiments"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_memory_scaling_quick(tmp_path):
    experiment = _load("memory_scaling")
    out = tmp_path / "run"
    metrics = experiment.main(experiment.Config(quick=True, out=str(out)))
    with open(out / "metrics.json") as file:
        written = json.load(file)
    assert written["records"] == metrics["records"]
    assert {r["gradient_mode"] for r in written["records"]} == {
        "checkpoint",
        "backsolve",
    }
    for record in written["records"]:
        assert record["num_steps"] == 100 and record["num_observations"] == 101
        assert record["num_saved_outputs"] == 1
        assert record["forward_evaluations"] == 4 * 100  # RK4: 4 per step
        assert record["gradient_relative_error"] < 1e-3
        assert record["temp_bytes"] > 0 and len(record["step_seconds_all"]) == 3
    day = {r["label"]: r for r in written["estimates"]}
    assert set(day) == {"checkpoint (default)", "backsolve", "backsolve-naive"}
    for label in ("checkpoint (default)", "backsolve"):
        assert day[label]["num_steps"] == 21_600_000
        assert day[label]["temp_bytes"] < 2**30
    # The naive backsolve carries a cotangent of the whole input.
    assert day["backsolve-naive"]["temp_bytes"] > day["backsolve-naive"]["input_bytes"]
    assert written["environment"]["backend"] == "cpu"
    records = os.listdir(out / "records")
    assert sum(name.endswith(".json") for name in records) == 2 + 3
    assert (out / "memory_scaling.png").stat().st_size > 10_000
    assert json.loads((out / "config.json").read_text())["quick"] is True
    with pytest.raises(FileExistsError, match="never overwritten"):
        experiment.main(experiment.Config(quick=True, out=str(out)))


@pytest.mark.slow
def test_gradient_accuracy_quick(tmp_path):
    experiment = _load("gradient_accuracy")
    out = tmp_path / "run"
    metrics = experiment.main(experiment.Config(quick=True, out=str(out)))
    written = json.loads((out / "metrics.json").read_text())
    assert written["records"] == metrics["records"]
    keys = {(r["dtype"], r["solver"], r["horizon_taus"]) for r in written["records"]}
    assert keys == {
        (dtype, solver, k)
        for dtype in ("float32", "float64")
        for solver in ("rk4",)
        for k in (1.0, 3.0)
    }
    for record in written["records"]:
        assert record["status"] in {
            "ok",
            "backsolve fails",
            "backsolve non-finite",
            "exact gradient non-finite",
            "forward failed",
        }
        assert record["num_observations"] == round(record["horizon_seconds"] * 360) + 1
        if record["status"] == "ok":
            assert 0 <= record["backsolve_relative_error"] <= 0.1
    error = {
        (r["dtype"], r["horizon_taus"]): r["backsolve_relative_error"]
        for r in written["records"]
    }
    for dtype in ("float32", "float64"):
        # The reverse solve is expansive: tripling the horizon multiplies the error.
        assert error[(dtype, 3.0)] > 100 * error[(dtype, 1.0)]
    assert error[("float64", 1.0)] < 0.1 * error[("float32", 1.0)]
    assert "T=1 tau" in written["table"]
    assert (out / "gradient_accuracy.png").stat().st_size > 10_000


def test_gradient_accuracy_rejects_unknown_solvers(tmp_path):
    experiment = _load("gradient_accuracy")
    with pytest.raises(ValueError, match="Unknown solver 'rk5'"):
        experiment.main(experiment.Config(solvers=("rk5",), out=str(tmp_path / "x")))
