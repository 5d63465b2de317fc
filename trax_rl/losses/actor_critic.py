"""The actor-critic objectives (A2C, PPO, AWR, Sampling AWR) as pure jnp.

An objective is a small frozen dataclass called as
`objective(log_probs, old_log_probs, advantages, mask) -> (objective [B],
metrics)`, the per-step quantity to maximize. `PolicyLoss` turns one into
a loss for either network layout: on a policy network (apply returns
dist_inputs) it is -objective - entropy_coeff * entropy; on a joint network
(apply returns (dist_inputs, values)) it adds value_loss_coeff times the L2
value loss. So A2C, PPO and AWR are written once each; the separate and
joint agents differ only in the network the same loss is applied to.

Every loss is a frozen dataclass called as
`loss(network, params, target_params, batch, key) -> (loss, LossExtra)`, so
the one training engine (`supervised.update.make_update_fn`) drives them.
Batches are flat minibatches of steps (`[B, ...]`).

Entropy is the entropy of the whole action distribution (Trax computed it
from the per-action log-probabilities in A2C and PPO, which is not an
entropy at all).
"""

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from trax_rl import types
from trax_rl.losses import policy as policy_losses
from trax_rl.losses import value_estimates

# (percentile, weight, minimum or None), as Trax's AWR `thresholds`.
Threshold = tuple[float, float, float | None]
Metrics = dict[str, jax.Array]


class PolicyBatch(NamedTuple):
  """A minibatch of steps for a `PolicyLoss`."""

  observation: types.Array  # [B, ...] (already normalized, if at all)
  action: types.Array  # [B, ...] the action taken (before clipping)
  advantage: types.Array  # [B] raw advantages (normalized in the loss)
  old_log_prob: types.Array  # [B] log-prob under the behaviour policy
  mask: types.Array  # [B] 1 for real steps, 0 for padding
  value_target: types.Array  # [B] read only on a joint network


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


def ppo_objective(
  log_probs: jax.Array,
  old_log_probs: jax.Array,
  advantages: jax.Array,
  epsilon: float,
) -> tuple[jax.Array, jax.Array]:
  """PPO's clipped surrogate (Schulman et al., 2017, 1707.06347).

  min(r * A, clip(r, 1 - eps, 1 + eps) * A) with r = exp(log_probs -
  old_log_probs).

  Args:
    log_probs: [...] log-probs of the actions under the trained policy.
    old_log_probs: [...] log-probs under the policy that acted.
    advantages: [...] advantages.
    epsilon: the clip range.

  Returns:
    (objective [...], probability ratio [...]).
  """
  ratio = jnp.exp(log_probs - old_log_probs)
  unclipped = ratio * advantages
  clipped = jnp.clip(ratio, 1.0 - epsilon, 1.0 + epsilon) * advantages
  return jnp.minimum(unclipped, clipped), ratio


def weighted_percentiles(
  x: jax.Array, thresholds: Sequence[Threshold], mask: jax.Array | None = None
) -> jax.Array:
  """Trax's threshold weights: sum of weight * [x >= max(pct(x), minimum)].

  Args:
    x: [...] values (advantages).
    thresholds: (percentile in [0, 100], weight, minimum or None) triples.
    mask: [...] entries to take percentiles over (None: all).

  Returns:
    [...] weights.
  """
  pool = x if mask is None else jnp.where(mask > 0, x, jnp.nan)
  result = jnp.zeros_like(x)
  for percentile, weight, minimum in thresholds:
    threshold = jnp.nanpercentile(pool, percentile)
    if minimum is not None:
      threshold = jnp.maximum(minimum, threshold)
    result += weight * (x >= threshold).astype(x.dtype)
  return result


