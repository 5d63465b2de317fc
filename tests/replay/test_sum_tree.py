"""Tests for trax_rl.replay.sum_tree."""

import numpy as np
import pytest

from trax_rl.replay import sum_tree


def _brute_force_find(weights, targets):
  # Leaf i covers [c_{i-1}, c_i): the first leaf whose cumulative sum exceeds
  # the target.
  return np.searchsorted(np.cumsum(weights), targets, side='right')


class TestSumTree:
  def test_set_get_total(self):
    tree = sum_tree.SumTree(5)  # Not a power of two: 3 padding leaves.
    tree.set([0, 2, 4], [1.0, 2.5, 4.0])
    assert tree.total() == 7.5
    np.testing.assert_array_equal(tree.get([0, 1, 2, 3, 4]), [1, 0, 2.5, 0, 4])
    tree.set([2], [0.5])
    assert tree.total() == 5.5

  def test_repeated_index_keeps_last_value(self):
    tree = sum_tree.SumTree(4)
    tree.set([1, 3, 1, 1], [5.0, 1.0, 7.0, 2.0])
    np.testing.assert_array_equal(tree.get([1, 3]), [2.0, 1.0])
    assert tree.total() == 3.0

  def test_capacity_one(self):
    tree = sum_tree.SumTree(1)
    tree.set([0], [3.0])
    assert tree.total() == 3.0
    np.testing.assert_array_equal(tree.find_prefix_sum([0.0, 2.9, 5.0]), 0)

  def test_find_prefix_sum_matches_cumulative_sum(self):
    rng = np.random.default_rng(0)
    # Integer weights keep every partial sum exact, so the boundaries (the
    # cumulative sums themselves) can be compared exactly too.
    weights = rng.integers(0, 5, size=37).astype(np.float64)
    tree = sum_tree.SumTree(37)
    tree.set(np.arange(37), weights)
    assert tree.total() == weights.sum()
    boundaries = np.cumsum(weights)
    boundaries = boundaries[boundaries < weights.sum()]  # Past the end: below.
    targets = np.concatenate(
      [[0.0], boundaries, rng.uniform(0, weights.sum(), 500)]
    )
    np.testing.assert_array_equal(
      tree.find_prefix_sum(targets), _brute_force_find(weights, targets)
    )

  def test_zero_weight_leaves_are_never_found(self):
    tree = sum_tree.SumTree(6)
    tree.set(np.arange(6), [0.0, 2.0, 0.0, 0.0, 1.0, 0.0])
    # Out-of-range targets land on the first / last positive leaf.
    np.testing.assert_array_equal(
      tree.find_prefix_sum([-1.0, 0.0, 1.99, 2.0, 2.5, 3.0, 100.0]),
      [1, 1, 1, 4, 4, 4, 4],
    )

  def test_set_all_equals_incremental_sets(self):
    rng = np.random.default_rng(1)
    weights = rng.random(100) ** 3
    incremental = sum_tree.SumTree(100)
    for start in range(0, 100, 7):
      incremental.set(
        np.arange(start, min(start + 7, 100)), weights[start : start + 7]
      )
    rebuilt = sum_tree.SumTree(100)
    rebuilt.set_all(weights)
    targets = rng.uniform(0, weights.sum(), 1000)
    assert incremental.total() == rebuilt.total()  # Bit-identical sums.
    np.testing.assert_array_equal(
      incremental.find_prefix_sum(targets), rebuilt.find_prefix_sum(targets)
    )

  def test_set_range_equals_set(self):
    rng = np.random.default_rng(3)
    by_range, by_index = sum_tree.SumTree(50), sum_tree.SumTree(50)
    for _ in range(20):
      start = int(rng.integers(0, 50))
      values = rng.random(int(rng.integers(0, 51 - start)))
      by_range.set_range(start, values)
      by_index.set(np.arange(start, start + len(values)), values)
    assert by_range.total() == by_index.total()
    np.testing.assert_array_equal(
      by_range.get(np.arange(50)), by_index.get(np.arange(50))
    )
    targets = rng.uniform(0, by_index.total(), 500)
    np.testing.assert_array_equal(
      by_range.find_prefix_sum(targets), by_index.find_prefix_sum(targets)
    )
    with pytest.raises(ValueError, match='outside'):
      by_range.set_range(49, [1.0, 2.0])

  def test_sample_frequencies(self):
    tree = sum_tree.SumTree(4)
    tree.set(np.arange(4), [1.0, 0.0, 3.0, 4.0])
    counts = np.bincount(
      tree.sample(np.random.default_rng(2), 80_000), minlength=4
    )
    # Expected 10k, 0, 30k, 40k; the binomial std is below 140 per bin.
    np.testing.assert_allclose(counts, [10_000, 0, 30_000, 40_000], atol=600)

  def test_sample_with_zero_total_raises(self):
    with pytest.raises(ValueError, match='total is zero'):
      sum_tree.SumTree(3).sample(np.random.default_rng(0), 2)

  @pytest.mark.parametrize('value', [-1.0, np.nan, np.inf])
  def test_rejects_invalid_values(self, value):
    tree = sum_tree.SumTree(3)
    with pytest.raises(ValueError, match='finite and >= 0'):
      tree.set([0], [value])
    assert tree.total() == 0.0

  def test_rejects_out_of_range_indices(self):
    tree = sum_tree.SumTree(3)
    with pytest.raises(ValueError, match=r'\[0, 3\)'):
      tree.set([3], [1.0])
    with pytest.raises(ValueError, match=r'\[0, 3\)'):
      tree.get([-1])

  def test_rejects_bad_capacity(self):
    with pytest.raises(ValueError, match='capacity'):
      sum_tree.SumTree(0)
