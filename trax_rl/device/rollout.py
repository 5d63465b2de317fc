"""Compiled collection: a `lax.scan` of vmapped env steps, policy inside.

Contract (pure functions, usable inside `jit`, `vmap` over seeds and `scan`
over epochs):

  carry = init_carry(env, key, n_envs)
  carry, steps = rollout(env, policy, params, carry, n_steps, max_steps)

- `policy(params, key, observation[N, ...]) -> (action[N, ...], info)`,
  `info` a dict of `[N, ...]` arrays to keep (e.g. `dist_inputs`). A
  recurrent policy (one whose carry was built with a `core`, e.g. an LSTM
  state `[N, H]`) is called as `policy(params, key, observation, core,
  first[N]) -> (action, info, next core)`, `first` marking the envs whose
  episode starts at this step (the policy zeroes their core). The env
  receives the action clipped into a Box action space; `steps.action` keeps
  the action as sampled.
- Keys: each step splits `carry.key` into (next carry key, policy key, step
  key, reset key); env i steps with `split(step_key, N)[i]` and, if its
  episode ended, restarts with `split(reset_key, N)[i]`.
- Episodes reset on the device: after a step where `terminated | truncated`,
  the env's state and observation are those of a fresh episode, while
  `steps.next_observation` holds the episode's final observation.
  `truncated` is the env's own time limit or `max_steps`, never both with
  `terminated`.
- `carry.window` keeps the returns of the last `WINDOW` completed episodes
  and their total count, for `episode_return_mean` and `n_episodes`.

`EnvCarry` and `Rollout` are NamedTuples of arrays: the whole collection
state, episodes in flight included, is a pytree that checkpoints as numpy.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp

from trax_rl import jax_envs, types

WINDOW = 100  # episode_return_mean averages the last this many episodes.

# policy(params, key, observation[N, ...]) -> (action[N, ...], info dict)
DevicePolicy = Callable[[Any, jax.Array, Any], tuple[Any, dict[str, Any]]]


class ReturnWindow(NamedTuple):
  """Returns of the last completed episodes (a ring) and their count."""

  returns: Any  # [WINDOW] float32; entries past `count` are 0
  count: Any  # [] int32, completed episodes so far


class EnvCarry(NamedTuple):
  """Everything collection carries from one step (and epoch) to the next."""

  state: Any  # env state pytree, leaves [N, ...]
  observation: Any  # [N, ...] o_t, the observation to act on
  key: Any  # raw PRNG key of the collection stream
  episode_return: Any  # [N] float32, undiscounted return so far
  episode_length: Any  # [N] int32, steps of the running episodes
  window: ReturnWindow
  core: Any = ()  # a recurrent policy's state, leaves [N, ...]; () if none


# The rollout pytree every source emits (defined with the shared types).
Rollout = types.Rollout


def init_carry(
  env: jax_envs.JaxEnv,
  key: jax.Array,
  n_envs: int,
  initial_core: Callable[[int], Any] | None = None,
) -> EnvCarry:
  """Resets `n_envs` envs; `key` seeds the resets and the whole stream.

  `initial_core(n)`: a recurrent policy's initial state (leaves `[n, ...]`).
  """
  key, reset_key = jax.random.split(key)
  obs, state = jax.vmap(env.reset)(jax.random.split(reset_key, n_envs))
  return EnvCarry(
    state=state,
    observation=obs,
    key=key,
    episode_return=jnp.zeros(n_envs, jnp.float32),
    episode_length=jnp.zeros(n_envs, jnp.int32),
    window=ReturnWindow(
      jnp.zeros(WINDOW, jnp.float32), jnp.zeros((), jnp.int32)
    ),
    core=() if initial_core is None else initial_core(n_envs),
  )


def _select(done: jax.Array, new: Any, old: Any) -> Any:
  def pick(a, b):
    return jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b)

  return jax.tree.map(pick, new, old)


def record_returns(
  window: ReturnWindow, done: jax.Array, returns: jax.Array
) -> ReturnWindow:
  """Appends `returns[done]` (in env order) to the ring of last returns."""
  position = (window.count + jnp.cumsum(done) - 1) % WINDOW
  index = jnp.where(done, position, WINDOW)  # Out of range: dropped.
  ring = window.returns.at[index].set(returns, mode='drop')
  return ReturnWindow(ring, window.count + jnp.sum(done, dtype=jnp.int32))


def episode_return_mean(window: ReturnWindow) -> jax.Array:
  """Mean of the last min(count, WINDOW) episode returns (0 if none)."""
  n = jnp.minimum(window.count, WINDOW)
  return jnp.sum(window.returns) / jnp.maximum(n, 1)


def env_action(space: gym.Space, action: jax.Array) -> jax.Array:
  """The action the env receives: clipped into a Box, as on the host path."""
  if isinstance(space, gym.spaces.Box):
    return jnp.clip(action, space.low, space.high).astype(space.dtype)
  return action


def step(
  env: jax_envs.JaxEnv,
  policy: DevicePolicy,
  params: Any,
  carry: EnvCarry,
  max_steps: int | None = None,
) -> tuple[EnvCarry, Rollout]:
  """One vmapped env step with the policy; resets finished envs."""
  n = carry.episode_return.shape[0]
  key, act_key, step_key, reset_key = jax.random.split(carry.key, 4)
  core = ()
  if jax.tree.leaves(carry.core):  # Decided when tracing.
    first = carry.episode_length == 0
    action, info, core = policy(
      params, act_key, carry.observation, carry.core, first
    )
  else:
    action, info = policy(params, act_key, carry.observation)
  out = jax.vmap(env.step)(
    jax.random.split(step_key, n),
    carry.state,
    env_action(env.action_space, action),
  )
  length = carry.episode_length + 1
  terminated = jnp.asarray(out.terminated, bool)
  truncated = jnp.asarray(out.truncated, bool)
  if max_steps is not None:
    truncated = truncated | (length >= max_steps)
  truncated = truncated & ~terminated
  done = terminated | truncated
  reward = jnp.asarray(out.reward, jnp.float32)
  ep_return = carry.episode_return + reward
  reset_obs, reset_state = jax.vmap(env.reset)(jax.random.split(reset_key, n))
  new_carry = EnvCarry(
    state=_select(done, reset_state, out.state),
    observation=_select(done, reset_obs, out.observation),
    key=key,
    episode_return=jnp.where(done, 0.0, ep_return),
    episode_length=jnp.where(done, 0, length),
    window=record_returns(carry.window, done, ep_return),
    core=core,
  )
  emitted = Rollout(
    observation=carry.observation,
    action=action,
    reward=reward,
    terminated=terminated,
    truncated=truncated,
    next_observation=out.observation,
    agent_info=info,
    episode_return=jnp.where(done, ep_return, 0.0),
    valid=jnp.ones(n, bool),
  )
  return new_carry, emitted


def rollout(
  env: jax_envs.JaxEnv,
  policy: DevicePolicy,
  params: Any,
  carry: EnvCarry,
  n_steps: int,
  max_steps: int | None = None,
) -> tuple[EnvCarry, Rollout]:
  """`n_steps` steps of all envs in one `lax.scan`.

  Args:
    env: the JaxEnv.
    policy: `(params, key, obs[N, ...]) -> (action[N, ...], info)`.
    params: the policy's parameters (fixed during the rollout).
    carry: from `init_carry` or the previous rollout.
    n_steps: T (a Python int).
    max_steps: optional episode-length cap (truncation), as RLTask's.

  Returns:
    (carry after the last step, Rollout with fields `[T, N, ...]`).
  """

  def body(c, _):
    return step(env, policy, params, c, max_steps)

  return jax.lax.scan(body, carry, None, length=n_steps)


def summary(steps: Rollout, carry: EnvCarry) -> dict[str, jax.Array]:
  """Per-epoch collection numbers, as the host path's records.

  `avg_return` is the mean return of the episodes that ended in `steps`;
  if none ended, the mean over envs of the rewards collected (as Trax).
  """
  done = steps.terminated | steps.truncated
  n_done = jnp.sum(done)
  ended = jnp.sum(steps.episode_return) / jnp.maximum(n_done, 1)
  partial = jnp.mean(jnp.sum(steps.reward, axis=0))
  return {
    'avg_return': jnp.where(n_done > 0, ended, partial),
    'episode_return_mean': episode_return_mean(carry.window),
    'n_episodes': carry.window.count,
  }
