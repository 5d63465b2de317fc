"""Tests for trax_rl.jax_envs and trax_rl.device.rollout."""

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import jax_envs, task
from trax_rl.device import rollout
from trax_rl.sources import host_envs
from trax_rl.testing import fake_jax_envs


def _categorical_policy(n_actions):
  def policy(params, key, obs):
    del params
    logits = jnp.zeros((obs.shape[0], n_actions))
    return jax.random.categorical(key, logits), {'dist_inputs': logits}

  return policy


def _gaussian_policy(params, key, obs):
  # Mean pushes back to 0; scale 2 so that some actions leave [-1, 1].
  mean = -params * obs
  action = mean + 2.0 * jax.random.normal(key, mean.shape)
  return action, {'dist_inputs': mean}


def _python_rollout(env, policy, params, key, n_envs, n_steps, max_steps):
  """Step by step, env by env, with the documented key scheme."""
  env_step, env_reset = jax.jit(env.step), jax.jit(env.reset)
  policy = jax.jit(policy)
  key, reset_key = jax.random.split(key)
  obs, states = [], []
  for k in jax.random.split(reset_key, n_envs):
    o, s = env_reset(k)
    obs.append(np.asarray(o))
    states.append(s)
  lengths = [0] * n_envs
  out = {k: [] for k in ('obs', 'action', 'reward', 'term', 'trunc', 'next')}
  for _ in range(n_steps):
    key, act_key, step_key, reset_key = jax.random.split(key, 4)
    action, _ = policy(params, act_key, jnp.asarray(np.stack(obs)))
    action = np.asarray(action)
    row = {k: [] for k in out}
    step_keys = jax.random.split(step_key, n_envs)
    reset_keys = jax.random.split(reset_key, n_envs)
    for i in range(n_envs):
      a = action[i]
      if isinstance(env.action_space, gym.spaces.Box):
        a = np.clip(a, env.action_space.low, env.action_space.high)
      o, s, r, term, trunc = env_step(step_keys[i], states[i], jnp.asarray(a))
      lengths[i] += 1
      term = bool(term)
      trunc = (bool(trunc) or lengths[i] >= max_steps) and not term
      row['obs'].append(obs[i])
      row['action'].append(action[i])
      row['reward'].append(float(r))
      row['term'].append(term)
      row['trunc'].append(trunc)
      row['next'].append(np.asarray(o))
      if term or trunc:
        o, s = env_reset(reset_keys[i])
        lengths[i] = 0
      obs[i], states[i] = np.asarray(o), s
    for k in out:
      out[k].append(np.stack(row[k]))
  return {k: np.stack(v) for k, v in out.items()}


@pytest.mark.parametrize(
  'env_id, policy, params',
  [
    ('gymnax:CartPole-v1', _categorical_policy(2), None),
    (fake_jax_envs.PointEnv(max_time=5), _gaussian_policy, 0.5),
  ],
)
def test_device_rollout_equals_python_rollout(env_id, policy, params):
  env = jax_envs.make_jax_env(env_id)
  key = jax.random.PRNGKey(3)
  n_envs, n_steps, max_steps = 3, 30, 15
  carry = rollout.init_carry(env, key, n_envs)
  fn = jax.jit(
    lambda p, c: rollout.rollout(env, policy, p, c, n_steps, max_steps)
  )
  _, steps = fn(params, carry)
  want = _python_rollout(env, policy, params, key, n_envs, n_steps, max_steps)
  np.testing.assert_allclose(
    steps.observation, want['obs'], rtol=1e-5, atol=1e-6
  )
  np.testing.assert_allclose(steps.action, want['action'], rtol=1e-5)
  np.testing.assert_allclose(steps.reward, want['reward'], rtol=1e-5)
  np.testing.assert_array_equal(steps.terminated, want['term'])
  np.testing.assert_array_equal(steps.truncated, want['trunc'])
  np.testing.assert_allclose(
    steps.next_observation, want['next'], rtol=1e-5, atol=1e-6
  )
  # Both ways of ending occur, so the test exercises both.
  assert want['term'].any() and want['trunc'].any()


def test_final_observation_and_returns_kept_apart_from_reset():
  env = jax_envs.make_jax_env(fake_jax_envs.PointEnv(max_time=4))
  carry = rollout.init_carry(env, jax.random.PRNGKey(0), 2)
  policy = lambda p, k, o: (jnp.zeros((o.shape[0], 1)), {})  # noqa: E731
  carry, steps = rollout.rollout(env, policy, None, carry, 8)
  # Zero actions: only truncation after 4 steps, at t = 3 and 7.
  np.testing.assert_array_equal(steps.truncated[:, 0], [0, 0, 0, 1] * 2)
  assert not steps.terminated.any()
  # After the truncation the next step starts from a fresh observation,
  # while next_observation keeps the final one.
  np.testing.assert_allclose(steps.next_observation[2], steps.observation[3])
  assert not np.allclose(steps.next_observation[3], steps.observation[4])
  ends = steps.reward.reshape(2, 4, 2).sum(axis=1)  # [episode, env]
  np.testing.assert_allclose(
    np.asarray(steps.episode_return)[[3, 7]], ends, rtol=1e-5
  )
  assert int(carry.window.count) == 4
  np.testing.assert_allclose(
    rollout.episode_return_mean(carry.window), ends.mean(), rtol=1e-5
  )
  summary = rollout.summary(steps, carry)
  np.testing.assert_allclose(summary['avg_return'], ends.mean(), rtol=1e-5)


def test_return_window_keeps_the_last_episodes():
  window = rollout.ReturnWindow(
    jnp.zeros(rollout.WINDOW, jnp.float32), jnp.zeros((), jnp.int32)
  )
  for i in range(rollout.WINDOW + 10):
    done = jnp.array([True, False, True])
    window = rollout.record_returns(
      window, done, jnp.array([2.0 * i, -1e9, 2.0 * i + 1])
    )
  last = np.arange(2 * (rollout.WINDOW + 10))[-rollout.WINDOW :]
  assert int(window.count) == 2 * (rollout.WINDOW + 10)
  np.testing.assert_allclose(rollout.episode_return_mean(window), last.mean())


def test_gymnax_spaces_and_host_vector_env():
  t = task.RLTask('gymnax:CartPole-v1', n_envs=2, initial_trajectories=0)
  assert t.jax_env is not None and t.action_space == gym.spaces.Discrete(2)
  assert t.observation_space.shape == (4,)
  host = host_envs.HostEnvs(t.env_spec, n_envs=2, seeds=[0], max_steps=None)
  left = lambda obs, first, core: (np.zeros(obs.shape[:2], np.int64), {}, core)
  collection = host.collect(left, n_episodes=3)
  (returns,) = collection.episode_returns
  assert len(returns) == 3 and collection.rollout.terminated.any()
  # Always pushing left ends CartPole in about 10 steps.
  assert 5 <= np.mean(returns) <= 20
  breakout = jax_envs.make_jax_env('gymnax:Breakout-MinAtar')
  assert breakout.observation_space.shape == (10, 10, 4)
  assert breakout.action_space == gym.spaces.Discrete(3)


def test_unknown_gymnax_id_names_it():
  with pytest.raises(ValueError, match='NoSuchEnv'):
    jax_envs.make_jax_env('gymnax:NoSuchEnv-v0')
