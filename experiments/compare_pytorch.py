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

Run `python -m experiments.compare_pytorch` (default sizes, ~20 minutes on a
2-core CPU) or `python -m experiments.compare_pytorch --quick`. Needs
`pip install -e ".[torch,experiments]"`.
"""

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import statistics
import subprocess
import sys
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
from experiments import _problems, _report, _run


EXPERIMENT = "compare_pytorch"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


class Configuration(NamedTuple):
    """One configuration, measured in a process of its own."""

    stack: Stack
    mode: str
    scheme: Scheme | None = None
    sequence_model: str | None = None
    length: int | None = None

    @property
    def group(self) -> str:
        if self.scheme is not None:
            return self.scheme.name
        return f"ncps sizes L={self.length}"

    @property
    def name(self) -> str:
        label = self.mode if self.sequence_model is None else self.sequence_model
        return f"{self.group}/{self.stack}/{label}".replace(" ", "_").replace("=", "")


def plan(config: Config) -> list[Configuration]:
    """Every configuration of a run, in order."""
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
    runs = []
    for scheme in schemes:
        runs += [
            Configuration("torchdiffeq", mode, scheme) for mode in TORCHDIFFEQ_MODES
        ]
        runs += [Configuration("ltc_jax", mode, scheme) for mode in LTC_JAX_MODES]
    for length in config.sequence_lengths:
        for name, model in SEQUENCE_MODELS.items():
            mode = "autograd" if model.stack == "ncps" else "full"
            runs.append(Configuration(model.stack, mode, None, name, length))
    return runs


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
    (`ltc_jax.count_evaluations`).

    **Returns:** `{"gradients": <pytree like model>, "forward_evaluations",
    "backward_evaluations", "solver_steps", "loss"}`. Forward evaluations are those
    of the loss; backward ones the rest of the gradient (recomputation under
    checkpointing, the reverse solve under `backsolve`).
    """
    forward, backward, grads = ltc_jax.count_evaluations(model, batch, integrator)
    loss, metrics = eqx.filter_jit(ltc_jax.loss_and_metrics)(model, batch, integrator)
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
    train_step = eqx.filter_jit(ltc_jax.make_train_step(optimizer, integrator))
    state = [model, optimizer.init(eqx.filter(model, eqx.is_inexact_array))]

    def step():
        model, opt_state, loss, _, finite = train_step(*state, batch)
        jax.block_until_ready(loss)
        if not bool(finite):
            raise FloatingPointError("Non-finite loss or gradient in a training step.")
        state[:] = [model, opt_state]

    return step


def _measure_ltc_jax(m: Configuration, config: Config, arrays, data: Data) -> dict:
    key = jr.PRNGKey(config.seed)
    if m.scheme is not None:
        duration = float(data.ts[-1] - data.ts[0])
        integrator = ltc_jax_integrator(m.scheme, m.mode, duration)
        model = with_arrays(
            ltc_jax.LTC(
                config.input_size, config.hidden_size, config.output_size, key=key
            ),
            arrays,
        )
        batch = ltc_jax_batch(data, m.scheme.interpolation)
    else:
        model, integrator = SEQUENCE_MODELS[m.sequence_model].build(
            config, m.length, key
        )
        sliced = Data(data.ts[: m.length], data.xs[:, : m.length], data.labels)
        batch = ltc_jax_batch(
            sliced, "linear", ts=np.arange(m.length, dtype=data.ts.dtype)
        )
    counted = ltc_jax_gradients(model, batch, integrator)
    # Only the simplified LTC has a PyTorch twin to compare gradients with.
    counted["gradients"] = named_arrays(counted["gradients"]) if m.scheme else None
    result = _time_and_peak(
        _ltc_jax_step(model, batch, integrator, config.learning_rate), config
    )
    result.update(counted)
    return result


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


def _measure_torchdiffeq(m: Configuration, config: Config, arrays, data: Data) -> dict:
    from experiments import torch_ltc

    counted = torchdiffeq_gradients(arrays, data, m.scheme, m.mode)
    step = _torch_step(
        torch_ltc.LTC(arrays), torchdiffeq_loss(data, m.scheme, m.mode), config
    )
    result = _time_and_peak(step, config)
    result.update(counted)
    return result


def _torch_step(model, loss_of, config: Config) -> Callable[[], None]:
    import torch

    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(model)
        loss.backward()
        if not bool(torch.isfinite(loss)):
            raise FloatingPointError("Non-finite loss in a training step.")
        optimizer.step()

    return step


