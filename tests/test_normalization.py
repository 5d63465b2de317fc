"""Tests for trax_rl.normalization."""

import chex
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest

from trax_rl import normalization


class UpdateTest(chex.TestCase):
  def test_init(self):
    stats = normalization.init_statistics((3, 2))
    np.testing.assert_array_equal(stats.mean, np.zeros((3, 2)))
    np.testing.assert_array_equal(stats.var, np.ones((3, 2)))
    self.assertEqual(int(stats.count), 0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_hand_computed_merge(self):
    update = self.variant(normalization.update)
    stats = normalization.init_statistics(())
    # [1, 3]: mean 2, population variance 1.
    stats = update(stats, jnp.array([1.0, 3.0]))
    np.testing.assert_allclose(stats.mean, 2.0)
    np.testing.assert_allclose(stats.var, 1.0)
    # Merge [5]: delta 3, mean 2 + 3 / 3 = 3, M2 = 2 + 0 + 9 * 2 / 3 = 8.
    stats = update(stats, jnp.array([5.0]))
    np.testing.assert_allclose(stats.mean, 3.0)
    np.testing.assert_allclose(stats.var, 8.0 / 3.0, rtol=1e-6)
    self.assertEqual(int(stats.count), 3)

  @chex.variants(with_jit=True, without_jit=True)
  def test_chunks_equal_whole(self):
    rng = np.random.default_rng(0)
    data = (rng.normal(size=(30, 3, 2)) * [3.0, 0.5] + 10.0).astype(np.float32)
    update = self.variant(normalization.update)
    stats = normalization.init_statistics((3, 2))
    for chunk in np.split(data, [7, 17]):  # Sizes 7, 10 and 13.
      stats = update(stats, chunk)
    np.testing.assert_allclose(stats.mean, data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats.var, data.var(0), rtol=1e-4)
    self.assertEqual(int(stats.count), 30)
    whole = update(normalization.init_statistics((3, 2)), data)
    np.testing.assert_allclose(whole.mean, stats.mean, rtol=1e-5)
    np.testing.assert_allclose(whole.var, stats.var, rtol=1e-4)

  @chex.variants(with_jit=True, without_jit=True)
  def test_sample_limit(self):
    data = np.arange(12, dtype=np.float32).reshape(12, 1)
    update = self.variant(normalization.update)
    stats = normalization.init_statistics((1,))
    for chunk in np.split(data, 3):  # Chunks of 4 against a limit of 10.
      stats = update(stats, chunk, 10)
    # Only 0..9 count: mean 4.5, population variance (100 - 1) / 12 = 8.25.
    self.assertEqual(int(stats.count), 10)
    np.testing.assert_allclose(stats.mean, [4.5])
    np.testing.assert_allclose(stats.var, [8.25], rtol=1e-6)
    # Past the limit nothing changes.
    after = update(stats, np.full((4, 1), 100.0, np.float32), 10)
    chex.assert_trees_all_equal(after, stats)

  def test_fractional_sample_limit_matches_trax(self):
    # Trax updated one observation at a time while count < limit: a limit of
    # 2.5 admits 3 observations.
    stats = normalization.update(
      normalization.init_statistics(()), jnp.array([1.0, 2.0, 3.0, 4.0]), 2.5
    )
    self.assertEqual(int(stats.count), 3)
    np.testing.assert_allclose(stats.mean, 2.0)

  def test_empty_batch_changes_nothing(self):
    stats = normalization.init_statistics((2,))
    after = normalization.update(stats, jnp.zeros((0, 2)))
    chex.assert_trees_all_equal(after, stats)

  def test_wrong_shape(self):
    stats = normalization.init_statistics((2,))
    with self.assertRaisesRegex(ValueError, r'got shape \(4, 3\)'):
      normalization.update(stats, jnp.zeros((4, 3)))


class NormalizeTest(chex.TestCase):
  STATS = normalization.RunningStatistics(
    mean=jnp.array([1.0, 2.0]), var=jnp.array([4.0, 0.0]), count=jnp.array(5)
  )

  @chex.variants(with_jit=True, without_jit=True)
  def test_normalize(self):
    x = jnp.array([[3.0, 2.0], [-1.0, 2.5]])
    out = self.variant(normalization.normalize)(self.STATS, x, 1e-5)
    # (x - mean) / (std + 1e-5); the constant feature divides by 1e-5.
    expected = [[2.0 / 2.00001, 0.0], [-2.0 / 2.00001, 0.5 / 1e-5]]
    np.testing.assert_allclose(out, expected, rtol=1e-5)

  @chex.variants(with_jit=True, without_jit=True)
  def test_clip(self):
    x = jnp.array([[3.0, 2.0], [-1.0, 2.5]])
    normalize = self.variant(normalization.normalize)
    out = normalize(self.STATS, x, clip=5.0)
    np.testing.assert_allclose(
      out, [[1.0, 0.0], [-1.0, 5.0]], rtol=1e-5, atol=1e-6
    )

  def test_initial_statistics_are_nearly_identity(self):
    x = jnp.array([[-3.0, 0.5, 7.0]])
    out = normalization.normalize(normalization.init_statistics((3,)), x)
    np.testing.assert_allclose(out, x / (1.0 + 1e-5), rtol=1e-6)


if __name__ == '__main__':
  absltest.main()
