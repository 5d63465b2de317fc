"""Tests for trax_rl.sequence_adder: cutting, overlap, padding, resume."""

import numpy as np
import pytest

from trax_rl import checkpoint, types
from trax_rl import trajectory as trajectory_lib
from trax_rl.replay import sequence_adder

GAMMA = 0.5


def _slice(env, start, n, first, end=None):
  """Steps start..start+n-1 of an episode on `env`.

  Observation at position p is [p + 100 * env], action p % 2, reward p, the
  core state recorded before step p is [10 p + env]. `end` is None (cut),
  'term' or 'trunc' (the episode ends after the last step).
  """
  traj = trajectory_lib.Trajectory(np.array([start + 100 * env], np.float32))
  for k in range(n):
    p = start + k
    traj.extend(
      p % 2,
      float(p),
      np.array([p + 1 + 100 * env], np.float32),
      terminated=end == 'term' and k == n - 1,
      truncated=end == 'trunc' and k == n - 1,
      agent_info={
        'stream': np.int32(env),
        'first': np.bool_(first and k == 0),
        'core_h': np.array([10.0 * p + env], np.float32),
      },
    )
  return traj


def _adder(burn_in=1, trace=2, period=2):
  return sequence_adder.SequenceAdder(burn_in, trace, period, GAMMA)


def _check(segment, obs, action, reward, discount, mask, core, env=0):
  np.testing.assert_array_equal(
    segment.observation[:, 0],
    np.where(np.asarray(mask) + _was_real(mask) > 0, np.add(obs, 100 * env), 0),
  )
  np.testing.assert_array_equal(segment.action, action)
  np.testing.assert_array_equal(segment.reward, reward)
  np.testing.assert_array_equal(segment.discount, discount)
  np.testing.assert_array_equal(segment.mask, mask)
  np.testing.assert_array_equal(segment.core_state['core_h'], [core])


def _was_real(mask):
  """1 where the step before was real: the step holds a real observation."""
  return np.concatenate([[0], np.asarray(mask)[:-1]])


def _terminated_episode_segments(adder, slices):
  segments = []
  for start, n, first, end in slices:
    segments += adder.add_trajectories([_slice(0, start, n, first, end)])
  return segments


def test_cuts_overlapping_segments_and_pads_the_end():
  # L = 1 + 2 + 1 = 4, period 2, episode of 6 steps then its final obs 6:
  # starts 0 and 2 are full; start 4 is the last one, padded; 6 is not cut.
  segments = _terminated_episode_segments(_adder(), [(0, 6, True, 'term')])
  assert len(segments) == 3
  _check(segments[0], [0, 1, 2, 3], [0, 1, 0, 1], [0, 1, 2, 3],
         [.5, .5, .5, .5], [1, 1, 1, 1], 0.0)  # fmt: skip
  _check(segments[1], [2, 3, 4, 5], [0, 1, 0, 1], [2, 3, 4, 5],
         [.5, .5, .5, 0.], [1, 1, 1, 1], 20.0)  # fmt: skip
  # Final observation 6 is a step with mask 0; then zero padding.
  _check(segments[2], [4, 5, 6, 0], [0, 1, 0, 0], [4, 5, 0, 0],
         [.5, 0., 0., 0.], [1, 1, 0, 0], 40.0)  # fmt: skip
  assert isinstance(segments[0], types.Segment)


def test_slices_across_calls_give_the_same_segments():
  whole = _terminated_episode_segments(_adder(), [(0, 6, True, 'term')])
  adder = _adder()
  parts = []
  parts.append(adder.add_trajectories([_slice(0, 0, 2, True)]))
  assert adder.running_streams == [0]
  parts.append(adder.add_trajectories([_slice(0, 2, 3, False)]))
  parts.append(adder.add_trajectories([_slice(0, 5, 1, False, 'term')]))
  # Segment 0 completes with step 3 (2nd slice), segment 1 with step 5.
  assert [len(p) for p in parts] == [0, 1, 2]
  assert adder.running_streams == []
  for a, b in zip(whole, sum(parts, [])):
    for x, y in zip(a, b):
      np.testing.assert_array_equal(
        x if not isinstance(x, dict) else x['core_h'],
        y if not isinstance(y, dict) else y['core_h'],
      )


def test_short_and_truncated_episodes():
  adder = _adder()
  # Two steps, terminated: one padded segment from the start.
  (segment,) = adder.add_trajectories([_slice(0, 0, 2, True, 'term')])
  _check(segment, [0, 1, 2, 0], [0, 1, 0, 0], [0, 1, 0, 0],
         [.5, 0., 0., 0.], [1, 1, 0, 0], 0.0)  # fmt: skip
  # Three steps, truncated: the last real step keeps its discount (it
  # bootstraps from the final observation 3); the start at 2 is the first
  # whose window passes the end, so it is cut too.
  first, last = adder.add_trajectories([_slice(0, 0, 3, True, 'trunc')])
  _check(first, [0, 1, 2, 3], [0, 1, 0, 0], [0, 1, 2, 0],
         [.5, .5, .5, 0.], [1, 1, 1, 0], 0.0)  # fmt: skip
  _check(last, [2, 3, 0, 0], [0, 0, 0, 0], [2, 0, 0, 0],
         [.5, 0., 0., 0.], [1, 0, 0, 0], 20.0)  # fmt: skip


