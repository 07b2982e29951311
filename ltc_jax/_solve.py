"""Solve a batch of sequences, each on its own time interval, as one diffrax solve.

The batch shares one solver clock `s`. Sequence `b` maps it to its own time

    t_b(s) = t_start[b] + step[b] * min(s, num_steps[b]),

and enters the solve through a term whose control over a step `[s0, s1]` is the
per-sequence time increment `t_b(s1) - t_b(s0)`. Within any solver step this map is
affine, and Runge-Kutta methods are invariant under an affine change of the time
variable, so every sequence is integrated exactly as if it were solved alone:

- fixed steps: the clock counts steps (`s = 0, 1, 2, ...`) and sequence `b` takes
  `num_steps[b] = ceil(duration / dt0)` equal steps of `step[b] = duration /
  num_steps[b]` time units (a duration within round-off of a multiple of `dt0`
  takes that multiple);
- adaptive steps: the clock is time since each sequence's start (`step = 1`) and the
  controller stops at every sequence's end and observation times (`jump_ts`).

After its end a sequence receives zero time increments: its state is frozen, and its
padding never enters the solve.

The diffrax workarounds live here, each with its reason and the diffrax version it
was written against (0.7.2): `_Frozen` (the continuous adjoint's cotangents of
data), `_ClipToJumps` (jump times copied into every checkpoint),
`_one_save_at_end` (NaN gradients from a save time repeated at `t1`),
`_reverse_solve_stops_at_jumps` (a reverse-solve controller that forgets the
jumps), `_ReverseSolve` (a failed reverse solve raised as a plain failure of
a solve). One more, against JAX 0.10, sits with the checks it serves in
`_solve_checks.py`: `derivatives_taken` (naming the derivatives only
`DirectAdjoint` supports before diffrax's loop fails on them). A solve reports
an [`ltc_jax.RESULTS`][]: diffrax's result codes, and those of ltc_jax's checks.
"""

import dataclasses
from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jaxtyping import Array, Bool, Float, PyTree, ScalarLike

from ._adjoint import WindowedBacksolveAdjoint
from ._events import EVENT_ADJOINTS, Crossing
from ._integrator import Integrator
from ._paths import InputPath
from ._results import RESULTS
from ._solve_checks import (
    check_derivative_order,
    check_inputs,
    check_precision,
    is_outside_bounds,
    solve_result,
)
from ._solver.fused import AbstractLTCFormTerm, needs_ltc_form
from ._vector_field import AbstractLTCField


Save = Literal["final", "observations"] | int
"""What a solve saves: each sequence's final state, its state at every
observation time, or (an int `n`) its state at `n` times spread evenly over its
duration."""

_UINT = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}


class _Frozen(eqx.Module):
    """A pytree whose floating-point arrays are stored, bit for bit, as unsigned ints.

    diffrax 0.7.2's `BacksolveAdjoint` treats every floating-point array in `args` and
    `terms` as a differentiable input and integrates a cotangent for it backwards in
    time, even under `stop_gradient`: observation data in `args` would make its
    memory grow with the length of the input. Integers are not differentiable, so a
    frozen pytree costs no cotangent. (The other adjoints differentiate with JAX's
    own autodiff, which knows constant data needs no cotangent; they get the data
    as it is.)
    """

    leaves: list
    treedef: jtu.PyTreeDef = eqx.field(static=True)
    dtypes: tuple = eqx.field(static=True)

    def __init__(self, tree: PyTree):
        leaves, self.treedef = jtu.tree_flatten(tree)
        self.dtypes = tuple(getattr(x, "dtype", None) for x in leaves)
        self.leaves = [
            jax.lax.bitcast_convert_type(x, _UINT[x.dtype.itemsize])
            if eqx.is_inexact_array(x)
            else x
            for x in leaves
        ]

    def thaw(self) -> PyTree:
        leaves = [
            jax.lax.bitcast_convert_type(x, dtype) if x.dtype != dtype else x
            for x, dtype in zip(self.leaves, self.dtypes, strict=True)
        ]
        return jtu.tree_unflatten(self.treedef, leaves)


