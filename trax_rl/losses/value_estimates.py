"""Advantages, value targets and state values for actor-critics (pure jnp).

The agents compute advantages and value targets once over whole packed
trajectories (`advantages_and_targets`), get state values from Q-values of
sampled actions where the critic is a Q network (`aggregate_values`), and
the losses normalize advantages per minibatch (`preprocess_advantages`).
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp

from trax_rl import advantages as advantages_lib
from trax_rl.losses import policy as policy_losses


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


Aggregate = Callable[[jax.Array, float], jax.Array]
Normalization = Callable[[jax.Array], jax.Array]


def mean(
  q_values: jax.Array,
  temperature: float = 1.0,
  weights: jax.Array | None = None,
) -> jax.Array:
  """[B] mean of Q [S, B] over samples (given weights [S, B], their sum)."""
  del temperature
  if weights is None:
    return jnp.mean(q_values, axis=0)
  return jnp.sum(q_values * weights, axis=0)


def maximum(q_values: jax.Array, temperature: float = 1.0) -> jax.Array:
  """[B] max of Q [S, B] over samples."""
  del temperature
  return jnp.max(q_values, axis=0)


def softmax(q_values: jax.Array, temperature: float = 1.0) -> jax.Array:
  """[B] sum of Q [S, B] times softmax(Q / temperature) over samples."""
  weights = jax.nn.softmax(q_values / temperature, axis=0)
  return jnp.sum(q_values * weights, axis=0)


def logsumexp(q_values: jax.Array, temperature: float = 1.0) -> jax.Array:
  """[B] temperature * log mean exp(Q / temperature) over samples."""
  n = q_values.shape[0]
  lse = jax.nn.logsumexp(q_values / temperature, axis=0)
  return (lse - jnp.log(n)) * temperature


def std_scale(q_values: jax.Array) -> jax.Array:
  """Spread of Q-values: their std (+1e-5)."""
  return jnp.std(q_values) + 1e-5


def abs_scale(q_values: jax.Array) -> jax.Array:
  """Spread of Q-values: their mean absolute deviation (+1e-5)."""
  return jnp.mean(jnp.abs(q_values - jnp.mean(q_values))) + 1e-5


# Trax's string names of the aggregates and normalizations (its gin knobs
# `q_value_aggregate` and `q_value_normalization`), resolved here only.
AGGREGATES = {
  'mean': mean,
  'max': maximum,
  'softmax': softmax,
  'logsumexp': logsumexp,
}
NORMALIZATIONS = {None: None, 'std': std_scale, 'abs': abs_scale}


def aggregate_fn(aggregate: str | Aggregate) -> Aggregate:
  """The aggregate named by Trax's string, or the given function.

  Raises:
    ValueError: an unknown name.
  """
  if callable(aggregate):
    return aggregate
  if aggregate not in AGGREGATES:
    raise ValueError(
      f'q_value_aggregate must be one of {sorted(AGGREGATES)} or a '
      f'function, got {aggregate!r}'
    )
  return AGGREGATES[aggregate]


def normalization_fn(
  normalization: str | Normalization | None,
) -> Normalization | None:
  """The Q-value normalization named by Trax's string (or None), or a function.

  Raises:
    ValueError: an unknown name.
  """
  if normalization is None or callable(normalization):
    return normalization
  if normalization not in NORMALIZATIONS:
    raise ValueError(
      "q_value_normalization must be None, 'std', 'abs' or a function, got "
      f'{normalization!r}'
    )
  return NORMALIZATIONS[normalization]


def aggregate_values(
  q_values: jax.Array,
  aggregate: Aggregate = mean,
  temperature: float = 1.0,
  normalization: Normalization | None = None,
) -> jax.Array:
  """State values from Q-values of S sampled actions, as Trax's.

  Args:
    q_values: [S, B] Q(s, a_i).
    aggregate: `mean`, `maximum`, `softmax`, `logsumexp` or any
      `f(q [S, B], temperature) -> [B]`.
    temperature: of `softmax` and `logsumexp`.
    normalization: None, or `f(q) -> scale`: Q is divided by that scale
      before aggregating and multiplied back after (`std_scale`,
      `abs_scale`: scale-free temperatures).

  Returns:
    [B] values.
  """
  scale = 1.0 if normalization is None else normalization(q_values)
  return aggregate(q_values / scale, temperature) * scale


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
    (advantages [N], value targets [N]), both 0 on padding. The targets
    are Trax's, `advantages.value_targets`: values + advantages, and the
    (folded) reward at a trajectory's last step, whatever the estimator.
    `monte_carlo` drops the baseline where an episode terminated (its
    advantage there is the reward alone, Trax's), not where a trajectory
    was cut and bootstrapped (r + gamma V(s_next) - V(s), as every other
    estimator).
  """
  values = values * mask
  reward = (reward + gamma * boundary * next_values) * mask
  dones = jnp.maximum(jnp.maximum(terminal, boundary), 1.0 - mask)

  def pad(x, value):
    return jnp.concatenate([x, jnp.full((margin,), value, x.dtype)])[None]

  reward, values_p = pad(reward, 0.0), pad(values, 0.0)
  dones = pad(dones.astype(reward.dtype), 1.0)
  returns = advantages_lib.discounted_returns(reward, gamma * (1.0 - dones))
  adv = estimator(
    reward,
    returns,
    values_p,
    dones,
    jnp.ones_like(reward),
    terminal=pad(terminal.astype(reward.dtype), 1.0),
  )
  targets = advantages_lib.value_targets(adv, reward, values_p, dones)[0]
  return adv[0] * mask, targets * mask


