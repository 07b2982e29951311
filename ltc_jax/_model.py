"""The LTC sequence model: optional encoder -> LTC solve -> linear readout."""

import abc
import math
import typing
from collections.abc import Callable
from typing import ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from ._custom_types import AbstractInput
from ._events import Crossing
from ._integrator import Integrator
from ._paths import InputPath
from ._solve import Trajectory, integrate
from ._vector_field import (
    AbstractLTCField,
    BiophysicalLTCVectorField,
    GateBiasInit,
    LTCVectorField,
    over_batch,
)
from ._wiring import Wiring, make_wiring


ModelSave = Literal["final", "observations"]
"""What a model's solve saves: what its readout reads, or the state at every
observation time."""


class _EncodedInput(eqx.Module):
    """An input path seen through a per-time-point encoder."""

    path: AbstractInput
    encoder: Callable

    def evaluate(self, t):
        x = self.path.evaluate(t)
        return over_batch(self.encoder, x)


class _EncodedField(eqx.Module):
    """A cell driven by the encoded input: the vector field that is solved. The
    encoder lives in the field, not in the solve's `args`, so that every gradient
    mode differentiates it."""

    cell: eqx.Module
    encoder: Callable

    def __call__(self, t, y, args):
        return self.cell(t, y, _EncodedInput(args, self.encoder))


class _EncodedLTCField(_EncodedField, AbstractLTCField):
    """`_EncodedField` of a cell in LTC form, itself in LTC form."""

    def drive_and_decay(self, y, x):
        return self.cell.drive_and_decay(y, self.encoder(x))

    def derivative_and_decay(self, t, y, args):
        return self.cell.derivative_and_decay(t, y, _EncodedInput(args, self.encoder))

    def decay_bound(self):
        return self.cell.decay_bound()

    def state_bounds(self):
        return self.cell.state_bounds()


def _encoded(cell: eqx.Module, encoder: Callable | None) -> eqx.Module:
    if encoder is None:
        return cell
    if isinstance(cell, AbstractLTCField):
        return _EncodedLTCField(cell, encoder)
    return _EncodedField(cell, encoder)


def check_readout_times(readout_times: int) -> None:
    """**Raises:** `ValueError` unless `readout_times` is a positive int."""
    if isinstance(readout_times, bool) or not (
        isinstance(readout_times, int) and readout_times >= 1
    ):
        raise ValueError(
            f"readout_times must be a positive int; got {readout_times!r}."
        )


def check_solve(model: eqx.Module, path: InputPath, save: str) -> None:
    """The checks of a sequence model's `solve` (the LTC's and the CfC's).

    **Raises:** `ValueError` for a `save` other than `"final"` and
    `"observations"`, inputs without the model's `input_size` channels, or
    parameters whose float type is not the inputs'."""
    if save not in ("final", "observations"):
        raise ValueError(
            f"save must be 'final' or 'observations'; got {save!r}. (States at "
            "n times spread over each sequence: the model's readout_times=n "
            "with save='final', or ltc_jax.integrate(..., save=n).)"
        )
    if path.input_size != model.input_size:
        raise ValueError(
            f"The model takes {model.input_size} input channels; the input path "
            f"has {path.input_size}."
        )
    parameters = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
    if parameters and parameters[0].dtype != path.ts.dtype:
        raise ValueError(
            f"The model's parameters are {parameters[0].dtype} but the inputs "
            f"are {path.ts.dtype}: cast one to the other, e.g. "
            f"ltc_jax.make_input_path(data, dtype={parameters[0].dtype.name!r}), "
            "or the model with jax.tree.map(lambda x: x.astype(dtype) if "
            "eqx.is_inexact_array(x) else x, model)."
        )


def initial_state(
    y0: Float[Array, "batch hidden_size"] | None, path: InputPath, hidden_size: int
) -> Float[Array, "batch hidden_size"]:
    """`y0` checked against the batch, or the zero state where it is `None`, in
    the inputs' float type.

    **Raises:** `ValueError` if `y0` is not `(batch, hidden_size)`."""
    batch = path.lengths.shape[0]
    if y0 is None:
        return jnp.zeros((batch, hidden_size), path.ts.dtype)
    if y0.shape != (batch, hidden_size):
        raise ValueError(
            f"y0 must be (batch, hidden_size) = ({batch}, {hidden_size}); got "
            f"{y0.shape}."
        )
    return y0.astype(path.ts.dtype)


