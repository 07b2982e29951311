"""Checkpoints: atomic, checksummed saves of a pytree (a model and its optimiser
state), and loading the newest good one."""

import hashlib
import io
import json
import os
import shutil
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
from jaxtyping import PyTree

from ._errors import CheckpointError
from ._model import AbstractSequenceModel


_STATE = "state.eqx"
_META = "meta.json"
_MODELS = "models"
"""The metadata key of the options of the sequence models a checkpoint holds."""
_LEAVES = "leaves"
"""The metadata key of its leaves' paths, shapes and dtypes (`describe_leaves`)."""


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
    tell a damaged checkpoint from a good one, and the options of each sequence
    model in `tree` (`models`: [`ltc_jax.AbstractSequenceModel.options`][]), so
    that a load into a model built otherwise names the options that differ, and
    each leaf's path, shape and dtype (`leaves`), so that a load into another
    tree (say, the state of another optimiser) names the first leaf that
    differs. The newest `keep` checkpoints are kept. The temporary folders of
    saves that were interrupted (`step-*.tmp`) are removed first: the writer
    of a directory is its only one.

    **Returns:** the checkpoint's folder. Serialisation: `eqx.tree_serialise_leaves`.
    """
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    remove_interrupted_saves(directory)
    final = os.path.join(directory, f"step-{step:08d}")
    tmp = final + ".tmp"
    os.makedirs(tmp)
    state_path = os.path.join(tmp, _STATE)
    with open(state_path, "wb") as file:
        eqx.tree_serialise_leaves(file, tree)
        file.flush()
        os.fsync(file.fileno())
    with open(state_path, "rb") as file:
        digest = hashlib.sha256(file.read()).hexdigest()
    with open(os.path.join(tmp, _META), "w") as file:
        record = dict(meta, step=step, sha256=digest)
        record[_MODELS] = model_options(tree)
        record[_LEAVES] = describe_leaves(tree)
        json.dump(record, file, indent=2)
        file.flush()
        os.fsync(file.fileno())
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    for old in list_checkpoints(directory)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def remove_interrupted_saves(directory: str | os.PathLike) -> None:
    """Remove the temporary folders (`step-*.tmp`) that saves interrupted
    before their rename left under `directory`; complete checkpoints are not
    touched. Only the directory's writer may call it: another process's save
    in progress looks the same."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return
    for name in os.listdir(directory):
        if name.startswith("step-") and name.endswith(".tmp"):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


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


def model_options(tree: PyTree) -> list[dict]:
    """The options of each sequence model in `tree`
    ([`ltc_jax.AbstractSequenceModel.options`][]), in the order of its leaves."""

    def is_model(node):
        return isinstance(node, AbstractSequenceModel)

    nodes = jax.tree.leaves(tree, is_leaf=is_model)
    return [node.options() for node in nodes if is_model(node)]


def check_models_match(saved: list[dict] | None, like: PyTree, where: str) -> None:
    """Compare the options of the sequence models saved in `where` (`saved`, as
    `model_options` recorded them) with those of the models in `like`, option
    by option where both name it, in order. Where the two hold different
    numbers of models, only the first are compared: `like` may be a prefix of
    the tree saved (the model alone, or `(model, opt_state)` from a checkpoint
    of `fit`, which also holds the best model), which begins with the same
    model. Nothing is compared for a file written before the options were
    recorded (`saved` is `None`).

    **Raises:** [`ltc_jax.CheckpointError`][] naming each option that differs,
    with its value on disk and the value asked for.
    """
    asked = model_options(like)
    if saved is None:
        return
    if len(asked) != len(saved):
        # A prefix (the model alone, or (model, opt_state) of a fit checkpoint)
        # begins with the same model; past it, an optimiser state of another
        # kind would pair unlike arrays, named by the optimiser's own check.
        saved, asked = saved[:1], asked[:1]
    differences = []
    for on_disk, wanted in zip(saved, asked, strict=True):
        for name, value in wanted.items():
            if name in on_disk and on_disk[name] != value:
                text = f"{name} {on_disk[name]} on disk, {value} asked"
                if text not in differences:
                    differences.append(text)
    if differences:
        raise CheckpointError(
            f"{where} holds a model built with other options: "
            f"{'; '.join(differences)}. Build the model with the saved options "
            "to load it."
        )


def describe_leaves(tree: PyTree) -> list[list[str]]:
    """What `eqx.tree_serialise_leaves` writes of `tree`, in order: each array
    leaf as `[path, "<shape> <dtype>"]` and each Python number as `[path,
    "number"]`, whatever its type, which a load converts to the type asked for
    (paths as `jax.tree_util.keystr` gives them)."""
    described = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if eqx.is_array(leaf):
            kind = f"{tuple(leaf.shape)} {leaf.dtype}"
        elif isinstance(leaf, (bool, int, float, complex)):
            kind = "number"
        else:
            continue
        described.append([jax.tree_util.keystr(path), kind])
    return described


