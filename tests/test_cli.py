"""The `ltc-jax` command line and the main job."""

import json

import jax
import pytest
from helpers import toy_ts_file

import ltc_jax
from ltc_jax import app
from ltc_jax.app import cli


def test_cli_on_any_ts_pair(tmp_path, capsys):
    train = toy_ts_file(tmp_path / "train.ts", 24, 0)
    test = toy_ts_file(tmp_path / "test.ts", 10, 1)
    out = tmp_path / "run"
    cli.main(
        [
            "train",
            "--data",
            train,
            "--test-data",
            test,
            "--out",
            str(out),
            "--hidden-size",
            "4",
            "--epochs",
            "2",
            "--batch-size",
            "8",
            "--no-progress",
        ]
    )
    printed = capsys.readouterr().out
    assert "test accuracy" in printed and "backsolve" in printed
    metrics = json.loads((out / "metrics.json").read_text())
    for key in (
        "test_accuracy",
        "train_seconds",
        "gradient_mode",
        "solver",
        "memory_bytes_by_mode",
    ):
        assert key in metrics
    assert metrics["gradient_mode"] == "checkpoint" and metrics["solver"] == "tsit5"
    assert set(metrics["memory_bytes_by_mode"]) == set(ltc_jax.ADJOINT_NAMES)
    full = metrics["memory_bytes_by_mode"]["full"]["temp_bytes"]
    assert full > metrics["memory_bytes_by_mode"]["backsolve"]["temp_bytes"]
    assert metrics["environment"]["backend"] == jax.default_backend()
    assert json.loads((out / "config.json").read_text())["hidden_size"] == 4
    with pytest.raises(FileExistsError, match="never overwritten"):
        cli.main(["train", "--data", train, "--test-data", test, "--out", str(out)])


def test_cli_rejects_bad_arguments(tmp_path):
    train = toy_ts_file(tmp_path / "train.ts", 8, 0)
    with pytest.raises(ValueError, match="go together"):
        cli.main(["train", "--data", train, "--out", str(tmp_path / "a")])
    with pytest.raises(ValueError, match="dt0 must be positive"):
        cli.main(["train", "--dt0", "-1", "--out", str(tmp_path / "b")])
    with pytest.raises(SystemExit):
        cli.main(["train", "--solver", "rk45"])
    # A bad option found before training leaves no run folder behind.
    with pytest.raises(ValueError, match="tighten-at must lie in"):
        cli.main(["train", "--tighten-at", "1.5", "--out", str(tmp_path / "c")])
    assert not (tmp_path / "c").exists()
    with pytest.raises(ValueError, match="checkpoint-every must be positive"):
        cli.main(["train", "--checkpoint-every", "0", "--out", str(tmp_path / "d")])
    assert not (tmp_path / "d").exists()


def test_cli_biophysical_cell_with_fused_solver(tmp_path):
    train = toy_ts_file(tmp_path / "train.ts", 16, 0)
    test = toy_ts_file(tmp_path / "test.ts", 8, 1)
    out = tmp_path / "run"
    cli.main(
        [
            "train",
            "--data",
            train,
            "--test-data",
            test,
            "--out",
            str(out),
            "--cell",
            "biophysical",
            "--wiring",
            "ncp",
            "--hidden-size",
            "6",
            "--solver",
            "fused",
            "--dt0",
            "1",
            "--ode-unfolds",
            "3",
            "--epochs",
            "1",
            "--batch-size",
            "8",
            "--no-progress",
            "--no-memory-table",
        ]
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["cell"] == "biophysical" and metrics["wiring"] == "ncp"
    assert metrics["solver"] == "fused" and not metrics["adaptive"]
    # Fixed steps of dt0 = 1 sample: max_steps covers the longest of train and test.
    assert metrics["max_steps"] == 7


def test_cli_irregular_protocol_with_mask_and_time_channels(tmp_path):
    train = toy_ts_file(tmp_path / "train.ts", 16, 0)
    test = toy_ts_file(tmp_path / "test.ts", 8, 1)
    out = tmp_path / "run"
    cli.main(
        [
            "train",
            "--data",
            train,
            "--test-data",
            test,
            "--out",
            str(out),
            "--drop-rate",
            "0.5",
            "--observation-mask",
            "--time-since-observation",
            "--hidden-size",
            "4",
            "--epochs",
            "1",
            "--batch-size",
            "8",
            "--no-progress",
            "--no-memory-table",
        ]
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert "50% of observations dropped" in metrics["dataset"]["train"]
    config = json.loads((out / "config.json").read_text())
    assert config["drop_rate"] == 0.5 and config["observation_mask"]


def test_tighten_at_switches_to_the_tight_tolerances():
    """`--tighten-at 0.7` of 10 epochs: loose for epochs 0-6, tight from epoch 7."""
    from ltc_jax.app.job import training_schedule

    config = app.TrainConfig(epochs=10, tighten_at=0.7, rtol=1e-3, atol=1e-4)
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4)
    schedule = training_schedule(config, integrator)
    assert schedule.start_epochs == (0, 7)
    assert schedule(6).stepsize_controller.rtol == 1e-3
    assert schedule(7).stepsize_controller.rtol == config.tight_rtol
    assert schedule(9).stepsize_controller.atol == config.tight_atol
    assert training_schedule(app.TrainConfig(), integrator) is None
    with pytest.raises(ValueError, match="tighten-at must lie in"):
        training_schedule(app.TrainConfig(tighten_at=1.5), integrator)
    with pytest.raises(ValueError, match="adaptive"):
        training_schedule(config, ltc_jax.make_integrator("heun", dt0=0.1))
