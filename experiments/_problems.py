"""The problems the experiments measure on, and the steps they share: ECG
forecasting windows of the bundled MIT-BIH record 208, JapaneseVowels
classification and random classification; float64 reference gradients, training
steps, main-job runs and training runs over seeds."""

import dataclasses
import importlib
import math
import statistics
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import ltc_jax
from experiments import _report, _run


SAMPLE_RATE_HZ = ltc_jax.datasets.MITBIH_208_SAMPLE_RATE_HZ
STEP_SLACK = 1.0 + 1e-6
"""A fixed step a hair longer than one sample: a window of n sample intervals
takes ceil(duration / dt0) = n steps, float32 rounding of the sample times
(absolute times near 300 s, hundreds of float32 epsilons) adding none."""


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
    `ltc_jax.LTC` (`cell`, `wiring`, `matmul_dtype`, ...).

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


def ecg_integrator(
    solver: str, mode: str, steps: int, rate_hz: float = SAMPLE_RATE_HZ, **options
) -> ltc_jax.Integrator:
    """Fixed steps of one sample (`STEP_SLACK / rate_hz` seconds) over `steps`
    sample intervals; `max_steps` is exactly the steps taken. `options` go to
    `ltc_jax.make_integrator` (`checkpoints`, `windows`, ...)."""
    dt0 = STEP_SLACK / rate_hz
    return ltc_jax.make_integrator(solver, mode, dt0=dt0, max_steps=steps, **options)


def train_step(
    model: eqx.Module,
    integrator: ltc_jax.Integrator,
    horizon: float | None = None,
    *,
    learning_rate: float = 1e-3,
    total_steps: int = 1,
):
    """A training step of `model` under `integrator` with Adam
    (`ltc_jax.training.make_train_step`, not compiled) and the optimiser's state;
    with `horizon` (seconds), the windowed adjoint's default windows for it, as
    `ltc_jax.fit` derives them.

    **Returns:** `(integrator, step, opt_state)`, the integrator with its windows."""
    if horizon is not None:
        integrator = ltc_jax.training.resolve_windows(
            integrator, model.cell, horizon, dtype=jnp.float32
        )
    optimizer = ltc_jax.training.make_optimizer(learning_rate, total_steps)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    step = ltc_jax.training.make_train_step(optimizer, integrator)
    return integrator, step, opt_state


def float64_gradient(build: str, **kwargs) -> np.ndarray:
    """The reference the experiments measure gradients against: the flat gradient
    of the training loss of the problem `build(**kwargs)` returns, `(model, batch,
    integrator)` (`build` a `"module:function"`, typically exact backpropagation at
    a tight tolerance), built and differentiated in a fresh float64 process.

    **Raises:** `FloatingPointError` if it is not finite."""
    flat = np.asarray(
        ltc_jax.measure.call_in_subprocess(
            "experiments._problems:_gradient_of",
            dict(build=build, kwargs=kwargs),
            env={"JAX_ENABLE_X64": "1"},
        )
    )
    if not np.all(np.isfinite(flat)):
        raise FloatingPointError(f"The reference gradient of {build} is not finite.")
    return flat


def _gradient_of(build: str, kwargs: dict) -> list[float]:
    module, _, function = build.partition(":")
    problem = getattr(importlib.import_module(module), function)(**kwargs)
    gradient = ltc_jax.measure.loss_gradient(*problem)
    return ltc_jax.measure.flatten_gradient(gradient).tolist()


def measure_or_failure(model, batch, integrator, reference=None, **options) -> dict:
    """`ltc_jax.measure.measure(...).figures()` with `error=None`, or, when the
    solve fails (`max_steps` reached, a step below `dtmin`), `{"error": reason}`:
    a failure is a result, recorded like any other."""
    try:
        measurement = ltc_jax.measure.measure(
            model, batch, integrator, reference_gradient=reference, **options
        )
    except (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError) as error:
        return dict(error=ltc_jax.training.failure_reason(error))
    return dict(error=None, **measurement.figures())


