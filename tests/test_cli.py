"""The `ltc-jax` command line and the main job."""

import csv
import dataclasses
import json
import os
import subprocess
import sys
import time
import warnings

import equinox as eqx
import jax
import numpy as np
import pytest
from helpers import toy_ts_file

import ltc_jax
from ltc_jax import app
from ltc_jax.app import cli


def _train_toy(tmp_path, train_size, test_size, *options):
    """`ltc-jax train` on toy `.ts` files of `train_size` and `test_size` series
    with `options`; it must succeed. **Returns:** `(train file, test file, run
    folder, metrics)`."""
    train = toy_ts_file(tmp_path / "train.ts", train_size, 0)
    test = toy_ts_file(tmp_path / "test.ts", test_size, 1)
    out = tmp_path / "run"
    args = ["train", "--data", train, "--test-data", test, "--out", str(out)]
    assert cli.main([*args, "--no-progress", *options]) == 0
    return train, test, out, json.loads((out / "metrics.json").read_text())


def _evaluates_as_the_run_tested(capsys, metrics, *args):
    """`ltc-jax evaluate *args` prints the run's own test accuracy and loss (to
    the printed digits), and its trivial baseline's accuracy, from the answer
    the run saved."""
    capsys.readouterr()
    assert cli.main(["evaluate", *args]) == 0
    printed = capsys.readouterr().out
    assert f"accuracy   {metrics['test_accuracy']:.4f}" in printed
    assert f"loss       {metrics['test_loss']:.4f}" in printed
    baseline = metrics["baseline"]
    line = f"baseline   {baseline['test_accuracy']:.4f} (always {baseline['name']})"
    assert line in printed
    return printed


SMALL_RUN = ("--hidden-size", "4", "--epochs", "2", "--batch-size", "8")
"""A few units, two epochs, batches of 8: a run of the toy data in seconds."""


def test_cli_regression_reports_the_test_error(tmp_path, capsys):
    """A `.ts` pair of regression targets (each series' mean): the summary
    prints the test error, not a NaN accuracy, and the validation share's
    reason speaks of series, not classes."""
    rng = np.random.default_rng(0)

    def regression_file(path, n):
        lines = ["@problemName sums", "@dimensions 1", "@targetLabel true", "@data"]
        for _ in range(n):
            values = rng.normal(size=rng.integers(4, 9))
            lines.append(",".join(f"{v:.4f}" for v in values) + f":{values.mean():.4f}")
        path.write_text("\n".join(lines) + "\n")
        return str(path)

    train = regression_file(tmp_path / "train.ts", 24)
    test = regression_file(tmp_path / "test.ts", 8)
    out = tmp_path / "run"
    args = ["train", "--data", train, "--test-data", test, "--out", str(out)]
    assert cli.main([*args, "--no-progress", *SMALL_RUN]) == 0
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert np.isnan(metrics["test_accuracy"]) and "test accuracy" not in printed
    assert f"test MSE           {metrics['test_loss']:.4g}" in printed

    # Beside it, the error of always answering the training targets' mean,
    # from the files' last fields.
    def targets(path):
        lines = open(path).read().split("@data")[1].split()
        return np.array([float(line.rsplit(":", 1)[1]) for line in lines])

    mean_error = np.mean((targets(test) - targets(train).mean()) ** 2)
    assert metrics["baseline"]["test_loss"] == pytest.approx(mean_error, rel=1e-12)
    line = f"baseline           {mean_error:.4g} (always the training targets' mean)"
    assert line in printed
    assert metrics["task"] == "regression"
    assert cli.main(["evaluate", str(out), "--data", test]) == 0
    printed = capsys.readouterr().out
    assert "accuracy" not in printed
    assert f"loss       {metrics['test_loss']:.4f} (mean squared error)" in printed
    line = f"baseline   {mean_error:.4f} (always the training targets' mean)"
    assert line in printed
    # A run saved before the baseline was recorded evaluates without it.
    data = json.loads((out / "data.json").read_text())
    assert data.pop("baseline") == dict(
        name="the training targets' mean",
        targets=[pytest.approx(targets(train).mean())],
    )
    (out / "data.json").write_text(json.dumps(data))
    assert cli.main(["evaluate", str(out), "--data", test]) == 0
    printed = capsys.readouterr().out
    assert "loss       " in printed and "baseline" not in printed
    reason = json.loads((out / "config.json").read_text())["derived"]
    reason = reason["validation_fraction"]["reason"]
    assert "0.1 of 24 training series" in reason and "class" not in reason
    # A file of class labels is named as such, not as targets of another shape.
    classes = tmp_path / "classes.ts"
    classes.write_text("@dimensions 1\n@classLabel true a b\n@data\n1,2,3:a\n")
    assert f"classes.ts holds class labels, but {out} is a regression run" in _bad(
        tmp_path, capsys, "evaluate", str(out), "--data", str(classes)
    )


def test_cli_on_any_ts_pair(tmp_path, capsys):
    train, test, out, metrics = _train_toy(
        tmp_path,
        24,
        10,
        *SMALL_RUN,
        "--memory-table",
    )
    printed = capsys.readouterr().out
    assert "test accuracy" in printed and "backsolve" in printed
    # 12 "up" and 12 "down" train: the first of the tie; the test's 10 series
    # alternate from "up", so it answers 5 of them.
    assert metrics["baseline"] == dict(
        name="the training set's commonest class, 'up'", test_accuracy=0.5
    )
    assert "baseline           0.5000 (always the training set's commonest" in printed
    for key in (
        "test_accuracy",
        "train_seconds",
        "gradient_mode",
        "solver",
        "memory_bytes_by_mode",
    ):
        assert key in metrics
    assert metrics["gradient_mode"] == "checkpoint" and metrics["solver"] == "fused"
    assert metrics["task"] == "classification"
    assert set(metrics["memory_bytes_by_mode"]) == set(ltc_jax.ADJOINT_NAMES)
    assert all(m["temp_bytes"] > 0 for m in metrics["memory_bytes_by_mode"].values())
    assert metrics["environment"]["backend"] == jax.default_backend()
    assert json.loads((out / "config.json").read_text())["hidden_size"] == 4
    # The default solver takes fixed steps: no tolerances.
    assert metrics["rtol"] is None and metrics["atol"] is None
    assert not metrics["adaptive"]
    # No validation share by default for 24 series (10% of each class holds out
    # 2, under 100): every training series trains, and the last epoch is kept.
    sizes = metrics["dataset"]
    assert sizes["train_size"] == 24 and sizes["validation_size"] == 0
    assert sizes["test_size"] == 10
    derived = json.loads((out / "config.json").read_text())["derived"]
    # Batch size given; the rest from the data: the fused step, one per median
    # observation interval (the toy series are sampled at unit spacing); the
    # readout's features and the gate's bias from the model.
    from_data = {
        "solver",
        "dt0",
        "tau_init",
        "tau_min",
        "max_steps",
        "batching",
        "readout_times",
        "validation_fraction",
    }
    from_model = {"readout_features", "gate_bias_init", "learning_rate"}
    assert set(derived) == from_data | from_model
    assert derived["solver"]["value"] == "fused" and derived["dt0"]["value"] == 1.0
    assert derived["tau_min"]["value"] == 0.01  # a hundredth of the unit spacing
    assert derived["readout_features"]["value"] == "both"
    assert derived["gate_bias_init"]["value"] == "chrono"
    assert derived["validation_fraction"]["value"] == 0
    assert all(choice["reason"] for choice in derived.values())
    assert metrics["best_epoch"] is None and len(metrics["history"]) == 2
    # evaluate re-reads the test file, standardised with the saved training
    # statistics, and reloads the saved model: the same accuracy as the run's.
    _evaluates_as_the_run_tested(capsys, metrics, str(out), "--data", test)
    # predict writes one row per series; their accuracy against the file's labels
    # is the run's test accuracy.
    assert cli.main(["predict", str(out), "--data", test]) == 0
    with open(out / "predictions-test.csv") as file:
        predictions = list(csv.DictReader(file))
    names = ltc_jax.datasets.read_ts(train).class_names
    labels = ltc_jax.datasets.read_ts(test, class_names=names).labels
    correct = [
        names[label] == row["prediction"]
        for label, row in zip(labels, predictions, strict=True)
    ]
    assert np.mean(correct) == pytest.approx(metrics["test_accuracy"])
    for row in predictions:
        assert sum(float(row[name]) for name in names) == pytest.approx(1, abs=1e-5)
    with open(out / "history.csv") as file:
        rows = list(csv.DictReader(file))
    assert [float(r["loss"]) for r in rows] == [h["loss"] for h in metrics["history"]]
    assert (out / "history.png").stat().st_size > 0


def test_cli_validation_share_comes_from_the_training_file_only(
    tmp_path, monkeypatch, capsys
):
    """A derived share (here with the floor lowered from 100 to 2 series) is
    stratified from the training file (10% of 24 toy series: 1 of each of the
    two classes, rounded from 1.2); the test file is whole, and the epoch kept
    is the one of lowest validation loss. Without `--memory-table` no memory is
    measured, and one line says how to ask for it."""
    monkeypatch.setattr("ltc_jax.app.settings.MIN_VALIDATION_SERIES", 2)
    _, _, out, metrics = _train_toy(
        tmp_path,
        24,
        10,
        *SMALL_RUN,
    )
    sizes = metrics["dataset"]
    assert sizes["train_size"] == 22 and sizes["validation_size"] == 2
    assert sizes["test_size"] == 10
    share = json.loads((out / "config.json").read_text())["derived"]
    assert share["validation_fraction"]["value"] == 0.1
    assert "holds out 2, at least 2" in share["validation_fraction"]["reason"]
    losses = [h["validation_loss"] for h in metrics["history"]]
    assert metrics["best_epoch"] == losses.index(min(losses))
    assert metrics["memory_bytes_by_mode"] is None
    printed = capsys.readouterr().out
    assert "run again with --memory-table" in printed
    assert "compiled training-step memory" not in printed


