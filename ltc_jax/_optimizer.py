"""The default optimiser: Adam(W), global-norm clipping, and a learning rate
that warms up, then decays over the run, stays constant, or restarts."""

import optax


def make_optimizer(
    learning_rate: float,
    total_steps: int | None,
    *,
    restart_steps: int | None = None,
    warmup_steps: int = 0,
    clip_norm: float | None = 1.0,
    weight_decay: float = 0.0,
) -> optax.GradientTransformation:
    """Adam(W) with global-norm gradient clipping and a warmup, then one of
    three schedules:

    - a run of known length (`total_steps`): cosine decay to 1% of the peak
        over `total_steps` (Loshchilov & Hutter 2017, without restarts);
    - a stream with no end (`total_steps=None`): constant at the peak, or,
        with `restart_steps`, warm restarts (SGDR, Loshchilov & Hutter 2017,
        "SGDR: Stochastic gradient descent with warm restarts", ICLR): cosine
        decay to 1% over `restart_steps`, then back to the peak, again and
        again. A schedule that ends would stop an online learner learning.

    **Arguments:**

    - `learning_rate`: peak learning rate.
    - `total_steps`: optimiser steps in the whole run (the schedule's length),
        or `None` for a stream.
    - `restart_steps`: with `total_steps=None`, steps between warm restarts
        (default `None`: constant).
    - `warmup_steps`: linear warmup from 0 (default none).
    - `clip_norm`: clip gradients to this global norm (default 1; the original
        write-up advises 1-5); `None` disables clipping.
    - `weight_decay`: decoupled weight decay (default 0: plain Adam).

    **Returns:** an `optax.GradientTransformation`.

    **Raises:** `ValueError` for a non-positive `learning_rate`, `total_steps`
    or `restart_steps`, a negative `warmup_steps`, or both `total_steps` and
    `restart_steps`.

    Source: `optax.adamw`, `optax.clip_by_global_norm`,
    `optax.warmup_cosine_decay_schedule`, `optax.cosine_decay_schedule` (Kingma
    & Ba 2015; Loshchilov & Hutter 2017, 2019).
    """
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be positive; got {learning_rate}.")
    for name, value in (("total_steps", total_steps), ("restart_steps", restart_steps)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be positive; got {value}.")
    if total_steps is not None and restart_steps is not None:
        raise ValueError(
            "Give total_steps (a run that decays once) or restart_steps (a stream "
            "with warm restarts, total_steps=None), not both."
        )
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be non-negative; got {warmup_steps}.")
    if total_steps is not None:
        schedule = optax.warmup_cosine_decay_schedule(
            init_value=0.0 if warmup_steps else learning_rate,
            peak_value=learning_rate,
            warmup_steps=warmup_steps,
            decay_steps=max(total_steps, warmup_steps + 1),
            end_value=learning_rate * 0.01,
        )
    else:
        if restart_steps is None:
            after_warmup = optax.constant_schedule(learning_rate)
        else:
            cycle = optax.cosine_decay_schedule(learning_rate, restart_steps, 0.01)

            def after_warmup(count):
                return cycle(count % restart_steps)

        warmup = optax.linear_schedule(0.0, learning_rate, max(warmup_steps, 1))
        schedule = optax.join_schedules([warmup, after_warmup], [warmup_steps])
    parts = [] if clip_norm is None else [optax.clip_by_global_norm(clip_norm)]
    parts.append(optax.adamw(schedule, weight_decay=weight_decay))
    return optax.chain(*parts)
