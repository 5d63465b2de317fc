"""Advantage estimators with Trax's API, as pure jnp functions.

Every factory takes the task's `gamma` and the slice `margin` (both bound by
the caller) plus its own knobs, and returns

  estimator(rewards, returns, values, dones, discount_mask, mask=None)
    -> advantages

with all inputs of shape [B, T] and advantages of shape [B, T - margin]. The
last `margin` steps of a slice are only there to bootstrap from; they get no
advantage of their own.

Conventions, per step t of a slice:
  rewards[t]        reward for the action taken in observation t.
  returns[t]        discounted return from observation t, rewards[t] included.
  values[t]         value estimate of observation t.
  dones[t]          the episode terminated at step t: nothing is bootstrapped
                    past it.
  discount_mask[t]  whether gamma (and lambda) apply when stepping from t to
                    t + 1; where it is 0 the step is not discounted (Trax uses
                    this for multi-token actions).

A slice cut short without termination has dones False everywhere and
bootstraps from values at its last observation, values[T - 1].

Every estimator also takes an optional `mask` [B, T] (the TimeStepBatch's):
rows where it is 0 are not steps but padding. The first of them after a
truncated or cut trajectory holds its final observation, so an estimator
bootstraps from its value there and never looks further; padding rows get
advantage 0. Without a mask every row is a step (Trax's behaviour), which
treats the padding row after a truncation (done True) as a terminal step.

The estimators do not modify their inputs and work under `jax.jit` (the
margin is a static Python int). A factory raises ValueError for a margin
below its minimum (0; 1 for `td_k`) or a gamma or lambda_ outside [0, 1].
"""

import numbers
from collections import abc

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import types

# estimator(rewards, returns, values, dones, discount_mask, mask=None).
Estimator = abc.Callable[..., jax.Array]


def _uses_jax(*xs) -> bool:
  return any(isinstance(x, jax.Array) for x in xs)


def mask_discount(
  discount: float | types.Array, discount_mask: types.Array
) -> types.Array:
  """Returns the discount to apply at each step: `discount` where masked in.

  Args:
    discount: the discount (gamma or lambda), a scalar or an array that
      broadcasts against `discount_mask`.
    discount_mask: [...] truthy where the discount applies; elsewhere 1.0 is
      used (no discounting).

  Returns:
    [...] per-step discounts; a numpy array for numpy inputs, a jax array
    otherwise.
  """
  xp = jnp if _uses_jax(discount, discount_mask) else np
  return xp.where(xp.asarray(discount_mask), discount, 1.0)


def discounted_returns(
  rewards: types.Array, gammas: types.Array
) -> types.Array:
  """Computes discounted returns of a trajectory or a batch of them.

  returns[..., t] = rewards[..., t] + gammas[..., t] * returns[..., t + 1],
  with nothing after the last step.

  Args:
    rewards: [T] or [B, T] rewards.
    gammas: per-step discounts broadcastable to `rewards` (for example the
      output of `mask_discount`).

  Returns:
    Returns of the same shape as `rewards`: a numpy array for numpy inputs
    (a plain loop, cheap on the host), a jax array for jax inputs (a reverse
    `lax.scan`, usable under jit).
  """
  if _uses_jax(rewards, gammas):
    rewards = jnp.asarray(rewards)
    dtype = jnp.result_type(rewards.dtype, jnp.asarray(gammas).dtype, float)
    rewards = rewards.astype(dtype)
    gammas = jnp.broadcast_to(jnp.asarray(gammas, dtype), rewards.shape)

    def step(next_return, xs):
      reward, gamma = xs
      ret = reward + gamma * next_return
      return ret, ret

    # Time goes first for the scan.
    _, returns = jax.lax.scan(
      step,
      jnp.zeros(rewards.shape[:-1], dtype),
      (jnp.moveaxis(rewards, -1, 0), jnp.moveaxis(gammas, -1, 0)),
      reverse=True,
    )
    return jnp.moveaxis(returns, 0, -1)

  rewards = np.asarray(rewards)
  gammas = np.asarray(gammas)
  dtype = np.result_type(rewards.dtype, gammas.dtype, np.float32)
  gammas = np.broadcast_to(gammas, rewards.shape)
  returns = np.zeros(rewards.shape, dtype)
  ret = np.zeros(rewards.shape[:-1], dtype)
  for t in reversed(range(rewards.shape[-1])):
    ret = rewards[..., t] + gammas[..., t] * ret
    returns[..., t] = ret
  return returns


