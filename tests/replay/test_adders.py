"""Tests for replay.adders.NStepTransitionAdder, with hand-worked numbers."""

import numpy as np
import pytest

from trax_rl import task, trajectory
from trax_rl.replay import adders
from trax_rl.testing import fake_envs


def _traj(
  start, rewards, terminated=False, truncated=False, stream=None, first=True
):
  """Observation [t] at step t (from `start`); action t % 2."""
  traj = trajectory.Trajectory(np.array([start], np.float32))
  for i, r in enumerate(rewards):
    t = start + i
    info = {}
    if stream is not None:
      info = {
        adders.STREAM: np.int32(stream),
        adders.FIRST: np.bool_(first and i == 0),
      }
    last = i == len(rewards) - 1
    traj.extend(
      t % 2,
      r,
      np.array([t + 1], np.float32),
      terminated and last,
      truncated and last,
      info,
    )
  return traj


def _add(adder, traj, stream=None, first=True):
  """Adds one slice; its stream and start come from its agent info."""
  del stream, first  # The slices built by `_traj` carry them.
  return adder.add_trajectories([traj])


def test_terminated_episode_two_step():
  # gamma 0.5, rewards 1 2 3 4, T = 4.
  # t=0: 1 + .5*2 = 2,   discount .25, next o2
  # t=1: 2 + .5*3 = 3.5, discount .25, next o3
  # t=2: 3 + .5*4 = 5,   window ends at T, terminated: discount 0, next o4
  # t=3: 4,              discount 0, next o4
  adder = adders.NStepTransitionAdder(2, 0.5)
  out = _add(adder, _traj(0, [1, 2, 3, 4], terminated=True))
  np.testing.assert_allclose(out.observation[:, 0], [0, 1, 2, 3])
  np.testing.assert_array_equal(out.action, [0, 1, 0, 1])
  np.testing.assert_allclose(out.reward, [2, 3.5, 5, 4])
  np.testing.assert_allclose(out.discount, [0.25, 0.25, 0, 0])
  np.testing.assert_allclose(out.next_observation[:, 0], [2, 3, 4, 4])
  assert out.reward.dtype == np.float32 and out.discount.dtype == np.float32
  assert adder.pending_steps == 0


def test_truncated_episode_bootstraps():
  # As above, but a time limit ended it: the last windows keep gamma**k.
  adder = adders.NStepTransitionAdder(2, 0.5)
  out = _add(adder, _traj(0, [1, 2, 3, 4], truncated=True))
  np.testing.assert_allclose(out.reward, [2, 3.5, 5, 4])
  np.testing.assert_allclose(out.discount, [0.25, 0.25, 0.25, 0.5])
  np.testing.assert_allclose(out.next_observation[:, 0], [2, 3, 4, 4])


def test_one_step():
  adder = adders.NStepTransitionAdder(1, 0.9)
  out = _add(adder, _traj(0, [1, 1, 1], terminated=True))
  np.testing.assert_allclose(out.reward, [1, 1, 1])
  np.testing.assert_allclose(out.discount, [0.9, 0.9, 0])
  np.testing.assert_allclose(out.next_observation[:, 0], [1, 2, 3])


def test_episode_shorter_than_n():
  # n=3, T=2, terminated: t=0: 1 + .5*2 = 2 -> o2, discount 0; t=1: 2.
  adder = adders.NStepTransitionAdder(3, 0.5)
  out = _add(adder, _traj(0, [1, 2], terminated=True))
  np.testing.assert_allclose(out.reward, [2, 2])
  np.testing.assert_allclose(out.discount, [0, 0])


def test_slices_of_one_env_join_up():
  # One episode of 5 steps arrives as a cut slice of 3 and the rest.
  whole = _add(
    adders.NStepTransitionAdder(2, 0.5),
    _traj(0, [1, 2, 3, 4, 5], terminated=True),
  )
  adder = adders.NStepTransitionAdder(2, 0.5)
  first = _add(adder, _traj(0, [1, 2, 3], stream=0), stream=0, first=True)
  # Steps 0 and 1 have full windows; step 2 waits for the next slice.
  np.testing.assert_allclose(first.observation[:, 0], [0, 1])
  assert adder.pending_steps == 1
  rest = _add(
    adder,
    _traj(3, [4, 5], terminated=True, stream=0, first=False),
    stream=0,
    first=False,
  )
  np.testing.assert_allclose(rest.observation[:, 0], [2, 3, 4])
  for field in range(5):
    np.testing.assert_allclose(
      np.concatenate([first[field], rest[field]]), whole[field]
    )
  assert adder.pending_steps == 0


