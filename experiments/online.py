"""Learning online from a plant that drifts: forgetting and adaptation of six
strategies, measured prequentially (predict each window when it ends, train on
it when its label arrives).

    python -m experiments.online            # about 18 minutes on 2 cores
    python -m experiments.online --quick    # under 3 minutes

**The stream.** The simulated plant (`ltc_jax.datasets.simulate_plant`, 20
sensors) in three regimes of `machines_per_regime` machines each; a machine's
last hour plays on the plant's clock, one machine starting every
`stagger_seconds`, so several run at once at different stages of wear:

1. *regime 0*: the simulator's defaults;
2. *regime 1*: new load recipes (levels 0.55, 0.85 and 1.15 of rated load,
   changing twice an hour) and three sensors recalibrated (a vibration, a
   pressure and a temperature sensor: new gain and offset);
3. *regime 2*: as regime 1, and half the machines fail by a second mode, a
   leak that shows in pressure and not in vibration.

Each machine's stream is cut into back-to-back windows of `window_seconds` on
the 1 Hz clock (`ltc_jax.datasets.stream_windows`), labelled "fails within
`horizon_seconds` of the window's end"; a label arrives `horizon_seconds`
after its window ends. Each chunk of `chunk_seconds` of the plant's clock, the
learner (`ltc_jax.training.OnlineLearner`) predicts the windows that ended,
carrying each machine's state from window to window, takes the labels that
arrived, and updates.

**The strategies.** All start from one model, trained on `warmup_machines`
machines of regime 0 (`warmup_passes` passes over their stream, labels at
once), and use Adam at a constant `learning_rate`:

- `none`: never updated;
- `finetune`: one pass over each chunk's labelled windows;
- `replay`: the same, half of each batch drawn from a reservoir of
  `replay_capacity` windows;
- `ewc`: the same as `finetune`, with online EWC (`ewc_strength`, decay
  `ewc_decay`, consolidated every `ewc_every` windows);
- `ewc_replay`: both;
- `retrain`: at the end of each regime, a model trained from scratch as the
  warm-up was, on every window labelled so far (the upper bound of learning
  from what has been seen), then used without updates in the next regime.

**Measured.** The prequential accuracy and AUROC in each regime; accuracy and
AUROC on `test_machines` held-out machines of each regime (never streamed),
with each strategy's model at the end of each regime: on an earlier regime
after the later ones (forgetting: the drop from the end of its own regime), and
on the current one (adaptation); and the seconds of each chunk's update (label
and train). A latency check times the update of `ewc_replay` on one minute of
`latency_sensors` sensors.

Writes `results/online/<run>/`: `config.json`, `metrics.json`, `report.txt`
and `prequential.png` (the prequential accuracy over the plant's clock).
"""

import dataclasses
import statistics
import time

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import tyro

import ltc_jax
from experiments import _problems, _run
from ltc_jax import training
from ltc_jax.datasets import simulate_plant, standardize_with, stream_windows


STRATEGIES = ("none", "finetune", "replay", "ewc", "ewc_replay", "retrain")
REGIMES = 3
RECALIBRATED = (0, 2, 8)  # with 20 sensors: a vibration, a pressure, a temperature


