"""How a model is integrated and differentiated: [`ltc_jax.Integrator`][], which
refuses every combination of its parts that cannot work when it is built, and
[`ltc_jax.make_integrator`][], which builds one from names."""

from typing import Literal, get_args

import diffrax
import equinox as eqx

from ._names import (
    adjoint_name,
    has_reverse_solve,
    make_adjoint,
    make_solver,
    solver_name,
)
from ._solver import RK4
from ._solver.fused import needs_ltc_form


Batching = Literal["batched", "vmap"]

_SEMINORM_NEEDS_ADAPTIVE_STEPS = (
    "seminorm applies to adaptive steps (rtol/atol): with fixed steps the reverse "
    "solve has no error control to change."
)


def _has_error_estimate(solver: diffrax.AbstractSolver) -> bool:
    """Whether an adaptive controller can choose `solver`'s steps."""
    return isinstance(solver, diffrax.AbstractAdaptiveSolver) and not isinstance(
        solver, RK4 | diffrax.Euler
    )


class Integrator(eqx.Module):
    """How an LTC is integrated and differentiated: the arguments of
    `diffrax.diffeqsolve` that are not the model. Public as `ltc_jax.Integrator`.

    Build one by name with [`ltc_jax.make_integrator`][], or directly from diffrax
    objects: either way every combination of solver, steps and gradient mode
    that cannot work is refused here, when the integrator is built, not inside
    a trace. Passed to the model at call time, never stored in it, so changing
    the gradient mode or tolerance never touches the parameters.

    **Fields:**

    - `solver`: a `diffrax.AbstractSolver`.
    - `stepsize_controller`: `diffrax.ConstantStepSize()` (fixed steps) or an
        adaptive controller such as `diffrax.PIDController`. `ltc_jax` adds the
        observation times as `jump_ts` itself.
    - `adjoint`: a `diffrax.AbstractAdjoint` (the gradient mode). A reverse
        solve (`diffrax.BacksolveAdjoint`, [`ltc_jax.WindowedBacksolveAdjoint`][])
        takes its own `solver` and `stepsize_controller` as keyword arguments,
        as diffrax's do; without them it uses the forward ones.
    - `dt0`: with fixed steps, the largest step in time units (each sequence takes
        `ceil(duration / dt0)` equal steps); with adaptive steps, the initial step,
        or `None` to let diffrax choose.
    - `max_steps`: static int, the most steps one solve may take; exceeding it is
        an error, never a silent truncation.
    - `batching`: `"batched"` (default here) solves the batch as one `(batch,
        hidden_size)` state; `"vmap"` solves each sequence on its own (per-sequence
        adaptive steps, at a cost). [`ltc_jax.make_integrator`][] chooses
        `"vmap"` for implicit solvers unless told otherwise; this class does not.
    - `throw`: static bool; raise when a solve fails (default). With `False` the
        failure is reported in the solution's `result` instead (an
        [`ltc_jax.RESULTS`][]).
    - `check_state`: static bool; also fail a solve whose parameters or `y0` are
        not finite (before it runs), or whose saved states leave the field's
        state bounds (a divergence that stays finite; see
        [`ltc_jax.AbstractLTCField.state_bounds`][]): raised with `throw`,
        reported as `RESULTS.non_finite_input` or `RESULTS.diverged` without.
        Default True: a reduction per solve, not per step.

    **Raises:**

    - `ValueError` for a `max_steps` below 1, an unknown `batching`, a
        non-positive `dt0`, fixed steps without `dt0`, an adaptive controller
        with a solver that has no error estimate (Euler, [`ltc_jax.RK4`][]),
        fixed steps with an implicit solver, a reverse solve whose seminorm
        controller (`diffrax.adjoint_rms_seminorm`) meets fixed forward steps,
        or an implicit reverse-solve solver without adaptive steps.
    - `NotImplementedError` for a reverse solve that would step the adjoint
        system with a solver that steps only fields in LTC form
        ([`ltc_jax.FusedLTC`][]): the adjoint system is not one. Each message
        names what works instead.
    """

    solver: diffrax.AbstractSolver
    stepsize_controller: diffrax.AbstractStepSizeController
    adjoint: diffrax.AbstractAdjoint
    dt0: float | None
    max_steps: int = eqx.field(static=True)
    batching: str = eqx.field(static=True, default="batched")
    throw: bool = eqx.field(static=True, default=True)
    check_state: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        self._check_reverse_solve()
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be a positive int; got {self.max_steps}.")
        if self.batching not in get_args(Batching):
            raise ValueError(
                f"Unknown batching {self.batching!r}; choose 'batched' or 'vmap'."
            )
        if self.dt0 is not None and not self.dt0 > 0:
            raise ValueError(f"dt0 must be positive (time units); got {self.dt0}.")
        if self.is_adaptive:
            if not _has_error_estimate(self.solver):
                raise ValueError(
                    f"{type(self.solver).__name__} has no error estimate, so it "
                    "cannot take adaptive steps: pass a fixed dt0 without rtol/atol, "
                    "or choose an adaptive solver such as tsit5."
                )
        else:
            if self.dt0 is None:
                raise ValueError(
                    "Fixed steps need dt0 (time units); or pass rtol and atol for "
                    "adaptive steps."
                )
            if isinstance(self.solver, diffrax.AbstractImplicitSolver):
                raise ValueError(
                    f"The implicit solver {type(self.solver).__name__} needs adaptive "
                    "steps (rtol and atol): with fixed steps its Newton iterations "
                    "have no tolerance and no way to recover from non-convergence."
                )

    def _check_reverse_solve(self):
        """The reverse solve of a continuous adjoint, with the forward solve's
        solver and controller where it has none of its own."""
        if not isinstance(self.adjoint, diffrax.BacksolveAdjoint):
            return
        backward_solver = self.adjoint.kwargs.get("solver")
        controller = self.adjoint.kwargs.get("stepsize_controller")
        if backward_solver is None and needs_ltc_form(self.solver):
            raise NotImplementedError(
                f"adjoint={self.adjoint_name!r} with {type(self.solver).__name__} "
                "needs a backward_solver, e.g. backward_solver='heun': the adjoint "
                "system is not of LTC form, so the fused step cannot solve it. Or "
                "use adjoint='checkpoint', which differentiates the fused steps "
                "exactly."
            )
        if (
            isinstance(controller, diffrax.AbstractAdaptiveStepSizeController)
            and getattr(controller, "norm", None) is diffrax.adjoint_rms_seminorm
            and not self.is_adaptive
        ):
            raise ValueError(_SEMINORM_NEEDS_ADAPTIVE_STEPS)
        if backward_solver is not None and needs_ltc_form(backward_solver):
            raise NotImplementedError(
                f"backward_solver={solver_name(backward_solver)!r} steps only fields "
                "in LTC form, and the adjoint system is not one; use an explicit "
                "solver such as 'heun' or 'tsit5'."
            )
        if backward_solver is None:  # the forward solver, checked as such
            return
        if controller is None:
            controller = self.stepsize_controller
        adaptive = isinstance(controller, diffrax.AbstractAdaptiveStepSizeController)
        if adaptive and not _has_error_estimate(backward_solver):
            raise ValueError(
                f"backward_solver={solver_name(backward_solver)!r} has no error "
                "estimate, so the reverse solve cannot take the adaptive steps "
                "its controller asks for: give one that has, such as 'heun' or "
                "'tsit5', or take fixed steps (dt0 without rtol/atol)."
            )
        if isinstance(backward_solver, diffrax.AbstractImplicitSolver) and not (
            isinstance(controller, diffrax.AbstractAdaptiveStepSizeController)
        ):
            raise ValueError("An implicit backward_solver needs rtol and atol.")

    @property
    def is_adaptive(self) -> bool:
        """Whether steps are chosen by an adaptive controller."""
        return isinstance(
            self.stepsize_controller, diffrax.AbstractAdaptiveStepSizeController
        )

    @property
    def adjoint_name(self) -> str:
        """The gradient mode's name: `"checkpoint"`, `"full"`, `"backsolve"`,
        `"windowed"` or `"direct"` (a class name for other diffrax adjoints)."""
        return adjoint_name(self.adjoint, self.max_steps)


