"""Learning online from real weather that drifts: the six strategies of
`experiments.online` on 50 years of daily weather at one site, measured
prequentially (predict each day's rain when the day ends, train on it when
its label arrives).

    python -m experiments.online_rainfall            # about 17 minutes on 2 cores
    python -m experiments.online_rainfall --quick    # under a minute

**The stream.** `experiments/data/rainfall/` (its README gives the source and
citation): 18,159 days of 8 weather measurements and whether it rained. A
window is the `window_days` days up to a day, labelled "rain on its last day"
(the benchmark's task, Elwell and Polikar 2011: the day's rain from the day's
summary, here with the days before it; not a forecast); the label arrives
`label_delay_days` after the day. Each chunk of `chunk_days`, the learner
predicts the windows that ended, takes the labels that arrived and updates;
overlapping windows carry no state from one to the next. The data is one
series: seeds change the model's initialisation and the replay's draws, not
the data.

**The grid.** A day's record summarises the day, so it holds over the day
(the learner's paths hold each value from its time to the next): a window's
grid is its days' starts and the last day's end, where the window ends and is
predicted, with the last day's values repeated as the final frame (a path's
final value is never integrated). On a grid of the days' ends, held values
would leave the last day, the one the label is about, out of the solve. The
values are standardised with the warm-up's statistics and clipped to `clip`
standard deviations (one recorded pressure is 94 of the file's standard
deviations out, about 580 of the warm-up's).

**Regimes.** They begin at the days in `regime_starts`: by default day 6,000
(the years before against those after, natural drift only) and day 12,000,
where the data's documented drift begins (each column holds, from there on,
what the next column held before: the 8 measurements rotate by one place).
`days_per_regime` keeps each regime's first days alone (`--quick` keeps 400,
so that the rotation stays in the stream).

**Held out.** Every `test_every`-th block of `test_block_days` days is never
trained on: its windows measure each regime's accuracy with each strategy's
model at the end of each regime, as the plant's held-out machines do (its
days' values are inputs of neighbouring windows; their labels are never
seen). The first `warmup_days` days (their blocks not held out) train the
starting model.

**For reference**, on each regime's held-out days: the warm-up's majority
class ("no rain"), and logistic regression on the last day's 8 values alone
(scikit-learn), fitted on the warm-up's days, or on each regime's streamed
days.

Writes `results/online_rainfall/<run>/`: `config.json`, `metrics.json`,
`report.txt` and `prequential.png` (the prequential accuracy year by year).
"""

import dataclasses
import os
import time

import numpy as np
import pandas as pd
import tyro

import ltc_jax
from experiments import _run, online
from ltc_jax import training


DATA = os.path.join(os.path.dirname(__file__), "data", "rainfall", "rainfall_data.csv")
YEAR = 365.25


@dataclasses.dataclass(frozen=True)
class Config(online.LearnerConfig):
    """Learning online from 50 years of daily weather: six strategies,
    prequentially.

    `--quick`: one seed, the first 400 days of each regime, a 200-day warm-up,
    8-unit model, 2 warm-up passes.
    """

    window_days: int = 14
    """Days in a window (its last day's rain is the label)."""
    label_delay_days: float = 1.0
    """Days after a window's last day that its label arrives (at least 0); a
    regime ends once its last label has arrived."""
    chunk_days: float = 7.0
    """Days per chunk: predict, label, update."""
    warmup_days: int = 730
    """The first days, whose windows train the starting model."""
    regime_starts: tuple[int, ...] = (6000, 12000)
    """Days where regimes 1, 2, ... begin (12,000: the data's documented drift,
    its columns rotated)."""
    days_per_regime: int = 0
    """Keep each regime's first days alone (0: every day)."""
    test_block_days: int = 28
    """Days in a block, the unit that is held out or streamed."""
    test_every: int = 5
    """Every `test_every`-th block of `test_block_days` days is held out."""
    clip: float = 10.0
    """Standardised values beyond this many standard deviations are clipped."""

    def __post_init__(self):
        super().__post_init__()
        starts = (0, *self.regime_starts)
        if any(b <= a for a, b in zip(starts, starts[1:], strict=False)):
            raise ValueError(
                f"regime_starts must be increasing days after 0; got "
                f"{self.regime_starts}."
            )
        if self.window_days < 1 or self.test_block_days < 1 or self.test_every < 2:
            raise ValueError(
                "window_days and test_block_days must be at least 1 and test_every "
                f"at least 2; got {self.window_days}, {self.test_block_days} and "
                f"{self.test_every}."
            )
        if not (self.chunk_days > 0 and self.label_delay_days >= 0 and self.clip > 0):
            raise ValueError(
                "chunk_days and clip must be positive and label_delay_days at least "
                f"0; got {self.chunk_days}, {self.clip} and {self.label_delay_days}."
            )


QUICK = dict(
    days_per_regime=400,
    warmup_days=200,
    hidden_size=8,
    warmup_passes=2,
    seeds=(0,),
)


def load(path: str = DATA) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The daily measurements `float64[days, 8]`, the rain labels `int32[days]`
    and the measurements' names."""
    frame = pd.read_csv(path, index_col=0)
    values = frame.drop(columns="rain")
    return (
        values.to_numpy(np.float64),
        frame["rain"].to_numpy(np.int32),
        list(values.columns),
    )


