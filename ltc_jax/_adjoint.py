"""The windowed continuous adjoint: backsolve restarted from stored forward states,
the number of windows that bounds its error, and its resolution from a model and
its data before a solve is compiled."""

import math
from typing import TYPE_CHECKING

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._paths import InputPath


if TYPE_CHECKING:  # `_integrator` builds this module's adjoint: no import cycle
    from ._integrator import Integrator


class WindowedBacksolveAdjoint(diffrax.BacksolveAdjoint):
    r"""The continuous adjoint of Chen et al. (2018), restarted from forward states
    stored at the ends of `windows` equal windows of the solve. Public as
    `ltc_jax.WindowedBacksolveAdjoint`.

    `diffrax.BacksolveAdjoint` reconstructs the state $h(t)$ by solving the
    system backwards alongside the adjoint $a(t) = \partial L / \partial h(t)$.
    An LTC contracts forwards (every unit decays at rate $1/\tau + f$), so that
    reconstruction *expands*: its round-off and truncation errors grow like
    $\exp(\lambda T)$ over a horizon $T$, with $\lambda$ up to
    $1/\tau_\text{min} + 1$. The adjoint equation itself, run backwards, is
    contracting. Storing the forward state at $K - 1$ points and restarting the
    reconstruction from each of them (diffrax's `BacksolveAdjoint` does this at
    every saved time) keeps the growth to that of one window, $\exp(\lambda
    T/K)$, for $O(K)$ stored states and about one reverse solve of compute. This
    is SciMLSensitivity's `BacksolveAdjoint(checkpointing=true)`, and what
    torchdiffeq's adjoint does at its output times.

    **When to use it:** for long horizons where exact backpropagation
    (`"checkpoint"`) is too slow, or the memory of even a few stored states per
    step is too much: its memory is `windows` states (flat in the number of steps
    and in the input's length), its training step about that of `"backsolve"`.
    Its gradient is still the continuous adjoint's (optimise-then-discretise):
    exact only as the reverse solve's steps shrink, and not the gradient of the
    discretised forward solve that `"checkpoint"` returns. With
    `windows=None` ltc_jax derives the count from the model's time constants and
    the data's horizon ([`ltc_jax.training.default_windows`][]);
    [`ltc_jax.fit`][] does so before it compiles, and again each epoch should
    training shrink the time constants.

    **Arguments:**

    - `windows`: static int, the number of windows each solve is cut into
        (`windows - 1` stored states), or `None` for the derived default.
    - `kwargs`: as `diffrax.BacksolveAdjoint` (`solver`, `stepsize_controller`,
        ... of the reverse solve).

    **Raises:** `ValueError` if `windows` is not a positive int.

    ??? cite "References"

        ```bibtex
        @inproceedings{chen2018neural,
            title={Neural Ordinary Differential Equations},
            author={Chen, Ricky T. Q. and Rubanova, Yulia and Bettencourt, Jesse
                    and Duvenaud, David},
            booktitle={Advances in Neural Information Processing Systems},
            year={2018}
        }
        @article{rackauckas2020universal,
            title={Universal Differential Equations for Scientific Machine
                   Learning},
            author={Rackauckas, Christopher and others},
            journal={arXiv:2001.04385}, year={2020}
        }
        ```
    """

    windows: int | None = eqx.field(static=True)

    def __init__(self, windows: int | None = None, **kwargs):
        if windows is not None and (
            isinstance(windows, bool) or not isinstance(windows, int) or windows < 1
        ):
            raise ValueError(
                f"windows must be a positive int or None; got {windows!r}."
            )
        self.windows = windows
        super().__init__(**kwargs)

    def restart_times(
        self, s_end: Float[ArrayLike, ""], *, integer_clock: bool
    ) -> Float[Array, " restarts"]:
        """The `windows - 1` interior window ends on the solver clock `[0,
        s_end]`. With fixed steps the clock counts steps (`integer_clock`), and
        the ends are rounded to whole steps, where the forward solve has its
        state exactly rather than interpolated.

        **Raises:** `ValueError` if `windows` is still `None`.
        """
        if self.windows is None:
            raise ValueError(
                "adjoint='windowed' with windows=None needs its number of windows "
                "before it is compiled: ltc_jax.fit and ltc_jax.evaluate derive it "
                "from the model and the data; in your own code pass windows=K "
                "(ltc_jax.training.default_windows(field, horizon, dtype=...) "
                "derives K for a field with a decay_bound())."
            )
        fractions = jnp.arange(1, self.windows) / self.windows
        ends = jnp.asarray(s_end) * fractions.astype(jnp.result_type(s_end))
        return jnp.round(ends) if integer_clock else ends


