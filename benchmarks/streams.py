r"""Sensor streams at plant scale: what a training step costs on the union of the
sensors' timestamps against windows on a slow clock (`stream_windows`), and how
well an LTC on those windows predicts a failure, next to the baselines a
maintenance engineer would try first.

    python -m benchmarks.streams            # every size and the accuracy table
    python -m benchmarks.streams --quick    # smoke test, under 2 minutes

**Scaling.** For each number of sensors and window length, one machine of the
simulated plant (`ltc_jax.datasets.simulate_plant`, default rate groups: 10%
vibration at 100 Hz, 30% pressure at 10 Hz, 50% temperature at 1 Hz, 10%
alarms) gives a batch of 8 windows:

- *slow clock*: `stream_windows` at the slowest continuous rate (1 Hz): fast
  sensors summarised within each second, slow ones held, alarms counted. The
  LTC takes one fused step per frame. Measured: input bytes (the batch's
  arrays), the compiled training step's temporary bytes (XLA's memory
  analysis), steps per solve, and the median step time.
- *pooled*: the same windows with each sensor group's channels summarised
  across the group's sensors (`ltc_jax.datasets.pool_channels`: mean,
  standard deviation, minimum and maximum of each feature), so that the
  model's input, and with it its size, does not follow the sensors. Measured
  as the slow clock.
- *union grid*: every sensor's samples on the union of their times, NaN where
  a sensor has no sample (times to the millisecond, so that float32 resolves
  them), with the observation mask and the time since observation (the
  layout the docs gave before streams): counted from the
  windows' own samples (union points, input bytes `batch * points * (3 *
  sensors + 1) * 4`, and the fused steps at the median union interval), and
  its training step measured where the union has at most `union_limit`
  points.

**Accuracy.** Machines are the unit of the split: the LTC on the slow clock
(trained on the training machines' windows, keeping its epoch of lowest loss
on the validation machines'), the same LTC on the pooled windows (standardised
channel by channel, each sensor group pooled, standardised again), the same
with a learned frame encoder before the cell (the stream job's, as
`--frame-encoder mlp` builds it), the LTC
that `ltc-jax stream` derives for the
same windows (its model, schedule and patience, on the same machines; as
`ltc-jax stream --sensor-pooling none`), the same on the pooled windows (as
`--sensor-pooling groups`, the stream job's default on a plant where pooling
gives fewer channels), the same with a learned frame encoder (as
`--sensor-pooling groups --frame-encoder mlp`), and
logistic regression and gradient-boosted trees (scikit-learn) on each
window's summary features (per channel: last, mean, standard deviation,
minimum and maximum over the frames; trained on the training and validation
machines' windows), all scored on the held-out machines' windows (AUROC and
accuracy of "fails within `label_horizon_seconds`"). Where no window holds
more than `union_limit` samples, the same LTC is also trained on the union
grid (the scaling table's layout, one fused step per median union interval),
so the two layouts are compared at a size where both fit:

    python -m benchmarks.streams --sensors 10 --window-minutes 1 \
        --accuracy-sensors 10 --accuracy-window-seconds 60 \
        --accuracy-stride-seconds 240

Writes `results/streams/<run>/`: `config.json`, `metrics.json` and `report.txt`
with both tables (`experiments._report`), and prints them.
"""

import dataclasses
import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import tyro

import ltc_jax
import ltc_jax.app
from experiments import _problems, _run
from ltc_jax.app.settings import make_frame_encoder
from ltc_jax.app.streams import simulated_chunks
from ltc_jax.datasets import simulate_plant, stream_windows