def _thaw(tree):
    return tree.thaw() if isinstance(tree, _Frozen) else tree


class _Clock(eqx.Module):
    """Each sequence's time as a function of the shared solver clock `s`."""

    t_start: Float[Array, " batch"]
    step: Float[Array, " batch"]
    num_steps: Float[Array, " batch"]

    def time(self, s) -> Float[Array, " batch"]:
        return self.t_start + self.step * jnp.minimum(s, self.num_steps)

    def increment(self, s0, s1) -> Float[Array, " batch"]:
        return self.step * (
            jnp.minimum(s1, self.num_steps) - jnp.minimum(s0, self.num_steps)
        )


class _ClockTerm(diffrax.AbstractTerm):
    """`dy = vector_field(t_b(s), y, path) dt_b(s)`, one time increment per sequence."""

    vector_field: eqx.Module
    clock: _Clock | _Frozen

    def _time_and_path(self, t, args):
        time, path = _thaw(self.clock).time(t), _thaw(args)
        if path.shared_times:
            # One grid and one length: every sequence's time is the same.
            time = time[0]
        return time, path

    def _in_field_precision(self, y):
        """`y` in the float type of the field's parameters. diffrax keeps the
        state at least as wide as its time variable, the clock at least
        float32 (`_clock_dtype`): a bfloat16 model is then evaluated in
        bfloat16 on a float32 state."""
        leaves = jax.tree.leaves(eqx.filter(self.vector_field, eqx.is_inexact_array))
        return y if not leaves else jtu.tree_map(lambda a: a.astype(leaves[0].dtype), y)

    def vf(self, t, y, args):
        time, path = self._time_and_path(t, args)
        derivative = self.vector_field(time, self._in_field_precision(y), path)
        return jtu.tree_map(lambda d, a: d.astype(a.dtype), derivative, y)

    def contr(self, t0, t1, **kwargs):
        return _thaw(self.clock).increment(t0, t1)

    def prod(self, vf, control):
        def scale(v):
            # The clock may be kept in a wider float than the state.
            step = control.astype(v.dtype)
            return v * step.reshape(step.shape + (1,) * (v.ndim - 1))

        return jtu.tree_map(scale, vf)


class _LTCClockTerm(_ClockTerm, AbstractLTCFormTerm):
    """The clock term of a field in LTC form: also `(dy/dt, decay)`, which the
    fused step uses."""

    def vf_and_decay(self, t, y, args):
        time, path = self._time_and_path(t, args)
        pair = self.vector_field.derivative_and_decay(
            time, self._in_field_precision(y), path
        )
        return tuple(part.astype(y.dtype) for part in pair)


class _ClipToJumps(diffrax.ClipStepSizeController):
    """`diffrax.ClipStepSizeController` with its jump times kept out of the solver
    state.

    diffrax 0.7.2 carries `jump_ts` in the controller state, so every state a
    checkpointing adjoint stores holds a copy of all observation times: memory
    `checkpoints x observations`. Here the state keeps only the index of the next
    jump, and the times are read from the controller itself, which is not part of
    the loop state. Stepping is unchanged.
    """

    def _strip(self, state):
        index, _ = state.jump_info
        return dataclasses.replace(state, jump_info=(index, None))

    def _restore(self, state, t):
        index, _ = state.jump_info
        jump_ts = self.jump_ts.astype(jnp.result_type(t))
        return dataclasses.replace(state, jump_info=(index, jump_ts))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t1, state = super().init(terms, t0, t1, y0, dt0, args, func, error_order)
        return t1, self._strip(state)

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        *decision, state, result = super().adapt_step_size(
            t0,
            t1,
            y0,
            y1_candidate,
            args,
            y_error,
            error_order,
            self._restore(controller_state, t0),
        )
        return (*decision, self._strip(state), result)


def _as_result(result: RESULTS | diffrax.RESULTS) -> RESULTS:
    """A result as an [`ltc_jax.RESULTS`][]; a `diffrax.RESULTS` is promoted."""
    return result if isinstance(result, RESULTS) else RESULTS.promote(result)


