"""`trax-rl check --env=...`: an env checked as Stable-Baselines3's checker
does, before any agent meets it.

For a gymnasium env (an id, `'module:Class'` or `'module:factory'`): the
spaces are gymnasium spaces an agent can use (Discrete or Box, finite
bounds noted); `reset(seed=...)` returns `(observation, info)`, is
repeatable with the same seed, and its observation lies in the
observation space (shape, dtype, bounds); `step` returns `(observation,
reward, terminated, truncated, info)` with a real scalar reward and two
separate bools, over random actions for `n_steps` steps, resetting at each
episode end. For a JAX env (`'gymnax:<id>'` or a pure reset/step pair):
the same checks on `reset(key)` and `step(key, state, action)` under
`jax.jit`, and that `step` never resets by itself is left to the env's
contract (documented in `trax_rl.jax_envs`).

The first problem found ends the check with one line naming the env and
what to fix; softer findings come back as warnings.
"""

import numbers
from typing import Any

import gymnasium as gym
import numpy as np

from trax_rl import envs, jax_envs


def _fail(name: str, message: str) -> ValueError:
  return ValueError(f'env {name}: {message}')


def _check_space(name: str, which: str, space: Any, warnings: list) -> None:
  if not isinstance(space, gym.spaces.Space):
    raise _fail(
      name,
      f'{which} is {type(space).__name__}, not a gymnasium space '
      '(gymnasium.spaces.Box or Discrete)',
    )
  if not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete)):
    raise _fail(
      name,
      f'{which} is {type(space).__name__}; trax_rl agents take Box and '
      'Discrete spaces: flatten it with a wrapper '
      '(gymnasium.wrappers.FlattenObservation)',
    )
  if isinstance(space, gym.spaces.Box):
    if np.any(space.low > space.high):
      raise _fail(name, f'{which} has low > high somewhere')
    if which == 'action_space' and not (
      np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))
    ):
      raise _fail(
        name,
        'action_space is an unbounded Box: continuous agents scale their '
        'actions to its bounds, give it finite low and high',
      )
    if which == 'observation_space' and space.dtype == np.float64:
      warnings.append(
        'observation_space is float64: agents compute in float32 '
        '(declare float32 to make that explicit)'
      )


def _check_obs(name: str, where: str, obs: Any, space: gym.Space) -> None:
  obs = np.asarray(obs)
  if obs.shape != tuple(space.shape):
    raise _fail(
      name,
      f'{where} returned an observation of shape {obs.shape}, but '
      f'observation_space has shape {tuple(space.shape)}',
    )
  if not np.can_cast(obs.dtype, space.dtype, 'same_kind'):
    raise _fail(
      name,
      f'{where} returned an observation of dtype {obs.dtype}, but '
      f'observation_space has dtype {space.dtype}',
    )
  if isinstance(space, gym.spaces.Box):
    outside = (obs < space.low) | (obs > space.high)
    if np.any(outside):
      i = tuple(int(x) for x in np.argwhere(outside)[0])
      raise _fail(
        name,
        f'{where} returned an observation outside observation_space: '
        f'element {i} is {obs[i]}, bounds [{space.low[i]}, '
        f'{space.high[i]}]',
      )


def _call(name: str, where: str, fn: Any, *args, **kwargs) -> Any:
  """fn(*args, **kwargs); an exception it raises is named as the env's."""
  try:
    return fn(*args, **kwargs)
  except Exception as e:  # noqa: BLE001 - the env's own bug, named.
    raise _fail(name, f'{where} raised {type(e).__name__}: {e}') from None


def _is_bool(x: Any) -> bool:
  return isinstance(x, (bool, np.bool_)) or (
    np.ndim(x) == 0 and np.asarray(x).dtype == np.bool_
  )


def _check_step_values(name, where, reward, terminated, truncated) -> None:
  if np.ndim(reward) != 0 or not (
    isinstance(reward, numbers.Real)
    or np.issubdtype(np.asarray(reward).dtype, np.number)
  ):
    raise _fail(name, f'{where} returned reward {reward!r}, not a real number')
  if not np.isfinite(float(reward)):
    raise _fail(name, f'{where} returned a non-finite reward {reward!r}')
  for flag, value in (('terminated', terminated), ('truncated', truncated)):
    if not _is_bool(value):
      raise _fail(
        name,
        f'{where} returned {flag} = {value!r} ({type(value).__name__}), '
        'not a bool: gymnasium keeps terminated (no bootstrap) and '
        'truncated (a time limit) apart',
      )