def main_job(options: dict) -> dict:
    """One run of the main job (`ltc_jax.app.train_and_evaluate` with `options`
    and no progress bar; call it in its own process): its test accuracy (`nan`
    for regression) and loss (cross-entropy, or the mean squared error in the
    targets' units squared), training time, epochs, solver steps per sequence,
    the options it derived, the steps a failure policy skipped, and (with
    `memory_table=True` in `options`, else None) the memory of a training step
    per gradient mode."""
    from ltc_jax import app

    metrics = app.train_and_evaluate(app.TrainConfig(progress=False, **options))
    kept = (
        "test_accuracy test_loss train_seconds best_epoch steps_per_sequence "
        "learned solver"
    )
    return dict(
        {key: metrics[key] for key in kept.split()},
        epochs_run=len(metrics["history"]),
        skipped_steps=sum(h["failures"] for h in metrics["history"]),
        epoch_seconds=statistics.median(h["seconds"] for h in metrics["history"]),
        derived={key: value["value"] for key, value in metrics["derived"].items()},
        memory=metrics["memory_bytes_by_mode"],
    )


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


def vowels_batch(train, batch_size: int) -> ltc_jax.Batch:
    """The first float32 training batch (unshuffled) of `batch_size` utterances."""
    (path,) = float32_paths(train)
    return next(ltc_jax.batches(train, batch_size, path=path))


def vowels_reference(config: dict, tau: float | None = None, max_steps: int = 65_536):
    """The reference problem of the JapaneseVowels studies (for
    `float64_gradient`): the LTC of `config`'s first seed at initialisation, in
    float64, on the first training batch, by exact backpropagation through an
    adaptive solve at rtol = atol = `config["reference_rtol"]` (Tsit5; Kvaerno5
    for time constants drawn around `tau`, stiff)."""
    train, _ = japanese_vowels(config["train_size"])
    model = vowels_model(config["hidden_size"], config["seeds"][0], tau)
    batch = next(ltc_jax.batches(train, config["batch_size"]))
    integrator = ltc_jax.make_integrator(
        "tsit5" if tau is None else "kvaerno5",
        "checkpoint",
        rtol=config["reference_rtol"],
        atol=config["reference_rtol"],
        max_steps=max_steps,
    )
    return cast(model, "float64"), batch, integrator


def vowels_optimizer(config: VowelsTraining, train):
    """Adam at `config.learning_rate` with cosine decay over the training budget
    (float32 whatever JAX's default float)."""
    steps = config.epochs * math.ceil(len(train) / config.batch_size)
    with jax.enable_x64(False):
        return ltc_jax.training.make_optimizer(config.learning_rate, steps)


def fit_vowels(model, config: VowelsTraining, train, integrator, seed, path, **options):
    """`ltc_jax.fit` as the JapaneseVowels studies train: `config`'s budget, the
    float32 `path` of `train`, no progress bar; `options` go to `ltc_jax.fit`.
    **Returns:** `(model, history)`."""
    return ltc_jax.fit(
        model,
        train,
        integrator=integrator,
        optimizer=vowels_optimizer(config, train),
        epochs=config.epochs,
        batch_size=config.batch_size,
        seed=seed,
        path=path,
        progress=ltc_jax.training.NoFitProgress(),
        **options,
    )


def train_seeds(config: VowelsTraining, integrator, data, label: str) -> dict:
    """One JapaneseVowels run per seed of `config`: train the LTC of the seed with
    `ltc_jax.fit` as the experiments train (a failed update, a solve past
    `max_steps` or a non-finite loss or gradient, is skipped and counted; five in
    a row end the run with `ltc_jax.TrainingFailedError`, recorded as a result),
    then test it with `integrator` (the final phase of a tolerance schedule).

    **Returns:** `accuracies` (`None` for a failed run) with their mean and sample
    standard deviation, `failures` (the failed runs' errors), `failed_runs`,
    `failed_updates`, `train_seconds` (training and test, all runs),
    `train_seconds_mean` (training, the runs that finished) and
    `steps_per_epoch` (solver steps per batch of each epoch, their mean)."""
    train, test = data
    final = getattr(integrator, "final", integrator)
    train_path, test_path = float32_paths(train, test)
    runs = []
    for seed in config.seeds:
        start = time.perf_counter()
        run = dict(seed=seed, accuracy=None, history=None, error=None)
        try:
            model, run["history"] = fit_vowels(
                vowels_model(config.hidden_size, seed),
                config,
                train,
                integrator,
                seed,
                train_path,
                on_failure=ltc_jax.training.SkipFailures(5),
            )
            run["train_seconds"] = time.perf_counter() - start
            result = ltc_jax.evaluate(model, test, integrator=final, path=test_path)
            run["accuracy"] = result["accuracy"]
        except ltc_jax.TrainingFailedError as error:  # a failure is a result
            run["error"] = str(error)
            print(f"  {label}, seed {seed}: {str(error)[:160]}")
        run["seconds"] = time.perf_counter() - start
        runs.append(run)
    finished = [run for run in runs if run["error"] is None]
    accuracies = [run["accuracy"] for run in runs]
    mean, std, _ = _report.mean_std(accuracies)
    steps = [[h["num_steps"] for h in run["history"]] for run in finished]
    return dict(
        accuracies=accuracies,
        accuracy_mean=mean,
        accuracy_std=std,
        failures=[run["error"] for run in runs if run["error"] is not None],
        failed_runs=len(runs) - len(finished),
        failed_updates=sum(h["failures"] for run in finished for h in run["history"]),
        train_seconds=sum(run["seconds"] for run in runs),
        train_seconds_mean=statistics.mean(r["train_seconds"] for r in finished)
        if finished
        else None,
        steps_per_epoch=np.mean(steps, axis=0).tolist() if steps else None,
    )


