"""Test helpers: independent reference implementations and tolerant comparisons."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def tree_allclose(x, y, *, rtol=1e-5, atol=1e-8):
    """Whether two pytrees have the same structure and allclose array leaves."""
    if jax.tree.structure(x) != jax.tree.structure(y):
        return False
    return all(
        np.allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)
        for a, b in zip(jax.tree.leaves(x), jax.tree.leaves(y), strict=True)
    )


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
    pad = jnp.arange(times) >= lengths[:, None]
    ts = jnp.where(pad, jnp.nan, ts)
    xs = jnp.where(pad[..., None], jnp.nan, xs)
    return ts, xs, lengths
