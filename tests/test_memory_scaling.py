"""How the compiled memory of a training step grows with the number of solver steps,
per gradient mode: deterministic figures from XLA's memory analysis (nothing runs).

Every step here is compiled on abstract inputs (`jax.ShapeDtypeStruct`) of as many
samples as steps, so the sizes can reach a day of ECG at 250 Hz without allocating
it; the input is an argument of the step and never counts as temp memory.
"""

import math

import equinox as eqx
import jax
import jax.random as jr
import pytest

import ltc_jax


BATCH, HIDDEN = 2, 8
RATE_HZ = 250.0
GIB = 2**30


def _temp_bytes(mode, steps, *, max_steps=None, checkpoints=None, batch=BATCH):
    """Compiled temp bytes of one float32 training step over `steps` RK4 steps of
    1/250 s, on an abstract ECG-like input of `steps + 1` samples."""
    with jax.enable_x64(False):
        model = ltc_jax.LTC(1, HIDDEN, 1, key=jr.PRNGKey(0))
    data = ltc_jax.measure.abstract_batch(batch, steps + 1, 1, output_size=1)
    integrator = ltc_jax.make_integrator(
        "rk4",
        mode,
        dt0=1 / RATE_HZ,
        max_steps=steps if max_steps is None else max_steps,
        checkpoints=checkpoints,
    )
    optimizer = ltc_jax.training.make_optimizer(1e-3, 1)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    step = ltc_jax.training.make_train_step(optimizer, integrator)
    return ltc_jax.measure.compiled_memory(step, model, opt_state, data).temp_bytes


def _state_bytes(batch=BATCH):
    return batch * HIDDEN * 4  # one float32 state of the batch


@pytest.mark.slow
def test_backsolve_memory_is_flat_in_steps():
    """Done when: backsolve's temp bytes at 1e5 steps are at most 1.05x those at
    1e2 steps."""
    assert _temp_bytes("backsolve", 100_000) <= 1.05 * _temp_bytes("backsolve", 100)


@pytest.mark.slow
def test_full_storage_grows_linearly_in_steps():
    """Every step stores the solver state: temp is affine in the steps, with a slope
    of at least one batch state (float32) per step."""
    small, medium, large = (_temp_bytes("full", n) for n in (1_000, 2_000, 4_000))
    slope = (medium - small) / 1_000
    assert large - medium == pytest.approx(2 * (medium - small), rel=0.01)
    assert _state_bytes() <= slope <= 4 * _state_bytes()


def _default_checkpoints(max_steps):
    """Checkpoints diffrax stores by default, derived from Stumm and Walther (2010,
    Eq. 2.2): the least c with 2 * max_steps < (c + 1)(c + 2)."""
    c = 1
    while (c + 1) * (c + 2) <= 2 * max_steps:
        c += 1
    return c


@pytest.mark.slow
def test_default_checkpointing_grows_like_sqrt_of_max_steps_not_log():
    """diffrax's default `RecursiveCheckpointAdjoint(checkpoints=None)` stores
    c(max_steps) ~ sqrt(2 max_steps) states, not O(log max_steps). From 64 to 1,024
    max_steps c grows by 34, from 1,024 to 16,384 by 136: four times as much, where
    a logarithmic law would add the same at each factor of 16."""
    sizes = (64, 1_024, 16_384)
    counts = [_default_checkpoints(n) for n in sizes]
    temps = [_temp_bytes("checkpoint", 16, max_steps=n) for n in sizes]
    low, high = temps[1] - temps[0], temps[2] - temps[1]
    # Memory grows with the stored states: the increments of temp memory stand
    # near the ratio of the increments of c, 136 / 34 = 4 (plus bookkeeping that
    # grows with max_steps); a logarithmic law would give 1, a linear one 16.
    sqrt_law = (counts[2] - counts[1]) / (counts[1] - counts[0])
    linear_law = (sizes[2] - sizes[1]) / (sizes[1] - sizes[0])
    assert 0.75 * sqrt_law < high / low < 0.5 * linear_law
    per_state = high / (counts[2] - counts[1])
    assert _state_bytes() <= per_state <= 8 * _state_bytes()
    # Memory follows max_steps, not the 16 steps the solve takes.
    assert temps[2] > 3 * temps[0]


@pytest.mark.slow
def test_logarithmic_checkpoints_give_logarithmic_memory():
    """Asking for ceil(log2(max_steps)) checkpoints gives memory logarithmic in
    max_steps: each factor of 4 adds two stored states. A batch of 64 makes a state
    (2 KiB) large against XLA's per-buffer bookkeeping, which moves by a few hundred
    bytes between compilers."""
    batch = 64
    sizes = (1_024, 4_096, 16_384)
    temps = [
        _temp_bytes("checkpoint", n, checkpoints=math.ceil(math.log2(n)), batch=batch)
        for n in sizes
    ]
    increments = (temps[1] - temps[0], temps[2] - temps[1])
    state = _state_bytes(batch)
    assert abs(increments[0] - increments[1]) <= state / 2  # 2 checkpoints each
    for increment in increments:
        assert state <= increment / 2 <= 4 * state


@pytest.mark.slow
def test_a_day_of_ecg_at_250_hz_fits_in_under_a_gib_beyond_the_input():
    """21.6 million steps (24 h at 250 Hz), batch 1, with an input of as many
    samples: backsolve and default checkpointing each need under 1 GiB of temp
    memory, while full storage needs a state per step."""
    steps = 21_600_000
    backsolve = _temp_bytes("backsolve", steps, batch=1)
    checkpoint = _temp_bytes("checkpoint", steps, batch=1)
    assert backsolve < GIB and checkpoint < GIB
    assert backsolve < 1e-3 * steps  # not even a byte per step
    full = _temp_bytes("full", steps, batch=1)
    assert full >= steps * _state_bytes(batch=1)
