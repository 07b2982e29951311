"""Smoke tests: each experiment's and benchmark's `main` at its `--quick` size, into
a temporary folder, writes the records it promises; and the one report renders
them."""

import dataclasses
import inspect
import json
import math
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ltc_jax
from experiments import _report, _run


def test_tables_take_columns_as_strings_and_tuples():
    rows = [dict(name="a", seconds=1.25, bytes=3 * 2**20, nested=dict(k=2)), {}]
    table = _report.format_table(
        rows,
        ["name:name | s:seconds:.1f | MiB:bytes:mib", ("k", "nested.k"), ("n", len)],
    )
    assert table.splitlines() == [
        "name  s    MiB   k  n",
        "----  ---  ----  -  -",
        "a     1.2  3.00  2  4",
        "-     -    -     -  0",
    ]


@pytest.mark.slow
def test_memory_scaling_quick(tmp_path):
    from experiments import memory_scaling as experiment

    out = tmp_path / "run"
    experiment.main(experiment.Config(quick=True, out=str(out)))
    with open(out / "metrics.json") as file:
        written = json.load(file)
    assert {r["gradient_mode"] for r in written["records"]} == {
        "checkpoint",
        "backsolve",
        "windowed",
    }
    for record in written["records"]:
        assert record["num_steps"] == 100 and record["num_observations"] == 101
        assert record["forward_evaluations"] == 4 * 100  # RK4: 4 per step
        assert record["gradient_relative_error"] < 1e-3
        assert record["temp_bytes"] > 0 and len(record["step_seconds_all"]) == 3
    # Each configuration ran in a fresh process, so each runtime peak is its own.
    processes = [r["process_id"] for r in written["records"]]
    assert len(set(processes)) == len(processes) and os.getpid() not in processes
    day = {r["label"]: r for r in written["estimates"]}
    assert set(day) == {
        "checkpoint (default)",
        "backsolve",
        "windowed (default)",
        "backsolve-naive",
    }
    for label in ("checkpoint (default)", "backsolve", "windowed (default)"):
        assert day[label]["num_steps"] == 21_600_000
        assert day[label]["temp_bytes"] < 2**30
    # The default windows over a day hold one batch state each (float32).
    windowed = day["windowed (default)"]
    state_bytes = 2 * 8 * 4
    assert windowed["temp_bytes"] >= (windowed["windows"] - 1) * state_bytes
    # The naive backsolve carries a cotangent of the whole input.
    assert day["backsolve-naive"]["temp_bytes"] > day["backsolve-naive"]["input_bytes"]
    # Compile-only sweep over windows: temp grows with them, no faster than a line.
    sweep = written["window_memory"]
    assert [r["windows"] for r in sweep] == [1, 4, 16]
    assert sweep[0]["temp_bytes"] < sweep[1]["temp_bytes"] < sweep[2]["temp_bytes"]
    assert written["window_memory_law"]["bytes_per_window"] >= state_bytes
    assert written["environment"]["backend"] == "cpu"
    records = os.listdir(out / "records")
    assert sum(name.endswith(".json") for name in records) == 3 + 4 + 4
    # Mixed precision: bfloat16 products cost accuracy against the float64
    # reference, and the modes and dtypes are all there.
    precision = {
        (r["gradient_mode"], r["matmul_dtype"]): r for r in written["precision"]
    }
    assert set(precision) == {
        (mode, dtype)
        for mode in ("checkpoint", "windowed")
        for dtype in ("float32", "bfloat16")
    }
    for mode in ("checkpoint", "windowed"):
        low, high = precision[mode, "bfloat16"], precision[mode, "float32"]
        assert low["gradient_relative_error"] > high["gradient_relative_error"]
        assert low["temp_bytes"] > 0
    assert (out / "memory_scaling.png").stat().st_size > 10_000
    assert json.loads((out / "config.json").read_text())["quick"] is True
    with pytest.raises(FileExistsError, match="never overwritten"):
        experiment.main(experiment.Config(quick=True, out=str(out)))


@pytest.mark.slow
def test_gradient_accuracy_quick(tmp_path):
    from experiments import gradient_accuracy as experiment

    out = tmp_path / "run"
    experiment.main(experiment.Config(quick=True, out=str(out)))
    written = json.loads((out / "metrics.json").read_text())
    keys = {(r["dtype"], r["solver"], r["horizon_taus"]) for r in written["records"]}
    assert keys == {
        (dtype, solver, k)
        for dtype in ("float32", "float64")
        for solver in ("rk4",)
        for k in (1.0, 3.0)
    }
    for record in written["records"]:
        assert record["num_observations"] == round(record["horizon_seconds"] * 360) + 1
        assert record["windows"] >= 1
    error = {
        (r["dtype"], r["horizon_taus"]): (
            r["backsolve_relative_error"],
            r["windowed_relative_error"],
        )
        for r in written["records"]
    }
    for dtype in ("float32", "float64"):
        backsolve, windowed = error[(dtype, 3.0)]
        # The reverse solve is expansive: tripling the horizon multiplies the error;
        # restarting it from stored states keeps the error down.
        assert backsolve > 100 * error[(dtype, 1.0)][0]
        assert windowed < 1e-3 * backsolve
    assert error[("float64", 1.0)][0] < 0.1 * error[("float32", 1.0)][0]
    sweep = written["window_sweep"]
    assert {r["windows"] for r in sweep if not r["default"]} == {1, 8}
    for dtype in ("float32", "float64"):
        # One window is plain backsolve; the derived default does far better.
        one = next(r for r in sweep if r["dtype"] == dtype and r["windows"] == 1)
        default = next(r for r in sweep if r["dtype"] == dtype and r["default"])
        assert default["relative_error"] < 1e-3 * one["relative_error"]
    assert "T=1 tau" in (out / "report.txt").read_text()
    assert (out / "gradient_accuracy.png").stat().st_size > 10_000


def test_gradient_accuracy_rejects_unknown_solvers(tmp_path):
    from experiments import gradient_accuracy as experiment

    with pytest.raises(ValueError, match="Unknown solver 'rk5'"):
        experiment.main(experiment.Config(solvers=("rk5",), out=str(tmp_path / "x")))


