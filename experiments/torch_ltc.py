"""The PyTorch side of `compare_pytorch`: the same simplified LTC in PyTorch, solved
with torchdiffeq, and the original authors' LTC from `ncps`.

This module imports only PyTorch, torchdiffeq, ncps and NumPy, never JAX: PyTorch
processes of the benchmark measure PyTorch alone. Parameters arrive as NumPy arrays
under the names of [`ltc_jax.LTC`][]'s fields (`cell.weight_in`, ...,
`readout.bias`), so a model built here starts from exactly the weights of an
ltc_jax model, and gradients leave under the same names.
"""

from collections.abc import Callable, Mapping

import numpy as np
import torch
import torchdiffeq
from torch import nn


PARAMETER_NAMES = (
    "cell.weight_in",
    "cell.weight_rec",
    "cell.bias",
    "cell.tau_raw",
    "cell.A",
    "readout.weight",
    "readout.bias",
)
"""The trainable arrays of the simplified LTC, named as the fields of `ltc_jax.LTC`."""


class LinearPath:
    """Piecewise-linear interpolation of a batch of sequences on shared knot times,
    as `diffrax.LinearInterpolation` (one per sequence) computes it.

    **Arguments:**

    - `ts`: `(times,)`, strictly increasing knot times.
    - `xs`: `(batch, times, input_size)`, values at the knots.

    **Raises:** `ValueError` for wrong shapes, fewer than two knots or times that do
    not increase.
    """

    def __init__(self, ts: torch.Tensor, xs: torch.Tensor):
        if ts.ndim != 1 or xs.ndim != 3 or xs.shape[1] != ts.shape[0]:
            raise ValueError(
                "Need ts of shape (times,) and xs of shape (batch, times, input_size); "
                f"got {tuple(ts.shape)} and {tuple(xs.shape)}."
            )
        if ts.shape[0] < 2 or not bool(torch.all(ts[1:] > ts[:-1])):
            raise ValueError("ts must hold at least two strictly increasing times.")
        self.ts = ts
        self.xs = xs

    def evaluate(self, t: torch.Tensor) -> torch.Tensor:
        """$x(t)$ of every sequence, `(batch, input_size)`; the first or last
        segment is extended linearly outside `[ts[0], ts[-1]]`."""
        last = self.ts.shape[0] - 2
        index = torch.searchsorted(self.ts, t.reshape(1), right=True) - 1
        index = index.clamp(0, last)
        t0 = self.ts.index_select(0, index)
        t1 = self.ts.index_select(0, index + 1)
        x0 = self.xs.index_select(1, index)[:, 0]
        x1 = self.xs.index_select(1, index + 1)[:, 0]
        fraction = (t - t0) / (t1 - t0)
        return x0 + fraction * (x1 - x0)


class LTCField(nn.Module):
    r"""The simplified LTC vector field of the original write-up, as
    `ltc_jax.LTCVectorField` computes it:

    $$\frac{dh}{dt} = -\Big(\frac{1}{\tau} + f\Big) \odot h + f \odot A,\qquad
    f = \sigma(W_\text{in}\, x(t) + W_\text{rec}\, h + b),$$

    with $\tau = \mathrm{softplus}(\tau_\text{raw}) + \tau_\text{min}$ (Hasani et al.
    2021, Eq. 1). Called as `field(t, h)`, as torchdiffeq calls a vector field, with
    the input path set beforehand in `field.path`. Every call increments
    `num_evaluations`, so a solve's function evaluations are counted, not inferred.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray], tau_min: float):
        super().__init__()
        self.weight_in = _parameter(arrays["cell.weight_in"])
        self.weight_rec = _parameter(arrays["cell.weight_rec"])
        self.bias = _parameter(arrays["cell.bias"])
        self.tau_raw = _parameter(arrays["cell.tau_raw"])
        self.A = _parameter(arrays["cell.A"])
        self.tau_min = float(tau_min)
        self.path: LinearPath | None = None
        self.num_evaluations = 0

    def forward(self, t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        if self.path is None:
            raise RuntimeError(
                "Set field.path to the batch's LinearPath before solving."
            )
        self.num_evaluations += 1
        x = self.path.evaluate(t)
        f = torch.sigmoid(x @ self.weight_in.T + h @ self.weight_rec.T + self.bias)
        tau = nn.functional.softplus(self.tau_raw) + self.tau_min
        return -(1.0 / tau + f) * h + f * self.A


def _parameter(array: np.ndarray) -> nn.Parameter:
    return nn.Parameter(torch.from_numpy(np.array(array, copy=True)))


class LTC(nn.Module):
    """The sequence model of `ltc_jax.LTC` in PyTorch: $h(t_0) = 0$, solve the
    [`LTCField`][] from the first to the last knot, linear readout of $h(t_1)$.

    **Arguments:**

    - `arrays`: the parameters by [`PARAMETER_NAMES`][] (NumPy arrays of one float
        dtype), e.g. copied from an ltc_jax model.
    - `tau_min`: the cell's floor on $\\tau$.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray], tau_min: float = 0.0):
        super().__init__()
        missing = sorted(set(PARAMETER_NAMES) - set(arrays))
        if missing:
            raise ValueError(f"Missing parameters {missing}; need {PARAMETER_NAMES}.")
        self.cell = LTCField(arrays, tau_min)
        weight = arrays["readout.weight"]
        self.readout = nn.Linear(weight.shape[1], weight.shape[0], dtype=_dtype(weight))
        with torch.no_grad():
            self.readout.weight.copy_(torch.from_numpy(np.array(weight)))
            self.readout.bias.copy_(torch.from_numpy(np.array(arrays["readout.bias"])))

    def forward(self, path: LinearPath, solve: "Solve") -> torch.Tensor:
        """Logits `(batch, output_size)` of the sequences of `path`, integrated by
        `solve` (see [`make_solve`][])."""
        self.cell.path = path
        h0 = torch.zeros(
            path.xs.shape[0], self.cell.weight_rec.shape[0], dtype=path.xs.dtype
        )
        span = torch.stack([path.ts[0], path.ts[-1]])
        return self.readout(solve(self.cell, h0, span))

    def named_gradients(self) -> dict[str, np.ndarray]:
        """The `.grad` of every parameter, by [`PARAMETER_NAMES`][]."""
        gradients = {}
        for name, parameter in self.named_parameters():
            if parameter.grad is None:
                raise RuntimeError(f"{name} has no gradient; run backward() first.")
            gradients[name] = parameter.grad.detach().numpy().copy()
        return gradients


