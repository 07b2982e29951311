"""A small prequential stream for the online learner's tests: three streams of
eight-frame windows, labels arriving two chunks after their windows end, replay
and EWC on, a checkpoint after every chunk. Run as a script it streams into
the folder given, and with `--kill-after K` kills itself (SIGKILL) in the
middle of chunk K + 1, after chunk K's checkpoint."""

import os
import signal
import sys

import jax
import jax.random as jr
import numpy as np

import ltc_jax
from ltc_jax import training


jax.config.update("jax_enable_x64", True)

FRAMES, CHANNELS, STREAMS, CHUNKS, DELAY = 8, 3, 3, 8, 2
TS = np.arange(1.0, FRAMES + 1.0)


def make_learner(**changes):
    """The learner of the stream: fused fixed steps, replay and EWC."""
    options = dict(
        ts=TS,
        optimizer=training.make_optimizer(1e-2, None, restart_steps=5),
        integrator=ltc_jax.make_integrator("fused", "checkpoint", dt0=0.5),
        batch_size=4,
        replay=training.Replay(capacity=5),
        ewc=training.EWC(strength=10.0, every=4),
    )
    return training.OnlineLearner(**(options | changes))


def make_model():
    return ltc_jax.LTC(CHANNELS, 5, 2, key=jr.key(0))


def chunk_data(chunk):
    """Chunk `chunk`'s windows (one per stream, ending at `(chunk + 1) *
    FRAMES`) and their labels: whether the stream's mean input is positive."""
    rng = np.random.default_rng([7, chunk])
    xs = rng.normal(size=(STREAMS, FRAMES, CHANNELS)) + rng.normal(size=(STREAMS, 1, 1))
    labels = (xs.mean(axis=(1, 2)) > 0).astype(np.int32)
    return xs, labels


def stream(directory, kill_after=None):
    """Run the stream into `directory` (resuming from its newest checkpoint if
    there is one); returns the final state."""
    learner, model = make_learner(), make_model()
    state, first = learner.init(model), 0
    if training.list_checkpoints(directory):
        state, meta, _ = training.load_online_state(directory, learner, model)
        first = meta["chunk"] + 1
    for chunk in range(first, CHUNKS):
        now = float((chunk + 1) * FRAMES)
        xs, _ = chunk_data(chunk)
        ends = np.full(STREAMS, now)
        _, state = learner.predict(state, xs, np.arange(STREAMS), ends, now)
        if kill_after is not None and chunk == kill_after + 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if chunk >= DELAY:  # the labels of the windows that ended DELAY ago
            _, labels = chunk_data(chunk - DELAY)
            ended = np.full(STREAMS, (chunk - DELAY + 1) * FRAMES, float)
            state = learner.label(state, np.arange(STREAMS), ended, labels, now)
        state, _ = learner.update(state)
        training.save_online_state(directory, state, chunk=chunk)
    return state


if __name__ == "__main__":
    kill = (
        int(sys.argv[3])
        if len(sys.argv) > 3 and sys.argv[2] == "--kill-after"
        else None
    )
    stream(sys.argv[1], kill)
