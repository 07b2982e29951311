"""Failure handling, checkpoints and exact resume, precision switch."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from helpers import max_relative_error, quiet_fit, toy_ts_file

import ltc_jax
from ltc_jax._batch import epoch_order
from ltc_jax.app.runs import config_from_json
from ltc_jax.app.settings import make_model
from ltc_jax.datasets import SequenceDataset


def _dataset(lengths, seed=0, channels=2):
    rng = np.random.default_rng(seed)
    times = max(lengths)
    n = len(lengths)
    return SequenceDataset(
        ts=np.broadcast_to(np.arange(times, dtype=float), (n, times)).copy(),
        xs=rng.normal(size=(n, times, channels)),
        lengths=np.asarray(lengths, dtype=np.int32),
        labels=rng.integers(0, 2, n).astype(np.int32),
        class_names=("a", "b"),
    )


def _fit(data, integrator, **kwargs):
    model = ltc_jax.LTC(2, 4, 2, key=jr_key(0))
    optimizer = ltc_jax.training.make_optimizer(1e-2, total_steps=100)
    kwargs = dict(batch_size=1) | kwargs
    return quiet_fit(model, data, integrator, optimizer=optimizer, **kwargs)


def jr_key(seed):
    import jax.random as jr

    return jr.PRNGKey(seed)


# With linear inputs and adaptive steps, every observation is a jump time, so a
# sequence of L observations needs at least L - 1 steps: 40 observations cannot fit
# in max_steps=20, while 3 can.
ADAPTIVE_20 = dict(rtol=1e-3, atol=1e-4, max_steps=20)


def test_solver_failure_is_raised_with_batch_time_and_steps():
    data = _dataset([3, 40, 3])
    integrator = ltc_jax.make_integrator("tsit5", **ADAPTIVE_20)
    with pytest.raises(ltc_jax.SolverFailureError) as info:
        _fit(data, integrator, seed=3)
    message = str(info.value)
    order = epoch_order(3, 0, 3)
    failing_batch = int(np.flatnonzero(order == 1)[0])
    assert f"epoch 0, batch {failing_batch}" in message
    assert "maximum number of solver steps" in message
    assert "After 20 steps (max_steps=20)" in message
    assert "of its 39 time units" in message


def test_evaluate_names_a_failed_solve_as_fit_does():
    """A solve that runs out of max_steps in evaluation is the same
    SolverFailureError as in training, naming the batch and how far the
    longest sequence got, not equinox's runtime error and its trace."""
    data = dataclasses.replace(_dataset([3, 3, 40, 3]), name="toy")
    model = ltc_jax.LTC(2, 4, 2, key=jr_key(0))
    integrator = ltc_jax.make_integrator("tsit5", **ADAPTIVE_20)
    with pytest.raises(ltc_jax.SolverFailureError) as info:
        ltc_jax.evaluate(model, data, integrator=integrator, batch_size=2)
    message = str(info.value)
    assert message.startswith("The solve failed in evaluation on toy, batch 1:")
    assert "After 20 steps (max_steps=20)" in message
    assert "of its 39 time units" in message


def test_skip_drops_failed_updates_and_stops_after_k_in_a_row():
    data = _dataset([3, 40, 3, 40, 3])
    integrator = ltc_jax.make_integrator("tsit5", **ADAPTIVE_20)
    skip = ltc_jax.training.SkipFailures()
    model, history = _fit(data, integrator, on_failure=skip, epochs=2)
    assert [h["failures"] for h in history] == [2, 2]
    assert np.isfinite(history[-1]["loss"])
    with pytest.raises(ltc_jax.TrainingFailedError, match="3 failed steps in a row"):
        _fit(
            _dataset([40] * 5),
            integrator,
            on_failure=ltc_jax.training.SkipFailures(max_consecutive=3),
        )


@pytest.mark.parametrize("every", [1, None])
def test_failed_steps_leave_the_last_good_checkpoints(tmp_path, every):
    """Resumed with a `max_steps` no solve fits in, every step fails and is
    skipped until the run stops: nothing is checkpointed after a failed step,
    at a step (`checkpoint_every=1`) or at the epochs' ends those failures
    cross (epoch-only saves, batches of 2), so the two checkpoints kept from
    the good run stay."""
    data = _dataset([3, 3, 3, 3])
    good = ltc_jax.make_integrator("heun", dt0=0.125, max_steps=64)
    batch_size, epochs = (1, 1) if every else (2, 2)
    options = dict(checkpoint_dir=tmp_path, checkpoint_every=every)
    _fit(data, good, epochs=epochs, batch_size=batch_size, **options)
    names = lambda: [  # noqa: E731
        os.path.basename(p) for p in ltc_jax.training.list_checkpoints(tmp_path)
    ]
    kept = ["step-00000003" if every else "step-00000002", "step-00000004"]
    assert names() == kept
    short = ltc_jax.make_integrator("heun", dt0=0.125, max_steps=2)
    with pytest.raises(ltc_jax.TrainingFailedError, match="5 failed steps in a row"):
        _fit(
            data,
            short,
            epochs=epochs + 3,
            batch_size=batch_size,
            resume=True,
            on_failure=ltc_jax.training.SkipFailures(max_consecutive=5),
            **options,
        )
    assert names() == kept