@pytest.mark.slow
def test_solvers_quick(tmp_path):
    from experiments import solvers

    out = tmp_path / "run"
    metrics = solvers.main(solvers.Config(quick=True, out=str(out)))
    written = json.loads((out / "metrics.json").read_text())
    # The records as written (an epoch whose every update failed has no mean
    # solver steps: NaN, which equals nothing, so the JSON texts are compared).
    assert json.dumps(written["rows"]) == json.dumps(metrics["rows"])
    rows = {(r["solver"], r["adjoint"]): r for r in written["rows"]}
    assert set(rows) == {
        (s, a) for s in ("euler", "fused") for a in ("checkpoint", "backsolve")
    }
    # Euler evaluates the field once per step: 10 steps per frame over the
    # longest sequence of the batch; the fused step six times per frame.
    euler = rows["euler", "checkpoint"]
    assert euler["forward_evaluations"] == euler["num_steps"]
    fused = rows["fused", "checkpoint"]
    assert fused["forward_evaluations"] == 6 * fused["num_steps"]
    assert euler["num_steps"] == 10 * fused["num_steps"]
    for row in written["stiffness"]:
        assert row["error"] is None
    assert (out / "work_precision.png").stat().st_size > 10_000


@pytest.mark.slow
def test_tolerances_quick(tmp_path):
    from experiments import tolerances

    out = tmp_path / "run"
    swept = ((1e-3, 1e-4), (1e-5, 1e-6), (1e-8, 1e-9))
    tolerances.main(tolerances.Config(quick=True, out=str(out), tolerances=swept))
    written = json.loads((out / "metrics.json").read_text())
    loose, tight, refused = written["sweep"]
    assert (loose["rtol"], tight["rtol"]) == (1e-3, 1e-5)
    # rtol 1e-8 is below float32's epsilon: refused before any solve, recorded
    # with the reason, and the sweep goes on.
    assert refused["error"].startswith("refused: rtol=1e-08 is below the resolution")
    assert "num_steps" not in refused and math.isnan(refused["accuracy_mean"])
    assert tight["num_steps"] > loose["num_steps"]
    assert tight["gradient_relative_error"] < loose["gradient_relative_error"]
    names = [r["setting"] for r in written["schedules"]]
    assert names == ["fixed loose", "fixed tight", "loose, tight from epoch 1"]
    schedule = written["schedules"][2]["steps_per_epoch"]
    assert schedule[1] > schedule[0]  # the second epoch runs at the tight tolerance
    assert (out / "tolerances.png").stat().st_size > 10_000


@pytest.mark.slow
def test_seminorm_quick(tmp_path):
    """The seminorm changes only the reverse solve: same forward evaluations, a
    gradient as accurate, and every pair recorded."""
    from experiments import seminorm

    out = tmp_path / "run"
    metrics = seminorm.main(seminorm.Config(quick=True, out=str(out)))
    without, with_ = metrics["rows"]
    assert not without["seminorm"] and with_["seminorm"]
    assert with_["forward_evaluations"] == without["forward_evaluations"]
    # Both gradients are close to the float64 reference of exact backpropagation.
    assert without["gradient_relative_error"] < 1e-2
    assert with_["gradient_relative_error"] < 1e-2
    written = json.loads((out / "metrics.json").read_text())
    assert written["rows"] == metrics["rows"]
    assert "saved by the seminorm" in (out / "report.txt").read_text()


@pytest.mark.slow
def test_biophysical_benchmark_quick(tmp_path):
    from experiments import biophysical_benchmark

    out = tmp_path / "run"
    metrics = biophysical_benchmark.main(
        biophysical_benchmark.Config(quick=True, out=str(out))
    )
    written = json.loads((out / "metrics.json").read_text())
    assert written["rows"] == metrics["rows"]
    rows = {(r["cell"], r["adjoint"]): r for r in written["rows"]}
    assert set(rows) == {
        (c, a) for c in ("biophysical", "ltc") for a in ("full", "checkpoint")
    }
    for row in rows.values():
        # One fused step per sample, six unfolds each evaluating the cell once.
        assert row["num_steps"] == 20
        assert row["forward_evaluations"] == 6 * 20
    for cell in ("biophysical", "ltc"):
        # Full storage re-evaluates each stored step once backwards; checkpointing
        # also recomputes the steps between its checkpoints.
        full, checkpoint = rows[cell, "full"], rows[cell, "checkpoint"]
        assert full["backward_evaluations"] == 6 * 20
        assert checkpoint["backward_evaluations"] > full["backward_evaluations"]


def test_shared_grid_quick(tmp_path):
    """The two layouts give the same loss, and `fit` takes the shared grid; the
    report, rendered again from the run folder's records alone, is the one the
    run wrote."""
    from experiments import shared_grid

    out = tmp_path / "run"
    metrics = shared_grid.main(shared_grid.Config(quick=True, out=str(out)))
    written = json.loads((out / "metrics.json").read_text())
    assert written == metrics
    shared, per_sequence = written["rows"]
    assert (shared["shared_times"], per_sequence["shared_times"]) == (True, False)
    assert math.isfinite(shared["loss"]) and shared["loss"] == per_sequence["loss"]
    # `fit` found the windows' one grid by itself, and timed both steps.
    (training,) = written["training"]
    assert training["fit_shared_times"] is True
    assert training["fit_seconds"] > 0 and training["by_hand_seconds"] > 0
    report = (out / "report.txt").read_text()
    (out / "report.txt").unlink()
    assert _report.render(str(out)) + "\n" == report
    assert report.splitlines()[2].split()[:2] == ["100", "shared"]


