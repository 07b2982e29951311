"""The problems the experiments measure on: ECG forecasting windows of the bundled
MIT-BIH record 208, and JapaneseVowels classification; and how they train."""

import dataclasses
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import ltc_jax
from experiments import _run


SAMPLE_RATE_HZ = ltc_jax.datasets.MITBIH_208_SAMPLE_RATE_HZ


def cast(tree, dtype: str):
    """Every floating-point array of `tree` cast to `dtype`."""

    def convert(x):
        return x.astype(dtype) if eqx.is_inexact_array(x) else x

    return jax.tree.map(convert, tree)


def ecg_problem(
    window: int,
    *,
    batch_size: int,
    hidden_size: int,
    horizon: int,
    seed: int,
    dtype: str = "float32",
    interpolation: str = "linear",
    **model_options,
) -> tuple[ltc_jax.LTC, ltc_jax.Batch]:
    """The LTC of `seed` and a batch of `batch_size` ECG windows of `window`
    samples (`ltc_jax.datasets.mitbih_208_windows`: time in seconds from each
    window's start, on one grid shared by the windows), each labelled with the
    signal `horizon` samples after its end (millivolts). `model_options` go to
    `ltc_jax.LTC` (`cell`, `wiring`, `tau_init`, ...).

    Built in float32 on the host whatever `dtype` is, then cast and placed on the
    default device, so that a float64 reference sees exactly the same parameters
    and inputs, and no temporary of building the batch sets the device's peak."""
    data = ltc_jax.datasets.mitbih_208_windows(
        window, horizon=horizon, count=batch_size
    )
    with jax.enable_x64(False), jax.default_device(jax.devices("cpu")[0]):
        model = ltc_jax.LTC(1, hidden_size, 1, key=jr.PRNGKey(seed), **model_options)
        batch = ltc_jax.make_batch(data, dtype=jnp.float32, interpolation=interpolation)
    model, batch = cast((model, batch), dtype)
    return jax.device_put((model, batch), jax.devices()[0])


@dataclasses.dataclass(frozen=True)
class RandomClassification(_run.RunConfig):
    """The run options and the problem of the original write-up's measurements
    (the overhead and PyTorch comparisons): an LTC classifying random sequences
    observed on [0, 1], at the write-up's sizes by default."""

    seed: int = 0
    """Seeds the model's initialisation, the batch, and any other draw of the run."""
    batch_size: int = 32
    """Sequences per training step (standard-normal values, uniform labels)."""
    input_size: int = 64
    """Input channels."""
    hidden_size: int = 128
    """LTC units."""
    output_size: int = 10
    """Classes of the random labels (cross-entropy loss)."""
    knots: int = 1000
    """Input observations per sequence, equally spaced on [0, 1]."""


def random_classification(
    config: RandomClassification,
) -> tuple[ltc_jax.LTC, np.ndarray, np.ndarray, np.ndarray]:
    """The LTC of `config.seed` (JAX's default float) and one float32 batch as
    NumPy arrays: knot times `(knots,)`, standard-normal values `(batch_size,
    knots, input_size)` and uniform integer labels `(batch_size,)`."""
    model_key, data_key = jr.split(jr.PRNGKey(config.seed))
    model = ltc_jax.LTC(
        config.input_size, config.hidden_size, config.output_size, key=model_key
    )
    rng = np.random.default_rng(np.asarray(jr.key_data(data_key)))
    ts = np.linspace(0.0, 1.0, config.knots, dtype=np.float32)
    shape = (config.batch_size, config.knots, config.input_size)
    xs = rng.standard_normal(shape, dtype=np.float32)
    labels = rng.integers(0, config.output_size, config.batch_size)
    return model, ts, xs, labels


@dataclasses.dataclass(frozen=True)
class VowelsTraining(_run.RunConfig):
    """The run options and the JapaneseVowels training budget shared by the
    solver, tolerance and divergence studies: the same for every setting they
    compare."""

    seeds: tuple[int, ...] = (0, 1, 2)
    """One training run per seed (initialisation and data order)."""
    epochs: int = 15
    """The training budget, the same for every setting."""
    hidden_size: int = 32
    batch_size: int = 32
    learning_rate: float = 1e-2
    """Peak learning rate (Adam, cosine decay)."""
    train_size: int | None = None
    """Training utterances (default: all 270)."""