def _bad(tmp_path, capsys, *args):
    """Run the CLI on bad input: exit status 2, one line on stderr naming the
    problem, no traceback, no run folder."""
    before = set(tmp_path.iterdir())
    status = cli.main(list(args))
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1 and err[0].startswith("ltc-jax: error: ")
    assert set(tmp_path.iterdir()) == before
    return err[0]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--data", "missing.ts", "--test-data", "missing.ts"),
            "--data missing.ts: no such file",
        ),
        (("--dt0", "-1"), "--dt0 must be positive; got -1.0"),
        (("--tau-min", "-0.5"), "--tau-min must be zero or positive"),
        (("--epochs", "0"), "--epochs must be at least 1; got 0"),
        (("--epochs", "-3"), "--epochs must be at least 1; got -3"),
        (("--batch-size", "0"), "--batch-size must be at least 1"),
        (("--tighten-at", "1.5"), "--tighten-at must lie in (0, 1)"),
        (("--checkpoint-every", "0"), "--checkpoint-every must be at least 1"),
        (("--drop-rate", "1"), "--drop-rate must lie in [0, 1)"),
        (("--data", "x.ts"), "--data and --test-data go together"),
        (("--resume", "no-such-run"), "--resume no-such-run: no such folder"),
        (
            ("--cell", "biophysical", "--readout-features", "pooled"),
            "--readout-features pooled reads several readout times",
        ),
    ],
)
def test_cli_user_errors_are_one_line_with_status_2(
    tmp_path, capsys, monkeypatch, args, message
):
    monkeypatch.chdir(tmp_path)
    assert message in _bad(tmp_path, capsys, "train", *args)


