"""The one place where names ("tsit5", "backsolve") become diffrax objects.

A solver is one entry of `_SOLVERS`; a gradient mode is one entry of
`_GRADIENT_MODES` (and its name in `AdjointName`). Nothing else in ltc_jax keys on
names.
"""

import dataclasses
from collections.abc import Callable
from typing import Literal, get_args

import diffrax

from ._adjoint import WindowedBacksolveAdjoint
from ._solver import RK4, FusedLTC


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
AdjointName = Literal["checkpoint", "full", "backsolve", "windowed", "direct"]

SOLVER_NAMES: tuple[str, ...] = get_args(SolverName)
"""Every solver name [`ltc_jax.make_solver`][] knows. Public as
`ltc_jax.SOLVER_NAMES`."""
ADJOINT_NAMES: tuple[str, ...] = get_args(AdjointName)
"""Every gradient-mode name [`ltc_jax.make_adjoint`][] knows. Public as
`ltc_jax.ADJOINT_NAMES`."""


_SOLVERS: dict[str, Callable[[int], diffrax.AbstractSolver]] = {
    "euler": lambda unfolds: diffrax.Euler(),
    "heun": lambda unfolds: diffrax.Heun(),
    "midpoint": lambda unfolds: diffrax.Midpoint(),
    "rk4": lambda unfolds: RK4(),
    "bosh3": lambda unfolds: diffrax.Bosh3(),
    "tsit5": lambda unfolds: diffrax.Tsit5(),
    "dopri5": lambda unfolds: diffrax.Dopri5(),
    "dopri8": lambda unfolds: diffrax.Dopri8(),
    "kvaerno5": lambda unfolds: diffrax.Kvaerno5(),
    "fused": lambda unfolds: FusedLTC(unfolds),
}


def make_solver(name: str, *, ode_unfolds: int = 6) -> diffrax.AbstractSolver:
    """The diffrax solver for a name. Public as `ltc_jax.make_solver`.

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
    if name not in _SOLVERS:
        raise ValueError(f"Unknown solver {name!r}; choose one of {SOLVER_NAMES}.")
    return _SOLVERS[name](ode_unfolds)


def solver_name(solver: diffrax.AbstractSolver) -> str:
    """The name [`ltc_jax.make_solver`][] knows a solver object by (for messages
    and reports), or its class name if it is none of them."""
    for name, build in _SOLVERS.items():
        if type(build(1)) is type(solver):
            return name
    return type(solver).__name__


@dataclasses.dataclass(frozen=True)
class _GradientMode:
    """How one gradient-mode name becomes a diffrax adjoint, and is recognised in
    one. `options` names the keyword arguments of [`ltc_jax.make_adjoint`][] the
    mode takes; `build(max_steps, **options)` makes the adjoint; `reverse_solve`
    says whether the gradient integrates an adjoint system backwards in time
    (which the fused step cannot solve, and the seminorm shapes)."""

    name: str
    build: Callable[..., diffrax.AbstractAdjoint]
    options: tuple[str, ...]
    is_mode: Callable[[diffrax.AbstractAdjoint, int], bool]
    reverse_solve: bool = False


def _backward(backward_solver=None, backward_stepsize_controller=None) -> dict:
    """The reverse solve's options, as `diffrax.BacksolveAdjoint` takes them."""
    backward = dict(
        solver=backward_solver, stepsize_controller=backward_stepsize_controller
    )
    return {key: value for key, value in backward.items() if value is not None}


_BACKWARD = ("backward_solver", "backward_stepsize_controller")


def _is_checkpointed(adjoint, max_steps, *, full):
    if not isinstance(adjoint, diffrax.RecursiveCheckpointAdjoint):
        return False
    return (adjoint.checkpoints == max_steps) == full


_GRADIENT_MODES = {
    mode.name: mode
    for mode in (
        # Checked in this order by `adjoint_name`: subclasses before their bases.
        _GradientMode(
            "checkpoint",
            lambda max_steps, checkpoints=None: diffrax.RecursiveCheckpointAdjoint(
                checkpoints=checkpoints
            ),
            ("checkpoints",),
            lambda adjoint, max_steps: _is_checkpointed(adjoint, max_steps, full=False),
        ),
        _GradientMode(
            "full",
            lambda max_steps: diffrax.RecursiveCheckpointAdjoint(checkpoints=max_steps),
            (),
            lambda adjoint, max_steps: _is_checkpointed(adjoint, max_steps, full=True),
        ),
        _GradientMode(
            "backsolve",
            lambda max_steps, **backward: diffrax.BacksolveAdjoint(
                **_backward(**backward)
            ),
            _BACKWARD,
            lambda adjoint, max_steps: type(adjoint) is diffrax.BacksolveAdjoint,
            reverse_solve=True,
        ),
        _GradientMode(
            "windowed",
            lambda max_steps, windows=None, **backward: WindowedBacksolveAdjoint(
                windows, **_backward(**backward)
            ),
            ("windows", *_BACKWARD),
            lambda adjoint, max_steps: isinstance(adjoint, WindowedBacksolveAdjoint),
            reverse_solve=True,
        ),
        _GradientMode(
            "direct",
            lambda max_steps: diffrax.DirectAdjoint(),
            (),
            lambda adjoint, max_steps: isinstance(adjoint, diffrax.DirectAdjoint),
        ),
    )
}
assert tuple(_GRADIENT_MODES) == ADJOINT_NAMES


