"""Advantages, value targets and state values for actor-critics (pure jnp).

The agents compute advantages and value targets once over whole packed
trajectories (`advantages_and_targets`), get state values from Q-values of
sampled actions where the critic is a Q network (`aggregate_values`), and
the losses normalize advantages per minibatch (`preprocess_advantages`).
"""

import jax
import jax.numpy as jnp

from trax_rl import advantages as advantages_lib
from trax_rl.losses import policy as policy_losses

masked_mean = policy_losses.masked_mean


def preprocess_advantages(
  advantages: jax.Array,
  mask: jax.Array,
  normalization: bool = True,
  epsilon: float = 1e-5,
  factor: float = 1.0,
) -> jax.Array:
  """Trax's `_preprocess_advantages`: factor * (a - mean) / (std + eps).

  Args:
    advantages: [...] advantages.
    mask: [...] weights of the entries in the statistics (padding 0).
    normalization: if False, return the advantages unchanged.
    epsilon: added to the std.
    factor: multiplies the normalized advantages.

  Returns:
    [...] preprocessed advantages.
  """
  if not normalization:
    return advantages
  mask = jnp.broadcast_to(mask, advantages.shape)
  return factor * policy_losses.normalize_advantages(advantages, mask, epsilon)


def aggregate_values(
  q_values: jax.Array,
  aggregate: str = 'mean',
  temperature: float = 1.0,
  normalization: str | None = None,
  act_log_probs: jax.Array | None = None,
) -> jax.Array:
  """State values from Q-values of S sampled actions, as Trax's.

  Args:
    q_values: [S, B] Q(s, a_i).
    aggregate: 'mean' (or, given act_log_probs, the probability-weighted sum
      over all discrete actions), 'max', 'softmax' (sum of Q times
      softmax(Q / T)) or 'logsumexp' (T * log mean exp(Q / T)).
    temperature: T of 'softmax' and 'logsumexp'.
    normalization: None, 'std' or 'abs': divide Q by its spread before
      aggregating and multiply back after (scale-free temperatures).
    act_log_probs: [S, B] log-probs of the actions, for the weighted 'mean'
      when all discrete actions were enumerated; None for a plain mean.

  Returns:
    [B] values.

  Raises:
    ValueError: an unknown aggregate or normalization.
  """
  if normalization is None:
    scale = 1.0
  elif normalization == 'std':
    scale = jnp.std(q_values) + 1e-5
  elif normalization == 'abs':
    scale = jnp.mean(jnp.abs(q_values - jnp.mean(q_values))) + 1e-5
  else:
    raise ValueError(
      f"q_value_normalization must be None, 'std' or 'abs', got "
      f'{normalization!r}'
    )
  q = q_values / scale
  if aggregate == 'max':
    values = jnp.max(q, axis=0)
  elif aggregate == 'softmax':
    values = jnp.sum(q * jax.nn.softmax(q / temperature, axis=0), axis=0)
  elif aggregate == 'logsumexp':
    n = q.shape[0]
    values = (
      jax.nn.logsumexp(q / temperature, axis=0) - jnp.log(n)
    ) * temperature
  elif aggregate == 'mean':
    if act_log_probs is None:
      values = jnp.mean(q, axis=0)
    else:
      values = jnp.sum(q * jnp.exp(act_log_probs), axis=0)
  else:
    raise ValueError(
      "q_value_aggregate must be 'mean', 'max', 'softmax' or 'logsumexp', "
      f'got {aggregate!r}'
    )
  return values * scale


def advantages_and_targets(
  estimator: advantages_lib.Estimator,
  margin: int,
  gamma: float,
  reward: jax.Array,
  terminal: jax.Array,
  boundary: jax.Array,
  mask: jax.Array,
  values: jax.Array,
  next_values: jax.Array,
) -> tuple[jax.Array, jax.Array]:
  """Advantages and value targets of packed trajectories.

  The steps of many trajectories lie end to end in one row. Every trajectory
  ends in a `done` for the estimator: a termination as is, a time-limit
  truncation or a cut at an epoch boundary (`boundary`) with the bootstrap
  value folded into its reward, r + gamma * V(s_next), so that every
  estimator bootstraps exactly there and nothing leaks across trajectories.

  Args:
    estimator: a factory from `trax_rl.advantages`, already bound to gamma
      and `margin` (`estimator(rewards, returns, values, dones, mask)`).
    margin: the estimator's margin; that many padding steps are appended.
    gamma: the discount.
    reward: [N] rewards.
    terminal: [N] 1 where the episode terminated at this step.
    boundary: [N] 1 where the trajectory ends without termination.
    mask: [N] 1 for real steps, 0 for padding.
    values: [N] V(s_t).
    next_values: [N] V(s_{t+1}); read only where boundary is 1.

  Returns:
    (advantages [N], value targets [N] = values + advantages), both 0 on
    padding.
  """
  values = values * mask
  reward = (reward + gamma * boundary * next_values) * mask
  dones = jnp.maximum(jnp.maximum(terminal, boundary), 1.0 - mask)

  def pad(x, value):
    return jnp.concatenate([x, jnp.full((margin,), value, x.dtype)])[None]

  reward, values_p = pad(reward, 0.0), pad(values, 0.0)
  dones = pad(dones.astype(reward.dtype), 1.0)
  returns = advantages_lib.discounted_returns(reward, gamma * (1.0 - dones))
  adv = estimator(reward, returns, values_p, dones, jnp.ones_like(reward))[0]
  adv = adv * mask
  return adv, (values + adv) * mask


def explained_variance(
  values: jax.Array, targets: jax.Array, mask: jax.Array
) -> jax.Array:
  """1 - Var[targets - values] / Var[targets], over the masked entries."""

  def var(x):
    return masked_mean(jnp.square(x - masked_mean(x, mask)), mask)

  return 1.0 - var(targets - values) / (var(targets) + 1e-8)