@dataclasses.dataclass(frozen=True)
class LearnerConfig(_run.RunConfig):
    """The model and the strategies' options, shared by every drifting stream
    (this plant's, and the weather of `experiments.online_rainfall`)."""

    hidden_size: int = 16
    """The LTC's units."""
    batch_size: int = 16
    """Windows per optimiser step."""
    learning_rate: float = 1e-2
    """Adam's learning rate, constant."""
    warmup_passes: int = 6
    """Passes over the warm-up windows (and over everything seen, for
    `retrain`)."""
    replay_capacity: int = 512
    """Windows the replay buffer keeps (half of each batch is replayed)."""
    ewc_strength: float = 100.0
    """EWC's lambda, the penalty's weight."""
    ewc_decay: float = 0.9
    """EWC's gamma: the earlier Fisher's weight at each consolidation."""
    ewc_every: int = 64
    """Labelled windows between EWC's consolidations."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Each seeds the model's initialisation and the replay's draws (and, for the
    plant, the plant itself); the tables give the mean and standard deviation
    over them."""
    strategies: tuple[str, ...] = STRATEGIES
    """The strategies to run: `none` (never updated), `finetune`, `replay`, `ewc`,
    `ewc_replay` and `retrain` (from scratch on everything seen, at each
    regime's end). A subset serves a sweep (`--strategies ewc ewc_replay
    --ewc-strength 1000`): every strategy's run depends on its seed alone, so
    its rows match a full run's."""

    def __post_init__(self):
        unknown = sorted(set(self.strategies) - set(STRATEGIES))
        repeated = len(set(self.strategies)) < len(self.strategies)
        if unknown or repeated or not self.strategies:
            raise ValueError(
                f"strategies must be some of {', '.join(STRATEGIES)}, each at most "
                f"once; got {', '.join(self.strategies) or 'no strategy'}."
            )


@dataclasses.dataclass(frozen=True)
class Config(LearnerConfig):
    """Learning online from a drifting plant: six strategies, prequentially.

    `--quick`: one seed, 3 machines per regime, 2 held out, 3 for the warm-up,
    10-unit model, 2 warm-up passes, 2-minute chunks, a 10-sensor latency
    check.
    """

    machines_per_regime: int = 8
    """Machines streamed in each regime."""
    test_machines: int = 4
    """Held-out machines per regime, for forgetting and adaptation."""
    warmup_machines: int = 8
    """Regime-0 machines the starting model is trained on."""
    sensors: int = 20
    window_seconds: float = 60.0
    horizon_seconds: float = 1800.0
    """The label: fails within this many seconds of the window's end; it
    arrives this long after the window ends."""
    stagger_seconds: float = 900.0
    """Plant seconds between the starts of successive machines' last hours."""
    chunk_seconds: float = 60.0
    """Plant seconds per chunk: predict, label, update."""
    latency_sensors: int = 200
    """Sensors of the latency check (0: none)."""


QUICK = dict(
    machines_per_regime=3,
    test_machines=2,
    warmup_machines=3,
    warmup_passes=2,
    hidden_size=10,
    latency_sensors=10,
    seeds=(0,),
    chunk_seconds=120.0,
)


# -- the drifting plant -------------------------------------------------------


def regime_plant(
    config: Config, seed: int, regime: int, machines: int, first_machine: int
):
    """`machines` machines of regime `regime` (their last hour)."""
    options = dict(
        machines=machines,
        sensors=config.sensors,
        seed=seed,
        simulated_seconds=3600.0,
        first_machine=first_machine,
    )
    if regime >= 1:
        recalibrated = tuple(s for s in RECALIBRATED if s < config.sensors)
        options |= dict(
            load_levels=(0.55, 0.85, 1.15),
            load_changes_per_hour=2.0,
            recalibration_seconds=0.0,
            recalibrated_sensors=recalibrated,
        )
    if regime >= 2:
        options["second_mode_share"] = 0.5
    return simulate_plant(**options)


@dataclasses.dataclass(frozen=True)
class Windows:
    """Windows of streams on one clock."""

    xs: np.ndarray  # (n, frames, channels), standardised
    labels: np.ndarray  # (n,)
    stream: np.ndarray  # (n,) the stream's (machine's) index
    end: np.ndarray  # (n,) the window's end on the clock
    regime: np.ndarray  # (n,)

    def take(self, index) -> "Windows":
        return Windows(
            *(getattr(self, f.name)[index] for f in dataclasses.fields(self))
        )

    def join(self, other: "Windows") -> "Windows":
        """These windows, then `other`'s."""
        return Windows(
            *(
                np.concatenate([getattr(self, f.name), getattr(other, f.name)])
                for f in dataclasses.fields(self)
            )
        )

    def __len__(self) -> int:
        return self.end.shape[0]