def has_reverse_solve(name: str) -> bool:
    """Whether the gradient mode `name` integrates an adjoint system backwards."""
    return name in _GRADIENT_MODES and _GRADIENT_MODES[name].reverse_solve


def make_adjoint(
    name: str,
    *,
    max_steps: int,
    checkpoints: int | None = None,
    windows: int | None = None,
    backward_solver: diffrax.AbstractSolver | None = None,
    backward_stepsize_controller: diffrax.AbstractStepSizeController | None = None,
) -> diffrax.AbstractAdjoint:
    r"""The diffrax adjoint (gradient mode) for a name. Public as
    `ltc_jax.make_adjoint`.

    - `"checkpoint"`: `diffrax.RecursiveCheckpointAdjoint(checkpoints)`. Exact
        gradient of the discretised solve (discretise-then-optimise): the same
        numbers as `"full"`, recomputing the forward solve from stored states.
        With `checkpoints=None` diffrax stores the least `c` states with
        `2 * max_steps < (c + 1) * (c + 2)`, about `sqrt(2 * max_steps)` (online
        treeverse, Stumm and Walther 2010): memory grows like the square root of
        `max_steps` (not of the steps actually taken), and the backward pass
        re-evaluates the field 2-3 times per forward evaluation (more as
        `max_steps` grows). An int stores that many states;
        `ceil(log2(max_steps))` gives memory logarithmic in `max_steps` for more
        recomputation. The right default for almost everything.
    - `"full"`: `RecursiveCheckpointAdjoint(checkpoints=max_steps)`: stores every
        step, i.e. plain backpropagation through the solver. Fastest backward pass,
        memory linear in `max_steps`. The baseline the others are measured against.
    - `"backsolve"`: `diffrax.BacksolveAdjoint`: the continuous adjoint of Chen et
        al. (2018) (optimise-then-discretise). Solves the adjoint ODE
        $\dot a = -a^\top \partial f/\partial h$ backwards in time, recomputing
        $h(t)$ on the way, so memory is O(1) in the number of steps and in the
        length of the input. The price: a second (reverse) solve, and a gradient
        that is only approximate. The reverse solve of a dissipative system such
        as an LTC is *expansive*, so its error grows like
        $\exp(T/\tau_\text{min})$ over a horizon $T$: do not use it beyond a few
        time constants. `backward_solver` and `backward_stepsize_controller`
        choose the reverse solve's method.
    - `"windowed"`: [`ltc_jax.WindowedBacksolveAdjoint`][]: the same continuous
        adjoint, its reconstruction restarted from forward states stored at the
        ends of `windows` equal windows, so its error grows only within one
        window. Memory `windows` states, time about `"backsolve"`'s. `windows=None`
        (default) derives the count from the model's time constants and the
        horizon ([`ltc_jax.training.default_windows`][]) before compiling. The
        continuous adjoint to use on long horizons; takes the reverse-solve
        options too.
    - `"direct"`: `diffrax.DirectAdjoint`: differentiates the solver's loop
        directly; the only mode that supports forward-mode and higher-order
        autodiff; needs the most memory.

    **Arguments:**

    - `name`: one of the above.
    - `max_steps`: the solve's `max_steps` (used by `"full"`).
    - `checkpoints`: for `"checkpoint"` only: `None` (diffrax's default) or a
        positive int.
    - `windows`: for `"windowed"` only: `None` or a positive int.
    - `backward_solver`, `backward_stepsize_controller`: for `"backsolve"` and
        `"windowed"`.

    **Raises:** `ValueError` for an unknown name, a non-positive `checkpoints`,
    or an option given to a mode that does not take it.
    """
    if name not in _GRADIENT_MODES:
        raise ValueError(f"Unknown adjoint {name!r}; choose one of {ADJOINT_NAMES}.")
    mode = _GRADIENT_MODES[name]
    given = dict(
        checkpoints=checkpoints,
        windows=windows,
        backward_solver=backward_solver,
        backward_stepsize_controller=backward_stepsize_controller,
    )
    given = {key: value for key, value in given.items() if value is not None}
    for key in given:
        if key not in mode.options:
            takers = [m.name for m in _GRADIENT_MODES.values() if key in m.options]
            raise ValueError(
                f"{key} only applies to adjoint={' or '.join(map(repr, takers))}, "
                f"not {name!r}."
            )
    if checkpoints is not None and checkpoints < 1:
        raise ValueError(f"checkpoints must be positive; got {checkpoints}.")
    return mode.build(max_steps, **given)


def adjoint_name(adjoint: diffrax.AbstractAdjoint, max_steps: int) -> str:
    """The ltc_jax name of a diffrax adjoint object (for reports), or its class
    name if it is none of ltc_jax's modes."""
    for mode in _GRADIENT_MODES.values():
        if mode.is_mode(adjoint, max_steps):
            return mode.name
    return type(adjoint).__name__
