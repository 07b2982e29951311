"""Data parallelism on JAX's own runtime: a one-axis device mesh, batches split
over it, everything else replicated; XLA inserts the gradient reduction.

Two traps of JAX 0.10 with diffrax 0.7.2 shape this module:

- `jax.make_mesh` gives its axes `AxisType.Explicit` by default, under which
  diffrax's solve fails with a `ShardingTypeError`; `data_mesh` asks for
  `AxisType.Auto`, leaving the propagation of shardings to XLA.
- `shard_map` fails with diffrax's `RecursiveCheckpointAdjoint`; this module
  never uses it: the step is the single-device program, compiled for sharded
  inputs (`jax.jit`'s automatic partitioning).

Within one process arrays move with `jax.device_put`; across several
(`jax.distributed`) each is placed with `jax.make_array_from_callback` from its
host value, each process supplying the rows its own devices hold.
"""

import abc
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec
from jaxtyping import PyTree


DATA_AXIS = "data"
"""The name of the mesh axis a batch is split over."""


def data_mesh(devices: int | Sequence[jax.Device] | None = None) -> Mesh:
    """A one-axis device mesh, axis `"data"`, for data-parallel training with
    [`ltc_jax.fit`][] and [`ltc_jax.evaluate`][].

    **Arguments:** `devices`: `None` (default) for every device of the default
    backend, over all processes of a `jax.distributed` run; an int `n` for the
    first `n` of them; or a sequence of `jax.Device`s.

    **Returns:** a `jax.sharding.Mesh` whose axis has type `AxisType.Auto` (the
    default `Explicit` type of `jax.make_mesh` makes diffrax's solve fail).

    **Raises:** `ValueError` for a count below 1 or above the devices there
    are, or an empty sequence.
    """
    every = jax.devices()
    if devices is None:
        chosen = every
    elif isinstance(devices, int):
        if not 1 <= devices <= len(every):
            raise ValueError(
                f"devices must lie in [1, {len(every)}] (the {jax.default_backend()} "
                f"devices there are); got {devices}."
            )
        chosen = every[:devices]
    else:
        chosen = list(devices)
        if not chosen:
            raise ValueError("devices is an empty sequence.")
    return Mesh(np.asarray(chosen), (DATA_AXIS,), axis_types=(AxisType.Auto,))


def check_divides(batch_size: int, mesh: Mesh) -> None:
    """**Raises:** `ValueError` unless `batch_size` divides into equal shares
    over the mesh's devices."""
    if batch_size % mesh.size:
        raise ValueError(
            f"batch_size={batch_size} does not divide over the mesh's {mesh.size} "
            f"devices; choose a multiple of {mesh.size}."
        )


def _host(leaf) -> np.ndarray:
    """A leaf's whole value on this host: of a replicated global array, its
    first local copy; of one split over several processes, gathered from all
    of them (`multihost_utils.process_allgather`)."""
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
        if leaf.sharding.is_fully_replicated:
            return np.asarray(leaf.addressable_data(0))
        return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))
    return np.asarray(leaf)


def _place(tree: PyTree, sharding_of) -> PyTree:
    """Each array leaf placed with the sharding `sharding_of(leaf)` gives it:
    within one process by `jax.device_put` (device to device, no copy through
    the host); across processes from each process's host value."""
    several = jax.process_count() > 1

    def place(leaf):
        if not eqx.is_array(leaf):
            return leaf
        if not several:
            return jax.device_put(leaf, sharding_of(leaf))
        value = _host(leaf)
        return jax.make_array_from_callback(
            value.shape, sharding_of(value), lambda index: value[index]
        )

    return jax.tree.map(place, tree)


def replicate(tree: PyTree, mesh: Mesh) -> PyTree:
    """Every array leaf of `tree` (a model, an optimiser state) copied to each
    device of `mesh`, for a step compiled with `jax.jit` or `eqx.filter_jit` on
    a batch from [`ltc_jax.training.shard_batch`][]. In a multi-process run every
    process must pass the same values. Non-array leaves pass through.

    **Returns:** `tree` with each array a global `jax.Array`, shape and dtype
    unchanged."""
    sharding = NamedSharding(mesh, PartitionSpec())
    return _place(tree, lambda value: sharding)


