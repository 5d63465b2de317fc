"""An output_dir's trajectory files: one per epoch, written once complete.

`trajectories/epoch_000012.pkl` holds the state dicts of epoch 12's
trajectories. A file is immutable once its epoch is complete; the agent's
checkpoint, written after it, says which epochs belong to the run.
"""

import os
from typing import Any

import jax
import numpy as np
from etils import epath

from trax_rl import checkpoint, types
from trax_rl import trajectory as trajectory_lib

DIRECTORY = 'trajectories'


def path(directory: str | os.PathLike, epoch: int) -> epath.Path:
  """The file of `epoch`'s trajectories in output_dir `directory`."""
  return epath.Path(directory) / DIRECTORY / f'epoch_{epoch:06d}.pkl'


def write(
  directory: str | os.PathLike,
  epoch: int,
  trajectories: list[trajectory_lib.Trajectory],
) -> None:
  """Writes `epoch`'s trajectories atomically."""
  checkpoint.save(
    path(directory, epoch), [t.state_dict() for t in trajectories]
  )


def read(
  directory: str | os.PathLike, epoch: int
) -> list[trajectory_lib.Trajectory]:
  """`epoch`'s trajectories as `write` wrote them."""
  states = checkpoint.load(path(directory, epoch))
  return [trajectory_lib.Trajectory.from_state_dict(s) for s in states]


def read_all(directory: str | os.PathLike) -> list[trajectory_lib.Trajectory]:
  """Every stored trajectory of an earlier run's output_dir, epoch by epoch.

  Raises:
    ValueError: the folder holds no trajectory files.
  """
  folder = epath.Path(directory) / DIRECTORY
  files = sorted(folder.glob('epoch_*.pkl')) if folder.exists() else []
  if not files:
    raise ValueError(
      f'initial_trajectories: no stored trajectories in {directory}'
    )
  result = []
  for f in files:
    result.extend(
      trajectory_lib.Trajectory.from_state_dict(s) for s in checkpoint.load(f)
    )
  return result


def as_rollout(trajectories: list[trajectory_lib.Trajectory], info: Any):
  """Stored trajectories as one `Rollout` `[T, M, ...]`, one per column.

  Each column holds one trajectory's steps from t = 0 (its valid prefix);
  a trajectory that was cut (neither terminated nor truncated) is closed as
  truncated, so that its last step bootstraps. `info`: one step's agent
  info (zeros where a trajectory recorded other or no info).
  """
  trajectories = [t for t in trajectories if t.n_steps]
  if not trajectories:
    raise ValueError('initial_trajectories: the trajectories hold no steps')
  n, m = max(t.n_steps for t in trajectories), len(trajectories)
  first = trajectories[0].state_dict()
  obs_shape, obs_dtype = (
    first['observations'].shape[1:],
    first['observations'].dtype,
  )
  action = np.asarray(first['actions'])
  fields = {
    'observation': np.zeros((n, m, *obs_shape), obs_dtype),
    'next_observation': np.zeros((n, m, *obs_shape), obs_dtype),
    'action': np.zeros((n, m, *action.shape[1:]), action.dtype),
    'reward': np.zeros((n, m), np.float32),
    'terminated': np.zeros((n, m), bool),
    'truncated': np.zeros((n, m), bool),
    'episode_return': np.zeros((n, m), np.float32),
    'valid': np.zeros((n, m), bool),
  }
  for j, t in enumerate(trajectories):
    s, k = t.state_dict(), t.n_steps
    fields['observation'][:k, j] = s['observations'][:k]
    fields['next_observation'][:k, j] = s['observations'][1:]
    fields['action'][:k, j] = s['actions']
    fields['reward'][:k, j] = s['rewards']
    fields['terminated'][k - 1, j] = t.terminated
    fields['truncated'][k - 1, j] = not t.terminated
    fields['episode_return'][k - 1, j] = t.total_return if t.done else 0.0
    fields['valid'][:k, j] = True
  agent_info = jax.tree.map(lambda x: np.zeros((n, m, *x.shape), x.dtype), info)
  return types.Rollout(agent_info=agent_info, **fields)