def build_stream(config: Config, path: str = DATA) -> online.Stream:
    """The warm-up, stream and held-out windows of the days kept, standardised
    with the warm-up windows' statistics, on a clock in days (day `d` spans
    `[d - 1, d]`; a window of days up to `d` ends at `d`): `window_days + 1`
    frames, at the days' starts and the last day's end.

    **Raises:** `ValueError` where a regime starts beyond the data, the warm-up
    does not end inside regime 0 after a window, or the warm-up, a regime's
    stream or a regime's held-out days hold no window."""
    first = config.regime_starts[0] if config.regime_starts else np.inf
    if config.days_per_regime:
        first = min(first, config.days_per_regime)
    if not config.window_days < config.warmup_days < first:
        raise ValueError(
            f"warmup_days must exceed window_days and end inside regime 0; got "
            f"{config.warmup_days} (window_days {config.window_days}, regime 0's "
            f"{first} days)."
        )
    values, rain, _ = load(path)
    days = values.shape[0]
    if config.regime_starts and config.regime_starts[-1] >= days:
        raise ValueError(
            f"The data has {days} days; regime_starts {config.regime_starts} "
            "goes beyond them."
        )
    starts = np.array([0, *config.regime_starts])
    regime = np.searchsorted(starts, np.arange(days), side="right") - 1
    kept = np.ones(days, bool)
    if config.days_per_regime:
        kept = np.arange(days) - starts[regime] < config.days_per_regime
    # A window ends on day d when its window_days days are all kept.
    span = config.window_days
    whole = np.convolve(kept, np.ones(span, int), mode="full")[:days] == span
    end = np.flatnonzero(whole)
    # The days' records, then the last day's again at its end.
    index = end[:, None] + np.r_[np.arange(1 - span, 1), 0]
    windows = online.Windows(
        xs=values[index],
        labels=rain[end],
        # Overlapping windows continue no state: each window's stream is its
        # day modulo twice the window, so a stream's windows are a window or
        # more apart (never chained) and a chunk's windows solve as one batch.
        stream=end % (2 * span),
        end=end.astype(np.float64),
        regime=regime[end],
    )
    block = end // config.test_block_days
    test = block % config.test_every == config.test_every - 1
    warmup = ~test & (end < config.warmup_days)
    streamed = ~test & (end >= config.warmup_days)
    mean = windows.xs[warmup].mean(axis=(0, 1))
    std = windows.xs[warmup].std(axis=(0, 1))
    xs = (windows.xs - mean) / np.where(std > 0, std, 1.0)
    windows = dataclasses.replace(windows, xs=np.clip(xs, -config.clip, config.clip))
    # Every part must hold windows: the warm-up, and each regime's stream and
    # held-out days.
    parts = [("the warm-up", warmup)] + [
        (f"regime {r}'s {name}", part & (windows.regime == r))
        for r in range(len(starts))
        for name, part in (("stream", streamed), ("held-out days", test))
    ]
    for name, part in parts:
        if not part.any():
            raise ValueError(
                f"No window in {name}: give more days (window_days {span}, "
                f"warmup_days {config.warmup_days}, days_per_regime "
                f"{config.days_per_regime}, held-out blocks of "
                f"{config.test_block_days} days)."
            )
    return online.Stream(
        warmup=windows.take(warmup),
        stream=windows.take(streamed),
        test=windows.take(test),
        # A regime ends when its last label (its last day's) arrives.
        boundaries=tuple(
            d - 1.0 + config.label_delay_days for d in config.regime_starts
        ),
        ts=np.arange(float(span + 1)),
        chunk=config.chunk_days,
        label_delay=config.label_delay_days,
        curve_bin=YEAR,
        unit=("years", YEAR),
    )


def reference(data: online.Stream) -> list[dict]:
    """Held-out accuracy on each regime of the warm-up's majority class, and of
    logistic regression on each window's last day alone, fitted on the
    warm-up's windows, then on each regime's streamed windows."""
    from sklearn.dummy import DummyClassifier
    from sklearn.linear_model import LogisticRegression

    def fitted(windows: online.Windows, name: str, model=None) -> dict:
        model = LogisticRegression(max_iter=1000) if model is None else model
        model.fit(windows.xs[:, -1], windows.labels)
        accuracy = [
            float(model.score(data.test.xs[part, -1], data.test.labels[part]))
            for part in (data.test.regime == r for r in range(data.regimes))
        ]
        return dict(fitted_on=name, accuracy=accuracy)

    majority = DummyClassifier(strategy="most_frequent")
    return [
        fitted(data.warmup, "majority class of the warm-up", majority),
        fitted(data.warmup, "warm-up"),
    ] + [
        fitted(data.stream.take(data.stream.regime == r), f"regime {r}'s stream")
        for r in range(data.regimes)
    ]


def main(config: Config) -> dict:
    """Run every strategy over the weather stream for each seed; return (and
    write) the records."""
    clock = time.perf_counter()
    config = _run.apply_quick(config, QUICK)
    data = build_stream(config)  # its errors before the run folder exists
    config, run = _run.start_run(config, "online_rainfall")
    # One fused step per day of a window.
    integrator = ltc_jax.make_integrator("fused", "checkpoint", dt0=1.0)
    optimizer = training.make_optimizer(config.learning_rate, None)
    parts = (optimizer, integrator)
    metrics = dict(
        runs=[online.seed_run(config, seed, data, parts) for seed in config.seeds],
        reference=reference(data),
    )
    metrics["seconds"] = time.perf_counter() - clock
    return run.finish(metrics)


if __name__ == "__main__":
    main(tyro.cli(Config))
