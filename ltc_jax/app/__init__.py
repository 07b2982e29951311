"""The application on top of the library: the main job (train on a `.ts` pair and
write a run folder) and the `ltc-jax` command line. The only part of ltc_jax that
parses options or prints."""

from .cli import main as main
from .config import StreamConfig as StreamConfig, TrainConfig as TrainConfig
from .job import train_and_evaluate as train_and_evaluate
from .runs import make_run_dir as make_run_dir
from .settings import JobSetup as JobSetup, prepare as prepare


__all__ = [
    "JobSetup",
    "StreamConfig",
    "TrainConfig",
    "main",
    "make_run_dir",
    "prepare",
    "train_and_evaluate",
]
