"""Measurement as a feature: compiled and runtime memory, timing, solver
evaluation counts, gradient error, and one configuration per process.

Everything here measures a training step or a solve built with the rest of
ltc_jax (or any JAX function of the same form); none of it is needed to train.
Memory figures from `compiled_memory` are XLA's compiled memory analysis:
deterministic, and available on every backend.
"""

from ._batch import abstract_batch as abstract_batch
from ._measure import (
    CompiledMemory as CompiledMemory,
    Measurement as Measurement,
    call_in_subprocess as call_in_subprocess,
    compiled_memory as compiled_memory,
    count_evaluations as count_evaluations,
    counted_solve as counted_solve,
    device_memory_stats as device_memory_stats,
    environment as environment,
    flatten_gradient as flatten_gradient,
    gradient_relative_error as gradient_relative_error,
    loss_gradient as loss_gradient,
    measure as measure,
    process_peak_bytes as process_peak_bytes,
    process_resident_bytes as process_resident_bytes,
    release_free_memory as release_free_memory,
    reset_process_peak as reset_process_peak,
    runtime_peak_bytes as runtime_peak_bytes,
    time_calls as time_calls,
)


__all__ = [
    "measure",
    "Measurement",
    "compiled_memory",
    "CompiledMemory",
    "abstract_batch",
    "runtime_peak_bytes",
    "device_memory_stats",
    "process_peak_bytes",
    "process_resident_bytes",
    "reset_process_peak",
    "release_free_memory",
    "counted_solve",
    "count_evaluations",
    "time_calls",
    "loss_gradient",
    "flatten_gradient",
    "gradient_relative_error",
    "call_in_subprocess",
    "environment",
]