@dataclasses.dataclass(frozen=True)
class Stream:
    """A drifting stream in regimes, and how it plays: everything the
    strategies and the report need from the data."""

    warmup: Windows
    """Windows the starting model is trained on (labels at once)."""
    stream: Windows
    """Windows streamed, in regimes."""
    test: Windows
    """Held-out windows of each regime, never streamed."""
    boundaries: tuple[float, ...]
    """Where regimes 1, 2, ... begin on the clock: each once the regime
    before's last label has arrived (the model at a boundary has learned all
    of the regime before, none of the next)."""
    ts: np.ndarray
    """The windows' shared grid."""
    chunk: float
    """Clock time per chunk: predict, label, update."""
    label_delay: float
    """A window's label arrives this long after it ends."""
    curve_bin: float
    """The prequential curve's bin, on the clock."""
    unit: tuple[str, float]
    """The report's time unit: its name, and its length on the clock."""

    @property
    def regimes(self) -> int:
        return len(self.boundaries) + 1

    def summary(self) -> dict:
        """The stream's sizes, for the metrics."""
        name, length = self.unit
        return dict(
            windows=len(self.stream),
            regime_windows=[
                int(np.sum(self.stream.regime == r)) for r in range(self.regimes)
            ],
            positive_share=float(self.stream.labels.mean()),
            unit=name,
            boundaries=[b / length for b in self.boundaries],
            span=float(self.stream.end.max()) / length,
            warmup_windows=len(self.warmup),
            test_windows=[
                int(np.sum(self.test.regime == r)) for r in range(self.regimes)
            ],
        )


def cut(config: Config, plant, regime: int, first_machine: int, starts) -> tuple:
    """The plant's windows, each machine's last hour starting at `starts[m]`
    on the plant's clock; returns `(dataset, machine, plant end)`."""
    windows = stream_windows(
        plant, config.window_seconds, horizon_seconds=config.horizon_seconds
    )
    start = np.asarray(starts)[windows.machine]
    end = windows.end_time - plant.t_start[windows.machine] + start
    return windows.dataset, first_machine + windows.machine, end


def build_stream(config: Config, seed: int) -> Stream:
    """The warm-up, stream and held-out windows, standardised with the warm-up
    windows' statistics; regimes 1 and 2 begin once the last label of the
    regime before has arrived, so that a regime's end is a model that has
    learned all of it and none of the next."""
    parts, counter = {}, 0

    def machines(regime, count, starts, name):
        nonlocal counter
        plant = regime_plant(config, seed, regime, count, counter)
        data, stream, end = cut(config, plant, regime, counter, starts)
        counter += count
        parts.setdefault(name, []).append((data, stream, end, regime))

    warm = config.warmup_machines
    machines(0, warm, np.arange(warm) * config.stagger_seconds, "warmup")
    # A machine's last hour, then its last window's label.
    regime_seconds = (
        (config.machines_per_regime - 1) * config.stagger_seconds
        + 3600.0
        + config.horizon_seconds
    )
    for regime in range(REGIMES):
        starts = (
            regime * regime_seconds
            + np.arange(config.machines_per_regime) * config.stagger_seconds
        )
        machines(regime, config.machines_per_regime, starts, "stream")
        machines(regime, config.test_machines, np.zeros(config.test_machines), "test")
    mean, std = ltc_jax.datasets.channel_statistics(parts["warmup"][0][0])
    std = np.where(std > 0, std, 1.0)

    def joined(name):
        items = parts[name]
        datasets = [standardize_with(d, mean, std) for d, *_ in items]
        return Windows(
            xs=np.concatenate([d.xs for d in datasets]),
            labels=np.concatenate([d.labels for d in datasets]),
            stream=np.concatenate([s for _, s, _, _ in items]),
            end=np.concatenate([e for _, _, e, _ in items]),
            regime=np.concatenate([np.full(len(d), r) for d, _, _, r in items]),
        )

    return Stream(
        warmup=joined("warmup"),
        stream=joined("stream"),
        test=joined("test"),
        boundaries=tuple(r * regime_seconds for r in range(1, REGIMES)),
        ts=parts["warmup"][0][0].ts[0],
        chunk=config.chunk_seconds,
        label_delay=config.horizon_seconds,
        curve_bin=1800.0,
        unit=("hours", 3600.0),
    )


