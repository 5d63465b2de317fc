"""A learner across hosts: `jax.distributed` and a global data mesh.

One process per host. Each process brings its own share of every batch
(its local rows); the update is one jitted program over the global batch,
sharded along the 'data' axis of a mesh of every device of every process,
with the train state replicated. XLA inserts the cross-process reduction
of the gradients (no `shard_map` + `pmean`, whose gradient of a replicated
input comes out doubled). Process 0 is the chief: it publishes parameters
to rollout actors and writes checkpoints.
"""

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from trax_rl import validation
from trax_rl.supervised import sharding


def initialize(
  coordinator_address: str,
  num_processes: int,
  process_id: int,
  bind_address: str | None = None,
) -> None:
  """Joins the job: one call per process, before any other JAX use.

  Args:
    coordinator_address: 'host:port' of process 0 (e.g. '127.0.0.1:12345').
    num_processes: processes in the job (one per host).
    process_id: this process's index, in [0, num_processes).
    bind_address: where process 0's coordinator listens; None: the
      coordinator address itself when it is on loopback (JAX would listen
      on every interface), else JAX's default.

  Raises:
    ValueError: on a bad count or index.
  """
  validation.check_count('num_processes', num_processes, 1)
  if not 0 <= process_id < num_processes:
    raise ValueError(
      f'process_id must be in [0, {num_processes}), got {process_id}'
    )
  if bind_address is None and coordinator_address.startswith(
    ('127.', 'localhost:')
  ):
    bind_address = coordinator_address
  jax.distributed.initialize(
    coordinator_address=coordinator_address,
    num_processes=num_processes,
    process_id=process_id,
    coordinator_bind_address=bind_address,
  )


def is_chief() -> bool:
  """Whether this process publishes parameters and writes checkpoints."""
  return jax.process_index() == 0


def global_mesh() -> Mesh:
  """A one-axis 'data' mesh over the devices of every process."""
  return Mesh(np.asarray(jax.devices()), (sharding.DATA_AXIS,))


def replicate(tree: Any, mesh: Mesh) -> Any:
  """Global arrays replicated on every device; each process passes a copy."""
  spec = sharding.replicated(mesh)
  return jax.tree.map(
    lambda x: jax.make_array_from_process_local_data(spec, np.asarray(x)),
    tree,
  )


def shard_local_batch(batch: Any, mesh: Mesh, batch_axis: int = 0) -> Any:
  """The global batch whose rows are every process's local rows, in order.

  Leaves without a batch axis (scalars) are replicated.
  """
  spec = NamedSharding(
    mesh, PartitionSpec(*([None] * batch_axis), sharding.DATA_AXIS)
  )
  replicated = sharding.replicated(mesh)

  def put(x):
    x = np.asarray(x)
    where = replicated if x.ndim <= batch_axis else spec
    return jax.make_array_from_process_local_data(where, x)

  return jax.tree.map(put, batch)


def local_copy(tree: Any) -> Any:
  """This process's copy of replicated global arrays, as numpy."""
  return jax.tree.map(lambda x: np.asarray(x.addressable_data(0)), tree)


class MultiHostUpdate:
  """`update(state, local_batch)` on the global mesh, state replicated."""

  def __init__(
    self,
    update_fn: Callable[[Any, Any], tuple[Any, Any]],
    mesh: Mesh | None = None,
    batch_axis: int = 0,
  ):
    """Jits the update once.

    Args:
      update_fn: pure `update(state, batch) -> (state, extra)`, e.g. from
        `supervised.update.make_update_fn`.
      mesh: the global mesh (default `global_mesh()`).
      batch_axis: the batch axis of every batch leaf.
    """
    self._mesh = mesh or global_mesh()
    self._batch_axis = batch_axis
    replicated = sharding.replicated(self._mesh)

    def update(state, batch):
      state, extra = update_fn(state, batch)
      return jax.lax.with_sharding_constraint(state, replicated), extra

    self._update = jax.jit(update)

  @property
  def mesh(self) -> Mesh:
    return self._mesh

  def __call__(self, state: Any, local_batch: Any) -> tuple[Any, Any]:
    """Updates the (global, replicated) state on this process's rows."""
    batch = shard_local_batch(local_batch, self._mesh, self._batch_axis)
    return self._update(state, batch)