@dataclasses.dataclass(frozen=True)
class Config(_run.RunConfig):
    """Plant-scale sensor streams: cost per training step and held-out accuracy.

    `--quick`: sensors 10 and 50, 1-minute windows, one timed step; accuracy on
    4 + 2 + 3 machines of 10 sensors, 2-minute windows, 4 epochs (the stream
    job's LTC too).
    """

    sensors: tuple[int, ...] = (10, 50, 200, 500)
    """Sensors per machine, for the scaling table."""
    window_minutes: tuple[float, ...] = (1.0, 10.0, 60.0)
    """Window lengths, for the scaling table."""
    batch_size: int = 8
    """Windows per training step."""
    hidden_size: int = 64
    """LTC units."""
    union_limit: int = 10_000
    """Measure the union grid's step only where a window has at most this many
    union points (the median of the scaling table's 8 windows; its input and
    steps are counted at every size), and train the union grid's LTC for the
    accuracy table only where no window has more."""
    timed_steps: int = 3
    """Timed training steps per configuration, after the compiling one."""
    accuracy_machines: tuple[int, int, int] = (30, 6, 12)
    """Training, validation and held-out machines for the accuracy table (0 0 0:
    skip it). The LTC keeps its epoch of lowest loss on the validation machines;
    the baselines train on the training and validation machines together."""
    accuracy_sensors: int = 20
    """Sensors per machine for the accuracy table."""
    accuracy_window_seconds: float = 600.0
    """Window length for the accuracy table, in seconds."""
    accuracy_stride_seconds: float = 120.0
    """Seconds between successive windows' ends, for the accuracy table."""
    simulated_seconds: float = 3600.0
    """Each machine's simulated stream for the accuracy table: its last hour."""
    accuracy_chunk_machines: int = 6
    """Machines simulated at once for the accuracy table, their rows dropped
    once cut into windows (memory follows the windows, not the samples)."""
    label_horizon_seconds: float = 1800.0
    """The label: fails within this many seconds of the window's end."""
    accuracy_hidden_size: int = 16
    """LTC units for the accuracy table."""
    epochs: int = 30
    """Most training epochs of the LTC for the accuracy table."""
    job_epochs: int | None = None
    """Most epochs of the stream job's LTC in the accuracy table (default: the
    job's own, derived from the windows; it stops by its own patience)."""
    patience: int = 5
    """Stop after this many epochs without a lower validation loss."""
    learning_rate: float = 3e-3
    """Adam's learning rate, cosine-decayed, for the accuracy table."""
    seed: int = 0
    """Seeds the scaling table's plant and models."""
    accuracy_seeds: tuple[int, ...] = (0, 1, 2)
    """One accuracy run per seed, each seeding its plant (with `seed + 1`), its
    models and its data order: the report gives their mean and spread."""


QUICK = dict(
    sensors=(10, 50),
    window_minutes=(1.0,),
    timed_steps=1,
    union_limit=0,
    accuracy_machines=(4, 2, 3),
    accuracy_sensors=10,
    accuracy_window_seconds=120.0,
    simulated_seconds=1800.0,
    label_horizon_seconds=900.0,
    epochs=4,
    job_epochs=4,
    accuracy_seeds=(0,),
)


def frame_model(
    train,
    hidden_size: int,
    key,
    readout_features: str = "both",
    input_size: int | None = None,
    others: tuple = (),
    frame_encoder: bool = False,
) -> tuple[ltc_jax.LTC, ltc_jax.Integrator]:
    """The LTC on the slow clock, and its integrator, from the windows' own
    settings (`derive_defaults`): time constants from a tenth of a frame to the
    window, one fused step per frame, the states at the derived readout times
    read as `readout_features` says. On the union grid the "frame" is the
    median union interval; `input_size` counts the path's channels where it
    adds masks (default `train.num_channels`). `others` (the sets it will also
    be solved on) widen `max_steps` where their windows take more steps. With
    `frame_encoder`, the cell reads each frame through the stream job's
    learned encoder (`ltc_jax.app.settings.make_frame_encoder`)."""
    defaults = ltc_jax.training.derive_defaults([train], adaptive=False)
    input_size = train.num_channels if input_size is None else input_size
    encoder = {}
    if frame_encoder:
        encoder = dict(
            encoder=make_frame_encoder(input_size, hidden_size, key=jr.fold_in(key, 1)),
            encoded_size=hidden_size,
        )
    model = ltc_jax.LTC(
        input_size,
        hidden_size,
        train.num_classes,
        **encoder,
        tau_init=defaults.tau_init,
        tau_min=defaults.tau_min,
        gate_bias_init="chrono",
        readout_times=defaults.readout_times,
        readout_features=readout_features,
        key=key,
    )
    max_steps = ltc_jax.training.fixed_max_steps([train, *others], defaults.dt0)
    integrator = ltc_jax.make_integrator(
        "fused", "checkpoint", dt0=defaults.dt0, max_steps=max_steps
    )
    return model, integrator


