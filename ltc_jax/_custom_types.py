"""jaxtyping aliases shared across ltc_jax.

Dimension names used throughout: `batch`, `times`, `input_size`, `hidden_size`,
`output_size`. A leading `*batch` means "any number of leading batch axes".
"""

from typing import Literal, Protocol, runtime_checkable

from jaxtyping import Array, ArrayLike, Float


Interpolation = Literal["linear", "cubic", "hold"]


@runtime_checkable
class AbstractInput(Protocol):
    """Anything with an `evaluate(t)` method returning the input at time `t`.

    `diffrax.LinearInterpolation` and `diffrax.CubicInterpolation` (one sequence) and
    `ltc_jax.InputPath` (a batch, evaluated through the solver clock) all qualify.
    """

    def evaluate(self, t: ArrayLike) -> Float[Array, "*batch input_size"]: ...
