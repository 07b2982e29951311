import dataclasses
import os
import sys
import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import max_relative_error, quiet_fit

import ltc_jax
from ltc_jax._batch import epoch_order
from ltc_jax.datasets import load_japanese_vowels, standardize


@pytest.fixture(scope="module")
def small_vowels():
    train, test = standardize(*load_japanese_vowels())
    order = np.random.default_rng(0).permutation(len(train))
    return train.take(order[:64]), test.take(np.arange(40))


def test_short_training_lowers_the_loss(small_vowels, getkey):
    train, _ = small_vowels
    model = ltc_jax.LTC(12, 8, 9, key=getkey())
    # RK4 at a quarter frame keeps dt0 * decay_bound inside its stability region
    # (Heun at one frame diverges on this model).
    integrator = ltc_jax.make_integrator("rk4", dt0=0.25, max_steps=128)
    before = ltc_jax.evaluate(model, train, integrator=integrator)["loss"]
    optimizer = ltc_jax.training.make_optimizer(5e-2, total_steps=40)
    model, history = quiet_fit(
        model, train, integrator, optimizer=optimizer, epochs=10, batch_size=16
    )
    after = ltc_jax.evaluate(model, train, integrator=integrator)["loss"]
    assert after < 0.7 * before
    assert history[-1]["loss"] < history[0]["loss"]
    # Fixed steps of dt0 = 1/4 frame: a batch takes four steps per frame of its
    # longest sequence, less its first.
    order = epoch_order(0, 9, len(train))
    longest = [train.lengths[order[i : i + 16]].max() - 1 for i in range(0, 64, 16)]
    assert history[-1]["num_steps"] == 4 * np.mean(longest)


def test_batches_fill_up_the_last_batch(small_vowels):
    train, _ = small_vowels
    sizes = [
        (b.path.lengths.shape[0], float(b.weights.sum()))
        for b in ltc_jax.batches(train, 24)
    ]
    assert sizes == [(24, 24.0), (24, 24.0), (24, 16.0)]


def _long_sequences(n=16, times=200):
    rng = np.random.default_rng(0)
    return ltc_jax.datasets.SequenceDataset(
        ts=np.broadcast_to(np.arange(times, dtype=float), (n, times)).copy(),
        xs=rng.normal(size=(n, times, 2)),
        lengths=np.full(n, times, dtype=np.int32),
        labels=rng.integers(0, 2, n).astype(np.int32),
        class_names=("a", "b"),
    )


def _unstable(key):
    """Euler with dt0 = 1 and tau = 0.01: each step multiplies the state by about
    |1 - dt0/tau| = 99, which overflows even float64 over 200 steps."""
    model = ltc_jax.LTC(2, 4, 2, tau_init=(0.01, 0.011), key=key)
    integrator = ltc_jax.make_integrator("euler", dt0=1.0, max_steps=200)
    return model, integrator, ltc_jax.training.make_optimizer(1e-2, total_steps=10)


def test_unstable_fixed_step_is_detected_and_named(getkey, tmp_path):
    model, integrator, optimizer = _unstable(getkey())
    with (
        pytest.warns(ltc_jax.training.StabilityWarning),
        pytest.raises(
            ltc_jax.DivergenceError,
            match=r"solver Euler, dt0=1.0\): The solve diverged",
        ),
    ):
        quiet_fit(
            model,
            _long_sequences(),
            integrator,
            optimizer=optimizer,
            batch_size=8,
            checkpoint_dir=tmp_path,
        )
    assert ltc_jax.training.list_checkpoints(tmp_path) == []  # nothing broken was saved


def test_non_finite_step_leaves_parameters_unchanged(getkey):
    """Without the state check, the diverged solve overflows; the step sees the
    non-finite loss and keeps the parameters."""
    model, integrator, optimizer = _unstable(getkey())
    integrator = dataclasses.replace(integrator, check_state=False)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    step = eqx.filter_jit(ltc_jax.training.make_train_step(optimizer, integrator))
    batch = next(ltc_jax.batches(_long_sequences(), 8))
    new_model, new_state, loss, _, finite = step(model, opt_state, batch)
    assert not bool(finite) and not np.isfinite(float(loss))
    assert max_relative_error(new_model, model) == 0.0


def test_a_cfc_non_finite_step_names_its_recurrence_not_a_solver(getkey):
    """A CfC solves no ODE: its non-finite step is explained by its recurrence,
    with no solver named."""
    data = _long_sequences()
    model = ltc_jax.CfC(data.num_channels, 4, data.num_classes, key=getkey())
    integrator = ltc_jax.make_integrator("tsit5", rtol=1e-3, atol=1e-4)  # unused
    # The first update moves every weight by about 1e308: the next sums overflow.
    optimizer = ltc_jax.training.make_optimizer(1e308, None)
    with pytest.raises(ltc_jax.NonFiniteLossError) as raised:
        ltc_jax.fit(
            model,
            data,
            integrator=integrator,
            optimizer=optimizer,
            epochs=2,
            batch_size=8,
            progress=ltc_jax.training.NoFitProgress(),
        )
    message = str(raised.value)
    assert "CfC, no ODE solve" in message and "recurrence" in message
    assert "clamped to state_gradient_bound=1e+06" in message
    assert "solver" not in message and "Tsit5" not in message
    # With the clamp turned off the message says nothing clamps the gradient.
    from ltc_jax._failures import non_finite_message

    unclamped = ltc_jax.CfC(
        data.num_channels,
        4,
        data.num_classes,
        state_gradient_bound=None,
        key=getkey(),
    )
    message = non_finite_message(1, 2, integrator, unclamped)
    assert "grows like a power of their number" in message
    assert "state_gradient_bound=None: nothing clamps it" in message