def test_overhead_benchmark_quick(tmp_path):
    """The two training steps compute the same loss (the benchmark checks it) and
    each mode's row holds a timing of each per repeat; the hand-written step
    imports nothing of ltc_jax's."""
    from benchmarks import overhead

    out = tmp_path / "run"
    metrics = overhead.main(overhead.Config(quick=True, out=str(out)))
    assert [row["mode"] for row in metrics["rows"]] == [
        "checkpoint",
        "full",
        "backsolve",
        "windowed",
        "direct",
    ]
    for row in metrics["rows"]:
        loss = row["loss"]
        assert loss["ltc_jax"] == pytest.approx(loss["hand-written"], rel=1e-5)
        assert row["gradient_difference"] <= overhead.GRADIENT_RTOL
        assert {len(v) for v in row["step_seconds"].values()} == {
            overhead.QUICK["repeats"]
        }
    assert (
        json.loads((out / "metrics.json").read_text())["rows"][0]["mode"]
        == "checkpoint"
    )
    hand_written = (
        overhead.PlainRK4,
        overhead.PlainField,
        overhead.HiddenPath,
        overhead.PlainLTC,
        overhead.hand_written_loss,
        overhead.hand_written_step,
    )
    for part in hand_written:
        assert "ltc_jax" not in inspect.getsource(part)
    # Hiding the input from diffrax's backsolve changes no value: the windowed
    # loss and gradient with the plain interpolation in args, and the hidden one.
    config = overhead.Config(**overhead.QUICK)
    with jax.enable_x64(False):  # as the benchmark runs it
        model, ts, xs, labels = overhead.make_problem(config)
        plain = overhead.plain_copy(model)
        in_args, hidden = (
            eqx.filter_value_and_grad(
                overhead.hand_written_loss(
                    dataclasses.replace(config, hidden_path=hidden), "windowed"
                )
            )(plain, ts, xs, labels)
            for hidden in (False, True)
        )
    for a, b in zip(jax.tree.leaves(in_args), jax.tree.leaves(hidden), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # ... and leaves diffrax no float to differentiate, bit for bit the same data.
    path = overhead.HiddenPath(ts, jnp.swapaxes(xs, 0, 1))
    assert not jax.tree.leaves(eqx.filter(path, eqx.is_inexact_array))
    np.testing.assert_array_equal(
        jax.lax.bitcast_convert_type(path.ys, xs.dtype), jnp.swapaxes(xs, 0, 1)
    )


def test_divergence_sweep_quick(tmp_path):
    """A setting whose initial model leaves the state bound when solved without
    the check (an independent solve) stops with the divergence error; a stable
    one finishes."""
    from experiments import divergence_sweep

    config = divergence_sweep.Config(
        out=str(tmp_path / "run"),
        dt0s=(0.25, 2.0),
        taus=(0.25,),
        epochs=1,
        train_size=32,
    )
    metrics = divergence_sweep.main(config)
    rows = {row["dt0"]: row for row in metrics["rows"]}
    assert rows[2.0]["initial_excursion"] > 1 and rows[2.0]["stability_warning"]
    assert rows[2.0]["outcome"] == "divergence error"
    assert rows[0.25]["initial_excursion"] == 0 and rows[0.25]["error"] is None


def test_divergence_check_benchmark_quick(tmp_path):
    """The check never changes the loss (the benchmark raises if it does), and each
    case's row holds a timing of each variant per repeat."""
    from benchmarks import divergence_check

    metrics = divergence_check.main(
        divergence_check.Config(quick=True, out=str(tmp_path / "run"))
    )
    assert [row["case"] for row in metrics["rows"]] == ["vowels", "ecg"]
    for row in metrics["rows"]:
        assert {len(v) for v in row["step_seconds"].values()} == {
            divergence_check.QUICK["repeats"]
        }


@pytest.mark.slow
def test_batching_benchmark_quick(tmp_path):
    """The quick case (JapaneseVowels, half of each utterance's observations
    dropped, each one's times rescaled to [0, 1]) covers the 270 training
    utterances; sharing no observation time, a batch solved as one stops at
    every sequence's observations, so it takes more steps than the slowest of
    its sequences solved alone."""
    from benchmarks import batching

    metrics = batching.main(batching.Config(quick=True, out=str(tmp_path / "run")))
    (row,) = json.loads((tmp_path / "run" / "metrics.json").read_text())["rows"]
    assert row["sequences"] == 270
    steps = row["mean_solver_steps_per_batch"]
    assert steps["batched"] > steps["vmap"] > 0
    assert {len(v) for v in row["epoch_seconds"].values()} == {2}
    assert metrics["rows"][0]["case"] == "JapaneseVowels@0.5/rescaled"


@pytest.mark.slow
def test_devices_benchmark_quick(tmp_path):
    """Each device count runs in its own process, which sees that many devices."""
    from benchmarks import devices

    devices.main(devices.Config(quick=True, out=str(tmp_path / "run")))
    rows = json.loads((tmp_path / "run" / "metrics.json").read_text())["rows"]
    assert [(r["devices"], r["device_count"]) for r in rows] == [(1, 1), (2, 2), (4, 4)]
    for row in rows:
        assert len(row["step_seconds"]) == 3 and row["median_step_seconds"] > 0


def test_minirocket_input_holds_the_last_value():
    """MiniRocket's equal-length input, by hand: a gap takes the channel's last
    observed value (its first before any), and a short series is held at its
    last value to the common length."""
    from experiments.uea_benchmark import equal_length

    nan = np.nan
    xs = np.array(
        [
            [[1.0, nan], [nan, 5.0], [3.0, 6.0]],
            [[7.0, 8.0], [9.0, nan], [nan, nan]],
        ]
    )
    data = ltc_jax.datasets.SequenceDataset(
        ts=np.tile(np.arange(3.0), (2, 1)),
        xs=xs,
        lengths=np.array([3, 2]),
        labels=np.array([0, 1]),
    )
    expected = np.array(
        [
            [[1, 1, 3, 3, 3], [5, 5, 6, 6, 6]],
            [[7, 9, 9, 9, 9], [8, 8, 8, 8, 8]],
        ],
        dtype=float,
    )
    np.testing.assert_array_equal(equal_length(data, 5), expected)


def test_minirocket_separates_rising_from_falling_series():
    """aeon's MiniRocket, where the `baselines` extra is installed, on series
    whose class is their direction (of different lengths): near 1."""
    pytest.importorskip("aeon")
    from experiments.uea_benchmark import minirocket

    rng = np.random.default_rng(0)

    def data(n):
        labels = np.arange(n) % 2
        lengths = rng.integers(12, 20, n)
        ramp = np.linspace(-1, 1, 20)
        xs = np.where(labels[:, None] == 0, ramp, -ramp) + 0.3 * rng.normal(
            size=(n, 20)
        )
        xs[np.arange(20)[None] >= lengths[:, None]] = np.nan
        ts = np.tile(np.arange(20.0), (n, 1))
        return ltc_jax.datasets.SequenceDataset(
            ts=ts, xs=xs[..., None], lengths=lengths, labels=labels
        )

    result = minirocket(data(40), data(40), seed=0)
    assert result["accuracy"] >= 0.9 and result["seconds"] > 0


def test_rr_windows_and_baselines_by_hand():
    """The RR windows of a made-up series: each window's times are the
    cumulative sums of its own intervals from 0, its values the intervals, its
    target the next interval (classified against the median of the training
    part's beats); the test windows start after the last training target; the
    baselines recomputed here."""
    from experiments import rr_intervals

    # A heart that slows through the training part (whose targets are then
    # mostly "longer" than its median) and then speeds up (mostly not).
    rng = np.random.default_rng(0)
    trend = np.concatenate([np.linspace(0.7, 0.9, 52), np.full(48, 0.72)])
    intervals = trend + 0.03 * rng.standard_normal(100)
    split = rr_intervals.rr_windows(intervals, beats=6, stride=3, train_share=0.5)
    train, test = split["classification"]["train"], split["classification"]["test"]
    r_train, r_test = split["regression"]["train"], split["regression"]["test"]
    # Starts 0, 3, ..., 93 (a target must follow): 32; the first 16 train, and
    # the test starts after the last training target, beat 45 + 6 = 51.
    train_starts, test_starts = np.arange(0, 46, 3), np.arange(54, 94, 3)
    assert (len(train), len(test)) == (16, 14)
    median = np.median(intervals[:52])
    assert split["median"] == median
    for data, regression, starts in (
        (train, r_train, train_starts),
        (test, r_test, test_starts),
    ):
        for i, start in enumerate(starts):
            beats = intervals[start : start + 6]
            times = np.array([0.0, *np.cumsum(beats[1:])])
            np.testing.assert_allclose(data.ts[i, :6], times, rtol=1e-12)
            np.testing.assert_allclose(np.diff(data.ts[i, :6]), beats[1:], rtol=1e-12)
            np.testing.assert_array_equal(data.xs[i, :6, 0], beats)
            assert regression.labels[i, 0] == intervals[start + 6]
            assert data.labels[i] == int(intervals[start + 6] > median)
    assert train.class_names == ("not longer", "longer")

    found = rr_intervals.baselines(split)
    last, target = intervals[test_starts + 5], intervals[test_starts + 6]
    longer = target > median
    assert np.mean(intervals[train_starts + 6] > median) > 0.5 > np.mean(longer)
    assert found["majority_accuracy"] == pytest.approx(np.mean(longer))
    assert found["persistence_accuracy"] == pytest.approx(
        np.mean((last > median) == longer)
    )
    assert found["persistence_train_accuracy"] == pytest.approx(
        np.mean(
            (intervals[train_starts + 5] > median)
            == (intervals[train_starts + 6] > median)
        )
    )
    assert found["persistence_rmse"] == pytest.approx(
        np.sqrt(np.mean((last - target) ** 2))
    )
    mean = np.mean(intervals[train_starts + 6])
    assert found["mean_rmse"] == pytest.approx(np.sqrt(np.mean((mean - target) ** 2)))
    # The linear baseline: scikit-learn's least squares on the last intervals.
    from sklearn.linear_model import LinearRegression

    k = found["ar_order"]
    assert k == 6  # the windows' length, under AR_ORDER
    lags = lambda starts: np.stack([intervals[s + 6 - k : s + 6] for s in starts])  # noqa: E731
    fitted = LinearRegression().fit(lags(train_starts), intervals[train_starts + 6])
    predicted = fitted.predict(lags(test_starts))
    assert found["ar_rmse"] == pytest.approx(
        np.sqrt(np.mean((predicted - target) ** 2))
    )
    assert found["ar_accuracy"] == pytest.approx(
        np.mean((predicted > median) == longer)
    )
    with pytest.raises(ValueError, match="train_share in"):
        rr_intervals.rr_windows(intervals, beats=6, stride=3, train_share=-0.1)


@pytest.mark.slow
def test_train_main_job_outputs_give_its_loss():
    """`train_main_job(with_outputs=True)` returns the trained model's outputs
    on the test set: their mean squared error against the targets, computed
    here, is the loss `ltc_jax.evaluate` reports."""
    from experiments import _problems
    from ltc_jax.datasets import SequenceDataset

    rng = np.random.default_rng(0)

    def data(n):
        ts = np.sort(rng.uniform(0, 3, (n, 6)), axis=1)
        xs = rng.standard_normal((n, 6, 2))
        labels = rng.standard_normal((n, 1))
        return SequenceDataset.from_sequences(list(ts), list(xs), labels)

    test = data(70)  # more than one of evaluate's batches of 64
    found = _problems.train_main_job(
        data(16), test, with_outputs=True, epochs=1, hidden_size=4
    )
    assert found["outputs"].shape == (70, 1)
    mse = np.mean((found["outputs"] - test.labels) ** 2)
    assert mse == pytest.approx(found["loss"], rel=1e-5)


@pytest.mark.slow
def test_rr_intervals_quick(tmp_path):
    """Both tasks train with the main job's defaults (`--quick`) on the bundled
    hour of intervals: 407 training and 171 test windows, a finite test error,
    and persistence's accuracy recomputed from the raw file."""
    from experiments import rr_intervals

    out = tmp_path / "run"
    metrics = rr_intervals.main(rr_intervals.Config(quick=True, out=str(out)))
    assert (metrics["train_size"], metrics["test_size"]) == (407, 171)
    raw = np.load(rr_intervals.INTERVALS) / 1000.0
    starts = np.arange(0, len(raw) - 32, 8)[411:]  # after beat 406 * 8 + 32
    median = np.median(raw[: 406 * 8 + 33])
    persistence = np.mean((raw[starts + 31] > median) == (raw[starts + 32] > median))
    assert metrics["baselines"]["persistence_accuracy"] == pytest.approx(persistence)
    assert 0 <= metrics["accuracy_mean"] <= 1 and np.isfinite(metrics["rmse_mean"])
    assert 0 <= metrics["threshold_accuracy_mean"] <= 1
    assert (out / "report.txt").exists()


@pytest.mark.slow
def test_uea_benchmark_quick(tmp_path):
    """Each dataset's runs are the main job's (their run folders exist), and the
    1-NN Euclidean accuracy computed on the loaded arrays reproduces the archive's
    published figure for ArrowHead (0.800)."""
    from experiments import uea_benchmark

    out = tmp_path / "run"
    metrics = uea_benchmark.main(uea_benchmark.Config(quick=True, out=str(out)))
    rows = {row["dataset"]: row for row in metrics["rows"]}
    assert set(rows) == {"JapaneseVowels", "ArrowHead"}
    assert rows["ArrowHead"]["euclidean_1nn"] == pytest.approx(0.800, abs=5e-4)
    assert rows["JapaneseVowels"]["euclidean_1nn"] is None  # unequal lengths
    for name, row in rows.items():
        (run,) = row["runs"]
        assert (out / name / "seed0" / "metrics.json").exists()
        assert run["epochs_run"] == 2 and 0 <= run["test_accuracy"] <= 1


def test_uea_benchmark_records_a_failed_run_and_goes_on(tmp_path):
    """A run whose main job fails (here an option it refuses) is recorded in
    its row, with its seed and the error's last line, and counted in the
    table; the benchmark still runs the next dataset."""
    from experiments import uea_benchmark

    pairs = uea_benchmark.default_pairs()[:2]
    out = tmp_path / "run"
    config = uea_benchmark.Config(
        pairs=pairs, seeds=(0,), hidden_size=0, epochs=1, out=str(out)
    )
    rows = uea_benchmark.main(config)["rows"]
    assert [row["dataset"] for row in rows] == ["JapaneseVowels", "ArrowHead"]
    for row in rows:
        (failed,) = row["failed"]
        assert failed["seed"] == 0
        assert failed["error"].endswith("--hidden-size must be at least 1; got 0.")
        assert row["runs"] == [] and row["accuracy"] is None
    assert _report_column(out, "failed") == ["1/1", "1/1"]


def _report_column(out, header: str) -> list[str]:
    """The cells of the column `header` of a run's `report.txt` table."""
    lines = (out / "report.txt").read_text().splitlines()
    heading = next(line for line in lines if line.startswith("dataset"))
    at = heading.index(header)  # its column, in characters
    rows = []
    for line in lines[lines.index(heading) + 2 :]:  # after the heading's rule
        if not line.strip():
            break
        rows.append(line[at : at + len(header)].strip())
    return rows


def test_uea_benchmark_averages_the_runs_that_finished(tmp_path, monkeypatch, capsys):
    """Of two seeds, one fails: the row's figures are the other's, the failed
    one is recorded, said on standard error and counted as 1 of 2, and the
    steps the finished run skipped are summed (its process stubbed here)."""
    import ltc_jax
    from experiments import uea_benchmark

    def run(target, kwargs):
        if kwargs["options"]["seed"] == 1:
            raise ltc_jax.SubprocessError("It failed.\nTraceback ...\nValueError: boom")
        return dict(
            test_accuracy=0.5,
            train_seconds=2.0,
            steps_per_sequence=3.0,
            skipped_steps=4,
        )

    monkeypatch.setattr(ltc_jax.measure, "call_in_subprocess", run)
    out = tmp_path / "run"
    pairs = uea_benchmark.default_pairs()[:1]
    config = uea_benchmark.Config(pairs=pairs, seeds=(0, 1), out=str(out))
    (row,) = uea_benchmark.main(config)["rows"]
    assert row["failed"] == [dict(seed=1, error="It failed. ValueError: boom")]
    assert row["accuracy"] == dict(mean=0.5, std=0.0) and row["skipped_steps"] == 4
    assert row["train_seconds_mean"] == 2.0
    stderr = capsys.readouterr().err
    assert "JapaneseVowels, seed 1: failed: It failed. ValueError: boom" in stderr
    assert _report_column(out, "failed") == ["1/2"]
    assert _report_column(out, "skipped") == ["4"]


def test_uea_benchmark_reports_a_regression_sets_error_and_the_means(tmp_path):
    """A regression pair (CardanoSentiment): its row holds the test mean squared
    error of each run and that of the training targets' mean, recomputed here
    from the files' last fields; no classification baseline."""
    from experiments import uea_benchmark

    folder = os.path.join(os.path.dirname(uea_benchmark.__file__), "data", "uea")
    files = [
        os.path.join(folder, f"CardanoSentiment_{part}.ts")
        for part in "TRAIN TEST".split()
    ]

    def targets(path):
        with open(path) as file:
            lines = file.read().split("@data")[1].split()
        return np.array([float(line.rsplit(":", 1)[1]) for line in lines])

    train, test = targets(files[0]), targets(files[1])
    pair = "CardanoSentiment=" + ",".join(files)
    out = tmp_path / "run"
    config = uea_benchmark.Config(quick=True, pairs=(pair,), out=str(out))
    (row,) = uea_benchmark.main(config)["rows"]
    assert row["task"] == "regression" and (len(train), len(test)) == (74, 33)
    assert row["mean_mse"] == pytest.approx(np.mean((test - train.mean()) ** 2))
    (run,) = row["runs"]
    assert np.isfinite(run["test_loss"]) and np.isnan(run["test_accuracy"])
    assert row["mse"]["mean"] == run["test_loss"] and row["accuracy"] is None
    assert row["euclidean_1nn"] is None and row["minirocket"] is None
    assert "CardanoSentiment" in (out / "report.txt").read_text()


@pytest.mark.slow
def test_cfc_versus_ltc_trained_ecg_windows_split_by_time(tmp_path):
    """The approximation and the trained ECG comparison (`--quick`): the trained
    comparison's windows by hand from the recording, training windows evenly
    spread over its first 70% (75,600 samples), test windows over the rest, each
    target 36 samples past its window; the persistence baseline recomputed from
    the recording; the CfC's training loss falls in two epochs; the LTC's two
    gradient modes (checkpoint, windowed) give the same second-epoch loss, after
    an update by each one's gradient."""
    import numpy as np

    import ltc_jax
    from experiments import cfc_versus_ltc

    _, millivolts = ltc_jax.datasets.load_mitbih_208()
    train, test = cfc_versus_ltc.ecg_split(400, 8, 4)
    train_starts = np.linspace(0, 75_600 - 436, 8).astype(int)
    test_starts = np.linspace(75_600, 108_000 - 436, 4).astype(int)
    assert train_starts[-1] + 436 <= test_starts[0]
    for data, starts in ((train, train_starts), (test, test_starts)):
        for i, start in enumerate(starts):
            np.testing.assert_array_equal(
                data.xs[i, :, 0], millivolts[start : start + 400]
            )
            assert data.labels[i, 0] == millivolts[start + 435]
    np.testing.assert_allclose(train.ts[3], np.arange(400) / 360)
    out = tmp_path / "run"
    parts = ("approximation", "ecg_trained")
    config = cfc_versus_ltc.Config(quick=True, parts=parts, out=str(out))
    metrics = cfc_versus_ltc.main(config)
    rows = {row["kind"]: row for row in metrics["ecg_trained"]}
    assert "CfC" in (out / "report.txt").read_text()
    # The closed form's error is reported over the horizons that fit the input
    # (all three of the ECG's 200 samples, two of the vowels' 20 frames).
    errors = {
        (r["source"], r["typical_tau"]): r["errors"] for r in metrics["approximation"]
    }
    assert set(errors["ECG", 1.0]) == {"1", "10", "100"}
    assert set(errors["JapaneseVowels", 10.0]) == {"1", "10"}
    assert (out / "cfc_versus_ltc.png").stat().st_size > 10_000
    assert rows["checkpoint"]["last_loss"] != rows["checkpoint"]["first_loss"]
    assert rows["checkpoint"]["last_loss"] == pytest.approx(
        rows["windowed"]["last_loss"], rel=1e-4
    )
    row = rows["cfc"]
    persistence = np.mean(
        (millivolts[test_starts + 435] - millivolts[test_starts + 399]) ** 2
    )
    assert row["persistence_mse"] == pytest.approx(persistence, rel=1e-12)
    assert np.isfinite(row["test_mse"]) and row["last_loss"] < row["first_loss"]


def test_streams_benchmark_quick(tmp_path):
    """The union grid's points are the window's samples, counted here from the
    streams directly; the slow clock's input is its frames; the baselines'
    summary features match a direct transcription; every model is scored, the
    union grid's LTC where its windows fit (10-second windows here)."""
    from benchmarks import streams

    out = tmp_path / "run"
    config = streams.Config(
        quick=True,
        out=str(out),
        sensors=(20,),
        accuracy_machines=(3, 1, 2),
        accuracy_window_seconds=10.0,
        union_limit=2000,  # a 10 s window's union, not a 60 s one's at 20 sensors
        epochs=1,
    )
    metrics = streams.main(config)
    (row,) = metrics["scaling"]
    plant = ltc_jax.datasets.simulate_plant(
        machines=1, sensors=20, seed=0, simulated_seconds=60.0 + 60.0 * 9
    )
    windows = ltc_jax.datasets.stream_windows(
        plant, 60.0, stride_seconds=60.0, horizon_seconds=0.0
    )
    counts = []
    for end in windows.end_time[:8]:
        count = 0
        for s in range(20):
            times, _ = plant.samples(0, s)
            count += np.count_nonzero((times > end - 60.0) & (times <= end))
        counts.append(count)
    assert row["union_points"] == int(np.median(counts))
    assert row["union_input_bytes"] == 8 * row["union_points"] * (3 * 20 + 1) * 4
    assert row["channels"] == windows.dataset.num_channels
    assert row["frame_input_bytes"] >= 8 * 60 * row["channels"] * 4
    assert row["frame_steps"] == 59 and row["frame_step_seconds"] > 0
    assert "union_step_seconds" not in row  # 20 sensors' 60 s union is too long
    # Pooled: 4 groups' features (vibration and pressure are fast at 1 Hz: 3
    # each; temperature is slow: 2; alarms are events: 3), 4 statistics each.
    assert row["pooled_channels"] == (3 + 3 + 2 + 3) * 4
    assert row["pooled_input_bytes"] >= 8 * 60 * row["pooled_channels"] * 4
    assert [r["model"] for r in metrics["accuracy"]] == [
        "logistic regression",
        "gradient-boosted trees",
        "LTC, slow clock",
        "LTC, slow clock, sensor groups pooled",
        "LTC, slow clock, sensor groups pooled, frame encoder",
        "LTC, stream job, per sensor",
        "LTC, stream job, sensor groups pooled",
        "LTC, stream job, sensor groups pooled, frame encoder",
        "LTC, union grid",
    ]
    for r in metrics["accuracy"]:  # 2 held-out machines' last 1800 s: 15 windows each
        assert r["test_windows"] == 30 and 0 < r["positive_share"] < 1
    # The rule that let the union grid in: the most samples in any window,
    # counted sensor by sensor.
    accuracy_plant = ltc_jax.datasets.simulate_plant(
        machines=6, sensors=10, seed=1, simulated_seconds=1800.0
    )
    accuracy_windows = ltc_jax.datasets.stream_windows(
        accuracy_plant, 10.0, stride_seconds=120.0, horizon_seconds=900.0
    )
    most = 0
    for m, end in zip(accuracy_windows.machine, accuracy_windows.end_time, strict=True):
        count = 0
        for s in range(10):
            times, _ = accuracy_plant.samples(m, s)
            count += np.count_nonzero((times > end - 10.0) & (times <= end))
        most = max(most, count)
    assert streams.window_samples(accuracy_plant, accuracy_windows).max() == most
    assert 1000 < most <= 2000
    # The run's own settings, simulated two machines at a time: the parts'
    # windows and union grids are those of the whole plant's.
    chunked = dataclasses.replace(
        _run.apply_quick(config, streams.QUICK), accuracy_chunk_machines=2
    )
    parts, unions, groups, _ = streams.accuracy_windows(chunked, seed=0)
    assert groups == accuracy_windows.channel_groups
    for part, union, machines in zip(
        parts, unions, ([0, 1, 2], [3], [4, 5]), strict=True
    ):
        whole = accuracy_windows.of_machines(machines)
        expected = (whole.dataset, streams.union_dataset(accuracy_plant, whole))
        for got, want in zip((part, union), expected, strict=True):
            for name in ("ts", "xs", "lengths", "labels"):
                np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    xs = windows.dataset.xs[:3, :, :2].copy()
    xs[0, -5:, 1] = np.nan
    data = ltc_jax.datasets.SequenceDataset(
        windows.dataset.ts[:3], xs, np.full(3, 60), np.zeros(3, np.int32)
    )
    features = streams.summary_features(data)
    for i in range(3):
        for c in range(2):
            seen = xs[i, :, c][~np.isnan(xs[i, :, c])]
            expected = [seen[-1], seen.mean(), seen.std(), seen.min(), seen.max()]
            np.testing.assert_allclose(features[i, c::2], expected)


def check_online_run(run: dict) -> dict:
    """An online experiment's run, checked: the strategy never updated ends with
    the held-out scores it began with; every streamed window is predicted, and
    every held-out window scored after each regime. Returns the rows by
    strategy."""
    rows = {row["strategy"]: row for row in run["strategies"]}
    none = rows["none"]["held_out"]
    assert none[0]["held_out"] == none[-1]["held_out"]
    counts = run["stream"]["regime_windows"]
    held = run["stream"]["test_windows"]
    for row in rows.values():
        assert [p["windows"] for p in row["prequential"]] == counts
        for after in row["held_out"]:
            assert [r["windows"] for r in after["held_out"]] == held
    return rows


@pytest.mark.slow
def test_online_quick(tmp_path):
    """Smaller than `--quick`: every strategy streams every regime; the one
    never updated ends with the model it began with (its held-out scores do not
    move), the others update once per chunk with labels; each regime's windows
    are all predicted before their labels; the report and figure render."""
    from experiments import online

    config = online.Config(
        quick=True,
        out=str(tmp_path / "run"),
        machines_per_regime=2,
        test_machines=1,
        warmup_machines=2,
        warmup_passes=1,
        sensors=10,
        latency_sensors=0,
    )
    (run,) = online.main(config)["runs"]
    rows = check_online_run(run)
    assert list(rows) == list(online.STRATEGIES)
    assert rows["none"]["updates"] == rows["retrain"]["updates"] == 0
    assert len(rows["retrain"]["retrain_seconds"]) == online.REGIMES
    assert rows["finetune"]["updates"] == rows["ewc_replay"]["updates"] > 0
    assert (tmp_path / "run" / "prequential.png").stat().st_size > 0
    assert "Forgetting" in (tmp_path / "run" / "report.txt").read_text()
    # A sweep's subset run reproduces the full run's rows of its strategy.
    subset = dataclasses.replace(config, out=str(tmp_path / "ewc"), strategies=("ewc",))
    (alone,) = online.main(subset)["runs"]
    (row,) = alone["strategies"]
    assert row["held_out"] == rows["ewc"]["held_out"]
    assert row["prequential"] == rows["ewc"]["prequential"]
    for strategies in (("ewc", "retrian"), ("ewc", "ewc")):
        with pytest.raises(ValueError, match="strategies must be some of"):
            online.Config(strategies=strategies)


def test_rainfall_windows_from_the_file_by_hand():
    """Each window holds its days' rows of the file read line by line, then its
    last day's again at the day's end; its label is that day's rain; held-out
    blocks, warm-up and stream split the windows; each regime keeps its first
    days; standardised with the warm-up's statistics and clipped; a regime
    ends when its last label arrives; no two windows of one stream chain."""
    import csv

    from experiments import online_rainfall

    config = online_rainfall.Config(
        window_days=5,
        warmup_days=40,
        regime_starts=(100, 12000),
        days_per_regime=60,
        test_block_days=7,
        test_every=3,
        label_delay_days=2.5,
        clip=2.0,
    )
    data = online_rainfall.build_stream(config)
    with open(online_rainfall.DATA) as file:
        rows = list(csv.reader(file))[1:]
    values = np.array([[float(v) for v in row[1:-1]] for row in rows])
    rain = np.array([int(row[-1]) for row in rows])
    kept = [d for d in range(len(rows)) if d % 100 < 60 if d < 200] + list(
        range(12000, 12060)
    )
    ends = [d for d in kept if all(d - k in kept for k in range(5))]
    held = [d for d in ends if (d // 7) % 3 == 2]
    warm = [d for d in ends if d not in held and d < 40]
    streamed = [d for d in ends if d not in held and d >= 40]
    for windows, days in (
        (data.test, held),
        (data.warmup, warm),
        (data.stream, streamed),
    ):
        assert windows.end.tolist() == days
        np.testing.assert_array_equal(windows.labels, rain[days])
        np.testing.assert_array_equal(
            windows.regime, [0 if d < 100 else 1 if d < 12000 else 2 for d in days]
        )
    raw = values[[[d - 4, d - 3, d - 2, d - 1, d, d] for d in warm]]
    mean, std = raw.mean(axis=(0, 1)), raw.std(axis=(0, 1))
    for windows, days in (
        (data.warmup, warm),
        (data.test, held),
        (data.stream, streamed),
    ):
        expected = values[[[d - 4, d - 3, d - 2, d - 1, d, d] for d in days]]
        np.testing.assert_allclose(
            windows.xs, np.clip((expected - mean) / std, -2.0, 2.0), atol=1e-12
        )
        for stream in np.unique(windows.stream):
            assert np.diff(windows.end[windows.stream == stream]).min() >= 5
    assert np.abs(data.stream.xs).max() == 2.0
    np.testing.assert_array_equal(data.ts, np.arange(6.0))
    assert data.boundaries == (101.5, 12001.5) and data.regimes == 3
    with pytest.raises(ValueError, match="beyond them"):
        online_rainfall.build_stream(
            dataclasses.replace(config, regime_starts=(100, 20000))
        )
    with pytest.raises(ValueError, match="warmup_days must exceed"):
        online_rainfall.build_stream(dataclasses.replace(config, warmup_days=3))
    with pytest.raises(ValueError, match="increasing"):
        online_rainfall.Config(regime_starts=(12000, 6000))
    with pytest.raises(ValueError, match="chunk_days and clip must be positive"):
        online_rainfall.Config(chunk_days=0.0)
    with pytest.raises(ValueError, match="No window in regime 0's held-out days"):
        online_rainfall.build_stream(dataclasses.replace(config, test_block_days=80))


@pytest.mark.slow
def test_online_rainfall_quick(tmp_path):
    """Smaller than `--quick`: three strategies over the three regimes of the
    real weather; the one never updated keeps its held-out scores; every
    streamed window is predicted once; the logistic reference and the report
    render."""
    from experiments import online_rainfall

    config = online_rainfall.Config(
        quick=True,
        out=str(tmp_path / "run"),
        days_per_regime=150,
        warmup_days=80,
        window_days=7,
        hidden_size=4,
        warmup_passes=1,
        strategies=("none", "ewc_replay", "retrain"),
    )
    metrics = online_rainfall.main(config)
    (run,) = metrics["runs"]
    # One held-out window here ends on a multiple of the chunk.
    rows = check_online_run(run)
    assert rows["ewc_replay"]["updates"] > 0
    majority, warm = metrics["reference"][:2]
    assert majority["fitted_on"] == "majority class of the warm-up"
    assert warm["fitted_on"] == "warm-up"
    report = (tmp_path / "run" / "report.txt").read_text()
    assert "Forgetting" in report and "logistic regression" in report
    assert (tmp_path / "run" / "prequential.png").stat().st_size > 0


def test_event_labels_and_concordance_by_hand():
    """The time-to-failure labels count from each window's first frame and are
    censored at the follow-up; the concordance index counts, pair by pair, the
    pairs whose earlier time is an observed failure."""
    from experiments import events

    class Windows:  # the two fields event_labels reads
        time_to_failure = np.array([100.0, 900.0, 2000.0])
        dataset = ltc_jax.datasets.SequenceDataset(
            ts=np.tile(np.arange(1.0, 61.0) * 5.0, (3, 1)),
            xs=np.zeros((3, 60, 1)),
            lengths=np.full(3, 60, np.int32),
            labels=np.zeros(3, np.int32),
        )

    labels = events.event_labels(Windows, 1800.0)
    np.testing.assert_array_equal(labels[:, 0], [395.0, 1195.0, 295.0 + 1800.0])
    np.testing.assert_array_equal(labels[:, 1], [1.0, 1.0, 0.0])

    # Ranked pairs (the earlier time observed): (1, 2), (1, 3), (1, 4),
    # (1, 2.5), (3, 4), (2.5, 3), (2.5, 4): 7; the censored 2 and 4 lead none.
    time = np.array([1.0, 2.0, 3.0, 4.0, 2.5])
    observed = np.array([1, 0, 1, 0, 1])
    concordance = events.concordance_index
    assert concordance(time, observed, time) == 1.0
    assert concordance(time, observed, -time) == 0.0
    # Times 3 and 4 predicted alike (half a pair); the rest in order: 6.5 / 7.
    tied = np.array([1.0, 2.0, 3.0, 3.0, 2.5])
    assert concordance(time, observed, tied) == pytest.approx(13 / 14)
    # (1, 2) and (1, 2.5) the wrong way round: 5 / 7.
    swapped = np.array([3.0, 1.0, 4.0, 5.0, 2.0])
    assert concordance(time, observed, swapped) == pytest.approx(5 / 7)
    assert concordance(time, observed, np.zeros(5)) == 0.5


@pytest.mark.slow
def test_events_quick(tmp_path):
    """Both LTCs, the trees and the constant train and score on a small plant
    (`--quick`): errors within the follow-up, concordance in [0, 1], and the
    constant, which ranks no pair, at one half."""
    from experiments import events

    metrics = events.main(events.Config(quick=True, out=str(tmp_path / "run")))
    models = [row["model"] for row in metrics["rows"]]
    assert models == [
        "constant (training median)",
        "gradient-boosted trees",
        "LTC, crossing time",
        "LTC, hazard",
    ]
    for row in metrics["rows"]:
        assert 0 <= row["mae_minutes"] <= 30 and 0 <= row["concordance"] <= 1
    assert metrics["rows"][0]["concordance"] == 0.5
    assert (tmp_path / "run" / "report.txt").read_text().count("LTC") == 2


def test_async_motions_protocol_and_layouts_by_hand():
    """BasicMotions made asynchronous: the accelerometer keeps every sample,
    each gyroscope channel every 7th from its own phase, at the recorded times
    and values. The union grid holds each kept sample at its time and NaN
    elsewhere; the multi-rate windows' accelerometer means, and gyroscope last
    values and new-sample flags (some frames hold), are recomputed frame by
    frame from the recording here."""
    from experiments import async_motions

    train, _ = async_motions.load_basic_motions()
    data = train.take(np.arange(3))
    np.testing.assert_allclose(data.ts[0, :3], [0.0, 0.1, 0.2])
    config = async_motions.Config()
    streams = async_motions.asynchronous_streams(data, 7, seed=0)
    phases = set()
    for machine in range(3):
        for sensor in range(6):
            t, v = streams.samples(machine, sensor)
            index = np.rint(t * 10).astype(int)
            np.testing.assert_array_equal(v, data.xs[machine, index, sensor])
            expected = 1 if sensor < 3 else 7
            assert np.all(np.diff(index) == expected) and index[0] < expected
            assert index[-1] > 99 - expected
            phases.add(int(index[0]))
    assert len(phases) > 1  # the gyroscope channels' phases differ

    layouts = async_motions.layouts(data, config, seed=0)
    union, frames = layouts["union"], layouts["multi_rate"]
    np.testing.assert_array_equal(union.labels, data.labels)
    for machine in range(3):
        n = union.lengths[machine]
        # The window (0, 9]: samples 1 to 90; the accelerometer's fill the grid.
        np.testing.assert_allclose(union.ts[machine, :n], np.arange(1, 91) / 10)
        for sensor in range(6):
            t, v = streams.samples(machine, sensor)
            inside = (t > 0) & (t <= 9.0)
            column = union.xs[machine, :n, sensor]
            kept = np.isin(np.arange(1, 91), np.rint(t[inside] * 10))
            np.testing.assert_array_equal(column[kept], v[inside])
            assert np.all(np.isnan(column[~kept]))
    names = list(async_motions.layouts(data, config, seed=0)["multi_rate"].class_names)
    assert names == list(data.class_names)
    # 18 frames of 0.5 s; channel 0 is accelerometer x's mean, and after the
    # three accelerometers' three features, gyroscope x's last value and flag.
    assert frames.xs.shape == (3, 18, 15)
    held = 0
    for machine in range(3):
        t, v = streams.samples(machine, 3)
        for k in range(18):
            samples = data.xs[machine, 5 * k + 1 : 5 * k + 6, 0]
            np.testing.assert_allclose(frames.xs[machine, k, 0], samples.mean())
            end = (k + 1) / 2 + 1e-9
            np.testing.assert_allclose(frames.xs[machine, k, 9], v[t <= end][-1])
            new = np.any((t > end - 0.5) & (t <= end))
            assert frames.xs[machine, k, 10] == float(new)
            held += not new
    assert held > 0  # a period of 0.7 s leaves some frames without a sample


def test_async_motions_quick(tmp_path):
    """Both layouts and the trees train and are scored (`--quick`); the report,
    rendered again from the run folder's records alone, is the one written."""
    from experiments import async_motions

    out = tmp_path / "run"
    metrics = async_motions.main(async_motions.Config(quick=True, out=str(out)))
    assert (metrics["train_size"], metrics["test_size"]) == (40, 40)
    (run,) = metrics["runs"]
    assert run["multi_rate"]["points"] == 18 and run["union"]["points"] == 90
    for name in ("multi_rate", "union", "logistic", "trees"):
        assert 0 <= run[name]["accuracy"] <= 1
    report = (out / "report.txt").read_text()
    (out / "report.txt").unlink()
    assert _report.render(str(out)) + "\n" == report
