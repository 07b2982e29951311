"""Measurement: XLA's compiled memory analysis of a jitted function."""

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

    **Returns:** a [`ltc_jax.CompiledMemory`][], or `None` if the backend reports
    no analysis (never a guess).

    Source: `jax.stages.Compiled.memory_analysis` (XLA's buffer assignment).
    """
    dynamic, static = eqx.partition(args, eqx.is_array)

    def call(dynamic_args):
        return fn(*eqx.combine(dynamic_args, static))

    analysis = jax.jit(call).lower(dynamic).compile().memory_analysis()
    if analysis is None:
        return None
    return CompiledMemory(
        temp_bytes=int(analysis.temp_size_in_bytes),
        argument_bytes=int(analysis.argument_size_in_bytes),
        output_bytes=int(analysis.output_size_in_bytes),
        alias_bytes=int(analysis.alias_size_in_bytes),
    )