def default_windows(
    field: eqx.Module,
    horizon: float,
    *,
    dtype,
    rtol: float | None = None,
    max_steps: int | None = None,
) -> int:
    r"""The number of windows of [`ltc_jax.WindowedBacksolveAdjoint`][] that bounds
    its error: the fewest windows over which the reconstruction amplifies its own
    local error by at most $\epsilon^{-1/3}$, keeping that error below
    $\epsilon^{2/3}$ of the state. Public as `ltc_jax.training.default_windows`.

    Within a window of length $W$ the reverse reconstruction amplifies errors
    by at most $\exp(\lambda W)$, where $\lambda$ bounds the field's decay rate
    (`field.decay_bound()`: $1/\tau_\text{min} + 1$ for the simplified LTC).
    The local error $\epsilon$ is the float type's machine epsilon, or `rtol` if
    larger (adaptive steps). So $W = \ln(\epsilon^{-1/3}) / \lambda$ and
    $K = \lceil T / W \rceil$ over the horizon $T$. In float32 this keeps the
    amplified round-off under $2.4 \cdot 10^{-5}$.

    **Arguments:**

    - `field`: the vector field solved, with a `decay_bound()` method (any
        [`ltc_jax.AbstractLTCField`][]; `ltc_jax.LTC(...).cell`).
    - `horizon`: the longest duration to be solved, in time units.
    - `dtype`: the floating dtype of the solve.
    - `rtol`: the relative tolerance of adaptive steps, if any.
    - `max_steps`: with fixed steps, the steps of the longest solve; no more
        windows than steps are useful.

    **Returns:** a positive int.

    **Raises:** `ValueError` if `field` has no `decay_bound`, or `horizon` is
    negative or not finite.
    """
    if not hasattr(field, "decay_bound"):
        raise ValueError(
            f"{type(field).__name__} has no decay_bound(), from which the windowed "
            "adjoint's windows are derived; pass windows=K to make_integrator."
        )
    if not (math.isfinite(horizon) and horizon >= 0):
        raise ValueError(f"horizon must be finite and non-negative; got {horizon}.")
    error = float(np.finfo(dtype).eps)
    if rtol is not None:
        error = max(error, float(rtol))
    rate = float(field.decay_bound())
    window = math.log(error ** (-1 / 3)) / rate
    windows = max(1, math.ceil(horizon / window))
    if max_steps is not None:
        windows = min(windows, max_steps)
    return windows


def resolve_windows(
    integrator: "Integrator",
    field: eqx.Module | None,
    horizon: float,
    *,
    dtype,
    at_least: int = 1,
) -> "Integrator":
    """`integrator` with the number of windows of its windowed adjoint derived,
    where it has `windows=None`; any other integrator unchanged. Public as
    `ltc_jax.training.resolve_windows`.

    The count is [`ltc_jax.training.default_windows`][] for `field` over
    `horizon`, at the integrator's `rtol` (adaptive steps) or `max_steps` (fixed
    steps), rounded up to a power of two and to `at_least`, so that a count that
    grows as training shrinks the time constants recompiles the step rarely.
    [`ltc_jax.fit`][] calls this before each epoch.

    **Arguments:** `integrator`; `field`, the vector field solved (an LTC's
    `cell`); `horizon`, the longest duration solved (time units); `dtype`, the
    solve's floating dtype; `at_least`, a count not to go below (the last one
    used).

    **Returns:** an [`ltc_jax.Integrator`][]; its `adjoint.windows` is the count.

    **Raises:** as `default_windows`.
    """
    adjoint = integrator.adjoint
    if not isinstance(adjoint, WindowedBacksolveAdjoint) or adjoint.windows is not None:
        return integrator
    needed = default_windows(
        field,
        horizon,
        dtype=dtype,
        rtol=float(integrator.stepsize_controller.rtol)
        if integrator.is_adaptive
        else None,
        max_steps=None if integrator.is_adaptive else integrator.max_steps,
    )
    windows = max(at_least, 2 ** math.ceil(math.log2(needed)))
    if not integrator.is_adaptive:
        windows = min(windows, max(at_least, integrator.max_steps))
    resolved = WindowedBacksolveAdjoint(windows, **adjoint.kwargs)
    return eqx.tree_at(lambda i: i.adjoint, integrator, resolved)


def resolve_windows_for_path(
    integrator: "Integrator", field: eqx.Module | None, path: InputPath
) -> "Integrator":
    """[`ltc_jax.training.resolve_windows`][] for the vector field `field` (a
    model's `vector_field`) over the longest sequence of an
    [`ltc_jax.InputPath`][].

    An integrator whose number of windows is already known is returned as it is,
    so this may run under `jax.jit` (e.g. inside an `eqx.filter_jit` of
    [`ltc_jax.measure.loss_gradient`][]). Deriving a count needs the times and
    the field's parameters as concrete values.

    **Raises:** `ValueError` if the count is to be derived (`windows=None`) but
    the times or the field's parameters are traced (under `jax.jit`): the count
    is a static shape, fixed before tracing.
    """
    adjoint = integrator.adjoint
    if not isinstance(adjoint, WindowedBacksolveAdjoint) or adjoint.windows is not None:
        return integrator
    horizon = jnp.max(path.t_end - path.t_start)
    parameters = jax.tree.leaves(eqx.filter(field, eqx.is_array))
    if any(isinstance(x, jax.core.Tracer) for x in [horizon, *parameters]):
        raise ValueError(
            "adjoint='windowed' with windows=None derives its number of windows "
            "from the model's time constants and the data's times, but they are "
            "traced here (under jax.jit or eqx.filter_jit), and the count must be "
            "known before tracing. Pass windows=K to make_integrator, or resolve "
            "the count outside the jitted function: integrator = "
            "ltc_jax.training.resolve_windows(integrator, model.vector_field, "
            "horizon, dtype=ts.dtype), with horizon the longest sequence's "
            "duration."
        )
    return resolve_windows(integrator, field, float(horizon), dtype=path.ts.dtype)