def check_outputs_save(save: str, readout_times: int) -> None:
    """**Raises:** `ValueError` for outputs at every observation
    (`save="observations"`) from a readout of several times."""
    if save == "observations" and readout_times > 1:
        raise ValueError(
            "Outputs at every observation read one state each; this model's "
            f"readout reads {readout_times} times at once (readout_times)."
        )


POOLING_EPS = 1e-5
"""The variance floor of the pooled readout's standardisation (as
`eqx.nn.LayerNorm`'s `eps`)."""


ReadoutFeatures = Literal["states", "pooled", "both"]
"""What a readout of several times reads: the states side by side, their pooled
summary, or both."""

READOUT_FEATURES = typing.get_args(ReadoutFeatures)
"""The names `readout_features` accepts."""


def check_readout_features(readout_features: str) -> None:
    """**Raises:** `ValueError` unless `readout_features` is one of
    `READOUT_FEATURES`."""
    if readout_features not in READOUT_FEATURES:
        raise ValueError(
            "readout_features must be 'states', 'pooled' or 'both'; got "
            f"{readout_features!r}."
        )


def readout_size(readout_times: int, hidden_size: int, readout_features: str) -> int:
    """The number of features a readout reads: `hidden_size` for the final
    state; for `n = readout_times > 1`, `n * hidden_size` for the states side
    by side (`"states"`), `3 * hidden_size` for their pooled summary
    (`"pooled"`), `(n + 3) * hidden_size` for both."""
    if readout_times == 1:
        return hidden_size
    return (
        hidden_size
        * {
            "states": readout_times,
            "pooled": 3,
            "both": readout_times + 3,
        }[readout_features]
    )


def pooled_summary(
    ys: Float[Array, "*batch n hidden_size"],
) -> Float[Array, "*batch features"]:
    """`[final, mean over the n, max over the n]` of states `ys`, per unit
    (`3 * hidden_size` features), standardised across those features: a layer
    norm without parameters (Ba et al. 2016), variance floor `POOLING_EPS`."""
    parts = [ys[..., -1, :], jnp.mean(ys, axis=-2), jnp.max(ys, axis=-2)]
    features = jnp.concatenate(parts, axis=-1)
    centred = features - jnp.mean(features, axis=-1, keepdims=True)
    variance = jnp.mean(centred**2, axis=-1, keepdims=True)
    return centred * jax.lax.rsqrt(variance + POOLING_EPS)


