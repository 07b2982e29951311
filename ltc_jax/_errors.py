"""The exceptions ltc_jax raises besides `ValueError` and `NotImplementedError`."""


class SolverFailureError(RuntimeError):
    """A solve failed during training (`max_steps` reached, a step below `dtmin`,
    ...). The message names the epoch, the batch, how far the solve got, and the
    steps it took."""


class NonFiniteLossError(FloatingPointError):
    """The training loss or gradient became NaN or infinite. The parameters were not
    updated with it; the message names the likely cause."""


class DivergenceError(FloatingPointError):
    """A solve diverged during training: its state left the bound the exact
    solution keeps (Hasani et al. 2021, Theorem 2), whether or not it stayed
    finite. The parameters were not updated with it; the message names the
    likely cause, usually a fixed explicit step outside its stability region."""


class TrainingFailedError(RuntimeError):
    """Training stopped after too many failed steps in a row (`on_failure="skip"`)."""


class CheckpointError(RuntimeError):
    """No usable checkpoint (missing, truncated or corrupted), or a saved model
    that does not fit the model asked for: the message names each option that
    differs, with its value on disk and the value asked for."""


class SubprocessError(RuntimeError):
    """A function called by [`ltc_jax.measure.call_in_subprocess`][] failed, or its
    process died; the message ends with the tail of the process's error output."""
