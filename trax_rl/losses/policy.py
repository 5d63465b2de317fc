"""Policy losses on trajectory batches (Trax's PolicyTrainTask, jitted)."""

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from trax_rl import trajectory, types
from trax_rl.networks import models

# value_fn(batch) -> values [B, T]; weight_fn(advantages) -> weights.
ValueFn = Callable[[trajectory.TimeStepBatch], jax.Array]


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
  return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def normalize_advantages(
  advantages: jax.Array, mask: jax.Array, epsilon: float = 1e-5
) -> jax.Array:
  """(a - mean) / (std + epsilon), statistics over the unmasked entries."""
  mean = masked_mean(advantages, mask)
  std = jnp.sqrt(masked_mean(jnp.square(advantages - mean), mask))
  return (advantages - mean) / (std + epsilon)


def mean_return_baseline(batch: trajectory.TimeStepBatch) -> jax.Array:
  """PolicyGradient's baseline: the mean return of the batch's real steps."""
  value = masked_mean(batch.return_, batch.mask)
  return jnp.broadcast_to(value, batch.return_.shape)


def zero_baseline(batch: trajectory.TimeStepBatch) -> jax.Array:
  return jnp.zeros_like(batch.return_)


@dataclasses.dataclass(frozen=True)
class WeightedLogLikelihood:
  """-sum(weight(advantage) * log pi(a|s)) over a batch of trajectory slices.

  This is Trax's PolicyTrainTask loss: REINFORCE with a baseline when
  weight_fn is the identity, behavioural cloning of the (filtered) batch when
  weight_fn gives ones. Advantages, normalization and weights are computed
  inside the jitted loss and carry no gradient.

  Attributes:
    distribution: the policy's action distribution.
    advantage_estimator: `(rewards, returns, values, dones, discount_mask)
      -> advantages[B, T - margin]`, from `trax_rl.advantages`.
    value_fn: baseline `batch -> values[B, T]`.
    weight_fn: maps (normalized) advantages to weights.
    advantage_normalization: normalize advantages over the batch.
    advantage_normalization_epsilon: added to the std when normalizing.
    obs_ndim: number of axes of one observation.
  """

  distribution: Any
  advantage_estimator: Callable[..., jax.Array]
  value_fn: ValueFn = mean_return_baseline
  weight_fn: Callable[[jax.Array], jax.Array] = lambda a: a
  advantage_normalization: bool = True
  advantage_normalization_epsilon: float = 1e-5
  obs_ndim: int = 1

  def __call__(self, network, params, target_params, batch, key):
    del target_params, key  # No target network; deterministic.
    values = self.value_fn(batch)
    advantages = self.advantage_estimator(
      batch.reward,
      batch.return_,
      values,
      batch.done,
      batch.env_info.discount_mask,
      mask=batch.mask,
    )
    length = advantages.shape[1]
    mask = batch.mask[:, :length] * batch.env_info.control_mask[:, :length]
    # Trax's eval metrics: advantages before normalization, weights after.
    metrics = dict(_stats('advantage', advantages, mask, ('mean', 'std')))
    if self.advantage_normalization:
      advantages = normalize_advantages(
        advantages, mask, self.advantage_normalization_epsilon
      )
    weights = jax.lax.stop_gradient(self.weight_fn(advantages))
    metrics.update(
      _stats('weight', weights, mask, ('mean', 'std', 'min', 'max'))
    )
    weights = weights * mask / jnp.maximum(jnp.sum(mask), 1.0)
    dist_inputs = models.apply_over_time(
      network.apply, params, batch.observation[:, :length], self.obs_ndim
    )
    if isinstance(dist_inputs, tuple):  # A joint model: policy head first.
      dist_inputs = dist_inputs[0]
    log_prob = self.distribution.log_prob(dist_inputs, batch.action[:, :length])
    loss = -jnp.sum(log_prob * weights)
    metrics['entropy'] = masked_mean(
      self.distribution.entropy(dist_inputs), mask
    )
    return loss, types.LossExtra(metrics)


def _stats(name: str, x: jax.Array, mask: jax.Array, which) -> dict:
  """`{name_mean: ..., name_std: ...}` of x over the unmasked entries (Trax's
  PolicyEvalTask metrics, which count the whole batch: the same where no
  slice is padded, as with slices of one step)."""
  real = mask > 0
  mean = masked_mean(x, mask)
  stats = {
    'mean': lambda: mean,
    'std': lambda: jnp.sqrt(masked_mean(jnp.square(x - mean), mask)),
    'min': lambda: jnp.min(jnp.where(real, x, jnp.inf)),
    'max': lambda: jnp.max(jnp.where(real, x, -jnp.inf)),
  }
  some = jnp.any(real)  # An all-padding batch reports zeros, not infs.
  return {f'{name}_{k}': jnp.where(some, stats[k](), 0.0) for k in which}
