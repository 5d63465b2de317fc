"""Pure action selection: sampling with temperature, epsilon-greedy."""

from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import types


def sample_action(
  distribution: Any,
  dist_inputs: jax.Array,
  key: jax.Array,
  temperature: float | jax.Array,
) -> jax.Array:
  """Samples actions `[N, ...]` from `[N, n_inputs]` at `temperature`.

  Temperature 0 returns the mode exactly; 1 is the training behaviour.
  """
  return distribution.sample(dist_inputs, key, temperature)


def epsilon_greedy(
  q_values: jax.Array, key: jax.Array, epsilon: float | jax.Array
) -> jax.Array:
  """Greedy actions `[N]`, replaced by uniform ones with prob. epsilon.

  Args:
    q_values: `[N, A]`.
    key: PRNG key.
    epsilon: scalar or per-row `[N]` exploration rate.
  """
  n, n_actions = q_values.shape
  explore_key, action_key = jax.random.split(key)
  explore = jax.random.uniform(explore_key, (n,)) < epsilon
  random_actions = jax.random.randint(action_key, (n,), 0, n_actions)
  return jnp.where(explore, random_actions, jnp.argmax(q_values, axis=-1))


def apex_epsilons(
  n_envs: int,
  epsilon_min: float = 0.01,
  epsilon_max: float = 0.4,
  alpha: float = 7.0,
) -> np.ndarray:
  """Per-env exploration rates spread between two values (Ape-X style).

  Env i gets `epsilon_max ** (1 + alpha * i / (n - 1))` rescaled to span
  [epsilon_min, epsilon_max]; with one env, `epsilon_max`.
  """
  if n_envs == 1:
    return np.array([epsilon_max], np.float32)
  i = np.arange(n_envs) / (n_envs - 1)
  lo, hi = np.log(max(epsilon_min, 1e-8)), np.log(epsilon_max)
  return np.exp(hi + (lo - hi) * i).astype(np.float32)


def clip_to_space(action: np.ndarray, space: gym.Space) -> np.ndarray:
  """Clips continuous actions into a Box's bounds (other spaces unchanged)."""
  if isinstance(space, gym.spaces.Box):
    return np.clip(action, space.low, space.high).astype(space.dtype)
  return action


def key_for_step(key: types.PRNGKey, step: jax.Array) -> jax.Array:
  """The acting key of one policy call: `key` folded with the call index."""
  return jax.random.fold_in(key, step)


def acting_copy(params: Any) -> Any:
  """`params` for acting from the host: on the CPU, once per collection.

  With an accelerator as the default device, a policy step there would
  wait on a round trip per env step; a CPU copy, refreshed whenever a
  policy is built (once per epoch), keeps acting on the host. On CPU the
  params are returned as they are.
  """
  if jax.default_backend() == 'cpu':
    return params
  return jax.device_put(params, jax.local_devices(backend='cpu')[0])