def test_checkpoint_round_trip_and_corruption(getkey, tmp_path):
    model = ltc_jax.LTC(3, 4, 2, key=getkey())
    other = ltc_jax.LTC(3, 4, 2, key=getkey())
    ltc_jax.training.save_checkpoint(tmp_path, 1, model, dict(epoch=1))
    second = ltc_jax.training.save_checkpoint(tmp_path, 2, other, dict(epoch=2))
    ltc_jax.training.save_checkpoint(tmp_path, 3, other, dict(epoch=3), keep=2)
    assert [
        os.path.basename(p) for p in ltc_jax.training.list_checkpoints(tmp_path)
    ] == [
        "step-00000002",
        "step-00000003",
    ]
    restored, meta = ltc_jax.training.load_checkpoint(second, model)
    assert meta["epoch"] == 2 and max_relative_error(restored, other) == 0.0
    state = os.path.join(second, "state.eqx")
    with open(state, "r+b") as file:
        file.truncate(os.path.getsize(state) // 2)
    with pytest.raises(ltc_jax.CheckpointError, match="truncated or corrupted"):
        ltc_jax.training.load_checkpoint(second, model)


def test_tolerance_schedule_changes_the_tolerances_used(small_vowels, getkey):
    train, _ = small_vowels
    base = ltc_jax.make_integrator("tsit5", rtol=1e-2, atol=1e-3)
    schedule = ltc_jax.training.ToleranceSchedule(
        base, start_epochs=(0, 2), rtols=(1e-2, 1e-6), atols=(1e-3, 1e-8)
    )
    assert schedule.final.stepsize_controller.rtol == 1e-6
    model = ltc_jax.LTC(12, 8, 9, key=getkey())
    _, history = quiet_fit(model, train, schedule, epochs=3, batch_size=32)
    assert [(h["rtol"], h["atol"]) for h in history] == [
        (1e-2, 1e-3),
        (1e-2, 1e-3),
        (1e-6, 1e-8),
    ]
    # Tighter tolerances take more steps on the same data.
    assert history[2]["num_steps"] > 1.5 * history[1]["num_steps"]
    with pytest.raises(ValueError, match="start at 0"):
        ltc_jax.training.ToleranceSchedule(
            base, start_epochs=(1,), rtols=(1e-3,), atols=(1e-3,)
        )
    with pytest.raises(ValueError, match="adaptive"):
        ltc_jax.training.ToleranceSchedule(
            ltc_jax.make_integrator("heun", dt0=0.1),
            start_epochs=(0,),
            rtols=(1e-3,),
            atols=(1e-3,),
        )


def test_backsolve_blow_up_is_named(getkey):
    """A stable forward (the fused step) with an expansive reverse solve: the
    error points at backsolve, not at the forward step size."""
    model = ltc_jax.LTC(2, 4, 2, tau_init=(0.05, 0.1), key=getkey())
    integrator = ltc_jax.make_integrator(
        "fused", "backsolve", dt0=1.0, max_steps=200, backward_solver="heun"
    )
    data = _long_sequences()
    with pytest.raises(ltc_jax.NonFiniteLossError, match="expansive backwards"):
        quiet_fit(model, data, integrator, batch_size=8)


def test_progress_bar_redraws_a_log_at_its_interval(capsys, monkeypatch):
    """Written to a file or a pipe (not a terminal), the bar is redrawn every
    `log_interval` seconds, not at every step: a log keeps every redraw. In a
    notebook (an IPython kernel) it is redrawn live."""
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    # A state whose epoch so far has a mean loss and accuracy of 0.5.
    at_half = ltc_jax.training.TrainState(
        model=None,
        opt_state=None,
        best_model=None,
        totals=dict(weight=4.0, loss=2.0, correct=2.0),
    )

    def redraws(log_interval):
        progress = ltc_jax.training.TqdmFitProgress(log_interval=log_interval)
        bar = progress.init(at_half, total_steps=500)
        for _ in range(500):
            progress.step(bar, at_half)
        progress.close(bar)
        log = capsys.readouterr().err
        assert "500/500" in log and "loss=0.5000" in log
        return log.count("\r")

    assert redraws(3600.0) <= 3  # the first draw, the last and the close
    assert redraws(0.0) > 100  # the control: no interval, a redraw per step
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    bar = ltc_jax.training.TqdmFitProgress(log_interval=3600.0).init(at_half, 10)
    assert bar.mininterval == 0.1
    bar.close()


def test_progress_bar_shows_accuracy_only_where_there_are_classes(capsys):
    """A classification epoch's bar reads its accuracy; a regression epoch
    (no `correct` among the objective's metrics) shows none, not `acc=0.000`."""

    def shown(totals):
        state = ltc_jax.training.TrainState(
            model=None, opt_state=None, best_model=None, totals=totals
        )
        progress = ltc_jax.training.TqdmFitProgress(log_interval=0.0)
        bar = progress.init(state, total_steps=1)
        progress.step(bar, state)
        progress.close(bar)
        return capsys.readouterr().err

    assert "acc=0.750" in shown(dict(weight=4.0, loss=2.0, correct=3.0))
    regression = shown(dict(weight=4.0, loss=2.0))
    assert "loss=0.5000" in regression and "acc" not in regression


def test_regression_metrics_hold_no_accuracy():
    """`SupervisedLoss` counts correct predictions for class labels only: a
    regression's metrics hold none, a classification's the count recomputed
    from the model's own predictions."""
    model = ltc_jax.LTC(2, 3, 2, key=jax.random.key(0))
    ts = jnp.linspace(0.0, 1.0, 5)
    xs = jnp.ones((2, 5, 2))
    path = ltc_jax.InputPath(ts, xs)
    integrator = ltc_jax.make_integrator("rk4", dt0=0.25, max_steps=8)
    objective = ltc_jax.training.SupervisedLoss()
    weights = jnp.ones(2)
    _, metrics = objective(
        model, ltc_jax.Batch(path, jnp.zeros((2, 2)), weights), integrator
    )
    assert "correct" not in metrics
    # Labels that are the model's own predictions, and their opposites.
    outputs = model.outputs(model.solve(path, integrator=integrator).ys)
    predicted = jnp.argmax(outputs, -1).astype(jnp.int32)
    for labels, expected in ((predicted, 2.0), (1 - predicted, 0.0)):
        batch = ltc_jax.Batch(path, labels, weights)
        assert float(objective(model, batch, integrator)[1]["correct"]) == expected


class _LossOnly(ltc_jax.training.AbstractObjective):
    """A classification loss that counts no correct predictions."""

    def __call__(self, model, batch, integrator):
        loss, metrics = ltc_jax.training.SupervisedLoss()(model, batch, integrator)
        return loss, {k: v for k, v in metrics.items() if k != "correct"}


def test_evaluate_reports_no_accuracy_for_an_objective_without_one():
    """`evaluate` on class labels with an objective that reports no `correct`
    gives accuracy NaN (not a `KeyError`), and the same loss as the default
    objective, which does report it."""
    model = ltc_jax.LTC(2, 3, 2, key=jax.random.key(0))
    data = ltc_jax.datasets.SequenceDataset.from_sequences(
        [np.linspace(0.0, 1.0, 5)] * 4,
        [np.ones((5, 2)) * i for i in range(4)],
        ["a", "b", "a", "b"],
    )
    integrator = ltc_jax.make_integrator("rk4", dt0=0.25, max_steps=8)
    plain = ltc_jax.evaluate(model, data, integrator=integrator, batch_size=2)
    bare = ltc_jax.evaluate(
        model, data, integrator=integrator, batch_size=2, objective=_LossOnly()
    )
    assert 0 <= plain["accuracy"] <= 1 and np.isnan(bare["accuracy"])
    assert bare["loss"] == plain["loss"]


def test_fit_names_arguments_of_the_wrong_kind():
    """Without the tests' run-time type checks (in a fresh interpreter, as a
    user runs it): `progress=False` and a `StreamWindows` in place of its
    `.dataset` are refused by name, not by an AttributeError inside `fit`."""
    import subprocess
    import sys

    script = """
import numpy as np, jax.random as jr, ltc_jax
from ltc_jax.datasets import simulate_plant, stream_windows
windows = stream_windows(
    simulate_plant(machines=1, sensors=2, seed=0, simulated_seconds=200.0),
    20.0, horizon_seconds=0.0, clock_hz=0.5,
)
data = windows.dataset
model = ltc_jax.LTC(data.num_channels, 2, 2, key=jr.key(0))
integrator = ltc_jax.make_integrator("fused", dt0=2.0, max_steps=16)
options = dict(integrator=integrator, optimizer=ltc_jax.training.make_optimizer(
    1e-2, 1), epochs=1, batch_size=2)
for train, progress in [(windows, ltc_jax.training.NoFitProgress()), (data, False)]:
    try:
        ltc_jax.fit(model, train, progress=progress, **options)
    except TypeError as error:
        print(error)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    lines = done.stdout.splitlines()
    assert lines == [
        "training needs a SequenceDataset; got a StreamWindows (its .dataset is one).",
        "progress and monitors must be ltc_jax.training.AbstractMonitor objects; "
        "got False (no progress: progress=ltc_jax.training.NoFitProgress()).",
    ], done.stderr
