"""Tests for trax_rl.replay.device_table: Reverb's table semantics.

Numbers are worked out by hand in the comments, or come from `_Reference`,
a plain-Python transcription of the semantics (an ordered dict from key to
item and priority) that random sequences of inserts and mutations are
checked against.
"""

import pickle
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flashbax.buffers import sum_tree

from trax_rl import types
from trax_rl.losses import q_learning, q_parts
from trax_rl.networks import base as networks_base
from trax_rl.replay import device_table, samplers


class Item(NamedTuple):
  observation: np.ndarray  # [2] float32, both entries the item's id
  action: np.ndarray  # [] int32, the item's id


def _items(ids):
  ids = np.asarray(ids, np.int32).reshape(-1)
  return Item(np.repeat(ids[:, None], 2, 1).astype(np.float32), ids)


_EXAMPLE = Item(np.zeros(2, np.float32), np.int32(0))


def _chi_square(counts, probs):
  expected = counts.sum() * np.asarray(probs)
  return np.sum((counts - expected) ** 2 / expected)


class _Ops(NamedTuple):
  """A DeviceTable's functions, jitted or not."""

  insert: Callable
  sample: Callable  # sample(state, key, n), n static
  mutate_priorities: Callable
  can_insert: Callable  # can_insert(state, n), n static
  can_sample: Callable  # can_sample(state, n), n static


def _ops(dev, jit=True):
  if not jit:
    return _Ops(
      dev.insert,
      dev.sample,
      dev.mutate_priorities,
      dev.can_insert,
      dev.can_sample,
    )
  return _Ops(
    jax.jit(dev.insert),
    jax.jit(dev.sample, static_argnums=2),
    jax.jit(dev.mutate_priorities),
    jax.jit(dev.can_insert, static_argnums=1),
    jax.jit(dev.can_sample, static_argnums=1),
  )


def _slot_probabilities(dev, state):
  """[max_size] probability that a draw picks each slot."""
  size = int(dev.size(state))
  uniform = np.where(np.arange(dev.max_size) < size, 1.0 / size, 0.0)
  if not dev.prioritized:
    return uniform
  weights = np.asarray(sum_tree.get_batch(state.tree, jnp.arange(dev.max_size)))
  total = float(state.tree.nodes[0])
  return weights / total if total > 0 else uniform


class _Reference:
  """Reverb's table semantics, transcribed: a dict in key (= FIFO) order."""

  def __init__(self, max_size, sampler):
    self.max_size = max_size
    self.exponent = getattr(sampler, 'priority_exponent', None)
    self.items = {}  # key -> [id, priority], oldest first
    self.num_inserts = 0

  def insert(self, ids, priorities, valid):
    keys = []
    for i, p, v in zip(ids, priorities, valid):
      if not v:
        keys.append(-1)
        continue
      keys.append(self.num_inserts)
      self.items[self.num_inserts] = [i, p]
      self.num_inserts += 1
      if len(self.items) > self.max_size:
        del self.items[next(iter(self.items))]  # The oldest leaves.
    return keys

  def mutate_priorities(self, keys, priorities):
    for k, p in zip(keys, priorities):  # In order: the last write wins.
      if k in self.items:
        self.items[k][1] = p

  def probabilities(self):
    """{key: probability of a draw}."""
    uniform = {k: 1.0 / len(self.items) for k in self.items}
    if self.exponent is None:
      return uniform
    weights = {
      k: 0.0 if p == 0 else p**self.exponent for k, (_, p) in self.items.items()
    }
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()} if total else uniform


