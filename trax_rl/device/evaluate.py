"""Compiled evaluation on a JAX env: n episodes from fresh resets.

`evaluate(env, policy, params, key, n_episodes, max_steps)` plays one
episode in each of `n_episodes` envs, all in one `lax.scan` of `max_steps`
steps, and returns the undiscounted return of each episode (an episode
still running after `max_steps` steps is truncated there).
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from trax_rl import jax_envs
from trax_rl.device import rollout


def evaluate(
  env: jax_envs.JaxEnv,
  policy: rollout.DevicePolicy,
  params,
  key: jax.Array,
  n_episodes: int,
  max_steps: int,
  initial_core: Callable[[int], Any] | None = None,
) -> jax.Array:
  """Returns `[n_episodes]` episode returns (see the module docstring).

  `initial_core(n)`: a recurrent policy's initial state (see `rollout`).
  """
  carry = rollout.init_carry(env, key, n_episodes, initial_core)

  def body(state, _):
    carry, alive, total = state
    carry, steps = rollout.step(env, policy, params, carry, max_steps)
    total = total + jnp.where(alive, steps.reward, 0.0)
    alive = alive & ~(steps.terminated | steps.truncated)
    return (carry, alive, total), None

  alive = jnp.ones(n_episodes, bool)
  total = jnp.zeros(n_episodes, jnp.float32)
  (_, _, total), _ = jax.lax.scan(
    body, (carry, alive, total), None, length=max_steps
  )
  return total