def check_gymnasium(env_spec: Any, n_steps: int, seed: int) -> dict[str, Any]:
  """Checks a gymnasium env (see the module docstring); returns a report."""
  env = envs.make_env(env_spec)
  name = env_spec if isinstance(env_spec, str) else type(env.unwrapped).__name__
  warnings: list[str] = []
  _check_space(name, 'observation_space', env.observation_space, warnings)
  _check_space(name, 'action_space', env.action_space, warnings)
  obs_space = env.observation_space
  out = _call(name, 'reset', env.reset, seed=seed)
  if not (isinstance(out, tuple) and len(out) == 2):
    raise _fail(
      name, 'reset must return (observation, info) (old gym: obs alone)'
    )
  obs, info = out
  if not isinstance(info, dict):
    raise _fail(name, f'reset returned info {type(info).__name__}, not dict')
  _check_obs(name, 'reset', obs, obs_space)
  again, _ = env.reset(seed=seed)
  if not np.array_equal(np.asarray(obs), np.asarray(again)):
    warnings.append(
      f'reset(seed={seed}) twice gave different observations: the env '
      'ignores the seed, so runs are not reproducible'
    )
  env.action_space.seed(seed)
  episodes, terminated_n, truncated_n = 0, 0, 0
  for t in range(n_steps):
    out = _call(name, f'step {t}', env.step, env.action_space.sample())
    if not (isinstance(out, tuple) and len(out) == 5):
      raise _fail(
        name,
        'step must return (observation, reward, terminated, truncated, '
        'info) (old gym: 4 values with one done)',
      )
    obs, reward, terminated, truncated, info = out
    where = f'step {t}'
    _check_obs(name, where, obs, obs_space)
    _check_step_values(name, where, reward, terminated, truncated)
    if not isinstance(info, dict):
      raise _fail(name, f'{where} returned info {type(info).__name__}')
    if terminated or truncated:
      episodes += 1
      terminated_n += bool(terminated)
      truncated_n += bool(truncated) and not terminated
      _check_obs(name, 'reset', env.reset()[0], obs_space)
  env.close()
  return _report(
    env_spec,
    obs_space,
    env.action_space,
    n_steps,
    episodes,
    terminated_n,
    truncated_n,
    warnings,
  )


def check_jax(env_spec: Any, n_steps: int, seed: int) -> dict[str, Any]:
  """Checks a JAX env under jit (see the module docstring)."""
  import jax  # noqa: PLC0415

  env = jax_envs.make_jax_env(env_spec)
  name = env.name
  warnings: list[str] = []
  _check_space(name, 'observation_space', env.observation_space, warnings)
  _check_space(name, 'action_space', env.action_space, warnings)
  obs_space = env.observation_space
  reset = jax.jit(env.reset)
  step = jax.jit(env.step)
  key = jax.random.PRNGKey(seed)
  obs, state = reset(key)
  _check_obs(name, 'reset', obs, obs_space)
  again, _ = reset(key)
  if not np.array_equal(np.asarray(obs), np.asarray(again)):
    raise _fail(name, 'reset(key) twice gave different observations')
  env_space = env.action_space
  env_space.seed(seed)
  episodes, terminated_n, truncated_n = 0, 0, 0
  for t in range(n_steps):
    key, step_key, reset_key = jax.random.split(key, 3)
    action = np.asarray(env_space.sample())
    out = step(step_key, state, action)
    if not isinstance(out, jax_envs.StepOutput):
      raise _fail(name, 'step must return a jax_envs.StepOutput')
    where = f'step {t}'
    _check_obs(name, where, out.observation, obs_space)
    reward = np.asarray(out.reward)
    _check_step_values(
      name,
      where,
      reward[()],
      np.asarray(out.terminated)[()],
      np.asarray(out.truncated)[()],
    )
    state = out.state
    if bool(out.terminated) or bool(out.truncated):
      episodes += 1
      terminated_n += bool(out.terminated)
      truncated_n += bool(out.truncated) and not bool(out.terminated)
      obs, state = reset(reset_key)
  return _report(
    env_spec,
    obs_space,
    env.action_space,
    n_steps,
    episodes,
    terminated_n,
    truncated_n,
    warnings,
  )


def _report(
  env_spec,
  obs_space,
  action_space,
  n_steps,
  episodes,
  terminated,
  truncated,
  warnings,
) -> dict[str, Any]:
  return {
    'env': str(env_spec),
    'observation_space': str(obs_space),
    'action_space': str(action_space),
    'steps': n_steps,
    'episodes_ended': episodes,
    'terminated': terminated,
    'truncated': truncated,
    'warnings': warnings,
  }


def check_env(env_spec: Any, n_steps: int = 500, seed: int = 0) -> dict:
  """Checks `env_spec` (gymnasium or JAX); returns what it found.

  Raises:
    ValueError: one line naming the env and the first problem.
  """
  if jax_envs.is_jax_env(env_spec):
    return check_jax(env_spec, n_steps, seed)
  return check_gymnasium(env_spec, n_steps, seed)
