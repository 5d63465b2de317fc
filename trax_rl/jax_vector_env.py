"""A JAX env as a gymnasium vector env, for the host (gymnasium) data path.

With it every agent, evaluation and `trax-rl check` runs on a gymnax id
unchanged, step by step from Python (one jitted, vmapped call per step).
Agents with a compiled epoch (`trax_rl.device`) collect their training data
on the device instead; this adapter then serves only evaluation and checks.

Semantics are those `envs.make_vector_env` gives: autoreset is disabled, the
caller resets finished envs with `reset(options={'reset_mask': mask})`.
"""

from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import compile_options, jax_envs


class JaxVectorEnv(gym.vector.VectorEnv):
  """`n_envs` copies of a `JaxEnv`, stepped in lockstep from the host.

  Each env keeps its own key: `reset(seed=s)` sets it to `PRNGKey(s)`, and
  every reset or step splits it.
  """

  def __init__(self, env: jax_envs.JaxEnv, n_envs: int):
    self.env = env
    self.num_envs = n_envs
    self.single_observation_space = env.observation_space
    self.single_action_space = env.action_space
    self.observation_space = gym.vector.utils.batch_space(
      env.observation_space, n_envs
    )
    self.action_space = gym.vector.utils.batch_space(env.action_space, n_envs)
    self.metadata = {'autoreset_mode': gym.vector.AutoresetMode.DISABLED}
    self._keys = jax.random.split(jax.random.PRNGKey(0), n_envs)
    self._state = None
    self._obs = None
    self._reset = compile_options.jit(jax.vmap(self._reset_one))
    self._step = compile_options.jit(jax.vmap(self._step_one))

  def _reset_one(self, key):
    key, reset_key = jax.random.split(key)
    obs, state = self.env.reset(reset_key)
    return key, obs, state

  def _step_one(self, key, state, action):
    key, step_key = jax.random.split(key)
    return key, self.env.step(step_key, state, action)

  def reset(
    self, *, seed: Any = None, options: dict[str, Any] | None = None
  ) -> tuple[np.ndarray, dict]:
    if seed is not None:
      seeds = (
        [seed + i for i in range(self.num_envs)]
        if isinstance(seed, int)
        else list(seed)
      )
      self._keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    mask = (options or {}).get('reset_mask')
    keys, obs, state = self._reset(self._keys)
    if mask is None or self._state is None:
      self._keys, self._obs, self._state = keys, obs, state
    else:
      mask = jnp.asarray(mask)

      def pick(new, old):
        shaped = mask.reshape(mask.shape + (1,) * (new.ndim - 1))
        return jnp.where(shaped, new, old)

      self._keys = pick(keys, self._keys)
      self._obs = pick(obs, self._obs)
      self._state = jax.tree.map(pick, state, self._state)
    return np.asarray(self._obs), {}

  def step(self, actions: Any) -> tuple[Any, ...]:
    actions = jnp.asarray(actions)
    self._keys, out = self._step(self._keys, self._state, actions)
    self._state, self._obs = out.state, out.observation
    return (
      np.asarray(out.observation),
      np.asarray(out.reward, np.float64),
      np.asarray(out.terminated, bool),
      np.asarray(out.truncated, bool),
      {},
    )

  def close(self, **kwargs: Any) -> None:
    del kwargs
