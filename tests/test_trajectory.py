"""Tests for trax_rl.trajectory."""

import numpy as np
import pytest

from trax_rl import trajectory


def _traj(n=3, terminated=True, truncated=False):
  t = trajectory.Trajectory(np.array([0.0]))
  for i in range(n):
    last = i == n - 1
    t.extend(
      i % 2,
      float(i + 1),
      np.array([i + 1.0]),
      terminated=last and terminated,
      truncated=last and truncated,
      agent_info={'dist_inputs': np.array([i, -i], np.float32)},
    )
  return t


def test_lengths_and_return():
  t = _traj(3)
  assert len(t) == 4 and t.n_steps == 3
  assert t.total_return == 6.0
  assert t.done and t.terminated and not t.truncated


def test_to_np_margin_one_terminated():
  # Rewards 1, 2, 3; gamma 0.5: returns 1 + .5*2 + .25*3 = 2.75, 2 + 1.5, 3.
  b = _traj(3).to_np(margin=1, gamma=0.5)
  np.testing.assert_allclose(b.observation[:, 0], [0, 1, 2, 3])
  np.testing.assert_allclose(b.reward, [1, 2, 3, 0])
  np.testing.assert_allclose(b.return_, [2.75, 3.5, 3.0, 0.0])
  np.testing.assert_array_equal(b.done, [False, False, True, True])
  np.testing.assert_array_equal(b.mask, [1, 1, 1, 0])
  np.testing.assert_array_equal(b.action, [0, 1, 0, 0])
  assert b.dist_inputs.shape == (4, 2)


def test_to_np_truncated_is_not_done():
  b = _traj(3, terminated=False, truncated=True).to_np(margin=1)
  # A truncation bootstraps: only the padding step is done.
  np.testing.assert_array_equal(b.done, [False, False, False, True])


def test_to_np_margins_zero_and_two():
  t = _traj(3)
  b0 = t.to_np(margin=0)
  assert b0.observation.shape == (3, 1) and b0.reward.shape == (3,)
  b2 = t.to_np(margin=2)
  assert b2.observation.shape == (5, 1)
  np.testing.assert_allclose(b2.observation[:, 0], [0, 1, 2, 3, 0])
  np.testing.assert_array_equal(b2.mask, [1, 1, 1, 0, 0])
  with pytest.raises(ValueError, match='margin'):
    t.to_np(margin=-1)


def test_suffix():
  s = _traj(3).suffix(2)
  assert len(s) == 2
  np.testing.assert_allclose(np.stack(s.observations)[:, 0], [2, 3])
  assert s.rewards == [3.0]
  with pytest.raises(ValueError):
    _traj(3).suffix(0)


def test_extend_after_done_fails():
  with pytest.raises(ValueError, match='finished'):
    _traj(2).extend(0, 0.0, np.array([0.0]))


def test_state_dict_round_trip():
  t = _traj(4, terminated=False, truncated=True)
  r = trajectory.Trajectory.from_state_dict(t.state_dict())
  for a, b in zip(t.to_np(1, 0.9), r.to_np(1, 0.9)):
    if isinstance(a, dict):
      for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    elif a is not None and not isinstance(a, tuple):
      np.testing.assert_array_equal(a, b)
  assert r.truncated and not r.terminated