def pooled_windows(
    channel_groups, train, *others
) -> tuple[ltc_jax.datasets.SequenceDataset, ...]:
    """Standardised windows pooled by sensor group (`pool_channels`), then
    standardised again with the pooled training windows' statistics."""
    return ltc_jax.datasets.standardize(
        *(ltc_jax.datasets.pool_channels(d, channel_groups) for d in (train, *others))
    )


def union_dataset(streams, windows) -> ltc_jax.datasets.SequenceDataset:
    """The windows' samples on the union of their times: NaN where a sensor has
    no sample; times from each window's start."""
    ts, xs = union_sequences(streams, windows)
    names = windows.dataset.class_names
    return ltc_jax.datasets.SequenceDataset.from_sequences(
        ts, xs, [names[i] for i in windows.dataset.labels], class_names=names
    )


def union_sequences(streams, windows) -> tuple[list, list]:
    """`union_dataset`'s sequences, window by window: each window's union
    times (from its start) and `(times, sensors)` values."""
    ts, xs = [], []
    for m, end in zip(windows.machine, windows.end_time, strict=True):
        start = end - windows.dataset.ts[0, -1]
        times, sensors, values = [], [], []
        for s in range(streams.sensors):
            t, v = streams.samples(m, s)
            inside = (t > start) & (t <= end)
            times.append(t[inside])
            values.append(v[inside])
            sensors.append(np.full(inside.sum(), s))
        t, s, v = (np.concatenate(a) for a in (times, sensors, values))
        # To the millisecond, so that float32 resolves the union's gaps (the
        # sensors' own samples are at least 10 ms apart).
        grid, where = np.unique(np.round(t - start, 3), return_inverse=True)
        x = np.full((grid.size, streams.sensors), np.nan)
        x[where, s] = v
        ts.append(grid)
        xs.append(x)
    return ts, xs


def _step_figures(model, integrator, batch, timed_steps) -> dict:
    """Input bytes, compiled temporary bytes and median seconds of one step."""
    optimizer = optax.adam(1e-3)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    raw = ltc_jax.training.make_train_step(optimizer, integrator)
    memory = ltc_jax.measure.compiled_memory(raw, model, opt_state, batch)
    step = eqx.filter_jit(raw)
    seconds = ltc_jax.measure.time_calls(
        step, model, opt_state, batch, warmup=1, repeats=timed_steps
    )
    arrays = jax.tree.leaves(eqx.filter(batch.path, eqx.is_array))
    return dict(
        input_bytes=int(sum(a.nbytes for a in arrays)),
        temp_bytes=None if memory is None else memory.temp_bytes,
        step_seconds=float(np.median(seconds)),
    )


