"""An agent's checkpoint: what it holds, how it is written and restored.

`checkpoint.pkl` in the output_dir is the commit point of an epoch: the
task's trajectory files are written first, then this file atomically
(`checkpoint.save`), so a run killed at any moment resumes from the last
complete epoch. `Agent` inherits this; subclasses add their state through
`state_dict` / `load_state_dict`.

In a multi-host job (`train_rl.multihost`) the chief (process 0) writes
`checkpoint.pkl`; every other process writes its own state (its envs,
replay table, random streams) to `processes/<index>/checkpoint-<epoch>.pkl`
first, and the chief commits only once all have (a barrier), so a resume
gives every process back its own state at the committed epoch.
"""

import jax
import numpy as np
from etils import epath
from jax.experimental import multihost_utils

from trax_rl import checkpoint, metrics

CHECKPOINT_FILE = 'checkpoint.pkl'
PROCESSES_DIR = 'processes'


def writes_outputs() -> bool:
  """Whether this process writes output_dir (in a multi-host job: process 0).

  The other processes of a multi-host job read it on resume, never write.
  """
  return jax.process_index() == 0


def process_dir(output_dir: str) -> epath.Path | None:
  """Where this process of a multi-host job keeps its own state.

  None for the chief and in a single-process run: their state is the
  checkpoint itself.
  """
  if jax.process_index() == 0:
    return None
  return epath.Path(output_dir) / PROCESSES_DIR / str(jax.process_index())


def _process_checkpoint(directory: epath.Path, epoch: int) -> epath.Path:
  return directory / f'checkpoint-{epoch}.pkl'


class Checkpointing:
  """`save` and `restore` of an `Agent`'s whole state."""

  @property
  def restored_process_state(self) -> bool:
    """Whether restore loaded this process's own multi-host state."""
    return self._restored_process_state

  def _checkpoint_path(self) -> epath.Path:
    return epath.Path(self._output_dir) / CHECKPOINT_FILE

  def save(self) -> None:
    """Writes the full state; the checkpoint file is the commit point."""
    if self._output_dir is None:
      raise ValueError('save() needs an output_dir')
    own = process_dir(self._output_dir)
    directory = own or epath.Path(self._output_dir)
    task_state = self._task.save_to_dir(directory)
    state = {
      'agent': type(self).__name__,
      'epoch': self._epoch,
      'avg_returns': self._avg_returns,
      'avg_returns_temperatures': [
        [t, s, v]
        for t, d in self._avg_returns_temperatures.items()
        for s, v in d.items()
      ],
      'rng': self._rng.bit_generator.state,
      'key': np.asarray(self._key),
      'act_keys': [np.asarray(k) for k in self._act_keys],
      'act_counts': list(self._act_counts),
      'task': task_state,
      'state': self.state_dict(),
      'device': None if self._device is None else self._device.state_dict(),
    }
    job = jax.process_count() > 1
    if own is not None:
      checkpoint.save(_process_checkpoint(own, self._epoch), state)
    if job:  # The chief commits once every process wrote its state.
      multihost_utils.sync_global_devices(f'trax_rl wrote {self._epoch}')
    if own is None:
      checkpoint.save(self._checkpoint_path(), state)
    if job:  # Older process states are stale once the chief committed.
      multihost_utils.sync_global_devices(f'trax_rl saved {self._epoch}')
    if own is not None:
      keep = _process_checkpoint(own, self._epoch).name
      for old in own.glob('checkpoint-*.pkl'):
        if old.name != keep:
          old.unlink()
    self._task.remove_stale_files(directory)

  def restore(self) -> bool:
    """Loads the checkpoint in output_dir, once (the constructor calls it).

    Returns:
      True if a checkpoint was loaded, now or by an earlier call.

    Raises:
      CheckpointError: the checkpoint is unreadable or of another agent.
    """
    if self._restored or self._output_dir is None:
      return self._loaded_checkpoint
    self._restored = True
    # Temp files of writes a crash cut short are never needed again.
    out = epath.Path(self._output_dir)
    own = process_dir(self._output_dir)
    folder = own or out  # This process's own files.
    for stale in [*folder.glob('.*.tmp*'), *folder.glob('*/.*.tmp*')]:
      stale.unlink()
    path = self._checkpoint_path()
    if not path.exists():
      return False
    ckpt = checkpoint.load(path)
    directory = out
    if own is not None and 'epoch' in ckpt:
      mine = _process_checkpoint(own, int(ckpt['epoch']))
      if mine.exists():  # Else (another job's layout): the chief's state.
        path, ckpt, directory = mine, checkpoint.load(mine), own
        self._restored_process_state = True
    try:
      if ckpt['agent'] != type(self).__name__:
        raise checkpoint.CheckpointError(
          f'checkpoint {path} was written by {ckpt["agent"]}, not '
          f'{type(self).__name__}'
        )
      self._task.load_from_dir(directory, ckpt['task'])
      self.load_state_dict(ckpt['state'])
      if ckpt.get('device') is not None:
        self.device_runner().load_state_dict(
          ckpt['device'], self.device_learner()
        )
      self._epoch = int(ckpt['epoch'])
      self._avg_returns = list(ckpt['avg_returns'])
      for t, s, v in ckpt['avg_returns_temperatures']:
        self._avg_returns_temperatures.setdefault(t, {})[s] = list(v)
      self._rng.bit_generator.state = ckpt['rng']
      self._key = jax.numpy.asarray(ckpt['key'])
      self._act_counts = [int(c) for c in ckpt['act_counts']]
      if 'act_keys' in ckpt:  # Older checkpoints: the seed's own streams.
        self._act_keys = tuple(jax.numpy.asarray(k) for k in ckpt['act_keys'])
    except (KeyError, TypeError, IndexError) as e:
      raise checkpoint.CheckpointError(
        f'checkpoint {path} is incomplete ({e!r})'
      ) from None
    if writes_outputs():
      metrics.MetricsWriter(self._output_dir, tensorboard=False).truncate(
        'epoch', self._epoch
      )
    self._loaded_checkpoint = True
    return True
