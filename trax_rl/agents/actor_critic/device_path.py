"""The actor-critic family on the device path: the same pure epoch.

`ActorCritic` inherits these hooks (see `agents.data_paths`): the layout's
`train_on_batch`, jitted as on the gymnasium path, is fed from the rollout
(`device.actor_critic`).
"""

from typing import Any

import numpy as np

from trax_rl.agents.actor_critic import data as data_lib
from trax_rl.device import actor_critic as device_ac
from trax_rl.device import epoch as device_epoch

# The key passed to layouts that draw no randomness (so none is drawn).
UNUSED_KEY = np.zeros(2, np.uint32)


class DevicePath:
  """`device_program`, `device_learner`, `set_device_learner`."""

  def device_program(self) -> device_epoch.DeviceProgram:
    """`_train_fn` on the rollout's packed steps (see `device.actor_critic`).

    Raises:
      ValueError: a knob only the gymnasium path has.
    """
    unsupported = {
      'normalize_observations': self._normalize,
      'offline': self._offline,
      'n_replay_epochs > 1': self._task.n_replay_epochs > 1,
      'added_policy_slice_length > 0': self._margin > 0,
    }
    for name, used in unsupported.items():
      if used:
        raise ValueError(
          f'{type(self).__name__} on the device path has no {name} yet: '
          'use a gymnasium env id for this config'
        )
    trainers = self.trainers()
    acting = [
      n for n, t in trainers.items() if t is self._layout.acting_trainer
    ]
    return device_ac.make_program(
      self.policy_network(),
      self._policy_dist,
      acting[0],
      self._stats,
      data_lib.EpochData,
      self._layout.minibatch_indices,
      self._train_fn,
      None if self._layout.uses_key else UNUSED_KEY,
    )

  def device_learner(self) -> dict[str, Any]:
    return {name: t.state for name, t in self.trainers().items()}

  def set_device_learner(self, learner: dict[str, Any]) -> None:
    for name, state in learner.items():
      self.trainers()[name].state = state
