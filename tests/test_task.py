"""Tests for trax_rl.task.RLTask."""

import numpy as np
import pytest

from trax_rl import task
from trax_rl.testing import fake_envs


def _const_policy(action=1, log=None):
  def policy(obs, first):
    if log is not None:
      log.append((obs.copy(), first.copy()))
    n = len(obs)
    return np.full(n, action), {'dist_inputs': np.zeros((n, 2), np.float32)}

  return policy


def _task(lengths=(3,), n_envs=1, n_replay_epochs=1, **kwargs):
  kwargs.setdefault('initial_trajectories', 0)
  t = task.RLTask(
    lambda: fake_envs.CountingEnv(lengths), n_envs=n_envs, **kwargs
  )
  t.set_n_replay_epochs(n_replay_epochs)
  return t


def test_collect_whole_episodes():
  t = _task(lengths=(3,), n_envs=2, gamma=0.5)
  # Action 1 -> reward 2 per step; 3 steps -> return 6.
  avg = t.collect_trajectories(_const_policy(1), n_trajectories=3)
  assert avg == 6.0
  trajs = t.trajectories[1]
  assert len(trajs) == 3 and all(tr.terminated for tr in trajs)
  assert [tr.n_steps for tr in trajs] == [3, 3, 3]
  # Final observations are the terminal ones, not the next reset's.
  for tr in trajs:
    np.testing.assert_allclose(tr.last_observation, [3, 3])
  assert t.n_trajectories() == 3 and t.n_interactions() == 9


def test_first_flags_mark_episode_starts():
  log = []
  t = _task(lengths=(2,), n_envs=1)
  t.collect_trajectories(_const_policy(0, log), n_trajectories=2)
  firsts = [bool(f[0]) for _, f in log]
  assert firsts == [True, False, True, False]


def test_interactions_continue_episodes_across_calls():
  t = _task(lengths=(5,), n_envs=1)
  # No episode ends in the first call: Trax's fallback, the slice's return.
  assert (
    t.collect_trajectories(_const_policy(1), n_interactions=3, epoch_id=1)
    == 6.0
  )
  (cut,) = t.trajectories[1]
  assert cut.n_steps == 3 and not cut.done
  # The episode ends 2 steps into the next call: its full return is 10.
  assert (
    t.collect_trajectories(_const_policy(1), n_interactions=3, epoch_id=2)
    == 10.0
  )
  first, second = t.trajectories[2]
  assert first.n_steps == 2 and first.terminated
  np.testing.assert_allclose(first.observations[0], [3, 3])  # Continued.
  assert second.n_steps == 1 and not second.done


def test_max_steps_truncates():
  t = _task(lengths=(10,), max_steps=4)
  t.collect_trajectories(_const_policy(0), n_trajectories=2)
  for tr in t.trajectories[1]:
    assert tr.n_steps == 4 and tr.truncated and not tr.terminated


def test_eval_stores_nothing():
  t = _task()
  assert (
    t.collect_trajectories(_const_policy(0), n_trajectories=2, only_eval=True)
    == 3.0
  )
  assert t.trajectories == {} and t.n_interactions() == 0


def test_replay_window():
  t = _task(n_replay_epochs=2)
  for epoch in (1, 2, 3):
    t.collect_trajectories(_const_policy(0), n_trajectories=1, epoch_id=epoch)
  assert sorted(t.trajectories) == [2, 3]


def test_initial_random_trajectories():
  t = _task(initial_trajectories=2, seed=3)
  assert len(t.trajectories[0]) == 2


def test_batch_stream_slices_and_masks():
  t = _task(lengths=(3,), n_envs=2)
  t.collect_trajectories(_const_policy(1), n_trajectories=4)
  b = next(t.trajectory_batch_stream(8, max_slice_length=2, margin=1))
  assert b.observation.shape == (8, 2, 2)
  assert b.action.shape == b.reward.shape == b.mask.shape == (8, 2)
  assert b.dist_inputs.shape == (8, 2, 2)
  # 3 steps + margin 1 = 4 rows, so slices start at 0, 1 or 2: a slice
  # starting at 2 holds the last step and the padding step.
  for i in range(8):
    start = int(b.observation[i, 0, 0])
    assert start in (0, 1, 2)
    expected_mask = [1, 1] if start < 2 else [1, 0]
    np.testing.assert_array_equal(b.mask[i], expected_mask)
    np.testing.assert_array_equal(
      b.done[i], [start == 2] * 2 if start == 2 else [False, start == 1]
    )