class AbstractSequenceModel(eqx.Module):
    """What the sequence models ([`ltc_jax.LTC`][], [`ltc_jax.CfC`][],
    [`ltc_jax.JumpLTC`][]) share:
    their sizes and readout options, and `outputs`, their readout of states.
    The static fields are declared once, here; each model declares its modules
    (`readout` is abstract here), and its `__init__` sets them all. Subclasses
    provide `readout`, `__init__` and `solve`.

    **Fields:** static ints `input_size`, `hidden_size`, `output_size`,
    `readout_times`, the static str `readout_features`, and (abstract)
    `readout`, the module mapping the features read to the outputs.
    """

    readout: eqx.AbstractVar[eqx.Module]
    input_size: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)
    output_size: int = eqx.field(static=True)
    readout_times: int = eqx.field(static=True)
    readout_features: str = eqx.field(static=True)

    solves_ode: eqx.AbstractClassVar[bool]
    """Whether the model integrates an ODE, whose solver steps training reports
    and checks (the LTC), or not (the CfC, a closed form; the jump model, a
    scan of fused steps and updates)."""

    @property
    def vector_field(self) -> eqx.Module | None:
        """The vector field the model solves, as `integrate` receives it (with
        `decay_bound` and `state_bounds` where it is in LTC form), or `None`
        for a model that solves no ODE. Training derives the windowed
        adjoint's windows and checks fixed steps' stability from it."""
        return None

    def options(self) -> dict[str, int | str | None]:
        """The options the model was built with that fix its arrays (their
        shapes, float dtype and the modules holding them), by the names of its
        constructor's arguments: `model` (the class), `input_size`,
        `hidden_size`, `output_size`, `readout_times`, `readout_features`
        (listed only with `readout_times > 1`, where it shapes the readout),
        `dtype` (of its float parameters), and each model's own (the LTC's
        `cell` and `encoder`, the CfC's `mode` and backbone). Checkpoints record
        them, so that loading into a model built otherwise names each option
        that differs ([`ltc_jax.training.load_checkpoint`][]).

        **Returns:** a dict of JSON-serialisable values.
        """
        floats = jax.tree.leaves(eqx.filter(self, eqx.is_inexact_array))
        options = dict(
            model=type(self).__name__,
            input_size=self.input_size,
            hidden_size=self.hidden_size,
            output_size=self.output_size,
            readout_times=self.readout_times,
            dtype=floats[0].dtype.name if floats else None,
        )
        if self.readout_times > 1:
            options["readout_features"] = self.readout_features
        return options

    @abc.abstractmethod
    def solve(
        self,
        path: InputPath,
        *,
        integrator: Integrator | None,
        save: ModelSave = "final",
        y0: Float[Array, "batch hidden_size"] | None = None,
    ) -> Trajectory:
        """The state over the batch, from `y0` (default zero) at each
        sequence's first observation: `ys` of shape `(batch, hidden_size)` at
        each sequence's last observation, `(batch, n, hidden_size)` at the
        readout times (`readout_times=n > 1`), or `(batch, times, hidden_size)`
        at every observation (`save="observations"`). A model that solves no
        ODE takes `integrator=None`."""

    def __call__(
        self,
        path: InputPath,
        *,
        integrator: Integrator | None = None,
        save: ModelSave = "final",
        y0: Float[Array, "batch hidden_size"] | None = None,
    ) -> Float[Array, "batch output_size"] | Float[Array, "batch times output_size"]:
        """The outputs: `(batch, output_size)` from what the readout reads (the
        final state, or the states at the `readout_times`), or `(batch, times,
        output_size)` at every observation time with `save="observations"`
        (padding positions repeat the final output). Arguments as `solve`
        (an [`ltc_jax.LTC`][] needs its `integrator`).

        **Raises:** as `solve`; `ValueError` for `save="observations"` with
        `readout_times > 1`, whose readout reads several times at once."""
        check_outputs_save(save, self.readout_times)
        trajectory = self.solve(path, integrator=integrator, save=save, y0=y0)
        return self.outputs(trajectory.ys)

    def outputs(
        self, ys: Float[Array, "*batch hidden_size"] | Float[Array, "*batch n hidden"]
    ) -> Float[Array, "... output_size"]:
        """The readout applied to states `ys`: `(*batch, hidden_size)`, or with
        `readout_times=n > 1`, `(*batch, n, hidden_size)` (as `solve` returns
        them), whose `n` states are read together, as `readout_features` says:
        side by side in time order (`"states"`); their `pooled_summary`
        `[final, mean over the n, max over the n]`, standardised across its
        `3 * hidden_size` features (`"pooled"`); or the two side by side
        (`"both"`).

        **Raises:** `ValueError` if `ys` does not end in `(n, hidden_size)` for
        `readout_times=n > 1`."""
        readout_times, hidden_size = self.readout_times, self.hidden_size
        if readout_times == 1:
            return self.readout(ys)
        if ys.shape[-2:] != (readout_times, hidden_size):
            raise ValueError(
                f"The readout reads states of shape (..., {readout_times}, "
                f"{hidden_size}) (readout_times, hidden_size); got {ys.shape}."
            )
        parts = []
        if self.readout_features in ("states", "both"):
            parts.append(ys.reshape(*ys.shape[:-2], -1))
        if self.readout_features in ("pooled", "both"):
            parts.append(pooled_summary(ys))
        return self.readout(jnp.concatenate(parts, axis=-1))


def solves_ode(model: eqx.Module) -> bool:
    """Whether training should report and check `model`'s solver steps: its
    `solves_ode` for an [`ltc_jax.AbstractSequenceModel`][], True for any other
    model (which is taken to solve one)."""
    if isinstance(model, AbstractSequenceModel):
        return model.solves_ode
    return True


class LinearReadout(eqx.Module):
    """`outputs = ys @ weight.T + bias` on the last axis, for states of any leading
    shape. Initialised as `eqx.nn.Linear`: U(-1/sqrt(hidden), 1/sqrt(hidden)).

    **Fields:** `weight`: `(output_size, hidden_size)`; `bias`: `(output_size,)`.
    """

    weight: Float[Array, "output_size hidden_size"]
    bias: Float[Array, " output_size"]

    def __init__(self, hidden_size: int, output_size: int, *, dtype=None, key):
        dtype = jnp.zeros(()).dtype if dtype is None else dtype
        limit = 1.0 / math.sqrt(hidden_size)
        w_key, b_key = jr.split(key)
        self.weight = jr.uniform(
            w_key, (output_size, hidden_size), dtype, -limit, limit
        )
        self.bias = jr.uniform(b_key, (output_size,), dtype, -limit, limit)

    def __call__(
        self, ys: Float[Array, "*batch hidden_size"]
    ) -> Float[Array, "*batch output_size"]:
        """The outputs of states with any leading batch axes."""
        return over_batch(lambda y: self.weight @ y + self.bias, ys)


