"""The online learner: causal predictions from a carried state, labels that
arrive late, replay, EWC's consolidation, learning-rate schedules for a stream,
and a stream killed and resumed."""

import os
import signal
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from online_stream import (
    CHANNELS,
    FRAMES,
    STREAMS,
    TS,
    chunk_data,
    make_learner,
    make_model,
    stream,
)

import ltc_jax
from ltc_jax import training


def test_windows_that_share_their_boundary_frame_chain_into_one_solve():
    """Two windows of a stream, the second starting at the first's last frame,
    predicted in one call: the second's outputs are those of one solve of the
    whole span from zero, by the model called directly. A window of another
    stream, or one that does not continue, starts from zero."""
    learner, model = make_learner(), make_model()
    rng = np.random.default_rng(0)
    whole = rng.normal(size=(2 * FRAMES - 1, CHANNELS))
    first, second = whole[:FRAMES], whole[FRAMES - 1 :]
    # Stream 1: the continuation given first (predict orders by end), then the
    # window it continues; stream 0: two windows with a gap between them.
    xs = np.stack([second, first, second, second])
    streams = [1, 1, 0, 0]
    ends = [TS[-1] + FRAMES - 1, TS[-1], TS[-1], TS[-1] + 3 * FRAMES]
    outputs, state = learner.predict(learner.init(model), xs, streams, ends)

    def direct(values):
        ts = np.arange(1.0, len(values) + 1.0)
        data = ltc_jax.datasets.SequenceDataset(
            ts[None], values[None], [len(values)], [0]
        )
        path = ltc_jax.make_input_path(data, **learner.path_options)
        return np.asarray(model(path, integrator=learner.integrator)[0])

    np.testing.assert_allclose(outputs[1], direct(first), rtol=1e-12)
    np.testing.assert_allclose(outputs[0], direct(whole), rtol=1e-10)
    np.testing.assert_allclose(outputs[2], direct(second), rtol=1e-12)  # stream 0
    np.testing.assert_allclose(outputs[3], direct(second), rtol=1e-12)  # a gap
    assert len(state.pending) == 4 and sorted(state.carried.stream) == [0, 1]


@pytest.mark.parametrize("origin", [0.0, 1.7e9])
def test_a_window_continues_its_stream_by_the_grid_not_the_epoch(origin):
    """Whether a window starts from its stream's carried state depends on the
    gap between its first frame and that stream's last end, measured against
    the grid's spacing (1 here), whatever the times' magnitude: at Unix
    seconds as at 0."""
    learner, model = make_learner(), make_model()
    xs = np.random.default_rng(1).normal(size=(2, FRAMES, CHANNELS))
    first_end = origin + TS[-1]
    for gap, carried in [(0.0, True), (1.0, True), (1.5, False), (-1.0, False)]:
        state = learner.init(model)
        _, state = learner.predict(state, xs[:1], [0], [first_end])
        end = first_end + (TS[-1] - TS[0]) + gap  # its first frame: the gap on
        _, state = learner.predict(state, xs[1:], [0], [end])
        y0 = state.pending.y0[1]
        assert np.any(y0 != 0) == carried, (origin, gap)


def test_end_times_rounded_by_float32_at_unix_seconds_are_refused():
    """Unix seconds in float32 are multiples of 128 s, far coarser than the
    grid's step of 1: such end times were rounded before they arrived, and
    are refused; the same times in float64 are not, nor float32 times small
    enough to keep a tenth of a step."""
    learner, model = make_learner(), make_model()
    xs = np.random.default_rng(1).normal(size=(1, FRAMES, CHANNELS))
    end = np.array([1.7e9 + 60.16])
    state = learner.init(model)
    with pytest.raises(ValueError, match="end_time was given in float32, which "
                       "resolves only steps of 128"):  # fmt: skip
        learner.predict(state, xs, [0], end.astype(np.float32))
    _, state = learner.predict(state, xs, [0], end)  # float64: exact
    assert state.pending.end_time.tolist() == [1.7e9 + 60.16]
    small = np.array([1000.5], np.float32)  # steps of 6e-5 there
    _, state = learner.predict(learner.init(model), xs, [0], small)
    assert state.pending.end_time.tolist() == [1000.5]


