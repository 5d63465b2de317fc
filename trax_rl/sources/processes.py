"""The process axis: the learners of a multi-host job as one global array.

With `train_rl.multihost`, every process of a `jax.distributed` job runs
the same program on its own envs: its learner (its replay or ring, the
same parameters as every other's) is one row of a global array with a
leading 'process' axis, one row per process, each on that process's first
device. The program's `train` is vmapped over that axis with the axis
named, so its updates average their gradients over the processes (XLA
reduces across hosts) and a replay's rate limiter holds for all tables
as one; every process keeps exactly its own row on the host (`local`).
"""

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = 'process'


def sharding() -> NamedSharding:
  """One row per process, on each process's first local device."""
  devices = [
    min((d for d in jax.devices() if d.process_index == p), key=lambda d: d.id)
    for p in range(jax.process_count())
  ]
  return NamedSharding(Mesh(np.array(devices), (AXIS,)), PartitionSpec(AXIS))


def to_global(local: Any, placement: NamedSharding) -> Any:
  """This process's pytree as its row of global arrays `[P, ...]`."""
  return jax.tree.map(
    lambda x: jax.make_array_from_process_local_data(
      placement, np.asarray(x)[None]
    ),
    local,
  )


def local(tree: Any) -> Any:
  """This process's row of global arrays (numpy; leaves without the axis)."""

  def row(x):
    shard = x.addressable_shards[0].data
    return np.asarray(shard)[0]

  return jax.tree.map(row, tree)
