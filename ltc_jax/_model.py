"""The LTC sequence model: optional encoder -> LTC solve -> linear readout."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from ._integrate import Trajectory, integrate
from ._paths import InputPath
from ._solve import Integrator
from ._vector_field import LTCVectorField


class _Encoded(eqx.Module):
    """An input path seen through a per-time-point encoder."""

    path: InputPath
    encoder: Callable

    def evaluate(self, t):
        return jax.vmap(self.encoder)(self.path.evaluate(t))


class _EncodedField(eqx.Module):
    """The cell driven by the encoded input: the vector field that is solved."""

    cell: eqx.Module
    encoder: Callable | None

    def __call__(self, t, y, args):
        if self.encoder is not None:
            args = _Encoded(args, self.encoder)
        return self.cell(t, y, args)


class LTC(eqx.Module):
    """A continuous-time sequence model built on an LTC vector field.

    For each sequence of a batch, the hidden state starts at zero at the first
    observation time and follows $dh/dt = \\text{cell}(t, h, x(t))$ up to the last
    observation, driven by the interpolated input $x(t)$ (optionally passed through
    an encoder first); a linear readout maps the final state (or the state at every
    observation time) to the outputs: logits for classification, values for
    regression.

    The batch is solved as one `(batch, hidden_size)` state by default (see
    [`ltc_jax.integrate`][]); each sequence still runs on its own time interval and
    the result equals solving it alone.

    **Fields:**

    - `cell`: the vector field, by default an [`ltc_jax.LTCVectorField`][]; any
        Equinox module called as `cell(t, h, path)` with batched `h` works.
    - `encoder`: `None`, or a module mapping one input `(input_size,)` to the cell's
        input `(cell_input_size,)`, applied to $x(t)$ inside the vector field.
    - `readout`: `eqx.nn.Linear(hidden_size, output_size)`.
    """

    cell: eqx.Module
    encoder: Callable | None
    readout: eqx.nn.Linear

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int,
        *,
        encoder: Callable | None = None,
        encoded_size: int | None = None,
        tau_init: tuple[float, float] = (0.1, 10.0),
        tau_min: float = 0.0,
        cell: eqx.Module | None = None,
        key: PRNGKeyArray,
    ):
        """**Arguments:**

        - `input_size`: channels of the observations.
        - `hidden_size`: LTC units.
        - `output_size`: classes (logits) or regression targets.
        - `encoder`, `encoded_size`: an optional encoder and its output size (then
            the cell's input size); `encoded_size` defaults to `input_size`.
        - `tau_init`, `tau_min`: passed to [`ltc_jax.LTCVectorField`][] (time units).
        - `cell`: use this vector field instead of building an `LTCVectorField`
            (it must have `hidden_size` units).
        - `key`: a `jax.random.PRNGKey`.
        """
        cell_key, readout_key = jr.split(key)
        if cell is None:
            cell_input = input_size if encoded_size is None else encoded_size
            cell = LTCVectorField(
                cell_input, hidden_size, tau_init=tau_init, tau_min=tau_min, key=cell_key
            )
        self.cell = cell
        self.encoder = encoder
        self.readout = eqx.nn.Linear(hidden_size, output_size, key=readout_key)

    @property
    def hidden_size(self) -> int:
        return self.readout.in_features

    def solve(
        self, path: InputPath, *, integrator: Integrator, sequence: bool = False
    ) -> Trajectory:
        """The hidden state over the batch.

        **Arguments:**

        - `path`: the batch's inputs, an [`ltc_jax.InputPath`][].
        - `integrator`: an [`ltc_jax.Integrator`][].
        - `sequence`: if True, the state at every observation time, else at each
            sequence's last observation.

        **Returns:** a [`ltc_jax.Trajectory`][] with `ys` of shape
        `(batch, hidden_size)` or `(batch, times, hidden_size)`.

        **Raises:** as [`ltc_jax.integrate`][].
        """
        batch = path.lengths.shape[0]
        dtype = path.ts.dtype
        y0 = jnp.zeros((batch, self.hidden_size), dtype)
        field = _EncodedField(self.cell, self.encoder)
        return integrate(
            field,
            path,
            y0,
            integrator,
            save="observations" if sequence else "final",
        )

    def __call__(
        self, path: InputPath, *, integrator: Integrator, sequence: bool = False
    ) -> Float[Array, "batch output_size"] | Float[Array, "batch times output_size"]:
        """The outputs: `(batch, output_size)` from each sequence's final state, or
        `(batch, times, output_size)` at every observation time if `sequence`
        (padding positions repeat the final output). Arguments as `solve`."""
        return self.outputs(self.solve(path, integrator=integrator, sequence=sequence).ys)

    def outputs(
        self, ys: Float[Array, "*batch hidden_size"]
    ) -> Float[Array, "*batch output_size"]:
        """The linear readout applied to states `ys` of shape `(*batch, hidden_size)`."""
        return ys @ self.readout.weight.T + self.readout.bias