def awr_weights(
  advantages: jax.Array,
  beta: float,
  w_max: float,
  thresholds: Sequence[Threshold] | None = None,
  mask: jax.Array | None = None,
) -> jax.Array:
  """AWR weights min(exp(A / beta), w_max) (Peng et al., 2019, 1910.00177).

  Args:
    advantages: [...] (preprocessed) advantages.
    beta: temperature.
    w_max: the largest weight.
    thresholds: if given, percentile weights (Trax's option) instead of exp.
    mask: [...] entries the percentiles are taken over.

  Returns:
    [...] weights, without gradient.
  """
  if thresholds:
    weights = weighted_percentiles(advantages, thresholds, mask)
  else:
    weights = jnp.exp(advantages / beta)
  return jax.lax.stop_gradient(jnp.minimum(weights, w_max))


@dataclasses.dataclass(frozen=True)
class A2CObjective:
  """A2C's log pi(a|s) * A (Mnih et al., 2016, 1602.01783)."""

  def __call__(self, log_probs, old_log_probs, advantages, mask):
    del old_log_probs, mask
    return log_probs * jax.lax.stop_gradient(advantages), {}


@dataclasses.dataclass(frozen=True)
class PPOObjective:
  """PPO's clipped surrogate, with its mean ratio and clip fraction.

  Attributes:
    epsilon: the clip range of the probability ratio.
  """

  epsilon: float = 0.2

  def __call__(self, log_probs, old_log_probs, advantages, mask):
    objective, ratio = ppo_objective(
      log_probs,
      old_log_probs,
      jax.lax.stop_gradient(advantages),
      self.epsilon,
    )
    clipped = (jnp.abs(ratio - 1.0) > self.epsilon).astype(ratio.dtype)
    return objective, {
      'probs_ratio_mean': policy_losses.masked_mean(ratio, mask),
      'clip_fraction': policy_losses.masked_mean(clipped, mask),
    }


@dataclasses.dataclass(frozen=True)
class AWRObjective:
  """AWR's log pi(a|s) weighted by `awr_weights`.

  Attributes:
    beta: temperature of the exponential weights.
    w_max: the largest weight.
    thresholds: optional (percentile, weight, minimum) weights instead.
  """

  beta: float = 1.0
  w_max: float = 20.0
  thresholds: tuple[Threshold, ...] | None = None

  def __call__(self, log_probs, old_log_probs, advantages, mask):
    del old_log_probs
    weights = awr_weights(
      advantages, self.beta, self.w_max, self.thresholds, mask
    )
    return log_probs * weights, {
      'awr_weight_mean': policy_losses.masked_mean(weights, mask),
      'awr_weight_max': jnp.max(jnp.where(mask > 0, weights, 0.0)),
    }


@dataclasses.dataclass(frozen=True)
class AdvantageNormalization:
  """Trax's advantage preprocessing: factor * (A - mean) / (std + epsilon).

  Attributes:
    enabled: normalize advantages over the minibatch.
    epsilon: added to their std.
    factor: multiplies the normalized advantages.
  """

  enabled: bool = True
  epsilon: float = 1e-5
  factor: float = 1.0

  def __call__(self, advantages: jax.Array, mask: jax.Array) -> jax.Array:
    return value_estimates.preprocess_advantages(
      advantages, mask, self.enabled, self.epsilon, self.factor
    )


