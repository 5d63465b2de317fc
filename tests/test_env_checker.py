"""Tests for `trax-rl check --env` (trax_rl.env_checker): each broken env
stops with one line naming the env and the problem; good envs pass."""

import json

import gymnasium as gym
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import cli, env_checker, jax_envs


class Custom(gym.Env):
  """An env with one thing to break at a time."""

  def __init__(self, **broken):
    self.broken = broken
    self.observation_space = broken.get(
      'observation_space', gym.spaces.Box(-1, 1, (4,), np.float32)
    )
    self.action_space = broken.get('action_space', gym.spaces.Discrete(2))
    self._t = 0

  def _obs(self):
    obs = np.zeros(
      self.broken.get('shape', (4,)), self.broken.get('dtype', np.float32)
    )
    if 'value' in self.broken:
      obs[0] = self.broken['value']
    return obs

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._t = 0
    if self.broken.get('reset_raises'):
      raise KeyError('oops')
    obs = self._obs()
    if self.broken.get('unseeded'):
      obs[1] = np.random.uniform(-0.5, 0.5)
    return obs if self.broken.get('reset_obs_only') else (obs, {})

  def step(self, action):
    self._t += 1
    done = self._t % 10 == 0
    reward = self.broken.get('reward', 1.0)
    terminated = self.broken.get('terminated', done)
    if self.broken.get('four'):
      return self._obs(), reward, done, {}
    return self._obs(), reward, terminated, False, {}


@pytest.mark.parametrize(
  'broken, culprit',
  [
    ({'shape': (3,)}, 'reset returned an observation of shape (3,)'),
    (
      {
        'dtype': np.float64,
        'observation_space': gym.spaces.Box(0, 255, (4,), np.uint8),
      },
      'dtype float64',
    ),
    ({'value': 2.0}, 'element (0,) is 2.0, bounds [-1.0, 1.0]'),
    ({'reset_obs_only': True}, 'reset must return (observation, info)'),
    (
      {'four': True},
      'step must return (observation, reward, terminated, truncated',
    ),
    ({'terminated': 1}, 'step 0 returned terminated = 1 (int), not a bool'),
    ({'reward': np.ones(1)}, 'returned reward array([1.]), not a real number'),
    ({'reward': float('nan')}, 'non-finite reward'),
    ({'reset_raises': True}, "reset raised KeyError: 'oops'"),
    (
      {'observation_space': gym.spaces.Dict({'a': gym.spaces.Discrete(2)})},
      'observation_space is Dict',
    ),
    (
      {'action_space': gym.spaces.Box(-np.inf, np.inf, (1,))},
      'action_space is an unbounded Box',
    ),
  ],
)
def test_a_broken_env_is_named_with_its_problem(broken, culprit):
  with pytest.raises(ValueError) as raised:
    env_checker.check_env(lambda: Custom(**broken), n_steps=30)
  message = str(raised.value)
  assert message.startswith('env Custom: ') and '\n' not in message
  assert culprit in message


def test_a_good_env_passes_and_soft_findings_are_warnings():
  report = env_checker.check_env(lambda: Custom(), n_steps=30)
  assert report['episodes_ended'] == 3 and report['warnings'] == []
  report = env_checker.check_env(lambda: Custom(unseeded=True), n_steps=5)
  assert 'ignores the seed' in report['warnings'][0]


@pytest.mark.parametrize(
  'env', ['CartPole-v1', 'Pendulum-v1', 'gymnax:CartPole-v1']
)
def test_shipped_envs_pass(env):
  report = env_checker.check_env(env, n_steps=200)
  assert report['steps'] == 200 and report['warnings'] == []
  assert report['episodes_ended'] >= (1 if 'CartPole' in env else 0)


def test_a_jax_env_with_a_wrong_observation_shape_is_named():
  good = jax_envs.make_jax_env('gymnax:CartPole-v1')

  def step(key, state, action):
    out = good.step(key, state, action)
    return out._replace(observation=jnp.zeros(3))

  bad = jax_envs.JaxEnv(
    good.reset, step, good.observation_space, good.action_space, 'bad_pole'
  )
  with pytest.raises(
    ValueError,
    match=r'env bad_pole: step 0 returned an '
    r'observation of shape \(3,\)',
  ):
    env_checker.check_env(bad, n_steps=5)


def test_check_env_from_the_command_line(capsys):
  assert cli.main(['check', '--env=Acrobot-v1', '--env_steps=50']) == 0
  report = json.loads(capsys.readouterr().out)
  assert report['env_check'] == 'ok' and report['action_space'] == 'Discrete(3)'
  assert cli.main(['check', '--env=NoSuchEnv-v9']) == cli.EXIT_BAD_INPUT
  assert "unknown env id 'NoSuchEnv-v9'" in capsys.readouterr().err
