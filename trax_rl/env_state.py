"""Gymnasium env state as plain data, so checkpoints carry running episodes.

An env is captured layer by layer: each wrapper and the base env keep their
state in instance attributes. Capture succeeds when every attribute is plain
data (None, bool, int, float, str, numpy arrays, and lists, tuples and dicts
of them), a numpy Generator (kept as its bit generator's state), or
structure that stepping never changes (spaces, the spec, the inner env).
Classic control envs (CartPole, Acrobot, MountainCar, MountainCarContinuous,
Pendulum) under gymnasium's default wrappers qualify; Box2D envs (a Box2D
world object) and Atari (an emulator) do not, and `capture` says why.

Restoring sets the saved attributes back on an env built from the same
config. It never runs code from the checkpoint: values are plain, and a
Generator is rebuilt only from a fixed list of numpy bit generators.
"""

import copy
import enum
from typing import Any

import gymnasium as gym
import numpy as np

# Attributes that hold structure, not state: never saved, never set.
_STRUCTURE = frozenset(
  {'env', 'envs', 'env_fns', '_saved_kwargs', 'metadata', '_metadata'}
)
_GENERATOR = '__generator__'
_BIT_GENERATORS = {
  name: getattr(np.random, name)
  for name in ('PCG64', 'PCG64DXSM', 'MT19937', 'Philox', 'SFC64')
}


class NotCapturable(ValueError):
  """An env holds state that is not plain data (the message says where)."""


def is_plain(value: Any) -> bool:
  """Whether `value` is plain data a checkpoint can hold without code."""
  if value is None or isinstance(value, (bool, int, float, str, bytes)):
    return True
  if isinstance(value, (np.ndarray, np.generic)):
    return np.asarray(value).dtype != object
  if isinstance(value, (list, tuple)) and not hasattr(value, '_fields'):
    return all(is_plain(v) for v in value)
  if isinstance(value, dict):
    return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
  return False


def _is_structure(key: str, value: Any) -> bool:
  return key in _STRUCTURE or isinstance(
    value, (gym.Space, gym.envs.registration.EnvSpec, enum.Enum)
  )


def _capture_object(obj: Any) -> dict[str, Any]:
  state = {}
  for key, value in vars(obj).items():
    if _is_structure(key, value):
      continue
    if isinstance(value, np.random.Generator):
      state[key] = {_GENERATOR: value.bit_generator.state}
    elif is_plain(value):
      state[key] = copy.deepcopy(value)
    else:
      raise NotCapturable(
        f'{type(obj).__name__}.{key} is a {type(value).__name__}'
      )
  return state


def _layers(env: gym.Env) -> list[Any]:
  """The wrappers of `env`, outermost first, then the base env; stateless
  checks (`envs.CheckedEnv`) left out, so that checkpoints do not depend
  on them."""
  layers = [env]
  while isinstance(layers[-1], gym.Wrapper):
    layers.append(layers[-1].env)
  return [x for x in layers if not getattr(x, 'STATELESS_CHECK', False)]


def capture(vector_env: gym.vector.VectorEnv) -> dict[str, Any]:
  """The state of a SyncVectorEnv and of every layer of its envs.

  Returns:
    Plain data for `restore`.

  Raises:
    NotCapturable: some state is not plain data (the message names it).
  """
  if not isinstance(vector_env, gym.vector.SyncVectorEnv):
    raise NotCapturable(f'{type(vector_env).__name__} is not a SyncVectorEnv')
  return {
    'vector': _capture_object(vector_env),
    'layers': [_names(env) for env in vector_env.envs],
    'envs': [
      [_capture_object(layer) for layer in _layers(env)]
      for env in vector_env.envs
    ],
  }


def _names(env: gym.Env) -> list[str]:
  return [type(layer).__name__ for layer in _layers(env)]


def _generator(current: Any, saved: dict[str, Any]) -> np.random.Generator:
  name = saved.get('bit_generator')
  if name not in _BIT_GENERATORS:
    raise ValueError(f'env state: unknown bit generator {name!r}')
  if not isinstance(current, np.random.Generator) or (
    type(current.bit_generator).__name__ != name
  ):
    current = np.random.Generator(_BIT_GENERATORS[name]())
  current.bit_generator.state = saved
  return current


def _restore_object(obj: Any, state: dict[str, Any]) -> None:
  attributes = vars(obj)
  for key, value in state.items():
    # An env not reset yet may lack some attributes (its Generator), but
    # structure and special names are never set.
    if (
      key in _STRUCTURE
      or key.startswith('__')
      or (key in attributes and _is_structure(key, attributes[key]))
    ):
      raise ValueError(
        f'env state: {type(obj).__name__}.{key} cannot be restored '
        '(was it saved with another env?)'
      )
    if isinstance(value, dict) and set(value) == {_GENERATOR}:
      value = _generator(attributes.get(key), value[_GENERATOR])
    setattr(obj, key, value)


def restore(vector_env: gym.vector.VectorEnv, state: dict[str, Any]) -> None:
  """Puts back what `capture` saved, on an env built the same way.

  Raises:
    ValueError: the state does not fit this env (other envs or wrappers).
  """
  envs = getattr(vector_env, 'envs', [])
  if len(envs) != len(state['envs']):
    raise ValueError(
      f'env state: saved for {len(state["envs"])} envs, this task has '
      f'{len(envs)}'
    )
  for env, names, saved in zip(envs, state['layers'], state['envs']):
    if _names(env) != list(names):
      raise ValueError(
        f'env state: saved for {list(names)}, this task has {_names(env)}'
      )
    for layer, layer_state in zip(_layers(env), saved):
      _restore_object(layer, layer_state)
  _restore_object(vector_env, state['vector'])