def test_labels_before_their_windows_end_and_other_bad_input_are_refused():
    learner, model = make_learner(), make_model()
    state = learner.init(model)
    xs, labels = chunk_data(0)
    streams, ends = np.arange(STREAMS), np.full(STREAMS, 8.0)
    with pytest.raises(ValueError, match="has not ended at now=7.0"):
        learner.predict(state, xs, streams, ends, now=7.0)
    _, state = learner.predict(state, xs, streams, ends, now=8.0)
    with pytest.raises(ValueError, match="before the window ended"):
        learner.label(state, streams, ends + [0.0, 0.0, 1.0], labels, now=8.5)
    with pytest.raises(ValueError, match="No pending window of stream 0 ends at 16"):
        learner.label(state, [0], [16.0], [1], now=16.0)
    with pytest.raises(ValueError, match="cannot go back"):
        learner.label(state, streams, ends, labels, now=4.0)
    # An earlier window without now: named as out of order, not as now's.
    with pytest.raises(ValueError, match="The windows end by 4.0, before the str"):
        learner.predict(state, xs, streams, np.full(STREAMS, 4.0))
    with pytest.raises(ValueError, match="does not end after that stream's latest"):
        learner.predict(state, xs, streams, ends, now=9.0)
    with pytest.raises(ValueError, match="stream 0 ending at 16.0 is given twice"):
        learner.predict(state, xs[:2], [0, 0], [16.0, 16.0], now=16.0)
    with pytest.raises(ValueError, match="labelled twice in one call"):
        learner.label(state, [0, 0], [8.0, 8.0], [0, 1], now=9.0)
    with pytest.raises(ValueError, match=r"integers in \[0, 2\)"):
        learner.label(state, streams, ends, [0, 1, 2], now=9.0)
    with pytest.raises(ValueError, match=r"got \[0\. 1\.\] \(float64\)"):
        learner.label(state, streams[:2], ends[:2], [0.0, 1.0], now=9.0)
    with pytest.raises(ValueError, match="nearest it ends at 8.0: give end times in"):
        learner.label(state, [0], [8.0 + 1e-7], [1], now=9.0)  # float32's rounding
    with pytest.raises(ValueError, match=r"ends at 8.5: .* predicted with\.$"):
        learner.label(state, [0], [8.5], [1], now=9.0)  # no hint: not rounding
    with pytest.raises(ValueError, match="Streams must be integers.*'A'"):
        learner.predict(state, xs[:1], np.array(["A"]), [16.0], now=16.0)
    with pytest.raises(ValueError, match=r"Streams must be integers.*0.5"):
        learner.predict(state, xs[:1], np.array([0.5]), [16.0], now=16.0)
    whole, _ = learner.predict(state, xs[:1], np.array([0.0]), [16.0], now=16.0)
    assert whole.shape == (1, 2)  # a float stream that is a whole number
    with pytest.raises(ValueError, match=r"must be \(n, 8, channels\)"):
        learner.predict(state, xs[:, :5], streams, ends + 8, now=16.0)
    with pytest.raises(ValueError, match=r"end_time\[1\] is nan"):
        learner.predict(state, xs, streams, [16.0, np.nan, 16.0], now=16.0)
    with pytest.raises(ValueError, match="now must be a finite time; got nan"):
        learner.label(state, streams, ends, labels, now=np.nan)
    with pytest.raises(NotImplementedError, match="DiscreteHazardLoss reads"):
        make_learner(objective=training.DiscreteHazardLoss(horizon=60.0))
    with pytest.raises(NotImplementedError, match="EventTimeLoss reads"):
        make_learner(objective=training.EventTimeLoss(scale=1.0))
    for ts in ([8.0], [1.0, 3.0, 2.0], np.ones((2, 4))):  # one time, unsorted, 2-D
        with pytest.raises(ValueError, match="increasing grid of the windows' times"):
            make_learner(ts=ts)
    state = learner.label(state, streams, ends, labels, now=8.0)  # at the end: ok
    assert len(state.fresh) == STREAMS and not len(state.pending)
    with pytest.raises(ValueError, match="No pending window"):  # labelled once
        learner.label(state, streams, ends, labels, now=9.0)