def _check_factory_args(gamma, margin, min_margin=0, lambda_=None) -> None:
  if not isinstance(margin, numbers.Integral) or margin < min_margin:
    raise ValueError(f'margin must be an int >= {min_margin}, got {margin!r}.')
  if isinstance(gamma, numbers.Real) and not 0.0 <= gamma <= 1.0:
    raise ValueError(f'gamma must be in [0, 1], got {gamma}.')
  if isinstance(lambda_, numbers.Real) and not 0.0 <= lambda_ <= 1.0:
    raise ValueError(f'lambda_ must be in [0, 1], got {lambda_}.')


def _prepare(margin, **arrays) -> list[jax.Array]:
  """Checks that inputs are [B, T] with T > margin; returns float arrays.

  A `mask` of None becomes ones (every row a step).
  """
  if 'mask' in arrays and arrays['mask'] is None:
    arrays['mask'] = jnp.ones(jnp.shape(arrays['rewards']))
  shapes = {name: jnp.shape(x) for name, x in arrays.items()}
  first = shapes['rewards']
  if len(first) != 2 or any(s != first for s in shapes.values()):
    raise ValueError(f'Estimator inputs must all be [B, T]; got {shapes}.')
  if first[1] <= margin:
    raise ValueError(
      f'Slices of length {first[1]} are too short for margin {margin}; '
      f'need at least {margin + 1} steps.'
    )
  return [jnp.asarray(x, dtype=float) for x in arrays.values()]


def monte_carlo(gamma: float, margin: int) -> Estimator:
  """Monte Carlo advantage, Trax's: returns[t] - values[t], no baseline at ends.

  As google/trax's `advantages.monte_carlo`, a step where the episode
  terminated has return = its reward and value = 0 there, so its advantage is
  the reward alone: rewards[t], not rewards[t] - values[t]. Returns computed
  across an episode boundary do not leak into it. Trax zeroes `values` in
  place, which its callers then read back in their value targets
  `values + advantages`; `value_targets` gives those targets without
  mutating anything.

  Args:
    gamma: discount of the task (unused: `returns` are already discounted).
    margin: number of extra steps at the end of each slice.

  Returns:
    estimator(rewards, returns, values, dones, discount_mask, mask=None,
    terminal=None) returning advantages [B, T - margin]. `terminal` [B, T]
    marks where episodes ended naturally, for data whose `dones` also end
    trajectories that were cut and bootstrapped (the reward there holding
    r + gamma V(s_next)): the value is zeroed only where `terminal`; None
    zeroes it at every done, as Trax (whose dones are gym's).
  """
  _check_factory_args(gamma, margin)

  def estimator(
    rewards, returns, values, dones, discount_mask, mask=None, terminal=None
  ):
    del discount_mask, mask  # Folded into `returns`; no bootstrapping.
    rewards, returns, values, dones = _prepare(
      margin, rewards=rewards, returns=returns, values=values, dones=dones
    )
    returns = jnp.where(dones > 0, rewards, returns)
    # Trax zeroes the value where its episode ended; where a trajectory was
    # only cut (bootstrapped: `terminal` says which), the baseline stays.
    ended = dones if terminal is None else jnp.asarray(terminal, jnp.float32)
    values = jnp.where(ended > 0, 0.0, values)
    length = rewards.shape[1]
    return (returns - values)[:, : length - margin]

  return estimator