class MotorReadout(eqx.Module):
    """The original authors' affine output mapping: the first `output_size` units
    (the motor neurons) scaled and shifted, `outputs = ys[..., :k] * weight + bias`.
    Initialised to the identity (`weight = 1`, `bias = 0`), as in `ncps`.

    **Fields:** `weight`, `bias`: `(output_size,)`.
    """

    weight: Float[Array, " output_size"]
    bias: Float[Array, " output_size"]

    def __init__(self, output_size: int, *, dtype=None):
        dtype = jnp.zeros(()).dtype if dtype is None else dtype
        self.weight = jnp.ones((output_size,), dtype)
        self.bias = jnp.zeros((output_size,), dtype)

    def __call__(
        self, ys: Float[Array, "*batch hidden_size"]
    ) -> Float[Array, "*batch output_size"]:
        """The outputs of states with any leading batch axes."""
        size = self.weight.shape[0]
        return over_batch(lambda y: y[:size] * self.weight + self.bias, ys)


class LTC(AbstractSequenceModel):
    r"""A continuous-time sequence model built on an LTC vector field.

    For each sequence of a batch, the hidden state starts at zero at the first
    observation time and follows $dh/dt = \text{cell}(t, h, x(t))$ up to the last
    observation, driven by the interpolated input $x(t)$ (optionally passed through
    an encoder first). A readout maps the states to the outputs (logits for
    classification, values for regression): the final state, or with
    `readout_times=n` the states at `n` times spread evenly over the sequence
    (at `1/n, 2/n, ..., 1` of its duration), concatenated; or, for outputs at
    every observation, the state there.

    The final state of an LTC remembers the input over its units' time
    constants, and its slow units average the input out: on z-normalised series
    whose class lies in the shape (the UCR archive's, say) the final states of
    different classes barely differ and training does not start. Reading the
    states at several times gives the readout the shape. With
    `readout_features="pooled"` the readout sees a summary of those states
    instead: the final state next to their mean over the readout times (the
    global average pooling of Wang et al. 2017, "Time series classification
    from scratch with deep neural networks", IJCNN) and their maximum,
    standardised across the features. It reads `3 * hidden_size` features
    however many times, and what it sees of a pattern depends less on where in
    the sequence the pattern occurs. The standardisation removes what all
    units share, so the readout, and through it the gradient, sees how
    sequences differ from the start of training, when their states differ by
    little. `readout_features="both"` reads the states and their summary side
    by side, for classes that lie at fixed positions as well as those that do
    not (the main job's default; the docs' benchmark page measures all three).

    Two cells: `"ltc"`, the simplified [`ltc_jax.LTCVectorField`][] with a linear
    readout of all units; and `"biophysical"`, the original authors'
    [`ltc_jax.BiophysicalLTCVectorField`][] on a sparse [`ltc_jax.wirings.Wiring`][],
    read out through its motor neurons ([`ltc_jax.MotorReadout`][]).

    The batch is solved as one `(batch, hidden_size)` state by default (see
    [`ltc_jax.integrate`][]); each sequence still runs on its own time interval and
    the result equals solving it alone.

    **The plain model, and the main job's.** The constructor's defaults are the
    plain model of the original write-up: a zero gate bias, `tau_init` of
    (0.1, 10) in the unit of the timestamps, no floor on tau, and a readout of
    the final state alone. The main job (`ltc-jax train`) sets more from the data
    and the model, and prints each choice with its reason: `tau_init` and
    `tau_min` from [`ltc_jax.training.derive_defaults`][], the chrono gate bias,
    up to 16 readout times, and `readout_features="both"`. From code,
    `ltc_jax.app.settings.resolve_settings` and `ltc_jax.app.settings.make_model`
    build that model from an `ltc_jax.app.TrainConfig`.

    **Fields:** `cell` (the vector field), `encoder` (`None` or a module applied to
    $x(t)$ inside the vector field), `readout`, and static ints `input_size`,
    `hidden_size`, `output_size`, `readout_times`, and the static str
    `readout_features`.
    """

    cell: eqx.Module
    encoder: Callable | None
    readout: eqx.Module
    solves_ode: ClassVar[bool] = True

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int,
        *,
        cell: str | eqx.Module = "ltc",
        wiring: str | Wiring = "fc",
        encoder: Callable | None = None,
        encoded_size: int | None = None,
        tau_init: tuple[float, float] = (0.1, 10.0),
        tau_min: float = 0.0,
        gate_bias_init: GateBiasInit = "zero",
        readout_times: int = 1,
        readout_features: ReadoutFeatures = "states",
        matmul_dtype: str | None = None,
        key: PRNGKeyArray,
    ):
        """**Arguments:**

        - `input_size`: channels of the observations.
        - `hidden_size`: units.
        - `output_size`: classes (logits) or regression targets; for the
            biophysical cell, the number of motor neurons.
        - `cell`: `"ltc"` (default), `"biophysical"`, or a vector-field module of
            your own, called as `cell(t, h, path)` with batched `h` of shape
            `(batch, hidden_size)` (subclass [`ltc_jax.AbstractLTCField`][] for
            the fused step); it gets a linear readout.
        - `wiring`: for `"biophysical"`: `"fc"` (default), `"random"`, `"ncp"` (see
            [`ltc_jax.wirings.make_wiring`][]) or an [`ltc_jax.wirings.Wiring`][].
        - `encoder`, `encoded_size`: an optional encoder and its output size (then
            the cell's input size; default `input_size`). The encoder maps one
            observation vector, `(input_size,)` -> `(encoded_size,)` (e.g. an
            `eqx.nn.MLP`), and is applied to $x(t)$ inside the vector field, so
            every gradient mode trains it.
        - `tau_init`, `tau_min`, `gate_bias_init`, `matmul_dtype` (mixed
            precision): for `"ltc"`: see [`ltc_jax.LTCVectorField`][]. Pass
            `gate_bias_init="chrono"` (the main job does) so that the units'
            memories at initialisation follow `tau_init`; with the default
            `"zero"` every unit forgets within about two time units.
        - `readout_times`: the readout sees the states at this many times
            spread evenly over each sequence, at `1/n, 2/n, ..., 1` of its
            duration (default 1: the final state only); its linear readout then
            takes `readout_size(readout_times, hidden_size, readout_features)`
            inputs (`readout_times * hidden_size` for `"states"`). Not for the
            biophysical cell, which reads its motor neurons' final state.
        - `readout_features`: with `readout_times > 1`, what the readout reads
            of the states at those times: `"states"` (default), side by side;
            `"pooled"`, their summary `[final, mean, max]` per unit (`3 *
            hidden_size` inputs, standardised across them); `"both"`, the two
            side by side (see above). With one readout time there is nothing
            to pool: the final state is read whatever this says.
        - `key`: a `jax.random.PRNGKey`.

        **Raises:** `ValueError` for an unknown cell or wiring name, a wiring
        whose sizes do not match, `readout_times` not a positive int (or
        above 1, or `readout_features` other than `"states"`, with the
        biophysical cell), an unknown `readout_features`, or
        `matmul_dtype` or a `gate_bias_init` other than `"zero"` with another
        cell than `"ltc"`.
        """
        check_readout_times(readout_times)
        check_readout_features(readout_features)
        if matmul_dtype is not None and cell != "ltc":
            raise ValueError(
                "matmul_dtype (mixed precision) is an option of the 'ltc' cell; "
                f"got cell={cell!r}."
            )
        if gate_bias_init != "zero" and cell != "ltc":
            raise ValueError(
                f"gate_bias_init is an option of the 'ltc' cell; got cell={cell!r}."
            )
        if cell == "biophysical" and readout_features != "states":
            raise ValueError(
                "The biophysical cell reads its motor neurons' final state: "
                f"readout_features must be 'states'; got {readout_features!r}."
            )
        if cell == "biophysical" and readout_times != 1:
            raise ValueError(
                "The biophysical cell reads its motor neurons' final state: "
                f"readout_times must be 1; got {readout_times}."
            )
        self.readout_times = readout_times
        self.readout_features = readout_features
        read = readout_size(readout_times, hidden_size, readout_features)
        cell_key, readout_key, wiring_key = jr.split(key, 3)
        cell_input = input_size if encoded_size is None else encoded_size
        self.input_size, self.output_size = input_size, output_size
        if cell == "ltc":
            cell = LTCVectorField(
                cell_input,
                hidden_size,
                tau_init=tau_init,
                tau_min=tau_min,
                gate_bias_init=gate_bias_init,
                matmul_dtype=matmul_dtype,
                key=cell_key,
            )
            readout = LinearReadout(read, output_size, key=readout_key)
        elif cell == "biophysical":
            if isinstance(wiring, str):
                seed = int(jr.randint(wiring_key, (), 0, 2**31 - 1))
                wiring = make_wiring(
                    wiring, hidden_size, output_size, cell_input, seed=seed
                )
            if (wiring.hidden_size, wiring.input_size, wiring.output_size) != (
                hidden_size,
                cell_input,
                output_size,
            ):
                raise ValueError(
                    f"The wiring has {wiring.hidden_size} units, {wiring.input_size} "
                    f"inputs and {wiring.output_size} outputs; the model needs "
                    f"{hidden_size}, {cell_input} and {output_size}."
                )
            cell = BiophysicalLTCVectorField(wiring, key=cell_key)
            readout = MotorReadout(output_size)
        elif isinstance(cell, str):
            raise ValueError(f"Unknown cell {cell!r}; choose 'ltc' or 'biophysical'.")
        else:
            readout = LinearReadout(read, output_size, key=readout_key)
        self.cell = cell
        self.encoder = encoder
        self.readout = readout
        self.hidden_size = hidden_size

    @property
    def vector_field(self) -> eqx.Module:
        """The cell, seen through the encoder where there is one: the field
        [`ltc_jax.integrate`][] solves."""
        return _encoded(self.cell, self.encoder)

    def options(self) -> dict[str, int | str | None]:
        """As [`ltc_jax.AbstractSequenceModel.options`][], with `cell`
        (`"ltc"`, `"biophysical"`, or the class name of a cell of your own) and
        `encoder` (its class name, or `None`)."""
        if isinstance(self.cell, LTCVectorField):
            cell = "ltc"
        elif isinstance(self.cell, BiophysicalLTCVectorField):
            cell = "biophysical"
        else:
            cell = type(self.cell).__name__
        encoder = None if self.encoder is None else type(self.encoder).__name__
        return super().options() | dict(cell=cell, encoder=encoder)

    def solve(
        self,
        path: InputPath,
        *,
        integrator: Integrator,
        save: ModelSave = "final",
        y0: Float[Array, "batch hidden_size"] | None = None,
        event: Crossing | None = None,
    ) -> Trajectory:
        """The hidden state over the batch.

        **Arguments:**

        - `path`: the batch's inputs, an [`ltc_jax.InputPath`][].
        - `integrator`: an [`ltc_jax.Integrator`][].
        - `save`: `"final"` (default): what the readout reads, each sequence's
            state at its last observation (`(batch, hidden_size)`), or with
            `readout_times=n > 1` at its `n` readout times (`(batch, n,
            hidden_size)`); `"observations"`: the state at every observation time
            (`(batch, times, hidden_size)`).
        - `y0`: `(batch, hidden_size)`, each sequence's state at its first
            observation; default `None`, the zero state.
        - `event`: a [`ltc_jax.Crossing`][] that stops each sequence's solve
            where it fires (see [`ltc_jax.integrate`][]): `ys` is the state
            there, `t_reached` its time; with `save="final"` and
            `readout_times=1` only. Default `None`.

        **Returns:** a [`ltc_jax.Trajectory`][] with `ys` of the shape above.

        **Raises:** `ValueError` if the inputs do not have the model's
        `input_size` channels, the model's parameters and the inputs have
        different float types, or `y0` is not `(batch, hidden_size)`, or for an
        `event` with `readout_times > 1`; otherwise as
        [`ltc_jax.integrate`][].
        """
        check_solve(self, path, save)
        y0 = initial_state(y0, path, self.hidden_size)
        if event is not None and self.readout_times > 1:
            raise ValueError(
                "An event stops each solve at its own time, where the readout "
                f"reads the state; readout_times={self.readout_times} reads "
                "several times spread over the whole sequence. Use readout_times=1."
            )
        if save == "final" and self.readout_times > 1:
            save = self.readout_times
        return integrate(
            self.vector_field, path, y0, integrator, save=save, event=event
        )
