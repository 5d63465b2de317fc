"""Data-parallel updates across local devices with `jax.sharding`.

A learner with n devices keeps its train state replicated on all of them
and splits every batch along its batch axis into n equal shards. The update
stays one jitted program over the global batch: XLA partitions it, each
device computes the loss and gradients of its shard, and the gradients are
all-reduced (averaged over the whole batch) before the optimizer step, so
every replica applies the same update. The result equals the one-device
update up to float summation order, including batch-global quantities such
as the max-normalized importance weights.

In a multi-host job (`jax.distributed`, more than one process) the mesh
spans every process's devices: each process passes its own local rows of
every batch (the global batch is their concatenation in process order) and
the same copy of the state, and reads back its own rows of per-item
outputs (`to_local`).
"""

import zlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from trax_rl import compile_options

DATA_AXIS = 'data'
ALL_DEVICES = -1  # `n_devices` value meaning every local device.


def resolve_n_devices(n_devices: int | None) -> int:
  """The number of local devices a learner uses.

  Args:
    n_devices: None or 1 (one device, the default), k > 1, or -1 for all
      local devices.

  Returns:
    The count, in [1, number of local devices].

  Raises:
    ValueError: n_devices is not one of the above or exceeds the devices.
  """
  available = jax.local_device_count()
  if n_devices is None:
    return 1
  if isinstance(n_devices, bool) or not isinstance(n_devices, int):
    raise ValueError(f'n_devices must be an int or None, got {n_devices!r}')
  if n_devices == ALL_DEVICES:
    return available
  if not 1 <= n_devices <= available:
    raise ValueError(
      f'n_devices must be in [1, {available}] (the local devices) or -1 for '
      f'all of them, got {n_devices}'
    )
  return n_devices


def make_mesh(n_devices: int) -> Mesh:
  """A one-axis mesh ('data') over the first n_devices local devices.

  In a multi-host job: over the first n_devices local devices of every
  process, in process order.
  """
  devices = [
    d
    for p in range(jax.process_count())
    for d in [d for d in jax.devices() if d.process_index == p][:n_devices]
  ]
  return Mesh(np.asarray(devices), (DATA_AXIS,))


def is_multi_process(mesh: Mesh) -> bool:
  """Whether the mesh holds devices of other processes."""
  return len({d.process_index for d in mesh.devices.flat}) > 1


def replicated(mesh: Mesh) -> NamedSharding:
  """The sharding that puts a full copy on every device of the mesh."""
  return NamedSharding(mesh, PartitionSpec())


def replicate(tree: Any, mesh: Mesh) -> Any:
  """Copies every leaf of `tree` to all devices of `mesh`.

  Across processes, each process passes the same tree (not checked).
  """
  if not is_multi_process(mesh):
    return jax.device_put(tree, replicated(mesh))
  spec = replicated(mesh)
  return jax.tree.map(
    lambda x: jax.make_array_from_process_local_data(spec, _host(x)), tree
  )


def _host(x: Any) -> np.ndarray:
  """x as numpy; a global array by its copy on this process."""
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    x = x.addressable_data(0)
  return np.asarray(x)


def shard_batch(batch: Any, mesh: Mesh, batch_axis: int = 0) -> Any:
  """Splits every leaf of `batch` along `batch_axis` across the mesh.

  Args:
    batch: a pytree of arrays; leaves with fewer than batch_axis + 1 axes
      (scalars) are replicated.
    mesh: the mesh from `make_mesh`.
    batch_axis: the axis to split (1 when updates are stacked [n, B, ...]).

  Returns:
    The batch as sharded device arrays. Across processes, `batch` is this
    process's rows and every process must pass the same shapes.

  Raises:
    ValueError: a batch axis does not divide evenly among the devices, or
      the processes' batches differ in shape.
  """
  multi = is_multi_process(mesh)
  if multi:
    check_same_shapes(batch)
  # Rows of one process go to its own devices.
  n = mesh.devices.size // (jax.process_count() if multi else 1)
  spec = PartitionSpec(*([None] * batch_axis), DATA_AXIS)

  def put(x):
    if multi:
      x = _host(x)
    elif not isinstance(x, jax.Array):
      x = np.asarray(x)
    where = replicated(mesh)
    if x.ndim > batch_axis:
      if x.shape[batch_axis] % n:
        raise ValueError(
          f'batch size {x.shape[batch_axis]} does not divide among {n} '
          f'devices: use a batch size that is a multiple of {n}'
        )
      where = NamedSharding(mesh, spec)
    if multi:
      return jax.make_array_from_process_local_data(where, x)
    return jax.device_put(x, where)

  return jax.tree.map(put, batch)


