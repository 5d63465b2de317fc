"""Environments: make single and vector gymnasium envs; space helpers."""

import copy
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from trax_rl import envpool_env, jax_envs, jax_vector_env, validation

EnvLike = str | gym.Env | Callable[[], gym.Env] | envpool_env.EnvpoolSpec


def _unknown_env_error(env_id: str, error: Exception) -> ValueError:
  return ValueError(f'unknown env id {env_id!r}: {error}')


def make_env(env: EnvLike, **kwargs) -> gym.Env:
  """Builds one gymnasium env from an id, an instance or a factory.

  Args:
    env: a registered gymnasium id (`'CartPole-v1'`), an env instance (returned
      as is), or a zero-argument callable that returns an env; or an envpool
      env (`'envpool:<id>'`, `envpool_env.make_envpool(...)`), as one env.
    **kwargs: passed to `gymnasium.make` when `env` is an id.

  Returns:
    The environment.

  Raises:
    ValueError: the id is not registered (the message names it).
  """
  if envpool_env.is_envpool_env(env):
    if kwargs:
      raise ValueError(
        f'env {env!r}: bind envpool options with make_envpool, not '
        f'{sorted(kwargs)}'
      )
    return envpool_env.EnvpoolEnv(env)
  if isinstance(env, str):
    if env.startswith('ALE/'):
      _register_ale(env)
    try:
      return gym.make(env, **kwargs)
    except gym.error.Error as e:
      if isinstance(e, gym.error.DependencyNotInstalled):
        raise _missing_dependency_error(env, e) from None
      raise _unknown_env_error(env, e) from None
    except ModuleNotFoundError as e:
      raise _missing_module_error(env, e) from None
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


# Our extras for what gymnasium's optional envs need.
_EXTRAS = ('mujoco', 'box2d')


def _missing_dependency_error(env_id: str, error: Exception) -> ValueError:
  """One line for a registered env whose simulator is not installed."""
  text = str(error)
  extra = next((x for x in _EXTRAS if x in text.lower()), None)
  install = f"pip install -e '.[{extra}]'" if extra else text
  return ValueError(
    f'env {env_id!r} needs a package that is not installed: {install}'
  )


def _missing_module_error(env_id: str, error: ModuleNotFoundError) -> Exception:
  """One line for an env whose module (or a package it needs) is missing.

  gymnasium re-raises the import of a `module:Name-v0` id without the
  missing module's name; it is in the message.
  """
  missing = error.name
  if missing is None:
    found = re.search(r"No module named '([\w.]+)'", str(error))
    missing = found.group(1) if found else None
  if ':' in env_id and missing and env_id.split(':')[0].startswith(missing):
    return ValueError(
      f'env {env_id!r}: its module {env_id.split(":")[0]!r} cannot be '
      f'imported (no module named {missing!r}); check the name before ":" '
      'or install the package that provides it'
    )
  return ValueError(
    f'env {env_id!r} needs a package that is not installed: {missing} '
    '(see the README for the optional extras)'
  )


def _register_ale(env_id: str) -> None:
  ale_py = validation.import_extra(
    'ale_py', f'env {env_id!r}', 'ale-py', 'atari'
  )
  gym.register_envs(ale_py)


def make_vector_env(env: EnvLike, n_envs: int) -> gym.vector.VectorEnv:
  """Builds `n_envs` copies of `env` stepped in lockstep.

  The vector env's autoreset is disabled: `RLTask` resets finished envs itself
  (with `options={'reset_mask': mask}`), so that it sees every final
  observation and decides when an episode may start.

  Args:
    env: as for `make_env`; an instance is deep-copied for envs 2..n. A JAX
      env (`'gymnax:<id>'` or a pure reset/step object, see `jax_envs`) is
      stepped from the host by a `jax_vector_env.JaxVectorEnv`; an envpool
      env (`'envpool:<id>'` or `envpool_env.make_envpool(...)`) by an
      `envpool_env.EnvpoolVectorEnv` (the same semantics).
    n_envs: number of envs, >= 1.

  Returns:
    A `gymnasium.vector.SyncVectorEnv` (or `JaxVectorEnv`, `EnvpoolVectorEnv`).
  """
  if n_envs < 1:
    raise ValueError(f'n_envs must be >= 1, got {n_envs}')
  if envpool_env.is_envpool_env(env):
    return envpool_env.EnvpoolVectorEnv(env, n_envs)
  if jax_envs.is_jax_env(env):
    return jax_vector_env.JaxVectorEnv(jax_envs.make_jax_env(env), n_envs)
  first = make_env(env)
  name = env if isinstance(env, str) else type(first.unwrapped).__name__
  if isinstance(env, gym.Env):
    copies = [first] + [copy.deepcopy(first) for _ in range(n_envs - 1)]
    fns = [lambda e=e: CheckedEnv(e, name) for e in copies]
  else:
    fns = [lambda: CheckedEnv(first, name)]
    fns += [lambda: CheckedEnv(make_env(env), name)] * (n_envs - 1)
  return gym.vector.SyncVectorEnv(
    fns, copy=False, autoreset_mode=gym.vector.AutoresetMode.DISABLED
  )


class CheckedEnv(gym.Wrapper):
  """An env whose reset and step outputs are checked against gymnasium's
  API and its own observation space, so that a mistake in a custom env
  stops the run with one line naming the env (not numpy's "Output array
  is the wrong shape" from inside the vector env). It holds no state:
  checkpoints of an env leave it out (`env_state`)."""

  STATELESS_CHECK = True

  def __init__(self, env: gym.Env, name: str):
    super().__init__(env)
    self._name = name
    self._shape = getattr(env.observation_space, 'shape', None)

  def _check(self, obs: Any, where: str) -> None:
    if self._shape is not None and np.shape(obs) != tuple(self._shape):
      raise ValueError(
        f'env {self._name}: {where} returned an observation of shape '
        f'{np.shape(obs)}, but its observation_space has shape '
        f'{tuple(self._shape)}; make them agree'
      )

  def reset(self, **kwargs):
    out = self.env.reset(**kwargs)
    if not (isinstance(out, tuple) and len(out) == 2):
      raise ValueError(
        f'env {self._name}: reset must return (observation, info), as '
        'gymnasium envs do (an old gym env returns the observation alone)'
      )
    self._check(out[0], 'reset')
    return out

  def step(self, action):
    out = self.env.step(action)
    if not (isinstance(out, tuple) and len(out) == 5):
      raise ValueError(
        f'env {self._name}: step must return (observation, reward, '
        'terminated, truncated, info), as gymnasium envs do (an old gym '
        'env returns 4 values, with one done)'
      )
    self._check(out[0], 'step')
    return out


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
