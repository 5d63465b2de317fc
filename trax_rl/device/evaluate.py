"""Compiled evaluation on a JAX env: n episodes from fresh resets.

`evaluate(env, policy, params, key, n_episodes, max_steps)` plays one
episode in each of `n_episodes` envs, all in one compiled loop, and returns
the undiscounted return of each episode. With `max_steps` it is a
`lax.scan` of that many steps (an episode still running then is truncated
there); with None, a while loop that runs until every episode has ended,
as the host path plays an uncapped eval episode.
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
  max_steps: int | None,
  initial_core: Callable[[int], Any] | None = None,
) -> jax.Array:
  """Returns `[n_episodes]` episode returns (see the module docstring).

  `initial_core(n)`: a recurrent policy's initial state (see `rollout`).
  """
  carry = rollout.init_carry(env, key, n_episodes, initial_core)

  def body(state):
    carry, alive, total = state
    carry, steps = rollout.step(env, policy, params, carry, max_steps)
    total = total + jnp.where(alive, steps.reward, 0.0)
    alive = alive & ~(steps.terminated | steps.truncated)
    return carry, alive, total

  state = (
    carry,
    jnp.ones(n_episodes, bool),
    jnp.zeros(n_episodes, jnp.float32),
  )
  if max_steps is None:
    _, _, total = jax.lax.while_loop(lambda s: s[1].any(), body, state)
  else:
    (_, _, total), _ = jax.lax.scan(
      lambda s, _: (body(s), None), state, None, length=max_steps
    )
  return total