# -- the learners ------------------------------------------------------------


def make_model(config: LearnerConfig, channels: int, ts: np.ndarray, key):
    """The LTC of every strategy, with the stream job's settings derived from
    a window's grid (`derive_defaults`): time constants from a tenth of a
    frame to the window, and the readout's times, read pooled."""
    window = ltc_jax.datasets.SequenceDataset(
        ts[None], np.zeros((1, ts.size, channels)), [ts.size], [0]
    )
    defaults = training.derive_defaults([window], adaptive=False)
    model = ltc_jax.LTC(
        channels,
        config.hidden_size,
        2,
        tau_init=defaults.tau_init,
        tau_min=defaults.tau_min,
        gate_bias_init="chrono",
        readout_times=defaults.readout_times,
        readout_features="pooled",
        key=key,
    )
    return _problems.cast(model, "float32")


def make_learner(config: LearnerConfig, ts, strategy: str, optimizer, integrator, seed):
    replay = training.Replay(config.replay_capacity)
    ewc = training.EWC(config.ewc_strength, config.ewc_decay, config.ewc_every)
    return training.OnlineLearner(
        ts=ts,
        optimizer=optimizer,
        integrator=integrator,
        batch_size=config.batch_size,
        replay=replay if strategy in ("replay", "ewc_replay") else None,
        ewc=ewc if strategy in ("ewc", "ewc_replay") else None,
        seed=seed,
    )


def run_stream(
    learner,
    state,
    windows: Windows,
    chunk: float,
    *,
    label_delay: float,
    train: bool = True,
    until: float = np.inf,
    start: float | None = None,
):
    """Play `windows` chunk by chunk from `start` (default: the first chunk
    with a window) to `until`: predict what ended, label what arrived,
    update. Returns the state, each window's probability of failure (NaN where
    not reached), the update seconds of each chunk that trained, and the time
    reached."""
    arrival = windows.end + label_delay
    t = first_chunk(windows, chunk) if start is None else start
    last = min(until, float(arrival.max()) + chunk)
    probability = np.full(len(windows), np.nan)
    seconds = []
    while t < last:
        t_next = min(t + chunk, until)
        ended = np.flatnonzero((windows.end > t) & (windows.end <= t_next))
        if ended.size:
            logits, state = learner.predict(
                state,
                windows.xs[ended],
                windows.stream[ended],
                windows.end[ended],
                t_next,
            )
            probability[ended] = np.asarray(jax.nn.softmax(jnp.asarray(logits)))[:, 1]
        arrived = np.flatnonzero((arrival > t) & (arrival <= t_next))
        if train and arrived.size:
            clock = time.perf_counter()
            state = learner.label(
                state,
                windows.stream[arrived],
                windows.end[arrived],
                windows.labels[arrived],
                t_next,
            )
            state, _ = learner.update(state)
            seconds.append(time.perf_counter() - clock)
        t = t_next
    return state, probability, seconds, t


def first_chunk(windows: Windows, chunk: float) -> float:
    """The start of the first chunk: the last multiple of `chunk` before the
    first window's end (a chunk `(t, t + chunk]` holds the windows ending
    in it, so a window ending on a multiple belongs to the chunk before)."""
    return chunk * (np.ceil(windows.end.min() / chunk) - 1.0)