def test_cli_out_that_is_a_file_and_debug(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("")
    assert "--out taken is a file" in _bad(tmp_path, capsys, "train", "--out", "taken")
    with pytest.raises(FileExistsError, match="is a file"):
        cli.main(["train", "--out", "taken", "--debug"])
    assert "not a finished run" in _bad(
        tmp_path, capsys, "evaluate", str(tmp_path), "--data", "taken"
    )
    assert "nosuch: no such run folder" in _bad(
        tmp_path, capsys, "predict", "nosuch", "--data", "taken"
    )
    (tmp_path / "predictions.csv").write_text("")
    assert "give another with --out" in _bad(
        tmp_path,
        capsys,
        "predict",
        str(tmp_path),
        "--data",
        "taken",
        "--out",
        str(tmp_path / "predictions.csv"),
    )


@pytest.mark.parametrize("command", ["train", "stream", "evaluate", "predict"])
def test_cli_help_is_wrapped_to_the_terminal_one_paragraph_per_option(command):
    """At 100 columns: no line wider, `train --help` within 120 lines, and each
    option's help filled greedily: no line of it ends where the next line's
    first word would still have fit (the breaks a docstring's own line breaks
    would leave)."""
    env = dict(os.environ, COLUMNS="100")
    printed = subprocess.run(
        [sys.executable, "-m", "ltc_jax", command, "--help"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert max(len(line) for line in printed) <= 100
    if command == "train":
        assert len(printed) <= 120
    boxed = [line[1:-1] for line in printed if line.startswith("│")]
    rows = [row.rstrip() for row in boxed]
    starts = [len(row) - len(row.lstrip()) for row in rows if row.strip()]
    column = max(starts)  # where every continuation of a help text starts
    width = len(boxed[0]) - 1 - column  # the text's room, less the padding
    helps: list[list[str]] = []
    for row in rows:
        if row.lstrip().startswith("-"):
            helps.append([])
        if helps and len(row) > column and not row[column - 2 : column].strip():
            helps[-1].append(row[column:])
    assert sum(len(text) for text in helps) > len(helps)  # some help wraps
    assert max(len(line) for text in helps for line in text) <= width
    for text in helps:
        for line, following in zip(text, text[1:], strict=False):
            assert len(line) + 1 + len(following.split()[0]) > width, (line, following)


def test_cli_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"ltc-jax {ltc_jax.__version__}"
    out = subprocess.run(
        [sys.executable, "-m", "ltc_jax", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"ltc-jax {ltc_jax.__version__}"


def test_cli_biophysical_cell_with_fused_solver(tmp_path):
    train, test, out, metrics = _train_toy(
        tmp_path,
        16,
        8,
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
    )
    assert metrics["cell"] == "biophysical" and metrics["wiring"] == "ncp"
    assert metrics["solver"] == "fused" and not metrics["adaptive"]
    # Fixed steps of dt0 = 1 sample: max_steps covers the longest of train and test.
    assert metrics["max_steps"] == 7


def test_cli_irregular_protocol_with_mask_and_time_channels(tmp_path):
    train, test, out, metrics = _train_toy(
        tmp_path,
        16,
        8,
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
    )
    assert "50% of observations dropped" in metrics["dataset"]["train"]
    config = json.loads((out / "config.json").read_text())
    assert config["drop_rate"] == 0.5 and config["observation_mask"]


def test_tighten_at_switches_to_the_tight_tolerances():
    """`--tighten-at 0.7` of 10 epochs: loose for epochs 0-6, tight from epoch 7."""
    from ltc_jax.app.settings import training_schedule

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


def test_cli_mixed_precision_trains_and_reloads_in_bfloat16(tmp_path):
    """`--precision bf16`: the run trains, and the saved model reloads with its
    gate's products in bfloat16 (the parameters keep the default float)."""
    from ltc_jax.app.runs import load_run

    _, _, out, metrics = _train_toy(
        tmp_path,
        16,
        8,
        "--precision",
        "bf16",
        "--hidden-size",
        "4",
        "--epochs",
        "1",
    )
    assert np.isfinite(metrics["test_loss"])
    _, model, _ = load_run(str(out))
    assert model.cell.matmul_dtype == "bfloat16"
    assert model.cell.weight_in.dtype == jax.numpy.zeros(()).dtype  # unchanged


def test_cli_cfc_trains_evaluates_and_records_one_memory_entry(tmp_path, capsys):
    """`--model cfc`: no ODE, so only the batch size, readout times and the
    CfC's learning rate are derived (the epochs are given), the memory table
    has the one `backprop` entry, and `evaluate` reproduces the run's test
    accuracy from the saved model, pooled readout (`--readout-features pooled`)
    included."""
    from ltc_jax.app.runs import load_run

    _, test, out, metrics = _train_toy(
        tmp_path,
        24,
        10,
        "--model",
        "cfc",
        "--cfc-mode",
        "no_gate",
        "--hidden-size",
        "4",
        "--backbone-units",
        "8",
        "--readout-features",
        "pooled",
        "--epochs",
        "2",
        "--memory-table",
    )
    assert metrics["model"] == "cfc" and metrics["gradient_mode"] == "backprop"
    model = load_run(str(out))[1]
    assert model.readout_features == "pooled"
    assert model.readout.weight.shape == (2, 3 * 4)
    assert set(metrics["memory_bytes_by_mode"]) == {"backprop"}
    # No ODE solve: only the batches, the readout, the rate, the time scale
    # and the share.
    assert set(metrics["derived"]) == {
        "batch_size",
        "readout_times",
        "learning_rate",
        "time_scale",
        "validation_fraction",
    }
    assert metrics["derived"]["learning_rate"]["value"] == 1e-3
    assert "cell updates" in capsys.readouterr().out
    assert cli.main(["evaluate", str(out), "--data", test]) == 0
    printed = capsys.readouterr().out
    assert f"{metrics['test_accuracy']:.4f}" in printed


def test_cli_jump_model_trains_reloads_and_derives_no_solver(tmp_path, capsys):
    """`--model jump`: the LTC's time constants and gate are derived, no solver
    setting (it calls none); gradient mode "backprop", one memory entry; the
    saved model reloads to the run's own test accuracy and loss; the
    biophysical cell is refused."""
    _, test, out, metrics = _train_toy(
        tmp_path,
        24,
        10,
        "--model",
        "jump",
        "--substeps",
        "2",
        *SMALL_RUN[:4],
        "--memory-table",
    )
    assert metrics["model"] == "jump" and metrics["gradient_mode"] == "backprop"
    assert set(metrics["memory_bytes_by_mode"]) == {"backprop"}
    derived = set(metrics["derived"])
    assert {"tau_init", "tau_min", "gate_bias_init", "learning_rate"} <= derived
    assert not {"solver", "dt0", "max_steps", "batching"} & derived
    assert "GRU update" in capsys.readouterr().out
    _evaluates_as_the_run_tested(capsys, metrics, str(out), "--data", test)
    from ltc_jax.app.runs import load_run

    config, model, _ = load_run(str(out))
    assert isinstance(model, ltc_jax.JumpLTC) and model.substeps == 2
    assert config.gate_bias_init == model.field.gate_bias_init == "chrono"
    with pytest.raises(ValueError, match="--model jump"):
        app.TrainConfig(model="jump", cell="biophysical").check()
    with pytest.raises(ValueError, match="--substeps"):
        app.TrainConfig(substeps=2).check()
    # A gradient mode given to a model without an ODE solve was ignored, and
    # a reverse solve with the fused step failed with a traceback at the end.
    for model in ("jump", "cfc"):
        with pytest.raises(ValueError, match=f"--model {model} trains by backprop"):
            app.StreamConfig(model=model, adjoint="backsolve").check()
    with pytest.raises(ValueError, match="20 at --clock-hz 0.05 gives 1 frames"):
        app.StreamConfig(window_seconds=20.0, clock_hz=0.05).check()
    with pytest.raises(ValueError, match="--fill must be a finite number; got nan"):
        app.StreamConfig(fill=float("nan")).check()
    with pytest.raises(ValueError, match="give --backward-solver"):
        app.StreamConfig(solver="fused", adjoint="windowed").check()
    app.StreamConfig(solver="fused", adjoint="windowed", backward_solver="heun").check()
    # A fixed step given to a model without a solve is unused, not an error.
    data = ltc_jax.datasets.read_ts(test)
    for model in ("jump", "cfc"):
        config = app.TrainConfig(model=model, dt0=0.5, epochs=2)
        settings = app.settings.resolve_settings(config, data)
        assert "max_steps" not in settings["derived"]


def test_cli_resumes_a_run_saved_before_readout_times_were_derived(tmp_path):
    """A `config.json` without `readout_times` (and without the derived
    readout times and batching) is an older run: it resumes reading its final
    state, not with the readout the data would derive now (6 times here)."""
    from ltc_jax.app.runs import load_run

    _, _, out, _ = _train_toy(
        tmp_path,
        24,
        10,
        "--readout-times",
        "1",
        "--hidden-size",
        "4",
        "--epochs",
        "2",
    )
    saved = json.loads((out / "config.json").read_text())
    del saved["readout_times"]
    for name in ("readout_times", "batching"):
        saved["derived"].pop(name, None)
    (out / "config.json").write_text(json.dumps(saved))
    (out / "metrics.json").unlink()
    assert cli.main(["train", "--resume", str(out), "--no-progress"]) == 0
    assert load_run(str(out))[1].readout_times == 1
    assert json.loads((out / "metrics.json").read_text())["resumed"]


def test_an_option_given_at_its_default_conflicts_with_the_resumed_runs_value(
    tmp_path, capsys
):
    """A resumed run keeps its options. An option given on the command line at
    its default (`--clip-norm 1.0`, in either spelling) where the run saved
    another (2.0) is refused, naming both, as one given at another value is,
    rather than silently resuming with the saved value; the saved value itself,
    given again, resumes."""
    _, _, out, _ = _train_toy(tmp_path, 24, 10, *SMALL_RUN, "--clip-norm", "2")
    (out / "metrics.json").unlink()  # an interrupted run: resumable
    capsys.readouterr()
    resume = ("train", "--resume", str(out))
    for given in (("--clip-norm", "1.0"), ("--clip_norm=1",)):
        assert "these differ: --clip-norm 1.0 (saved: 2.0)" in _bad(
            tmp_path, capsys, *resume, *given
        )
    assert "these differ: --clip-norm 3.0" in _bad(
        tmp_path, capsys, *resume, "--clip-norm", "3"
    )
    # From the library: the options given add to those not at their defaults.
    from ltc_jax.app.job import _resumed_config

    with pytest.raises(ValueError, match="these differ: --clip-norm 3.0"):
        _resumed_config(app.TrainConfig(resume=str(out), clip_norm=3.0), given=())
    assert cli.main([*resume, "--clip-norm", "2", "--no-progress"]) == 0
    assert json.loads((out / "metrics.json").read_text())["resumed"]


def test_an_option_given_at_the_value_the_run_derived_resumes(tmp_path, capsys):
    """A resumed run accepts an option given at the value the run derived from
    its data (saved as None, the value in `derived`), a tuple as the JSON list
    it was saved as, and refuses another value, naming the derived one."""
    _, _, out, _ = _train_toy(tmp_path, 24, 10, "--hidden-size", "4", "--epochs", "2")
    derived = json.loads((out / "config.json").read_text())["derived"]
    batch_size = derived["batch_size"]["value"]
    low, high = derived["tau_init"]["value"]
    (out / "metrics.json").unlink()  # an interrupted run: resumable
    capsys.readouterr()
    resume = ("train", "--resume", str(out))
    message = _bad(tmp_path, capsys, *resume, "--batch-size", str(batch_size + 1))
    assert (
        f"these differ: --batch-size {batch_size + 1} (saved: None, derived "
        f"{batch_size})"
    ) in message
    given = ("--batch-size", str(batch_size), "--tau-init", repr(low), repr(high))
    assert cli.main([*resume, *given, "--no-progress"]) == 0
    assert json.loads((out / "metrics.json").read_text())["resumed"]


def _quarter_second_toys(tmp_path) -> list[str]:
    """Toy training and test `.ts` files (24 and 10 series) with timestamps
    0.25 s apart: a median interval that is not the sample index's 1."""
    files = []
    for name, n, seed in (("train", 24, 0), ("test", 10, 1)):
        toy = toy_ts_file(tmp_path / f"{name}-index.ts", n, seed)
        files.append(_rewrite_ts(toy, tmp_path / f"{name}.ts", start=0.0, step=0.25))
    return files


def test_cli_resumes_and_loads_a_cfc_saved_before_its_time_scale_was_derived(
    tmp_path,
):
    """A run saved now records the derived time scale (the median interval,
    0.25), loads it, and keeps it when resumed. A CfC run whose `config.json`
    and `data.json` lack `time_scale` read the elapsed time in the timestamps'
    own unit: resumed and loaded, it keeps that unit (1), not the median
    interval the data would derive now."""
    from ltc_jax.app.runs import load_run

    files = _quarter_second_toys(tmp_path)
    out = tmp_path / "run"
    args = ["train", "--data", files[0], "--test-data", files[1], "--out", str(out)]
    assert cli.main([*args, "--no-progress", "--model", "cfc", *SMALL_RUN]) == 0
    spacing = json.loads((out / "config.json").read_text())["derived"]["time_scale"]
    assert spacing["value"] == 0.25
    assert load_run(str(out))[1].time_scale == spacing["value"]
    (out / "metrics.json").unlink()
    assert cli.main(["train", "--resume", str(out), "--no-progress"]) == 0
    assert load_run(str(out))[1].time_scale == 0.25
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["derived"]["time_scale"] == spacing
    saved = json.loads((out / "config.json").read_text())
    del saved["time_scale"], saved["derived"]["time_scale"]
    (out / "config.json").write_text(json.dumps(saved))
    data = json.loads((out / "data.json").read_text())
    del data["settings"]["time_scale"]
    for options in data["models"]:  # the options recorded with the model
        del options["time_scale"]
    for meta in (out / "checkpoints").glob("*/meta.json"):  # and with each state
        checkpoint = json.loads(meta.read_text())
        for options in checkpoint["models"]:
            del options["time_scale"]
        meta.write_text(json.dumps(checkpoint))
    (out / "data.json").write_text(json.dumps(data))
    assert load_run(str(out))[1].time_scale == 1.0
    (out / "metrics.json").unlink()
    assert cli.main(["train", "--resume", str(out), "--no-progress"]) == 0
    assert load_run(str(out))[1].time_scale == 1.0
    assert json.loads((out / "data.json").read_text())["settings"]["time_scale"] == 1


def test_cli_reads_the_time_since_observation_in_median_intervals(tmp_path, capsys):
    """An LTC run with `--time-since-observation` derives the channel's unit,
    the median interval (0.25 s), records it, evaluates a file with the
    channel in that unit (the run's own test scores again), and keeps the
    unit it recorded when resumed; `--time-scale` sets it. A run whose
    records lack the unit (saved before it was derived) reads raw times, and
    keeps them when resumed."""
    from ltc_jax.app.runs import config_from_json, read_for_run
    from ltc_jax.app.settings import path_options

    files = _quarter_second_toys(tmp_path)
    out = tmp_path / "run"
    args = ["train", "--data", files[0], "--test-data", files[1], "--out", str(out)]
    options = ("--time-since-observation", *SMALL_RUN)
    assert cli.main([*args, "--no-progress", *options]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["derived"]["time_scale"]["value"] == 0.25
    _, _, _, settings, _ = read_for_run(str(out), files[1])
    assert settings["time_scale"] == 0.25
    metrics = json.loads((out / "metrics.json").read_text())
    _evaluates_as_the_run_tested(capsys, metrics, str(out), "--data", files[1])
    # Resumed, the unit recorded is kept, not derived again from the data.
    config["derived"]["time_scale"]["value"] = 0.5
    (out / "config.json").write_text(json.dumps(config))
    (out / "metrics.json").unlink()
    assert cli.main(["train", "--resume", str(out), "--no-progress"]) == 0
    resumed = json.loads((out / "metrics.json").read_text())
    assert resumed["derived"]["time_scale"] == config["derived"]["time_scale"]
    assert read_for_run(str(out), files[1])[3]["time_scale"] == 0.5
    # Saved before the unit was derived: raw times, read and resumed.
    del config["derived"]["time_scale"]
    (out / "config.json").write_text(json.dumps(config))
    data = json.loads((out / "data.json").read_text())
    del data["settings"]["time_scale"]
    (out / "data.json").write_text(json.dumps(data))
    settings = read_for_run(str(out), files[1])[3]
    assert (
        path_options(config_from_json(config), settings)["time_since_observation_scale"]
        == 1.0
    )
    (out / "metrics.json").unlink()
    assert cli.main(["train", "--resume", str(out), "--no-progress"]) == 0
    assert read_for_run(str(out), files[1])[3]["time_scale"] == 1.0
    given = tmp_path / "given"
    args[-1] = str(given)
    assert cli.main([*args, "--no-progress", *options, "--time-scale", "2"]) == 0
    assert read_for_run(str(given), files[1])[3]["time_scale"] == 2.0


def test_a_config_saved_before_readout_features_keeps_its_readout():
    """`readout_pooling` (the option `readout_features` replaced) maps to the
    readout it built, and a run from before the chrono bias keeps the zero
    one; a run saved now reads back as written."""
    from ltc_jax.app import TrainConfig
    from ltc_jax.app.runs import config_from_json

    old = dataclasses.asdict(TrainConfig(epochs=3))
    del old["readout_features"], old["gate_bias_init"]
    for pooling, features in ((True, "pooled"), (False, "states")):
        config = config_from_json(dict(old, readout_pooling=pooling, derived={}))
        assert config.readout_features == features
        assert config.gate_bias_init == "zero"
    config = config_from_json(dict(old))  # before readout_pooling, too
    assert config.readout_features == "states"
    cfc = config_from_json(dict(old, model="cfc"))
    assert cfc.gate_bias_init is None  # the CfC has no LTC gate
    now = TrainConfig(
        epochs=3, readout_features="both", gate_bias_init="chrono", tau_init=(0.5, 2.0)
    )
    # Through JSON, as the run folder holds it: lists read back as tuples.
    assert config_from_json(json.loads(json.dumps(dataclasses.asdict(now)))) == now


def test_the_main_job_builds_the_chrono_gate_and_both_readouts():
    """The main job's model: the LTC with the chrono gate bias (sigmoid(b) =
    min(1/2, 1/tau) per unit) reading the states and their summary; the
    biophysical cell its final states, with no gate bias to set."""
    from ltc_jax.app import TrainConfig
    from ltc_jax.app.settings import make_model

    settings = dict(tau_init=(0.5, 50.0), readout_times=4)
    model = make_model(TrainConfig(hidden_size=6), 3, 2, settings)
    gate = jax.nn.sigmoid(np.asarray(model.cell.bias))
    np.testing.assert_allclose(gate, np.minimum(0.5, 1 / np.asarray(model.cell.tau)))
    assert model.readout_features == "both"
    assert model.readout.weight.shape == (2, 4 * 6 + 3 * 6)
    zero = make_model(TrainConfig(hidden_size=6, gate_bias_init="zero"), 3, 2, settings)
    np.testing.assert_array_equal(np.asarray(zero.cell.bias), 0.0)
    cell = TrainConfig(cell="biophysical", wiring="random", hidden_size=6)
    assert make_model(
        cell, 3, 2, settings | dict(readout_times=1)
    ).readout_features == ("states")
    with pytest.raises(ValueError, match="--cell biophysical has no such gate"):
        TrainConfig(cell="biophysical", gate_bias_init="chrono").check()


def test_help_names_the_choices_of_options_left_to_the_data(capsys):
    """Options whose default is derived show their choices, not tyro's `None`
    choice and "(default: None)"."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # unwrap the help's lines
    assert "(default: None)" not in text and "None," not in text
    assert "--gate-bias-init {zero,chrono}" in text
    assert "validation share). (default: 20)" in text  # a default that is not None
    assert "--readout-features {states,pooled,both}" in text
    assert "--solver {" + ",".join(ltc_jax.SOLVER_NAMES) + "}" in text


def _rewrite_ts(source, target, *, start=None, step=1.0, labelled=True):
    """The toy `.ts` file `source` rewritten to `target`: timestamped at
    `start + 0, step, 2 step, ...` (unless `start` is None), and without its
    labels (declaring `@classLabel false`) unless `labelled`. **Returns:**
    `target` as a string."""
    lines = []
    for line in open(source).read().splitlines():
        if line.startswith("@classLabel") and not labelled:
            line = "@classLabel false"
        elif not line.startswith("@"):
            *channels, label = line.split(":")
            if start is not None:
                channels = [
                    ",".join(
                        f"({start + i * step!r},{v})"
                        for i, v in enumerate(c.split(","))
                    )
                    for c in channels
                ]
            line = ":".join(channels + ([label] if labelled else []))
        lines.append(line)
        if line == "@data" and start is not None:
            lines.insert(-1, "@timeStamps true")
    target.write_text("\n".join(lines) + "\n")
    return str(target)


@pytest.mark.slow
def test_cli_predicts_unlabelled_files_and_names_the_real_mismatch(tmp_path, capsys):
    train, test, out, _ = _train_toy(
        tmp_path,
        24,
        10,
        "--hidden-size",
        "4",
        "--epochs",
        "1",
        "--batch-size",
        "8",
    )
    # An unlabelled file gets the predictions of the same series labelled.
    unlabelled = _rewrite_ts(test, tmp_path / "new.ts", labelled=False)
    assert cli.main(["predict", str(out), "--data", test]) == 0
    assert cli.main(["predict", str(out), "--data", unlabelled]) == 0
    with open(out / "predictions-test.csv") as file:
        labelled_rows = list(csv.DictReader(file))
    with open(out / "predictions-new.csv") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 10 and rows == labelled_rows
    # Labels of a class the run never saw: not read by predict.
    text = open(test).read().replace("up down", "up sideways")
    (tmp_path / "unseen.ts").write_text(text.replace(":down\n", ":sideways\n"))
    assert cli.main(["predict", str(out), "--data", str(tmp_path / "unseen.ts")]) == 0
    with open(out / "predictions-unseen.csv") as file:
        assert list(csv.DictReader(file)) == labelled_rows
    # Missing regression targets: not read by predict either; evaluate names
    # the series whose target is not a number.
    text = open(test).read().replace("@classLabel true up down", "@targetLabel true")
    missing = tmp_path / "missing.ts"
    missing.write_text(text.replace(":up\n", ":?\n").replace(":down\n", ":?\n"))
    assert cli.main(["predict", str(out), "--data", str(missing)]) == 0
    with open(out / "predictions-missing.csv") as file:
        assert list(csv.DictReader(file)) == labelled_rows
    capsys.readouterr()
    assert "series 0 has the @targetLabel value '?', which is not a number" in _bad(
        tmp_path, capsys, "evaluate", str(out), "--data", str(missing)
    )
    # Where the predictions cannot go; a finished run, which nothing resumes.
    predict = ("predict", str(out), "--data", test, "--out")
    assert f"--out {tmp_path} is a folder" in _bad(
        tmp_path, capsys, *predict, str(tmp_path)
    )
    nowhere = tmp_path / "nowhere"
    assert f"no folder {nowhere}" in _bad(
        tmp_path, capsys, *predict, str(nowhere / "p.csv")
    )
    assert "the run has finished (its metrics.json is written)" in _bad(
        tmp_path, capsys, "train", "--resume", str(out)
    )
    assert "new.ts has no labels" in _bad(
        tmp_path, capsys, "evaluate", str(out), "--data", unlabelled
    )
    # A labelled file without its label column: the missing label, by line.
    header = "@dimensions 2\n@classLabel true up down\n@data\n"
    no_label = tmp_path / "no_label.ts"
    no_label.write_text(header + "1,2,3:4,5,6\n")
    assert "no_label.ts:4: missing label" in _bad(
        tmp_path, capsys, "predict", str(out), "--data", str(no_label)
    )
    # Targets given to a classifier: named as such.
    targets = tmp_path / "targets.ts"
    targets.write_text("@dimensions 2\n@targetLabel true\n@data\n1,2:3,4:0.5\n")
    assert "targets.ts holds regression targets, but" in _bad(
        tmp_path, capsys, "evaluate", str(out), "--data", str(targets)
    )
    # Three channels with a label the run never saw: the channels, first.
    three = tmp_path / "three.ts"
    three.write_text("@classLabel true sideways\n@data\n1,2:3,4:5,6:sideways\n")
    assert "three.ts:3: 3 channels, the model takes 2" in _bad(
        tmp_path, capsys, "evaluate", str(out), "--data", str(three)
    )
    # Training refuses an unlabelled file.
    message = _bad(
        tmp_path,
        capsys,
        "train",
        "--data",
        unlabelled,
        "--test-data",
        test,
        "--out",
        str(tmp_path / "never"),
    )
    assert "new.ts has no labels" in message and "training needs" in message


@pytest.mark.slow
def test_cli_trains_a_timestamped_file_at_unix_epoch_times(tmp_path, capsys):
    """A timestamped file at Unix-epoch times `t0 + 0, 1, 2, ...` trains as the
    same file untimestamped (times from 0): the same test accuracy and
    predictions, so no rounding of absolute times reaches the solve. A file
    of the same series in milliseconds is predicted with a warning naming
    both time scales."""
    options = ["--hidden-size", "4", "--epochs", "1", "--batch-size", "8"]
    train, test, plain, metrics = _train_toy(tmp_path, 16, 8, *options)
    start = 1_700_000_000
    stamped_train = _rewrite_ts(train, tmp_path / "stamped_train.ts", start=start)
    stamped_test = _rewrite_ts(test, tmp_path / "stamped_test.ts", start=start)
    data = ltc_jax.datasets.read_ts(stamped_test)
    untimed = ltc_jax.datasets.read_ts(test)
    np.testing.assert_array_equal(data.xs, untimed.xs)
    assert data.ts[0, 0] == start and data.ts[0, 1] == start + 1
    stamped = tmp_path / "stamped"
    args = ["--data", stamped_train, "--test-data", stamped_test, "--out", str(stamped)]
    assert cli.main(["train", *args, *options, "--no-progress"]) == 0
    stamped_metrics = json.loads((stamped / "metrics.json").read_text())
    assert stamped_metrics["test_accuracy"] == metrics["test_accuracy"]
    for run in (plain, stamped):
        assert cli.main(["predict", str(run), "--data", str(stamped_test)]) == 0
    assert (plain / "predictions-stamped_test.csv").read_text() == (
        stamped / "predictions-stamped_test.csv"
    ).read_text()
    # The same series in milliseconds, to a run trained in seconds: predicted,
    # with a warning that names the two time scales; seconds get none.
    millis = _rewrite_ts(test, tmp_path / "millis.ts", start=0.0, step=1000.0)
    capsys.readouterr()
    assert cli.main(["predict", str(stamped), "--data", millis]) == 0
    assert "its median interval between observations is 1000, 1,000 times the " \
        "training data's (1)" in capsys.readouterr().err  # fmt: skip
    assert cli.main(["predict", str(stamped), "--data", str(stamped_test),
                     "--out", str(tmp_path / "again.csv")]) == 0  # fmt: skip
    assert "warning" not in capsys.readouterr().err


def _plant_log(tmp_path, plant, machines, columns=None):
    """The simulated plant's samples of `machines` (names) as a historian's
    long-format CSV log, and its failure table: the files a user brings, their
    columns renamed by `columns` (default: time, tag, value, machine)."""
    import pandas as pd

    keep = np.isin(np.asarray(plant.machine_names)[plant.machine], machines)
    log = tmp_path / "log.csv"
    pd.DataFrame(
        {
            "time": plant.time[keep],
            "tag": np.asarray(plant.sensor_names)[plant.sensor[keep]],
            "value": plant.value[keep],
            "machine": np.asarray(plant.machine_names)[plant.machine[keep]],
        }
    ).rename(columns=columns or {}).to_csv(log, index=False)
    failures = tmp_path / "failures.csv"
    index = [plant.machine_names.index(m) for m in machines]
    pd.DataFrame({"machine": machines, "time": plant.failure_time[index]}).rename(
        columns=columns or {}
    ).to_csv(failures, index=False)
    return str(log), str(failures)


def test_cli_stream_trains_on_the_simulator_and_reads_a_log_as_it_cut_its_windows(
    tmp_path, capsys
):
    """`ltc-jax stream` on the simulated plant, split by machine; then its test
    machines written as a CSV log and failure table, which `evaluate` cuts on
    the run's clock and sensors to the same accuracy the job reported, and
    `predict` scores window by window (the accuracy and loss to the printed
    digits: the log's windows are the job's own)."""
    pytest.importorskip("pandas")
    out = tmp_path / "run"
    options = ["--machines", "6", "--sensors", "6", "--simulated-seconds", "600"]
    options += ["--window-seconds", "60", "--horizon-seconds", "300"]
    options += ["--epochs", "2", "--hidden-size", "4", "--seed", "3"]
    assert cli.main(["stream", *options, "--no-progress",
                     "--out", str(out)]) == 0  # fmt: skip
    metrics = json.loads((out / "metrics.json").read_text())
    stream = json.loads((out / "data.json").read_text())["settings"]["stream"]
    split = stream["machines"]
    assert sorted(sum(split.values(), [])) == [str(m) for m in range(6)]
    assert len(split["test"]) == 2 and metrics["derived"]["clock_hz"]["value"] == 1.0
    saved = json.loads((out / "config.json").read_text())
    assert saved["interpolation"] == "hold"
    # Six sensors, one to three of each of three kinds: pooled by kind (8
    # features, 4 statistics each) they would give more channels than their
    # own 15, so the model reads each sensor's, and a resumed run keeps that
    # choice; a run saved before the option (with pool_sensor_groups) reads
    # as it was trained.
    pooling = metrics["derived"]["sensor_pooling"]
    assert pooling["value"] == "none"
    assert pooling["reason"].endswith("32 channels pooled by kind, 15 each on its own")
    assert "channel_groups" not in stream
    from ltc_jax.app.job import _resumed_config
    from ltc_jax.app.runs import config_from_json

    resumed, _ = _resumed_config(app.StreamConfig(resume=str(out)))
    assert resumed.sensor_pooling == "none"
    del saved["sensor_pooling"]
    assert config_from_json(saved).sensor_pooling == "none"  # before either
    for before, now in [(False, "none"), (True, "groups")]:
        older = config_from_json(dict(saved, pool_sensor_groups=before))
        assert older.sensor_pooling == now
    # A CfC run saved with an adjoint it never used (refused since) resumes.
    cfc = config_from_json(dict(saved, model="cfc", adjoint="backsolve"))
    assert cfc.adjoint == "checkpoint"
    cfc.check()

    plant = ltc_jax.datasets.simulate_plant(6, 6, seed=3, simulated_seconds=600.0)
    # The clock's reason names the sensor that set it.
    rates = np.where(plant.is_event, np.inf, plant.sensor_rate_hz)
    slowest = plant.sensor_names[int(np.argmin(rates))]
    reason = metrics["derived"]["clock_hz"]["reason"]
    assert f"slowest continuous sensor, {slowest!r} at 1 Hz" in reason
    log, failures = _plant_log(tmp_path, plant, split["test"])
    printed = _evaluates_as_the_run_tested(
        capsys, metrics, str(out), "--data", log, "--failures", failures
    )
    test_size = metrics["dataset"]["test_size"]
    assert f"scored     {test_size} windows of 2 machines" in printed
    # The whole plant's log holds the machines it trained on: said so.
    (tmp_path / "all").mkdir()
    every = _plant_log(tmp_path / "all", plant, plant.machine_names)
    assert cli.main(["evaluate", str(out), "--data", every[0],
                     "--failures", every[1]]) == 0  # fmt: skip
    printed = capsys.readouterr()
    assert "windows of 6 machines" in printed.out
    assert "warning: --data" in printed.err
    assert "4 of its 6 machines share a name with machines the run" in printed.err
    assert cli.main(["predict", str(out), "--data", log]) == 0
    with open(out / "predictions-log.csv") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == metrics["dataset"]["test_size"]
    assert {row["machine"] for row in rows} == set(split["test"])
    classes = json.loads((out / "data.json").read_text())["class_names"]
    assert list(rows[0]) == ["index", "machine", "end_time", "prediction", *classes]
    assert {row["prediction"] for row in rows} <= set(classes)
    # The same log in date-times: the same windows, each end also in UTC.
    import pandas as pd

    frame = pd.read_csv(log)
    origin = pd.Timestamp("2026-01-05T06:00:00Z")
    stamps = origin + pd.to_timedelta(frame["time"], unit="s")
    dated = tmp_path / "dated.csv"
    frame.assign(time=stamps.map(pd.Timestamp.isoformat)).to_csv(dated, index=False)
    assert cli.main(["predict", str(out), "--data", str(dated)]) == 0
    with open(out / "predictions-dated.csv") as file:
        dated_rows = list(csv.DictReader(file))
    assert len(dated_rows) == len(rows)
    for row, plain in zip(dated_rows, rows, strict=True):
        assert (row["machine"], row["prediction"]) == (
            plain["machine"],
            plain["prediction"],
        )
        end = origin + pd.to_timedelta(float(plain["end_time"]), unit="s")
        assert abs((pd.Timestamp(row["end_utc"]) - end).total_seconds()) < 1e-5

    # A stream run's log needs its failure table to evaluate; a sensor the run
    # reads must be in the log; a simulated plant needs two machines and
    # windows that end more than the horizon before the failure.
    assert "give --failures" in _bad(tmp_path, capsys, "evaluate", str(out),
                                     "--data", log)  # fmt: skip
    # A .ts file is named as the wrong kind of file, failure table or not.
    (tmp_path / "series.ts").write_text("@classLabel true a\n@data\n1,2:a\n")
    for command in ("evaluate", "predict"):
        assert "is a run of ltc-jax stream, which reads sensor logs" in _bad(
            tmp_path, capsys, command, str(out), "--data", str(tmp_path / "series.ts")
        )
    lost = plant.sensor_names[0]
    frame[frame["tag"] != lost].to_csv(tmp_path / "short.csv", index=False)
    count = len(plant.sensor_names)
    assert f"lacks 1 of the {count} tags to read, e.g. ['{lost}']" in _bad(
        tmp_path, capsys, "predict", str(out), "--data", str(tmp_path / "short.csv")
    )
    # A fast sensor thinned to a slow one's rate gives other channels; the
    # sensor is named, with its rate against the clock's fast/slow line.
    fast = plant.sensor_names[int(np.argmax(rates))]
    thinned = frame[(frame["tag"] != fast) | (frame.index % 400 == 0)]
    thinned.to_csv(tmp_path / "thinned.csv", index=False)
    message = _bad(
        tmp_path, capsys, "predict", str(out), "--data", str(tmp_path / "thinned.csv")
    )
    assert f"sensor '{fast}' gives the channels ['last', " in message
    assert "['mean', 'std', 'diff_rms'] in the run: at 0." in message
    assert "on the other side of the clock's fast/slow line (1.5 Hz" in message
    # The sensor silent on one machine alone: a run trained without --fill
    # reads no such window, and says what to do instead of the library's
    # arguments (fill=, sensors=).
    one, two = (str(m) for m in split["test"])
    named = frame["machine"].astype(str)
    gap = tmp_path / "gap.csv"
    frame[(frame["tag"] != lost) | (named != one)].to_csv(gap, index=False)
    message = _bad(tmp_path, capsys, "predict", str(out), "--data", str(gap))
    assert f"--data {gap}: Sensor '{lost}' of machine '{one}' has no sample" in message
    assert "The run was trained without --fill" in message and "=" not in message
    # A machine too short for a window is left out, and a warning says so.
    start = frame["time"][named == two].min()
    short = tmp_path / "brief.csv"
    frame[(named != two) | (frame["time"] < start + 30.0)].to_csv(short, index=False)
    assert cli.main(["predict", str(out), "--data", str(short)]) == 0
    warned = capsys.readouterr().err
    assert f"no window for 1 of its 2 machines (e.g. ['{two}'])" in warned
    with open(out / "predictions-brief.csv") as file:
        assert {row["machine"] for row in csv.DictReader(file)} == {one}
    # A tag the run never read, too sparse to have a rate, is skipped by
    # predict; the stream job reading it names the option that gives its rate
    # (the library's message names the argument, rates_hz).
    note = pd.DataFrame({"time": [1.0], "tag": ["note"], "value": [0.0],
                         "machine": [split["test"][0]]})  # fmt: skip
    pd.concat([frame, note]).to_csv(tmp_path / "noted.csv", index=False)
    assert cli.main(["predict", str(out), "--data", str(tmp_path / "noted.csv")]) == 0
    assert (out / "predictions-noted.csv").read_text() == (
        out / "predictions-log.csv"
    ).read_text()
    assert "'note' has fewer than two samples on every machine, so its rate is " \
        "unknown; give it in --rates-hz." in _bad(
        tmp_path, capsys, "stream", "--log", str(tmp_path / "noted.csv"),
        "--failures", failures)  # fmt: skip
    assert "--log and --failures go together" in _bad(
        tmp_path, capsys, "stream", "--log", log
    )
    for option in (["--tags", "a"], ["--rates-hz", "a", "1"]):
        assert f"{option[0]} names tags of --log; give --log." in _bad(
            tmp_path, capsys, "stream", *option
        )
    assert "--machines must be at least 2" in _bad(
        tmp_path, capsys, "stream", "--machines", "1"
    )
    assert "--simulated-seconds must exceed" in _bad(
        tmp_path, capsys, "stream", "--simulated-seconds", "2000"
    )


@pytest.mark.parametrize("model", ["ltc", "cfc"])
def test_prepare_builds_what_the_cli_trains(tmp_path, model):
    """`ltc_jax.app.prepare` on the data the main job reads, standardised as
    the docs say, trains what the CLI trains: after one epoch at the same seed
    the same parameters and test accuracy (which checks the data, the model,
    the integrator, the optimiser and fit's arguments); the config and derived
    settings the run saved are prepare's (one epoch is given: the derived
    schedule of 24 series would be 1,334)."""
    options = ("--hidden-size", "4", "--epochs", "1", "--model", model)
    train_file, test_file, out, metrics = _train_toy(tmp_path, 24, 10, *options)
    train = ltc_jax.datasets.read_ts(train_file)
    test = ltc_jax.datasets.read_ts(test_file, class_names=train.class_names)
    train, test = ltc_jax.datasets.standardize(train, test)

    config = app.TrainConfig(hidden_size=4, epochs=1, model=model)
    job = app.prepare(config, train, others=(test,))
    saved = json.loads((out / "config.json").read_text())
    share = metrics["derived"]["validation_fraction"]  # the job's split, not prepare's
    derived = json.loads(json.dumps(job.derived))  # tuples as JSON saves them
    assert saved.pop("derived") == derived | {"validation_fraction": share}
    ours = dataclasses.asdict(job.config)
    for name in ("data", "test_data", "out", "progress"):  # where, not what
        ours.pop(name), saved.pop(name)
    assert ours == saved
    assert job.batch_size == 8 and job.steps_per_epoch == 3 and job.epochs == 1
    assert job.batch_size == metrics["derived"]["batch_size"]["value"]

    trained, _ = ltc_jax.fit(
        job.model,
        train,
        integrator=job.integrator,
        optimizer=job.optimizer,
        epochs=job.epochs,
        batch_size=job.batch_size,
        seed=job.seed,
        path=job.path,
    )
    assert ltc_jax.training.parameter_digest(trained) == metrics["parameters_sha256"]
    result = ltc_jax.evaluate(trained, test, integrator=job.final_integrator)
    assert result["accuracy"] == metrics["test_accuracy"]


@pytest.mark.filterwarnings("ignore:Training did not lower the loss")
def test_folds_choose_the_epochs_the_run_trains_for(tmp_path, capsys):
    """`--folds 3`: the epochs the run trains for are those of the lowest mean
    validation loss, recomputed here from three fits of the job's own parts on
    folds dealt by hand (each class's series shuffled by the seed and dealt in
    turn); the final parameters are those of the job prepared for that many
    epochs, without folds; and resuming the run does not fold again."""
    options = ("--hidden-size", "4", "--epochs", "3", "--patience", "1")
    start = time.perf_counter()
    train_file, test_file, out, metrics = _train_toy(
        tmp_path, 24, 10, *options, "--folds", "3"
    )
    elapsed = time.perf_counter() - start
    printed = capsys.readouterr().out
    train = ltc_jax.datasets.read_ts(train_file)
    test = ltc_jax.datasets.read_ts(test_file, class_names=train.class_names)
    train, test = ltc_jax.datasets.standardize(train, test)
    config = app.TrainConfig(hidden_size=4, epochs=3, patience=1)
    job = app.prepare(config, train, others=(test,))

    rng = np.random.default_rng(config.seed)
    fold_of, dealt = np.empty(len(train), int), 0
    for c in range(train.num_classes):
        members = rng.permutation(np.flatnonzero(train.labels == c))
        fold_of[members] = (dealt + np.arange(len(members))) % 3
        dealt += len(members)
    losses = []
    for k in range(3):
        rest, held = (
            train.take(np.flatnonzero(f)) for f in (fold_of != k, fold_of == k)
        )
        _, history = ltc_jax.fit(
            job.model,
            rest,
            integrator=job.integrator,
            optimizer=ltc_jax.training.make_optimizer(
                job.config.learning_rate, 3 * -(-len(rest) // job.batch_size)
            ),
            epochs=3,
            batch_size=job.batch_size,
            seed=config.seed,
            validation=held,
            patience=1,
            progress=ltc_jax.training.NoFitProgress(),
        )
        losses.append([record["validation_loss"] for record in history])
    common = min(map(len, losses))
    mean = np.mean([row[:common] for row in losses], axis=0)
    epochs = int(np.argmin(mean)) + 1
    saved = json.loads((out / "config.json").read_text())
    assert saved["epochs"] == epochs and saved["folds"] == 3
    reason = saved["derived"]["epochs"]["reason"]
    assert f"lowest mean validation loss ({mean[epochs - 1]:.4g}) of 3 folds" in reason
    assert saved["derived"]["validation_fraction"]["value"] == 0.0
    # The folds' wall time is recorded beside the run's own, which excludes it.
    folds_seconds = saved["derived"]["epochs"]["seconds"]
    assert metrics["folds_seconds"] == folds_seconds > 0
    # Disjoint parts of the command's own wall time: neither counts the other.
    assert metrics["train_seconds"] + folds_seconds < elapsed
    line = (
        f"train wall time    {metrics['train_seconds']:.1f} s (after "
        f"{folds_seconds:.1f} s of folds choosing epochs)"
    )
    assert line in printed

    final = app.prepare(dataclasses.replace(config, epochs=epochs), train, (test,))
    trained, _ = ltc_jax.fit(
        final.model,
        train,
        integrator=final.integrator,
        optimizer=final.optimizer,
        epochs=epochs,
        batch_size=final.batch_size,
        seed=config.seed,
        progress=ltc_jax.training.NoFitProgress(),
    )
    assert ltc_jax.training.parameter_digest(trained) == metrics["parameters_sha256"]

    from ltc_jax.app.job import _resumed_config

    resumed, _ = _resumed_config(app.TrainConfig(resume=str(out)))
    assert resumed.folds is None and resumed.epochs == epochs


def test_ctrl_c_in_the_folds_writes_nothing_and_says_so(tmp_path, capsys, monkeypatch):
    """Ctrl-C while `--folds` trains its folds (here the first fold's `fit`
    raises it): exit status 130, a line saying nothing was written, and no run
    folder; Ctrl-C in the run's own training names the folder to resume."""
    train = toy_ts_file(tmp_path / "train.ts", 12, 0)
    test = toy_ts_file(tmp_path / "test.ts", 4, 1)
    out = tmp_path / "run"
    args = ["train", "--data", train, "--test-data", test, "--out", str(out)]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ltc_jax, "fit", interrupted)
    assert cli.main([*args, "--no-progress", "--folds", "2"]) == 130
    said = capsys.readouterr().err
    assert "interrupted before training began; nothing was written" in said
    assert not out.exists()
    assert cli.main([*args, "--no-progress"]) == 130
    assert f"--resume {out}" in capsys.readouterr().err and out.is_dir()


def test_one_series_per_class_trains_without_a_validation_share(tmp_path):
    """Two training series, one per class: nothing can be held out, so the
    derived share is 0 with that reason (it was an error, "too small to hold
    any out", though no share was wanted)."""
    _, _, _, metrics = _train_toy(tmp_path, 2, 4, "--hidden-size", "4", "--epochs", "1")
    share = metrics["derived"]["validation_fraction"]
    assert share["value"] == 0.0 and "would hold out 0" in share["reason"]


def test_warnings_print_as_one_line_of_the_command(tmp_path, capsys):
    """A learning rate too small to learn: the learning check's warning is one
    line, `ltc-jax: warning: ...`, without Python's file and source line."""
    _train_toy(
        tmp_path,
        8,
        4,
        "--hidden-size",
        "4",
        "--epochs",
        "2",
        "--learning-rate",
        "1e-12",
    )
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "did not lower the loss" in line]
    assert lines and all(line.startswith("ltc-jax: warning: ") for line in lines)
    assert "UserWarning" not in err and "ltc_jax.fit(" not in err


def test_a_channel_a_series_never_observes_takes_the_fill_asked_for(tmp_path, capsys):
    """A training series whose second channel is all missing: refused, naming
    it and the option; with `--empty-channel-fill 0` (the training mean) the run
    trains, and evaluates its own files; the stream job refuses the option."""
    train = toy_ts_file(tmp_path / "train.ts", 12, 0)
    lines = open(train).read().splitlines()
    first, second, label = lines[4].split(":")
    lines[4] = ":".join([first, ",".join("?" * len(second.split(","))), label])
    (tmp_path / "gap.ts").write_text("\n".join(lines) + "\n")
    test = toy_ts_file(tmp_path / "test.ts", 4, 1)
    out = tmp_path / "run"
    args = ["train", "--data", str(tmp_path / "gap.ts"), "--test-data", test]
    assert cli.main([*args, "--out", str(out), "--no-progress"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        "gap.ts: No observed value (all NaN) in channel 1 of sequence 0; give" in last
    )
    assert "--empty-channel-fill (0: the channel's training mean)" in last
    assert last.startswith("ltc-jax: error: ") and not out.exists()
    options = ("--hidden-size", "4", "--epochs", "1", "--empty-channel-fill", "0")
    assert cli.main([*args, "--out", str(out), "--no-progress", *options]) == 0
    assert cli.main(["evaluate", str(out), "--data", str(tmp_path / "gap.ts")]) == 0
    # A run trained without the fill, given that file: the series, the
    # channel, and the training option that would give it a value.
    plain = tmp_path / "plain"
    args = ["train", "--data", train, "--test-data", test, "--out", str(plain)]
    assert cli.main([*args, "--no-progress", *options[:4]]) == 0
    capsys.readouterr()
    for command in ("evaluate", "predict"):
        message = _bad(
            tmp_path, capsys, command, str(plain), "--data", str(tmp_path / "gap.ts")
        )
        assert (
            "gap.ts: No observed value (all NaN) in channel 1 of sequence 0; "
            in message
        )
        assert "trained without --empty-channel-fill" in message
    assert "ltc-jax stream gives a channel a window never observes 0" in _bad(
        tmp_path, capsys, "stream", "--empty-channel-fill", "1"
    )


def test_a_model_worse_than_the_trivial_baseline_is_named():
    """The job's warning: an accuracy no higher, or an MSE no lower, than the
    trivial baseline's is named with both figures (a model that answers the
    commonest class scores it exactly); a better one is not."""
    from ltc_jax.app.job import _check_beats

    classes = dict(name="the training set's commonest class, 'a'", test_accuracy=0.6)
    with pytest.warns(UserWarning, match=r"accuracy, 0.55, is no better than always"):
        _check_beats(dict(test_accuracy=0.55), classes)
    with pytest.warns(UserWarning, match=r"accuracy, 0.6, is no better"):
        _check_beats(dict(test_accuracy=0.6), classes)
    mean = dict(name="the training targets' mean", test_loss=0.09)
    with pytest.warns(UserWarning, match=r"MSE, 0.21.*targets' mean, 0.09: what"):
        _check_beats(dict(test_loss=0.21), mean)
    with pytest.warns(UserWarning) as caught:  # folds chose the epochs already
        _check_beats(dict(test_loss=0.21), mean, suggest_folds=False)
    assert "--folds" not in str(caught[0].message)
    with pytest.warns(UserWarning, match=r"set by hand \(--epochs 2\): too few"):
        _check_beats(dict(test_loss=0.21), mean, epochs=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check_beats(dict(test_accuracy=0.65), classes)
        _check_beats(dict(test_loss=0.05), mean)


def test_the_baseline_check_knows_whether_epochs_were_given(tmp_path, monkeypatch):
    """The job resolves its epochs before it checks the baseline: the check is
    told the epochs the command line gave (2), or None where the data chose
    them, not the resolved count."""
    import dataclasses

    from ltc_jax.app import job

    told = []
    monkeypatch.setattr(job, "_check_beats", lambda *args: told.append(args[3]))
    real = job.prepare

    def one_epoch_where_derived(config, *args, **kwargs):  # a quick run
        return real(
            dataclasses.replace(config, epochs=config.epochs or 1), *args, **kwargs
        )

    monkeypatch.setattr(job, "prepare", one_epoch_where_derived)
    _train_toy(tmp_path, 24, 10, *SMALL_RUN)
    (tmp_path / "again").mkdir()
    _train_toy(tmp_path / "again", 24, 10, "--hidden-size", "4", "--batch-size", "8")
    assert told == [2, None]


def test_training_series_of_one_class_are_refused(tmp_path, capsys):
    """A training file whose series are all "up" (the file declares "down"
    too): refused before anything is written, naming the class."""
    train = toy_ts_file(tmp_path / "train.ts", 6, 0)
    lines = [line for line in open(train).read().splitlines() if ":down" not in line]
    (tmp_path / "up.ts").write_text("\n".join(lines) + "\n")
    test = toy_ts_file(tmp_path / "test.ts", 4, 1)
    args = ["train", "--data", str(tmp_path / "up.ts"), "--test-data", test]
    assert "Every training series is of one class, 'up'" in _bad(
        tmp_path, capsys, *args, "--out", str(tmp_path / "run")
    )


def test_folds_are_refused_where_they_cannot_choose(tmp_path, capsys):
    """Fewer than two folds, folds beside a validation share, and folds of a
    stream's overlapping windows are refused by name."""
    for options, message in [
        (("train", "--folds", "1"), "--folds must be at least 2"),
        (
            ("train", "--folds", "3", "--validation-fraction", "0.2"),
            "drop --validation-fraction 0.2 or --folds",
        ),
        (("stream", "--folds", "3"), "holds out whole machines instead"),
    ]:
        assert message in _bad(tmp_path, capsys, *options)
    # Devices the machine lacks are named before any fold trains.
    train = toy_ts_file(tmp_path / "train.ts", 12, 0)
    test = toy_ts_file(tmp_path / "test.ts", 4, 1)
    args = ["train", "--data", train, "--test-data", test, "--folds", "2"]
    devices = str(len(jax.devices()) + 1)
    assert cli.main([*args, "--devices", devices, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"--devices {devices}: there are" in err and "fold 1 of 2" not in err


def test_a_resumed_run_is_checked_with_its_folder_as_out(tmp_path):
    """A run saved in the default folder (no --out), resumed on several
    processes: the resumed options name its folder as --out, so the check that
    a multi-process run has --out or --resume passes, as it did on the command
    line."""
    from ltc_jax.app.job import _resumed_config

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(dataclasses.asdict(app.TrainConfig())))
    config = app.TrainConfig(
        resume=str(run), coordinator="localhost:1234", num_processes=2, process_id=0
    )
    config.check()
    resumed, _ = _resumed_config(config)
    assert resumed.out == str(run) and resumed.resume is None
    assert resumed.coordinator == "localhost:1234" and resumed.num_processes == 2
    resumed.check()


def test_a_run_resumes_from_any_folder_and_knows_its_files_by_any_path(
    tmp_path, monkeypatch
):
    """A run started with relative paths records them as absolute ones, so it
    resumes from another folder, where its files may be named by another
    spelling of their paths. A run recorded with relative paths (before this),
    resumed from elsewhere, names the file not found and where to resume."""
    from ltc_jax.app.job import _resumed_config

    start = tmp_path / "start"
    start.mkdir()
    toy_ts_file(start / "train.ts", 8, 0)
    toy_ts_file(start / "test.ts", 4, 1)
    monkeypatch.chdir(start)
    args = ["train", "--data", "train.ts", "--test-data", "test.ts", "--out", "run"]
    assert cli.main([*args, "--no-progress", *SMALL_RUN]) == 0
    saved = json.loads((start / "run" / "config.json").read_text())
    assert saved["data"] == str(start / "train.ts")
    assert saved["test_data"] == str(start / "test.ts")
    monkeypatch.chdir(tmp_path)
    again = app.TrainConfig(resume="start/run", data="start/../start/train.ts")
    resumed, _ = _resumed_config(again)
    assert resumed.data == str(start / "train.ts")
    (tmp_path / "link.ts").symlink_to(start / "train.ts")  # the same file
    _resumed_config(app.TrainConfig(resume="start/run", data="link.ts"))
    toy_ts_file(tmp_path / "other.ts", 8, 0)  # the same bytes, another file
    with pytest.raises(ValueError, match="these differ: --data 'other.ts'"):
        _resumed_config(app.TrainConfig(resume="start/run", data="other.ts"))
    saved["data"] = "train.ts"  # as recorded before
    (start / "run" / "config.json").write_text(json.dumps(saved))
    with pytest.raises(FileNotFoundError, match="its --data 'train.ts' is not found"):
        _resumed_config(app.TrainConfig(resume="start/run"))


def test_derived_settings_print_without_float_noise():
    """A spacing read from float64 times prints as the number it rounds to
    (6 significant digits), whole floats keep their point, and tuples and
    lists are printed element by element."""
    from ltc_jax.app.job import _shown

    assert _shown(0.6015 + 1.5e-15) == "0.6015"
    assert _shown(0.6015000343322754) == "0.6015"  # a float32 spacing
    assert _shown((0.1, 25.0)) == "(0.1, 25.0)" and _shown([1e-7, 3]) == "[1e-07, 3]"
    assert _shown(0.123456789) == "0.123457" and _shown("tsit5") == "tsit5"


def test_library_messages_name_the_commands_options():
    """The library's messages name its arguments; the command line's name the
    options that give them, with a value after a space, and leave paths,
    quoted names, attributes, plain words and names no option gives as they
    are. `sensors=` is --tags where a log is read (--sensors is the simulated
    plant's count)."""
    from ltc_jax.app.cli import _in_options
    from ltc_jax.app.config import StreamConfig, TrainConfig

    log = StreamConfig(log="a.csv", failures="f.csv")
    cases = {
        "give it in rates_hz.": "give it in --rates-hz.",
        "needs horizon_seconds=60.0 after": "needs --horizon-seconds 60.0 after",
        "give fill= to fill the window": "give --fill to fill the window",
        "leave it out (sensors=), or": "leave it out (--tags), or",
        "the sensors and tags of fill": "the sensors and tags of fill",
        "runs/window_seconds/log.csv: window_seconds.csv": (
            "runs/window_seconds/log.csv: window_seconds.csv"
        ),
        "('jax_enable_x64', True) data.class_names make_input_path": (
            "('jax_enable_x64', True) data.class_names make_input_path"
        ),
        "tau_min=0.1, tau_init=(0.1, 2.0)": "--tau-min 0.1, --tau-init (0.1, 2.0)",
    }
    for message, expected in cases.items():
        assert _in_options(message, log) == expected
    assert _in_options("(sensors=)", StreamConfig()) == "(sensors=)"  # no --log
    assert _in_options("got batch_size=6", TrainConfig()) == "got --batch-size 6"
    assert _in_options("got batch_size=6", None) == "got batch_size=6"  # unparsed


def test_output_to_a_reader_that_left_ends_quietly(monkeypatch, capsys):
    """`ltc-jax stream --help | head`: the help's writes fail on the closed
    pipe; the command stops with SIGPIPE's status and prints no error. A
    broken pipe elsewhere, with standard output open, is reported."""
    import io

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            self.write("")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert cli.main(["stream", "--help"]) == 141
    assert capsys.readouterr().err == ""
    # Another pipe's failure, with standard output open, is an error.
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(cli, "_run", lambda config, args: ClosedPipe().write(""))
    assert cli.main(["stream"]) == 2
    assert "Broken pipe" in capsys.readouterr().err


def test_cli_stream_pools_sensor_groups_and_reads_a_log_as_it_pooled(tmp_path, capsys):
    """`--sensor-pooling groups`: the model reads each sensor group's features
    pooled across its sensors (4 groups' 11 features, 4 statistics each),
    though at 10 sensors that is more channels than their own;
    `evaluate` pools the test machines' log with the run's channel statistics
    and reads them through the run's frame encoder (`--frame-encoder mlp`)
    to the job's own test accuracy and loss. A log's tags take their groups
    from `--sensor-groups`, which implies pooling by them: the log's run reads
    the same channels as the plant's."""
    pytest.importorskip("pandas")
    out = tmp_path / "run"
    options = ["--machines", "6", "--sensors", "10", "--simulated-seconds", "600"]
    options += ["--window-seconds", "60", "--horizon-seconds", "300"]
    options += ["--epochs", "2", "--hidden-size", "4", "--seed", "3"]
    assert cli.main(["stream", *options, "--sensor-pooling", "groups", "--no-progress",
                     "--frame-encoder", "mlp", "--out", str(out)]) == 0  # fmt: skip
    metrics = json.loads((out / "metrics.json").read_text())
    data = json.loads((out / "data.json").read_text())
    from ltc_jax.app.runs import load_run

    assert isinstance(load_run(str(out))[1].encoder, eqx.nn.MLP)
    stream = data["settings"]["stream"]
    assert data["input_channels"] == (3 + 3 + 2 + 3) * 4
    assert len(stream["channel_mean"]) == len(stream["channel_names"]) == 25
    plant = ltc_jax.datasets.simulate_plant(6, 10, seed=3, simulated_seconds=600.0)
    log, failures = _plant_log(tmp_path, plant, stream["machines"]["test"])
    _evaluates_as_the_run_tested(
        capsys, metrics, str(out), "--data", log, "--failures", failures
    )
    plain_log = (log, failures)  # its columns named as read_sensor_log's default

    # The whole plant as a log, its kinds given by --sensor-groups, its time
    # and machine columns named otherwise (--log-columns).
    renamed = dict(time="timestamp", machine="asset")
    (tmp_path / "whole").mkdir()
    whole, whole_failures = _plant_log(
        tmp_path / "whole", plant, plant.machine_names, renamed
    )
    kinds, events = [], []
    for name, group in zip(plant.sensor_names, plant.sensor_group, strict=True):
        if group == "alarm":
            events.append(name)
        else:
            kinds += [name, group]
    logged = tmp_path / "logged"
    from_log = ["--log", whole, "--failures", whole_failures, "--event-tags", *events]
    assert "no column 'time' (--log-columns time NAME names another)" in _bad(
        tmp_path, capsys, "stream", *from_log
    )
    from_log += ["--log-columns", "time", "timestamp", "machine", "asset"]
    assert cli.main(["stream", *from_log, "--sensor-groups", *kinds,
                     "--window-seconds", "60",
                     "--horizon-seconds", "300", "--epochs", "1",
                     "--hidden-size", "4", "--seed", "3", "--no-progress",
                     "--out", str(logged)]) == 0  # fmt: skip
    # Its alarms are in group "event", not "alarm": the same 44 channels.
    assert json.loads((logged / "data.json").read_text())["input_channels"] == 44
    # Its groups' sizes are printed and recorded, counted from the plant.
    sizes = {g: plant.sensor_group.count(g) for g in kinds[1::2]}
    sizes["event"] = len(events)  # the log's event tags are one group
    derived = json.loads((logged / "config.json").read_text())["derived"]
    assert derived["pooled_groups"]["value"] == sizes
    said = capsys.readouterr().err
    assert "pooled_groups = {" in said
    assert all(f"'{group}': {n}" in said for group, n in sizes.items())
    # Evaluate reads a new log by the run's column names.
    (tmp_path / "renamed").mkdir()
    log, failures = _plant_log(
        tmp_path / "renamed", plant, stream["machines"]["test"], renamed
    )
    _evaluates_as_the_run_tested(
        capsys,
        json.loads((logged / "metrics.json").read_text()),
        str(logged),
        "--data",
        log,
        "--failures",
        failures,
    )
    # A log whose columns are not the run's is named as such: evaluate has no
    # option to rename them.
    assert (
        "no column 'timestamp', which the run reads its times from: rename the "
        "file's column"
    ) in _bad(
        tmp_path, capsys, "evaluate", str(logged), "--data", plain_log[0],
        "--failures", plain_log[1],
    )  # fmt: skip
    # It resumes: the groups left off the command line are the saved ones.
    from ltc_jax.app.job import _resumed_config

    resumed, _ = _resumed_config(app.StreamConfig(resume=str(logged)))
    assert resumed.sensor_groups == dict(zip(kinds[::2], kinds[1::2], strict=True))
    assert resumed.sensor_pooling == "groups"  # as the groups implied
    with pytest.raises(ValueError, match="these differ: --sensor-groups"):
        _resumed_config(app.StreamConfig(resume=str(logged), sensor_groups={"a": "b"}))
    capsys.readouterr()
    assert "--sensor-groups names tags of --log; give --log." in _bad(
        tmp_path, capsys, "stream", "--sensor-groups", "a", "b"
    )
    assert "--log-columns renames the columns ['time', 'tag'" in _bad(
        tmp_path, capsys, "stream", *from_log, "--log-columns", "stamp", "t"
    )
    assert "--sensor-groups[" in _bad(
        tmp_path, capsys, "stream", *from_log, "--sensor-groups", events[0], "alarm"
    )
    assert "--sensor-pooling none pools none: give one of them" in _bad(
        tmp_path, capsys, "stream", *from_log, "--sensor-groups", *kinds,
        "--sensor-pooling", "none"
    )  # fmt: skip


def test_options_of_tags_left_off_a_resume_are_the_saved_ones(tmp_path):
    """A stream run given --rates-hz resumes without it: an option whose default
    is made by a factory (an empty dict) and was left off the command line is
    not a change to the saved run; given with another value, it is."""
    from ltc_jax.app.job import _resumed_config

    run = tmp_path / "run"
    run.mkdir()
    for name in ("log.csv", "failures.csv"):
        (tmp_path / name).write_text("")
    saved = app.StreamConfig(
        log=str(tmp_path / "log.csv"),
        failures=str(tmp_path / "failures.csv"),
        rates_hz={"TI-101": 2.0},
    )
    (run / "config.json").write_text(json.dumps(dataclasses.asdict(saved)))
    resumed, _ = _resumed_config(app.StreamConfig(resume=str(run)))
    assert resumed.rates_hz == {"TI-101": 2.0}
    with pytest.raises(ValueError, match=r"these differ: --rates-hz \{'TI-101': 1.0\}"):
        _resumed_config(app.StreamConfig(resume=str(run), rates_hz={"TI-101": 1.0}))
