"""The device path of Trax's DQN: its DeviceProgram and learner state.

`DQN` gives `device.epoch` a program (`slice_epoch.SliceEpoch`) when its
task's env is a JAX env (`RLTask.env = 'gymnax:CartPole-v1'`). The agent
keeps its lifecycle and its `Trainer`, whose state is the learner's `train`
field; the ring of the last epochs' steps (the replay the slices come from)
stays here between epochs and goes into the checkpoint, so a resume
continues bit for bit.
"""

from typing import Any

import jax
import numpy as np

from trax_rl import checkpoint
from trax_rl.device import epoch as device_epoch
from trax_rl.device import slice_epoch


class SlicePath:
  """DQN's device hooks (see `data_paths.DataPaths`)."""

  _slice_epoch: slice_epoch.SliceEpoch | None = None
  _slice_replay: slice_epoch.SliceReplay | None = None

  def _make_slice_epoch(self, loss_fn, n_replay_epochs: int) -> None:
    """Builds the program of a JAX env's task (else the host path)."""
    task = self._task
    if task.jax_env is None:
      return
    device_epoch.require_step_epochs(
      task, self._n_trajectories_per_epoch, self._n_interactions_per_epoch
    )
    self._slice_epoch = slice_epoch.SliceEpoch(
      env=task.jax_env,
      network=self._network,
      loss_fn=loss_fn,
      optimizer=self._optimizer,
      exploration=self._exploration,
      n_envs=task.n_envs,
      n_steps=-(-self._n_interactions_per_epoch // task.n_envs),
      n_replay_epochs=n_replay_epochs,
      gamma=task.gamma,
      batch_size=self._batch_size,
      slice_length=self._max_slice_length,
      margin=self._margin,
      train_steps=self._train_steps,
      evals_per_epoch=self._evals_per_epoch,
      eval_steps=self._value_eval_steps,
      sync_freq=self._sync_freq,
      sync_each_epoch=self._sync_each_epoch,
    )
    self._slice_replay = self._slice_epoch.init((), 0).replay

  def device_program(self) -> device_epoch.DeviceProgram | None:
    if self._slice_epoch is None:
      return None
    return self._slice_epoch.program()

  def device_learner(self) -> slice_epoch.SliceLearner:
    return slice_epoch.SliceLearner(
      self._trainer.state, self._slice_replay, np.int32(self._epoch)
    )

  def set_device_learner(self, learner: slice_epoch.SliceLearner) -> None:
    self._trainer.state = learner.train
    self._slice_replay = learner.replay

  def state_dict(self) -> dict[str, Any]:
    state = super().state_dict()
    if self._slice_replay is not None:
      leaves = jax.tree.leaves(self._slice_replay)
      state['device_replay'] = [np.asarray(x) for x in leaves]
    return state

  def load_state_dict(self, state: dict[str, Any]) -> None:
    super().load_state_dict(state)
    if self._slice_replay is not None:
      self._slice_replay = checkpoint.unflatten_like(
        self._slice_replay, state['device_replay'], 'device replay'
      )
