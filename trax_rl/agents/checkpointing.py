"""An agent's checkpoint: what it holds, how it is written and restored.

`checkpoint.pkl` in the output_dir is the commit point of an epoch: the
task's trajectory files are written first, then this file atomically
(`checkpoint.save`), so a run killed at any moment resumes from the last
complete epoch. `Agent` inherits this; subclasses add their state through
`state_dict` / `load_state_dict`.
"""

import jax
import numpy as np
from etils import epath

from trax_rl import checkpoint, metrics

CHECKPOINT_FILE = 'checkpoint.pkl'


def writes_outputs() -> bool:
  """Whether this process writes output_dir (in a multi-host job: process 0).

  The other processes of a multi-host job read it on resume, never write.
  """
  return jax.process_index() == 0


class Checkpointing:
  """`save` and `restore` of an `Agent`'s whole state."""

  def _checkpoint_path(self) -> epath.Path:
    return epath.Path(self._output_dir) / CHECKPOINT_FILE

  def save(self) -> None:
    """Writes the full state; the checkpoint file is the commit point."""
    if self._output_dir is None:
      raise ValueError('save() needs an output_dir')
    task_state = self._task.save_to_dir(self._output_dir)
    checkpoint.save(
      self._checkpoint_path(),
      {
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
        'act_counts': list(self._act_counts),
        'task': task_state,
        'state': self.state_dict(),
        'device': None if self._device is None else self._device.state_dict(),
      },
    )
    self._task.remove_stale_files(self._output_dir)

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
    if writes_outputs():
      for stale in [*out.glob('.*.tmp*'), *out.glob('*/.*.tmp*')]:
        stale.unlink()
    path = self._checkpoint_path()
    if not path.exists():
      return False
    ckpt = checkpoint.load(path)
    try:
      if ckpt['agent'] != type(self).__name__:
        raise checkpoint.CheckpointError(
          f'checkpoint {path} was written by {ckpt["agent"]}, not '
          f'{type(self).__name__}'
        )
      self._task.load_from_dir(self._output_dir, ckpt['task'])
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