def test_envs_are_kept_apart_in_any_order():
  adder = _adder()
  out = []
  out += adder.add_trajectories([_slice(1, 0, 3, True)])
  out += adder.add_trajectories([_slice(0, 0, 2, True)])
  assert adder.running_streams == [0, 1]
  out += adder.add_trajectories([_slice(0, 2, 4, False, 'term')])
  out += adder.add_trajectories([_slice(1, 3, 3, False, 'term')])
  by_env = {0: [], 1: []}
  for s in out:
    by_env[int(s.core_state['core_h'][0]) % 10].append(s)
  for env in (0, 1):
    _check(by_env[env][1], [2, 3, 4, 5], [0, 1, 0, 1], [2, 3, 4, 5],
           [.5, .5, .5, 0.], [1, 1, 1, 1], 20.0 + env, env=env)  # fmt: skip
    assert len(by_env[env]) == 3


def test_episode_restart_closes_the_cut_episode_as_truncated():
  adder = _adder()
  assert adder.add_trajectories([_slice(0, 0, 3, True)]) == []
  # The env restarts (e.g. after a restore): the old episode ends at its
  # last observation 3 and still bootstraps.
  segments = adder.add_trajectories([_slice(0, 0, 1, True)])
  assert len(segments) == 2
  _check(segments[0], [0, 1, 2, 3], [0, 1, 0, 0], [0, 1, 2, 0],
         [.5, .5, .5, 0.], [1, 1, 1, 0], 0.0)  # fmt: skip
  assert adder.running_streams == [0]


def test_non_overlapping_period():
  adder = _adder(burn_in=0, trace=2, period=3)  # L = 3 = period.
  segments = adder.add_trajectories([_slice(0, 0, 7, True, 'term')])
  starts = [int(s.core_state['core_h'][0]) // 10 for s in segments]
  assert starts == [0, 3, 6]
  np.testing.assert_array_equal(segments[2].mask, [1, 0, 0])


def test_state_dict_round_trip_mid_episode():
  reference = _adder()
  expected = reference.add_trajectories(
    [_slice(0, 0, 3, True)]
  ) + reference.add_trajectories([_slice(0, 3, 4, False, 'term')])
  adder = _adder()
  assert adder.add_trajectories([_slice(0, 0, 3, True)]) == []
  saved = checkpoint.loads(checkpoint.dumps(adder.state_dict()))
  restored = _adder()
  restored.load_state_dict(saved)
  assert restored.running_streams == [0]
  got = restored.add_trajectories([_slice(0, 3, 4, False, 'term')])
  assert len(got) == len(expected) == 4  # Starts 0, 2, 4 (full) and 6.
  for a, b in zip(expected, got):
    np.testing.assert_array_equal(a.observation, b.observation)
    np.testing.assert_array_equal(a.mask, b.mask)
    np.testing.assert_array_equal(
      a.core_state['core_h'], b.core_state['core_h']
    )


def test_stack_and_zero_segment():
  segment = sequence_adder.zero_segment(
    np.zeros(3, np.float32), np.int64(0), 5, {'h': np.ones(2)}
  )
  assert segment.observation.shape == (5, 3)
  np.testing.assert_array_equal(segment.core_state['h'], [0.0, 0.0])
  batch = sequence_adder.stack([segment, segment])
  assert batch.action.shape == (2, 5)
  assert batch.core_state['h'].shape == (2, 2)


def test_a_slice_without_stream_info_is_a_whole_episode():
  # As the transition adder: no stream, so nothing waits; the cut is a
  # truncation (the last step bootstraps: discount gamma, not 0).
  traj = trajectory_lib.Trajectory(np.array([0.0], np.float32))
  for p in range(3):
    traj.extend(p % 2, float(p), np.array([p + 1.0], np.float32))
  adder = _adder()
  # L = 4, period 2: starts 0 and 2 (the second one padded).
  segment, second = adder.add_trajectories([traj])
  assert adder.running_streams == []
  np.testing.assert_array_equal(second.mask, [1, 0, 0, 0])
  np.testing.assert_array_equal(segment.mask, [1, 1, 1, 0])
  np.testing.assert_array_equal(segment.discount, [GAMMA] * 3 + [0])
  np.testing.assert_array_equal(segment.observation[:, 0], [0, 1, 2, 3])
  assert segment.core_state == {}


def test_bad_input():
  with pytest.raises(ValueError, match='sequence_period'):
    sequence_adder.SequenceAdder(1, 2, 5, GAMMA)
  with pytest.raises(ValueError, match='trace_length'):
    sequence_adder.SequenceAdder(1, 0, 1, GAMMA)
  with pytest.raises(ValueError, match='version'):
    _adder().load_state_dict({'version': 99})