def check_same_shapes(batch: Any) -> None:
  """Raises unless every process passes a batch of the same shapes.

  Programs compiled for different shapes would pair their collectives
  anyway and reduce wrong numbers without an error, so each batch's shapes
  are compared first: one all-gather of a checksum (about 3 ms per update
  between two CPU processes on loopback).

  Raises:
    ValueError: the shapes differ between processes.
  """
  shapes = [
    (np.shape(x), np.result_type(x).str) for x in jax.tree.leaves(batch)
  ]
  mine = np.uint32(zlib.crc32(repr(shapes).encode()))  # No x64 needed.
  every = np.asarray(multihost_utils.process_allgather(mine)).ravel()
  if np.any(every != mine):
    raise ValueError(
      f'process {jax.process_index()} has batch shapes {shapes} and another '
      'process other ones: every process must pass the same batch shapes '
      '(e.g. fixed slice lengths) and the same number of updates'
    )


def gather_ints(values: Sequence[int]) -> np.ndarray:
  """Every process's `values`: an int array `[processes, len(values)]`.

  One all-gather (int32: JAX's default without x64); with one process,
  no collective.
  """
  mine = np.asarray(values, np.int32)
  if jax.process_count() == 1:
    return mine[None]
  every = multihost_utils.process_allgather(mine)
  return np.asarray(every).reshape(jax.process_count(), len(mine))


def to_device(tree: Any, device: jax.Device | None = None) -> Any:
  """A copy of `tree` on one device (default the first local one).

  Leaves replicated across processes give this process's copy.
  """
  device = device or jax.local_devices()[0]

  def put(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      x = x.addressable_data(0)
    return jax.device_put(x, device)

  return jax.tree.map(put, tree)


def to_local(tree: Any, mesh: Mesh) -> Any:
  """This process's part of an update's outputs, as local arrays.

  Replicated leaves (metrics) give this process's copy; leaves sharded
  over the mesh (per-item priorities) give this process's rows, in the
  order it passed them to `shard_batch`.
  """

  def local(x):
    if not isinstance(x, jax.Array) or x.is_fully_addressable:
      return x
    if x.is_fully_replicated:
      return x.addressable_data(0)
    return multihost_utils.global_array_to_host_local_array(
      x, mesh, x.sharding.spec
    )

  return jax.tree.map(local, tree)


class DataParallelUpdate:
  """Jits `update(state, batch) -> (state, extra)` for a replicated state.

  Calling it shards the batch (`shard_batch`), runs the update and keeps the
  new state replicated; `lower` compiles it the same way.
  """

  def __init__(
    self,
    update_fn: Callable[[Any, Any], tuple[Any, Any]],
    mesh: Mesh,
    batch_axis: int = 0,
  ):
    self._mesh = mesh
    self._batch_axis = batch_axis
    sharding = replicated(mesh)
    by_row = NamedSharding(
      mesh, PartitionSpec(*([None] * batch_axis), DATA_AXIS)
    )

    def rows_or_copy(x):
      # Per-item outputs stay with the rows they came from (`to_local`).
      return by_row if x.ndim > batch_axis else sharding

    def update(state, batch):
      state, extra = update_fn(state, batch)
      if is_multi_process(mesh):
        extra = jax.lax.with_sharding_constraint(
          extra, jax.tree.map(rows_or_copy, extra)
        )
      return jax.lax.with_sharding_constraint(state, sharding), extra

    self._update = compile_options.jit(update)

  @property
  def mesh(self) -> Mesh:
    return self._mesh

  def __call__(self, state: Any, batch: Any) -> tuple[Any, Any]:
    return self._update(state, shard_batch(batch, self._mesh, self._batch_axis))

  def lower(self, state: Any, batch: Any):
    return self._update.lower(
      state, shard_batch(batch, self._mesh, self._batch_axis)
    )
