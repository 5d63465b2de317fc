"""The gymnasium source: host envs collected as rollouts [k, T, N]."""

import numpy as np
import pytest

from trax_rl.sources import host_envs
from trax_rl.testing import fake_envs


def _counting(lengths=(3,), truncate=False):
  return lambda: fake_envs.CountingEnv(lengths=lengths, truncate=truncate)


def _ones(obs, first, core):
  """Always action 1 (reward 2 on CountingEnv); records `first`."""
  del core
  return np.ones(obs.shape[:2], np.int64), {'first': first}, ()


def test_steps_mode_continues_episodes_across_collections():
  envs = host_envs.HostEnvs(_counting((3,)), n_envs=2, seeds=[0])
  first = envs.collect(_ones, n_steps=4)
  r = first.rollout
  assert r.observation.shape == (1, 4, 2, 2)
  # Episodes of 3 steps: steps 0-2 then a new one; o_3 of the first is its
  # final observation, the next observation a reset's.
  np.testing.assert_array_equal(r.terminated[0, :, 0], [0, 0, 1, 0])
  np.testing.assert_array_equal(r.next_observation[0, 2, 0], [3.0, 3.0])
  np.testing.assert_array_equal(r.observation[0, 3, 0], [0.0, 0.0])
  np.testing.assert_array_equal(r.episode_return[0, :, 0], [0, 0, 6, 0])
  assert r.valid.all()
  np.testing.assert_array_equal(r.agent_info['first'][0, :, 0], [1, 0, 0, 1])
  second = envs.collect(_ones, n_steps=2)
  # The second episode goes on: steps 1 and 2 of it, then it ends.
  np.testing.assert_array_equal(
    second.rollout.observation[0, :, 0, 0], [1.0, 2.0]
  )
  np.testing.assert_array_equal(second.rollout.terminated[0, :, 0], [0, 1])
  assert second.records[0]['n_episodes'] == 4  # 2 envs x 2 episodes.
  assert second.records[0]['n_interactions'] == 12


def test_truncation_and_max_steps_bootstrap():
  envs = host_envs.HostEnvs(
    _counting((5,), truncate=True), n_envs=1, seeds=[0], max_steps=2
  )
  r = envs.collect(_ones, n_steps=3).rollout
  # max_steps=2 cuts the 5-step episode: truncated, not terminated.
  np.testing.assert_array_equal(r.truncated[0, :, 0], [0, 1, 0])
  assert not r.terminated.any()


def test_episode_mode_counts_episodes_and_pads_invalid_steps():
  # 3 envs, 4 counted episodes of lengths 2, 3, 2, 3, ...: envs 0-2 start
  # counted ones; the first to end (env 0 after 2 steps) starts the fourth.
  envs = host_envs.HostEnvs(_counting((2, 3)), n_envs=3, seeds=[0])
  c = envs.collect(_ones, n_episodes=4)
  r = c.rollout
  lengths = r.valid[0].sum(axis=0)
  # Env 0: episodes of 2 and (its second) 3 steps; envs 1 and 2: one each.
  np.testing.assert_array_equal(lengths, [5, 2, 2])
  assert r.reward.shape[1] == host_envs.pad_steps(5) == 8
  for i, n in enumerate(lengths):  # A prefix of valid steps per env.
    assert r.valid[0, :n, i].all() and not r.valid[0, n:, i].any()
  assert sorted(c.episode_returns[0]) == [4.0, 4.0, 4.0, 6.0]
  assert c.records[0]['avg_return'] == pytest.approx(4.5)
  # A new collection resets the envs: every env starts at step 0.
  again = envs.collect(_ones, n_episodes=1)
  np.testing.assert_array_equal(again.rollout.observation[0, 0, :, 0], 0.0)


def test_episode_rollouts_are_padded_to_one_length_when_given():
  # The program's longest rollout: every epoch has that shape (one compile).
  envs = host_envs.HostEnvs(_counting((2, 3)), n_envs=3, seeds=[0])
  c = envs.collect(_ones, n_episodes=4, pad_to=20)
  assert c.rollout.reward.shape[1] == 20
  np.testing.assert_array_equal(c.rollout.valid[0].sum(axis=0), [5, 2, 2])
  assert not c.rollout.valid[0, 5:].any() and not c.rollout.reward[0, 5:].any()
  # Too short for what was played: the next power of two instead.
  c = envs.collect(_ones, n_episodes=4, pad_to=3)
  assert c.rollout.reward.shape[1] == 8


def test_seeds_have_their_own_envs():
  envs = host_envs.HostEnvs('CartPole-v1', n_envs=2, seeds=[0, 1])
  r = envs.collect(_ones, n_steps=3).rollout
  assert r.observation.shape == (2, 3, 2, 4)
  alone = host_envs.HostEnvs('CartPole-v1', n_envs=2, seeds=[1])
  np.testing.assert_array_equal(
    alone.collect(_ones, n_steps=3).rollout.observation[0], r.observation[1]
  )
  assert not np.array_equal(r.observation[0], r.observation[1])


def test_state_dict_resumes_running_episodes_exactly():
  envs = host_envs.HostEnvs('CartPole-v1', n_envs=2, seeds=[3])
  envs.collect(_ones, n_steps=5)
  state = envs.state_dict()
  after = envs.collect(_ones, n_steps=4).rollout
  fresh = host_envs.HostEnvs('CartPole-v1', n_envs=2, seeds=[3])
  fresh.load_state_dict(state)
  again = fresh.collect(_ones, n_steps=4).rollout
  for a, b in zip(after, again):
    if isinstance(a, dict):
      continue
    np.testing.assert_array_equal(a, b)


def test_exactly_one_budget():
  envs = host_envs.HostEnvs(_counting(), n_envs=1, seeds=[0])
  with pytest.raises(ValueError, match='exactly one'):
    envs.collect(_ones, n_steps=2, n_episodes=2)
