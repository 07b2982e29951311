"""Measurement as a feature: compiled and runtime memory, timing, evaluation
counts, gradient error, and one-configuration-per-process isolation."""

from .counting import (
    count_evaluations as count_evaluations,
    counted_solve as counted_solve,
)
from .environment import environment as environment
from .measurement import (
    Measurement as Measurement,
    flatten_gradient as flatten_gradient,
    gradient_relative_error as gradient_relative_error,
    loss_gradient as loss_gradient,
    measure as measure,
)
from .memory import (
    CompiledMemory as CompiledMemory,
    compiled_memory as compiled_memory,
    device_memory_stats as device_memory_stats,
    process_peak_bytes as process_peak_bytes,
    process_resident_bytes as process_resident_bytes,
    release_free_memory as release_free_memory,
    reset_process_peak as reset_process_peak,
    runtime_peak_bytes as runtime_peak_bytes,
)
from .subprocess import call_in_subprocess as call_in_subprocess
from .timing import time_calls as time_calls
