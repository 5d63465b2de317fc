"""Packed steps (`EpochData`), their advantages and minibatches.

The actor-critics train on the steps of their rollouts packed end to end
(`algorithms.actor_critic.pack`); minibatches are gathered from them by
index.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from trax_rl import advantages
from trax_rl.losses import actor_critic as ac_losses
from trax_rl.losses import value_estimates


class EpochData(NamedTuple):
  """Steps of many trajectories packed end to end, `[N, ...]`."""

  observation: Any  # [N, ...] s_t
  action: Any  # [N, ...] a_t as sampled (unclipped)
  reward: Any  # [N]
  terminal: Any  # [N] 1 where the episode terminated at step t
  boundary: Any  # [N] 1 where the trajectory ends otherwise (bootstrap)
  next_observation: Any  # [N, ...] s_{t+1}
  dist_inputs: Any  # [N, I] the behaviour policy's distribution inputs
  mask: Any  # [N] 1 for real steps, 0 for padding


def advantages_and_targets(
  estimator: advantages.Estimator,
  margin: int,
  gamma: float,
  data: EpochData,
  values: jax.Array,
  next_values: jax.Array,
) -> tuple[jax.Array, jax.Array]:
  """`value_estimates.advantages_and_targets` of packed data.

  Args:
    estimator: an estimator bound to gamma and margin.
    margin: the estimator's margin.
    gamma: the discount.
    data: the packed steps, `[N, ...]`.
    values: [N] V(s_t).
    next_values: [N] V(s_{t+1}).

  Returns:
    (advantages [N], value targets [N]).
  """
  return value_estimates.advantages_and_targets(
    estimator,
    margin,
    gamma,
    data.reward,
    data.terminal,
    data.boundary,
    data.mask,
    values,
    next_values,
  )


def policy_minibatches(
  distribution: Any,
  data: EpochData,
  adv: jax.Array,
  targets: jax.Array,
) -> Callable[[jax.Array], ac_losses.PolicyBatch]:
  """`make_batch(i)`: the `PolicyBatch` of steps i [B] of packed data.

  Args:
    distribution: the policy's action distribution (for the behaviour
      policy's log-probs of the stored dist_inputs).
    data: the packed steps, `[N, ...]`.
    adv: [N] advantages.
    targets: [N] value targets.

  Returns:
    The function from indices to minibatches.
  """
  old_log_prob = distribution.log_prob(data.dist_inputs, data.action)
  return lambda i: ac_losses.PolicyBatch(
    data.observation[i],
    data.action[i],
    adv[i],
    old_log_prob[i],
    data.mask[i],
    targets[i],
  )