def test_streams_are_kept_apart_and_read_from_agent_info():
  adder = adders.NStepTransitionAdder(2, 0.5)
  out = adder.add_trajectories(
    [
      _traj(0, [1, 1, 1], stream=0),
      _traj(10, [2, 2], stream=1),
    ]
  )
  # Stream 0: t=0 and 1 ready (t=2 waits); stream 1: t=0 ready (t=1 waits).
  np.testing.assert_allclose(out.observation[:, 0], [0, 1, 10])
  np.testing.assert_allclose(out.reward, [1.5, 1.5, 3])
  assert adder.pending_steps == 2
  out = adder.add_trajectories(
    [
      _traj(12, [2], terminated=True, stream=1, first=False),
      _traj(3, [1], truncated=True, stream=0, first=False),
    ]
  )
  # Stream 1: t=1 -> 2 + .5*2 = 3, discount 0; t=2 -> 2, discount 0.
  # Stream 0: t=2 -> 1.5 discount .25; t=3 -> 1 discount .5 (truncated).
  np.testing.assert_allclose(out.observation[:, 0], [11, 12, 2, 3])
  np.testing.assert_allclose(out.reward, [3, 2, 1.5, 1])
  np.testing.assert_allclose(out.discount, [0, 0, 0.25, 0.5])


def test_new_episode_flushes_the_pending_tail():
  # After a restore the env restarts: the waiting tail bootstraps at its cut.
  adder = adders.NStepTransitionAdder(3, 0.5)
  assert _add(adder, _traj(0, [1, 2], stream=0), stream=0) is None
  out = _add(
    adder, _traj(100, [7], terminated=True, stream=0), stream=0, first=True
  )
  # t=0: 1 + .5*2 = 2, two steps to the cut: discount .25, next o2.
  # t=1: 2, discount .5, next o2. Then the new episode's step: 7, 0.
  np.testing.assert_allclose(out.observation[:, 0], [0, 1, 100])
  np.testing.assert_allclose(out.reward, [2, 2, 7])
  np.testing.assert_allclose(out.discount, [0.25, 0.5, 0])
  np.testing.assert_allclose(out.next_observation[:, 0], [2, 2, 101])


def test_without_stream_a_cut_is_a_truncation():
  adder = adders.NStepTransitionAdder(2, 0.5)
  out = _add(adder, _traj(0, [1, 1]))
  np.testing.assert_allclose(out.discount, [0.25, 0.5])
  assert adder.pending_steps == 0


def test_flush_and_state_round_trip():
  adder = adders.NStepTransitionAdder(3, 0.9)
  _add(adder, _traj(0, [1, 2, 3, 4], stream=2), stream=2)
  state = adder.state_dict()
  other = adders.NStepTransitionAdder(3, 0.9)
  other.load_state_dict(state)
  assert other.pending_steps == adder.pending_steps == 2
  cont = _traj(4, [5], terminated=True, stream=2, first=False)
  a = _add(adder, cont, stream=2, first=False)
  b = _add(other, cont, stream=2, first=False)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  other.load_state_dict(state)
  flushed = other.flush()
  # t=2: 3 + .9*4 = 6.6, discount .81; t=3: 4, discount .9.
  np.testing.assert_allclose(flushed.reward, [6.6, 4], rtol=1e-6)
  np.testing.assert_allclose(flushed.discount, [0.81, 0.9], rtol=1e-6)
  with pytest.raises(ValueError, match='n_step'):
    adders.NStepTransitionAdder(2, 0.9).load_state_dict(state)


def test_bad_arguments():
  with pytest.raises(ValueError, match='n_step'):
    adders.NStepTransitionAdder(0, 0.9)
  with pytest.raises(ValueError, match='gamma'):
    adders.NStepTransitionAdder(1, 1.5)


def test_collection_in_slices_equals_whole_episodes():
  # Two envs, episodes of 4, 7, 4, 7... steps (reward 2, observation [t, t]),
  # collected 3 steps per env at a time. In 18 steps per env, episodes of
  # 4, 7 and 4 steps end and one is 3 steps in. With n=3 and gamma .5:
  #   full windows: 2 + 1 + .5 = 3.5, discount .125, next obs 3 steps on;
  #   the last three steps of an ended episode: 3.5, 3 and 2, discount 0,
  #   next obs its final observation (3, 2 and 1 steps on).
  # Per env: 1 + 4 + 1 full windows in the ended episodes, 1 (t=0) in the
  # running one, 9 ending steps, 2 steps pending.
  def policy(obs, first):
    return np.ones(len(obs), np.int64), adders.stream_info(first)

  t = task.RLTask(
    lambda: fake_envs.CountingEnv((4, 7)),
    n_envs=2,
    initial_trajectories=0,
    gamma=0.5,
  )
  adder = adders.NStepTransitionAdder(3, 0.5)
  parts = []
  for epoch in range(1, 7):
    result = t.collect(policy, n_interactions=6, epoch_id=epoch)
    out = adder.add_trajectories(result.trajectories)
    if out is not None:
      parts.append(out)
  obs, _, reward, discount, next_obs = (np.concatenate(f) for f in zip(*parts))
  assert adder.pending_steps == 4 and len(reward) == 32
  full = discount > 0
  assert full.sum() == 14
  np.testing.assert_allclose(reward[full], 3.5)
  np.testing.assert_allclose(discount[full], 0.125)
  np.testing.assert_allclose(next_obs[full, 0] - obs[full, 0], 3)
  np.testing.assert_allclose(
    np.sort(reward[~full]), [2] * 6 + [3] * 6 + [3.5] * 6
  )
  np.testing.assert_allclose(
    next_obs[~full, 0] - obs[~full, 0],
    np.select([reward[~full] == 3.5, reward[~full] == 3], [3, 2], 1),
  )