def test_resume_within_an_epoch_needs_the_runs_batching(tmp_path):
    """A checkpoint after batch 3 of 4 places the run in an epoch's order of 4
    sequences in batches of 1: resuming there with batches of 2, or 5
    sequences, would skip or repeat sequences, and is refused naming both
    values; at an epoch's end another batch size continues."""
    data = _dataset([3, 3, 3, 3])
    integrator = ltc_jax.make_integrator("heun", dt0=0.125, max_steps=64)
    options = dict(checkpoint_dir=tmp_path, checkpoint_every=1)
    _fit(data, integrator, **options)
    end_of_epoch = ltc_jax.training.list_checkpoints(tmp_path)[-1]
    os.rename(end_of_epoch, str(end_of_epoch) + ".tmp")  # as if killed before it
    for changed, named in (
        (dict(batch_size=2), "batch_size 1 there, 2 now"),
        (dict(data=_dataset([3] * 5)), "train_size 4 there, 5 now"),
    ):
        arguments = dict(data=data, batch_size=1) | changed
        with pytest.raises(ValueError, match=f"after batch 3 of epoch 0 .*{named}"):
            _fit(arguments.pop("data"), integrator, resume=True, **arguments, **options)
    _, history = _fit(data, integrator, resume=True, **options)  # the same: goes on
    assert len(history) == 1
    _, history = _fit(data, integrator, resume=True, epochs=2, batch_size=2, **options)
    assert len(history) == 2  # from the end of epoch 0, in batches of 2
    with pytest.warns(UserWarning, match="trained 2 epochs, more than epochs=1"):
        _, history = _fit(data, integrator, resume=True, batch_size=2, **options)
    assert len(history) == 2


def test_warns_when_a_solve_nears_max_steps():
    data = _dataset([20, 20])
    loose = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4)
    model = ltc_jax.LTC(2, 4, 2, key=jr_key(0))  # as _fit builds it
    path = ltc_jax.make_input_path(data)
    steps = int(model.solve(path, integrator=loose).stats["num_steps"])
    integrator = ltc_jax.make_integrator(
        "tsit5", rtol=1e-3, atol=1e-4, max_steps=steps + 1
    )
    with pytest.warns(
        UserWarning, match=f"took {steps} of max_steps={steps + 1} steps"
    ):
        _, history = _fit(data, integrator, batch_size=2)
    assert history[0]["max_steps_used"] == steps / (steps + 1)


def test_resume_is_bit_exact_and_falls_back_past_damaged_checkpoints(tmp_path):
    data = _dataset([5, 9, 7, 8, 6, 9, 4], seed=1)
    integrator = ltc_jax.make_integrator("heun", dt0=0.125, max_steps=64)
    kwargs = dict(epochs=3, batch_size=2, seed=4)
    reference, reference_history = _fit(data, integrator, **kwargs)
    directory = tmp_path / "checkpoints"
    _fit(data, integrator, checkpoint_dir=directory, checkpoint_every=3, **kwargs)
    # Pretend the run died after step 9 of 12: drop the newest checkpoints, and
    # corrupt the one after, so resuming must fall back to step 6.
    kept = ltc_jax.training.list_checkpoints(directory)
    assert [os.path.basename(p) for p in kept] == ["step-00000009", "step-00000012"]
    for path in kept[1:]:
        os.rename(path, path + ".tmp")  # incomplete saves never count
    with open(os.path.join(kept[0], "state.eqx"), "r+b") as file:
        file.seek(10)
        file.write(b"garbage")
    # Build an older good checkpoint by rerunning to step 6.
    _fit(
        data,
        integrator,
        checkpoint_dir=tmp_path / "six",
        checkpoint_every=3,
        epochs=2,
        batch_size=2,
        seed=4,
    )
    os.rename(
        ltc_jax.training.list_checkpoints(tmp_path / "six")[0],
        directory / "step-00000006",
    )
    with pytest.warns(UserWarning, match="checksum mismatch"):
        resumed, history = _fit(
            data, integrator, checkpoint_dir=directory, resume=True, **kwargs
        )
    assert ltc_jax.training.parameter_digest(
        resumed
    ) == ltc_jax.training.parameter_digest(reference)
    assert [h["loss"] for h in history] == [h["loss"] for h in reference_history]


def test_resume_without_usable_checkpoint(tmp_path):
    integrator = ltc_jax.make_integrator("heun", dt0=0.125, max_steps=64)
    (tmp_path / "step-00000001").mkdir()
    with pytest.raises(ltc_jax.CheckpointError, match="No usable checkpoint"):
        _fit(_dataset([3, 4]), integrator, checkpoint_dir=tmp_path, resume=True)


