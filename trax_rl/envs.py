"""Environments: make single and vector gymnasium envs; space helpers."""

import copy
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from trax_rl import jax_envs, jax_vector_env

EnvLike = str | gym.Env | Callable[[], gym.Env]


def _unknown_env_error(env_id: str, error: Exception) -> ValueError:
  return ValueError(f'unknown env id {env_id!r}: {error}')


def make_env(env: EnvLike, **kwargs) -> gym.Env:
  """Builds one gymnasium env from an id, an instance or a factory.

  Args:
    env: a registered gymnasium id (`'CartPole-v1'`), an env instance (returned
      as is), or a zero-argument callable that returns an env.
    **kwargs: passed to `gymnasium.make` when `env` is an id.

  Returns:
    The environment.

  Raises:
    ValueError: the id is not registered (the message names it).
  """
  if isinstance(env, str):
    if env.startswith('ALE/'):
      _register_ale(env)
    try:
      return gym.make(env, **kwargs)
    except gym.error.Error as e:
      raise _unknown_env_error(env, e) from None
    except ModuleNotFoundError as e:
      raise ValueError(
        f'env {env!r} needs a package that is not installed: {e.name} '
        '(see the README for the optional extras)'
      ) from None
  if isinstance(env, gym.Env):
    return env
  if callable(env):
    made = env()
    if not isinstance(made, gym.Env):
      raise ValueError(
        f'env factory {env!r} returned {type(made).__name__}, '
        'not a gymnasium.Env'
      )
    return made
  raise ValueError(
    f'env must be an id, a gymnasium.Env or a factory, got {type(env).__name__}'
  )


def _register_ale(env_id: str) -> None:
  try:
    import ale_py  # Optional: pip install 'trax_rl[atari]'.
  except ImportError:
    raise ValueError(
      f"env {env_id!r} needs ale-py: pip install -e '.[atari]'"
    ) from None
  gym.register_envs(ale_py)


def make_vector_env(env: EnvLike, n_envs: int) -> gym.vector.VectorEnv:
  """Builds `n_envs` copies of `env` stepped in lockstep.

  The vector env's autoreset is disabled: `RLTask` resets finished envs itself
  (with `options={'reset_mask': mask}`), so that it sees every final
  observation and decides when an episode may start.

  Args:
    env: as for `make_env`; an instance is deep-copied for envs 2..n. A JAX
      env (`'gymnax:<id>'` or a pure reset/step object, see `jax_envs`) is
      stepped from the host by a `jax_vector_env.JaxVectorEnv`.
    n_envs: number of envs, >= 1.

  Returns:
    A `gymnasium.vector.SyncVectorEnv` (or `JaxVectorEnv`).
  """
  if n_envs < 1:
    raise ValueError(f'n_envs must be >= 1, got {n_envs}')
  if jax_envs.is_jax_env(env):
    return jax_vector_env.JaxVectorEnv(jax_envs.make_jax_env(env), n_envs)
  first = make_env(env)
  if isinstance(env, gym.Env):
    fns = [lambda: first] + [lambda: copy.deepcopy(first)] * (n_envs - 1)
  else:
    fns = [lambda: first] + [lambda: make_env(env)] * (n_envs - 1)
  return gym.vector.SyncVectorEnv(
    fns, copy=False, autoreset_mode=gym.vector.AutoresetMode.DISABLED
  )


def is_discrete(space: gym.Space) -> bool:
  """Whether a space is a single `Discrete`."""
  return isinstance(space, gym.spaces.Discrete)


def require_discrete(space: gym.Space, agent_name: str) -> int:
  """Returns the number of actions, or raises naming the space.

  Raises:
    ValueError: `space` is not `Discrete`.
  """
  if not is_discrete(space):
    raise ValueError(f'{agent_name} needs a Discrete action space, got {space}')
  return int(space.n)


class MaskVelocity(gym.ObservationWrapper):
  """Hides the velocity entries of a classic-control observation.

  On CartPole the observation is (x, x_dot, theta, theta_dot); with the
  velocities zeroed the task is partially observable, so a feed-forward agent
  must guess and a recurrent one can infer velocities from history.

  Args:
    env: the env (id, instance or factory) to wrap.
    indices: observation indices to zero; default: CartPole's (1, 3).
  """

  def __init__(self, env: EnvLike, indices: tuple[int, ...] = (1, 3)):
    super().__init__(make_env(env))
    self._mask = np.ones(self.observation_space.shape, np.float32)
    self._mask[list(indices)] = 0.0

  def observation(self, observation: np.ndarray) -> np.ndarray:
    return (observation * self._mask).astype(observation.dtype)


def masked_cartpole() -> gym.Env:
  """CartPole-v1 with its velocities hidden (a memory task)."""
  return MaskVelocity('CartPole-v1')


def mask_velocity(
  env: EnvLike = 'CartPole-v1', indices: tuple[int, ...] = (1, 3)
) -> gym.Env | jax_envs.JaxEnv:
  """`env` with its velocity entries hidden, on either data path.

  A JAX env id or object (`gymnax:CartPole-v1`) gives a masked `JaxEnv`
  (the device path); anything else a `MaskVelocity` gymnasium env. In gin:
  `RLTask.env = @mask_velocity()` with `mask_velocity.env = ...`.

  Args:
    env: a JAX env id or object, or a gymnasium id, instance or factory.
    indices: observation indices to zero; default: CartPole's (1, 3).
  """
  if jax_envs.is_jax_env(env):
    return jax_envs.mask_observation(jax_envs.make_jax_env(env), indices)
  return MaskVelocity(env, indices)
