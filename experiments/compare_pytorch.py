"""ltc_jax side by side with PyTorch: torchdiffeq's `odeint` / `odeint_adjoint`, and
the original authors' LTC package `ncps`.

The same simplified LTC (Hasani et al. 2021, Eq. 1, in the original write-up's form)
is built in ltc_jax and in PyTorch (`experiments/torch_ltc.py`), the PyTorch copy
starting from the ltc_jax weights, with linear input interpolation in both. For
every configuration, in a process of its own pinned to the same CPUs:

- the median wall time of a training step (forward, backward, Adam update) after
  warm-up (for ltc_jax, the warm-up step includes compilation);
- the step's peak memory: the rise of the process's resident high-water mark
  during one step over its resident size just before it (the same method, the
  same functions, for both stacks);
- the vector-field evaluations of one gradient computation, counted at run time
  in both stacks and split into forward and backward;
- the gradients at the initial weights, compared between the two libraries
  afterwards.

Each configuration runs in a fresh process (`ltc_jax.measure.call_in_subprocess`),
started on the run's CPUs only (as `taskset` would start it), so that PyTorch's
and XLA's thread pools are sized from the same CPUs.

Run `python -m experiments.compare_pytorch` (default sizes, ~20 minutes on a
2-core CPU) or `python -m experiments.compare_pytorch --quick`. Needs
`pip install -e ".[torch,experiments]"`. Writes `results/compare_pytorch/<run>/`:
`config.json`, the inputs, each configuration's gradients, `metrics.json`, and
`report.txt` with the table (`experiments._report`).
"""

import contextlib
import dataclasses
import importlib.metadata
import importlib.util
import os
import statistics
import time
from collections.abc import Callable
from typing import Any, ClassVar, Literal, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import tyro
from jaxtyping import PRNGKeyArray

import ltc_jax
from experiments import _problems, _run


EXPERIMENT = "compare_pytorch"

Stack = Literal["ltc_jax", "torchdiffeq", "ncps"]

# Gradient modes compared with each other: ltc_jax's mode -> torchdiffeq's.
PAIRS = {"full": "odeint", "checkpoint": "odeint", "backsolve": "odeint_adjoint"}
LTC_JAX_MODES = tuple(PAIRS)
TORCHDIFFEQ_MODES = ("odeint", "odeint_adjoint")

# The stated target, at RK4 with N = 1000 steps: ltc_jax's training step this many
# times faster than torchdiffeq's (paired modes: backsolve against odeint_adjoint,
# full against odeint).
TARGET_STEPS = 1000
TARGET_SPEEDUP = {"backsolve": 8.0, "full": 3.0}


@dataclasses.dataclass(frozen=True)
class Config(_problems.RandomClassification):
    """ltc_jax against PyTorch + torchdiffeq and ncps: time, memory, function
    evaluations and gradient agreement of one training step, per configuration.
    The weights are ltc_jax's initialisation, copied into PyTorch; `--seed` also
    seeds ncps's initialisation.

    Defaults are the sizes of the original write-up and finish in about 20 minutes
    on a 2-core CPU.

    `--quick`: a smoke run in seconds (what the tests run): 4 units, 6 knots,
    4 RK4 steps, one timed step per configuration, no dopri5.
    """

    rk4_steps: tuple[int, ...] = (100, 1000, 10000)
    """Fixed-step RK4 runs: steps over [0, 1]."""
    dopri5: tuple[Literal["knots", "free"], ...] = ("knots", "free")
    """Dopri5 runs. "knots": both stacks stop at every input knot (ltc_jax's
    behaviour with a linear input; torchdiffeq's `jump_t`). "free": torchdiffeq's
    default (steps may cross knots) against ltc_jax with a cubic input (no knots to
    stop at): comparable step counts, different inputs, so no gradient check."""
    rtol: float = 1e-3
    atol: float = 1e-4
    knots_max_steps: int = 2048
    """ltc_jax's max_steps for dopri5 "knots" (`full` stores this many states)."""
    free_max_steps: int = 256
    """ltc_jax's max_steps for dopri5 "free"."""
    sequence_lengths: tuple[int, ...] = (10, 30, 100)
    """Input steps of the ncps-size rows (ncps needs ~66 MiB per input step at the
    default sizes, so 1000 knots are out of reach)."""
    ode_unfolds: int = 6
    """Fused steps per input step of ncps's LTC (its default)."""
    learning_rate: float = 1e-3
    """Adam's learning rate (plain Adam in both stacks)."""
    threads: int = 1
    """CPUs each measuring process is pinned to; PyTorch and XLA use that many."""
    warmup: int = 1
    """Untimed steps first (ltc_jax compiles in the first)."""
    repeats: int = 5
    """Timed steps at most."""
    min_repeats: int = 3
    """Timed steps at least."""
    time_budget_seconds: float = 20.0
    """Stop timing once this has passed and `min_repeats` steps are done."""
    worker_timeout_seconds: float = 1200.0
    """A configuration's process is stopped (and reported failed) after this."""