def _assert_matches(dev, state, ref, sample):
  """The table holds ref's items in slots key % max_size, drawn as ref's."""
  assert int(dev.size(state)) == len(ref.items)
  assert int(state.num_inserts) == ref.num_inserts
  slot_keys = np.full(dev.max_size, -1)
  for k in ref.items:
    slot_keys[k % dev.max_size] = k
  np.testing.assert_array_equal(state.keys, slot_keys)
  if not ref.items:
    return  # Nothing to draw.
  held = slot_keys >= 0
  ids = [ref.items[k][0] for k in slot_keys[held]]
  np.testing.assert_array_equal(np.asarray(state.storage.action)[held], ids)
  np.testing.assert_array_equal(
    np.asarray(state.storage.observation)[held], np.repeat([ids], 2, 0).T
  )
  np.testing.assert_allclose(
    np.asarray(state.priorities)[held],
    [ref.items[k][1] for k in slot_keys[held]],
    rtol=1e-6,
  )
  want = ref.probabilities()
  got = _slot_probabilities(dev, state)
  np.testing.assert_allclose(
    got[held], [want[k] for k in slot_keys[held]], rtol=1e-5, atol=1e-7
  )
  # Draws: only items in the table, each with its data and probability;
  # none whose probability is 0.
  _, s = sample(state, jax.random.key(ref.num_inserts), 256)
  keys = np.asarray(s.keys).tolist()
  assert all(want.get(k, 0.0) > 0 for k in keys), keys
  np.testing.assert_array_equal(s.data.action, [ref.items[k][0] for k in keys])
  np.testing.assert_allclose(s.probability, [want[k] for k in keys], rtol=1e-5)
  assert int(s.table_size) == len(ref.items)