def _measure_ncps(m: Configuration, config: Config, arrays, data: Data) -> dict:
    import torch

    from experiments import torch_ltc

    xs = torch.from_numpy(np.ascontiguousarray(data.xs[:, : m.length]))
    labels = torch.from_numpy(data.labels)
    model = torch_ltc.NCPSClassifier(
        config.input_size,
        config.hidden_size,
        config.output_size,
        config.ode_unfolds,
        seed=config.seed,
    )

    def loss_of(model):
        return torch.nn.functional.cross_entropy(model(xs), labels)

    loss = loss_of(model)
    forward = model.num_evaluations
    loss.backward()
    counted = dict(
        gradients=None,
        forward_evaluations=forward,
        backward_evaluations=model.num_evaluations - forward,
        solver_steps=m.length * config.ode_unfolds,
        loss=loss.item(),
    )
    model.zero_grad(set_to_none=True)
    result = _time_and_peak(_torch_step(model, loss_of, config), config)
    result.update(counted)
    return result


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
    ltc_jax.release_free_memory()
    resident = ltc_jax.process_resident_bytes()
    reset = ltc_jax.reset_process_peak()
    step()
    peak = ltc_jax.process_peak_bytes() if reset else None
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


def run_worker(spec_path: str) -> None:
    """Measure the one configuration described in `spec_path` (written by `main`)
    and write `result.json` and, for the ODE rows, `gradients.npz` beside it."""
    with open(spec_path) as file:
        spec = json.load(file)
    config = Config(**_tuples(spec["config"]))
    m = _measurement_from_json(spec["measurement"])
    with np.load(spec["inputs"]) as inputs:
        arrays = {
            k[len("param/") :]: inputs[k] for k in inputs if k.startswith("param/")
        }
        data = Data(inputs["ts"], inputs["xs"], inputs["labels"])
    threads = dict(cpus=_available_cpus())
    if m.stack == "ltc_jax":
        result = _measure_ltc_jax(m, config, arrays, data)
        threads["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    else:
        from experiments import torch_ltc

        torch_ltc.set_threads(config.threads)
        measure = _measure_torchdiffeq if m.stack == "torchdiffeq" else _measure_ncps
        result = measure(m, config, arrays, data)
        import torch

        threads["torch_intra_op"] = torch.get_num_threads()
        threads["torch_inter_op"] = torch.get_num_interop_threads()
    gradients = result.pop("gradients")
    folder = os.path.dirname(spec_path)
    if gradients is not None:
        np.savez(os.path.join(folder, "gradients.npz"), **gradients)
    result["threads"] = threads
    with open(os.path.join(folder, "result.json"), "w") as file:
        json.dump(result, file, indent=2)


def _tuples(config: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in config.items()}


def _measurement_to_json(m: Configuration) -> dict:
    return dict(m._asdict(), scheme=None if m.scheme is None else m.scheme._asdict())


def _measurement_from_json(d: dict) -> Configuration:
    scheme = None if d["scheme"] is None else Scheme(**d["scheme"])
    return Configuration(**dict(d, scheme=scheme))


def _run_configuration(
    m: Configuration, config: Config, run_dir: str, inputs: str
) -> dict:
    folder = os.path.join(run_dir, "configurations", m.name)
    os.makedirs(folder)
    spec_path = os.path.join(folder, "spec.json")
    with open(spec_path, "w") as file:
        json.dump(
            dict(
                measurement=_measurement_to_json(m),
                config=dataclasses.asdict(config),
                inputs=os.path.abspath(inputs),
            ),
            file,
            indent=2,
        )
    cpus = _available_cpus()[: config.threads]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(config.threads)
    # The process pins itself before importing anything (as `taskset` would), so
    # PyTorch's and XLA's thread pools are sized from the same CPUs.
    command = [
        sys.executable,
        "-c",
        "import os, sys\n"
        "if hasattr(os, 'sched_setaffinity'):\n"
        "    os.sched_setaffinity(0, [int(c) for c in sys.argv[2].split(',')])\n"
        "from experiments.compare_pytorch import run_worker\n"
        "run_worker(sys.argv[1])",
        spec_path,
        ",".join(str(c) for c in cpus),
    ]
    start = time.perf_counter()
    try:
        process = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=config.worker_timeout_seconds,
        )
        log, returncode = process.stdout + process.stderr, process.returncode
    except subprocess.TimeoutExpired as error:
        log = f"{error.stdout or ''}{error.stderr or ''}"
        returncode = None
    wall = time.perf_counter() - start
    with open(os.path.join(folder, "worker.log"), "w") as file:
        file.write(log if isinstance(log, str) else log.decode())
    row = dict(
        name=m.name,
        group=m.group,
        stack=m.stack,
        mode=m.mode,
        sequence_model=m.sequence_model,
        length=m.length,
        scheme=None
        if m.scheme is None
        else dict(m.scheme._asdict(), name=m.scheme.name),
        process_seconds=wall,
    )
    if returncode == 0:
        with open(os.path.join(folder, "result.json")) as file:
            row.update(json.load(file))
        row["error"] = None
    elif returncode is None:
        row["error"] = f"timed out after {config.worker_timeout_seconds:.0f} s"
    else:
        lines = [line for line in str(log).strip().splitlines() if line.strip()]
        row["error"] = f"exit {returncode}: " + (lines[-1] if lines else "no output")
    return row


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


