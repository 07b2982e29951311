"""The one place where names ("tsit5", "backsolve") become diffrax objects."""

from collections.abc import Callable
from typing import ClassVar, Literal, get_args

import diffrax
import equinox as eqx
import numpy as np

from ._fused import FusedLTC


SolverName = Literal[
    "euler",
    "heun",
    "midpoint",
    "rk4",
    "bosh3",
    "tsit5",
    "dopri5",
    "dopri8",
    "kvaerno5",
    "fused",
]
AdjointName = Literal["checkpoint", "full", "backsolve", "direct"]
Batching = Literal["batched", "vmap"]

SOLVER_NAMES: tuple[str, ...] = get_args(SolverName)
ADJOINT_NAMES: tuple[str, ...] = get_args(AdjointName)


_rk4_tableau = diffrax.ButcherTableau(
    a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
    # Classic RK4 has no embedded lower-order method (its weights are the only
    # third-order solution on its stages); `step` reports no error estimate.
    b_error=np.zeros(4),
    c=np.array([0.5, 0.5, 1.0]),
)


class RK4(diffrax.AbstractERK):
    """The classic fourth-order Runge-Kutta method (Kutta 1901).

    Four stages at $c = (0, 1/2, 1/2, 1)$, weights $(1/6, 1/3, 1/3, 1/6)$. Fixed step
    sizes only: the method has no embedded error estimate, so an adaptive step-size
    controller raises an error rather than silently accepting every step. Dense
    output (`SaveAt(ts=...)`) uses third-order Hermite interpolation.

    diffrax has no classic RK4; this is built on `diffrax.AbstractERK` from the
    Butcher tableau, so it works in `diffrax.diffeqsolve` with every adjoint.
    """

    tableau: ClassVar[diffrax.ButcherTableau] = _rk4_tableau
    interpolation_cls: ClassVar[Callable[..., diffrax.AbstractLocalInterpolation]] = (
        diffrax.ThirdOrderHermitePolynomialInterpolation.from_k
    )

    def order(self, terms):
        return 4

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        y1, _, dense_info, solver_state, result = super().step(
            terms, t0, t1, y0, args, solver_state, made_jump
        )
        return y1, None, dense_info, solver_state, result


_EXPLICIT = {
    "euler": diffrax.Euler,
    "heun": diffrax.Heun,
    "midpoint": diffrax.Midpoint,
    "rk4": RK4,
    "bosh3": diffrax.Bosh3,
    "tsit5": diffrax.Tsit5,
    "dopri5": diffrax.Dopri5,
    "dopri8": diffrax.Dopri8,
}
_FIXED_ONLY = ("euler", "rk4")  # no error estimate


def make_solver(name: str, *, ode_unfolds: int = 6) -> diffrax.AbstractSolver:
    """The diffrax solver for a name.

    | name | method | order | stages | steps |
    |---|---|---|---|---|
    | `euler` | explicit Euler | 1 | 1 | fixed only |
    | `heun` | Heun (explicit trapezoid), embedded Euler | 2 | 2 | fixed or adaptive |
    | `midpoint` | explicit midpoint, embedded Euler | 2 | 2 | fixed or adaptive |
    | `rk4` | classic Runge-Kutta ([`ltc_jax.RK4`][]) | 4 | 4 | fixed only |
    | `bosh3` | Bogacki-Shampine 3(2) | 3 | 4 (FSAL) | fixed or adaptive |
    | `tsit5` | Tsitouras 5(4) | 5 | 7 (FSAL) | fixed or adaptive |
    | `dopri5` | Dormand-Prince 5(4) | 5 | 7 (FSAL) | fixed or adaptive |
    | `dopri8` | Dormand-Prince 8(7) | 8 | 14 | fixed or adaptive |
    | `kvaerno5` | Kvaerno 5(4), ESDIRK, implicit | 5 | 7 | adaptive only |
    | `fused` | [`ltc_jax.FusedLTC`][] | 1 | `ode_unfolds` | fixed only |

    Explicit methods need a step inside their stability region: roughly
    `dt * max|eigenvalue| < 2` (Euler, Heun) to `2.8` (RK4, Tsit5) for a decaying
    field, where the LTC's fastest rate is `1/tau + 1`. `kvaerno5` is A-stable and
    suits stiff problems (small `tau`); its Newton iterations use the step-size
    controller's tolerances. `fused` is linearly implicit: stable for any step on
    the LTC's decay, first order; `ode_unfolds` (default 6) sub-steps per step.

    **Raises:** `ValueError` for an unknown name.
    """
    if name in _EXPLICIT:
        return _EXPLICIT[name]()
    if name == "kvaerno5":
        return diffrax.Kvaerno5()
    if name == "fused":
        return FusedLTC(ode_unfolds)
    raise ValueError(f"Unknown solver {name!r}; choose one of {SOLVER_NAMES}.")