class Trajectory(eqx.Module):
    """What [`ltc_jax.integrate`][] returns. Public as `ltc_jax.Trajectory`.

    **Fields:**

    - `ys`: the state, `(batch, *state)` at each sequence's last observation
        (`save="final"`), `(batch, times, *state)` at every observation time
        (`save="observations"`; padding positions repeat the final state), or
        `(batch, n, *state)` at `n` evenly spread times (`save=n`).
    - `stats`: diffrax's step statistics: `num_steps`, `num_accepted_steps`,
        `num_rejected_steps` (int arrays; one per sequence under `"vmap"`
        batching) and `max_steps`.
    - `result`: an [`ltc_jax.RESULTS`][] (one per sequence under `"vmap"`
        batching): `RESULTS.successful` unless the solve failed with
        `throw=False`; then diffrax's reason (`max_steps_reached`, ...), or
        ltc_jax's own, `non_finite_input` or `diverged` (see the integrator's
        `check_state`). A `diffrax.RESULTS` given here is promoted to one.
    - `t_reached`: `(batch,)`, the time each sequence was integrated for (time
        units since its first observation): its whole duration after a successful
        solve; after a failed one (with `throw=False`), how far the solve got
        (`save="final"`), or NaN where the solve saved at several times
        (`save="observations"`, or the windowed adjoint). With an `event`: the
        time from the sequence's first observation to the event where it
        fired (differentiable), else its whole duration.
    - `event_fired`: `(batch,)` bools, whether each sequence's `event` fired
        before its last observation (a fired event is a successful solve);
        `None` for a solve without an event.
    """

    ys: PyTree[Array]
    stats: dict
    result: RESULTS = eqx.field(converter=_as_result)
    t_reached: Float[Array, " batch"]
    event_fired: Bool[Array, " batch"] | None = None


def integrate(
    vector_field: eqx.Module,
    path: InputPath,
    y0: PyTree[Float[Array, "batch ..."]],
    integrator: Integrator,
    *,
    save: Save = "final",
    event: Crossing | None = None,
) -> Trajectory:
    """Integrate a batch of sequences, each from its first to its last observation
    (or to its `event`). Public as `ltc_jax.integrate`.

    **Arguments:**

    - `vector_field`: called as `vector_field(t, y, path)` with `t` of shape
        `(batch,)` (each sequence's own time; a scalar, the time of all, when
        `path.shared_times`), `y` the batched state and `path`
        the [`ltc_jax.InputPath`][], whose `evaluate(t)` gives `(batch,
        input_size)`. Must return `dy/dt` shaped like `y`. Its parameters are
        differentiated by every adjoint (it enters as a diffrax term).
    - `path`: the inputs.
    - `y0`: initial state, leaves with a leading `batch` axis.
    - `integrator`: solver, steps and gradient mode.
    - `save`: `"final"` (default), `"observations"`, or a positive int `n`: the
        state at `n` times spread evenly over each sequence, at the fractions
        `1/n, 2/n, ..., 1` of its duration (the last is its final state; with
        fixed steps, each rounded to the nearest step, so that no state is
        interpolated). Under `"batched"` batching and per-sequence times, the
        solve saves at the union of the batch's save times (`batch * times`
        saves, each of the whole batch); with shared times it needs only
        `times` saves.
    - `event`: a [`ltc_jax.Crossing`][]: each sequence's solve stops where it
        fires, and the trajectory records where (`t_reached`, differentiable)
        and whether (`event_fired`); `ys` is the state there. Each sequence is
        then solved on its own (as `batching="vmap"`: one solve stops at one
        time), with `save="final"`, under the `"checkpoint"`, `"full"` or
        `"direct"` gradient modes. Default `None`.

    **Returns:** a [`ltc_jax.Trajectory`][].

    **Raises:** `TypeError` for an `event` that is not a `Crossing`;
    `ValueError` for an `event` with a `save` other than
    `"final"` or a reverse-solve gradient mode (`"backsolve"`, `"windowed"`,
    which diffrax 0.7.2 does not support with events);
    whatever `diffrax.diffeqsolve` raises; in particular, with
    `integrator.throw`, an `equinox.EquinoxRuntimeError` with the message of
    the failed solve's [`ltc_jax.RESULTS`][]: when it needs more than
    `max_steps` steps, or (with `check_state`) its parameters or `y0` are not
    finite or its state diverges (also under `jax.grad`-style transforms that
    keep the primal, such as `eqx.filter_value_and_grad`). Without `throw`
    the same failures are reported in the trajectory's `result`.

    Method: the per-sequence time control described in this module's docstring;
    solve via `diffrax.diffeqsolve` (Kidger 2021).
    """
    spread = isinstance(save, int) and not isinstance(save, bool)
    if not (save in ("final", "observations") or (spread and save >= 1)):
        raise ValueError(
            f"save must be 'final', 'observations' or a positive int; got {save!r}."
        )
    if event is not None:
        check_event(event, integrator, save)
    elif integrator.batching == "batched":
        return _integrate_batch(vector_field, path, y0, integrator, save)

    def add_batch_axis(tree):
        return jtu.tree_map(lambda a: a[None], tree)

    def one(path_b, y0_b):
        out = _integrate_batch(
            vector_field,
            add_batch_axis(path_b),
            add_batch_axis(y0_b),
            integrator,
            save,
            event,
        )
        return eqx.tree_at(lambda o: o.ys, out, jtu.tree_map(lambda a: a[0], out.ys))

    out = eqx.filter_vmap(one)(path, y0)
    if event is None:
        return out
    # One sequence per solve: its (1,) records become the batch's (batch,).
    return dataclasses.replace(
        out, t_reached=out.t_reached[:, 0], event_fired=out.event_fired[:, 0]
    )