def trained_from_scratch(config, windows, learner, chunk, key):
    """A model trained as the warm-up trains: `warmup_passes` passes over the
    windows' stream in chunks of `chunk`, each label at once, each pass from a
    fresh stream position with the model and optimiser carried on."""
    model = make_model(config, windows.xs.shape[-1], learner.ts, key)
    state = learner.init(model)
    for _ in range(config.warmup_passes):
        state, *_ = run_stream(learner, state, windows, chunk, label_delay=0.0)
        state = learner.init(state.model).replace(train=state.train)
    return state.model


def scores(labels, probability) -> dict:
    """Accuracy and AUROC of the windows reached."""
    from sklearn.metrics import roc_auc_score

    reached = np.isfinite(probability)
    labels, probability = labels[reached], probability[reached]
    both = 0 < labels.sum() < labels.size
    return dict(
        accuracy=float(np.mean((probability > 0.5) == labels)),
        auroc=float(roc_auc_score(labels, probability)) if both else float("nan"),
        windows=int(labels.size),
    )


def held_out(learner, model, data: Stream) -> list[dict]:
    """Each regime's held-out windows, predicted causally by `model`."""
    rows = []
    for regime in range(data.regimes):
        part = data.test.take(data.test.regime == regime)
        _, probability, *_ = run_stream(
            learner,
            learner.init(model),
            part,
            data.chunk,
            label_delay=0.0,
            train=False,
        )
        rows.append(dict(regime=regime, **scores(part.labels, probability)))
    return rows


def strategy_rows(config, seed, strategy, base, data: Stream, parts):
    """One strategy over the whole stream: its prequential scores per regime,
    held-out scores at the end of each regime, and update latencies."""
    stream = data.stream
    optimizer, integrator = parts
    learner = make_learner(config, data.ts, strategy, optimizer, integrator, seed)
    state = learner.init(base)
    ends = [*data.boundaries, np.inf]
    probability = np.full(len(stream), np.nan)
    seconds, after, retrain_seconds = [], [], []
    t = first_chunk(stream, data.chunk)
    for regime, until in enumerate(ends):
        state, reached, spent, t = run_stream(
            learner,
            state,
            stream,
            data.chunk,
            label_delay=data.label_delay,
            train=strategy not in ("none", "retrain"),
            until=until,
            start=t,
        )
        probability = np.where(np.isfinite(reached), reached, probability)
        seconds += spent
        if strategy == "retrain":  # on everything labelled by the regime's end
            clock = time.perf_counter()
            seen = stream.take(stream.end + data.label_delay <= t)
            model = trained_from_scratch(
                config,
                data.warmup.join(seen),
                learner,
                data.chunk,
                jr.key(seed + 1000 * (regime + 1)),
            )
            state = state.replace(train=state.train.replace(model=model))
            retrain_seconds.append(time.perf_counter() - clock)
        after.append(
            dict(
                after_regime=regime,
                held_out=held_out(learner, state.model, data),
            )
        )
    prequential = [
        dict(
            regime=r,
            **scores(
                stream.labels[stream.regime == r], probability[stream.regime == r]
            ),
        )
        for r in range(data.regimes)
    ]
    timed = seconds[2:] or seconds
    return dict(
        seed=seed,
        strategy=strategy,
        prequential=prequential,
        held_out=after,
        update_seconds_median=statistics.median(timed) if timed else float("nan"),
        update_seconds_max=max(timed) if timed else float("nan"),
        updates=len(seconds),
        retrain_seconds=retrain_seconds,
        curve=_curve(data, probability),
    )