def test_same_seed_same_metrics():
    data = _dataset([5, 9, 7, 8], seed=2)
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4)
    first, history = _fit(data, integrator, epochs=2, batch_size=2, seed=7)
    second, history2 = _fit(data, integrator, epochs=2, batch_size=2, seed=7)

    def without_timing(records):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in records]

    assert without_timing(history) == without_timing(history2)
    assert max_relative_error(first, second) == 0.0


def _train_command(*args):
    return [
        sys.executable,
        "-m",
        "ltc_jax",
        "train",
        "--no-progress",
        *args,
    ]


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(tmp_path):
    """SIGKILL a training process mid-run, resume it, and compare with a run that
    was never interrupted: same metrics, bit-identical parameters (CPU)."""
    train = toy_ts_file(tmp_path / "train.ts", 64, 0)
    test = toy_ts_file(tmp_path / "test.ts", 16, 1)
    common = [
        "--data",
        train,
        "--test-data",
        test,
        "--hidden-size",
        "8",
        "--epochs",
        "40",
        "--batch-size",
        "8",
        "--checkpoint-every",
        "4",
    ]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    subprocess.run(
        _train_command(*common, "--out", str(tmp_path / "whole")),
        check=True,
        env=env,
        capture_output=True,
    )
    victim = subprocess.Popen(
        _train_command(*common, "--out", str(tmp_path / "killed")),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    checkpoints = tmp_path / "killed" / "checkpoints"
    deadline = time.time() + 300
    while (
        time.time() < deadline
        and len(ltc_jax.training.list_checkpoints(checkpoints)) < 2
    ):
        time.sleep(0.2)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    assert not (tmp_path / "killed" / "metrics.json").exists()  # really mid-run
    subprocess.run(
        _train_command("--resume", str(tmp_path / "killed")),
        check=True,
        env=env,
        capture_output=True,
    )
    whole = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    resumed = json.loads((tmp_path / "killed" / "metrics.json").read_text())
    assert resumed["resumed"] and not whole["resumed"]
    assert resumed["parameters_sha256"] == whole["parameters_sha256"]
    for key in ("test_accuracy", "test_loss"):
        assert resumed[key] == whole[key]
    # The resumed run says why it has its solver, as the whole one does.
    assert resumed["derived"] == whole["derived"]
    assert resumed["derived"]["solver"]["value"] == "fused"


def test_x64_switch(tmp_path):
    train = toy_ts_file(tmp_path / "train.ts", 8, 0)
    test = toy_ts_file(tmp_path / "test.ts", 4, 1)
    script = (
        "import jax, json, sys; from ltc_jax import app; "
        "m = app.train_and_evaluate(app.TrainConfig(data=sys.argv[1], "
        "test_data=sys.argv[2], out=sys.argv[3], epochs=1, hidden_size=4, "
        "batch_size=4, progress=False, x64=sys.argv[4] == '1')); "
        "print(json.dumps([m['environment']['x64'], jax.numpy.zeros(()).dtype.name]))"
    )
    results = []
    for flag in ("0", "1"):
        out = (
            subprocess.run(
                [sys.executable, "-c", script, train, test, str(tmp_path / flag), flag],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        results.append(json.loads(out))
    assert results == [[False, "float32"], [True, "float64"]]


@pytest.mark.slow
def test_ctrl_c_keeps_the_run_and_names_the_resume_command(tmp_path):
    """SIGINT mid-run: exit status 130, every checkpoint intact, the resume
    command printed; resuming with a changed option is refused (status 2), and
    the resumed run's training time counts both parts."""
    train = toy_ts_file(tmp_path / "train.ts", 32, 0)
    test = toy_ts_file(tmp_path / "test.ts", 8, 1)
    run = tmp_path / "run"
    common = ["--data", train, "--test-data", test, "--hidden-size", "4"]
    victim = subprocess.Popen(
        # No validation share: early stopping could end the run before the signal.
        _train_command(
            *common,
            *("--epochs", "200", "--batch-size", "8", "--validation-fraction", "0"),
            *("--out", str(run)),
        ),
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # A shell starts background jobs with SIGINT ignored, and Python then
        # installs no KeyboardInterrupt handler: give the run the default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 300
    while time.time() < deadline and not ltc_jax.training.list_checkpoints(
        run / "checkpoints"
    ):
        time.sleep(0.2)
    victim.send_signal(signal.SIGINT)
    _, err = victim.communicate(timeout=120)
    assert victim.returncode == 130
    assert err.strip().splitlines()[-1].endswith(f"ltc-jax train --resume {run}")
    saved = json.loads((run / "config.json").read_text())
    settings = {name: choice["value"] for name, choice in saved["derived"].items()}
    with jax.enable_x64(False):  # the run was float32
        like = make_model(config_from_json(saved), 2, 2, settings)
    _, meta, skipped = ltc_jax.training.load_latest_checkpoint(
        run / "checkpoints", like
    )
    assert skipped == [] and meta["epoch"] < 200
    refused = subprocess.run(
        _train_command("--resume", str(run), "--epochs", "3"),
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    assert "--epochs 3 (saved: 200)" in refused.stderr
