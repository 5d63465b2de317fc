"""A custom env that breaks gymnasium's API or its own spaces stops the run
with one line naming the env (envs.CheckedEnv)."""

import gymnasium as gym
import numpy as np
import pytest

from trax_rl import envs


class _Env(gym.Env):
  observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
  action_space = gym.spaces.Discrete(2)

  def __init__(self, reset_shape=(4,), step_shape=(4,), old_api=False):
    self._reset_shape = reset_shape
    self._step_shape = step_shape
    self._old_api = old_api

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    return np.zeros(self._reset_shape, np.float32), {}

  def step(self, action):
    obs = np.zeros(self._step_shape, np.float32)
    if self._old_api:
      return obs, 1.0, False, {}
    return obs, 1.0, False, False, {}


def _vector(**kwargs):
  return envs.make_vector_env(lambda: _Env(**kwargs), 2)


def test_a_good_env_steps():
  env = _vector()
  obs, _ = env.reset(seed=0)
  assert obs.shape == (2, 4)
  assert env.step(np.zeros(2, np.int64))[0].shape == (2, 4)


@pytest.mark.parametrize(
  'kwargs, where',
  [({'reset_shape': (3,)}, 'reset'), ({'step_shape': (2, 2)}, 'step')],
)
def test_wrong_observation_shape_names_the_env(kwargs, where):
  env = _vector(**kwargs)
  with pytest.raises(ValueError) as raised:
    env.reset(seed=0)
    env.step(np.zeros(2, np.int64))
  message = str(raised.value)
  assert message.startswith(f'env _Env: {where} returned an observation')
  assert 'observation_space has shape (4,)' in message


def test_old_gym_step_api_is_named():
  env = _vector(old_api=True)
  env.reset(seed=0)
  with pytest.raises(ValueError, match='env _Env: step must return'):
    env.step(np.zeros(2, np.int64))
