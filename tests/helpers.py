"""Test helpers: independent reference implementations and tolerant comparisons."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def mode_options(mode):
    """Options a gradient mode needs in a test that runs under `jit`: the windowed
    adjoint's number of windows (the time constants are not known there)."""
    return dict(windows=4) if mode == "windowed" else {}


def max_relative_error(x, y):
    """max |x - y| / max |y| over the inexact array leaves of two pytrees."""
    xs = [np.ravel(a) for a in jax.tree.leaves(eqx.filter(x, eqx.is_inexact_array))]
    ys = [np.ravel(a) for a in jax.tree.leaves(eqx.filter(y, eqx.is_inexact_array))]
    x_flat, y_flat = np.concatenate(xs), np.concatenate(ys)
    return float(np.max(np.abs(x_flat - y_flat)) / np.max(np.abs(y_flat)))


def numpy_ltc(h, x, w_in, w_rec, b, tau, A):
    """dh/dt = -(1/tau + f) h + f A, f = sigmoid(W_in x + W_rec h + b), in NumPy,
    one sequence at a time (h: (hidden,), x: (input,))."""
    f = 1.0 / (1.0 + np.exp(-(w_in @ x + w_rec @ h + b)))
    return -(1.0 / tau + f) * h + f * A


def numpy_solve_fixed(field_params, ts, xs, dt0, method):
    """Integrate one sequence from ts[0] to ts[-1] in ceil(T / dt0) equal steps with
    Euler, Heun or classic RK4, input linearly interpolated (np.interp): an
    implementation independent of diffrax and of ltc_jax."""
    w_in, w_rec, b, tau, A = (np.asarray(p) for p in field_params)
    duration = ts[-1] - ts[0]
    n = int(np.ceil(duration / dt0 * (1 - 64 * np.finfo(float).eps)))
    h_step = duration / n

    def x_at(t):
        return np.array([np.interp(t, ts, xs[:, c]) for c in range(xs.shape[1])])

    def f(t, h):
        return numpy_ltc(h, x_at(t), w_in, w_rec, b, tau, A)

    h = np.zeros(w_rec.shape[0])
    for k in range(n):
        t = ts[0] + k * h_step
        if method == "euler":
            h = h + h_step * f(t, h)
        elif method == "heun":
            k1 = f(t, h)
            k2 = f(t + h_step, h + h_step * k1)
            h = h + h_step * (k1 + k2) / 2
        elif method == "rk4":
            k1 = f(t, h)
            k2 = f(t + h_step / 2, h + h_step / 2 * k1)
            k3 = f(t + h_step / 2, h + h_step / 2 * k2)
            k4 = f(t + h_step, h + h_step * k3)
            h = h + h_step * (k1 + 2 * k2 + 2 * k3 + k4) / 6
        else:
            raise ValueError(method)
    return h


def field_params(cell):
    return (cell.weight_in, cell.weight_rec, cell.bias, cell.tau, cell.A)


def ragged_batch(key, batch, times, input_size, *, min_length=2):
    """Irregular, per-sequence times and lengths, with NaN in the padding."""
    k_dt, k_x, k_len, k_start = jax.random.split(key, 4)
    dts = jax.random.uniform(k_dt, (batch, times), minval=0.05, maxval=0.6)
    start = jax.random.uniform(k_start, (batch, 1), minval=-1.0, maxval=1.0)
    ts = start + jnp.cumsum(dts, axis=1)
    xs = jax.random.normal(k_x, (batch, times, input_size))
    lengths = jax.random.randint(k_len, (batch,), min_length, times + 1)
    pad = jnp.arange(times)[None] >= lengths[:, None]
    ts = jnp.where(pad, jnp.nan, ts)
    xs = jnp.where(pad[..., None], jnp.nan, xs)
    return ts, xs, lengths


