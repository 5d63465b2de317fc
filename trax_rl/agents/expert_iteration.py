"""ExpertIteration: imitate the best trajectories of a sharpened expert."""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from trax_rl import task as task_lib
from trax_rl import validation
from trax_rl.agents import policy_agents
from trax_rl.losses import policy as policy_losses
from trax_rl.networks import models


def sharpened_network_policy(
  temperature: float,
  network_policy: Callable[[float], Any],
  temperature_multiplier: float = 1.0,
) -> Any:
  """The expert: the policy network at a lower temperature.

  Args:
    temperature: the temperature the agent asks for.
    network_policy: `temperature -> policy` of the policy network.
    temperature_multiplier: multiplies the temperature; < 1 sharpens.
  """
  return network_policy(temperature_multiplier * temperature)


class ExpertIteration(policy_agents.LoopPolicyAgent):
  """Expert iteration: imitate the best trajectories of a sharpened expert.

  The expert (by default the policy network at a lower temperature) plays;
  the best (1 - quantile) trajectories of every `filter_buffer_size` sampled
  are imitated by behavioural cloning (Anthony et al., 2017). Its filter
  ranks whole episodes: epochs count episodes (n_trajectories_per_epoch),
  on the gymnasium source.
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    model_fn: Callable[..., nn.Module] = models.Policy,
    expert_policy_fn: Callable[..., Any] = sharpened_network_policy,
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
    # The expert's temperature at temperature 1: the network policy is
    # `temperature -> policy`, here the identity, so the expert's
    # `network_policy(multiplier * temperature)` is the multiplier.
    multiplier = expert_policy_fn(
      temperature=1.0, network_policy=lambda temperature: temperature
    )
    self._expert_knobs = dict(
      temperature_multiplier=float(multiplier),
      quantile=quantile,
      filter_buffer_size=filter_buffer_size,
    )
    super().__init__(
      task,
      model_fn,
      value_fn=policy_losses.zero_baseline,
      weight_fn=jax.numpy.ones_like,
      advantage_normalization=False,
      n_replay_epochs=n_replay_epochs,
      n_train_steps_per_epoch=n_train_steps_per_epoch,
      **kwargs,
    )

  def _expert(self) -> dict[str, Any]:
    return self._expert_knobs