# --- reporting -------------------------------------------------------------------


def _mib(value) -> str:
    return _report.mib(value, digits=0)


def format_table(
    rows: list[dict], comparisons: list[dict], target: dict, ncps: dict | None = None
) -> str:
    """The printed table: one line per configuration, then ncps's memory per input
    step and the target."""
    pair = {(c["group"], c["ltc_jax"]): c for c in comparisons}
    header = (
        f"{'scheme':<18}{'stack':<13}{'mode':<20}{'s/step':>9}{'cpu s':>9}"
        f"{'peak MiB':>10}"
        f"{'NFE fwd':>9}{'NFE bwd':>9}{'grad rel diff':>15}{'speed-up':>10}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        label = row["mode"] if row["sequence_model"] is None else row["sequence_model"]
        if row["error"] is not None:
            lines.append(
                f"{row['group']:<18}{row['stack']:<13}{label:<20}  FAILED: "
                f"{row['error']}"
            )
            continue
        c = pair.get((row["group"], row["mode"])) if row["stack"] == "ltc_jax" else None
        diff = "-"
        speedup = "-"
        if c is not None:
            if c["relative_gradient_difference"] is not None:
                diff = f"{c['relative_gradient_difference']:.1e}"
            elif c["gradient_note"]:
                diff = "n/a"
            if c["speedup"] is not None:
                speedup = f"{c['speedup']:.1f}x"
        lines.append(
            f"{row['group']:<18}{row['stack']:<13}{label:<20}"
            f"{row['median_step_seconds']:>9.3f}{row['median_step_cpu_seconds']:>9.3f}"
            f"{_mib(row['peak_step_bytes']):>10}"
            f"{row['forward_evaluations']:>9}{row['backward_evaluations']:>9}"
            f"{diff:>15}{speedup:>10}"
        )
    lines.append("")
    lines.append(
        "s/step: median wall time of a training step; cpu s: the process's CPU time "
        "for it. speed-up: the paired torchdiffeq mode's s/step over ltc_jax's (full "
        "and checkpoint against odeint, backsolve against odeint_adjoint)."
    )
    if ncps is not None:
        lines.append(
            f"ncps: {_mib(ncps['bytes_per_input_step'])} MiB per input step "
            f"(measured slope); {ncps['knots']} input steps would need "
            f"{ncps['projected_bytes_at_knots'] / 2**30:,.0f} GiB."
        )
    lines.append(f"target at {target['scheme']}:")
    for name, check in target["checks"].items():
        measured = (
            "not measured"
            if check["measured"] is None
            else f"{check['measured']:.1f}x ({check['measured_cpu_time']:.1f}x in CPU "
            "time)"
        )
        verdict = {True: "met", False: "not met", None: "not measured"}
        lines.append(
            f"  {name}: {measured}, needed {check['needed']:.0f}x: "
            f"{verdict[check['met']]} on wall time, "
            f"{verdict[check['met_cpu_time']]} on CPU time"
        )
    return "\n".join(lines)


_COLOURS = {
    "torchdiffeq odeint": "#d62728",
    "torchdiffeq odeint_adjoint": "#ff9896",
    "ltc_jax full": "#1f77b4",
    "ltc_jax checkpoint": "#6baed6",
    "ltc_jax backsolve": "#9467bd",
    SEQUENCE_MODELS["ncps"].description: "#2ca02c",
    SEQUENCE_MODELS["ltc_jax-simplified"].description: "#17becf",
    SEQUENCE_MODELS["ltc_jax-biophysical"].description: "#9467bd",
}


def plot(rows: list[dict], path: str) -> None:
    """Bar charts (log scale) of seconds per step and peak memory of a step, one
    cluster per scheme, one bar per stack and mode."""
    plt = _report.pyplot()

    ok = [r for r in rows if r["error"] is None]
    groups = list(dict.fromkeys(r["group"] for r in ok))
    widest = max((sum(r["group"] == g for r in ok) for g in groups), default=1)
    width = 0.8 / widest
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.4 * len(groups)), 8), sharex=True)
    keys = ("median_step_seconds", "peak_step_bytes")
    for g, group in enumerate(groups):
        members = [r for r in ok if r["group"] == group]
        for j, row in enumerate(members):
            x = g - 0.4 * len(members) / widest + (j + 0.5) * width
            name = _series(row)
            for ax, key in zip(axes, keys, strict=True):
                value = row[key]
                if value:
                    value = value / 2**20 if key == "peak_step_bytes" else value
                    colour = _COLOURS.get(name, "#7f7f7f")
                    ax.bar(x, value, width, color=colour, label=name)
    axes[0].set_ylabel("seconds per training step (median)")
    axes[1].set_ylabel("peak memory of a step (MiB)")
    for ax in axes:
        ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
    axes[1].set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    handles, labels = axes[0].get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    fig.legend(unique.values(), unique.keys(), loc="lower center", ncol=3, fontsize=8)
    axes[0].set_title("ltc_jax vs PyTorch (torchdiffeq, ncps): one training step")
    _report.save_figure(fig, path, dpi=120, rect=(0, 0.08, 1, 1))


