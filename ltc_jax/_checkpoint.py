"""Checkpoints: atomic, checksummed saves of a pytree (a model and its optimiser
state), and loading the newest good one."""

import hashlib
import io
import json
import os
import shutil
from typing import Any

import equinox as eqx
from jaxtyping import PyTree

from ._errors import CheckpointError


_STATE = "state.eqx"
_META = "meta.json"


def save_checkpoint(
    directory: str | os.PathLike,
    step: int,
    tree: PyTree,
    meta: dict[str, Any],
    *,
    keep: int = 2,
) -> str:
    """Write `tree` (e.g. `(model, opt_state)`) and `meta` as checkpoint `step`,
    atomically.

    Both files go to a temporary folder that is renamed into place only when
    complete and flushed, so a crash mid-save leaves the previous checkpoints
    untouched. `meta` records the SHA-256 of the state file, so a later load can
    tell a damaged checkpoint from a good one. The newest `keep` checkpoints are
    kept.

    **Returns:** the checkpoint's folder. Serialisation: `eqx.tree_serialise_leaves`.
    """
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, f"step-{step:08d}")
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    state_path = os.path.join(tmp, _STATE)
    with open(state_path, "wb") as file:
        eqx.tree_serialise_leaves(file, tree)
        file.flush()
        os.fsync(file.fileno())
    with open(state_path, "rb") as file:
        digest = hashlib.sha256(file.read()).hexdigest()
    with open(os.path.join(tmp, _META), "w") as file:
        json.dump(dict(meta, step=step, sha256=digest), file, indent=2)
        file.flush()
        os.fsync(file.fileno())
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    for old in list_checkpoints(directory)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(directory: str | os.PathLike) -> list[str]:
    """Complete checkpoint folders under `directory`, oldest first."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    names = sorted(
        name
        for name in os.listdir(directory)
        if name.startswith("step-") and not name.endswith(".tmp")
    )
    return [os.path.join(directory, name) for name in names]


def parameter_digest(tree: PyTree) -> str:
    """SHA-256 of a pytree's serialised leaves (`eqx.tree_serialise_leaves`), as a
    hex string: equal digests mean bit-identical parameters. Public so that a
    resumed run can be checked against an uninterrupted one across processes (the
    main job records it as `parameters_sha256`)."""
    buffer = io.BytesIO()
    eqx.tree_serialise_leaves(buffer, tree)
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def load_checkpoint(checkpoint: str | os.PathLike, like: PyTree) -> tuple[PyTree, dict]:
    """Load one checkpoint folder written by [`ltc_jax.training.save_checkpoint`][].

    **Arguments:** `checkpoint`: the checkpoint's folder; `like`: a pytree of the
    same structure (e.g. a freshly built `(model, opt_state)`), giving shapes and
    dtypes.

    **Returns:** `(tree, meta)`.

    **Raises:** [`ltc_jax.CheckpointError`][] naming the file if it is missing,
    truncated, or fails its checksum.
    """
    folder = os.fspath(checkpoint)
    state_path = os.path.join(folder, _STATE)
    meta_path = os.path.join(folder, _META)
    try:
        with open(meta_path) as file:
            meta = json.load(file)
        with open(state_path, "rb") as file:
            blob = file.read()
    except (OSError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{folder}: unreadable checkpoint ({error}).") from error
    if hashlib.sha256(blob).hexdigest() != meta.get("sha256"):
        raise CheckpointError(
            f"{state_path}: checksum mismatch; the file is truncated or corrupted."
        )
    with open(state_path, "rb") as file:
        tree = eqx.tree_deserialise_leaves(file, like)
    return tree, meta


def load_latest_checkpoint(
    directory: str | os.PathLike, like: PyTree
) -> tuple[PyTree, dict, list[str]]:
    """Load the newest usable checkpoint under `directory`, falling back to older
    ones past any that is truncated or corrupted.

    **Returns:** `(tree, meta, skipped)`, `skipped` naming each damaged checkpoint
    passed over and why.

    **Raises:** [`ltc_jax.CheckpointError`][] if no checkpoint is usable.
    """
    skipped = []
    for checkpoint in reversed(list_checkpoints(directory)):
        try:
            tree, meta = load_checkpoint(checkpoint, like)
        except CheckpointError as error:
            skipped.append(str(error))
            continue
        return tree, meta, skipped
    detail = "; ".join(skipped) if skipped else "none found"
    raise CheckpointError(f"No usable checkpoint in {os.fspath(directory)} ({detail}).")