QUICK = dict(
    batch_size=2,
    input_size=3,
    hidden_size=4,
    output_size=2,
    knots=6,
    rk4_steps=(4,),
    dopri5=(),
    sequence_lengths=(3, 4),
    repeats=1,
    min_repeats=1,
    time_budget_seconds=0.0,
)
"""The `--quick` preset."""


# --- what is measured ----------------------------------------------------------


class Scheme(NamedTuple):
    """How one group of rows solves the ODE.

    - `solver`: `"rk4"` (fixed steps; Kutta's 3/8 rule in both stacks) or
        `"dopri5"` (adaptive).
    - `steps`: RK4 steps over the input's span.
    - `knots`: dopri5 only: True when both stacks stop at every input knot.
    - `max_steps`: ltc_jax's `max_steps`.
    - `rtol`, `atol`: dopri5's tolerances.
    """

    solver: Literal["rk4", "dopri5"]
    steps: int | None = None
    knots: bool = True
    max_steps: int | None = None
    rtol: float | None = None
    atol: float | None = None

    @property
    def name(self) -> str:
        if self.solver == "rk4":
            return f"rk4 N={self.steps}"
        return "dopri5 knots" if self.knots else "dopri5 free"

    @property
    def interpolation(self) -> Literal["linear", "cubic"]:
        """ltc_jax's input interpolation (PyTorch's is always linear)."""
        return "linear" if self.knots else "cubic"


class SequenceModel(NamedTuple):
    """A model measured at ncps's sizes: `length` inputs, one per unit of time.

    - `stack`: `"ncps"` (measured with [`NCPSClassifier`][]) or `"ltc_jax"`.
    - `description`: for the table and the JSON.
    - `build`: ltc_jax only: `build(config, length, key) -> (model, integrator)`,
        the model an `ltc_jax.LTC` (or anything with its call signature and
        `.cell`).
    """

    stack: Stack
    description: str
    build: Callable[..., tuple[eqx.Module, ltc_jax.Integrator]] | None = None


def _simplified_ltc_euler(config: Config, length: int, key: PRNGKeyArray):
    """The simplified LTC with one explicit Euler step per fused ncps unfold (one
    vector-field evaluation each, as ncps's semi-implicit step)."""
    model = ltc_jax.LTC(
        config.input_size, config.hidden_size, config.output_size, key=key
    )
    steps = config.ode_unfolds * (length - 1)
    integrator = ltc_jax.make_integrator(
        "euler", "full", dt0=1.0 / config.ode_unfolds, max_steps=max(steps, 1)
    )
    return model, integrator


def _biophysical_fused(config: Config, length: int, key: PRNGKeyArray):
    """ltc_jax's biophysical cell (fully connected wiring, as ncps's default here)
    with the same fused step: one solver step per input step, `ode_unfolds`
    sub-steps each, every step stored (`full`), as autograd does."""
    model = ltc_jax.LTC(
        config.input_size,
        config.hidden_size,
        config.output_size,
        cell="biophysical",
        wiring="fc",
        key=key,
    )
    integrator = ltc_jax.make_integrator(
        "fused",
        "full",
        dt0=1.0,
        ode_unfolds=config.ode_unfolds,
        max_steps=max(length - 1, 1),
    )
    return model, integrator


