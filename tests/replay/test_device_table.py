"""Tests for trax_rl.replay.device_table against the numpy replay Table."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import types
from trax_rl.losses import q_learning, q_parts
from trax_rl.networks import base as networks_base
from trax_rl.replay import device_table, samplers, table


class Item(NamedTuple):
  observation: np.ndarray  # [2] float32, both entries the item's id
  action: np.ndarray  # [] int32, the item's id


def _items(ids):
  ids = np.asarray(ids)
  return Item(np.repeat(ids[:, None], 2, 1).astype(np.float32), ids)


_EXAMPLE = Item(np.zeros(2, np.float32), np.int32(0))


def _chi_square(counts, probs):
  expected = counts.sum() * np.asarray(probs)
  return np.sum((counts - expected) ** 2 / expected)


_JITTED = {}


def _both(max_size, sampler=None, **kwargs):
  host = table.Table(max_size, sampler, **kwargs)
  dev = device_table.DeviceTable(max_size, sampler, **kwargs)
  return host, dev, dev.init(_EXAMPLE)


def _insert_both(host, dev, state, ids, priorities, valid=None):
  valid = np.ones(len(ids), bool) if valid is None else np.asarray(valid)
  insert = _JITTED.setdefault(dev, jax.jit(dev.insert))
  state, keys = insert(state, _items(ids), jnp.asarray(priorities), valid)
  priorities = np.broadcast_to(np.asarray(priorities, np.float64), len(ids))
  host_keys = host.insert_batch(
    _items(np.asarray(ids)[valid]), priorities[valid]
  )
  np.testing.assert_array_equal(np.asarray(keys)[valid], host_keys)
  assert np.all(np.asarray(keys)[~valid] == -1)
  return state


def _device_probabilities(dev, state):
  """Per-slot sampling probability of a prioritized DeviceTable."""
  weights = np.asarray(state.tree.nodes)[-(len(state.tree.nodes) + 1) // 2 :]
  return weights[: dev.max_size] / weights.sum()


class TestAgainstTable:
  def test_uniform_same_contents_through_fifo_wraps(self):
    host, dev, state = _both(7)
    rng = np.random.default_rng(0)
    next_id = 0
    for m in (3, 5, 4, 6, 2):
      valid = rng.random(m) < 0.7
      ids = np.arange(next_id, next_id + m)
      next_id += m
      state = _insert_both(host, dev, state, ids, 1.0, valid)
      saved = host.state_dict()
      size = host.size
      assert int(dev.size(state)) == size
      assert int(state.num_inserts) == host.num_inserts
      # The host stores its items at slots [0, size) in the same ring order.
      np.testing.assert_array_equal(
        np.asarray(state.keys)[:size], saved['keys']
      )
      for got, want in zip(jax.tree.leaves(state.storage), saved['leaves']):
        np.testing.assert_array_equal(np.asarray(got)[:size], want)
    # Draws return the item stored under each key, with probability 1/size.
    state, s = jax.jit(dev.sample, static_argnums=2)(
      state, jax.random.key(0), 64
    )
    saved = host.state_dict()
    id_of_key = dict(zip(saved['keys'].tolist(), saved['leaves'][1].tolist()))
    np.testing.assert_array_equal(
      s.data.action, [id_of_key[k] for k in np.asarray(s.keys).tolist()]
    )
    np.testing.assert_allclose(s.probability, 1.0 / host.size)
    assert int(state.num_samples) == 64

  def test_prioritized_same_probabilities(self):
    sampler = samplers.Prioritized(0.6)
    host, dev, state = _both(6, sampler)
    state = _insert_both(host, dev, state, range(4), [1.0, 2.0, 0.0, 3.0])
    state = _insert_both(host, dev, state, range(4, 8), [5.0, 0.5, 1.5, 2.5])
    # Keys 0 and 1 were evicted: their writes are ignored. Key 5 repeats:
    # its last priority (7.0) wins.
    keys = np.array([0, 5, 3, 5, 1, 6])
    priorities = np.array([9.0, 4.0, 0.25, 7.0, 8.0, 0.0])
    state = jax.jit(dev.mutate_priorities)(state, keys, priorities)
    host.mutate_priorities(keys, priorities)
    saved = host.state_dict()
    want = np.zeros(6)
    want[np.asarray(saved['keys']) % 6] = saved['weights'] / np.sum(
      saved['weights']
    )
    np.testing.assert_allclose(
      _device_probabilities(dev, state), want, rtol=1e-6, atol=1e-7
    )
    np.testing.assert_allclose(
      np.asarray(state.priorities)[np.asarray(saved['keys']) % 6],
      saved['priorities'],
    )
    # Sampled probabilities equal the host's for the same keys.
    _, s = jax.jit(dev.sample, static_argnums=2)(state, jax.random.key(1), 256)
    host_s = host.sample(4096)
    host_p = dict(zip(host_s.keys.tolist(), host_s.probability.tolist()))
    for k, p in zip(np.asarray(s.keys).tolist(), np.asarray(s.probability)):
      np.testing.assert_allclose(p, host_p[k], rtol=1e-6)
    assert 6 not in np.asarray(s.keys)  # Priority 0: never drawn.

  def test_rate_limiter_matches_table(self):
    kwargs = dict(min_size_to_sample=4, samples_per_insert=2.0)
    host, dev, state = _both(50, **kwargs)
    can_sample = jax.jit(dev.can_sample, static_argnums=1)
    can_insert = jax.jit(dev.can_insert, static_argnums=1)
    sample = jax.jit(dev.sample, static_argnums=2)
    key = jax.random.key(0)
    for step in range(40):
      for n in (1, 3, 8):
        assert bool(can_sample(state, n)) == host.can_sample(n), (step, n)
        assert bool(can_insert(state, n)) == host.can_insert(n), (step, n)
      if host.can_sample(3) and step % 3:
        host.sample(3)
        state, _ = sample(state, key, 3)
      elif host.can_insert(1):
        state = _insert_both(host, dev, state, [step], 1.0)


class TestPrioritizedSampling:
  def test_frequencies_follow_priorities(self):
    dev = device_table.DeviceTable(8, samplers.Prioritized(0.5))
    state, _ = dev.insert(
      dev.init(_EXAMPLE), _items(range(5)), jnp.array([1.0, 4.0, 9.0, 16, 0])
    )
    _, s = jax.jit(dev.sample, static_argnums=2)(
      state, jax.random.key(0), 50_000
    )
    counts = np.bincount(np.asarray(s.keys), minlength=5)
    assert counts[4] == 0
    # 16.27 is the 0.999 quantile of chi-square with 3 degrees of freedom.
    assert _chi_square(counts[:4], [0.1, 0.2, 0.3, 0.4]) < 16.27
    np.testing.assert_allclose(
      s.probability, np.array([0.1, 0.2, 0.3, 0.4, 0.0])[s.keys], rtol=1e-6
    )

  def test_all_zero_weights_sample_uniformly(self):
    dev = device_table.DeviceTable(8, samplers.Prioritized(1.0))
    state, _ = dev.insert(dev.init(_EXAMPLE), _items(range(4)), 0.0)
    _, s = jax.jit(dev.sample, static_argnums=2)(state, jax.random.key(0), 4000)
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
    written[keys] = np.abs(td)
    np.testing.assert_allclose(new_state.priorities[:n], written, rtol=1e-5)
    # And the sampling weights follow the written priorities, as the host's.
    host = table.Table(16, samplers.Prioritized(0.6))
    host.insert_batch(_items(range(n)), priorities)
    host.mutate_priorities(keys, np.abs(td))
    host_w = host.state_dict()['weights']
    np.testing.assert_allclose(
      _device_probabilities(dev, new_state)[:n],
      host_w / host_w.sum(),
      rtol=1e-5,
    )


def test_state_dict_round_trip_and_config_check():
  dev = device_table.DeviceTable(8, samplers.Prioritized(0.5))
  state, _ = dev.insert(dev.init(_EXAMPLE), _items(range(5)), 2.0)
  saved = dev.state_dict(state)
  restored = dev.load_state_dict(dev.init(_EXAMPLE), saved)
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(restored)):
    np.testing.assert_array_equal(a, b)
  other = device_table.DeviceTable(8, samplers.Prioritized(0.7))
  with pytest.raises(ValueError, match='sampler'):
    other.load_state_dict(other.init(_EXAMPLE), saved)


def test_bad_arguments_name_the_culprit():
  with pytest.raises(ValueError, match='max_size'):
    device_table.DeviceTable(0)
  with pytest.raises(ValueError, match='min_size_to_sample'):
    device_table.DeviceTable(4, min_size_to_sample=5)
  dev = device_table.DeviceTable(4)
  with pytest.raises(ValueError, match='exceeds max_size'):
    dev.insert(dev.init(_EXAMPLE), _items(range(5)))