def value_targets(
  advantages: types.Array,
  rewards: types.Array,
  values: types.Array,
  dones: types.Array,
) -> jax.Array:
  """Trax's value targets: values + advantages, the reward at done steps.

  Trax's critics and its DQN regress on `values + advantages`, added after
  the estimator ran. Its `monte_carlo` zeroes `values` at done steps in
  place, so there the target is the reward; every other estimator gives
  rewards - values at a done step, so `values + advantages` is the reward
  there too. This gives that target for any estimator, without mutation.
  Padding rows (mask 0) get the reward too: callers mask them out.

  Args:
    advantages: [B, T - margin] an estimator's output.
    rewards: [B, T] the estimator's rewards.
    values: [B, T] the estimator's values.
    dones: [B, T] the estimator's dones.

  Returns:
    [B, T - margin] value targets.
  """
  n = jnp.shape(advantages)[1]
  done = jnp.asarray(dones)[:, :n] > 0
  rewards = jnp.asarray(rewards)[:, :n]
  return jnp.where(done, rewards, jnp.asarray(values)[:, :n] + advantages)


def td_k(gamma: float, margin: int) -> Estimator:
  """TD-k advantage with k = margin.

  advantage[t] = sum_{i<k} g_t..g_{t+i-1} * rewards[t+i]
                 + g_t..g_{t+k-1} * values[t+k] - values[t],

  where g_s = gamma (or 1 where discount_mask[s] is 0) and the sum and the
  bootstrap stop at the first terminated step in the window.

  Args:
    gamma: discount of the task.
    margin: number of extra steps at the end of each slice; also k, the
      number of rewards summed before bootstrapping.
  """
  _check_factory_args(gamma, margin, min_margin=1)

  def advantages_k(rewards, values, dones, mask, gammas, lambdas):
    del lambdas
    n = rewards.shape[1] - margin
    advantages = jnp.zeros_like(values[:, :n])
    # Product of discounts so far, zeroed once the episode has terminated or
    # the window has reached a padding row (whose value it then took).
    carry = jnp.ones_like(advantages)
    for i in range(margin):
      real = mask[:, i : i + n] > 0
      advantages += carry * jnp.where(
        real, rewards[:, i : i + n], values[:, i : i + n]
      )
      carry *= jnp.where(
        real, gammas[:, i : i + n] * (1.0 - dones[:, i : i + n]), 0.0
      )
    advantages += carry * values[:, margin : margin + n]
    return advantages - values[:, :n]

  return _lambda_estimator(gamma, margin, 1.0, advantages_k)


def _lambda_returns(rewards, values, dones, gammas, lambdas, mask):
  """Lambda-returns [B, T]; the last step bootstraps from its own value.

  A padding row (mask 0) returns its own value: it is a bootstrap point.
  """
  # At the last step there is no next value: a terminated step returns its
  # reward, any other step is the bootstrap observation itself.
  last = jnp.where(
    (dones[:, -1] > 0) & (mask[:, -1] > 0), rewards[:, -1], values[:, -1]
  )

  def step(next_return, xs):
    reward, done, gamma, lambda_, real, value, next_value = xs
    mixed = (1.0 - lambda_) * next_value + lambda_ * next_return
    ret = jnp.where(real > 0, reward + (1.0 - done) * gamma * mixed, value)
    return ret, ret

  xs = (rewards, dones, gammas, lambdas, mask, values)
  xs = tuple(x[:, :-1].T for x in xs) + (values[:, 1:].T,)
  _, returns = jax.lax.scan(step, last, xs, reverse=True)
  return jnp.concatenate([returns.T, last[:, None]], axis=1)