SEQUENCE_MODELS: dict[str, SequenceModel] = {
    "ncps": SequenceModel("ncps", "ncps LTC (biophysical, fused step), autograd"),
    "ltc_jax-biophysical": SequenceModel(
        "ltc_jax",
        "ltc_jax biophysical LTC, same fused step, full",
        _biophysical_fused,
    ),
    "ltc_jax-simplified": SequenceModel(
        "ltc_jax",
        "ltc_jax simplified LTC, Euler at the same step, full",
        _simplified_ltc_euler,
    ),
}
"""The rows at ncps's sizes. A row for another ltc_jax model is one more entry: a
`SequenceModel("ltc_jax", description, build)` whose `build(config, length, key)`
returns the model and its integrator; it is then measured exactly as the others."""


def plan(config: Config) -> list[dict]:
    """Every configuration of a run, in order, as the first fields of its row:
    `stack`, `mode`, `scheme` (a [`Scheme`][] as a dict, with its `name`; `None`
    at ncps's sizes), `sequence_model` and `length` (at ncps's sizes), `group`
    (the table's) and `name` (its folder's)."""
    schemes = [Scheme("rk4", steps=n, max_steps=n) for n in config.rk4_steps]
    for kind in config.dopri5:
        knots = kind == "knots"
        max_steps = config.knots_max_steps if knots else config.free_max_steps
        schemes.append(
            Scheme(
                "dopri5",
                knots=knots,
                max_steps=max_steps,
                rtol=config.rtol,
                atol=config.atol,
            )
        )
    runs = [
        (stack, mode, scheme, None, None)
        for scheme in schemes
        for stack, modes in (("torchdiffeq", TORCHDIFFEQ_MODES), ("ltc_jax", PAIRS))
        for mode in modes
    ]
    for length in config.sequence_lengths:
        for name, model in SEQUENCE_MODELS.items():
            mode = "autograd" if model.stack == "ncps" else "full"
            runs.append((model.stack, mode, None, name, length))
    rows = []
    for stack, mode, scheme, sequence_model, length in runs:
        group = f"ncps sizes L={length}" if scheme is None else scheme.name
        label = sequence_model or mode
        rows.append(
            dict(
                stack=stack,
                mode=mode,
                scheme=scheme and dict(scheme._asdict(), name=scheme.name),
                sequence_model=sequence_model,
                length=length,
                group=group,
                name=f"{group}/{stack}/{label}".replace(" ", "_").replace("=", ""),
            )
        )
    return rows


def _check(config: Config) -> None:
    positive = (
        "batch_size input_size hidden_size output_size threads ode_unfolds repeats "
        "min_repeats warmup"
    )
    for name in positive.split():
        if getattr(config, name) < 1:
            raise ValueError(
                f"{name} must be a positive int; got {getattr(config, name)}."
            )
    if config.knots < 2:
        raise ValueError(f"knots must be at least 2; got {config.knots}.")
    if any(n < 1 for n in config.rk4_steps):
        raise ValueError(f"rk4_steps must be positive; got {config.rk4_steps}.")
    if any(not 2 <= length <= config.knots for length in config.sequence_lengths):
        raise ValueError(
            f"sequence_lengths must lie in [2, knots={config.knots}] (the rows take "
            f"the first knots of the batch); got {config.sequence_lengths}."
        )
    if config.min_repeats > config.repeats:
        raise ValueError(
            f"min_repeats ({config.min_repeats}) exceeds repeats ({config.repeats})."
        )
    if config.threads > len(_available_cpus()):
        raise ValueError(
            f"threads={config.threads}, but this process may use only "
            f"{len(_available_cpus())} CPUs."
        )
    missing = [
        name for name in ("torch", "torchdiffeq", "ncps") if not _installed(name)
    ]
    if missing:
        raise ModuleNotFoundError(
            f'{EXPERIMENT} needs {", ".join(missing)}: pip install -e ".[torch]".'
        )


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


# --- the model and the data, shared by both stacks ------------------------------


class Data(NamedTuple):
    """One batch: knot times `ts` `(knots,)`, values `xs` `(batch, knots,
    input_size)` and integer `labels` `(batch,)`."""

    ts: np.ndarray
    xs: np.ndarray
    labels: np.ndarray


