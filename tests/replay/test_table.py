"""Tests for trax_rl.replay.table."""

import pickle
from typing import NamedTuple

import numpy as np
import pytest

from trax_rl.replay import samplers, table


class Item(NamedTuple):
  observation: np.ndarray  # [2] float32, both entries equal the item's id
  action: np.ndarray  # [] int32, the item's id


def _item(i):
  return Item(np.full(2, i, np.float32), np.int32(i))


def _items(ids):
  ids = np.asarray(ids)
  return Item(np.repeat(ids[:, None], 2, 1).astype(np.float32), ids)


def _filled(max_size, priorities, sampler=None, **kwargs):
  t = table.Table(max_size, sampler, **kwargs)
  for i, p in enumerate(priorities):
    assert t.insert(_item(i), p) == i
  return t


def _chi_square(counts, probs):
  expected = counts.sum() * np.asarray(probs)
  return np.sum((counts - expected) ** 2 / expected)


class TestSampling:
  def test_prioritized_frequencies_and_probabilities(self):
    # Weights p**0.5 = [1, 2, 3, 4, 0] over a total of 10.
    t = _filled(8, [1.0, 4.0, 9.0, 16.0, 0.0], samplers.Prioritized(0.5))
    s = t.sample(200_000)
    counts = np.bincount(s.keys, minlength=5)
    assert counts[4] == 0  # Zero priority: never drawn.
    # 16.27 is the 0.999 quantile of chi-square with 3 degrees of freedom.
    assert _chi_square(counts[:4], [0.1, 0.2, 0.3, 0.4]) < 16.27
    np.testing.assert_allclose(
      s.probability, np.array([0.1, 0.2, 0.3, 0.4, 0.0])[s.keys], rtol=1e-12
    )
    assert s.table_size == 5
    # The data of each draw is the item with that key.
    np.testing.assert_array_equal(s.data.action, s.keys)
    np.testing.assert_array_equal(s.data.observation[:, 1], s.keys)

  def test_uniform_frequencies_ignore_priorities(self):
    t = _filled(10, [0.0, 100.0, 1.0, 1.0, 5.0, 1.0, 1.0, 1.0])
    s = t.sample(200_000)
    counts = np.bincount(s.keys, minlength=8)
    # 24.32 is the 0.999 quantile of chi-square with 7 degrees of freedom.
    assert _chi_square(counts, np.full(8, 1 / 8)) < 24.32
    np.testing.assert_array_equal(s.probability, np.full(200_000, 1 / 8))
    assert s.table_size == 8

  def test_exponent_zero_keeps_zero_priorities_out(self):
    # Reverb's convention: 0**0 counts as 0, the rest weigh 1 each.
    t = _filled(4, [0.0, 5.0, 7.0, 0.1], samplers.Prioritized(0.0))
    s = t.sample(3000)
    assert set(s.keys.tolist()) == {1, 2, 3}
    np.testing.assert_allclose(s.probability, 1 / 3)

  def test_all_zero_priorities_fall_back_to_uniform(self):
    t = _filled(4, [0.0, 0.0, 0.0], samplers.Prioritized(0.6))
    s = t.sample(3000)
    assert set(s.keys.tolist()) == {0, 1, 2}
    np.testing.assert_array_equal(s.probability, np.full(3000, 1 / 3))

  def test_counters_and_size(self):
    t = _filled(3, [1.0] * 4)
    t.sample(5)
    t.sample(2)
    assert (t.size, len(t), t.num_inserts, t.num_samples) == (3, 3, 4, 7)