def td_lambda(gamma: float, margin: int, lambda_: float = 0.95) -> Estimator:
  """TD(lambda) advantage: the lambda-return minus the value.

  G[t] = rewards[t] + (1 - dones[t]) * g_t * ((1 - l_t) * values[t + 1]
                                              + l_t * G[t + 1]),

  with g_t, l_t = gamma, lambda_ (or 1 where discount_mask[t] is 0). At the
  last step G is its reward if the episode terminated there, else its value.

  Args:
    gamma: discount of the task.
    margin: number of extra steps at the end of each slice. With margin 0 the
      last step of a slice that did not terminate gets advantage 0 (there is
      no next value to bootstrap from).
    lambda_: the lambda of TD(lambda), in [0, 1]; 0 is TD(0), 1 is Monte Carlo
      bootstrapped from the last value.
  """
  _check_factory_args(gamma, margin, lambda_=lambda_)

  def advantages(rewards, values, dones, mask, gammas, lambdas):
    lambda_returns = _lambda_returns(
      rewards, values, dones, gammas, lambdas, mask
    )
    return lambda_returns - values

  return _lambda_estimator(gamma, margin, lambda_, advantages)


def _lambda_estimator(gamma, margin, lambda_, advantages) -> Estimator:
  """The estimator that `_prepare`s a slice and returns `advantages(rewards,
  values, dones, mask, gammas, lambdas)` on its first `length - margin`
  steps; gammas and lambdas are 1 where discount_mask is 0."""

  def estimator(
    rewards, returns, values, dones, discount_mask, mask=None, terminal=None
  ):
    del returns, terminal  # Every done ends the bootstrap, as in Trax.
    rewards, values, dones, discount_mask, mask = _prepare(
      margin,
      rewards=rewards,
      values=values,
      dones=dones,
      discount_mask=discount_mask,
      mask=mask,
    )
    gammas = mask_discount(gamma, discount_mask)
    lambdas = mask_discount(lambda_, discount_mask)
    result = advantages(rewards, values, dones, mask, gammas, lambdas)
    return result[:, : rewards.shape[1] - margin]

  return estimator


def gae(gamma: float, margin: int, lambda_: float = 0.95) -> Estimator:
  """Generalized Advantage Estimation (Schulman et al., 2015, 1506.02438).

  delta[t] = rewards[t] + (1 - dones[t]) * g_t * values[t + 1] - values[t]
  A[t] = delta[t] + (1 - dones[t]) * g_t * l_t * A[t + 1],

  with g_t, l_t = gamma, lambda_ (or 1 where discount_mask[t] is 0). At the
  last step delta is rewards - values if the episode terminated there, else
  0. Equal to `td_lambda` with the same arguments.

  Args:
    gamma: discount of the task.
    margin: number of extra steps at the end of each slice. With margin 0 the
      last step of a slice that did not terminate gets advantage 0 (there is
      no next value to bootstrap from).
    lambda_: the lambda of GAE, in [0, 1].
  """
  _check_factory_args(gamma, margin, lambda_=lambda_)

  def advantages(rewards, values, dones, mask, gammas, lambdas):
    real = mask > 0
    # A padding row is a bootstrap point: no advantage, no continuation.
    dones = jnp.where(real, dones, 1.0)
    rewards = jnp.where(real, rewards, values)
    not_done = 1.0 - dones
    deltas = (
      rewards[:, :-1]
      + not_done[:, :-1] * gammas[:, :-1] * values[:, 1:]
      - values[:, :-1]
    )
    last_delta = dones[:, -1] * (rewards[:, -1] - values[:, -1])
    deltas = jnp.concatenate([deltas, last_delta[:, None]], axis=1)
    decays = not_done * gammas * lambdas

    def step(next_advantage, xs):
      delta, decay = xs
      advantage = delta + decay * next_advantage
      return advantage, advantage

    _, result = jax.lax.scan(
      step, jnp.zeros_like(last_delta), (deltas.T, decays.T), reverse=True
    )
    return result.T

  return _lambda_estimator(gamma, margin, lambda_, advantages)