def scaling_rows(config: Config) -> list[dict]:
    rows = []
    for sensors in config.sensors:
        for minutes in config.window_minutes:
            window = minutes * 60.0
            plant = simulate_plant(
                machines=1,
                sensors=sensors,
                seed=config.seed,
                simulated_seconds=window + 60.0 * (config.batch_size + 1),
            )
            windows = stream_windows(
                plant, window, stride_seconds=60.0, horizon_seconds=0.0
            ).take(np.arange(config.batch_size))
            union_points = int(np.median(window_samples(plant, windows)))
            row = dict(
                sensors=sensors,
                window_minutes=minutes,
                channels=windows.dataset.num_channels,
                union_points=union_points,
                union_input_bytes=config.batch_size
                * union_points
                * (3 * sensors + 1)
                * 4,
                union_steps=union_points,
            )
            (data,) = ltc_jax.datasets.standardize(windows.dataset)
            (pooled,) = pooled_windows(windows.channel_groups, data)
            for layout, dataset in (("frame", data), ("pooled", pooled)):
                model, integrator = frame_model(
                    dataset, config.hidden_size, jr.key(config.seed)
                )
                batch = ltc_jax.make_batch(
                    dataset,
                    dtype=jnp.float32,
                    interpolation="hold",
                    empty_channel_fill=0.0,
                )
                figures = _step_figures(
                    _problems.cast(model, "float32"),
                    integrator,
                    batch,
                    config.timed_steps,
                )
                figures.update(steps=integrator.max_steps)
                row.update({f"{layout}_{k}": v for k, v in figures.items()})
            row.update(pooled_channels=pooled.num_channels)
            if union_points <= config.union_limit:
                union = union_dataset(plant, windows)
                spacing = float(np.median(np.diff(union.ts[0, : union.lengths[0]])))
                union_model = _problems.cast(
                    ltc_jax.LTC(
                        3 * sensors,
                        config.hidden_size,
                        2,
                        tau_init=(spacing / 10, window),
                        gate_bias_init="chrono",
                        key=jr.key(config.seed),
                    ),
                    "float32",
                )
                union_integrator = ltc_jax.make_integrator(
                    "fused",
                    "checkpoint",
                    dt0=spacing,
                    max_steps=ltc_jax.training.fixed_max_steps([union], spacing),
                )
                union_batch = ltc_jax.make_batch(
                    union,
                    dtype=jnp.float32,
                    interpolation="hold",
                    observation_mask=True,
                    time_since_observation=True,
                    empty_channel_fill=0.0,
                )
                figures = _step_figures(
                    union_model, union_integrator, union_batch, config.timed_steps
                )
                row.update(
                    union_steps=union_integrator.max_steps,
                    union_input_bytes=figures["input_bytes"],
                    **{
                        f"union_{k}": figures[k] for k in ("temp_bytes", "step_seconds")
                    },
                )
            rows.append(row)
    return rows


def summary_features(data: ltc_jax.datasets.SequenceDataset) -> np.ndarray:
    """Per window and channel: the last value, and the mean, standard deviation,
    minimum and maximum over the frames (NaN-aware), side by side."""
    xs = data.xs
    observed = ~np.isnan(xs)
    last_index = xs.shape[1] - 1 - np.argmax(observed[:, ::-1], axis=1)
    last = np.take_along_axis(xs, last_index[:, None], axis=1)[:, 0]
    with warnings.catch_warnings():  # all-NaN channels: NaN, as meant
        warnings.simplefilter("ignore", RuntimeWarning)
        parts = [
            last,
            np.nanmean(xs, 1),
            np.nanstd(xs, 1),
            np.nanmin(xs, 1),
            np.nanmax(xs, 1),
        ]
    return np.concatenate(parts, axis=1)