class TestFifoAndKeys:
  def test_oldest_items_leave_first(self):
    t = _filled(3, [1.0] * 5, samplers.Prioritized(1.0))
    assert t.size == 3
    # Key k sits in slot k % 3.
    np.testing.assert_array_equal(t.state_dict()['keys'], [3, 4, 2])
    s = t.sample(1000)
    assert set(s.keys.tolist()) == {2, 3, 4}
    np.testing.assert_array_equal(s.data.action, s.keys)

  def test_mutate_removed_keys_is_harmless(self):
    t = _filled(3, [1.0] * 5, samplers.Prioritized(1.0))
    # Keys 0 and 1 are gone (slots now hold 3 and 4); 99 was never issued.
    t.mutate_priorities([0, 1, 99, -1], [100.0, 0.0, 7.0, 3.0])
    np.testing.assert_allclose(t.sample(200).probability, 1 / 3)
    # Key 3 is present; the last of its repeated priorities wins.
    t.mutate_priorities([3, 3], [5.0, 2.0])
    s = t.sample(200)
    np.testing.assert_allclose(s.probability, np.where(s.keys == 3, 0.5, 0.25))

  @pytest.mark.parametrize('bad', [-0.5, np.nan, np.inf])
  def test_bad_priorities_raise(self, bad):
    t = _filled(3, [1.0, 2.0], samplers.Prioritized(1.0))
    with pytest.raises(ValueError, match='finite and >= 0'):
      t.mutate_priorities([0, 1], [1.0, bad])
    with pytest.raises(ValueError, match='finite and >= 0'):
      t.insert(_item(2), bad)
    assert t.num_inserts == 2
    np.testing.assert_array_equal(t.state_dict()['priorities'], [1.0, 2.0])

  def test_insert_batch_equals_loop_of_insert(self):
    rng = np.random.default_rng(0)
    priorities = rng.random(13)
    batched = table.Table(5, samplers.Prioritized(0.7), seed=3)
    looped = table.Table(5, samplers.Prioritized(0.7), seed=3)
    keys = []
    # The last chunk is larger than the table and wraps the ring.
    for lo, hi in [(0, 3), (3, 4), (4, 13)]:
      keys.extend(
        batched.insert_batch(_items(range(lo, hi)), priorities[lo:hi])
      )
    for i in range(13):
      assert looped.insert(_item(i), priorities[i]) == i
    assert keys == list(range(13))
    a, b = batched.state_dict(), looped.state_dict()
    for name in ['keys', 'priorities', 'weights']:
      np.testing.assert_array_equal(a[name], b[name])
    for leaf_a, leaf_b in zip(a['leaves'], b['leaves']):
      np.testing.assert_array_equal(leaf_a, leaf_b)
    np.testing.assert_array_equal(a['keys'], [10, 11, 12, 8, 9])
    np.testing.assert_array_equal(
      batched.sample(50).keys, looped.sample(50).keys
    )

  def test_empty_batch_is_a_no_op(self):
    t = table.Table(3)
    keys = t.insert_batch(_items(np.zeros(0, np.int32)), np.zeros(0))
    assert keys.shape == (0,) and t.num_inserts == 0

  def test_items_must_match_the_first(self):
    t = _filled(3, [1.0])
    with pytest.raises(ValueError, match='structure'):
      t.insert({'observation': np.zeros(2)})
    with pytest.raises(ValueError, match='shape'):
      t.insert(Item(np.zeros(3, np.float32), np.int32(0)))
    with pytest.raises(ValueError, match='dtype'):
      t.insert(Item(np.zeros(2, np.float32), np.float32(0.5)))
    with pytest.raises(ValueError, match='leading'):
      t.insert_batch(Item(np.zeros((2, 2), np.float32), np.zeros(3, np.int32)))
    assert t.num_inserts == 1