_PARAMETERS: dict[str, Callable[[ltc_jax.LTC], jax.Array]] = {
    "cell.weight_in": lambda model: model.cell.weight_in,
    "cell.weight_rec": lambda model: model.cell.weight_rec,
    "cell.bias": lambda model: model.cell.bias,
    "cell.tau_raw": lambda model: model.cell.tau_raw,
    "cell.A": lambda model: model.cell.A,
    "readout.weight": lambda model: model.readout.weight,
    "readout.bias": lambda model: model.readout.bias,
}


def named_arrays(model: ltc_jax.LTC) -> dict[str, np.ndarray]:
    """The trainable arrays of an `ltc_jax.LTC` (or of its gradient), by the names
    `experiments.torch_ltc.PARAMETER_NAMES` uses."""
    return {name: np.asarray(get(model)) for name, get in _PARAMETERS.items()}


def with_arrays(model: ltc_jax.LTC, arrays: dict[str, np.ndarray]) -> ltc_jax.LTC:
    """`model` with its trainable arrays replaced by `arrays` (same names)."""
    return eqx.tree_at(
        lambda m: tuple(get(m) for get in _PARAMETERS.values()),
        model,
        tuple(jnp.asarray(arrays[name]) for name in _PARAMETERS),
    )


def make_inputs(config: Config) -> tuple[dict[str, np.ndarray], Data]:
    """The initial weights (an `ltc_jax.LTC` initialised from `config.seed`) and
    the batch (standard-normal values, uniform labels), in float32."""
    model, *batch = _problems.random_classification(config)
    data = Data(*batch)
    arrays = {k: v.astype(np.float32) for k, v in named_arrays(model).items()}
    return arrays, data


# --- ltc_jax ---------------------------------------------------------------------


class Kutta38(ltc_jax.RK4):
    """Kutta's 3/8 rule (Kutta 1901): the fourth-order, four-stage method that
    torchdiffeq runs as `method="rk4"` (`rk4_alt_step_func`), with $c = (0, 1/3,
    2/3, 1)$ and weights $(1/8, 3/8, 3/8, 1/8)$. Same cost as the classic RK4
    ([`ltc_jax.RK4`][], whose fixed-step behaviour it inherits); used here so that
    both stacks integrate with the same method and their gradients can agree to
    round-off."""

    tableau: ClassVar[diffrax.ButcherTableau] = diffrax.ButcherTableau(
        a_lower=(
            np.array([1 / 3]),
            np.array([-1 / 3, 1.0]),
            np.array([1.0, -1.0, 1.0]),
        ),
        b_sol=np.array([1 / 8, 3 / 8, 3 / 8, 1 / 8]),
        b_error=np.zeros(4),
        c=np.array([1 / 3, 2 / 3, 1.0]),
    )


def ltc_jax_integrator(
    scheme: Scheme, mode: str, duration: float
) -> ltc_jax.Integrator:
    """The ltc_jax integrator of a scheme and gradient mode, for inputs spanning
    `duration` time units."""
    if scheme.solver == "rk4":
        return ltc_jax.make_integrator(
            Kutta38(), mode, dt0=duration / scheme.steps, max_steps=scheme.steps
        )
    return ltc_jax.make_integrator(
        "dopri5", mode, rtol=scheme.rtol, atol=scheme.atol, max_steps=scheme.max_steps
    )


def ltc_jax_gradients(
    model: ltc_jax.LTC, batch: ltc_jax.Batch, integrator: ltc_jax.Integrator
) -> dict[str, Any]:
    """The gradient of the mean cross-entropy at `model`, and the vector-field
    evaluations of computing it, counted as they execute
    (`ltc_jax.measure.count_evaluations`).

    **Returns:** `{"gradients": <pytree like model>, "forward_evaluations",
    "backward_evaluations", "solver_steps", "loss"}`. Forward evaluations are those
    of the loss; backward ones the rest of the gradient (recomputation under
    checkpointing, the reverse solve under `backsolve`).
    """
    forward, backward, grads = ltc_jax.measure.count_evaluations(
        model, batch, integrator
    )
    loss, metrics = eqx.filter_jit(ltc_jax.training.SupervisedLoss())(
        model, batch, integrator
    )
    return dict(
        gradients=grads,
        forward_evaluations=forward,
        backward_evaluations=backward,
        solver_steps=int(metrics["num_steps"]),
        loss=loss.item(),
    )


