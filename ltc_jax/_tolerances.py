"""Tolerances changed after an integrator is built: one integrator with other
tolerances, and a schedule of them over the epochs of training."""

import diffrax
import equinox as eqx

from ._integrator import Integrator


def with_tolerances(integrator: Integrator, rtol: float, atol: float) -> Integrator:
    """The same integrator with other tolerances: those of the adaptive step-size
    controller, and of the reverse solve's controller under `"backsolve"` or
    `"windowed"` if it has one (as with `seminorm`). Implicit solvers' Newton
    iterations follow the controller's tolerances.

    Public as `ltc_jax.training.with_tolerances`.

    **Arguments:** `integrator`, an adaptive [`ltc_jax.Integrator`][]; `rtol`,
    `atol`, the new tolerances.

    **Returns:** an [`ltc_jax.Integrator`][].

    **Raises:** `ValueError` for fixed steps (no tolerances to change).
    """
    if not integrator.is_adaptive:
        raise ValueError(
            "Tolerances apply to adaptive steps; this integrator is fixed."
        )
    integrator = eqx.tree_at(
        lambda i: (i.stepsize_controller.rtol, i.stepsize_controller.atol),
        integrator,
        (rtol, atol),
    )
    adjoint = integrator.adjoint
    if (
        isinstance(adjoint, diffrax.BacksolveAdjoint)
        and adjoint.kwargs.get("stepsize_controller") is not None
    ):
        integrator = eqx.tree_at(
            lambda i: (
                i.adjoint.kwargs["stepsize_controller"].rtol,
                i.adjoint.kwargs["stepsize_controller"].atol,
            ),
            integrator,
            (rtol, atol),
        )
    return integrator


class ToleranceSchedule(eqx.Module):
    """Piecewise-constant tolerances over the epochs of training: for example loose
    while the model is far from a solution, tight at the end.

    Public as `ltc_jax.training.ToleranceSchedule`. Called with an epoch
    (0-based), returns the [`ltc_jax.Integrator`][] for it
    ([`ltc_jax.training.with_tolerances`][]); [`ltc_jax.fit`][] accepts one in
    place of an integrator (each phase compiles its training step once).

    **Fields:**

    - `integrator`: an adaptive integrator (its own tolerances are replaced).
    - `start_epochs`: the epoch at which each phase starts; the first must be 0,
        strictly increasing.
    - `rtols`, `atols`: the tolerances of each phase.

    **Raises:** `ValueError` (at construction) for a fixed-step integrator, phases
    of different lengths, or `start_epochs` not starting at 0 or not increasing.
    """

    integrator: Integrator
    start_epochs: tuple[int, ...] = eqx.field(static=True)
    rtols: tuple[float, ...] = eqx.field(static=True)
    atols: tuple[float, ...] = eqx.field(static=True)

    def __check_init__(self):
        if not self.integrator.is_adaptive:
            raise ValueError("A tolerance schedule needs an adaptive integrator.")
        if not len(self.start_epochs) == len(self.rtols) == len(self.atols) >= 1:
            raise ValueError("start_epochs, rtols and atols need one entry per phase.")
        if self.start_epochs[0] != 0 or any(
            b <= a
            for a, b in zip(self.start_epochs, self.start_epochs[1:], strict=False)
        ):
            raise ValueError(
                f"start_epochs must start at 0 and increase; got {self.start_epochs}."
            )

    def phase(self, epoch: int) -> int:
        """The index of the phase an epoch belongs to."""
        return max(i for i, start in enumerate(self.start_epochs) if start <= epoch)

    def __call__(self, epoch: int) -> Integrator:
        i = self.phase(epoch)
        return with_tolerances(self.integrator, self.rtols[i], self.atols[i])

    @property
    def final(self) -> Integrator:
        """The last phase's integrator (for evaluation after training)."""
        return self(self.start_epochs[-1])