def summary_baselines(seed: int, min_samples_leaf: int = 20) -> dict:
    """The maintenance engineer's first models, unfitted, for
    `summary_features`: `"logistic regression"` (NaNs imputed by the training
    median, standardised) and `"gradient-boosted trees"` (scikit-learn's
    histogram trees, `min_samples_leaf` windows per leaf at least, seeded)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {
        "logistic regression": make_pipeline(
            SimpleImputer(strategy="median"),
            StandardScaler(),
            LogisticRegression(max_iter=2000),
        ),
        "gradient-boosted trees": HistGradientBoostingClassifier(
            min_samples_leaf=min_samples_leaf, random_state=seed
        ),
    }


def accuracy_rows(config: Config, seed: int) -> list[dict]:
    """One accuracy run: a plant of its own, every model trained and scored."""
    from sklearn.metrics import roc_auc_score

    parts, unions, channel_groups, windows_seconds = accuracy_windows(config, seed)
    train, validation, test = ltc_jax.datasets.standardize(*parts)
    rows = []

    def score(name, probability, seconds):
        labels = test.labels
        rows.append(
            dict(
                model=name,
                seed=seed,
                auroc=float(roc_auc_score(labels, probability)),
                accuracy=float(np.mean((probability > 0.5) == labels)),
                train_seconds=seconds,
                windows_seconds=windows_seconds,
                train_windows=len(train),
                test_windows=len(test),
                positive_share=float(labels.mean()),
            )
        )

    train_features = np.concatenate(
        [summary_features(train), summary_features(validation)]
    )
    train_labels = np.concatenate([train.labels, validation.labels])
    test_features = summary_features(test)
    for name, estimator in summary_baselines(seed).items():
        start = time.perf_counter()
        estimator.fit(train_features, train_labels)
        seconds = time.perf_counter() - start
        score(name, estimator.predict_proba(test_features)[:, 1], seconds)

    def train_ltc(
        name, train, validation, test, input_size=None, frame_encoder=False, **options
    ):
        model, integrator = frame_model(
            train,
            config.accuracy_hidden_size,
            jr.key(seed),
            "pooled",
            input_size,
            others=(validation, test),
            frame_encoder=frame_encoder,
        )
        model = _problems.cast(model, "float32")
        options = dict(
            dtype=jnp.float32, interpolation="hold", empty_channel_fill=0.0, **options
        )
        steps = config.epochs * -(-len(train) // config.batch_size)
        schedule = optax.cosine_decay_schedule(config.learning_rate, steps)
        start = time.perf_counter()
        model, _ = ltc_jax.fit(
            model,
            train,
            integrator=integrator,
            optimizer=optax.adam(schedule),
            epochs=config.epochs,
            batch_size=config.batch_size,
            seed=seed,
            path=ltc_jax.make_input_path(train, **options),
            validation=validation,
            validation_path=ltc_jax.make_input_path(validation, **options),
            patience=config.patience,
            progress=ltc_jax.training.NoFitProgress(),
        )
        seconds = time.perf_counter() - start
        path = ltc_jax.make_input_path(test, **options)
        logits = model(path, integrator=integrator)
        score(name, np.asarray(jax.nn.softmax(logits, axis=-1))[:, 1], seconds)

    def train_job(name, train, validation, test, **options):
        # What `ltc-jax stream` trains on these windows: its derived model and
        # schedule (its frame encoder included), the same validation machines
        # and its patience; `options` as its command-line options.
        job, model, _, seconds = _problems.fit_main_job(
            train,
            (test,),
            validation,
            ltc_jax.app.StreamConfig(**options),
            seed=seed,
            epochs=config.job_epochs,
        )
        path = ltc_jax.make_input_path(test, **job.path_options)
        logits = model(path, integrator=job.final_integrator)
        score(name, np.asarray(jax.nn.softmax(logits, axis=-1))[:, 1], seconds)

    pooled = pooled_windows(channel_groups, train, validation, test)
    train_ltc("LTC, slow clock", train, validation, test)
    train_ltc("LTC, slow clock, sensor groups pooled", *pooled)
    train_ltc(
        "LTC, slow clock, sensor groups pooled, frame encoder",
        *pooled,
        frame_encoder=True,
    )
    train_job("LTC, stream job, per sensor", train, validation, test)
    # As `ltc-jax stream --sensor-pooling groups` pools them: standardised,
    # pooled and standardised again (`ltc_jax.app.streams.pool_windows`).
    train_job("LTC, stream job, sensor groups pooled", *pooled)
    # As `--frame-encoder mlp`: the cell reads a learned encoding of them.
    train_job(
        "LTC, stream job, sensor groups pooled, frame encoder",
        *pooled,
        frame_encoder="mlp",
    )
    # The union grid where no window holds more than `union_limit` samples, in
    # the scaling table's layout: held values, observation masks and times
    # since observation, one fused step per median union interval.
    if unions is not None:
        train_ltc(
            "LTC, union grid",
            *ltc_jax.datasets.standardize(*unions),
            input_size=3 * config.accuracy_sensors,
            observation_mask=True,
            time_since_observation=True,
        )
    return rows


def accuracy_windows(config: Config, seed: int) -> tuple:
    """The accuracy run's plant (seeded by `seed + 1`) cut into windows: the
    training, validation and held-out machines' datasets, their union-grid
    datasets where no window holds more than `union_limit` samples (else
    `None`), the channels' sensor groups, and the seconds spent cutting.

    The plant is simulated `accuracy_chunk_machines` machines at a time, as
    `ltc-jax stream` simulates it (`ltc_jax.app.streams.simulated_chunks`),
    and each chunk's rows are dropped once cut, so that memory follows the
    windows, not the samples: at 200 sensors a machine's last hour is 9.7
    million rows (233 MB)."""
    trained, validating, held_out = config.accuracy_machines
    first = [0, trained, trained + validating, trained + validating + held_out]
    parts, unions, seconds, most = [], [], 0.0, 0
    for i in range(3):
        datasets, union_ts, union_xs = [], [], []
        chunks = simulated_chunks(
            range(first[i], first[i + 1]),
            config.accuracy_sensors,
            seed=seed + 1,
            simulated_seconds=config.simulated_seconds,
            at_once=config.accuracy_chunk_machines,
        )
        for _, plant in chunks:
            began = time.perf_counter()
            windows = stream_windows(
                plant,
                config.accuracy_window_seconds,
                stride_seconds=config.accuracy_stride_seconds,
                horizon_seconds=config.label_horizon_seconds,
            )
            seconds += time.perf_counter() - began
            datasets.append(windows.dataset)
            channel_groups = windows.channel_groups
            most = max(most, int(window_samples(plant, windows).max()))
            if most <= config.union_limit:  # else never trained: not built
                ts, xs = union_sequences(plant, windows)
                union_ts += ts
                union_xs += xs
            del plant, windows  # the chunk's rows
        part = ltc_jax.datasets.concatenate(datasets)
        parts.append(part)
        if most <= config.union_limit:
            names = part.class_names
            unions.append(
                ltc_jax.datasets.SequenceDataset.from_sequences(
                    union_ts,
                    union_xs,
                    [names[k] for k in part.labels],
                    class_names=names,
                )
            )
    fits = most <= config.union_limit
    return parts, unions if fits else None, channel_groups, seconds


def window_samples(plant, windows) -> np.ndarray:
    """`int[windows]`: the samples each of `windows` holds over all its
    machine's sensors, in `(end - length, end]` (the window's length in
    seconds): an upper bound on the length of its union grid (samples at one
    time merge)."""
    length = windows.dataset.ts[0, -1]
    counts = np.zeros(len(windows), np.int64)
    for machine in np.unique(windows.machine):
        times = np.sort(plant.time[plant.machine == machine])
        mine = windows.machine == machine
        ends = windows.end_time[mine]
        counts[mine] = np.searchsorted(times, ends, "right") - np.searchsorted(
            times, ends - length, "right"
        )
    return counts


def main(config: Config) -> dict:
    """Measure both tables; return (and write) the rows."""
    config, run = _run.start_run(config, "streams", QUICK)
    metrics = dict(scaling=scaling_rows(config))
    if min(config.accuracy_machines) > 0:
        metrics["accuracy"] = [
            row for seed in config.accuracy_seeds for row in accuracy_rows(config, seed)
        ]
    return run.finish(metrics)


if __name__ == "__main__":
    main(tyro.cli(Config))
