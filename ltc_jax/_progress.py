"""Where `fit` reports its progress: a stateless reporter, as diffrax's
`AbstractProgressMeter` is for a solve, with a tqdm bar and a silent one."""

import math
import sys
from typing import Any

from tqdm import tqdm


class AbstractFitProgress:
    """Where [`ltc_jax.fit`][] reports its progress, as diffrax's
    `AbstractProgressMeter` does for a solve: the object is stateless, `init`
    returns the state the other methods receive.

    Subclass it to show progress your own way (the `ltc-jax` command line does);
    [`ltc_jax.TqdmFitProgress`][] (the default) draws a tqdm bar,
    [`ltc_jax.NoFitProgress`][] shows nothing.
    """

    def init(self, total_steps: int, done_steps: int) -> Any:
        """Called once before the first step: the run's optimiser steps in all,
        and how many a resumed run has done already. Returns the state."""
        return None

    def step(self, state: Any, epoch: int, loss: float, accuracy: float) -> None:
        """After every optimiser step (or skipped one): the epoch so far's mean
        training loss and accuracy (`nan` before its first successful step, and
        for regression)."""

    def message(self, state: Any, text: str) -> None:
        """A line worth showing: a skipped update, a warning."""

    def close(self, state: Any) -> None:
        """Called once when training ends, normally or not."""


class NoFitProgress(AbstractFitProgress):
    """Shows nothing."""


class TqdmFitProgress(AbstractFitProgress):
    """A tqdm bar (the `tqdm` package) over optimiser steps, with the epoch,
    loss and accuracy, on standard error. Redrawn at most every 0.1 s on a
    terminal or in a notebook, and every `log_interval` seconds elsewhere (a file
    or a pipe keeps every redraw)."""

    def __init__(self, log_interval: float = 30.0):
        """**Arguments:**

        - `log_interval`: wall-clock seconds between redraws when standard
            error is neither a terminal nor a notebook's (0: every step).
            tqdm's monitor thread, which redraws a stalled bar, waits
            `max(log_interval, 10)` seconds.
        """
        self.log_interval = log_interval

    def init(self, total_steps, done_steps):
        # A notebook redraws the bar in place too, though its stderr is no TTY.
        live = getattr(sys.stderr, "isatty", lambda: False)() or (
            "ipykernel" in sys.modules
        )
        interval = 0.1 if live else self.log_interval
        return tqdm(
            total=total_steps,
            initial=done_steps,
            unit="step",
            mininterval=interval,
            maxinterval=max(interval, 10.0),  # tqdm's monitor redraws after this
        )

    def step(self, state, epoch, loss, accuracy):
        if math.isfinite(loss):  # shown with the next redraw
            state.set_postfix(
                epoch=epoch, loss=f"{loss:.4f}", acc=f"{accuracy:.3f}", refresh=False
            )
        state.update()

    def message(self, state, text):
        state.write(text)

    def close(self, state):
        state.close()