def ltc_jax_batch(data: Data, interpolation: str, ts=None) -> ltc_jax.Batch:
    """`data` as an `ltc_jax.Batch` (knot times `ts` instead of `data.ts` if
    given; every weight 1)."""
    ts = data.ts if ts is None else ts
    path = eqx.filter_jit(ltc_jax.InputPath)(
        jnp.asarray(ts), jnp.asarray(data.xs), interpolation=interpolation
    )
    labels = jnp.asarray(data.labels, jnp.int32)
    return ltc_jax.Batch(path, labels, jnp.ones(labels.shape, path.ts.dtype))


def _ltc_jax_step(model, batch, integrator, learning_rate) -> Callable[[], None]:
    optimizer = optax.adam(learning_rate)
    train_step = eqx.filter_jit(ltc_jax.training.make_train_step(optimizer, integrator))
    state = [model, optimizer.init(eqx.filter(model, eqx.is_inexact_array))]

    def step():
        model, opt_state, loss, _, finite = train_step(*state, batch)
        jax.block_until_ready(loss)
        if not bool(finite):
            raise FloatingPointError("Non-finite loss or gradient in a training step.")
        state[:] = [model, opt_state]

    return step


def _measure_ltc_jax(m: dict, scheme, config: Config, arrays, data: Data) -> dict:
    key = jr.PRNGKey(config.seed)
    if scheme is not None:
        duration = float(data.ts[-1] - data.ts[0])
        integrator = ltc_jax_integrator(scheme, m["mode"], duration)
        sizes = (config.input_size, config.hidden_size, config.output_size)
        model = with_arrays(ltc_jax.LTC(*sizes, key=key), arrays)
        batch = ltc_jax_batch(data, scheme.interpolation)
    else:
        length = m["length"]
        build = SEQUENCE_MODELS[m["sequence_model"]].build
        model, integrator = build(config, length, key)
        sliced = Data(data.ts[:length], data.xs[:, :length], data.labels)
        ts = np.arange(length, dtype=data.ts.dtype)
        batch = ltc_jax_batch(sliced, "linear", ts=ts)
    counted = ltc_jax_gradients(model, batch, integrator)
    # Only the simplified LTC has a PyTorch twin to compare gradients with.
    counted["gradients"] = named_arrays(counted["gradients"]) if scheme else None
    step = _ltc_jax_step(model, batch, integrator, config.learning_rate)
    return dict(_time_and_peak(step, config), **counted)


# --- PyTorch ---------------------------------------------------------------------


def torchdiffeq_loss(data: Data, scheme: Scheme, mode: str) -> Callable:
    """`loss_of(model)`: the mean cross-entropy of a `torch_ltc.LTC` on `data`,
    solved by torchdiffeq as `scheme` and `mode` say (linear input; with dopri5
    "knots", the interior knots as `jump_t`)."""
    import torch

    from experiments import torch_ltc

    ts = torch.from_numpy(data.ts)
    path = torch_ltc.LinearPath(ts, torch.from_numpy(data.xs))
    labels = torch.from_numpy(np.asarray(data.labels, np.int64))
    if scheme.solver == "rk4":
        solve = torch_ltc.make_solve("rk4", mode, steps=scheme.steps)
    else:
        solve = torch_ltc.make_solve(
            "dopri5",
            mode,
            rtol=scheme.rtol,
            atol=scheme.atol,
            jump_t=ts[1:-1] if scheme.knots else None,
        )

    def loss_of(model):
        return torch.nn.functional.cross_entropy(model(path, solve), labels)

    return loss_of


def torchdiffeq_gradients(
    arrays: dict[str, np.ndarray], data: Data, scheme: Scheme, mode: str
) -> dict[str, Any]:
    """As [`ltc_jax_gradients`][], for the PyTorch copy of the model built from
    `arrays` and solved by torchdiffeq (`mode`: `"odeint"` or `"odeint_adjoint"`).
    Forward evaluations are those of the loss; backward ones those of
    `loss.backward()` (none under `odeint`, the reverse solve under
    `odeint_adjoint`)."""
    from experiments import torch_ltc

    model = torch_ltc.LTC(arrays)
    loss = torchdiffeq_loss(data, scheme, mode)(model)
    forward = model.cell.num_evaluations
    loss.backward()
    return dict(
        gradients=model.named_gradients(),
        forward_evaluations=forward,
        backward_evaluations=model.cell.num_evaluations - forward,
        solver_steps=None,
        loss=loss.item(),
    )


