"""Settings derived from the data rather than guessed."""

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ._model import ReadoutFeatures, check_readout_features
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
    [`ltc_jax.training.derive_defaults`][]. Times are in the unit of the data's times.

    **Fields:** `spacing` (median observation interval), `longest` (the longest
    sequence's duration), `tau_init` (the range the time constants are drawn
    from, log-uniformly), `tau_min` (the floor no update can push a time
    constant below), `dt0` (a fixed step: one per observation interval,
    shortened to the solver's stability bound on the fastest initial decay),
    `max_steps` (for adaptive steps), `batch_size`, `epochs` (passes over the
    training set: about `OPTIMIZER_STEPS` optimiser steps), `batching` (`"batched"` or
    `"vmap"`, for [`ltc_jax.make_integrator`][]), `readout_times` (for
    [`ltc_jax.LTC`][]), and `reasons` (one line per setting).
    """

    spacing: float
    longest: float
    tau_init: tuple[float, float]
    tau_min: float
    dt0: float
    max_steps: int
    batch_size: int
    epochs: int
    batching: str
    readout_times: int
    reasons: dict[str, str]


OPTIMIZER_STEPS = 4000
"""The optimiser steps the derived `epochs` give, about. What training needs is
a number of optimiser steps, not of passes over the data: a fixed count of
epochs gives a small training set few steps, and the model stops while its
training loss is still falling (the docs' benchmark page has the figures)."""


VMAP_STOP_RATIO = 2.0
"""The `batch_stop_ratio` above which a solve per sequence is the default for
adaptive steps. A step of the per-sequence solve costs more than a batched one
(JapaneseVowels, 64 units: an epoch of 77 steps per batch took 1.45 s against
0.84 s for 72), and a batched solve does not take a whole step at every stop.
Measured by `python -m benchmarks.batching`: at a ratio of 2.69 (JapaneseVowels,
half the observations dropped, each sequence's times rescaled to [0, 1]) the
per-sequence solve took 0.60x the time; at 1.07 (ArrowHead, likewise) the two
were within the machine's spread (batched 0.96x and 1.16x in two runs)."""


def batch_stop_ratio(
    data: SequenceDataset,
    batch_size: int,
    *,
    min_step: float | None = None,
    seed: int = 0,
) -> float:
    """How many more stops a batched adaptive solve with a linear input makes
    than a solve per sequence needs steps, over up to 8 random batches of
    `batch_size` sequences of `data` (seeded by `seed`): the mean number of
    distinct observation times in a batch (each counted from its sequence's
    first observation: the batch's shared clock), over the mean of what its
    longest sequence needs alone, its observations or, with `min_step` (time
    units; for instance the stable explicit step on the fastest time constant),
    `duration / min_step` steps if that is more. About 1 or below when the
    sequences share one time grid (the sample index, say); up to `batch_size`
    when no two times coincide and the observations are the steps.

    **Raises:** `ValueError` if `batch_size < 1`."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive; got {batch_size}.")
    rng = np.random.default_rng(seed)
    n = len(data)
    unions, needs = [], []
    for _ in range(8):
        index = rng.choice(n, size=min(batch_size, n), replace=False)
        rel = [data.ts[i, : data.lengths[i]] - data.ts[i, 0] for i in index]
        unions.append(np.unique(np.concatenate(rel)).size)
        need = max(r.size for r in rel)
        if min_step is not None:
            need = max(need, max(float(r[-1]) for r in rel) / min_step)
        needs.append(need)
    return float(np.mean(unions) / np.mean(needs))


def derive_defaults(
    datasets: Sequence[SequenceDataset],
    *,
    train_size: int | None = None,
    stability_bound: float | None = None,
    adaptive: bool = True,
    batch_size: int | None = None,
    interpolation: str = "linear",
    readout_features: ReadoutFeatures = "states",
    batch_multiple: int = 1,
) -> DataDefaults:
    """Settings derived from the data rather than guessed, so that a model's
    defaults work whatever the unit of the timestamps (seconds, milliseconds or
    the sample index) and however long the sequences.

    - `tau_init = (spacing / 10, max(10 spacing, longest))`: the fastest unit
      resolves a tenth of an observation interval, the slowest remembers the
      whole longest sequence. At a spacing of 1 and sequences of up to 10
      samples this is the LTC's own default, (0.1, 10).
    - `tau_min = spacing / 100`, a tenth of the fastest initial time constant:
      no parameter update can make a unit faster than that. Without a floor,
      `softplus` of a large negative `tau_raw` underflows to 0 in float32 (a
      perturbation of N(0, 100) does it), the field becomes infinitely stiff,
      and an adaptive solve stalls at its first step.
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
      within [8, 64] (then up to a multiple of `batch_multiple`): about 16
      optimiser steps per epoch.
    - `epochs = ceil(OPTIMIZER_STEPS / ceil(train_size / batch_size))`: about
      4,000 optimiser steps however many series there are (236 epochs of
      JapaneseVowels' 270, 800 of ArrowHead's 36, 26 of 10,000 series in
      batches of 64).
    - `batching`: `"vmap"` (a solve per sequence) for adaptive steps when a
      batched solve would stop more than twice as often as its longest
      sequence needs steps alone ([`ltc_jax.training.batch_stop_ratio`][], with the
      stable step on the fastest initial time constant where the solver has a
      stability bound): a batched adaptive solve with a linear input stops at
      the union of its sequences' observation times.
      `"batched"` otherwise: fixed steps (each sequence takes its own steps on
      the shared clock, exactly) or sequences on one grid, where one solve of
      the whole batch does the same steps in fewer operations.
      `python -m benchmarks.batching` measures both.
    - `readout_times = min(16, median observations per training sequence)`:
      the readout sees the states at that many evenly spread times, so that
      the shape of a series reaches it (see [`ltc_jax.LTC`][]), but never more
      finely than the data are observed. For a pooled readout alone
      (`readout_features="pooled"`), at most 64: it reads `3 * hidden_size`
      features however many times, so more times cost only their saved
      states (`batch * n` of them on one grid; with per-sequence times a
      batched solve saves at the union of the batch's readout times).

    **Arguments:** `datasets`: the training set first, then any others the model
    will be solved on; `train_size`: sequences of the training set (default:
    the first dataset's); `stability_bound`: an explicit solver's real
    stability bound ([`ltc_jax.training.real_stability_bound`][]), `None` for implicit
    steps; `adaptive`: whether the solve takes adaptive steps; `batch_size`:
    the batch size that will be used, if already chosen (then returned as it
    is; the batching is judged on it); `interpolation`: the input path's
    (`"cubic"` has no stops at the observations, so it is always batched);
    `readout_features`: what the model's readout reads of its readout times
    ([`ltc_jax.LTC`][]); `batch_multiple`: the derived batch size is rounded up
    to a multiple of this (the devices a batch is split over, as
    [`ltc_jax.training.data_mesh`][] needs), before the epochs are derived from it.

    **Raises:** `ValueError` as [`ltc_jax.training.observation_spacing`][], or for an
    unknown `readout_features`.
    """
    check_readout_features(readout_features)
    spacing = observation_spacing(datasets)
    longest = max(float(np.max(data.durations)) for data in datasets)
    low, high = spacing / 10, max(10 * spacing, longest)
    reasons = dict(
        tau_init=(
            f"from a tenth of the median observation interval ({spacing:g}) to the "
            f"longest sequence's duration ({longest:g}), at least 10 intervals"
        )
    )
    tau_min = spacing / 100
    reasons["tau_min"] = (
        f"a hundredth of the median observation interval ({spacing:g}), a tenth "
        "of the fastest initial time constant: no update can collapse tau to 0"
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
    if batch_size is None:
        nearest = 2 ** round(math.log2(max(n / 16, 1)))
        batch_size = int(min(64, max(8, nearest)))
        reasons["batch_size"] = (
            f"about 16 steps per epoch over {n} training sequences, a power of "
            "two in [8, 64]"
        )
        clamped = batch_size != nearest
        if clamped:
            reasons["batch_size"] += f" (clamped to {batch_size}"
        if batch_size % batch_multiple:
            batch_size = batch_multiple * math.ceil(batch_size / batch_multiple)
            reasons["batch_size"] += (
                f", rounded up to a multiple of {batch_multiple} (the devices)"
            )
        if clamped:  # say how many steps an epoch then takes
            steps = math.ceil(n / batch_size)
            reasons["batch_size"] += f": {steps} step{'s' * (steps != 1)} per epoch)"
    else:
        reasons["batch_size"] = "given"
    steps_per_epoch = math.ceil(n / batch_size)
    epochs = math.ceil(OPTIMIZER_STEPS / steps_per_epoch)
    reasons["epochs"] = (
        f"about {OPTIMIZER_STEPS} optimiser steps at {steps_per_epoch} per epoch "
        f"({n} training sequences in batches of {batch_size})"
    )
    train = datasets[0]
    if not adaptive:
        batching = "batched"
        reasons["batching"] = (
            "fixed steps: one solve of the batch, each sequence taking its own "
            "steps on the shared clock"
        )
    elif interpolation == "cubic":
        batching = "batched"
        reasons["batching"] = (
            f"a {interpolation} input has no stops at the observations: one solve "
            "of the batch"
        )
    else:
        fastest = None if stability_bound is None else stability_bound * low / (1 + low)
        ratio = batch_stop_ratio(train, batch_size, min_step=fastest)
        on_grid = ratio <= VMAP_STOP_RATIO
        batching = "batched" if on_grid else "vmap"
        reasons["batching"] = (
            f"a batched adaptive solve stops {ratio:.2f}x as often as its "
            "longest sequence needs steps alone (at most "
            f"{VMAP_STOP_RATIO:g}x: one solve of the batch"
            + (")" if on_grid else "; above: a solve per sequence)")
        )
    typical = int(np.median(train.lengths))
    pooled = readout_features == "pooled"
    most = 64 if pooled else 16
    readout_times = max(1, min(most, typical))
    reasons["readout_times"] = (
        f"the states at {readout_times} evenly spread times"
        + (", pooled" if pooled else "")
        + f": at most {most}, and no more than the median sequence's {typical} "
        "observations"
    )
    return DataDefaults(
        spacing=spacing,
        longest=longest,
        tau_init=(low, high),
        tau_min=tau_min,
        dt0=dt0,
        max_steps=max_steps,
        batch_size=batch_size,
        epochs=epochs,
        batching=batching,
        readout_times=readout_times,
        reasons=reasons,
    )