def test_batch_stream_whole_trajectories_padded_to_power_of_two():
  t = _task(lengths=(2, 5), n_envs=1)
  t.collect_trajectories(_const_policy(1), n_trajectories=2)
  b = next(t.trajectory_batch_stream(16, margin=0))
  assert b.observation.shape[1] == 8  # Longest 5, padded to 8.
  lengths = b.mask.sum(axis=1)
  assert set(lengths.tolist()) == {2.0, 5.0}
  for i, n in enumerate(lengths.astype(int)):
    assert b.done[i, n:].all()  # Padding is done.


def test_batch_stream_min_slice_length():
  t = _task(lengths=(2,))
  t.collect_trajectories(_const_policy(1), n_trajectories=2)
  b = next(t.trajectory_batch_stream(4, margin=0, min_slice_length=6))
  # As Trax: at least min_slice_length, rounded up to a power of two.
  assert b.observation.shape[1] == 8
  b = next(t.trajectory_batch_stream(4, margin=0, min_slice_length=2))
  assert b.observation.shape[1] == 2


def test_batch_stream_epochs_and_fresh_data():
  t = _task(lengths=(2,), n_replay_epochs=3)
  t.collect_trajectories(_const_policy(0), n_trajectories=2, epoch_id=1)
  stream = t.trajectory_batch_stream(4, epochs=[-1], margin=0)
  assert next(stream).action.max() == 0
  t.collect_trajectories(_const_policy(1), n_trajectories=2, epoch_id=2)
  # The stream picks up the new last epoch at once, with no stale draws.
  assert next(stream).action.min() == 1


def test_preprocessing_fn_sees_trajectories():
  t = _task(lengths=(2, 4))
  t.collect_trajectories(_const_policy(1), n_trajectories=2)
  keep_long = lambda stream: (tr for tr in stream if tr.n_steps == 4)
  b = next(
    t.trajectory_batch_stream(
      4, margin=0, trajectory_stream_preprocessing_fn=keep_long
    )
  )
  np.testing.assert_array_equal(b.mask.sum(axis=1), [4, 4, 4, 4])


def test_save_and_load(tmp_path):
  t = _task(lengths=(2, 3), n_replay_epochs=2, seed=5)
  for epoch in (1, 2):
    t.collect_trajectories(
      _const_policy(epoch % 2), n_trajectories=2, epoch_id=epoch
    )
  state = t.save_to_dir(tmp_path)
  u = _task(lengths=(2, 3), n_replay_epochs=2, seed=99)
  u.load_from_dir(tmp_path, state)
  assert sorted(u.trajectories) == [1, 2]
  assert u.n_interactions() == t.n_interactions()
  for e in (1, 2):
    for a, b in zip(t.trajectories[e], u.trajectories[e]):
      np.testing.assert_array_equal(
        np.stack(a.observations), np.stack(b.observations)
      )
      assert a.rewards == b.rewards and a.terminated == b.terminated
  # The RNG continues identically.
  assert t._rng.integers(1 << 30) == u._rng.integers(1 << 30)


def test_initial_trajectories_from_directory(tmp_path):
  t = _task(lengths=(2,))
  t.collect_trajectories(_const_policy(1), n_trajectories=3)
  t.save_to_dir(tmp_path)
  u = _task(initial_trajectories=str(tmp_path))
  assert len(u.trajectories[0]) == 3
  with pytest.raises(ValueError, match='no stored trajectories'):
    _task(initial_trajectories=str(tmp_path / 'nothing'))


def test_vector_env_steps_lockstep_with_one_policy_call():
  log = []
  t = _task(lengths=(4,), n_envs=3)
  t.collect_trajectories(_const_policy(0, log), n_interactions=12)
  assert len(log) == 4 and all(o.shape == (3, 2) for o, _ in log)


@pytest.mark.parametrize(
  'kwargs, message',
  [
    ({'gamma': 1.5}, 'gamma'),
    ({'n_envs': 0}, 'n_envs'),
    ({'max_steps': 0}, 'max_steps'),
    ({'n_replay_epochs': 0}, 'n_replay_epochs'),
    ({'initial_trajectories': -1}, 'initial_trajectories'),
  ],
)
def test_bad_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    _task(**kwargs)


def test_unknown_env_id():
  with pytest.raises(ValueError, match="unknown env id 'NoSuchEnv-v9'"):
    task.RLTask('NoSuchEnv-v9')


def test_exactly_one_of_trajectories_or_interactions():
  t = _task()
  with pytest.raises(ValueError, match='exactly one'):
    t.collect_trajectories(_const_policy(), n_trajectories=1, n_interactions=1)
  with pytest.raises(ValueError, match='exactly one'):
    t.collect_trajectories(_const_policy())
  with pytest.raises(ValueError, match='batch_size'):
    next(t.trajectory_batch_stream(0))