class TestRateLimiter:
  def test_samples_per_insert_worked_sequence(self):
    # spi 2, min size 3, buffer 4: error = 2 * inserts - samples must stay in
    # [2 * 3 - 4, 2 * 3 + 4] = [2, 10] once 3 items are in.
    t = table.Table(
      10, min_size_to_sample=3, samples_per_insert=2.0, error_buffer=4.0
    )
    assert not t.can_sample(1)  # Size 0 < 3.
    for i in range(3):
      assert t.can_insert(1)  # Free until the size reaches 3.
      t.insert(_item(i))
    assert t.can_insert(2)  # Error would be 2 * 5 - 0 = 10 <= 10.
    assert not t.can_insert(3)  # 2 * 6 = 12 > 10.
    t.insert_batch(_items([3, 4]))
    assert not t.can_insert(1)
    with pytest.raises(table.RateLimitedError, match='samples_per_insert'):
      t.insert(_item(5))
    assert t.num_inserts == 5
    assert t.can_sample(8)  # 10 - 8 = 2 >= 2.
    assert not t.can_sample(9)  # 10 - 9 = 1 < 2.
    t.sample(3)  # Error 7.
    assert t.can_insert(1)  # 12 - 3 = 9 <= 10.
    assert not t.can_insert(2)  # 14 - 3 = 11 > 10.
    t.sample(5)  # Error 2.
    assert not t.can_sample(1)
    with pytest.raises(table.RateLimitedError, match='min_diff'):
      t.sample(1)
    assert t.num_samples == 8
    assert t.can_insert(4)  # 2 * 9 - 8 = 10.
    assert not t.can_insert(5)
    with pytest.raises(table.RateLimitedError):
      t.insert_batch(_items(range(5, 10)))  # All or nothing: none go in.
    assert t.num_inserts == 5
    t.insert_batch(_items(range(5, 9)))
    assert t.can_sample(8) and not t.can_sample(9)  # 18 - 8 - 8 = 2.

  def test_error_range_pair_and_free_inserts_below_min_size(self):
    # error = inserts - samples must stay in [-1, 1] once 3 items are in, yet
    # the first 3 inserts pass although they take the error to 3.
    t = table.Table(
      10, min_size_to_sample=3, samples_per_insert=1.0, error_buffer=(-1, 1)
    )
    assert t.can_insert(3)
    t.insert_batch(_items(range(3)))
    assert not t.can_insert(1)  # 4 - 0 > 1.
    assert t.can_sample(4) and not t.can_sample(5)  # 3 - 4 = -1 >= -1.
    t.sample(4)
    assert t.can_insert(2) and not t.can_insert(3)  # 5 - 4 = 1, 6 - 4 = 2.

  def test_min_size(self):
    t = table.Table(4, min_size_to_sample=2)
    assert not t.can_sample(1)
    t.insert(_item(0))
    with pytest.raises(table.RateLimitedError, match='min_size_to_sample'):
      t.sample(1)
    t.insert(_item(1))
    assert t.can_sample(1_000_000)
    t.sample(500)
    t.insert_batch(_items(range(2, 100)))  # Inserts never block.
    assert t.num_inserts == 100 and t.size == 4
    assert issubclass(table.RateLimitedError, RuntimeError)

  def test_default_error_buffer(self):
    # spi 2, min 100: buffer max(0.1 * 200, 2 * 2) = 20, so max_diff 220 lets
    # 110 inserts in before any sample.
    t = table.Table(1000, min_size_to_sample=100, samples_per_insert=2.0)
    assert t.can_insert(110) and not t.can_insert(111)
    # spi 0.5, min 4: buffer max(0.2, 2 * 1) = 2, range [0, 4]: 8 inserts;
    # after them error is 4, so 4 samples fit and a 5th does not.
    t = table.Table(10, min_size_to_sample=4, samples_per_insert=0.5)
    assert t.can_insert(8) and not t.can_insert(9)
    t.insert_batch(_items(range(8)))
    assert t.can_sample(4) and not t.can_sample(5)

  @pytest.mark.parametrize(
    'kwargs, name',
    [
      (dict(max_size=0), 'max_size'),
      (dict(max_size=2.5), 'max_size'),
      (dict(sampler='prioritized'), 'sampler'),
      (dict(min_size_to_sample=0), 'min_size_to_sample'),
      (dict(min_size_to_sample=11), 'min_size_to_sample'),
      (dict(samples_per_insert=0.0), 'samples_per_insert'),
      (dict(samples_per_insert=-1.0), 'samples_per_insert'),
      (dict(error_buffer=1.0), 'error_buffer'),
      (dict(samples_per_insert=1.0, error_buffer=0.5), 'error_buffer'),
      (dict(samples_per_insert=4.0, error_buffer=3.0), 'error_buffer'),
      (dict(samples_per_insert=1.0, error_buffer=(0.0, 1.0)), 'error_buffer'),
      (
        dict(min_size_to_sample=5, samples_per_insert=1.0, error_buffer=(6, 9)),
        'error_buffer',
      ),
    ],
  )
  def test_invalid_arguments(self, kwargs, name):
    kwargs = {'max_size': 10, **kwargs}
    with pytest.raises(ValueError, match=name):
      table.Table(**kwargs)

  def test_invalid_exponent_and_counts(self):
    with pytest.raises(ValueError, match='priority_exponent'):
      samplers.Prioritized(-1.0)
    with pytest.raises(ValueError, match='n must be'):
      _filled(3, [1.0]).sample(0)


