"""Memory: XLA's compiled memory analysis, and runtime peak memory."""

import ctypes
import ctypes.util
import dataclasses
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax


@dataclasses.dataclass(frozen=True)
class CompiledMemory:
    """XLA's static memory plan for one compiled function, in bytes.

    Deterministic: it depends on the program and its input shapes only, not on a
    run, and is available on CPU without executing anything.

    **Fields:**

    - `temp_bytes`: scratch memory the program allocates (intermediates, the
        residuals stored for the backward pass, solver checkpoints).
    - `argument_bytes`: the inputs (parameters, optimiser state, the batch).
    - `output_bytes`: the outputs.
    - `alias_bytes`: output bytes that reuse (alias) input buffers.
    - `peak_bytes`: `temp_bytes + argument_bytes + output_bytes - alias_bytes`, the
        most the function can hold at once by this plan.
    """

    temp_bytes: int
    argument_bytes: int
    output_bytes: int
    alias_bytes: int

    @property
    def peak_bytes(self) -> int:
        return (
            self.temp_bytes + self.argument_bytes + self.output_bytes - self.alias_bytes
        )

    def asdict(self) -> dict[str, int]:
        return dict(dataclasses.asdict(self), peak_bytes=self.peak_bytes)


def compiled_memory(fn: Callable[..., Any], *args: Any) -> CompiledMemory | None:
    """Compile `fn(*args)` (without running it) and read XLA's memory analysis.

    **Arguments:**

    - `fn`: a function of pytrees; non-array leaves of `args` (modules' static
        parts, Python numbers) are treated as compile-time constants, as
        `eqx.filter_jit` does. Pass the *unjitted* function.
    - `args`: example arguments; only their shapes and dtypes matter for arrays.
        `jax.ShapeDtypeStruct` leaves stand for arrays never allocated (e.g. from
        `jax.eval_shape`), so programs too large to run can still be measured.

    **Returns:** a [`ltc_jax.measure.CompiledMemory`][], or `None` if the backend
    reports no analysis (never a guess).

    Source: `jax.stages.Compiled.memory_analysis` (XLA's buffer assignment).
    """
    compiled, _ = compile_ahead(fn, *args)
    return memory_of(compiled)


def compile_ahead(fn: Callable[..., Any], *args: Any) -> tuple[Any, Any]:
    """Compile `fn(*args)` ahead of time, without running it.

    Array leaves of `args` (and `jax.ShapeDtypeStruct` leaves) become the compiled
    program's arguments; every other leaf is a compile-time constant, as
    `eqx.filter_jit` does.

    **Returns:** `(compiled, dynamic)`: a `jax.stages.Compiled`, called as
    `compiled(dynamic)` (with concrete arrays in place of any
    `ShapeDtypeStruct`), and the array part of `args`.
    """
    dynamic, static = eqx.partition(args, _is_array_like)

    def call(dynamic_args):
        return fn(*eqx.combine(dynamic_args, static))

    return jax.jit(call).lower(dynamic).compile(), dynamic


def memory_of(compiled: Any) -> CompiledMemory | None:
    """The [`ltc_jax.measure.CompiledMemory`][] of a `jax.stages.Compiled`, or `None`
    where the backend reports no memory analysis."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        return None
    return CompiledMemory(
        temp_bytes=int(analysis.temp_size_in_bytes),
        argument_bytes=int(analysis.argument_size_in_bytes),
        output_bytes=int(analysis.output_size_in_bytes),
        alias_bytes=int(analysis.alias_size_in_bytes),
    )


def _is_array_like(x) -> bool:
    return eqx.is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as file:
            for line in file:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except OSError:
        return None
    return None


def reset_process_peak() -> bool:
    """Reset this process's resident-memory high-water mark (Linux: write 5 to
    `/proc/self/clear_refs`). **Returns:** whether the reset was possible."""
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
    except OSError:
        return False
    return True


def process_peak_bytes() -> int | None:
    """This process's resident-memory high-water mark (`VmHWM`), in bytes, or
    `None` where the operating system does not report it."""
    return _status_bytes("VmHWM")


def process_resident_bytes() -> int | None:
    """This process's resident memory now (`VmRSS`), in bytes, or `None`."""
    return _status_bytes("VmRSS")


def device_memory_stats(device: jax.Device | None = None) -> dict[str, int] | None:
    """The allocator statistics of a device (`bytes_in_use`, `peak_bytes_in_use`,
    ... on GPU), or `None` where the backend reports none (CPU)."""
    device = jax.devices()[0] if device is None else device
    try:
        stats = device.memory_stats()
    except (AttributeError, NotImplementedError, RuntimeError):
        return None
    return dict(stats) if stats else None


def release_free_memory() -> None:
    """Return the C heap's free memory to the operating system (glibc's
    `malloc_trim`; nothing elsewhere), so that memory a process freed is not
    reused unseen by the next allocations a high-water mark should see."""
    name = ctypes.util.find_library("c")
    if name is not None:
        libc = ctypes.CDLL(name)
        if hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)