def _check_leaves(saved: list[list[str]] | None, like: PyTree, where: str) -> None:
    """Compare the leaves saved (`saved`, from `describe_leaves`; `None` for a
    checkpoint written before they were recorded: not checked) with `like`'s,
    position by position. `like` may be a prefix of the tree saved (the model
    alone, from a checkpoint of the model and its optimiser state), as
    `eqx.tree_deserialise_leaves` reads one.

    **Raises:** [`ltc_jax.CheckpointError`][] naming the first leaf whose
    shape, dtype or kind differs, or the first leaf asked for beyond those
    saved."""
    if saved is None:
        return
    asked = describe_leaves(like)
    hint = "Build it as it was built when saved (the same model and optimiser)."
    for position, (path, kind) in enumerate(asked):
        if position >= len(saved):
            raise CheckpointError(
                f"{where} holds {len(saved)} leaves; the tree asked for has more, "
                f"from {path} ({kind}) on. {hint}"
            )
        if saved[position][1] != kind:
            raise CheckpointError(
                f"{where} holds arrays that do not fit the tree asked for: "
                f"{saved[position][0]} is {saved[position][1]} on disk, where "
                f"{path} asked for is {kind}. {hint}"
            )


def deserialise_checked(
    file: str | os.PathLike | io.BufferedIOBase,
    like: PyTree,
    saved: list[dict] | None,
    where: str,
    before: Callable[[], None] | None = None,
    leaves: list[list[str]] | None = None,
) -> PyTree:
    """`eqx.tree_deserialise_leaves(file, like)`, after `check_models_match`
    has compared the models' options (`saved`) with `like`'s, `before()`, if
    given, has checked what else it checks, and the leaves recorded at the
    save (`leaves`, from `describe_leaves`), if given, have been compared with
    `like`'s.

    **Raises:** [`ltc_jax.CheckpointError`][] naming each option that differs;
    what `before` raises; naming the first leaf that differs from `leaves`;
    or, where neither was recorded and the arrays of `file` do not fit `like`
    (another shape, dtype or structure), with Equinox's description.
    """
    check_models_match(saved, like, where)
    if before is not None:
        before()
    _check_leaves(leaves, like, where)
    try:
        return eqx.tree_deserialise_leaves(file, like)
    except RuntimeError as error:  # Equinox: a leaf or tree that does not fit
        root = error
        while root.__cause__ is not None:  # Equinox chains one error per level
            root = root.__cause__
        detail = str(error) if root is error else f"{error}: {root!r}"
        raise CheckpointError(
            f"{where} holds arrays that do not fit the tree asked for ({detail}). "
            "Build it as it was built when saved to load it."
        ) from error


def _read(folder: str) -> tuple[dict, bytes]:
    """A checkpoint folder's metadata and state file, checked against the
    checksum. **Raises:** [`ltc_jax.CheckpointError`][] as `load_checkpoint`."""
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
    return meta, blob


def _restore(
    folder: str,
    meta: dict,
    blob: bytes,
    like: PyTree,
    check: Callable[[dict, str], None] | None = None,
) -> PyTree:
    """The tree of a checkpoint read by `_read`, shaped like `like`; `check`,
    if given, sees its metadata after the models' options are compared and
    before any array is read."""
    return deserialise_checked(
        io.BytesIO(blob),
        like,
        meta.get(_MODELS),
        folder,
        before=None if check is None else lambda: check(meta, folder),
        leaves=meta.get(_LEAVES),
    )


def load_checkpoint(checkpoint: str | os.PathLike, like: PyTree) -> tuple[PyTree, dict]:
    """Load one checkpoint folder written by [`ltc_jax.training.save_checkpoint`][].

    **Arguments:** `checkpoint`: the checkpoint's folder; `like`: a pytree of the
    same structure (e.g. a freshly built `(model, opt_state)`), or a prefix of
    it (the model alone; `(model, opt_state)` from a checkpoint of
    [`ltc_jax.fit`][], which holds `(model, opt_state, best_model)`), giving
    shapes and dtypes.

    **Returns:** `(tree, meta)`.

    **Raises:** [`ltc_jax.CheckpointError`][] naming the file if it is missing,
    truncated, or fails its checksum; naming each option that differs (e.g.
    `hidden_size 8 on disk, 16 asked`) if a sequence model in `like` was built
    with other options than the one saved, before any array is read; naming
    the array if the tree saved does not otherwise fit `like`.
    """
    folder = os.fspath(checkpoint)
    meta, blob = _read(folder)
    return _restore(folder, meta, blob, like), meta


def load_latest_checkpoint(
    directory: str | os.PathLike,
    like: PyTree,
    *,
    check: Callable[[dict, str], None] | None = None,
) -> tuple[PyTree, dict, list[str]]:
    """Load the newest usable checkpoint under `directory`, falling back to older
    ones past any that is truncated or corrupted.

    **Arguments:** `directory` and `like` as [`ltc_jax.training.load_checkpoint`][]
    takes a folder and `like`; `check`, optional, called as `check(meta,
    folder)` with the chosen checkpoint's metadata and folder before any of
    its arrays is read (and after its models' options are compared with
    `like`'s, so that a model built otherwise is named first), to refuse it
    by raising with a message that names what differs.

    **Returns:** `(tree, meta, skipped)`, `skipped` naming each damaged checkpoint
    passed over and why.

    **Raises:** [`ltc_jax.CheckpointError`][] if no checkpoint is usable, or as
    [`ltc_jax.training.load_checkpoint`][] if the newest intact one does not fit
    `like` (older ones are not tried: they hold the same model); whatever
    `check` raises.
    """
    skipped = []
    for checkpoint in reversed(list_checkpoints(directory)):
        try:
            meta, blob = _read(checkpoint)
        except CheckpointError as error:
            skipped.append(str(error))
            continue
        return _restore(checkpoint, meta, blob, like, check), meta, skipped
    detail = "; ".join(skipped) if skipped else "none found"
    raise CheckpointError(f"No usable checkpoint in {os.fspath(directory)} ({detail}).")