def _dtype(array: np.ndarray) -> torch.dtype:
    return torch.from_numpy(np.zeros((), np.asarray(array).dtype)).dtype


Solve = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


def make_solve(
    method: str,
    mode: str,
    *,
    steps: int | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    jump_t: torch.Tensor | None = None,
) -> Solve:
    """A torchdiffeq solve `solve(field, h0, span) -> h(span[1])`.

    **Arguments:**

    - `method`: `"rk4"` (torchdiffeq's fixed-step RK4, which is Kutta's 3/8 rule,
        not the classic tableau) or `"dopri5"`.
    - `mode`: `"odeint"` (backpropagation through the solver's operations) or
        `"odeint_adjoint"` (the continuous adjoint of Chen et al. 2018, solved
        backwards with the same method and options).
    - `steps`: for `"rk4"`, the number of equal steps over the span.
    - `rtol`, `atol`: for `"dopri5"`.
    - `jump_t`: for `"dopri5"`, times where the vector field is not smooth (the
        knots of a linear input), passed as torchdiffeq's `jump_t` option so no
        step straddles one; `None` (torchdiffeq's default) lets steps cross them.

    **Raises:** `ValueError` for an unknown method or mode, or options that do
    not belong to the method.
    """
    if mode not in ("odeint", "odeint_adjoint"):
        raise ValueError(f"Unknown mode {mode!r}; choose 'odeint' or 'odeint_adjoint'.")
    if method == "rk4":
        if steps is None or steps < 1 or rtol is not None or jump_t is not None:
            raise ValueError(
                "rk4 takes a positive number of steps and no rtol, atol or jump_t; got "
                f"steps={steps}, rtol={rtol}, jump_t={jump_t is not None}."
            )

        def grid(func, y0, t):
            return torch.linspace(t[0], t[-1], steps + 1, dtype=t.dtype)

        # The grid constructor receives the span in its own direction, so the
        # adjoint's reverse solve takes the same `steps` steps backwards.
        kwargs = dict(method="rk4", options=dict(grid_constructor=grid))
    elif method == "dopri5":
        if rtol is None or atol is None or steps is not None:
            raise ValueError(
                f"dopri5 takes rtol and atol and no steps; got rtol={rtol}, "
                f"atol={atol}, steps={steps}."
            )
        options = None if jump_t is None else dict(jump_t=jump_t)
        kwargs = dict(method="dopri5", rtol=rtol, atol=atol, options=options)
    else:
        raise ValueError(f"Unknown method {method!r}; choose 'rk4' or 'dopri5'.")
    odeint = torchdiffeq.odeint if mode == "odeint" else torchdiffeq.odeint_adjoint

    def solve(field: nn.Module, h0: torch.Tensor, span: torch.Tensor) -> torch.Tensor:
        return odeint(field, h0, span, **kwargs)[-1]

    return solve


class NCPSClassifier(nn.Module):
    """ncps's LTC (Lechner, Hasani et al.; `ncps.torch.LTC`, fully connected,
    fused semi-implicit step with `ode_unfolds` unfolds per input step) followed by
    a linear readout of its final output.

    **Arguments:**

    - `input_size`, `units`, `output_size`: sizes.
    - `ode_unfolds`: fused solver steps per input step (ncps's default is 6).
    - `seed`: seeds PyTorch's generator for ncps's initialisation.
    """

    def __init__(
        self, input_size: int, units: int, output_size: int, ode_unfolds: int, seed: int
    ):
        super().__init__()
        import ncps.torch

        torch.manual_seed(seed)
        self.rnn = ncps.torch.LTC(
            input_size, units, return_sequences=False, ode_unfolds=ode_unfolds
        )
        self.readout = nn.Linear(units, output_size)
        self.ode_unfolds = ode_unfolds
        self.num_cell_calls = 0
        # ncps calls `rnn_cell.forward` directly, so a forward hook never fires:
        # count the calls of the cell's solver on this instance instead.
        solve = self.rnn.rnn_cell._ode_solver

        def counted_solve(*args, **kwargs):
            self.num_cell_calls += 1
            return solve(*args, **kwargs)

        self.rnn.rnn_cell._ode_solver = counted_solve

    @property
    def num_evaluations(self) -> int:
        """Fused steps taken so far: `ode_unfolds` per call of the cell's solver."""
        return self.num_cell_calls * self.ode_unfolds

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        """Logits `(batch, output_size)` of `xs` of shape `(batch, length,
        input_size)`, one unit of time per input step."""
        output, _ = self.rnn(xs)
        return self.readout(output)


def set_threads(threads: int) -> None:
    """Make PyTorch use `threads` intra-op threads and one inter-op thread. Call it
    once, first thing in a fresh process (PyTorch refuses a late change)."""
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
