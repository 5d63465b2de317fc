"""Data-parallel updates across local devices with `jax.sharding`.

A learner with n devices keeps its train state replicated on all of them
and splits every batch along its batch axis into n equal shards. The update
stays one jitted program over the global batch: XLA partitions it, each
device computes the loss and gradients of its shard, and the gradients are
all-reduced (averaged over the whole batch) before the optimizer step, so
every replica applies the same update. The result equals the one-device
update up to float summation order, including batch-global quantities such
as the max-normalized importance weights.
"""

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

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
  """A one-axis mesh ('data') over the first n_devices local devices."""
  return Mesh(np.asarray(jax.local_devices()[:n_devices]), (DATA_AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
  """The sharding that puts a full copy on every device of the mesh."""
  return NamedSharding(mesh, PartitionSpec())


def replicate(tree: Any, mesh: Mesh) -> Any:
  """Copies every leaf of `tree` to all devices of `mesh`."""
  return jax.device_put(tree, replicated(mesh))


def shard_batch(batch: Any, mesh: Mesh, batch_axis: int = 0) -> Any:
  """Splits every leaf of `batch` along `batch_axis` across the mesh.

  Args:
    batch: a pytree of arrays; leaves with fewer than batch_axis + 1 axes
      (scalars) are replicated.
    mesh: the mesh from `make_mesh`.
    batch_axis: the axis to split (1 when updates are stacked [n, B, ...]).

  Returns:
    The batch as sharded device arrays.

  Raises:
    ValueError: a batch axis does not divide evenly among the devices.
  """
  n = mesh.devices.size
  spec = PartitionSpec(*([None] * batch_axis), DATA_AXIS)

  def put(x):
    x = np.asarray(x) if not isinstance(x, jax.Array) else x
    if x.ndim <= batch_axis:
      return jax.device_put(x, replicated(mesh))
    if x.shape[batch_axis] % n:
      raise ValueError(
        f'batch size {x.shape[batch_axis]} does not divide among {n} '
        f'devices: use a batch size that is a multiple of {n}'
      )
    return jax.device_put(x, NamedSharding(mesh, spec))

  return jax.tree.map(put, batch)


def to_device(tree: Any, device: jax.Device | None = None) -> Any:
  """A copy of `tree` on one device (default the first local one)."""
  return jax.device_put(tree, device or jax.local_devices()[0])


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

    def update(state, batch):
      state, extra = update_fn(state, batch)
      return jax.lax.with_sharding_constraint(state, sharding), extra

    self._update = jax.jit(update)

  @property
  def mesh(self) -> Mesh:
    return self._mesh

  def __call__(self, state: Any, batch: Any) -> tuple[Any, Any]:
    return self._update(state, shard_batch(batch, self._mesh, self._batch_axis))

  def lower(self, state: Any, batch: Any):
    return self._update.lower(
      state, shard_batch(batch, self._mesh, self._batch_axis)
    )
