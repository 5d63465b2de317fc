"""Actor-critic losses of separate policy and value networks, as pure jnp.

Every loss is a frozen dataclass called as
`loss(network, params, target_params, batch, key) -> (loss, LossExtra)`, so
the one training engine (`supervised.update.make_update_fn`) drives them.
Batches are flat minibatches of steps (`[B, ...]`): the agents compute
advantages and value targets once over whole trajectories and then sample
steps, which for feed-forward networks is what Trax's slices of length 1 did.

Entropy is the entropy of the whole action distribution (Trax computed it
from the per-action log-probabilities in A2C and PPO, which is not an
entropy at all).

The pure pieces live in `value_estimates` (advantages, value targets,
aggregated Q-values) and `policy_objectives` (the PPO and AWR objectives);
the joint-network losses in `actor_critic_joint`. Their public names are
re-exported here for the callers of this module.
"""

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from trax_rl import types
from trax_rl.losses import (
  actor_critic_joint,
  policy_objectives,
  value_estimates,
)
from trax_rl.losses import policy as policy_losses

masked_mean = policy_losses.masked_mean

# Re-exported: the pure functions and the joint losses.
Threshold = policy_objectives.Threshold
preprocess_advantages = value_estimates.preprocess_advantages
aggregate_values = value_estimates.aggregate_values
advantages_and_targets = value_estimates.advantages_and_targets
explained_variance = value_estimates.explained_variance
ppo_objective = policy_objectives.ppo_objective
weighted_percentiles = policy_objectives.weighted_percentiles
awr_weights = policy_objectives.awr_weights
JointBatch = actor_critic_joint.JointBatch
JointLoss = actor_critic_joint.JointLoss
A2CJointLoss = actor_critic_joint.A2CJointLoss
PPOJointLoss = actor_critic_joint.PPOJointLoss
AWRJointLoss = actor_critic_joint.AWRJointLoss


class PolicyBatch(NamedTuple):
  """A minibatch of steps for a policy loss."""

  observation: types.Array  # [B, ...] (already normalized, if at all)
  action: types.Array  # [B, ...] the action taken (before clipping)
  advantage: types.Array  # [B] raw advantages (normalized in the loss)
  old_log_prob: types.Array  # [B] log-prob under the behaviour policy
  mask: types.Array  # [B] 1 for real steps, 0 for padding


class ValueBatch(NamedTuple):
  """A minibatch of steps for the value loss."""

  observation: types.Array  # [B, ...]
  action: types.Array  # [B, ...] only read by Q-value networks
  target: types.Array  # [B] value targets, unscaled
  mask: types.Array  # [B]


class SamplingBatch(NamedTuple):
  """A minibatch for Sampling AWR: S actions sampled per observation."""

  observation: types.Array  # [B, ...]
  actions: types.Array  # [S, B, ...] sampled actions
  q_values: types.Array  # [S, B] Q(s, a_i) of the sampled actions
  act_log_probs: types.Array  # [S, B] log-probs they were sampled with
  mask: types.Array  # [B]


# Losses of separate policy and value networks.


@dataclasses.dataclass(frozen=True)
class ValueLoss:
  """Mean squared error to value targets (Trax's L2Loss on the value net).

  Attributes:
    scale: the network predicts value / scale (scale_value_targets).
    q_value: the network takes (observation, action).
  """

  scale: float = 1.0
  q_value: bool = False

  def __call__(self, network, params, target_params, batch, key):
    del target_params, key
    if self.q_value:
      pred = network.apply(params, batch.observation, batch.action)
    else:
      pred = network.apply(params, batch.observation)
    target = batch.target / self.scale
    loss = masked_mean(jnp.square(pred - target), batch.mask)
    metrics = {'value_mean': masked_mean(pred * self.scale, batch.mask)}
    return loss, types.LossExtra(metrics)


@dataclasses.dataclass(frozen=True)
class AdvantagePolicyLoss:
  """Base of A2C, PPO and AWR: log-probs, preprocessed advantages, entropy.

  Attributes:
    distribution: the policy's action distribution.
    entropy_coeff: weight of the entropy bonus.
    advantage_normalization: normalize advantages over the minibatch.
    advantage_normalization_epsilon: added to their std.
    advantage_normalization_factor: multiplies the normalized advantages.
  """

  distribution: Any
  entropy_coeff: float = 0.0
  advantage_normalization: bool = True
  advantage_normalization_epsilon: float = 1e-5
  advantage_normalization_factor: float = 1.0

  def objective(self, log_probs, batch, advantages):
    """[B] objective to maximize, and its metrics."""
    raise NotImplementedError

  def __call__(self, network, params, target_params, batch, key):
    del target_params, key
    dist_inputs = network.apply(params, batch.observation)
    log_probs = self.distribution.log_prob(dist_inputs, batch.action)
    advantages = value_estimates.preprocess_advantages(
      batch.advantage,
      batch.mask,
      self.advantage_normalization,
      self.advantage_normalization_epsilon,
      self.advantage_normalization_factor,
    )
    objective, metrics = self.objective(log_probs, batch, advantages)
    entropy = masked_mean(self.distribution.entropy(dist_inputs), batch.mask)
    loss = -masked_mean(objective, batch.mask) - self.entropy_coeff * entropy
    metrics = dict(
      metrics,
      entropy=entropy,
      advantage_mean=masked_mean(batch.advantage, batch.mask),
      approximate_kl_divergence=masked_mean(
        batch.old_log_prob - log_probs, batch.mask
      ),
    )
    return loss, types.LossExtra(metrics)