@dataclasses.dataclass(frozen=True)
class PolicyLoss:
  """-objective - entropy_coeff * entropy (+ value_loss_coeff * L2 value).

  Attributes:
    distribution: the policy's action distribution.
    objective: an objective (`A2CObjective`, `PPOObjective`, ...).
    entropy_coeff: weight of the entropy bonus.
    normalization: the advantages' `AdvantageNormalization`.
    value_loss_coeff: None for a policy network; for a joint network
      (apply returns (dist_inputs, values)) the weight of its value loss.
  """

  distribution: Any
  objective: Any
  entropy_coeff: float = 0.0
  normalization: AdvantageNormalization = AdvantageNormalization()
  value_loss_coeff: float | None = None

  def __call__(self, network, params, target_params, batch, key):
    del target_params, key
    mask = batch.mask
    out = network.apply(params, batch.observation)
    dist_inputs, values = out if self.value_loss_coeff is not None else (out, 0)
    log_probs = self.distribution.log_prob(dist_inputs, batch.action)
    advantages = self.normalization(batch.advantage, mask)
    objective, metrics = self.objective(
      log_probs, batch.old_log_prob, advantages, mask
    )
    entropy = policy_losses.masked_mean(
      self.distribution.entropy(dist_inputs), mask
    )
    loss = -policy_losses.masked_mean(objective, mask)
    loss -= self.entropy_coeff * entropy
    metrics = dict(
      metrics,
      entropy=entropy,
      advantage_mean=policy_losses.masked_mean(batch.advantage, mask),
      approximate_kl_divergence=policy_losses.masked_mean(
        batch.old_log_prob - log_probs, mask
      ),
    )
    if self.value_loss_coeff is not None:
      value_loss = policy_losses.masked_mean(
        jnp.square(values - batch.value_target), mask
      )
      loss += self.value_loss_coeff * value_loss
      metrics['value_loss'] = value_loss
      metrics['explained_variance'] = value_estimates.explained_variance(
        values, batch.value_target, mask
      )
    return loss, types.LossExtra(metrics)


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
    loss = policy_losses.masked_mean(jnp.square(pred - target), batch.mask)
    metrics = {
      'value_mean': policy_losses.masked_mean(pred * self.scale, batch.mask)
    }
    return loss, types.LossExtra(metrics)


@dataclasses.dataclass(frozen=True)
class SamplingAWRLoss:
  """Sampling AWR: AWR on Q(s, a_i) - V(s) of S actions sampled per state.

  Attributes:
    distribution: the policy's action distribution.
    objective: the `AWRObjective` (beta, w_max, thresholds).
    normalization: the advantages' `AdvantageNormalization`.
    reweight: weight the sampled actions by pi_new / pi_sampling.
    sampled_all_discrete: the S actions enumerate all discrete actions;
      weight each by its sampling probability and use the
      probability-weighted mean of Q as V.
  """

  distribution: Any
  objective: AWRObjective = AWRObjective()
  normalization: AdvantageNormalization = AdvantageNormalization()
  reweight: bool = False
  sampled_all_discrete: bool = False

  def __call__(self, network, params, target_params, batch, key):
    del target_params, key
    dist_inputs = network.apply(params, batch.observation)  # [B, I]
    n_samples = batch.q_values.shape[0]
    log_probs = self.distribution.log_prob(
      jnp.broadcast_to(dist_inputs, (n_samples,) + dist_inputs.shape),
      batch.actions,
    )  # [S, B]
    weights = (
      jnp.exp(batch.act_log_probs) if self.sampled_all_discrete else None
    )
    values = value_estimates.mean(batch.q_values, weights=weights)
    mask = jnp.broadcast_to(batch.mask, batch.q_values.shape)
    advantages = self.normalization(batch.q_values - values, mask)
    if self.reweight:
      mask = mask * jnp.exp(
        jax.lax.stop_gradient(log_probs) - batch.act_log_probs
      )
    if self.sampled_all_discrete:
      mask = mask * weights
    objective = self.objective
    awr = awr_weights(
      advantages, objective.beta, objective.w_max, objective.thresholds,
      batch.mask,
    )  # fmt: skip
    loss = -jnp.sum(log_probs * awr * mask) / jnp.maximum(jnp.sum(mask), 1e-8)
    metrics = {
      'entropy': policy_losses.masked_mean(
        self.distribution.entropy(dist_inputs), batch.mask
      ),
      'awr_weight_mean': policy_losses.masked_mean(awr, mask),
      'advantage_std': jnp.sqrt(
        policy_losses.masked_mean(jnp.square(batch.q_values - values), mask)
      ),
    }
    return loss, types.LossExtra(metrics)
