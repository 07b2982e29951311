"""What training does with a step that failed: failure policies, as optax's
`apply_if_finite` is one for an optimiser."""

import abc

import equinox as eqx

from ._errors import TrainingFailedError
from ._train_state import TrainState


class StepFailure(eqx.Module):
    """A training step whose update was not applied.

    **Fields:** `error_type`, the exception class that names the failure
    ([`ltc_jax.SolverFailureError`][], [`ltc_jax.DivergenceError`][] or
    [`ltc_jax.NonFiniteLossError`][]); `message`, what happened, where, and the
    likely fix; `cause`, the exception the solve raised, or `None`.
    """

    error_type: type[Exception] = eqx.field(static=True)
    message: str = eqx.field(static=True)
    cause: BaseException | None = eqx.field(static=True, default=None)

    def error(self) -> Exception:
        """The exception to raise for it."""
        return self.error_type(self.message)


class AbstractFailurePolicy(eqx.Module):
    """What [`ltc_jax.train_on`][] does when a step fails (a solve failed, or the
    loss or a gradient was not finite). The parameters are never updated with
    a failed step; the policy decides whether training goes on.

    Called as `policy(state, failure) -> state`, with the state after the
    failed step was counted ([`ltc_jax.training.TrainState.failed`][]); it
    returns the state to go on from, or raises.
    """

    @abc.abstractmethod
    def __call__(self, state: TrainState, failure: StepFailure) -> TrainState:
        """**Returns:** the state to continue from. **Raises:** to stop."""


class RaiseOnFailure(AbstractFailurePolicy):
    """Stop at the first failed step, with the failure's own error (the
    default).

    **Raises** (when called): the failure's error class
    ([`ltc_jax.SolverFailureError`][], [`ltc_jax.DivergenceError`][],
    [`ltc_jax.NonFiniteLossError`][]), chained to the solve's error.
    """

    def __call__(self, state, failure):
        raise failure.error() from failure.cause


class SkipFailures(AbstractFailurePolicy):
    """Drop a failed step's update, count it (the epoch's `failures`), and go
    on; stop after `max_consecutive` failures in a row.

    **Fields:** `max_consecutive`, static int, at least 1 (default 10).

    **Raises:** `ValueError` at construction for `max_consecutive < 1`;
    [`ltc_jax.TrainingFailedError`][] (when called) after `max_consecutive`
    failed steps in a row, naming the last.
    """

    max_consecutive: int = eqx.field(static=True, default=10)

    def __check_init__(self):
        if self.max_consecutive < 1:
            raise ValueError(
                f"max_consecutive must be positive; got {self.max_consecutive}."
            )

    def __call__(self, state, failure):
        if state.failures_in_a_row >= self.max_consecutive:
            raise TrainingFailedError(
                f"Training stopped after {state.failures_in_a_row} failed steps "
                f"in a row. The last: {failure.message}"
            ) from failure.cause
        return state