def _measure_torch(m: dict, scheme, config: Config, arrays, data: Data) -> dict:
    """A PyTorch configuration: torchdiffeq's (its gradients counted by
    [`torchdiffeq_gradients`][]), or ncps's LTC on the first `length` knots, one
    per unit of time (its fused steps counted, its gradients not compared)."""
    import torch

    from experiments import torch_ltc

    if m["stack"] == "torchdiffeq":
        counted = torchdiffeq_gradients(arrays, data, scheme, m["mode"])
        model = torch_ltc.LTC(arrays)
        loss_of = torchdiffeq_loss(data, scheme, m["mode"])
    else:
        xs = torch.from_numpy(np.ascontiguousarray(data.xs[:, : m["length"]]))
        labels = torch.from_numpy(data.labels)
        sizes = (config.input_size, config.hidden_size, config.output_size)
        model = torch_ltc.NCPSClassifier(*sizes, config.ode_unfolds, seed=config.seed)

        def loss_of(model):
            return torch.nn.functional.cross_entropy(model(xs), labels)

        loss = loss_of(model)
        forward = model.num_evaluations
        loss.backward()
        counted = dict(
            gradients=None,
            forward_evaluations=forward,
            backward_evaluations=model.num_evaluations - forward,
            solver_steps=m["length"] * config.ode_unfolds,
            loss=loss.item(),
        )
        model.zero_grad(set_to_none=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(model)
        loss.backward()
        if not bool(torch.isfinite(loss)):
            raise FloatingPointError("Non-finite loss in a training step.")
        optimizer.step()

    return dict(_time_and_peak(step, config), **counted)


# --- measuring, the same for both stacks -----------------------------------------


def _time_and_peak(step: Callable[[], None], config: Config) -> dict:
    """Warm up, measure one step's peak memory, then time steps: wall time, and the
    CPU time of the whole process (all its threads), which other programs on a
    shared machine disturb much less than wall time."""
    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    for _ in range(config.warmup - 1):
        step()
    ltc_jax.measure.release_free_memory()
    resident = ltc_jax.measure.process_resident_bytes()
    reset = ltc_jax.measure.reset_process_peak()
    step()
    peak = ltc_jax.measure.process_peak_bytes() if reset else None
    wall, cpu = [], []
    load_before = _load_average()
    start = time.perf_counter()
    while len(wall) < config.repeats:
        tic, cpu_tic = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - tic)
        cpu.append(time.process_time() - cpu_tic)
        elapsed = time.perf_counter() - start
        if len(wall) >= config.min_repeats and elapsed > config.time_budget_seconds:
            break
    return dict(
        first_step_seconds=first,
        step_seconds=wall,
        median_step_seconds=statistics.median(wall),
        step_cpu_seconds=cpu,
        median_step_cpu_seconds=statistics.median(cpu),
        peak_step_bytes=None if peak is None or resident is None else peak - resident,
        peak_process_bytes=peak,
        resident_before_bytes=resident,
        load_average=dict(before=load_before, after=_load_average()),
    )