def explained_variance(
  values: jax.Array, targets: jax.Array, mask: jax.Array
) -> jax.Array:
  """1 - Var[targets - values] / Var[targets], over the masked entries."""

  def var(x):
    mean_x = policy_losses.masked_mean(x, mask)
    return policy_losses.masked_mean(jnp.square(x - mean_x), mask)

  return 1.0 - var(targets - values) / (var(targets) + 1e-8)


def cut_steps(truncated: jax.Array, valid: jax.Array) -> jax.Array:
  """Where a return must bootstrap rather than go on, `[T, N]` bool.

  After a truncation, and after each env's last valid step (the rollout's
  end, or the padding after it): the next step is not the same episode's,
  or not there.
  """
  next_valid = jnp.concatenate([valid[1:], jnp.zeros_like(valid[:1])])
  return truncated | ~next_valid


def q_lambda_returns(
  reward: jax.Array,
  terminated: jax.Array,
  cut: jax.Array,
  q_next: jax.Array,
  gamma: float,
  lambda_: float,
) -> jax.Array:
  """Peng's Q(lambda) returns, computed backwards over a rollout (PQN).

  G_t = r_t + gamma * (1 - terminated_t) * (q_t + lambda * (1 - cut_t) *
  (G_{t+1} - q_t)), with q_t = max_a Q(o_{t+1}, a): at a cut step, the
  one-step target r_t + gamma q_t.

  Args:
    reward: `[T, N]` r_t.
    terminated: `[T, N]` bool, no bootstrap after step t.
    cut: `[T, N]` bool, bootstrap from q_t, not from G_{t+1}
      (`cut_steps`); must hold at t = T - 1.
    q_next: `[T, N]` max_a Q(o_{t+1}, a), o_{t+1} the final observation
      where the episode ended.
    gamma: the discount.
    lambda_: the trace decay.

  Returns:
    `[T, N]` float32 returns G_t.
  """

  def step(g_next, x):
    r, term, c, q = x
    bootstrap = q + lambda_ * jnp.where(c, 0.0, g_next - q)
    g = r + gamma * jnp.where(term, 0.0, bootstrap)
    return g, g

  xs = (reward.astype(jnp.float32), terminated, cut, q_next)
  _, returns = jax.lax.scan(step, jnp.zeros_like(xs[0][0]), xs, reverse=True)
  return returns
