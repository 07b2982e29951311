"""Where training reports its progress: monitors that draw a tqdm bar, or
nothing."""

import math
import sys

from tqdm import tqdm

from ._monitors import AbstractMonitor


class NoFitProgress(AbstractMonitor):
    """Shows nothing."""


class TqdmFitProgress(AbstractMonitor):
    """A tqdm bar (the `tqdm` package) over optimiser steps, with the epoch and
    the epoch's mean loss, and accuracy where the objective counts correct
    predictions (classification), so far, on standard error; messages are
    written above it. Redrawn at most every 0.1 s on a terminal or in a
    notebook, and every `log_interval` seconds elsewhere (a file or a pipe keeps
    every redraw). The default progress of [`ltc_jax.fit`][]."""

    log_interval: float = 30.0
    """Wall-clock seconds between redraws when standard error is neither a
    terminal nor a notebook's (0: every step). tqdm's monitor thread, which
    redraws a stalled bar, waits `max(log_interval, 10)` seconds."""

    def init(self, state, total_steps):
        # A notebook redraws the bar in place too, though its stderr is no TTY.
        live = getattr(sys.stderr, "isatty", lambda: False)() or (
            "ipykernel" in sys.modules
        )
        interval = 0.1 if live else self.log_interval
        return tqdm(
            total=total_steps,
            initial=state.step,
            unit="step",
            mininterval=interval,
            maxinterval=max(interval, 10.0),  # tqdm's monitor redraws after this
        )

    def step(self, monitor_state, state):
        loss = state.mean("loss")
        if math.isfinite(loss):  # shown with the next redraw
            shown = dict(epoch=state.epoch, loss=f"{loss:.4f}")
            if "correct" in state.totals:  # regression has no accuracy to show
                shown["acc"] = f"{state.mean('correct'):.3f}"
            monitor_state.set_postfix(shown, refresh=False)
        monitor_state.update()

    def message(self, monitor_state, text):
        monitor_state.write(text)

    def close(self, monitor_state):
        monitor_state.close()