def _load_average() -> float | None:
    """The machine's one-minute load average (runnable processes), if known."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _available_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def measure_configuration(config: dict, row: dict, inputs: str, folder: str) -> dict:
    """Measure one configuration (`row`, as [`plan`][] gives it; in a fresh
    process, which `main` starts on the run's CPUs) on the weights and batch of
    `inputs` (`.npz`), and write its gradients, for the ODE rows, to
    `folder/gradients.npz`.

    **Returns:** the step's times and peak memory, the vector-field evaluations,
    solver steps and loss of one gradient, and the threads used."""
    config = Config(**config)
    scheme = row["scheme"] and Scheme(
        **{k: v for k, v in row["scheme"].items() if k != "name"}
    )
    with np.load(inputs) as file:
        arrays = {k[len("param/") :]: file[k] for k in file if k.startswith("param/")}
        data = Data(file["ts"], file["xs"], file["labels"])
    threads = dict(cpus=_available_cpus())
    if row["stack"] == "ltc_jax":
        result = _measure_ltc_jax(row, scheme, config, arrays, data)
        threads["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    else:
        import torch

        from experiments import torch_ltc

        torch_ltc.set_threads(config.threads)
        result = _measure_torch(row, scheme, config, arrays, data)
        threads["torch_intra_op"] = torch.get_num_threads()
        threads["torch_inter_op"] = torch.get_num_interop_threads()
    gradients = result.pop("gradients")
    if gradients is not None:
        np.savez(os.path.join(folder, "gradients.npz"), **gradients)
    return dict(result, threads=threads)


@contextlib.contextmanager
def _pinned(cpus: list[int]):
    """This process, and so each process it starts meanwhile, on `cpus` only (as
    `taskset` would start it); the CPUs it had are restored afterwards."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


# --- comparing -------------------------------------------------------------------


def relative_difference(x: dict[str, np.ndarray], y: dict[str, np.ndarray]) -> float:
    """max |x - y| / max |y| over all parameters together (the same names in
    both)."""
    if set(x) != set(y):
        raise ValueError(f"Different parameters: {sorted(x)} and {sorted(y)}.")
    diff = max(float(np.max(np.abs(np.asarray(x[k], np.float64) - y[k]))) for k in y)
    scale = max(float(np.max(np.abs(y[k]))) for k in y)
    return diff / scale


def compare(rows: list[dict], run_dir: str) -> list[dict]:
    """Pair each ltc_jax row with the torchdiffeq row of the same scheme and the
    matching mode: the speed-up, the memory ratio and the gradients' relative
    difference (only where both integrate the same input path)."""
    by_key = {(r["group"], r["stack"], r["mode"]): r for r in rows if r["scheme"]}
    comparisons = []
    for row in rows:
        if row["stack"] != "ltc_jax" or row["scheme"] is None:
            continue
        torch_row = by_key.get((row["group"], "torchdiffeq", PAIRS[row["mode"]]))
        if torch_row is None:
            continue
        ok = row["error"] is None and torch_row["error"] is None
        same_input = row["scheme"]["knots"] or row["scheme"]["solver"] == "rk4"
        gradient_difference = None
        if ok and same_input:
            gradient_difference = relative_difference(
                _load_gradients(run_dir, row), _load_gradients(run_dir, torch_row)
            )
        comparisons.append(
            dict(
                group=row["group"],
                ltc_jax=row["mode"],
                torchdiffeq=torch_row["mode"],
                speedup=_ratio(
                    torch_row.get("median_step_seconds"), row.get("median_step_seconds")
                ),
                cpu_speedup=_ratio(
                    torch_row.get("median_step_cpu_seconds"),
                    row.get("median_step_cpu_seconds"),
                ),
                memory_ratio=_ratio(
                    torch_row.get("peak_step_bytes"), row.get("peak_step_bytes")
                )
                if ok
                else None,
                relative_gradient_difference=gradient_difference,
                gradient_note=None
                if same_input
                else "not compared: ltc_jax integrates a cubic input, torchdiffeq a "
                "linear one",
            )
        )
    return comparisons


def _ratio(a, b):
    """a / b, or None when either is missing (a failed row) or b is not positive."""
    return None if a is None or b is None or b <= 0 else a / b


def _load_gradients(run_dir: str, row: dict) -> dict[str, np.ndarray]:
    path = os.path.join(run_dir, "configurations", row["name"], "gradients.npz")
    with np.load(path) as file:
        return {k: file[k] for k in file}


def ncps_memory(rows: list[dict], knots: int) -> dict | None:
    """ncps's memory per input step: the slope of a least-squares line through its
    measured step peaks against length, and what `knots` input steps would need at
    that slope. `None` with fewer than two lengths measured."""
    points = [
        (r["length"], r["peak_step_bytes"])
        for r in rows
        if r["stack"] == "ncps" and r["error"] is None and r["peak_step_bytes"]
    ]
    if len({length for length, _ in points}) < 2:
        return None
    lengths, peaks = np.array(points, dtype=np.float64).T
    slope, intercept = np.polyfit(lengths, peaks, 1)
    return dict(
        bytes_per_input_step=float(slope),
        projected_bytes_at_knots=float(intercept + slope * knots),
        knots=knots,
    )


def target_check(comparisons: list[dict]) -> dict:
    """Whether ltc_jax meets the stated target at RK4, N = 1000: `met` on the
    median wall time per step, `met_cpu_time` on the median CPU time (the steadier
    of the two on a machine shared with other programs)."""
    group = Scheme("rk4", steps=TARGET_STEPS).name
    checks = {}
    for mode, needed in TARGET_SPEEDUP.items():
        found = [c for c in comparisons if c["group"] == group and c["ltc_jax"] == mode]
        speedup = found[0]["speedup"] if found else None
        cpu_speedup = found[0]["cpu_speedup"] if found else None
        checks[f"{mode} vs {PAIRS[mode]}"] = dict(
            needed=needed,
            measured=speedup,
            measured_cpu_time=cpu_speedup,
            met=None if speedup is None else speedup >= needed,
            met_cpu_time=None if cpu_speedup is None else cpu_speedup >= needed,
        )
    return dict(scheme=group, checks=checks)


def machine() -> dict:
    """The CPUs, and the versions of the PyTorch stack (read without importing it)."""
    versions = {}
    for name in ("torch", "torchdiffeq", "ncps", "numpy", "matplotlib"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return dict(cpus_available=len(_available_cpus()), versions=versions)


def main(config: Config) -> dict:
    """Measure every configuration of `plan(config)`, each in its own process, then
    compare, print the table, and write `config.json`, `inputs.npz`,
    `metrics.json`, `report.txt` and, per configuration, its gradients.

    **Returns:** the metrics (also in `metrics.json`): `rows`, `comparisons`,
    `target`, `ncps_memory`, `threads`, `machine`, `environment`, `run_dir`.

    **Raises:** `ValueError` for an inconsistent config; `ModuleNotFoundError`
    when PyTorch, torchdiffeq or ncps is missing; `FileExistsError` for an `out`
    folder that holds files. A configuration that fails (out of memory, a
    timeout) is reported in its row, not raised.
    """
    config = _run.apply_quick(config, QUICK)
    _check(config)
    config, run = _run.start_run(config, EXPERIMENT)
    arrays, data = make_inputs(config)
    inputs = run.path("inputs.npz")
    parameters = {f"param/{k}": v for k, v in arrays.items()}
    np.savez(inputs, ts=data.ts, xs=data.xs, labels=data.labels, **parameters)
    cpus = _available_cpus()[: config.threads]
    threads = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    env = {name: str(config.threads) for name in threads}
    rows, start = plan(config), time.perf_counter()
    for i, row in enumerate(rows, 1):
        folder = run.path("configurations", row["name"])
        os.makedirs(folder)
        kwargs = dict(config=dataclasses.asdict(config), row=row, inputs=inputs)
        tic = time.perf_counter()
        try:
            with _pinned(cpus):
                row.update(
                    ltc_jax.measure.call_in_subprocess(
                        "experiments.compare_pytorch:measure_configuration",
                        dict(kwargs, folder=folder),
                        env=env,
                        timeout=config.worker_timeout_seconds,
                    ),
                    error=None,
                )
        except ltc_jax.SubprocessError as error:
            row["error"] = _run.failure_summary(error)
        row["process_seconds"] = time.perf_counter() - tic
        status = row["error"] or f"{row['median_step_seconds']:.3f} s/step"
        print(f"[{i}/{len(rows)}] {row['name']}: {status}", flush=True)
    comparisons = compare(rows, run.dir)
    return run.finish(
        dict(
            rows=rows,
            comparisons=comparisons,
            target=target_check(comparisons),
            ncps_memory=ncps_memory(rows, config.knots),
            threads=dict(
                per_process=config.threads,
                cpus=cpus,
                how="each configuration runs in its own process started on these "
                "CPUs (sched_setaffinity, as taskset); PyTorch: "
                "torch.set_num_threads, one inter-op thread; XLA sizes its CPU "
                "thread pool from the affinity",
            ),
            total_seconds=time.perf_counter() - start,
            machine=machine(),
        )
    )


if __name__ == "__main__":
    main(tyro.cli(Config))
