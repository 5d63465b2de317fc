"""ExpertIteration: imitate the best trajectories of a sharpened expert."""

import functools
from collections.abc import Callable, Iterator
from typing import Any

import flax.linen as nn
import jax

from trax_rl import collection, validation
from trax_rl import task as task_lib
from trax_rl.agents import policy_agents
from trax_rl.device import epoch as device_epoch
from trax_rl.losses import policy as policy_losses
from trax_rl.networks import models


def sharpened_network_policy(
  temperature: float,
  network_policy: Callable[[float], collection.BatchPolicy],
  temperature_multiplier: float = 1.0,
) -> collection.BatchPolicy:
  """The expert: the policy network at a lower temperature.

  Args:
    temperature: the temperature the agent asks for.
    network_policy: `temperature -> BatchPolicy` of the policy network.
    temperature_multiplier: multiplies the temperature; < 1 sharpens.
  """
  return network_policy(temperature_multiplier * temperature)


def quantile_filter(
  trajectory_stream: Iterator[Any],
  quantile: float,
  buffer_size: int,
  gamma: float,
) -> Iterator[Any]:
  """Keeps the best (1 - quantile) of every `buffer_size` trajectories.

  Trajectories are ranked by their discounted return from the first step;
  at least one per buffer is kept.
  """
  buffer = []
  for traj in trajectory_stream:
    buffer.append(traj)
    if len(buffer) == buffer_size:
      n_best = int((1 - quantile) * buffer_size) or 1
      buffer.sort(
        key=lambda t: float(t.to_np(0, gamma).return_[0]), reverse=True
      )
      yield from buffer[:n_best]
      buffer = []


class ExpertIteration(policy_agents.LoopPolicyAgent):
  """Expert iteration: imitate the best trajectories of a sharpened expert.

  The expert (by default the policy network at a lower temperature) plays;
  the best (1 - quantile) trajectories of every `filter_buffer_size` sampled
  are imitated by behavioural cloning (Anthony et al., 2017).
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    model_fn: Callable[..., nn.Module] = models.Policy,
    expert_policy_fn: Callable[
      ..., collection.BatchPolicy
    ] = sharpened_network_policy,
    quantile: float = 0.9,
    n_replay_epochs: int = 10,
    n_train_steps_per_epoch: int = 1000,
    filter_buffer_size: int = 256,
    **kwargs,
  ):
    """Configures ExpertIteration.

    Args:
      task: the RLTask.
      model_fn: the policy module factory.
      expert_policy_fn: `(temperature, network_policy) -> BatchPolicy`.
      quantile: trajectories above this return quantile are imitated.
      n_replay_epochs: the filter draws from the last this many epochs.
      n_train_steps_per_epoch: updates per epoch.
      filter_buffer_size: trajectories ranked together by the filter.
      **kwargs: for LoopPolicyAgent.
    """
    if not 0.0 <= quantile < 1.0:
      raise ValueError(f'quantile must be in [0, 1), got {quantile}')
    validation.check_count('filter_buffer_size', filter_buffer_size, 1)
    self._expert_policy_fn = expert_policy_fn
    filter_fn = functools.partial(
      quantile_filter,
      quantile=quantile,
      buffer_size=filter_buffer_size,
      gamma=task.gamma,
    )
    super().__init__(
      task,
      model_fn,
      value_fn=policy_losses.zero_baseline,
      weight_fn=jax.numpy.ones_like,
      advantage_normalization=False,
      n_replay_epochs=n_replay_epochs,
      n_train_steps_per_epoch=n_train_steps_per_epoch,
      trajectory_stream_preprocessing_fn=filter_fn,
      **kwargs,
    )

  def device_program(self) -> device_epoch.DeviceProgram:
    """Raises: ExpertIteration needs the gymnasium path."""
    raise ValueError(
      'ExpertIteration needs the gymnasium path (its filter ranks whole '
      'episodes on the host): use a gymnasium env id, not '
      f'{self._task.jax_env.name!r}'
    )

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> collection.BatchPolicy:
    network_policy = functools.partial(
      super().make_policy, evaluation=evaluation
    )
    return self._expert_policy_fn(
      temperature=temperature, network_policy=network_policy
    )