def test_the_reservoir_keeps_each_window_with_equal_probability():
    """Algorithm R: after N windows, each is in a buffer of capacity C with
    probability C / N (a binomial check over many seeds)."""
    learner, model = make_learner(replay=training.Replay(capacity=4)), make_model()
    empty = learner.init(model)
    n, runs = 12, 600
    windows = empty.fresh.resized(n)
    windows = eqx.tree_at(lambda b: b.stream, windows, np.arange(n))
    counts = np.zeros(n)
    for seed in range(runs):
        draw = np.random.default_rng(seed)
        state = empty
        for first in range(0, n, 5):  # updates of 5, 5 and 2 windows
            part = windows.take(np.arange(first, min(first + 5, n)))
            state = learner._remember(state, part, draw)
            state = state.replace(seen=state.seen + len(part))
        assert len(state.replay) == 4
        counts[state.replay.stream] += 1
    p = 4 / n
    # Each count is Binomial(600, 1/3): sd 11.5; 4.5 sd is a 1e-5 tail.
    assert np.all(np.abs(counts - runs * p) < 4.5 * np.sqrt(runs * p * (1 - p)))


def test_an_update_consolidates_the_fisher_of_its_windows_at_the_new_parameters():
    """With EWC every 3 windows, one update on 3 labelled windows leaves a
    penalty anchored at the updated model whose weights are the diagonal Fisher
    of those windows (from the states they were predicted from) there."""
    learner = make_learner(replay=None, ewc=training.EWC(strength=2.0, every=3))
    state = learner.init(make_model())
    xs, labels = chunk_data(0)
    streams, ends = np.arange(STREAMS), np.full(STREAMS, 8.0)
    _, state = learner.predict(state, xs, streams, ends)
    _, state = learner.predict(state, chunk_data(1)[0], streams, ends + 8)
    state = learner.label(state, streams, ends + 8, labels, now=16.0)
    windows = state.fresh
    assert np.any(windows.y0 != 0)  # the second windows carry the first's state
    state, record = learner.update(state)
    assert record["windows"] == 3 and record["steps"] == 1
    assert state.penalty is not None and state.fisher_sum is None
    assert state.penalty.strength == 2.0
    assert training.parameter_digest(state.penalty.anchor) == (
        training.parameter_digest(state.model)
    )
    batch = ltc_jax.Batch(
        path=learner._path(windows.xs, jnp.float64),
        labels=jnp.asarray(windows.labels),
        weights=jnp.ones(3),
        y0=jnp.asarray(windows.y0),
    )
    expected = training.diagonal_fisher(state.model, batch, learner.integrator)
    for got, want in zip(
        jax.tree.leaves(state.penalty.weights), jax.tree.leaves(expected), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-300)


def _learning_rates(optimizer, steps):
    """The learning rate of each step, read from Adam's first update on a
    constant gradient (bias-corrected, it is the rate times g / (|g| + eps));
    optax keeps the rate in float32, hence the tolerance of 1e-6."""
    params = jnp.zeros(())
    state = optimizer.init(params)
    rates = []
    for _ in range(steps):
        with jax.numpy_dtype_promotion("standard"):  # as the training step does
            update, state = optimizer.update(jnp.ones(()), state, params)
        rates.append(-float(update) * (1 + 1e-8))
    return np.array(rates)


def test_a_stream_learning_rate_is_constant_or_restarts_warm():
    constant = training.make_optimizer(0.1, None, clip_norm=None)
    np.testing.assert_allclose(_learning_rates(constant, 6), 0.1, rtol=1e-6)
    restarts = training.make_optimizer(0.1, None, restart_steps=4, clip_norm=None)
    k = np.arange(10) % 4
    expected = 0.1 * (0.01 + 0.99 * 0.5 * (1 + np.cos(np.pi * k / 4)))
    np.testing.assert_allclose(_learning_rates(restarts, 10), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="not both"):
        training.make_optimizer(0.1, 100, restart_steps=4)
    assert isinstance(constant, optax.GradientTransformation)


