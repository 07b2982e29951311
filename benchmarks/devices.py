"""Data-parallel throughput: training steps per second on 1, 2 and 4 devices.

Each device count that divides the batch runs in its own process (the count of
CPU devices is fixed when JAX starts:
`XLA_FLAGS=--xla_force_host_platform_device_count=N` on CPU; on GPU the first N
GPUs). The step is a training step on JapaneseVowels (Tsit5 at rtol 1e-3,
atol 1e-4, as with the main job's `--rtol 1e-3`; `checkpoint`, 64 units, the
derived readout times and batching), on one batch split over a
`ltc_jax.training.data_mesh` of N devices, with the model and optimiser state
replicated.

On a CPU the "devices" are shares of the same cores: with 2 cores, 2 or 4
devices can only add the cost of splitting and reducing, so the figures show
that overhead, not a speed-up. On several GPUs they show the scaling.

    python -m benchmarks.devices            # batch 64, about a minute per count
    python -m benchmarks.devices --quick    # seconds

Prints the median step seconds and steps per second per device count, with the
machine's core count, and writes `results/devices/<run>/` (`metrics.json`, and
`report.txt` with the table by `experiments._report`).
"""

import dataclasses
import statistics

import equinox as eqx
import jax
import tyro

import ltc_jax
from experiments import _problems, _run


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """Training steps per second over 1, 2 and 4 devices.

    `--quick`: batch 8, 8 units, 3 timed steps.
    """

    device_counts: tuple[int, ...] = (1, 2, 4)
    batch_size: int = 64
    hidden_size: int = 64
    repeats: int = 10
    """Timed steps per device count, after one compiling step."""
    backend: str = "cpu"
    """`cpu` (forces N host devices) or `gpu` (uses the first N GPUs)."""


QUICK = dict(batch_size=8, hidden_size=8, repeats=3)


def measure_count(config: dict, devices: int):
    """In a fresh process: the step's seconds on `devices` devices, at the sizes
    of `config` (a `Config` as a dict, `dataclasses.asdict`)."""
    config = Config(**config)
    raw, _ = ltc_jax.datasets.load_japanese_vowels()
    train = ltc_jax.datasets.standardize_with(
        raw, *ltc_jax.datasets.channel_statistics(raw)
    )
    defaults = ltc_jax.training.derive_defaults([train])
    model = ltc_jax.LTC(
        train.num_channels,
        config.hidden_size,
        int(train.labels.max()) + 1,
        tau_init=defaults.tau_init,
        readout_times=defaults.readout_times,
        key=jax.random.PRNGKey(0),
    )
    integrator = ltc_jax.make_integrator(
        "tsit5",
        rtol=1e-3,
        atol=1e-4,
        max_steps=defaults.max_steps,
        batching=defaults.batching,
    )
    batch = next(ltc_jax.batches(train, config.batch_size))
    _, step, opt_state = _problems.train_step(
        model, integrator, learning_rate=1e-2, total_steps=1000
    )
    step = eqx.filter_jit(step)
    if devices > 1:
        mesh = ltc_jax.training.data_mesh(devices)
        model, opt_state = ltc_jax.training.replicate((model, opt_state), mesh)
        batch = ltc_jax.training.shard_batch(batch, mesh, config.batch_size)
    seconds = ltc_jax.measure.time_calls(
        step, model, opt_state, batch, warmup=1, repeats=config.repeats
    )
    return dict(
        devices=devices,
        device_kind=jax.devices()[0].device_kind,
        device_count=jax.device_count(),
        step_seconds=seconds,
    )


def main(config: Config) -> dict:
    """Measure every device count, each in its own process."""
    config, run = _run.start_run(config, "devices", QUICK)
    rows = []
    for count in [c for c in config.device_counts if config.batch_size % c == 0]:
        env = {"JAX_PLATFORMS": config.backend}
        if config.backend == "cpu":
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={count}"
        row = ltc_jax.measure.call_in_subprocess(
            "benchmarks.devices:measure_count",
            dict(config=dataclasses.asdict(config), devices=count),
            env=env,
        )
        rows.append(
            dict(row, median_step_seconds=statistics.median(row["step_seconds"]))
        )
    return run.finish(dict(rows=rows))


if __name__ == "__main__":
    main(tyro.cli(Config))
