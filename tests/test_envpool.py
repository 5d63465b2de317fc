"""envpool envs behind the gymnasium source (trax_rl.envpool_env)."""

import importlib.util
import logging
import sys

import gin
import gymnasium as gym
import numpy as np
import pytest

from trax_rl import configurables, envpool_env, envs

needs_envpool = pytest.mark.skipif(
  importlib.util.find_spec('envpool') is None,
  reason="the 'envpool' extra is not installed",
)


def _controller(obs: np.ndarray) -> np.ndarray:
  """Balances CartPole (episodes that run to the 500-step time limit)."""
  x, x_dot, theta, theta_dot = obs.T
  return (theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0).astype(int)


@needs_envpool
def test_episode_boundaries_equal_gymnasium_cartpole():
  # CartPole's observation is its whole state: a gymnasium CartPole set to
  # envpool's observation must give the same step. Envs 0 and 1 act at
  # random (terminations), 2 and 3 balance (truncations at 500 steps).
  n = 4
  pool = envs.make_vector_env('envpool:CartPole-v1', n)
  assert isinstance(pool, envpool_env.EnvpoolVectorEnv)
  obs, _ = pool.reset(seed=[3, 4, 5, 6])
  gyms = [gym.make('CartPole-v1') for _ in range(n)]

  def start(i, observation):  # Also restarts gymnasium's time limit.
    gyms[i].reset(seed=0)
    gyms[i].unwrapped.state = np.asarray(observation, np.float64)

  for i in range(n):
    start(i, obs[i])
  rng = np.random.default_rng(0)
  n_terminated = n_truncated = 0
  for _ in range(1200):
    action = np.where(np.arange(n) < 2, rng.integers(0, 2, n), _controller(obs))
    obs, reward, terminated, truncated, _ = pool.step(action)
    for i in range(n):
      g_obs, g_reward, g_terminated, g_truncated, _ = gyms[i].step(
        int(action[i])
      )
      # The final observation of an ended episode too.
      np.testing.assert_allclose(obs[i], g_obs, atol=1e-5)
      assert reward[i] == g_reward
      assert (terminated[i], truncated[i]) == (g_terminated, g_truncated)
      # gymnasium's state is float64, envpool's observation float32: the
      # rounding would grow chaotically over hundreds of steps.
      gyms[i].unwrapped.state = np.asarray(obs[i], np.float64)
    n_terminated += int(terminated.sum())
    n_truncated += int(truncated.sum())
    done = terminated | truncated
    if done.any():
      final = obs.copy()
      obs, _ = pool.reset(options={'reset_mask': done})
      # Only the finished envs restart.
      np.testing.assert_array_equal(obs[~done], final[~done])
      for i in np.flatnonzero(done):
        start(i, obs[i])
  assert n_terminated > 20 and n_truncated >= 2
  pool.close()


@needs_envpool
def test_an_env_stepped_after_its_end_restarts_and_takes_the_action():
  pool = envpool_env.EnvpoolVectorEnv('envpool:CartPole-v1', 2)
  pool.reset(seed=0)
  done = np.zeros(2, bool)
  while not done[0]:
    _, _, terminated, truncated, _ = pool.step(np.zeros(2, int))
    done = terminated | truncated
  # No reset: envpool alone would spend this step on the reset.
  obs, _, terminated, _, info = pool.step(np.ones(2, int))
  assert info['elapsed_step'][0] == 1 and not terminated[0]
  assert obs[0][1] > 0  # Pushed right (action 1) from a near-still cart.


@needs_envpool
def test_seeded_resets_repeat_and_seed_each_env():
  pool = envpool_env.EnvpoolVectorEnv('envpool:CartPole-v1', 3)
  first, _ = pool.reset(seed=[7, 8, 9])
  pool.step(np.ones(3, int))
  again, _ = pool.reset(seed=[7, 8, 9])
  np.testing.assert_array_equal(first, again)
  # Env i of `seed=s` is seeded s + i, as gymnasium's vector envs.
  np.testing.assert_array_equal(pool.reset(seed=7)[0], first)
  single = envpool_env.EnvpoolVectorEnv('envpool:CartPole-v1', 1)
  np.testing.assert_array_equal(single.reset(seed=[9])[0][0], first[2])
  other, _ = pool.reset(seed=[1, 2, 3])
  assert not np.array_equal(other, first)


@needs_envpool
def test_a_shipped_config_trains_and_resumes_on_envpool(tmp_path, caplog):
  bindings = [
    "RLTask.env = 'envpool:CartPole-v1'",
    'RLTask.n_envs = 4',
    'ReplayValueAgent.n_interactions_per_epoch = 128',
    'ReplayValueAgent.min_replay_size = 64',
    'ReplayValueAgent.num_sgd_steps_per_step = 1',
    'ReplayValueAgent.n_eval_episodes = 2',
  ]
  records = []

  def run(n_epochs):
    configurables.parse(
      ['acme_dqn_cartpole'], bindings + [f'train_rl.n_epochs = {n_epochs}']
    )
    agent = configurables.train_rl(
      output_dir=str(tmp_path), callbacks=[lambda _, r: records.append(r)]
    )
    gin.clear_config()
    return agent

  agent = run(1)
  assert isinstance(agent.task.env, envpool_env.EnvpoolVectorEnv)
  # A second run on the same output_dir resumes (as after a kill): envpool's
  # state is in C++, so running episodes restart, with a warning.
  with caplog.at_level(logging.WARNING):
    agent = run(2)
  assert agent.current_epoch == 2
  assert [r['epoch'] for r in records] == [1, 2]
  assert [r['n_interactions'] for r in records] == [128, 256]
  assert 'running episodes restart on resume' in caplog.text
  assert all(np.isfinite(r['avg_return']) for r in records)


def test_without_envpool_one_line_says_what_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, 'envpool', None)
  message = (
    r"env 'envpool:CartPole-v1' needs envpool: pip install -e '\.\[envpool\]'$"
  )
  with pytest.raises(ValueError, match=message):
    envs.make_vector_env('envpool:CartPole-v1', 2)
  with pytest.raises(ValueError, match=message):
    envpool_env.make_envpool('CartPole-v1')


@needs_envpool
def test_unknown_id_and_bad_option_are_named():
  with pytest.raises(ValueError, match=r"^unknown env id 'envpool:Pong-v9'"):
    envs.make_vector_env('envpool:Pong-v9', 2)
  with pytest.raises(ValueError, match=r"'envpool:Pong-v5'.*'sticky'"):
    envpool_env.make_envpool('Pong-v5', sticky=0.25)
  with pytest.raises(ValueError, match=r"'num_envs' is set by trax_rl"):
    envpool_env.make_envpool('Pong-v5', num_envs=4)
