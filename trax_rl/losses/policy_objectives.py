"""Per-step policy objectives of A2C, PPO and AWR (pure jnp).

Each `*_objective` helper returns `(objective [B], metrics)`, the objective
to maximize, and is shared by the separate-network losses
(`losses.actor_critic`) and the joint ones (`losses.actor_critic_joint`).
Advantages reach them preprocessed and get no gradient.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from trax_rl.losses import policy as policy_losses

masked_mean = policy_losses.masked_mean
# (percentile, weight, minimum or None), as Trax's AWR `thresholds`.
Threshold = tuple[float, float, float | None]
Metrics = dict[str, jax.Array]


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
    advantages: [...] advantages (no gradient flows into them).
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


def a2c_objective(
  log_probs: jax.Array, advantages: jax.Array
) -> tuple[jax.Array, Metrics]:
  """A2C's log pi(a|s) * A, with no metrics.

  Args:
    log_probs: [B] log-probs of the actions under the trained policy.
    advantages: [B] preprocessed advantages.

  Returns:
    (objective [B], {}).
  """
  return log_probs * jax.lax.stop_gradient(advantages), {}


def clipped_objective(
  log_probs: jax.Array,
  old_log_probs: jax.Array,
  advantages: jax.Array,
  mask: jax.Array,
  epsilon: float,
) -> tuple[jax.Array, Metrics]:
  """PPO's clipped surrogate, its mean ratio and its clip fraction.

  Args:
    log_probs: [B] log-probs of the actions under the trained policy.
    old_log_probs: [B] log-probs under the policy that acted.
    advantages: [B] preprocessed advantages.
    mask: [B] 1 for real steps, 0 for padding.
    epsilon: the clip range of the probability ratio.

  Returns:
    (objective [B], {'probs_ratio_mean', 'clip_fraction'}).
  """
  objective, ratio = ppo_objective(
    log_probs,
    old_log_probs,
    jax.lax.stop_gradient(advantages),
    epsilon,
  )
  clipped = (jnp.abs(ratio - 1.0) > epsilon).astype(ratio.dtype)
  return objective, {
    'probs_ratio_mean': masked_mean(ratio, mask),
    'clip_fraction': masked_mean(clipped, mask),
  }


def awr_objective(
  log_probs: jax.Array,
  advantages: jax.Array,
  mask: jax.Array,
  beta: float,
  w_max: float,
  thresholds: Sequence[Threshold] | None,
) -> tuple[jax.Array, jax.Array]:
  """AWR's log pi(a|s) weighted by `awr_weights`.

  Args:
    log_probs: [B] log-probs of the actions under the trained policy.
    advantages: [B] preprocessed advantages.
    mask: [B] the entries the percentile thresholds are taken over.
    beta, w_max, thresholds: as in `awr_weights`.

  Returns:
    (objective [B], weights [B]); the callers report the weights.
  """
  weights = awr_weights(advantages, beta, w_max, thresholds, mask)
  return log_probs * weights, weights