def check_event(event: Crossing, integrator: Integrator, save: Save) -> None:
    """Refuse an event where its time cannot be found or differentiated.

    **Raises:** `TypeError` for an event that is not a [`ltc_jax.Crossing`][];
    `ValueError` naming the gradient modes that support events, or the `save`
    they need."""
    if not isinstance(event, Crossing):
        raise TypeError(f"event must be an ltc_jax.Crossing; got {type(event)}.")
    if integrator.adjoint_name not in EVENT_ADJOINTS:
        raise ValueError(
            f"Events need a gradient mode that backpropagates through the "
            f"forward solve: {', '.join(EVENT_ADJOINTS)}; got "
            f"{integrator.adjoint_name!r}, whose reverse solve diffrax 0.7.2 does "
            "not support with events."
        )
    if save != "final":
        raise ValueError(
            f"An event stops each solve at its own time: save='final' (the state "
            f"there); got save={save!r}."
        )


def _clock_dtype(dtype) -> jnp.dtype:
    """The dtype of the solver clock and its step bookkeeping: the times' dtype,
    but at least float32. In bfloat16 (8 bits of mantissa) 64 machine epsilons
    are half a step, and a step count would come out wrong."""
    return jnp.dtype(dtype) if jnp.finfo(dtype).bits >= 32 else jnp.dtype(jnp.float32)


def _make_clock(path: InputPath, integrator: Integrator) -> tuple[_Clock, ScalarLike]:
    """Each sequence's clock, and the clock time at which the solve ends (the
    longest sequence's end; 1 where no sequence has anything to integrate, to
    keep `t0 < t1`).

    On a grid known when tracing (`path.static_duration`) the same arithmetic
    runs in NumPy, in the same dtype, so the end is a Python float that diffrax
    folds away at compile time; otherwise it runs on the traced times."""
    dtype = _clock_dtype(path.ts.dtype)
    static = path.static_duration is not None
    xp = np if static else jnp
    if static:
        duration = np.asarray(path.static_duration, path.ts.dtype).astype(dtype)
    else:
        duration = (path.t_end - path.t_start).astype(dtype)
    t_start = path.t_start
    if integrator.is_adaptive:
        step, num_steps = xp.ones_like(duration), duration
    else:
        t_start = t_start.astype(dtype)
        # Round-off in the times (say, float32 sample times 1/360 s apart) must
        # not cost an extra step: a duration within a relative 64 machine
        # epsilons of a multiple of dt0 takes that many steps (each then at most
        # that much longer than dt0). One multiplication by a host constant:
        # XLA would rewrite `duration / dt0 * slack` so, and NumPy would not,
        # and the two roundings differ near a multiple.
        slack = 1 - 64 * np.finfo(dtype).eps
        scale = np.asarray(slack, dtype) / np.asarray(integrator.dt0, dtype)
        num_steps = xp.ceil(duration * scale)
        step = duration / xp.maximum(num_steps, 1)
    end = xp.max(num_steps)
    end = xp.where(end > 0, end, 1)
    if static:  # one grid: the same clock for every sequence
        batch = path.lengths.shape
        step, num_steps = (jnp.full(batch, x, dtype) for x in (step, num_steps))
        end = float(end)
    return _Clock(t_start, step, num_steps), end