def numpy_biophysical_params(cell):
    names = [
        "gleak",
        "vleak",
        "cm",
        "w",
        "sigma",
        "mu",
        "erev",
        "sensory_w",
        "sensory_sigma",
        "sensory_mu",
        "sensory_erev",
        "input_w",
        "input_b",
        "mask",
        "sensory_mask",
    ]
    return {name: np.asarray(getattr(cell, name), dtype=np.float64) for name in names}


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def numpy_original_fused_rnn_step(p, v, x, elapsed, unfolds, eps=1e-8):
    """The original update rule (ncps LTCCell._ode_solver), written out in NumPy
    for a batch: v (batch, units), x (batch, inputs), elapsed (batch,)."""
    x = x * p["input_w"] + p["input_b"]
    s_act = p["sensory_w"] * _sigmoid(
        p["sensory_sigma"] * (x[:, :, None] - p["sensory_mu"])
    )
    s_act = s_act * p["sensory_mask"]
    s_num = np.sum(s_act * p["sensory_erev"], axis=1)
    s_den = np.sum(s_act, axis=1)
    cm_t = p["cm"] / (elapsed[:, None] / unfolds)  # per-sequence time, broadcast right
    for _ in range(unfolds):
        w_act = p["w"] * _sigmoid(p["sigma"] * (v[:, :, None] - p["mu"])) * p["mask"]
        numerator = (
            cm_t * v
            + p["gleak"] * p["vleak"]
            + np.sum(w_act * p["erev"], axis=1)
            + s_num
        )
        denominator = cm_t + p["gleak"] + np.sum(w_act, axis=1) + s_den
        v = numerator / (denominator + eps)
    return v


def numpy_biophysical_derivative(p, v, x):
    x = x * p["input_w"] + p["input_b"]
    s_act = p["sensory_w"] * _sigmoid(
        p["sensory_sigma"] * (x[:, None] - p["sensory_mu"])
    )
    s_act = s_act * p["sensory_mask"]
    w_act = p["w"] * _sigmoid(p["sigma"] * (v[:, None] - p["mu"])) * p["mask"]
    current = (
        p["gleak"] * (p["vleak"] - v)
        + np.sum(w_act * (p["erev"] - v[None, :]), axis=0)
        + np.sum(s_act * (p["sensory_erev"] - v[None, :]), axis=0)
    )
    return current / p["cm"]


def biophysical_cell(key, units=6, inputs=3, outputs=2, kind="fc"):
    import ltc_jax

    wiring = ltc_jax.wirings.make_wiring(kind, units, outputs, inputs, seed=3)
    return ltc_jax.BiophysicalLTCVectorField(wiring, key=key)


def toy_ts_file(path, n, seed):
    """A two-class, two-channel `.ts` file of `n` series of 4 to 8 samples: class
    "up" rises, "down" falls. **Returns:** its path as a string."""
    rng = np.random.default_rng(seed)
    lines = ["@problemName toy", "@dimensions 2", "@classLabel true up down", "@data"]
    for i in range(n):
        length = rng.integers(4, 9)
        sign = 1 if i % 2 == 0 else -1
        channels = [np.cumsum(sign * rng.random(length)), rng.normal(size=length)]
        values = ":".join(",".join(f"{v:.4f}" for v in c) for c in channels)
        lines.append(f"{values}:{'up' if sign > 0 else 'down'}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def quiet_fit(model, data, integrator, *, epochs=1, batch_size=2, **kwargs):
    """`ltc_jax.fit` without a progress bar. Unless `optimizer` is given,
    `ltc_jax.training.make_optimizer(1e-2, steps)`, its schedule spanning the run's
    `steps` (`epochs` times the batches of `data`).
    **Returns:** what `fit` returns, `(model, history)`."""
    import ltc_jax

    if "optimizer" not in kwargs:
        steps = epochs * math.ceil(len(data) / batch_size)
        kwargs["optimizer"] = ltc_jax.training.make_optimizer(1e-2, steps)
    return ltc_jax.fit(
        model,
        data,
        integrator=integrator,
        epochs=epochs,
        batch_size=batch_size,
        progress=ltc_jax.training.NoFitProgress(),
        **kwargs,
    )