@dataclasses.dataclass(frozen=True)
class A2CLoss(AdvantagePolicyLoss):
  """Advantage actor-critic (Mnih et al., 2016, 1602.01783): log pi * A."""

  def objective(self, log_probs, batch, advantages):
    del batch
    return policy_objectives.a2c_objective(log_probs, advantages)


@dataclasses.dataclass(frozen=True)
class PPOLoss(AdvantagePolicyLoss):
  """PPO's clipped objective; old log-probs come from stored dist_inputs.

  Attributes:
    epsilon: the clip range of the probability ratio.
  """

  epsilon: float = 0.2

  def objective(self, log_probs, batch, advantages):
    return policy_objectives.clipped_objective(
      log_probs, batch.old_log_prob, advantages, batch.mask, self.epsilon
    )


@dataclasses.dataclass(frozen=True)
class AWRLoss(AdvantagePolicyLoss):
  """AWR: log pi weighted by min(exp(A / beta), w_max).

  Attributes:
    beta: temperature of the exponential weights.
    w_max: the largest weight.
    thresholds: optional (percentile, weight, minimum) weights instead.
  """

  beta: float = 1.0
  w_max: float = 20.0
  thresholds: tuple[policy_objectives.Threshold, ...] | None = None

  def objective(self, log_probs, batch, advantages):
    objective, weights = policy_objectives.awr_objective(
      log_probs, advantages, batch.mask, self.beta, self.w_max, self.thresholds
    )
    return objective, {
      'awr_weight_mean': masked_mean(weights, batch.mask),
      'awr_weight_max': jnp.max(jnp.where(batch.mask > 0, weights, 0.0)),
    }


@dataclasses.dataclass(frozen=True)
class SamplingAWRLoss:
  """Sampling AWR: AWR on Q(s, a_i) - V(s) of S actions sampled per state.

  Attributes:
    distribution: the policy's action distribution.
    beta, w_max, thresholds: as in AWRLoss.
    reweight: weight the sampled actions by pi_new / pi_sampling.
    sampled_all_discrete: the S actions enumerate all discrete actions;
      weight each by its sampling probability and use the
      probability-weighted mean of Q as V.
    advantage_normalization, advantage_normalization_epsilon,
    advantage_normalization_factor: as in AdvantagePolicyLoss.
  """

  distribution: Any
  beta: float = 1.0
  w_max: float = 20.0
  thresholds: tuple[policy_objectives.Threshold, ...] | None = None
  reweight: bool = False
  sampled_all_discrete: bool = False
  advantage_normalization: bool = True
  advantage_normalization_epsilon: float = 1e-5
  advantage_normalization_factor: float = 1.0

  def __call__(self, network, params, target_params, batch, key):
    del target_params, key
    dist_inputs = network.apply(params, batch.observation)  # [B, I]
    n_samples = batch.q_values.shape[0]
    log_probs = self.distribution.log_prob(
      jnp.broadcast_to(dist_inputs, (n_samples,) + dist_inputs.shape),
      batch.actions,
    )  # [S, B]
    values = value_estimates.aggregate_values(
      batch.q_values,
      'mean',
      act_log_probs=batch.act_log_probs if self.sampled_all_discrete else None,
    )
    mask = jnp.broadcast_to(batch.mask, batch.q_values.shape)
    advantages = value_estimates.preprocess_advantages(
      batch.q_values - values,
      mask,
      self.advantage_normalization,
      self.advantage_normalization_epsilon,
      self.advantage_normalization_factor,
    )
    if self.reweight:
      mask = mask * jnp.exp(
        jax.lax.stop_gradient(log_probs) - batch.act_log_probs
      )
    if self.sampled_all_discrete:
      mask = mask * jnp.exp(batch.act_log_probs)
    weights = policy_objectives.awr_weights(
      advantages, self.beta, self.w_max, self.thresholds, batch.mask
    )
    loss = -jnp.sum(log_probs * weights * mask) / jnp.maximum(
      jnp.sum(mask), 1e-8
    )
    entropy = masked_mean(self.distribution.entropy(dist_inputs), batch.mask)
    metrics = {
      'entropy': entropy,
      'awr_weight_mean': masked_mean(weights, mask),
      'advantage_std': jnp.sqrt(
        masked_mean(jnp.square(batch.q_values - values), mask)
      ),
    }
    return loss, types.LossExtra(metrics)