# Calls measured, at most, until one raises the high-water mark by the bytes
# the program allocates: which pages a call's allocations land on varies from
# call to call (the allocator's arenas are per thread), so one call can be
# served by pages an earlier one left resident where the next is not.
_MEASURED_CALLS = 3


def runtime_peak(
    compiled: Callable[..., Any], *args: Any, expected_bytes: int | None = None
) -> tuple[int | None, str | None, str | None]:
    """Peak memory of one call of an already compiled function: `(bytes, source,
    note)`, where `bytes` is `None` whenever the figure could not be isolated to
    this call and `note` says why. See [`ltc_jax.measure.runtime_peak_bytes`][]."""
    device = jax.devices()[0]
    before = device_memory_stats(device)
    if before is not None and "peak_bytes_in_use" in before:
        source = f"device allocator ({device.platform})"
        jax.block_until_ready(compiled(*args))
        after = device_memory_stats(device)
        if int(after["peak_bytes_in_use"]) <= int(before["peak_bytes_in_use"]):
            return (
                None,
                source,
                (
                    "the call did not raise the device's peak: an earlier, larger "
                    "peak of this process (another configuration, compilation or "
                    "autotuning) hides it; measure in a fresh process"
                ),
            )
        return (
            int(after["peak_bytes_in_use"]) - int(before["bytes_in_use"]),
            source,
            None,
        )
    source = "process high-water mark"
    # The first run of a compiled program raises the high-water mark by 6 to 10
    # MB of one-time start-up cost, whatever the program; later runs raise it by
    # the program's own temporaries and outputs. The warm-up call takes that
    # cost, and the measured call is the program's own.
    jax.block_until_ready(compiled(*args))
    rises = []
    for _ in range(_MEASURED_CALLS if expected_bytes is not None else 1):
        release_free_memory()
        if not reset_process_peak():
            return (
                None,
                None,
                "the operating system reports no resettable high-water mark",
            )
        resident = process_resident_bytes()
        jax.block_until_ready(compiled(*args))
        peak = process_peak_bytes()
        if resident is None or peak is None:
            return None, None, "the operating system reports no resident memory"
        rises.append(max(peak - resident, 0))
        if expected_bytes is None or rises[-1] >= expected_bytes:
            return rises[-1], source, None
    return (
        None,
        source,
        (
            f"the high-water mark rose by at most {max(rises)} bytes in "
            f"{len(rises)} calls, less than the {expected_bytes} bytes the "
            "compiled program allocates: memory this process held already "
            "served the call; measure in a fresh process"
        ),
    )


def runtime_peak_bytes(
    compiled: Callable[..., Any], *args: Any, expected_bytes: int | None = None
) -> int | None:
    """Peak memory of one call of an already compiled function, in bytes: what
    the call allocates (its intermediates and outputs) above the memory in use
    before it.

    - GPU (and any backend with allocator statistics): `peak_bytes_in_use` after
        the call minus `bytes_in_use` before it, at the function's first call:
        the allocator counts the device buffers it hands out, not the host
        memory of the runtime's start-up, and its peak counter cannot be reset,
        so a warm-up call would hide the call's peak. Measure once per process,
        on a function compiled ahead of time and not yet run, with its arguments
        placed on the device without large temporaries (build them on the host,
        then `jax.device_put`): if the call does not raise the device's peak, an
        earlier, larger peak (compilation's autotuning included) hides this one,
        and the result is `None`. This is the device allocator's figure, not a
        process's.
    - CPU: the function is called two to four times. The first call (a warm-up, not
        measured) pays the one-time cost of a compiled program's first run, 6
        to 10 MB of the process's resident memory whatever the program, which
        no later call repeats. Then the heap's free memory is returned to the
        operating system, the process's resident high-water mark is reset, and
        the second call is measured: the high-water mark during it minus the
        resident memory just before it. So the figure is the program's own: its
        temporaries and outputs as XLA plans them (`temp_bytes + output_bytes`
        of [`ltc_jax.measure.compiled_memory`][]), and the working memory of
        routines that run outside the plan: a few pages for a small step, about
        0.5 MB for a step of `(32, 128)` matrix products, two more copies of
        the input for XLA's CPU sort. Memory the
        process had already touched can serve the call unseen: where that shows
        (the rise is below `expected_bytes`, say the compiled temp bytes), the
        call is measured again, up to three times in all, and the first rise
        that reaches `expected_bytes` is the figure; if none does, the result
        is `None`.

    **Arguments:** `compiled`, called as `compiled(*args)` (two to four times on
    CPU, so it must not donate its arguments); `expected_bytes`, the least the call must
    allocate (optional).

    **Returns:** bytes, or `None` where the figure cannot be isolated to this call
    or neither source is available (never a guess);
    [`ltc_jax.measure.measure`][] records why in `runtime_peak_note`.
    """
    return runtime_peak(compiled, *args, expected_bytes=expected_bytes)[0]