def _save_clock_times(path: InputPath, clock: _Clock) -> Float[Array, "batch times"]:
    """Clock time at which each observation is reached (padding: the end)."""
    elapsed = (path.ts - path.t_start[:, None]).astype(clock.step.dtype)
    step = clock.step[:, None]
    s = jnp.where(step > 0, elapsed / jnp.where(step > 0, step, 1), 0)
    positions = jnp.arange(path.ts.shape[1], dtype=jnp.int32)[None]
    at_or_after_end = positions >= path.lengths[:, None] - 1
    return jnp.where(
        at_or_after_end,
        clock.num_steps[:, None],
        jnp.minimum(s, clock.num_steps[:, None]),
    )


def _spread_clock_times(
    clock: _Clock, n: int, *, integer_clock: bool
) -> Float[Array, "batch n"]:
    """Clock times at the fractions `1/n, ..., 1` of each sequence's duration;
    on an integer clock (fixed steps), the nearest step."""
    fractions = jnp.arange(1, n + 1, dtype=clock.num_steps.dtype) / n
    s = clock.num_steps[:, None] * fractions[None]
    return jnp.round(s) if integer_clock else s


def _one_save_at_end(ts: Float[Array, " saves"]) -> Float[Array, " saves"]:
    """Sorted save times with the last one unrepeated: repeats of it are moved to
    the latest earlier save time (if there is one).

    The last save time repeats when several sequences end at the end of the
    solve, or when the longest one has padding (saved at its end), but diffrax's
    `BacksolveAdjoint` (0.7.2) returns a NaN gradient when a save time repeats at
    `t1`; repeats before it are harmless. The first of equal save times still
    holds every state asked for (`jnp.searchsorted` finds it), so the outputs do
    not change."""
    at_end = ts == ts[-1]
    earlier = jnp.max(jnp.where(at_end, -jnp.inf, ts))
    moved = at_end.at[-1].set(False) & jnp.isfinite(earlier)
    return jnp.where(moved, earlier, ts)


def _reverse_solve_stops_at_jumps(adjoint, controller):
    """A backsolve reverse solve with a step-size controller of its own (e.g. the
    seminorm's) stops at the same jump times as the forward solve: the kinks of a
    linear input and the sequences' ends. diffrax 0.7.2 reuses the forward
    controller, jumps included, only when the reverse solve is given none; a
    controller of its own knows no jumps, and the reverse solve would step across
    every kink."""
    if not isinstance(adjoint, diffrax.BacksolveAdjoint) or not isinstance(
        controller, _ClipToJumps
    ):
        return adjoint
    backward = adjoint.kwargs.get("stepsize_controller")
    if backward is None or isinstance(backward, _ClipToJumps):
        return adjoint
    kwargs = dict(
        adjoint.kwargs,
        stepsize_controller=_ClipToJumps(backward, jump_ts=controller.jump_ts),
    )
    return eqx.tree_at(lambda a: a.kwargs, adjoint, kwargs)  # keeps its class