def _curve(data: Stream, probability) -> list[tuple]:
    """Prequential accuracy of the windows ending in each of the curve's bins
    (from the first window's end), at each bin's end in the report's unit."""
    stream, bins = data.stream, data.curve_bin
    points = []
    first = stream.end.min() - 1e-9 * bins
    for start in np.arange(first, stream.end.max(), bins):
        inside = (stream.end > start) & (stream.end <= start + bins)
        inside &= np.isfinite(probability)
        if inside.any():
            hit = (probability[inside] > 0.5) == stream.labels[inside]
            points.append((float(start + bins) / data.unit[1], float(hit.mean())))
    return points


def latency(config: Config, optimizer, integrator, seed: int) -> dict:
    """The `ewc_replay` update on one minute of `latency_sensors` sensors: four
    machines' last 15 minutes on one clock, each minute's windows predicted,
    and the windows of the minute before labelled and trained on; the first
    three updates (compiling) are not counted."""
    plant = simulate_plant(
        machines=4,
        sensors=config.latency_sensors,
        seed=seed,
        simulated_seconds=900.0,
    )
    windows = stream_windows(plant, config.window_seconds, horizon_seconds=300.0)
    (data,) = ltc_jax.datasets.standardize(windows.dataset)
    model = make_model(config, data.num_channels, data.ts[0], jr.key(seed))
    learner = make_learner(
        config, data.ts[0], "ewc_replay", optimizer, integrator, seed
    )
    learner = dataclasses.replace(learner, ewc=training.EWC(1.0, every=8))
    state = learner.init(model)
    end = windows.end_time - plant.t_start[windows.machine]  # one clock
    minute = np.ceil(end / 60.0)
    seconds, sizes = [], []
    minutes = np.unique(minute)
    for previous, m in zip([None, *minutes[:-1]], minutes, strict=True):
        now = 60.0 * float(m)
        ended = np.flatnonzero(minute == m)
        _, state = learner.predict(
            state, data.xs[ended], windows.machine[ended], end[ended], now
        )
        if previous is not None:  # the minute before's labels, then the update
            known = np.flatnonzero(minute == previous)
            clock = time.perf_counter()
            state = learner.label(
                state, windows.machine[known], end[known], data.labels[known], now
            )
            state, _ = learner.update(state)
            seconds.append(time.perf_counter() - clock)
            sizes.append(known.size)
    timed = seconds[3:] or seconds
    return dict(
        sensors=config.latency_sensors,
        channels=data.num_channels,
        windows_per_minute=float(np.median(sizes)),
        update_seconds_median=statistics.median(timed),
        update_seconds_max=max(timed),
        updates_timed=len(timed),
    )


def seed_run(config: LearnerConfig, seed: int, data: Stream, parts) -> dict:
    """One seed over `data`: the warm-up model and every strategy."""
    optimizer, integrator = parts
    warm_learner = make_learner(
        config, data.ts, "finetune", optimizer, integrator, seed
    )
    base = trained_from_scratch(
        config, data.warmup, warm_learner, data.chunk, jr.key(seed)
    )
    return dict(
        seed=seed,
        strategies=[
            strategy_rows(config, seed, s, base, data, parts) for s in config.strategies
        ],
        stream=data.summary(),
    )


def main(config: Config) -> dict:
    """Run every strategy over the drifting stream of each seed; return (and
    write) the records."""
    config, run = _run.start_run(config, "online", QUICK)
    clock = time.perf_counter()
    # Every window is on the 1 Hz clock (the slowest sensor's): a fused step
    # per frame.
    integrator = ltc_jax.make_integrator("fused", "checkpoint", dt0=1.0)
    optimizer = training.make_optimizer(config.learning_rate, None)
    parts = (optimizer, integrator)
    metrics = dict(
        runs=[
            seed_run(config, seed, build_stream(config, seed), parts)
            for seed in config.seeds
        ]
    )
    metrics["seconds"] = time.perf_counter() - clock
    if config.latency_sensors:
        metrics["latency"] = latency(config, optimizer, integrator, config.seeds[0])
    return run.finish(metrics)


if __name__ == "__main__":
    main(tyro.cli(Config))