def shard_batch(tree: PyTree, mesh: Mesh, batch_size: int) -> PyTree:
    """The array leaves of `tree` (a [`ltc_jax.Batch`][], say) whose leading
    axis is the batch, of length `batch_size`, split over the mesh's `"data"`
    axis; the others (a shared time grid, say) replicated. A leaf is taken to be
    per sequence when its leading axis has length `batch_size` (a shared grid
    of exactly that many times is split too, which moves data, not results).
    Splitting is placement only: under `jax.jit` the results are those of the
    unsplit batch, to round-off in the reduction order. With
    [`ltc_jax.training.make_train_step`][] and a [`ltc_jax.training.replicate`][]d model
    this is `fit`'s data-parallel step.

    **Returns:** `tree` with each array a global `jax.Array`, shape and dtype
    unchanged.

    **Raises:** `ValueError` if `batch_size` does not divide over the mesh."""
    check_divides(batch_size, mesh)
    split = NamedSharding(mesh, PartitionSpec(DATA_AXIS))
    whole = NamedSharding(mesh, PartitionSpec())

    def sharding_of(value):
        return split if value.ndim and value.shape[0] == batch_size else whole

    return _place(tree, sharding_of)


def to_host(tree: PyTree) -> PyTree:
    """Array leaves as arrays on this process's default device, holding their
    whole value (of a replicated global array, its local copy): for Python
    conversion and for writing."""
    return jax.tree.map(lambda x: jnp.asarray(_host(x)) if eqx.is_array(x) else x, tree)


class AbstractPlacement(eqx.Module):
    """Where training puts its arrays: the model and optimiser state, each
    batch, and the results read back on the host. [`ltc_jax.train_on`][],
    [`ltc_jax.fit`][] and [`ltc_jax.evaluate`][] place everything through one,
    and never branch on devices themselves.
    """

    @property
    @abc.abstractmethod
    def device_count(self) -> int:
        """The devices a step runs on."""

    def check_batch_size(self, batch_size: int) -> None:
        """**Raises:** `ValueError` if batches of `batch_size` cannot be placed."""

    @abc.abstractmethod
    def place(self, tree: PyTree) -> PyTree:
        """The model, optimiser state or training state where the step runs."""

    @abc.abstractmethod
    def place_batch(self, batch: PyTree) -> PyTree:
        """A batch where the step runs."""

    @abc.abstractmethod
    def to_host(self, tree: PyTree) -> PyTree:
        """Arrays back on this process's default device, whole, for Python
        conversion and for writing."""


class SingleDevice(AbstractPlacement):
    """Everything on JAX's default device, as it comes (the default)."""

    @property
    def device_count(self):
        return 1

    def place(self, tree):
        return tree

    def place_batch(self, batch):
        return batch

    def to_host(self, tree):
        return tree


class DataParallel(AbstractPlacement):
    """Data parallelism over a device mesh: each batch split over the mesh's
    `"data"` axis ([`ltc_jax.training.shard_batch`][]), the model and optimiser
    state replicated ([`ltc_jax.training.replicate`][]). The step is the same
    program, compiled for those placements, with XLA reducing the gradient over
    the devices: results are those of one device's run on the same batches, to
    round-off in the order of the reduction. Under `jax.distributed` each
    process places only the rows its devices hold.

    **Fields:** `mesh`, a `jax.sharding.Mesh` with a `"data"` axis
    ([`ltc_jax.training.data_mesh`][]).
    """

    mesh: Mesh = eqx.field(static=True)

    @property
    def device_count(self):
        return self.mesh.size

    def check_batch_size(self, batch_size):
        check_divides(batch_size, self.mesh)

    def place(self, tree):
        return replicate(tree, self.mesh)

    def place_batch(self, batch):
        return shard_batch(batch, self.mesh, batch.weights.shape[0])

    def to_host(self, tree):
        return to_host(tree)