class _ReverseSolveResult(diffrax.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """diffrax's result codes, and the two a failed reverse solve is raised with."""

    reverse_max_steps_reached = (
        "The reverse (adjoint) solve of the continuous adjoint (adjoint='backsolve' "
        "or 'windowed') reached max_steps before it got back to the start; the "
        "forward solve had finished within it. Give it more max_steps or looser "
        "tolerances (backward_stepsize_controller), or use adjoint='windowed' "
        "(each window's reverse solve has max_steps of its own) or "
        "adjoint='checkpoint' (no reverse solve)."
    )
    reverse_solve_failed = (
        "The reverse (adjoint) solve of the continuous adjoint (adjoint='backsolve' "
        "or 'windowed') failed after the forward solve had succeeded: a step below "
        "dtmin, too many rejected steps, or an implicit backward_solver that did "
        "not converge. Loosen its tolerances or change its solver "
        "(backward_solver, backward_stepsize_controller), or use "
        "adjoint='checkpoint' (no reverse solve)."
    )


class _ReverseSolve(diffrax.AbstractAdjoint):
    """The adjoint of a backsolve's reverse solve: its loop is `adjoint`'s, run
    without raising, and a failure is raised as the reverse solve's.

    diffrax 0.7.2 runs the reverse solve of `BacksolveAdjoint` as a
    `diffeqsolve` with the forward solve's `max_steps` and `throw`, so its
    failure raised the same message as a failed forward solve ("The maximum
    number of solver steps was reached"), which named neither the reverse solve
    nor the fixes that apply to it. The reverse solve is given `throw=False`
    and this adjoint (`diffeqsolve`'s `adjoint`, whose loop runs the solve), so
    its result is read here."""

    adjoint: diffrax.AbstractAdjoint
    throw: bool = eqx.field(static=True)

    def loop(self, *, throw, **kwargs):
        del throw  # False: the reverse solve's failure is raised here instead
        final_state, aux_stats = self.adjoint.loop(throw=False, **kwargs)
        if self.throw:
            result = _ReverseSolveResult.promote(final_state.result)
            named = _ReverseSolveResult.where(
                result == _ReverseSolveResult.max_steps_reached,
                _ReverseSolveResult.reverse_max_steps_reached,
                _ReverseSolveResult.reverse_solve_failed,
            )
            failed = jnp.invert(diffrax.is_okay(final_state.result))
            final_state = named.error_if(final_state, failed)
        return final_state, aux_stats


def _reverse_solve_names_its_failures(adjoint, throw: bool):
    """A backsolve whose reverse solve raises its failure as the reverse
    solve's (see `_ReverseSolve`); any other adjoint unchanged."""
    if not isinstance(adjoint, diffrax.BacksolveAdjoint):
        return adjoint
    inner = adjoint.kwargs.get("adjoint", adjoint)
    kwargs = dict(adjoint.kwargs, adjoint=_ReverseSolve(inner, throw), throw=False)
    return eqx.tree_at(lambda a: a.kwargs, adjoint, kwargs)  # keeps its class


def _integrate_batch(
    vector_field, path, y0, integrator, save, event=None
) -> Trajectory:
    check_precision(y0, integrator)
    check_derivative_order(vector_field, y0, integrator)
    y0, non_finite = check_inputs(vector_field, y0, integrator)
    clock, s_end = _make_clock(path, integrator)
    clock_dtype = clock.step.dtype
    if integrator.is_adaptive:
        dt0 = integrator.dt0
        jumps = [clock.num_steps]
        if isinstance(path.interpolation, diffrax.LinearInterpolation):
            knots = path.ts - path.t_start[:, None]
            jumps.append(jnp.where(path.valid, knots, 0).ravel())
        controller = _ClipToJumps(
            integrator.stepsize_controller, jump_ts=jnp.sort(jnp.concatenate(jumps))
        )
    else:
        dt0 = jnp.ones((), clock_dtype)
        controller = integrator.stepsize_controller
    adjoint = _reverse_solve_stops_at_jumps(integrator.adjoint, controller)
    adjoint = _reverse_solve_names_its_failures(adjoint, integrator.throw)

    # The windowed adjoint restarts its reverse solve from the states saved at
    # its windows' ends (diffrax's BacksolveAdjoint restarts at every save).
    restarts = None
    if isinstance(integrator.adjoint, WindowedBacksolveAdjoint):
        restarts = integrator.adjoint.restart_times(
            jnp.asarray(s_end, clock_dtype), integer_clock=not integrator.is_adaptive
        )
    if save == "final" and restarts is None:
        saveat = diffrax.SaveAt(t1=True)
    elif save == "final":
        save_ts = jnp.concatenate([restarts, jnp.full((1,), s_end, clock_dtype)])
        saveat = diffrax.SaveAt(ts=_one_save_at_end(save_ts))
    else:
        if save == "observations":
            save_s = _save_clock_times(path, clock)
        else:
            save_s = _spread_clock_times(
                clock, save, integer_clock=not integrator.is_adaptive
            )
        if path.shared_times and restarts is None:
            saveat = diffrax.SaveAt(ts=save_s[0])
        else:
            save_ts = save_s[0] if path.shared_times else save_s.ravel()
            if restarts is not None:
                save_ts = jnp.concatenate([save_ts, restarts])
            saveat = diffrax.SaveAt(ts=_one_save_at_end(jnp.sort(save_ts)))

    args = path
    if isinstance(integrator.adjoint, diffrax.BacksolveAdjoint):
        args, clock = _Frozen(path), _Frozen(clock)
    else:
        args = jax.lax.stop_gradient(path)
        clock = jax.lax.stop_gradient(clock)

    if isinstance(vector_field, AbstractLTCField):
        term = _LTCClockTerm(vector_field, clock)
    elif needs_ltc_form(integrator.solver):
        raise ValueError(
            f"{type(integrator.solver).__name__} steps only vector fields in LTC form "
            f"(an ltc_jax.AbstractLTCField); {type(vector_field).__name__} is not "
            "one. Choose another solver, such as 'tsit5'."
        )
    else:
        term = _ClockTerm(vector_field, clock)
    sol = diffrax.diffeqsolve(
        term,
        integrator.solver,
        t0=jnp.zeros((), clock_dtype),  # the clock's dtype, whatever t1's type
        t1=s_end,
        dt0=dt0,
        y0=y0,
        args=args,
        saveat=saveat,
        stepsize_controller=controller,
        adjoint=adjoint,
        max_steps=integrator.max_steps,
        throw=integrator.throw,
        event=None
        if event is None
        else event.diffrax_event(_clock_dtype(path.ts.dtype)),
    )
    clock = _thaw(clock)
    diverged = is_outside_bounds(vector_field, y0, sol.ys, integrator)
    solved = sol.result
    if event is not None:  # a fired event is a success; event_fired says so
        stopped = sol.result == diffrax.RESULTS.event_occurred
        solved = diffrax.RESULTS.where(stopped, diffrax.RESULTS.successful, solved)
    result = solve_result(solved, non_finite, diverged)
    sol_ys = sol.ys
    if integrator.throw:
        # diffrax raised its own failures; non_finite_input was raised before.
        sol_ys = result.error_if(sol_ys, result == RESULTS.diverged)
    if save == "final":
        ys = jtu.tree_map(lambda a: a[-1], sol_ys)
    elif path.shared_times and restarts is None:
        ys = jtu.tree_map(lambda a: jnp.swapaxes(a, 0, 1), sol_ys)
    else:
        position = jnp.searchsorted(saveat.subs.ts, save_s)  # (batch, times)
        batch_index = jnp.arange(position.shape[0])[:, None]
        ys = jtu.tree_map(lambda a: a[position, batch_index], sol_ys)
    # diffrax widens a state narrower than its time variable: give it back as y0.
    ys = jtu.tree_map(lambda a, a0: a.astype(a0.dtype), ys, y0)
    if saveat.subs.t1:
        t_reached = clock.time(sol.ts[-1]) - clock.t_start
    else:
        ok = sol.result == diffrax.RESULTS.successful
        t_reached = jnp.where(ok, clock.step * clock.num_steps, jnp.nan)
    fired = None if event is None else jnp.reshape(sol.event_mask, (1,))
    return Trajectory(
        ys=ys, stats=sol.stats, result=result, t_reached=t_reached, event_fired=fired
    )
