"""Settings derived from the data rather than guessed."""

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from .datasets import SequenceDataset


def fixed_max_steps(datasets: Sequence[SequenceDataset], dt0: float) -> int:
    """The `max_steps` that fixed steps of at most `dt0` need on `datasets`: the
    steps of the longest sequence, `ceil(duration / dt0)`, counted as the solve
    counts them (a duration within round-off of a multiple of `dt0` takes that
    multiple), so that `"full"` stores exactly the steps taken and no solve runs
    out of steps in any precision.

    **Arguments:** `datasets`: the datasets a model will be solved on (train and
    test, say); `dt0`: the step, in the unit of their times.

    **Returns:** a positive int.

    **Raises:** `ValueError` if `dt0` is not positive or no dataset is given.
    """
    if not dt0 > 0:
        raise ValueError(f"dt0 must be positive (time units); got {dt0}.")
    if not datasets:
        raise ValueError("Pass at least one dataset.")
    longest = max(float(np.max(data.durations)) for data in datasets)
    slack = 1 - 64 * np.finfo(np.float64).eps  # the solve's own rule, at its finest
    return max(1, math.ceil(longest / dt0 * slack))


def observation_spacing(datasets: Sequence[SequenceDataset]) -> float:
    """The median interval between consecutive observations over every sequence
    of `datasets`, in the unit of their times: the data's time scale.

    **Raises:** `ValueError` if no sequence has two observations.
    """
    gaps = [
        np.diff(data.ts[i, : data.lengths[i]])
        for data in datasets
        for i in range(len(data))
        if data.lengths[i] > 1
    ]
    if not gaps:
        raise ValueError("No sequence has two observations: no time scale.")
    return float(np.median(np.concatenate(gaps)))


@dataclasses.dataclass(frozen=True)
class DataDefaults:
    """Settings derived from the data, each with the reason, for
    [`ltc_jax.derive_defaults`][]. Times are in the unit of the data's times.

    **Fields:** `spacing` (median observation interval), `longest` (the longest
    sequence's duration), `tau_init` (the range the time constants are drawn
    from, log-uniformly), `dt0` (a fixed step: one per observation interval,
    shortened to the solver's stability bound on the fastest initial decay),
    `max_steps` (for adaptive steps), `batch_size`, and `reasons` (one line per
    setting).
    """

    spacing: float
    longest: float
    tau_init: tuple[float, float]
    dt0: float
    max_steps: int
    batch_size: int
    reasons: dict[str, str]


def derive_defaults(
    datasets: Sequence[SequenceDataset],
    *,
    train_size: int | None = None,
    stability_bound: float | None = None,
) -> DataDefaults:
    """Settings derived from the data rather than guessed, so that a model's
    defaults work whatever the unit of the timestamps (seconds, milliseconds or
    the sample index) and however long the sequences.

    - `tau_init = (spacing / 10, max(10 spacing, longest))`: the fastest unit
      resolves a tenth of an observation interval, the slowest remembers the
      whole longest sequence. At a spacing of 1 and sequences of up to 10
      samples this is the LTC's own default, (0.1, 10).
    - `dt0 = spacing`, shortened to `0.9 * stability_bound * tau_low / (1 +
      tau_low)` where a fixed explicit solver's real-axis stability bound is
      given (the fastest initial decay is `1 / tau_low + 1`, the bound of
      [`ltc_jax.LTCVectorField.decay_bound`][] at initialisation).
    - `max_steps = max(256, 16 * most observations)`: with linear inputs every
      observation is a step boundary, and an adaptive solve at the default
      tolerances takes a few steps between them (Tsit5 at rtol 1e-3: about 3 on
      JapaneseVowels); `"full"` and `"checkpoint"` allocate for `max_steps`, so
      it is kept to a few times what the solve needs.
    - `batch_size`: a sixteenth of the training set, rounded to a power of two,
      within [8, 64]: about 16 optimiser steps per epoch.

    **Arguments:** `datasets`: the training set first, then any others the model
    will be solved on; `train_size`: sequences of the training set (default:
    the first dataset's); `stability_bound`: a fixed explicit solver's real
    stability bound ([`ltc_jax.real_stability_bound`][]), `None` for adaptive or
    implicit steps.

    **Raises:** `ValueError` as [`ltc_jax.observation_spacing`][].
    """
    spacing = observation_spacing(datasets)
    longest = max(float(np.max(data.durations)) for data in datasets)
    low, high = spacing / 10, max(10 * spacing, longest)
    reasons = dict(
        tau_init=(
            f"from a tenth of the median observation interval ({spacing:g}) to the "
            f"longest sequence's duration ({longest:g}), at least 10 intervals"
        )
    )
    dt0 = spacing
    reasons["dt0"] = "one step per median observation interval"
    if stability_bound is not None:
        safe = 0.9 * stability_bound * low / (1 + low)
        if safe < dt0:
            dt0 = safe
            reasons["dt0"] = (
                f"0.9 x the stability bound {stability_bound:.3g} over the fastest "
                f"initial decay 1/tau + 1 = {1 / low + 1:.3g} (shorter than the "
                f"observation interval {spacing:g})"
            )
    most = max(int(np.max(data.lengths)) for data in datasets)
    max_steps = max(256, 16 * most)
    reasons["max_steps"] = (
        f"16 steps per observation of the longest sequence ({most}), at least 256"
    )
    n = len(datasets[0]) if train_size is None else train_size
    batch_size = int(min(64, max(8, 2 ** round(math.log2(max(n / 16, 1))))))
    reasons["batch_size"] = (
        f"about 16 steps per epoch over {n} training sequences, a power of two "
        "in [8, 64]"
    )
    return DataDefaults(
        spacing=spacing,
        longest=longest,
        tau_init=(low, high),
        dt0=dt0,
        max_steps=max_steps,
        batch_size=batch_size,
        reasons=reasons,
    )