def _series(row: dict) -> str:
    if row["sequence_model"] is not None:
        return SEQUENCE_MODELS[row["sequence_model"]].description
    return f"{row['stack']} {row['mode']}"


def machine() -> dict:
    """The CPU, and the versions of the PyTorch stack (read without importing it)."""
    model = _run.cpu_name()
    versions = {}
    for name in ("torch", "torchdiffeq", "ncps", "numpy", "matplotlib"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return dict(cpu=model, cpus_available=len(_available_cpus()), versions=versions)


def main(config: Config) -> dict:
    """Measure every configuration of `plan(config)`, each in its own process, then
    compare, print the table, and write `config.json`, `metrics.json`,
    `comparison.png` and, per configuration, its spec, log, result and gradients.

    **Returns:** the metrics (also in `metrics.json`): `rows`, `comparisons`,
    `target`, `threads`, `machine`, `environment`, `run_dir`.

    **Raises:** `ValueError` for an inconsistent config; `ModuleNotFoundError`
    when PyTorch, torchdiffeq or ncps is missing; `FileExistsError` for an `out`
    folder that holds files. A configuration that fails (out of memory, a
    timeout) is reported in its row, not raised.
    """
    config = _run.apply_quick(config, QUICK)
    _check(config)
    config, run_dir = _run.start_run(config, EXPERIMENT)
    arrays, data = make_inputs(config)
    inputs = os.path.join(run_dir, "inputs.npz")
    np.savez(
        inputs,
        ts=data.ts,
        xs=data.xs,
        labels=data.labels,
        **{f"param/{k}": v for k, v in arrays.items()},
    )
    measurements = plan(config)
    rows = []
    start = time.perf_counter()
    for i, m in enumerate(measurements, 1):
        row = _run_configuration(m, config, run_dir, inputs)
        rows.append(row)
        status = (
            f"{row['median_step_seconds']:.3f} s/step"
            if row["error"] is None
            else f"FAILED ({row['error']})"
        )
        print(f"[{i}/{len(measurements)}] {m.name}: {status}", flush=True)
    comparisons = compare(rows, run_dir)
    target = target_check(comparisons)
    ncps = ncps_memory(rows, config.knots)
    metrics = dict(
        rows=rows,
        comparisons=comparisons,
        target=target,
        ncps_memory=ncps,
        threads=dict(
            per_process=config.threads,
            cpus=_available_cpus()[: config.threads],
            how="each configuration runs in its own process pinned to these CPUs "
            "(sched_setaffinity, as taskset); PyTorch: torch.set_num_threads, one "
            "inter-op thread; XLA sizes its CPU thread pool from the affinity",
        ),
        total_seconds=time.perf_counter() - start,
        machine=machine(),
        environment=ltc_jax.environment(),
        run_dir=run_dir,
    )
    with open(os.path.join(run_dir, "metrics.json"), "w") as file:
        json.dump(metrics, file, indent=2)
    plot(rows, os.path.join(run_dir, "comparison.png"))
    print()
    print(format_table(rows, comparisons, target, ncps))
    print(f"\nrun folder {run_dir}")
    return metrics


if __name__ == "__main__":
    main(tyro.cli(Config))
