"""An output_dir's trajectory files: one per epoch, written once complete.

`trajectories/epoch_000012.pkl` holds the state dicts of epoch 12's
trajectories. A file is immutable once its epoch is complete; the agent's
checkpoint, written after it, says which epochs belong to the run.
"""

import os

from etils import epath

from trax_rl import checkpoint
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


def remove_all_but(directory: str | os.PathLike, epochs: list[int]) -> None:
  """Deletes the trajectory files of epochs not in `epochs`."""
  folder = epath.Path(directory) / DIRECTORY
  if not folder.exists():
    return
  keep = {path(directory, e).name for e in epochs}
  for f in folder.glob('epoch_*.pkl'):
    if f.name not in keep:
      f.unlink()
