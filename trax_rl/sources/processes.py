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
from etils import epath
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from trax_rl import checkpoint

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


def writes_outputs() -> bool:
  """Whether this process writes output_dir (in a multi-host job: process
  0; the others read it on resume, and keep their own state apart)."""
  return jax.process_index() == 0


def process_dir(output_dir: str) -> epath.Path | None:
  """Where this process of a multi-host job keeps its own state (None for
  the chief and a single process)."""
  if jax.process_index() == 0:
    return None
  return epath.Path(output_dir) / 'processes' / str(jax.process_index())


def save(path: epath.Path, state: dict[str, Any], epoch: int) -> None:
  """Writes checkpoint `path` (atomically) of epoch `epoch`.

  In a multi-host job every process other than the chief writes its own
  state (its row of the learner, its envs and keys) under
  `processes/<index>/` first; the chief commits once all have (a
  barrier), so a resume gives every process back its own state.
  """
  own = process_dir(path.parent)
  job = jax.process_count() > 1
  if own is not None:
    checkpoint.save(own / f'checkpoint-{epoch}.pkl', state)
  if job:
    multihost_utils.sync_global_devices(f'trax_rl wrote {epoch}')
  if own is None:
    checkpoint.save(path, state)
  if job:  # Older process states are stale once the chief committed.
    multihost_utils.sync_global_devices(f'trax_rl saved {epoch}')
  if own is not None:
    keep = f'checkpoint-{epoch}.pkl'
    for old in own.glob('checkpoint-*.pkl'):
      if old.name != keep:
        old.unlink()


def load(path: epath.Path) -> tuple[epath.Path, dict[str, Any], bool]:
  """(path, checkpoint, forked) this process resumes from.

  A process other than the chief reads its own state of the chief's epoch;
  without one (a job grown since), it forks: it takes the chief's state
  and must draw envs and streams of its own (`forked` True).
  """
  ckpt = checkpoint.load(path)
  own = process_dir(path.parent)
  if own is None or 'epoch' not in ckpt:
    return path, ckpt, False
  mine = own / f'checkpoint-{int(ckpt["epoch"])}.pkl'
  if mine.exists():
    return mine, checkpoint.load(mine), False
  return path, ckpt, True