_PLAIN = (np.ndarray, int, float, str, bool, type(None))


def _assert_plain(value):
  if type(value) is dict:
    for k, v in value.items():
      assert type(k) is str
      _assert_plain(v)
  elif type(value) in (list, tuple):
    for v in value:
      _assert_plain(v)
  else:
    assert type(value) in _PLAIN, type(value)


class TestState:
  def _make(self, seed):
    return table.Table(
      7,
      samplers.Prioritized(0.6),
      min_size_to_sample=2,
      samples_per_insert=3.0,
      error_buffer=30.0,
      seed=seed,
    )

  def test_round_trip_continues_identically(self):
    original = self._make(seed=0)
    original.insert_batch(_items(range(10)), np.arange(10) + 0.5)
    original.sample(np.int64(4))  # Counters must stay plain Python ints.
    original.mutate_priorities([5, 9], [0.0, 8.0])
    state = original.state_dict()
    _assert_plain(state)
    restored = self._make(seed=123)
    restored.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert restored.num_inserts == 10 and restored.num_samples == 4
    for _ in range(3):
      a, b = original.sample(6), restored.sample(6)
      np.testing.assert_array_equal(a.keys, b.keys)
      np.testing.assert_array_equal(a.probability, b.probability)
      assert a.table_size == b.table_size == 7
      assert type(b.data) is Item
      np.testing.assert_array_equal(a.data.observation, b.data.observation)
    assert original.can_insert(3) == restored.can_insert(3)
    assert original.insert(_item(10)) == restored.insert(_item(10)) == 10

  def test_round_trip_of_nested_dict_items(self):
    item = {'obs': (np.ones(3), np.int8(2)), 'none': None, 'list': [1.5]}
    original = table.Table(4, seed=5)
    original.insert(item)
    original.insert(item)
    restored = table.Table(4, seed=0)
    restored.load_state_dict(original.state_dict())
    a, b = original.sample(8), restored.sample(8)
    np.testing.assert_array_equal(a.keys, b.keys)
    assert b.data['none'] is None
    assert b.data['obs'][1].dtype == np.int8
    np.testing.assert_array_equal(b.data['list'][0], np.full(8, 1.5))

  def test_round_trip_of_empty_table(self):
    restored = table.Table(3)
    restored.load_state_dict(table.Table(3, seed=4).state_dict())
    assert restored.size == 0 and restored.insert(_item(0)) == 0

  def test_mismatched_table_or_state_raises(self):
    state = self._make(seed=0).state_dict()
    with pytest.raises(ValueError, match='max_size'):
      table.Table(8).load_state_dict(state)
    with pytest.raises(ValueError, match='sampler'):
      table.Table(7, min_size_to_sample=2).load_state_dict(state)
    original = _filled(3, [1.0])
    state = original.state_dict()
    state['structure']['class'] = 'not_imported_module:Item'
    with pytest.raises(ValueError, match='import not_imported_module'):
      table.Table(3).load_state_dict(state)

  def test_corrupt_state_leaves_table_untouched(self):
    source = self._make(seed=0)
    source.insert_batch(_items(range(4)))
    state = source.state_dict()
    state['weights'][0] = -1.0
    target = self._make(seed=1)
    target.insert_batch(_items([0, 1]), [0.0, 1.0])
    with pytest.raises(ValueError, match='finite and >= 0'):
      target.load_state_dict(state)
    assert target.num_inserts == 2 and target.num_samples == 0
    np.testing.assert_array_equal(target.sample(3).keys, [1, 1, 1])