def make_adjoint(
    name: str,
    *,
    max_steps: int,
    checkpoints: int | None = None,
    backward_solver: diffrax.AbstractSolver | None = None,
    backward_stepsize_controller: diffrax.AbstractStepSizeController | None = None,
) -> diffrax.AbstractAdjoint:
    """The diffrax adjoint (gradient mode) for a name.

    - `"checkpoint"`: `diffrax.RecursiveCheckpointAdjoint(checkpoints)`. Exact
        gradient of the discretised solve (discretise-then-optimise): the same
        numbers as `"full"`, recomputing the forward solve from stored states.
        With `checkpoints=None` diffrax stores the least `c` states with
        `2 * max_steps < (c + 1) * (c + 2)`, about `sqrt(2 * max_steps)` (online
        treeverse, Stumm and Walther 2010): memory grows like the square root of
        `max_steps` (not of the steps actually taken), and the backward pass
        re-evaluates the field 2-3 times per forward evaluation (more as
        `max_steps` grows). An int stores
        that many states; `ceil(log2(max_steps))` gives memory logarithmic in
        `max_steps` for more recomputation. The right default for almost
        everything.
    - `"full"`: `RecursiveCheckpointAdjoint(checkpoints=max_steps)`: stores every
        step, i.e. plain backpropagation through the solver. Fastest backward pass,
        memory linear in `max_steps`. The baseline the others are measured against.
    - `"backsolve"`: `diffrax.BacksolveAdjoint`: the continuous adjoint of Chen et
        al. (2018) (optimise-then-discretise). Solves the adjoint ODE
        $\\dot a = -a^\\top \\partial f/\\partial h$ backwards in time, recomputing
        $h(t)$ on the way, so memory is O(1) in the number of steps and in the
        length of the input. The price: a second (reverse) solve, and a gradient
        that is only approximate, since it is the exact gradient of neither the
        discretised nor the continuous model. The reverse solve of a dissipative
        system such as an LTC is *expansive*, so errors can grow; measure before
        trusting it on long horizons. `backward_solver` and
        `backward_stepsize_controller` choose the reverse solve's method.
    - `"direct"`: `diffrax.DirectAdjoint`: differentiates the solver's loop
        directly; supports forward-mode autodiff, needs the most memory. For
        research into the adjoints themselves.

    **Arguments:**

    - `name`: one of the above.
    - `max_steps`: the solve's `max_steps` (used by `"full"`).
    - `checkpoints`: for `"checkpoint"` only: `None` (diffrax's default) or a
        positive int.
    - `backward_solver`, `backward_stepsize_controller`: for `"backsolve"` only.

    **Raises:** `ValueError` for an unknown name or an option given to a mode that
    does not take it.
    """
    if name not in ADJOINT_NAMES:
        raise ValueError(f"Unknown adjoint {name!r}; choose one of {ADJOINT_NAMES}.")
    if checkpoints is not None and name != "checkpoint":
        raise ValueError(
            f"checkpoints={checkpoints} only applies to adjoint='checkpoint', "
            f"not {name!r}."
        )
    backward = {}
    if backward_solver is not None:
        backward["solver"] = backward_solver
    if backward_stepsize_controller is not None:
        backward["stepsize_controller"] = backward_stepsize_controller
    if backward and name != "backsolve":
        raise ValueError(
            "backward_solver and backward_stepsize_controller only apply to "
            f"adjoint='backsolve', not {name!r}."
        )
    if name == "checkpoint":
        if checkpoints is not None and checkpoints < 1:
            raise ValueError(f"checkpoints must be positive; got {checkpoints}.")
        return diffrax.RecursiveCheckpointAdjoint(checkpoints=checkpoints)
    if name == "full":
        return diffrax.RecursiveCheckpointAdjoint(checkpoints=max_steps)
    if name == "backsolve":
        return diffrax.BacksolveAdjoint(**backward)
    return diffrax.DirectAdjoint()