def make_integrator(
    solver: str | diffrax.AbstractSolver = "tsit5",
    adjoint: str = "checkpoint",
    *,
    dt0: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    dtmin: float | None = None,
    max_steps: int = 4096,
    checkpoints: int | None = None,
    windows: int | None = None,
    backward_solver: str | None = None,
    seminorm: bool = False,
    ode_unfolds: int = 6,
    batching: str | None = None,
    throw: bool = True,
    check_state: bool = True,
) -> Integrator:
    """Build an [`ltc_jax.Integrator`][] from names. Public as
    `ltc_jax.make_integrator`.

    Fixed steps: pass `dt0` and no tolerances. Adaptive steps: pass `rtol` and `atol`
    (a `diffrax.PIDController`), optionally `dt0` as the first step and `dtmin` as a
    floor below which the solve fails instead of crawling.

    This function turns names into diffrax objects; whether they work together
    is [`ltc_jax.Integrator`][]'s to check, so one built by hand is held to the
    same rules and refused with the same messages.

    **Arguments:**

    - `solver`: a name from [`ltc_jax.make_solver`][] or a diffrax solver.
    - `adjoint`: the gradient mode, see [`ltc_jax.make_adjoint`][]: `"checkpoint"`
        (default), `"full"`, `"backsolve"`, `"windowed"` or `"direct"`.
    - `dt0`: step size in time units (fixed), or first step (adaptive).
    - `rtol`, `atol`: relative and absolute tolerances of the PID controller.
    - `dtmin`: smallest step (time units) the controller may take; reaching it is
        reported as a failure.
    - `max_steps`: most steps per solve (default 4096, diffrax's). Memory under
        `"full"` and `"checkpoint"` is sized by it, not by the steps taken.
    - `checkpoints`: for `"checkpoint"`: number of checkpoints, default `None`.
    - `windows`: for `"windowed"`: number of windows, default `None` (derived from
        the model and the data before compiling; see
        [`ltc_jax.training.default_windows`][]).
    - `backward_solver`: for `"backsolve"` and `"windowed"`: the reverse solve's
        solver (default: the forward one; required with `"fused"`).
    - `seminorm`: for `"backsolve"` and `"windowed"` with adaptive steps: the
        reverse solve's error
        control ignores the parameter-cotangent channels, whose error does not
        feed back into the solve (`diffrax.adjoint_rms_seminorm`; Kidger, Chen and
        Lyons 2021, "Hey, that's not an ODE"), so it may take fewer steps. The
        reverse solve still stops at the input's kinks, as the forward one does.
    - `ode_unfolds`: for `"fused"`: sub-steps per step (default 6).
    - `batching`: `"batched"`: the batch is one ODE state `(batch, hidden_size)`
        whose sequences share the solver's steps, each on its own clock (exact
        for fixed steps); `"vmap"`: each sequence is solved alone, with its own
        adaptive steps. Under `"vmap"`, `"backsolve"` keeps a copy of the
        parameter cotangents per sequence. Default (`None`): `"vmap"` for the
        implicit `kvaerno5`, whose Newton iterations would otherwise factorise
        a dense `(batch * hidden_size)^2` Jacobian (`hidden_size^2` per
        sequence under vmap); `"batched"` otherwise. Neither is faster on all
        data: with adaptive steps and a linear input the batched solve stops
        at the union of its sequences' observation times;
        [`ltc_jax.training.derive_defaults`][] chooses from the data.
    - `throw`: raise on a failed solve (default True).
    - `check_state`: fail a solve on non-finite parameters or `y0` and on
        states that leave the field's bounds (default True).

    **Raises:**

    - `ValueError` for an unknown name, `rtol` without `atol` (or the
        reverse), `dtmin` with fixed steps, `seminorm` with fixed steps, an
        option given to a gradient mode that does not take it; and as
        [`ltc_jax.Integrator`][] for the combination built (a non-positive
        `dt0`, fixed steps without `dt0`, an adaptive controller with a solver
        that has no error estimate (`euler`, `rk4`; for the reverse solve
        too, `backward_solver`), fixed steps with an implicit solver, ...).
    - `NotImplementedError` for `seminorm` without a reverse solve; and as
        [`ltc_jax.Integrator`][] for `"fused"` with `"backsolve"` or
        `"windowed"` and no `backward_solver`, or `backward_solver="fused"`:
        each message names what works instead.
    """
    if isinstance(solver, str):
        solver = make_solver(solver, ode_unfolds=ode_unfolds)
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"Pass both rtol and atol for adaptive steps, or neither for fixed steps; "
            f"got rtol={rtol}, atol={atol}."
        )
    if rtol is not None:
        controller = diffrax.PIDController(
            rtol=rtol,
            atol=atol,
            dtmin=dtmin,
            force_dtmin=False,  # reaching dtmin is a failure, never a forced step
        )
    else:
        if dtmin is not None:
            raise ValueError("dtmin applies to adaptive steps (rtol/atol) only.")
        controller = diffrax.ConstantStepSize()
    backward_controller = None
    if seminorm:
        if not has_reverse_solve(adjoint):
            raise NotImplementedError(
                "seminorm shapes the reverse solve of adjoint='backsolve' or "
                f"'windowed'; adjoint={adjoint!r} has none. Use one of those with "
                "seminorm=True, or drop seminorm."
            )
        if rtol is None:
            # No tolerances, so no seminorm controller to build.
            raise ValueError(_SEMINORM_NEEDS_ADAPTIVE_STEPS)
        backward_controller = diffrax.PIDController(
            rtol=rtol,
            atol=atol,
            dtmin=dtmin,
            force_dtmin=False,
            norm=diffrax.adjoint_rms_seminorm,
        )
    if backward_solver is not None:
        backward_solver = make_solver(backward_solver)
    adjoint = make_adjoint(
        adjoint,
        max_steps=max_steps,
        checkpoints=checkpoints,
        windows=windows,
        backward_solver=backward_solver,
        backward_stepsize_controller=backward_controller,
    )
    if batching is None:
        implicit = isinstance(solver, diffrax.AbstractImplicitSolver)
        batching = "vmap" if implicit else "batched"
    return Integrator(
        solver=solver,
        stepsize_controller=controller,
        adjoint=adjoint,
        dt0=None if dt0 is None else float(dt0),
        max_steps=max_steps,
        batching=batching,
        throw=throw,
        check_state=check_state,
    )