def fit_main_job(train, others=(), validation=None, config=None, **options):
    """The main job's model and schedule for `train`, as the command line builds
    them (`ltc_jax.app.prepare` on `config`, default `ltc_jax.app.TrainConfig`,
    with `options` as its fields; those given as `None` keep its default),
    trained with `fit`; with `validation`, keeping the epoch of lowest
    validation loss within the config's `patience`, as the job does. The data
    are used as given (standardise them first, as the job does). `others` (and
    `validation`) only widen `max_steps`.

    **Returns:** `(job, model, history, seconds)`: the `ltc_jax.app.JobSetup`,
    the trained model, `fit`'s history and the seconds of training (the
    folds' included, with `folds`)."""
    from ltc_jax.app import TrainConfig, prepare

    given = {name: value for name, value in options.items() if value is not None}
    config = dataclasses.replace(config or TrainConfig(), **given)
    held = () if validation is None else (validation,)
    folds_start = time.perf_counter()  # with folds, `prepare` trains too
    job = prepare(config, train, others=(*held, *others))
    start = folds_start if config.folds else time.perf_counter()
    model, history = ltc_jax.fit(
        job.model,
        train,
        integrator=job.integrator,
        optimizer=job.optimizer,
        epochs=job.epochs,
        batch_size=job.batch_size,
        seed=job.seed,
        path=job.path,
        validation=validation,
        validation_path=None
        if validation is None
        else ltc_jax.make_input_path(validation, **job.path_options),
        patience=None if validation is None else job.config.patience,
        progress=ltc_jax.training.NoFitProgress(),
    )
    return job, model, history, time.perf_counter() - start


def train_main_job(train, test, *, with_outputs=False, **options) -> dict:
    """The main job's model and schedule for `train` (`fit_main_job`, after
    standardising both sets' values with `train`'s statistics, as the main job
    does), trained and evaluated on `test`. `options` are
    `ltc_jax.app.TrainConfig` fields (`seed`, `interpolation`, ...); those
    given as `None` keep the job's own default.

    **Returns:** `loss` (cross-entropy, or mean squared error in the targets'
    units squared), `accuracy` (`nan` for regression), `train_accuracy` of the
    last epoch (`None` for regression), `epochs`, `seconds` of training,
    `points` (mean observations per training sequence) and `channels` (the
    path's, masks included); with `with_outputs`, also `outputs`, the trained
    model's outputs on `test`, `(len(test), output_size)` NumPy."""
    train, test = ltc_jax.datasets.standardize(train, test)
    job, model, history, seconds = fit_main_job(train, (test,), **options)
    path = ltc_jax.make_input_path(test, **job.path_options)
    result = ltc_jax.evaluate(model, test, integrator=job.final_integrator, path=path)
    extra = {}
    if with_outputs:
        trajectory = model.solve(path, integrator=job.final_integrator)
        extra["outputs"] = np.asarray(model.outputs(trajectory.ys))
    return dict(
        loss=float(result["loss"]),
        accuracy=float(result["accuracy"]),
        train_accuracy=history[-1].get("accuracy"),
        epochs=job.epochs,
        seconds=seconds,
        points=float(np.mean(train.lengths)),
        channels=int(job.path.input_size),
        **extra,
    )
