"""Tests for `agent.act`, Stable-Baselines3's `predict` for every agent."""

import numpy as np
import pytest

import trax_rl
from trax_rl import configurables, shipped_configs
from trax_rl import trajectory as trajectory_lib


def _agent(config, *bindings):
  configurables.parse([shipped_configs.resolve(config)], list(bindings))
  return configurables.train_rl(output_dir=None, build_only=True)


@pytest.mark.parametrize(
  'config',
  [
    'pg_cartpole',
    'dqn_cartpole',
    'ppo_pendulum',
    'gymnax/ppo_cartpole',
    'gymnax/c51_cartpole',
  ],
)
def test_act_on_one_observation_and_on_a_batch(config):
  agent = _agent(config)
  space = agent.task.observation_space
  obs = np.stack([space.sample() for _ in range(3)])
  one = agent.act(obs[0])
  assert agent.task.action_space.contains(
    np.asarray(one, agent.task.action_space.dtype)
  )
  batch = agent.act(obs)
  assert batch.shape == (3, *agent.task.action_space.shape)
  # Greedy is the policy evaluation plays, and repeatable.
  np.testing.assert_array_equal(agent.act(obs), batch)
  traj = trajectory_lib.Trajectory(obs[0])
  expected, _ = agent.policy(traj, temperature=0.0)
  np.testing.assert_allclose(one, expected, rtol=1e-6)
  sampled = agent.act(obs, deterministic=False)
  assert sampled.shape == batch.shape


def test_a_recurrent_agent_resets_its_core_at_episode_start():
  agent = _agent('r2d2_cartpole_masked')
  obs = np.stack([agent.task.observation_space.sample() for _ in range(4)])
  first = agent.act(obs, episode_start=True)
  agent.act(obs)  # The core moves on.
  np.testing.assert_array_equal(agent.act(obs, episode_start=True), first)


def test_a_wrong_observation_shape_is_named():
  agent = _agent('dqn_cartpole')
  with pytest.raises(ValueError, match=r'shape \(3,\).*have shape \(4,\)'):
    agent.act(np.zeros(3))


def test_load_then_act(tmp_path):
  trax_rl.train(
    'gymnax/ppo_cartpole',
    output_dir=str(tmp_path),
    bindings=['PPO.n_eval_episodes = 0'],
    n_epochs=1,
  )
  agent = trax_rl.load(str(tmp_path))
  assert agent.current_epoch == 1
  action = agent.act(np.zeros(4, np.float32))
  assert int(action) in (0, 1)
