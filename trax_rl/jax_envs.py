"""JAX-native environments: gymnax ids and any pure `reset`/`step` pair.

An env on the device path is a `JaxEnv`: two pure functions and the spaces.

  reset(key) -> (observation, state)
  step(key, state, action) -> StepOutput(observation, state, reward,
                                         terminated, truncated)

`step` is the raw transition: it never resets. `terminated` is a natural end
(no bootstrap), `truncated` a time limit (bootstrap from the returned
observation, which is the episode's final one). Both are per env, unbatched;
`trax_rl.device.rollout` vmaps them and resets finished envs on the device.
`state` is any pytree, so checkpoints can carry episodes in flight.

Sources (`make_jax_env`):
  - `'gymnax:<id>'`, e.g. `'gymnax:CartPole-v1'`, `'gymnax:Breakout-MinAtar'`:
    gymnax's `reset_env` / `step_env` with its time limit as `truncated`.
  - `'brax:<name>'`, e.g. `'brax:inverted_pendulum'`, `'brax:halfcheetah'`:
    a Brax env (the `brax` extra) on its default backend, or
    `'brax:<name>:<backend>'` (`generalized`, `positional`, `spring`,
    `mjx`). Brax envs have no time limit of their own: bind
    `RLTask.max_steps` (Brax's training episodes are 1000 steps).
  - any object with pure `reset(key, params) -> (obs, state)` and
    `step(key, state, action, params) -> (obs, state, reward, terminated,
    truncated, info)` that does not auto-reset, plus
    `observation_space(params)` / `action_space(params)` (gymnasium or gymnax
    spaces) and optionally `default_params` (Brax and Jumanji plug in through
    such a thin object).

The spaces are gymnasium spaces, so agents build their distributions and
networks exactly as on the gymnasium path.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import jax.numpy as jnp
import numpy as np

from trax_rl import validation

GYMNAX_PREFIX = 'gymnax:'
BRAX_PREFIX = 'brax:'
PREFIXES = (GYMNAX_PREFIX, BRAX_PREFIX)


class StepOutput(NamedTuple):
  """One raw env transition (unbatched)."""

  observation: Any  # o_{t+1}; the final observation if the episode ended
  state: Any  # env state pytree after the step
  reward: Any  # [] float32
  terminated: Any  # [] bool, natural end: no bootstrap
  truncated: Any  # [] bool, time limit: bootstrap from observation


@dataclasses.dataclass(frozen=True, eq=False)  # Hashed by identity (jit).
class JaxEnv:
  """A pure, unbatched JAX environment with gymnasium spaces.

  Attributes:
    reset: `key -> (observation, state)`.
    step: `(key, state, action) -> StepOutput`, never resets.
    observation_space: gymnasium space of one observation.
    action_space: gymnasium space of one action.
    name: the id it was made from.
  """

  reset: Callable[[Any], tuple[Any, Any]]
  step: Callable[[Any, Any, Any], StepOutput]
  observation_space: gym.Space
  action_space: gym.Space
  name: str = 'jax_env'


def is_jax_env(env: Any) -> bool:
  """Whether `env` names or is a JAX env (a gymnax id or pure reset/step)."""
  if isinstance(env, str):
    return env.startswith(PREFIXES)
  if isinstance(env, JaxEnv):
    return True
  if isinstance(env, (gym.Env, type)) or env is None:
    return False  # A class is an env factory, not an env.
  return callable(getattr(env, 'reset', None)) and callable(
    getattr(env, 'step', None)
  )


def to_gym_space(space: Any) -> gym.Space:
  """A gymnasium space for a gymnax (or gymnasium) Discrete or Box space.

  Raises:
    ValueError: any other kind of space (the message names it).
  """
  if isinstance(space, gym.Space):
    return space
  kind = type(space).__name__
  if kind == 'Discrete':
    return gym.spaces.Discrete(int(space.n))
  if kind == 'Box':
    shape = tuple(space.shape)
    dtype = np.dtype(space.dtype)
    low = np.broadcast_to(np.asarray(space.low, dtype), shape)
    high = np.broadcast_to(np.asarray(space.high, dtype), shape)
    return gym.spaces.Box(low, high, shape, dtype)
  raise ValueError(f'JAX env space {space!r} is neither Discrete nor Box')


def _make_gymnax(env_id: str) -> JaxEnv:
  import gymnax  # The device path's dependency; imported only when used.

  name = env_id[len(GYMNAX_PREFIX) :]
  try:
    env, params = gymnax.make(name)
  except (ValueError, KeyError) as e:
    raise ValueError(
      f'unknown env id {env_id!r}: gymnax has no {name!r} ({e})'
    ) from None

  def reset(key):
    return env.reset_env(key, params)

  def step(key, state, action):
    obs, state, reward, terminated, _ = env.step_env(key, state, action, params)
    truncated = env.is_truncated(state, params) & ~terminated
    return StepOutput(obs, state, reward, terminated, truncated)

  return JaxEnv(
    reset,
    step,
    to_gym_space(env.observation_space(params)),
    to_gym_space(env.action_space(params)),
    env_id,
  )


def _make_brax(env_id: str) -> JaxEnv:
  brax_envs = validation.import_extra(
    'brax.envs', f'env {env_id!r}', 'Brax', 'brax'
  )
  name, _, backend = env_id[len(BRAX_PREFIX) :].partition(':')
  kwargs = {'backend': backend} if backend else {}
  try:
    env = brax_envs.get_environment(name, **kwargs)
  except (KeyError, ValueError):
    known = ', '.join(sorted(brax_envs._envs))
    raise ValueError(
      f'unknown env id {env_id!r}: Brax has no {name!r} (it has {known})'
    ) from None

  def reset(key):
    state = env.reset(key)
    return state.obs, state

  def step(key, state, action):
    del key  # Brax's dynamics are deterministic.
    state = env.step(state, action)
    terminated = state.done > 0
    return StepOutput(
      state.obs, state, state.reward, terminated, jnp.zeros((), bool)
    )

  inf = np.full(env.observation_size, np.inf, np.float32)
  ones = np.ones(env.action_size, np.float32)
  return JaxEnv(
    reset,
    step,
    gym.spaces.Box(-inf, inf, dtype=np.float32),
    gym.spaces.Box(-ones, ones, dtype=np.float32),
    env_id,
  )


def _from_pure(env: Any) -> JaxEnv:
  params = getattr(env, 'default_params', None)

  def reset(key):
    return env.reset(key, params)

  def step(key, state, action):
    obs, state, reward, terminated, truncated, _ = env.step(
      key, state, action, params
    )
    return StepOutput(obs, state, reward, terminated, truncated & ~terminated)

  return JaxEnv(
    reset,
    step,
    to_gym_space(env.observation_space(params)),
    to_gym_space(env.action_space(params)),
    type(env).__name__,
  )


def mask_observation(env: JaxEnv, indices: tuple[int, ...]) -> JaxEnv:
  """`env` with the observation entries `indices` zeroed (e.g. CartPole's
  velocities, (1, 3): a memory task), as `envs.MaskVelocity` on gymnasium.
  """
  mask = np.ones(env.observation_space.shape, np.float32)
  mask[list(indices)] = 0.0

  def hide(observation):
    return (observation * mask).astype(observation.dtype)

  def reset(key):
    observation, state = env.reset(key)
    return hide(observation), state

  def step(key, state, action):
    out = env.step(key, state, action)
    return out._replace(observation=hide(out.observation))

  name = f'{env.name} (entries {tuple(indices)} masked)'
  return dataclasses.replace(env, reset=reset, step=step, name=name)


def make_jax_env(env: Any) -> JaxEnv:
  """Builds a `JaxEnv` from a gymnax id or an object with pure reset/step.

  Args:
    env: `'gymnax:<id>'`, `'brax:<name>'`, a `JaxEnv` (returned as is),
      or an object with
      pure `reset(key, params)` / `step(key, state, action, params)` (see the
      module docstring).

  Returns:
    The JaxEnv.

  Raises:
    ValueError: an unknown id or an object without the pure pair.
  """
  if isinstance(env, JaxEnv):
    return env
  if isinstance(env, str):
    if env.startswith(BRAX_PREFIX):
      return _make_brax(env)
    if not env.startswith(GYMNAX_PREFIX):
      raise ValueError(
        f'env id {env!r} is not a JAX env id (gymnax:<id>, brax:<name>)'
      )
    return _make_gymnax(env)
  if not is_jax_env(env):
    raise ValueError(
      f'env {env!r} has no pure reset(key, params) / step(key, state, '
      'action, params) pair'
    )
  return _from_pure(env)
