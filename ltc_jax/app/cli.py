"""The `ltc-jax` command line: the only place in the package that parses arguments
and prints."""

import sys

import tyro

from .config import TrainConfig
from .job import train_and_evaluate


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.2f}"


def print_report(metrics: dict) -> None:
    """Print the main job's summary: accuracy, time, steps and the memory table."""
    print(f"test accuracy      {metrics['test_accuracy']:.4f}")
    print(f"train wall time    {metrics['train_seconds']:.1f} s")
    if metrics.get("windows"):
        print(
            f"windowed adjoint   {metrics['windows']} windows (derived from the "
            "time constants and the longest sequence unless --windows was given)"
        )
    steps = metrics["steps_per_sequence"]
    print(
        f"solver steps       {steps:.1f} per sequence ({metrics['solver']}, "
        f"{'adaptive' if metrics['adaptive'] else 'fixed'} steps; shared by a batch)"
    )
    memory = metrics["memory_bytes_by_mode"]
    if memory:
        print(
            "\ncompiled training-step memory (MiB), gradient mode = "
            f"{metrics['gradient_mode']}:"
        )
        print(f"{'mode':<12}{'temp':>10}{'arguments':>12}{'outputs':>10}{'peak':>10}")
        for mode, record in memory.items():
            if record is None:
                print(f"{mode:<12}{'n/a':>10}")
                continue
            print(
                f"{mode:<12}{_mib(record['temp_bytes']):>10}"
                f"{_mib(record['argument_bytes']):>12}"
                f"{_mib(record['output_bytes']):>10}{_mib(record['peak_bytes']):>10}"
            )
    print(f"\nrun folder         {metrics['run_dir']}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of `ltc-jax`. Subcommand: `train`."""
    config = tyro.extras.subcommand_cli_from_dict(
        {"train": TrainConfig},
        args=sys.argv[1:] if argv is None else argv,
        prog="ltc-jax",
        description="Liquid Time-Constant networks in JAX.",
    )
    print_report(train_and_evaluate(config))


if __name__ == "__main__":
    main()
