import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ltc_jax


def test_compiled_memory_of_a_known_program():
    """x -> x * 2 + sum(x) on n float64: the arguments are exactly the input."""
    n = 1000

    def fn(x):
        return x * 2 + jnp.sum(x)

    memory = ltc_jax.measure.compiled_memory(fn, jnp.ones(n))
    assert memory.argument_bytes == n * 8
    assert memory.output_bytes == n * 8
    abstract = ltc_jax.measure.compiled_memory(
        fn, jax.ShapeDtypeStruct((n,), jnp.float64)
    )
    assert abstract == memory


@pytest.mark.slow
def test_runtime_peak_sees_a_large_temporary():
    if jax.default_backend() != "cpu" or not ltc_jax.measure.reset_process_peak():
        pytest.skip("needs a CPU backend on an OS with /proc/self/clear_refs")
    n = 50_000_000  # 400 MB of float64 made (and sorted, so materialised) inside

    @jax.jit
    def fn(x):
        return jnp.sort(jnp.arange(n, dtype=jnp.float64) * x)[-1]

    compiled = fn.lower(jnp.ones(())).compile()
    peak = ltc_jax.measure.runtime_peak_bytes(compiled, jnp.ones(()))
    # The compiled temp is one n-vector; XLA's CPU sort works outside it on
    # two more (a copy and a merge buffer), so the call peaks at about 3 n * 8
    # bytes (measured 2.9996 to 3.0025 n * 8). A measure of the whole process,
    # or of nothing, falls outside these bounds.
    assert peak is not None and 0.9 * n * 8 < peak < 3.5 * n * 8
    assert ltc_jax.measure.device_memory_stats() is None
    assert np.isfinite(ltc_jax.measure.process_peak_bytes())


def step_peak_in_fresh_process(observations: int) -> dict:
    """Called in a subprocess: the measured runtime peak of one training step of
    an LTC(2, 16, 2) on 4 sequences of `observations` times and 2 channels, and
    XLA's plan for it."""
    import jax.random as jr

    ts = jnp.arange(observations, dtype=jnp.float32)
    xs = jr.normal(jr.PRNGKey(1), (4, observations, 2))
    path = ltc_jax.InputPath(ts, xs)
    batch = ltc_jax.Batch(path, jnp.array([0, 1, 0, 1]), jnp.ones(4))
    integrator = ltc_jax.make_integrator(
        "rk4", "full", dt0=0.25, max_steps=4 * (observations - 1)
    )
    measurement = ltc_jax.measure.measure(
        ltc_jax.LTC(2, 16, 2, key=jr.PRNGKey(0)),
        batch,
        integrator,
        timed_steps=1,
        warmup_steps=0,
        count_evaluations=False,
    )
    return dict(
        peak=measurement.runtime_peak_bytes,
        note=measurement.runtime_peak_note,
        temp=measurement.temp_bytes,
        arguments=measurement.argument_bytes,
        outputs=measurement.output_bytes,
    )


@pytest.mark.slow
def test_the_cpu_runtime_peak_is_the_steps_own():
    """A step that stores 8,000 RK4 steps of 4 x 16 states (about 2 MB of compiled
    temp memory) peaks, in a fresh process, at its compiled temporaries at
    least and at XLA's whole plan for it (temp, arguments, outputs) plus a few
    pages at most: not at the 6 to 10 MB more that a compiled program's first
    run costs once, whatever the program."""
    if jax.default_backend() != "cpu" or not ltc_jax.measure.reset_process_peak():
        pytest.skip("needs a CPU backend on an OS with /proc/self/clear_refs")
    record = ltc_jax.measure.call_in_subprocess(
        f"{__file__}:step_peak_in_fresh_process", dict(observations=2001)
    )
    assert record["peak"] is not None, record["note"]
    planned = record["temp"] + record["arguments"] + record["outputs"]
    assert record["temp"] > 2**20
    assert record["temp"] <= record["peak"] <= planned + 64 * 1024 + planned // 100