def japanese_vowels(train_size: int | None = None, seed: int = 0):
    """Standardised `(train, test)` JapaneseVowels, optionally a training subset."""
    train, test = ltc_jax.datasets.standardize(*ltc_jax.datasets.load_japanese_vowels())
    if train_size is not None:
        order = np.random.default_rng(seed).permutation(len(train))
        train = train.take(order[:train_size])
    return train, test


def vowels_model(hidden_size: int, seed: int, tau: float | None = None) -> ltc_jax.LTC:
    """The float32 JapaneseVowels LTC of a seed (whatever JAX's default float);
    `tau` draws the initial time constants from `[tau / 2, 2 tau]` frames instead
    of `[0.1, 10]`."""
    tau_init = (0.1, 10.0) if tau is None else (tau / 2, 2 * tau)
    with jax.enable_x64(False):
        return ltc_jax.LTC(12, hidden_size, 9, tau_init=tau_init, key=jr.PRNGKey(seed))


def float32_paths(*datasets) -> list[ltc_jax.InputPath]:
    """Each dataset's input path in float32, the experiments' precision, whatever
    JAX's default float (the tests run in float64)."""
    return [ltc_jax.make_input_path(data, dtype=np.float32) for data in datasets]


def train_skipping_failures(
    model: ltc_jax.LTC, train, integrator, optimizer, *, epochs, batch_size, seed, path
):
    """`ltc_jax.fit` as the experiments train: a failed update (a solve past
    `max_steps`, a non-finite loss or gradient) is skipped and counted; five in a
    row end the run with `ltc_jax.TrainingFailedError`, which the experiments
    record as a result."""
    return ltc_jax.fit(
        model,
        train,
        integrator=integrator,
        optimizer=optimizer,
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        path=path,
        on_failure="skip",
        max_consecutive_failures=5,
        progress=ltc_jax.NoFitProgress(),
    )


def measure_or_failure(model, batch, integrator, reference=None, **options) -> dict:
    """`ltc_jax.measure(...).figures()` with `error=None`, or, when the solve
    fails (`max_steps` reached, a step below `dtmin`), `{"error": reason}`: a
    failure is a result, recorded like any other."""
    try:
        measurement = ltc_jax.measure(
            model, batch, integrator, reference_gradient=reference, **options
        )
    except (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError) as error:
        return dict(error=ltc_jax.failure_reason(error))
    return dict(error=None, **measurement.figures())


def save_reference_gradient(model, batch, integrator, out_file: str) -> dict:
    """The gradient of `model`'s training loss on `batch` under `integrator`
    (typically float64 exact backpropagation at tight tolerance), saved flat to
    `out_file` (`.npy`). **Returns:** `{"norm", "seconds"}`. **Raises:**
    `FloatingPointError` if it is not finite."""
    start = time.perf_counter()
    flat = ltc_jax.flatten_gradient(ltc_jax.loss_gradient(model, batch, integrator))
    seconds = time.perf_counter() - start
    if not np.all(np.isfinite(flat)):
        raise FloatingPointError(
            f"The reference gradient for {out_file} is not finite."
        )
    np.save(out_file, flat)
    return dict(norm=float(np.linalg.norm(flat)), seconds=seconds)


def train_seeds(config: VowelsTraining, integrator, optimizer, data, label: str):
    """One JapaneseVowels run per seed of `config`: train the LTC of the seed
    (`train_skipping_failures`), then test it with `integrator` (the final phase
    of a tolerance schedule). **Returns:** one record per seed: `seed`,
    `accuracy` (`None` for a run that failed), `history`, `error`,
    `train_seconds` (training) and `seconds` (training and test)."""
    train, test = data
    final = getattr(integrator, "final", integrator)
    train_path, test_path = float32_paths(train, test)
    runs = []
    for seed in config.seeds:
        start = time.perf_counter()
        record = dict(seed=seed, accuracy=None, history=None, error=None)
        try:
            model, record["history"] = train_skipping_failures(
                vowels_model(config.hidden_size, seed),
                train,
                integrator,
                optimizer,
                epochs=config.epochs,
                batch_size=config.batch_size,
                seed=seed,
                path=train_path,
            )
            record["train_seconds"] = time.perf_counter() - start
            result = ltc_jax.evaluate(model, test, integrator=final, path=test_path)
            record["accuracy"] = result["accuracy"]
        except ltc_jax.TrainingFailedError as error:  # a failure is a result
            record["error"] = str(error)
            print(f"  {label}, seed {seed}: {str(error)[:160]}")
        record["seconds"] = time.perf_counter() - start
        runs.append(record)
    return runs
