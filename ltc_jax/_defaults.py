"""Settings derived from the data rather than guessed."""

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
