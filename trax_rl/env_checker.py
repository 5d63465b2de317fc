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
from collections.abc import Callable
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


def _episodes(
  name: str,
  obs_space: gym.Space,
  action_space: gym.Space,
  n_steps: int,
  step: Callable[[str, Any], tuple],
  reset: Callable[[], Any],
) -> dict[str, int]:
  """Steps random actions, checking each step; resets at episode ends.

  `step(where, action) -> (obs, reward, terminated, truncated)` checks the
  output's structure; `reset() -> obs`.
  """
  counts = {'steps': n_steps, 'episodes_ended': 0, 'terminated': 0}
  counts['truncated'] = 0
  for t in range(n_steps):
    where = f'step {t}'
    obs, reward, terminated, truncated = step(where, action_space.sample())
    _check_obs(name, where, obs, obs_space)
    _check_step_values(name, where, reward, terminated, truncated)
    if terminated or truncated:
      counts['episodes_ended'] += 1
      counts['terminated'] += bool(terminated)
      counts['truncated'] += bool(truncated) and not terminated
      _check_obs(name, 'reset', reset(), obs_space)
  return counts


def _start(name: str, env: Any, warnings: list[str]) -> None:
  _check_space(name, 'observation_space', env.observation_space, warnings)
  _check_space(name, 'action_space', env.action_space, warnings)


def check_gymnasium(env_spec: Any, n_steps: int, seed: int) -> dict[str, Any]:
  """Checks a gymnasium env (see the module docstring); returns a report."""
  env = envs.make_env(env_spec)
  name = env_spec if isinstance(env_spec, str) else type(env.unwrapped).__name__
  warnings: list[str] = []
  _start(name, env, warnings)
  out = _call(name, 'reset', env.reset, seed=seed)
  if not (isinstance(out, tuple) and len(out) == 2):
    raise _fail(
      name, 'reset must return (observation, info) (old gym: obs alone)'
    )
  obs, info = out
  if not isinstance(info, dict):
    raise _fail(name, f'reset returned info {type(info).__name__}, not dict')
  _check_obs(name, 'reset', obs, env.observation_space)
  again, _ = env.reset(seed=seed)
  if not np.array_equal(np.asarray(obs), np.asarray(again)):
    warnings.append(
      f'reset(seed={seed}) twice gave different observations: the env '
      'ignores the seed, so runs are not reproducible'
    )

  def step(where, action):
    out = _call(name, where, env.step, action)
    if not (isinstance(out, tuple) and len(out) == 5):
      raise _fail(
        name,
        'step must return (observation, reward, terminated, truncated, '
        'info) (old gym: 4 values with one done)',
      )
    if not isinstance(out[4], dict):
      raise _fail(name, f'{where} returned info {type(out[4]).__name__}')
    return out[:4]

  env.action_space.seed(seed)
  counts = _episodes(
    name,
    env.observation_space,
    env.action_space,
    n_steps,
    step,
    lambda: env.reset()[0],
  )
  env.close()
  return _report(env_spec, env, counts, warnings)


def check_jax(env_spec: Any, n_steps: int, seed: int) -> dict[str, Any]:
  """Checks a JAX env under jit (see the module docstring)."""
  import jax  # noqa: PLC0415

  env = jax_envs.make_jax_env(env_spec)
  name = env.name
  warnings: list[str] = []
  _start(name, env, warnings)
  reset = jax.jit(env.reset)
  jit_step = jax.jit(env.step)
  keys = {'key': jax.random.PRNGKey(seed)}
  obs, state = reset(keys['key'])
  _check_obs(name, 'reset', obs, env.observation_space)
  if not np.array_equal(np.asarray(obs), np.asarray(reset(keys['key'])[0])):
    raise _fail(name, 'reset(key) twice gave different observations')
  carry = {'state': state}

  def next_key():
    keys['key'], key = jax.random.split(keys['key'])
    return key

  def step(where, action):
    out = jit_step(next_key(), carry['state'], np.asarray(action))
    if not isinstance(out, jax_envs.StepOutput):
      raise _fail(name, f'{where}: step must return a jax_envs.StepOutput')
    carry['state'] = out.state
    scalar = lambda x: np.asarray(x)[()]  # noqa: E731
    return (
      out.observation,
      scalar(out.reward),
      scalar(out.terminated),
      scalar(out.truncated),
    )

  def restart():
    obs, carry['state'] = reset(next_key())
    return obs

  env.action_space.seed(seed)
  counts = _episodes(
    name, env.observation_space, env.action_space, n_steps, step, restart
  )
  return _report(env_spec, env, counts, warnings)


def _report(
  env_spec: Any, env: Any, counts: dict[str, int], warnings: list[str]
) -> dict[str, Any]:
  return {
    'env': str(env_spec),
    'observation_space': str(env.observation_space),
    'action_space': str(env.action_space),
    **counts,
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