@pytest.mark.slow
def test_a_stream_killed_and_resumed_continues_exactly(tmp_path):
    """SIGKILL the stream in the middle of a chunk, resume it from its last
    checkpoint: the model, the optimiser state, the buffers, the EWC penalty
    and the carried states are bit for bit those of a stream never stopped."""
    whole = stream(tmp_path / "whole")
    script = os.path.join(os.path.dirname(__file__), "online_stream.py")
    killed = tmp_path / "killed"
    result = subprocess.run(
        [sys.executable, script, str(killed), "--kill-after", "4"],
        capture_output=True,
        timeout=600,
    )
    assert result.returncode == -signal.SIGKILL
    latest = training.list_checkpoints(killed)[-1]
    # Chunks 0 to 4 predicted, 2 to 4 labelled and updated: 5 * 3 + 3 * 3 + 3.
    assert latest.endswith(f"step-{8 * STREAMS + 3:08d}")
    resumed = stream(killed)
    assert whole.penalty is not None and len(whole.replay) == 5
    names = ("now", "predicted", "labelled", "seen", "updates", "since_consolidation")
    for name in names:
        assert getattr(resumed, name) == getattr(whole, name)
    assert resumed.train.step == whole.train.step
    parts = ("train", "penalty", "fisher_sum", "pending", "fresh", "replay", "carried")
    for part in parts:
        assert training.parameter_digest(getattr(resumed, part)) == (
            training.parameter_digest(getattr(whole, part))
        ), part


def test_a_resumed_stream_takes_the_learners_settings_or_names_what_differs(
    tmp_path,
):
    """A stream saved with replay, EWC and Adam: loaded by a learner with
    another optimiser, the optimiser state that differs is named; with a replay
    smaller than the windows saved, the capacity is; with another EWC strength,
    the penalty takes the learner's. Checkpoints beyond `keep` are deleted."""
    whole = stream(tmp_path)
    assert len(training.list_checkpoints(tmp_path)) == 2  # the default keep
    assert whole.penalty is not None and len(whole.replay) == 5
    model = make_model()
    with pytest.raises(ltc_jax.CheckpointError, match=r"\['opt_state'\].*optimiser"):
        training.load_online_state(
            tmp_path, make_learner(optimizer=optax.sgd(1e-2, momentum=0.9)), model
        )
    with pytest.raises(ltc_jax.CheckpointError, match="5 replayed windows and the "):
        training.load_online_state(
            tmp_path, make_learner(replay=training.Replay(capacity=4)), model
        )
    stronger = make_learner(ewc=training.EWC(strength=25.0, every=4))
    state, _, _ = training.load_online_state(tmp_path, stronger, model)
    assert state.penalty.strength == 25.0
    assert whole.penalty.strength == 10.0
    for step in range(3):
        training.save_online_state(tmp_path / "kept", state, keep=3, step=step)
        state = state.replace(updates=state.updates + 1)
    training.save_online_state(tmp_path / "kept", state, keep=3)
    assert len(training.list_checkpoints(tmp_path / "kept")) == 3


@pytest.mark.slow
def test_the_docs_example_learns_from_a_stream(tmp_path):
    """The "Learning online" example of the docs' sensor-streams page, as
    written (float32, in its own process): every window it predicts is labelled
    and trained on once, replay and EWC are engaged, and its newest checkpoint
    resumes to the state it ended in."""
    import pathlib
    import re

    page = pathlib.Path(__file__).parents[1] / "docs" / "concepts" / "streams.md"
    section = page.read_text().split("## Learning online", 1)[1]
    example = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    check = (
        "\nassert state.seen == state.predicted == len(data) > 0\n"
        "assert len(state.replay) == state.seen and state.penalty is not None\n"
        "back, *_ = training.load_online_state('online-checkpoints', learner, model)\n"
        "assert training.parameter_digest(back.train.model) == "
        "training.parameter_digest(state.train.model)\n"
    )
    script = tmp_path / "example.py"
    script.write_text(example + check)
    subprocess.run([sys.executable, str(script)], check=True, timeout=600, cwd=tmp_path)
