"""The device path of ReplayValueAgent: its DeviceProgram and learner state.

`ReplayValueAgent` gives `device.epoch` a program (`value_epoch.ValueEpoch`)
when its task's env is a JAX env (`RLTask.env = 'gymnax:CartPole-v1'`).
The agent keeps its lifecycle and its `Trainer`, whose state is the
learner's `train` field; `DeviceLearnerStore` keeps the rest of the learner
(n-step tails, the replay, counters) between epochs and in the checkpoint,
so a resume continues bit for bit.
"""

import math
from typing import Any

import jax
import numpy as np

from trax_rl import checkpoint
from trax_rl import task as task_lib
from trax_rl.device import epoch as device_epoch
from trax_rl.device import value_epoch
from trax_rl.replay import device_table
from trax_rl.replay import table as table_lib
from trax_rl.supervised import trainer as trainer_lib


def device_table_like(table: table_lib.Table) -> device_table.DeviceTable:
  """A DeviceTable configured as the host `table` (sampler, limiter)."""
  limiter = table.state_dict()['rate_limiter']
  error_buffer = None
  if limiter['samples_per_insert'] is not None:
    error_buffer = (limiter['min_diff'], limiter['max_diff'])
  return device_table.DeviceTable(
    table.max_size,
    table.sampler,
    min_size_to_sample=limiter['min_size_to_sample'],
    samples_per_insert=limiter['samples_per_insert'],
    error_buffer=error_buffer,
  )


def n_steps_per_epoch(task: task_lib.RLTask, n_interactions: int) -> int:
  """Vector steps per epoch, as `device.epoch.make_runner` counts them."""
  return math.ceil(n_interactions / task.n_envs)


def check_fits(
  task: task_lib.RLTask, n_interactions: int, max_size: int, rows: int = 1
):
  """Raises ValueError if one epoch's candidate items exceed the replay.

  `rows`: the items each env step may complete (the insert's rows).
  """
  per_epoch = n_steps_per_epoch(task, n_interactions) * task.n_envs
  if per_epoch * rows > max_size:
    times = f'{rows} x ' if rows > 1 else ''
    raise ValueError(
      f'{times}n_interactions_per_epoch ({times}{per_epoch} with '
      f'{task.n_envs} envs) must not exceed max_replay_size ({max_size}) on '
      'the device path'
    )


class DeviceLearnerStore:
  """The value learner between epochs: the Trainer's state plus the rest."""

  def __init__(
    self, epoch: value_epoch.ValueEpoch, trainer: trainer_lib.Trainer
  ):
    self._epoch = epoch
    self._trainer = trainer
    self._rest = epoch.init(trainer.state)._replace(train=())

  @property
  def epoch(self) -> value_epoch.ValueEpoch:
    return self._epoch

  @property
  def rest(self) -> value_epoch.ValueLearner:
    """The learner without its train state (that is the Trainer's)."""
    return self._rest

  def learner(self) -> value_epoch.ValueLearner:
    return self._rest._replace(train=self._trainer.state)

  def set_learner(self, learner: value_epoch.ValueLearner) -> None:
    self._trainer.state = learner.train
    self._rest = learner._replace(train=())

  def state_dict(self) -> dict[str, Any]:
    return {'leaves': [np.asarray(x) for x in jax.tree.leaves(self._rest)]}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self._rest = checkpoint.unflatten_like(
      self._rest, state['leaves'], 'device replay'
    )


class DevicePath:
  """ReplayValueAgent's device hooks (see `data_paths.DataPaths`).

  A subclass with another compiled epoch (R2D2's) sets `_device_epoch_class`
  and adds its fields in `_device_epoch_args`.
  """

  _device_epoch_class = value_epoch.ValueEpoch
  _device_rows_per_step = 1  # Items an env step may complete.

  def _device_epoch_args(self) -> dict[str, Any]:
    """Fields of `_device_epoch_class` beyond ValueEpoch's (or overrides)."""
    return {}

  def _make_device_store(self, n_step, target_update_period):
    """The device program and learner of a JAX env's task; else None."""
    task = self._task
    if task.jax_env is None:
      return None
    device_epoch.require_step_epochs(
      task, self._n_trajectories_per_epoch, self._n_interactions_per_epoch
    )
    check_fits(
      task,
      self._n_interactions_per_epoch,
      self._table.max_size,
      self._device_rows_per_step,
    )
    args = dict(
      env=task.jax_env,
      network=self._network,
      loss_fn=self._loss_fn,
      optimizer=self._optimizer,
      table=device_table_like(self._table),
      exploration=self._exploration,
      n_envs=task.n_envs,
      n_steps=n_steps_per_epoch(task, self._n_interactions_per_epoch),
      n_step=n_step,
      gamma=task.gamma,
      batch_size=self._batch_size,
      num_sgd_steps_per_step=self._num_sgd,
      target_update_period=target_update_period,
      prioritized=self._prioritized,
    )
    args.update(self._device_epoch_args())
    epoch = self._device_epoch_class(**args)
    return DeviceLearnerStore(epoch, self._trainer)

  @property
  def device_store(self) -> DeviceLearnerStore | None:
    """The device program's learner between epochs (None: host path)."""
    return self._device_store

  def device_program(self) -> device_epoch.DeviceProgram | None:
    if self._device_store is None:
      return None
    return self._device_store.epoch.program()

  def device_learner(self) -> value_epoch.ValueLearner:
    return self._device_store.learner()

  def set_device_learner(self, learner: value_epoch.ValueLearner) -> None:
    self._device_store.set_learner(learner)
    self._env_steps = int(learner.env_steps)
