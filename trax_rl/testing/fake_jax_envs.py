"""Tiny pure JAX environments for tests of the device path."""

from typing import NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np


class PointState(NamedTuple):
  position: jax.Array  # [] float32
  time: jax.Array  # [] int32


class PointEnv:
  """A point on a line pushed by a Gaussian action; a pure reset/step pair.

  Reset draws the position uniformly in [-1, 1]. A step adds the action
  (clipped to [-1, 1] by the caller's space) and noise of scale 0.1; the
  reward is -|position|. The episode terminates when |position| > 2 and is
  truncated after `max_time` steps. It follows the `jax_envs` contract for
  pure envs: no auto-reset, params passed in.
  """

  default_params = None

  def __init__(self, max_time: int = 5):
    self.max_time = max_time

  def reset(self, key, params):
    del params
    position = jax.random.uniform(key, (), jnp.float32, -1.0, 1.0)
    state = PointState(position, jnp.zeros((), jnp.int32))
    return position[None], state

  def step(self, key, state, action, params):
    del params
    noise = 0.1 * jax.random.normal(key, (), jnp.float32)
    position = state.position + action[0] + noise
    time = state.time + 1
    terminated = jnp.abs(position) > 2.0
    truncated = time >= self.max_time
    reward = -jnp.abs(position)
    return (
      position[None],
      PointState(position, time),
      reward,
      terminated,
      (truncated),
      {},
    )

  def observation_space(self, params):
    del params
    return gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)

  def action_space(self, params):
    del params
    return gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