def adjoint_name(adjoint: diffrax.AbstractAdjoint, max_steps: int) -> str:
    """The `ltc_jax` name of a diffrax adjoint object (for reports)."""
    if isinstance(adjoint, diffrax.BacksolveAdjoint):
        return "backsolve"
    if isinstance(adjoint, diffrax.DirectAdjoint):
        return "direct"
    if isinstance(adjoint, diffrax.RecursiveCheckpointAdjoint):
        if adjoint.checkpoints == max_steps:
            return "full"
        return "checkpoint"
    return type(adjoint).__name__


class Integrator(eqx.Module):
    """How an LTC is integrated and differentiated: the arguments of
    `diffrax.diffeqsolve` that are not the model.

    Build one by name with [`ltc_jax.make_integrator`][], or directly from diffrax
    objects. Passed to the model at call time, never stored in it, so changing the
    gradient mode or tolerance never touches the parameters.

    **Fields:**

    - `solver`: a `diffrax.AbstractSolver`.
    - `stepsize_controller`: `diffrax.ConstantStepSize()` (fixed steps) or an
        adaptive controller such as `diffrax.PIDController`. `ltc_jax` adds the
        observation times as `jump_ts` itself.
    - `adjoint`: a `diffrax.AbstractAdjoint` (the gradient mode).
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
        failure is reported in the solution's `result` instead.
    """

    solver: diffrax.AbstractSolver
    stepsize_controller: diffrax.AbstractStepSizeController
    adjoint: diffrax.AbstractAdjoint
    dt0: float | None
    max_steps: int = eqx.field(static=True)
    batching: str = eqx.field(static=True, default="batched")
    throw: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be a positive int; got {self.max_steps}.")
        if self.batching not in get_args(Batching):
            raise ValueError(
                f"Unknown batching {self.batching!r}; choose 'batched' or 'vmap'."
            )
        if self.dt0 is not None and not self.dt0 > 0:
            raise ValueError(f"dt0 must be positive (time units); got {self.dt0}.")
        if self.is_adaptive:
            if isinstance(self.solver, RK4 | diffrax.Euler) or not isinstance(
                self.solver, diffrax.AbstractAdaptiveSolver
            ):
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

    @property
    def is_adaptive(self) -> bool:
        """Whether steps are chosen by an adaptive controller."""
        return isinstance(
            self.stepsize_controller, diffrax.AbstractAdaptiveStepSizeController
        )

    @property
    def adjoint_name(self) -> str:
        """`"checkpoint"`, `"full"`, `"backsolve"` or `"direct"`."""
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
    backward_solver: str | None = None,
    seminorm: bool = False,
    ode_unfolds: int = 6,
    batching: str | None = None,
    throw: bool = True,
) -> Integrator:
    """Build an [`ltc_jax.Integrator`][] from names.

    Fixed steps: pass `dt0` and no tolerances. Adaptive steps: pass `rtol` and `atol`
    (a `diffrax.PIDController`), optionally `dt0` as the first step and `dtmin` as a
    floor below which the solve fails instead of crawling.

    **Arguments:**

    - `solver`: a name from [`ltc_jax.make_solver`][] or a diffrax solver.
    - `adjoint`: the gradient mode, see [`ltc_jax.make_adjoint`][]: `"checkpoint"`
        (default), `"full"`, `"backsolve"` or `"direct"`.
    - `dt0`: step size in time units (fixed), or first step (adaptive).
    - `rtol`, `atol`: relative and absolute tolerances of the PID controller.
    - `dtmin`: smallest step (time units) the controller may take; reaching it is
        reported as a failure.
    - `max_steps`: most steps per solve (default 4096, diffrax's). Memory under
        `"full"` and `"checkpoint"` is sized by it, not by the steps taken.
    - `checkpoints`: for `"checkpoint"`: number of checkpoints, default `None`.
    - `backward_solver`: for `"backsolve"`: the reverse solve's solver (default: the
        forward one; required with `"fused"`).
    - `seminorm`: for `"backsolve"` with adaptive steps: the reverse solve's error
        control ignores the parameter-cotangent channels, whose error does not
        feed back into the solve (`diffrax.adjoint_rms_seminorm`; Kidger, Chen and
        Lyons 2021, "Hey, that's not an ODE"), so it may take fewer steps. The
        reverse solve still stops at the input's kinks, as the forward one does.
    - `ode_unfolds`: for `"fused"`: sub-steps per step (default 6).
    - `batching`: `"batched"`: the batch is one ODE state `(batch, hidden_size)`
        with shared solver steps; exact, and 2-5x faster than `"vmap"`, which
        solves each sequence alone (each with its own adaptive steps). Under
        `"vmap"`, `"backsolve"` keeps a copy of the parameter cotangents per
        sequence. Default (`None`): `"vmap"` for the implicit `kvaerno5`, whose
        Newton iterations factorise the Jacobian of the state, a dense
        `(batch * hidden_size)^2` matrix for the batch as one state
        (`hidden_size^2` per sequence under vmap; one gradient took 50 s batched
        against 0.19 s under vmap on JapaneseVowels, batch 32, 32 units, CPU);
        `"batched"` otherwise.
    - `throw`: raise on a failed solve (default True).

    **Raises:** `ValueError` for an unknown name, a non-positive `dt0`, `rtol`
    without `atol` (or the reverse), fixed steps without `dt0`, an adaptive
    controller with a solver that has no error estimate (`euler`, `rk4`), or fixed
    steps with an implicit solver, or `"fused"` with `"backsolve"` and no
    `backward_solver`.
    """
    if isinstance(solver, str):
        solver_obj = make_solver(solver, ode_unfolds=ode_unfolds)
    else:
        solver_obj = solver
    if (
        isinstance(solver_obj, FusedLTC)
        and adjoint == "backsolve"
        and backward_solver is None
    ):
        raise ValueError(
            "adjoint='backsolve' with the fused solver needs a backward_solver (e.g. "
            "'heun'): the adjoint system is not of LTC form, so the fused step "
            "cannot solve it."
        )
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
        if adjoint != "backsolve" or rtol is None:
            raise ValueError(
                "seminorm applies to adjoint='backsolve' with adaptive steps "
                "(rtol/atol) only."
            )
        backward_controller = diffrax.PIDController(
            rtol=rtol,
            atol=atol,
            dtmin=dtmin,
            force_dtmin=False,
            norm=diffrax.adjoint_rms_seminorm,
        )
    backward_obj = None
    if backward_solver is not None:
        backward_obj = make_solver(backward_solver)
        if isinstance(backward_obj, diffrax.AbstractImplicitSolver) and rtol is None:
            raise ValueError("An implicit backward_solver needs rtol and atol.")
    adjoint_obj = make_adjoint(
        adjoint,
        max_steps=max_steps,
        checkpoints=checkpoints,
        backward_solver=backward_obj,
        backward_stepsize_controller=backward_controller,
    )
    if batching is None:
        implicit = isinstance(solver_obj, diffrax.AbstractImplicitSolver)
        batching = "vmap" if implicit else "batched"
    return Integrator(
        solver=solver_obj,
        stepsize_controller=controller,
        adjoint=adjoint_obj,
        dt0=None if dt0 is None else float(dt0),
        max_steps=max_steps,
        batching=batching,
        throw=throw,
    )


def with_tolerances(integrator: Integrator, rtol: float, atol: float) -> Integrator:
    """The same integrator with other tolerances: those of the adaptive step-size
    controller, and of the reverse solve's controller under `"backsolve"` if it
    has one (as with `seminorm`). Implicit solvers' Newton iterations follow the
    controller's tolerances.

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
    backward = getattr(integrator.adjoint, "kwargs", {}).get("stepsize_controller")
    if backward is not None:
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

    Called with an epoch (0-based), returns the [`ltc_jax.Integrator`][] for it;
    [`ltc_jax.fit`][] accepts one in place of an integrator (each phase compiles
    its training step once).

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
