"""Tests for trax_rl.task.RLTask: what every source needs of the env."""

import numpy as np
import pytest

from trax_rl import task
from trax_rl.testing import fake_envs


def _task(lengths=(3,), n_envs=1, **kwargs):
  kwargs.setdefault('initial_trajectories', 0)
  return task.RLTask(
    lambda: fake_envs.CountingEnv(lengths), n_envs=n_envs, **kwargs
  )


def test_spaces_and_settings():
  t = _task(n_envs=3, gamma=0.5, max_steps=7, seed=4)
  assert (t.n_envs, t.gamma, t.max_steps, t.seed) == (3, 0.5, 7, 4)
  assert t.env.num_envs == 3 and t.jax_env is None
  obs = t.example_observation()
  assert obs.shape == t.observation_space.shape
  assert not obs.any() and obs.dtype == t.observation_space.dtype


def test_time_limit_of_a_registered_env():
  assert task.RLTask('CartPole-v1').max_episode_steps == 500
  assert _task().max_episode_steps is None


def test_a_jax_env_selects_the_device_source():
  t = task.RLTask('gymnax:CartPole-v1', n_envs=2)
  assert t.jax_env is not None
  assert t.action_space.n == 2 and t.observation_space.shape == (4,)


@pytest.mark.parametrize(
  'kwargs, message',
  [
    ({'gamma': 1.5}, 'gamma'),
    ({'n_envs': 0}, 'n_envs'),
    ({'max_steps': 0}, 'max_steps'),
    ({'initial_trajectories': -1}, 'initial_trajectories'),
    ({'initial_trajectories': True}, 'initial_trajectories'),
  ],
)
def test_bad_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    _task(**kwargs)


def test_initial_trajectories_must_be_a_directory(tmp_path):
  with pytest.raises(ValueError, match='no stored trajectories'):
    _task(initial_trajectories=str(tmp_path / 'nothing'))
  assert _task(initial_trajectories=str(tmp_path)).initial_trajectories


def test_unknown_env_id():
  with pytest.raises(ValueError, match="unknown env id 'NoSuchEnv-v9'"):
    task.RLTask('NoSuchEnv-v9')


def test_initial_trajectories_are_stored_before_the_first_epoch():
  # Two random episodes of 3 steps: six steps in the ring, none learned.
  from trax_rl.agents import policy_agents

  t = _task(lengths=(3,), initial_trajectories=2, max_steps=5)
  agent = policy_agents.PolicyGradient(
    t, n_trajectories_per_epoch=1, batch_size=2
  )
  agent.run(0)
  lengths = np.asarray(agent.learner.ring.length)
  assert int(np.sum(lengths > 0)) == 6
  assert int(agent.learner.train.step) == 0
