"""Data-parallel throughput: training steps per second on 1, 2 and 4 devices.

Each device count that divides the batch runs in its own process (the count of
CPU devices is fixed when JAX starts:
`XLA_FLAGS=--xla_force_host_platform_device_count=N` on CPU; on GPU the first N
GPUs). The step is a training step on JapaneseVowels (Tsit5 at rtol 1e-3,
atol 1e-4, as with the main job's `--rtol 1e-3`; `checkpoint`, 64 units, the
derived readout times and batching), on one batch split over a `ltc_jax.data_mesh` of N
devices, with the model and optimiser state replicated.

On a CPU the "devices" are shares of the same cores: with 2 cores, 2 or 4
devices can only add the cost of splitting and reducing, so the figures show
that overhead, not a speed-up. On several GPUs they show the scaling.

    python -m benchmarks.devices            # batch 64, about a minute per count
    python -m benchmarks.devices --quick    # seconds

Prints the median step seconds and steps per second per device count, with the
machine's core count, and writes `results/devices/<run>/`.
"""

import dataclasses
import os
import statistics

import tyro

import ltc_jax
from experiments import _run


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
    import equinox as eqx
    import jax

    raw, _ = ltc_jax.datasets.load_japanese_vowels()
    train = ltc_jax.datasets.standardize_with(
        raw, *ltc_jax.datasets.channel_statistics(raw)
    )
    defaults = ltc_jax.derive_defaults([train])
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
    optimizer = ltc_jax.make_optimizer(1e-2, 1000)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    batch = next(ltc_jax.batches(train, config.batch_size))
    step = eqx.filter_jit(ltc_jax.make_train_step(optimizer, integrator))
    if devices > 1:
        mesh = ltc_jax.data_mesh(devices)
        model, opt_state = ltc_jax.replicate((model, opt_state), mesh)
        batch = ltc_jax.shard_batch(batch, mesh, config.batch_size)
    seconds = ltc_jax.time_calls(
        step, model, opt_state, batch, warmup=1, repeats=config.repeats
    )
    return dict(
        devices=devices,
        device_kind=jax.devices()[0].device_kind,
        step_seconds=seconds,
    )


def main(config: Config) -> dict:
    """Measure every device count, each in its own process."""
    config, run_dir = _run.start_run(config, "devices", QUICK)
    rows = []
    counts = [c for c in config.device_counts if config.batch_size % c == 0]
    for count in counts:
        env = {"JAX_PLATFORMS": config.backend}
        if config.backend == "cpu":
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={count}"
        row = ltc_jax.call_in_subprocess(
            "benchmarks.devices:measure_count",
            dict(config=dataclasses.asdict(config), devices=count),
            env=env,
        )
        row["median_step_seconds"] = statistics.median(row["step_seconds"])
        rows.append(row)
    one = rows[0]["median_step_seconds"]

    columns = [
        ("devices", lambda r: r["devices"]),
        ("step s (median)", lambda r: f"{r['median_step_seconds']:.4f}"),
        ("steps / s", lambda r: f"{1 / r['median_step_seconds']:.2f}"),
        ("vs 1 device", lambda r: f"{one / r['median_step_seconds']:.2f}x"),
    ]

    def title(env):
        return (
            f"Training steps, JapaneseVowels, batch {config.batch_size}, "
            f"{config.hidden_size} units, Tsit5 checkpoint ({config.backend}: "
            f"{rows[0]['device_kind']}; {os.cpu_count()} CPU cores, "
            f"{_run.cpu_name()}; jax {env['jax']})"
        )

    return _run.finish_table(run_dir, rows, columns, title)


if __name__ == "__main__":
    main(tyro.cli(Config))
