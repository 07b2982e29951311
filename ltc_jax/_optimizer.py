"""The default optimiser: Adam(W), global-norm clipping, warmup and cosine decay."""

import optax


def make_optimizer(
    learning_rate: float,
    total_steps: int,
    *,
    warmup_steps: int = 0,
    clip_norm: float | None = 1.0,
    weight_decay: float = 0.0,
) -> optax.GradientTransformation:
    """Adam(W) with global-norm gradient clipping and a warmup + cosine schedule.

    **Arguments:**

    - `learning_rate`: peak learning rate.
    - `total_steps`: optimiser steps in the whole run (the schedule's length).
    - `warmup_steps`: linear warmup from 0 (default none).
    - `clip_norm`: clip gradients to this global norm (default 1; the original
        write-up advises 1-5); `None` disables clipping.
    - `weight_decay`: decoupled weight decay (default 0: plain Adam).

    **Returns:** an `optax.GradientTransformation`; the learning rate decays to 1%
    of its peak over `total_steps`.

    **Raises:** `ValueError` for a non-positive `learning_rate` or `total_steps`,
    or a negative `warmup_steps`.

    Source: `optax.adamw`, `optax.clip_by_global_norm`,
    `optax.warmup_cosine_decay_schedule` (Kingma & Ba 2015; Loshchilov & Hutter 2019).
    """
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be positive; got {learning_rate}.")
    if total_steps < 1:
        raise ValueError(f"total_steps must be positive; got {total_steps}.")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be non-negative; got {warmup_steps}.")
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0 if warmup_steps else learning_rate,
        peak_value=learning_rate,
        warmup_steps=warmup_steps,
        decay_steps=max(total_steps, warmup_steps + 1),
        end_value=learning_rate * 0.01,
    )
    parts = [] if clip_norm is None else [optax.clip_by_global_norm(clip_norm)]
    parts.append(optax.adamw(schedule, weight_decay=weight_decay))
    return optax.chain(*parts)
