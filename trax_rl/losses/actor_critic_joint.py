"""Losses of a joint policy-and-value network (A2C, PPO, AWR) as pure jnp.

Each loss is a frozen dataclass called as
`loss(network, params, target_params, batch, key) -> (loss, LossExtra)` on a
network whose apply returns (dist_inputs [B, I], values [B]): the policy
term + value_loss_coeff * the L2 value loss - entropy_coeff * entropy.
"""

import dataclasses
from typing import Any, NamedTuple

import jax.numpy as jnp

from trax_rl import types
from trax_rl.losses import policy as policy_losses
from trax_rl.losses import policy_objectives, value_estimates

masked_mean = policy_losses.masked_mean


class JointBatch(NamedTuple):
  """A minibatch of steps for a joint policy-and-value loss."""

  observation: types.Array  # [B, ...]
  action: types.Array  # [B, ...]
  advantage: types.Array  # [B]
  value_target: types.Array  # [B]
  old_log_prob: types.Array  # [B]
  mask: types.Array  # [B]


@dataclasses.dataclass(frozen=True)
class JointLoss:
  """Base of the joint losses: policy term + value_loss_coeff * L2 value.

  Attributes:
    distribution: the policy's action distribution.
    value_loss_coeff: weight of the value loss.
    entropy_coeff: weight of the entropy bonus.
    normalize_advantages: normalize advantages over the minibatch.
    advantage_normalization_epsilon: added to their std.
  """

  distribution: Any
  value_loss_coeff: float = 0.1
  entropy_coeff: float = 0.01
  normalize_advantages: bool = True
  advantage_normalization_epsilon: float = 1e-5

  def objective(self, log_probs, batch, advantages):
    raise NotImplementedError

  def __call__(self, network, params, target_params, batch, key):
    del target_params, key
    dist_inputs, values = network.apply(params, batch.observation)
    log_probs = self.distribution.log_prob(dist_inputs, batch.action)
    advantages = value_estimates.preprocess_advantages(
      batch.advantage,
      batch.mask,
      self.normalize_advantages,
      self.advantage_normalization_epsilon,
    )
    objective, metrics = self.objective(log_probs, batch, advantages)
    value_loss = masked_mean(
      jnp.square(values - batch.value_target), batch.mask
    )
    entropy = masked_mean(self.distribution.entropy(dist_inputs), batch.mask)
    loss = (
      -masked_mean(objective, batch.mask)
      + self.value_loss_coeff * value_loss
      - self.entropy_coeff * entropy
    )
    metrics = dict(
      metrics,
      value_loss=value_loss,
      entropy=entropy,
      explained_variance=value_estimates.explained_variance(
        values, batch.value_target, batch.mask
      ),
      advantage_mean=masked_mean(batch.advantage, batch.mask),
    )
    return loss, types.LossExtra(metrics)


@dataclasses.dataclass(frozen=True)
class A2CJointLoss(JointLoss):
  """A2C on a joint network."""

  def objective(self, log_probs, batch, advantages):
    del batch
    return policy_objectives.a2c_objective(log_probs, advantages)


@dataclasses.dataclass(frozen=True)
class PPOJointLoss(JointLoss):
  """PPO on a joint network.

  Attributes:
    epsilon: the clip range of the probability ratio.
  """

  epsilon: float = 0.2

  def objective(self, log_probs, batch, advantages):
    return policy_objectives.clipped_objective(
      log_probs, batch.old_log_prob, advantages, batch.mask, self.epsilon
    )


@dataclasses.dataclass(frozen=True)
class AWRJointLoss(JointLoss):
  """AWR on a joint network.

  Attributes:
    beta, w_max, thresholds: as in AWRLoss.
  """

  beta: float = 1.0
  w_max: float = 20.0
  thresholds: tuple[policy_objectives.Threshold, ...] | None = None

  def objective(self, log_probs, batch, advantages):
    objective, weights = policy_objectives.awr_objective(
      log_probs, advantages, batch.mask, self.beta, self.w_max, self.thresholds
    )
    return objective, {'awr_weight_mean': masked_mean(weights, batch.mask)}