class TestFifoAndKeys:
  def test_masked_inserts_through_a_ring_wrap(self):
    dev = device_table.DeviceTable(3, samplers.Prioritized(1.0))
    ops = _ops(dev)
    state = dev.init(_EXAMPLE)
    state, keys = ops.insert(
      state, _items([10, 11, 12]), 1.0, np.array([1, 0, 1], bool)
    )
    # A masked row takes no key and no slot: 10 and 12 get keys 0 and 1.
    np.testing.assert_array_equal(keys, [0, -1, 1])
    np.testing.assert_array_equal(state.keys, [0, 1, -1])
    np.testing.assert_array_equal(state.storage.action, [10, 12, 0])
    assert int(dev.size(state)) == 2 and int(state.num_inserts) == 2
    state, keys = ops.insert(state, _items([13, 14, 15]), 1.0)
    # Key k lives in slot k % 3: keys 3 and 4 evict keys 0 and 1.
    np.testing.assert_array_equal(keys, [2, 3, 4])
    np.testing.assert_array_equal(state.keys, [3, 4, 2])
    np.testing.assert_array_equal(state.storage.action, [14, 15, 13])
    np.testing.assert_array_equal(state.storage.observation[:, 0], [14, 15, 13])
    assert int(dev.size(state)) == 3 and int(state.num_inserts) == 5
    state, s = ops.sample(state, jax.random.key(0), 300)
    assert set(np.asarray(s.keys).tolist()) == {2, 3, 4}
    id_of_key = {2: 13, 3: 14, 4: 15}
    np.testing.assert_array_equal(
      s.data.action, [id_of_key[k] for k in np.asarray(s.keys).tolist()]
    )
    np.testing.assert_allclose(s.probability, 1 / 3, rtol=1e-6)
    assert int(s.table_size) == 3 and int(state.num_samples) == 300

  @pytest.mark.parametrize(
    'sampler',
    [None, samplers.Prioritized(0.6), samplers.Prioritized(0.0)],
    ids=['uniform', 'prioritized', 'exponent_0'],
  )
  def test_random_inserts_and_mutations_match_the_reference(self, sampler):
    dev = device_table.DeviceTable(7, sampler)
    ops = _ops(dev)
    state = dev.init(_EXAMPLE)
    ref = _Reference(7, sampler)
    rng = np.random.default_rng(0)
    next_id = 100
    for m in (3, 5, 7, 3, 7, 5, 3, 7):
      ids = np.arange(next_id, next_id + m)
      next_id += m
      # Some zero priorities, some masked rows.
      priorities = rng.choice([0.0, 0.5, 1.0, 2.0, 3.5], m).astype(np.float32)
      valid = rng.random(m) < 0.7
      state, keys = ops.insert(state, _items(ids), priorities, valid)
      np.testing.assert_array_equal(
        keys, ref.insert(ids.tolist(), priorities.tolist(), valid)
      )
      # Evicted, never issued and -1 keys among present ones with repeats,
      # in any order: the stale ones write nothing and hide no write.
      stale = rng.integers(-1, ref.num_inserts + 3, 3).tolist()
      stale = [k for k in stale if k not in ref.items]
      present = rng.choice(list(ref.items), 4).tolist() if ref.items else []
      keys = rng.permutation(np.array(stale + present, np.int32))
      priorities = rng.choice([0.0, 0.25, 1.0, 4.0], len(keys))
      priorities = priorities.astype(np.float32)
      state = ops.mutate_priorities(state, keys, priorities)
      ref.mutate_priorities(keys.tolist(), priorities.tolist())
      _assert_matches(dev, state, ref, ops.sample)

  def test_counters_and_size(self):
    dev = device_table.DeviceTable(3)
    ops = _ops(dev)
    state, _ = ops.insert(dev.init(_EXAMPLE), _items(range(3)))
    state, _ = ops.insert(state, _items([3]))
    state, _ = ops.sample(state, jax.random.key(0), 5)
    state, _ = ops.sample(state, jax.random.key(1), 2)
    assert int(dev.size(state)) == 3
    assert int(state.num_inserts) == 4 and int(state.num_samples) == 7

  def test_mutate_removed_keys_is_harmless(self):
    dev = device_table.DeviceTable(3, samplers.Prioritized(1.0))
    ops = _ops(dev)
    state, _ = ops.insert(dev.init(_EXAMPLE), _items(range(3)), 1.0)
    state, _ = ops.insert(state, _items([3, 4]), 1.0)
    # Keys 0 and 1 are gone (slots now hold 3 and 4); 99 was never issued
    # (slot 0 holds key 3); -1 is no key (slot 2 holds key 2).
    state = ops.mutate_priorities(
      state, np.array([0, 1, 99, -1]), np.array([100.0, 0.0, 7.0, 3.0])
    )
    np.testing.assert_array_equal(state.priorities, [1.0, 1.0, 1.0])
    np.testing.assert_allclose(_slot_probabilities(dev, state), 1 / 3)
    # Key 3 is present; the last of its repeated priorities wins: weights
    # [2, 1, 1] over slots [0, 1, 2] (keys 3, 4, 2).
    state = ops.mutate_priorities(state, np.array([3, 3]), np.array([5.0, 2.0]))
    np.testing.assert_array_equal(state.priorities, [2.0, 1.0, 1.0])
    _, s = ops.sample(state, jax.random.key(0), 200)
    np.testing.assert_allclose(
      s.probability, np.where(s.keys == 3, 0.5, 0.25), rtol=1e-6
    )

  def test_stale_key_after_a_present_one(self):
    dev = device_table.DeviceTable(3, samplers.Prioritized(1.0))
    ops = _ops(dev)
    state, _ = ops.insert(dev.init(_EXAMPLE), _items(range(3)), 1.0)
    state, _ = ops.insert(state, _items([3, 4]), 1.0)
    # Key 3 (present) and key 0 (evicted) share slot 0; -1 and key 2
    # share slot 2. The stale keys must be ignored, wherever they stand.
    state = ops.mutate_priorities(
      state, np.array([3, 0, 2, -1]), np.array([5.0, 9.0, 3.0, 7.0])
    )
    np.testing.assert_array_equal(state.priorities, [5.0, 1.0, 3.0])

  def test_mutate_minus_one_leaves_empty_slots_empty(self):
    # Slot -1 % 4 = 3 is empty and holds key -1: still no item there.
    dev = device_table.DeviceTable(4, samplers.Prioritized(1.0))
    ops = _ops(dev)
    state, _ = ops.insert(dev.init(_EXAMPLE), _items([0, 1]), 1.0)
    state = ops.mutate_priorities(state, np.array([-1]), np.array([9.0]))
    np.testing.assert_array_equal(state.priorities, [1.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(
      _slot_probabilities(dev, state), [0.5, 0.5, 0, 0]
    )

  def test_insert_batch_equals_loop_of_insert(self):
    priorities = np.random.default_rng(0).random(13).astype(np.float32)
    dev = device_table.DeviceTable(5, samplers.Prioritized(0.7))
    ops = _ops(dev)
    batched = looped = dev.init(_EXAMPLE)
    keys = []
    # The last two chunks wrap the ring (a chunk is at most max_size).
    for lo, hi in [(0, 3), (3, 4), (4, 9), (9, 13)]:
      batched, k = ops.insert(batched, _items(range(lo, hi)), priorities[lo:hi])
      keys.extend(np.asarray(k).tolist())
    for i in range(13):
      looped, k = ops.insert(looped, _items([i]), priorities[i : i + 1])
      assert np.asarray(k).tolist() == [i]
    assert keys == list(range(13))
    np.testing.assert_array_equal(batched.keys, [10, 11, 12, 8, 9])
    for name in ['keys', 'priorities', 'num_inserts', 'storage']:
      for a, b in zip(
        jax.tree.leaves(getattr(batched, name)),
        jax.tree.leaves(getattr(looped, name)),
      ):
        np.testing.assert_array_equal(a, b)
    # The sums inside the tree add in another order: float32 rounding.
    np.testing.assert_allclose(batched.tree.nodes, looped.tree.nodes, rtol=1e-6)
    _, a = ops.sample(batched, jax.random.key(3), 50)
    _, b = ops.sample(looped, jax.random.key(3), 50)
    np.testing.assert_array_equal(a.keys, b.keys)

  def test_all_masked_insert_is_a_no_op(self):
    dev = device_table.DeviceTable(3, samplers.Prioritized(1.0))
    ops = _ops(dev)
    state, _ = ops.insert(dev.init(_EXAMPLE), _items([0, 1]), 2.0)
    after, keys = ops.insert(state, _items([5, 6]), 9.0, np.zeros(2, bool))
    np.testing.assert_array_equal(keys, [-1, -1])
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(after)):
      np.testing.assert_array_equal(a, b)

  def test_empty_batch_is_a_no_op_when_prioritized(self):
    dev = device_table.DeviceTable(3, samplers.Prioritized(1.0))
    state, keys = dev.insert(dev.init(_EXAMPLE), _items([]))
    assert keys.shape == (0,) and int(state.num_inserts) == 0

  def test_nested_items_keep_structure_and_dtypes(self):
    item = {'obs': (np.ones(3), np.int8(2)), 'none': None, 'list': [1.5]}
    dev = device_table.DeviceTable(4)
    ops = _ops(dev)
    batch = jax.tree.map(lambda x: np.stack([x, x]), item)
    state, _ = ops.insert(dev.init(item), batch)
    _, s = ops.sample(state, jax.random.key(0), 8)
    assert s.data['none'] is None
    assert s.data['obs'][1].dtype == np.int8
    np.testing.assert_array_equal(s.data['obs'][1], np.full(8, 2))
    np.testing.assert_array_equal(s.data['list'][0], np.full(8, 1.5))


class TestSampling:
  def test_prioritized_frequencies_and_probabilities(self):
    # Weights p**0.5 = [1, 2, 3, 4, 0] over a total of 10.
    dev = device_table.DeviceTable(8, samplers.Prioritized(0.5))
    ops = _ops(dev)
    state, _ = ops.insert(
      dev.init(_EXAMPLE), _items(range(5)), jnp.array([1.0, 4.0, 9.0, 16, 0])
    )
    _, s = ops.sample(state, jax.random.key(0), 50_000)
    counts = np.bincount(np.asarray(s.keys), minlength=5)
    assert counts[4] == 0  # Zero priority: never drawn.
    # 16.27 is the 0.999 quantile of chi-square with 3 degrees of freedom.
    assert _chi_square(counts[:4], [0.1, 0.2, 0.3, 0.4]) < 16.27
    np.testing.assert_allclose(
      s.probability, np.array([0.1, 0.2, 0.3, 0.4, 0.0])[s.keys], rtol=1e-6
    )
    assert int(s.table_size) == 5
    np.testing.assert_array_equal(s.data.action, s.keys)
    np.testing.assert_array_equal(s.data.observation[:, 1], s.keys)

  def test_uniform_frequencies_ignore_priorities(self):
    dev = device_table.DeviceTable(10)
    ops = _ops(dev)
    priorities = jnp.array([0.0, 100.0, 1.0, 1.0, 5.0, 1.0, 1.0, 1.0])
    state, _ = ops.insert(dev.init(_EXAMPLE), _items(range(8)), priorities)
    _, s = ops.sample(state, jax.random.key(0), 50_000)
    counts = np.bincount(np.asarray(s.keys), minlength=8)
    # 24.32 is the 0.999 quantile of chi-square with 7 degrees of freedom.
    assert _chi_square(counts, np.full(8, 1 / 8)) < 24.32
    np.testing.assert_allclose(s.probability, 1 / 8)
    assert int(s.table_size) == 8

  def test_exponent_zero_keeps_zero_priorities_out(self):
    # Reverb's convention: 0**0 counts as 0, the rest weigh 1 each.
    dev = device_table.DeviceTable(4, samplers.Prioritized(0.0))
    ops = _ops(dev)
    state, _ = ops.insert(
      dev.init(_EXAMPLE), _items(range(4)), jnp.array([0.0, 5.0, 7.0, 0.1])
    )
    _, s = ops.sample(state, jax.random.key(0), 3000)
    assert set(np.asarray(s.keys).tolist()) == {1, 2, 3}
    np.testing.assert_allclose(s.probability, 1 / 3, rtol=1e-6)

  def test_all_zero_weights_sample_uniformly(self):
    dev = device_table.DeviceTable(8, samplers.Prioritized(1.0))
    ops = _ops(dev)
    state, _ = ops.insert(dev.init(_EXAMPLE), _items(range(4)), 0.0)
    _, s = ops.sample(state, jax.random.key(0), 4000)
    np.testing.assert_allclose(s.probability, 0.25)
    assert set(np.asarray(s.keys).tolist()) == {0, 1, 2, 3}

  def test_importance_weights_and_written_priorities_match_numpy(self):
    # Q(s) = s @ w, linear, so the double-Q TD error is easy in numpy.
    w = np.array([[1.0, -0.5], [0.25, 2.0]], np.float32)
    network = networks_base.Network(
      init=lambda key: {'w': jnp.asarray(w)},
      apply=lambda p, obs: types.QOutput(q_values=obs @ p['w']),
    )
    params = {'w': jnp.asarray(w)}
    target = {'w': jnp.asarray(w * 0.5)}
    dev = device_table.DeviceTable(16, samplers.Prioritized(0.6))
    n = 10
    rng = np.random.default_rng(3)
    data = types.Transition(
      observation=rng.normal(size=(n, 2)).astype(np.float32),
      action=rng.integers(0, 2, n).astype(np.int32),
      reward=rng.normal(size=n).astype(np.float32) * 0.3,
      discount=np.full(n, 0.9, np.float32),
      next_observation=rng.normal(size=(n, 2)).astype(np.float32),
    )
    priorities = rng.uniform(0.5, 3.0, n)
    state = dev.init(jax.tree.map(lambda x: x[0], data))
    state, _ = dev.insert(state, data, jnp.asarray(priorities))
    loss_fn = q_learning.PrioritizedDoubleQLearning(
      importance_sampling_exponent=0.4, max_abs_reward=None
    )

    @jax.jit
    def learn(state, key):
      state, s = dev.sample(state, key, 32)
      _, extra = loss_fn(
        network, params, target, types.Batch(s.data, s.probability), key
      )
      weights = q_parts.importance_weights(s.probability, 0.4)
      state = dev.mutate_priorities(state, s.keys, extra.priorities)
      return state, s, weights

    new_state, s, weights = learn(state, jax.random.key(0))
    keys = np.asarray(s.keys)
    p_ref = priorities**0.6 / np.sum(priorities**0.6)
    np.testing.assert_allclose(s.probability, p_ref[keys], rtol=1e-5)
    w_ref = (1.0 / p_ref[keys]) ** 0.4
    np.testing.assert_allclose(weights, w_ref / w_ref.max(), rtol=1e-5)
    # Double Q in numpy: a' from the online net, valued by the target net.
    obs, nxt = data.observation[keys], data.next_observation[keys]
    a_next = np.argmax(nxt @ w, axis=1)
    q_next = (nxt @ (w * 0.5))[np.arange(32), a_next]
    q_sa = (obs @ w)[np.arange(32), data.action[keys]]
    td = data.reward[keys] + 0.9 * q_next - q_sa
    written = priorities.copy()
    written[keys] = np.abs(td)  # Repeated keys: the same |td| each time.
    np.testing.assert_allclose(new_state.priorities[:n], written, rtol=1e-5)
    # And the sampling weights follow the written priorities.
    np.testing.assert_allclose(
      _slot_probabilities(dev, new_state)[:n],
      written**0.6 / np.sum(written**0.6),
      rtol=1e-5,
    )


def _limits(limiter, size, inserts, samples, n):
  """(can_insert(n), can_sample(n)): Reverb's limiter rule, transcribed."""
  error = inserts * limiter.spi - samples
  can_insert = (size + n <= limiter.min_size_to_sample) or (
    error + n * limiter.spi <= limiter.max_diff
  )
  can_sample = size >= limiter.min_size_to_sample and (
    error - n >= limiter.min_diff
  )
  return can_insert, can_sample


class TestRateLimiter:
  @pytest.mark.parametrize('jit', [True, False], ids=['jit', 'no_jit'])
  def test_samples_per_insert_worked_sequence(self, jit):
    # spi 2, min size 3, buffer 4: error = 2 * inserts - samples must stay in
    # [2 * 3 - 4, 2 * 3 + 4] = [2, 10] once 3 items are in.
    dev = device_table.DeviceTable(
      10, min_size_to_sample=3, samples_per_insert=2.0, error_buffer=4.0
    )
    ops = _ops(dev, jit)
    key = jax.random.key(0)
    state = dev.init(_EXAMPLE)
    assert not ops.can_sample(state, 1)  # Size 0 < 3.
    for i in range(3):
      assert ops.can_insert(state, 1)  # Free until the size reaches 3.
      state, _ = ops.insert(state, _items([i]))
    assert ops.can_insert(state, 2)  # Error would be 2 * 5 - 0 = 10 <= 10.
    assert not ops.can_insert(state, 3)  # 2 * 6 = 12 > 10.
    state, _ = ops.insert(state, _items([3, 4]))
    assert not ops.can_insert(state, 1)  # 12 > 10.
    assert ops.can_sample(state, 8)  # 10 - 8 = 2 >= 2.
    assert not ops.can_sample(state, 9)  # 10 - 9 = 1 < 2.
    state, _ = ops.sample(state, key, 3)  # Error 7.
    assert ops.can_insert(state, 1)  # 12 - 3 = 9 <= 10.
    assert not ops.can_insert(state, 2)  # 14 - 3 = 11 > 10.
    state, _ = ops.sample(state, key, 5)  # Error 2.
    assert not ops.can_sample(state, 1)  # 2 - 1 = 1 < 2.
    assert int(state.num_samples) == 8 and int(state.num_inserts) == 5
    assert ops.can_insert(state, 4)  # 2 * 9 - 8 = 10.
    assert not ops.can_insert(state, 5)  # 2 * 10 - 8 = 12.
    state, _ = ops.insert(state, _items(range(5, 9)))
    # 18 - 8 - 8 = 2 >= 2; 18 - 8 - 9 = 1 < 2.
    assert ops.can_sample(state, 8) and not ops.can_sample(state, 9)

  def test_error_range_pair_and_free_inserts_below_min_size(self):
    # error = inserts - samples must stay in [-1, 1] once 3 items are in, yet
    # the first 3 inserts pass although they take the error to 3.
    dev = device_table.DeviceTable(
      10, min_size_to_sample=3, samples_per_insert=1.0, error_buffer=(-1, 1)
    )
    ops = _ops(dev)
    state = dev.init(_EXAMPLE)
    assert ops.can_insert(state, 3)
    assert not ops.can_insert(state, 4)  # 4 > 3 items, and 4 - 0 > 1.
    state, _ = ops.insert(state, _items(range(3)))
    assert not ops.can_insert(state, 1)  # 4 - 0 > 1.
    # 3 - 4 = -1 >= -1; 3 - 5 = -2 < -1.
    assert ops.can_sample(state, 4) and not ops.can_sample(state, 5)
    state, _ = ops.sample(state, jax.random.key(0), 4)
    # 5 - 4 = 1 <= 1; 6 - 4 = 2 > 1.
    assert ops.can_insert(state, 2) and not ops.can_insert(state, 3)

  def test_min_size(self):
    dev = device_table.DeviceTable(4, min_size_to_sample=2)
    ops = _ops(dev)
    state = dev.init(_EXAMPLE)
    assert not ops.can_sample(state, 1)
    state, _ = ops.insert(state, _items([0]))
    assert not ops.can_sample(state, 1)  # Size 1 < 2.
    state, _ = ops.insert(state, _items([1]))
    assert ops.can_sample(state, 1_000_000)
    state, _ = ops.sample(state, jax.random.key(0), 500)
    for lo in range(2, 98, 4):  # Inserts never block.
      assert ops.can_insert(state, 4)
      state, _ = ops.insert(state, _items(range(lo, lo + 4)))
    state, _ = ops.insert(state, _items([98, 99]))
    assert int(state.num_inserts) == 100 and int(dev.size(state)) == 4
    assert ops.can_sample(state, 1_000_000) and ops.can_insert(state, 4)

  def test_default_error_buffer(self):
    # spi 2, min 100: buffer max(0.1 * 200, 2 * 2) = 20, so max_diff 220 lets
    # 110 inserts in before any sample.
    dev = device_table.DeviceTable(
      1000, min_size_to_sample=100, samples_per_insert=2.0
    )
    ops = _ops(dev)
    state = dev.init(_EXAMPLE)
    assert ops.can_insert(state, 110) and not ops.can_insert(state, 111)
    # spi 0.5, min 4: buffer max(0.2, 2 * 1) = 2, range [0, 4]: 8 inserts;
    # after them error is 4, so 4 samples fit and a 5th does not.
    dev = device_table.DeviceTable(
      10, min_size_to_sample=4, samples_per_insert=0.5
    )
    ops = _ops(dev)
    state = dev.init(_EXAMPLE)
    assert ops.can_insert(state, 8) and not ops.can_insert(state, 9)
    state, _ = ops.insert(state, _items(range(8)))
    assert ops.can_sample(state, 4) and not ops.can_sample(state, 5)

  @pytest.mark.parametrize(
    'kwargs',
    [
      dict(min_size_to_sample=4, samples_per_insert=2.0),
      dict(min_size_to_sample=3, samples_per_insert=0.5, error_buffer=(-1, 3)),
      dict(min_size_to_sample=2),
    ],
    ids=['spi_2', 'spi_half_pair', 'min_size'],
  )
  def test_random_walk_matches_the_transcribed_rule(self, kwargs):
    # max_size 6 < the walk's inserts: the size saturates, the counters not.
    dev = device_table.DeviceTable(6, **kwargs)
    ops = _ops(dev)
    state = dev.init(_EXAMPLE)
    rng = np.random.default_rng(1)
    inserts = samples = 0
    for step in range(60):
      size = min(inserts, 6)
      for n in (1, 3, 8):
        want = _limits(dev.limiter, size, inserts, samples, n)
        got = (bool(ops.can_insert(state, n)), bool(ops.can_sample(state, n)))
        assert got == want, (step, n, inserts, samples)
      n = int(rng.choice([1, 3]))
      can_insert, can_sample = _limits(dev.limiter, size, inserts, samples, n)
      if can_sample and (rng.random() < 0.5 or not can_insert):
        state, _ = ops.sample(state, jax.random.key(step), n)
        samples += n
      elif can_insert:
        state, _ = ops.insert(state, _items(range(n)))
        inserts += n
    assert int(state.num_inserts) == inserts > 6
    assert int(state.num_samples) == samples > 0

  def test_fractional_ratio_at_the_boundary(self):
    # spi 0.3, min 5: buffer max(0.1 * 1.5, 2) = 2, range [-0.5, 3.5]. After
    # 14 inserts and 1 sample, one more insert makes the error
    # 15 * 0.3 - 1 = 3.5 <= 3.5: allowed (so in float64, and eagerly).
    dev = device_table.DeviceTable(
      20, min_size_to_sample=5, samples_per_insert=0.3
    )
    ops = _ops(dev)
    state = dev.init(_EXAMPLE)
    for _ in range(2):
      state, _ = ops.insert(state, _items(range(7)))
    state, _ = ops.sample(state, jax.random.key(0), 1)
    assert bool(ops.can_insert(state, 1))


def test_state_dict_round_trip_and_config_check():
  kwargs = dict(min_size_to_sample=2, samples_per_insert=3.0, error_buffer=30)
  dev = device_table.DeviceTable(7, samplers.Prioritized(0.6), **kwargs)
  ops = _ops(dev)
  state, _ = ops.insert(dev.init(_EXAMPLE), _items(range(7)), np.arange(7.0))
  state, _ = ops.insert(state, _items(range(7, 10)), 0.5)
  state, _ = ops.sample(state, jax.random.key(0), 4)
  state = ops.mutate_priorities(state, np.array([5, 9]), np.array([0.0, 8.0]))
  saved = pickle.loads(pickle.dumps(dev.state_dict(state)))
  assert all(type(x) is np.ndarray for x in saved['leaves'])
  restored = dev.load_state_dict(dev.init(_EXAMPLE), saved)
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(restored)):
    np.testing.assert_array_equal(a, b)
  # The restored table continues as the original.
  for i in range(3):
    state, a = ops.sample(state, jax.random.key(i), 6)
    restored, b = ops.sample(restored, jax.random.key(i), 6)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
      np.testing.assert_array_equal(x, y)
  assert bool(ops.can_insert(state, 3)) == bool(ops.can_insert(restored, 3))
  _, k = ops.insert(restored, _items([10]))
  assert np.asarray(k).tolist() == [10]
  # A table built otherwise refuses the state, naming what differs.
  prioritized = samplers.Prioritized(0.6)
  for name, other in [
    ('max_size', device_table.DeviceTable(8, prioritized, **kwargs)),
    (
      'sampler',
      device_table.DeviceTable(7, samplers.Prioritized(0.7), **kwargs),
    ),
    ('rate_limiter', device_table.DeviceTable(7, prioritized)),
  ]:
    with pytest.raises(ValueError, match=name):
      other.load_state_dict(other.init(_EXAMPLE), saved)
  with pytest.raises(ValueError, match='item structure'):
    dev.load_state_dict(dev.init({'a': np.zeros(2, np.float32)}), saved)


@pytest.mark.parametrize(
  'kwargs, name',
  [
    (dict(max_size=0), 'max_size'),
    (dict(max_size=2.5), 'max_size'),
    (dict(max_size=2**31), 'max_size'),
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
def test_bad_arguments_name_the_culprit(kwargs, name):
  kwargs = {'max_size': 10, **kwargs}
  with pytest.raises(ValueError, match=name):
    device_table.DeviceTable(**kwargs)


def test_bad_exponent_and_oversized_insert_name_the_culprit():
  with pytest.raises(ValueError, match='priority_exponent'):
    samplers.Prioritized(-1.0)
  dev = device_table.DeviceTable(4)
  with pytest.raises(ValueError, match='exceeds max_size'):
    dev.insert(dev.init(_EXAMPLE), _items(range(5)))
