"""An LTC with jumps at observations: it evolves on its own between
observations, and a GRU cell updates its state with each observation's values
(the ODE-RNN of Rubanova et al. 2019, with an LTC as its ODE)."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from ._cfc import (
    STATE_GRADIENT_BOUND,
    check_state_gradient_bound,
    scan_observations,
)
from ._model import (
    AbstractSequenceModel,
    LinearReadout,
    ModelSave,
    ReadoutFeatures,
    check_readout_features,
    check_readout_times,
    check_solve,
    readout_size,
)
from ._paths import InputPath
from ._solve import Trajectory
from ._vector_field import GateBiasInit, LTCVectorField


class JumpLTC(AbstractSequenceModel):
    r"""An LTC whose state evolves on its own between observations and jumps at
    each one: the ODE-RNN of Rubanova, Chen and Duvenaud (2019), with an LTC as
    its ODE and a GRU cell as its update. With the LTC's interface (`solve`,
    `outputs`, `__call__` on an [`ltc_jax.InputPath`][]), so that
    [`ltc_jax.fit`][], [`ltc_jax.evaluate`][], checkpoints and the command line
    (`--model jump`) take it as they take the LTC.

    At each observation $t_i$ of a sequence, from the state $h$ after the
    previous one:

    $$h^- = \Phi_{t_i - t_{i-1}}(h),\qquad h \leftarrow \text{GRU}(x(t_i), h^-)$$

    where $\Phi_\Delta$ is the LTC's own flow over the elapsed time $\Delta$
    (no input: its field's one input channel is held at 0, so the field's
    input weights receive no gradient and never change), taken in
    `substeps` fused semi-implicit steps of $\Delta / \text{substeps}$
    (stable at any step: Hasani et al. 2021), and the GRU cell
    (`equinox.nn.GRUCell`) reads the observation's values. So the time between
    observations acts through the LTC's time constants, and an observation
    acts at once, where the continuous-input [`ltc_jax.LTC`][] integrates its
    input over the interval. The state starts at `y0` (default 0) before the
    first observation, which is read with no elapsed time.

    No ODE solver is called: the flow is a `jax.lax.scan` over the
    observations, differentiated by backpropagation like the
    [`ltc_jax.CfC`][], with the gradient in the state clamped to
    `state_gradient_bound` as in the CfC (its "Gradients"). `solves_ode` is
    False; the `integrator` argument is accepted and ignored. Missing
    channels are filled as the path fills them; padding leaves the state
    unchanged.

    **Fields:** `field` (an [`ltc_jax.LTCVectorField`][] of one input
    channel, read as 0), `update` (`equinox.nn.GRUCell`), `readout`
    ([`ltc_jax.LinearReadout`][]); static `substeps`, `state_gradient_bound`
    and the sizes and readout options of [`ltc_jax.AbstractSequenceModel`][].

    Source: Rubanova, Chen and Duvenaud (2019), "Latent ODEs for irregularly
    sampled time series", NeurIPS (the ODE-RNN); the LTC of Hasani et al.
    (2021), "Liquid time-constant networks", AAAI.
    """

    field: LTCVectorField
    update: eqx.nn.GRUCell
    readout: LinearReadout
    substeps: int = eqx.field(static=True)
    state_gradient_bound: float | None = eqx.field(static=True)
    solves_ode: ClassVar[bool] = False
    """No ODE solver: training checks no solver steps for it (its `num_steps`
    count the fused steps and updates)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int,
        *,
        tau_init: tuple[float, float] = (0.1, 10.0),
        tau_min: float = 0.0,
        gate_bias_init: GateBiasInit = "zero",
        substeps: int = 1,
        readout_times: int = 1,
        readout_features: ReadoutFeatures = "states",
        state_gradient_bound: float | None = STATE_GRADIENT_BOUND,
        dtype=None,
        key: PRNGKeyArray,
    ):
        """**Arguments:** `input_size`, the observations' channels;
        `hidden_size`, units; `output_size`, classes or regression targets;
        `tau_init`, `tau_min`, `gate_bias_init`: the LTC field's (see
        [`ltc_jax.LTCVectorField`][]; time in the unit of the timestamps);
        `substeps`, fused steps per interval between observations (default
        1); `readout_times`, `readout_features`: as [`ltc_jax.LTC`][]'s (the
        state after the last observation at or before each of `n` evenly
        spread times); `state_gradient_bound`: as [`ltc_jax.CfC`][]'s;
        `dtype`; `key`.

        **Raises:** `ValueError` as [`ltc_jax.LTCVectorField`][], for
        `substeps` not a positive int, `readout_times` not a positive int,
        an unknown `readout_features`, or a `state_gradient_bound` that is
        not a positive number or `None`.
        """
        check_readout_times(readout_times)
        check_readout_features(readout_features)
        if isinstance(substeps, bool) or not (
            isinstance(substeps, int) and substeps >= 1
        ):
            raise ValueError(f"substeps must be a positive int; got {substeps!r}.")
        self.state_gradient_bound = check_state_gradient_bound(state_gradient_bound)
        field_key, update_key, readout_key = jr.split(key, 3)
        self.field = LTCVectorField(
            1,
            hidden_size,
            tau_init=tau_init,
            tau_min=tau_min,
            gate_bias_init=gate_bias_init,
            dtype=dtype,
            key=field_key,
        )
        self.update = eqx.nn.GRUCell(
            input_size, hidden_size, dtype=dtype, key=update_key
        )
        self.readout = LinearReadout(
            readout_size(readout_times, hidden_size, readout_features),
            output_size,
            dtype=dtype,
            key=readout_key,
        )
        self.substeps = substeps
        self.readout_features = readout_features
        self.input_size, self.hidden_size = input_size, hidden_size
        self.output_size, self.readout_times = output_size, readout_times

    def options(self) -> dict[str, int | str | None]:
        """As [`ltc_jax.AbstractSequenceModel.options`][], with `substeps`."""
        return super().options() | dict(substeps=self.substeps)

    def flow(
        self, h: Float[Array, " hidden_size"], elapsed: Float[Array, ""]
    ) -> Float[Array, " hidden_size"]:
        """One sequence's state after `elapsed` time on its own: `substeps`
        fused steps `h <- (h + dt * drive) / (1 + dt * decay)` of the field's
        split `dh/dt = drive - decay * h`, with `dt = elapsed / substeps`."""
        x = jnp.zeros((1,), h.dtype)
        dt = (elapsed / self.substeps).astype(h.dtype)

        def step(h, _):
            drive, decay = self.field.drive_and_decay(h, x)
            return (h + dt * drive) / (1 + dt * decay), None

        return jax.lax.scan(step, h, length=self.substeps)[0]

    def solve(
        self,
        path: InputPath,
        *,
        integrator=None,
        save: ModelSave = "final",
        y0: Float[Array, "batch hidden_size"] | None = None,
    ) -> Trajectory:
        """The state over the batch, as [`ltc_jax.LTC.solve`][] returns it: `ys`
        of shape `(batch, hidden_size)` after each sequence's last observation,
        `(batch, n, hidden_size)` at the readout times (`readout_times=n > 1`),
        or `(batch, times, hidden_size)` after every observation
        (`save="observations"`); `stats["num_steps"]` counts the fused steps
        and updates (`substeps + 1` per observation). `y0` (`(batch,
        hidden_size)`, default zero) is the state before the first
        observation.

        **Raises:** `ValueError` if the inputs do not have `input_size` channels,
        if the parameters and the inputs have different float types, or for an
        unknown `save`.
        """
        check_solve(self, path, save)
        flow, update = jax.vmap(self.flow), jax.vmap(self.update)
        return scan_observations(
            lambda x, h, dt: update(x, flow(h, dt)),
            path,
            y0,
            self,
            save,
            updates_per_observation=self.substeps + 1,
            state_gradient_bound=self.state_gradient_bound,
        )
