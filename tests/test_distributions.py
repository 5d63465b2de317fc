"""Tests for trax_rl.distributions against closed forms (scipy)."""

import chex
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from scipy import special, stats

from trax_rl import distributions

LOGITS = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], np.float32)


def _softplus(x):
  return np.log1p(np.exp(x))


class CategoricalTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_log_prob(self):
    dist = distributions.Categorical(n_categories=3)
    out = self.variant(dist.log_prob)(LOGITS, jnp.array([2, 0]))
    expected = [special.log_softmax(LOGITS[0])[2], np.log(1.0 / 3.0)]
    np.testing.assert_allclose(out, expected, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_entropy_is_full_distribution(self):
    dist = distributions.Categorical(n_categories=3)
    out = self.variant(dist.entropy)(LOGITS)
    expected = [stats.entropy(special.softmax(LOGITS[0])), np.log(3.0)]
    np.testing.assert_allclose(out, expected, rtol=1e-6)

  def test_entropy_with_masked_category(self):
    dist = distributions.Categorical(n_categories=3)
    logits = jnp.array([0.0, 0.0, -jnp.inf])
    np.testing.assert_allclose(dist.entropy(logits), np.log(2.0), rtol=1e-6)
    grad = jax.grad(dist.entropy)(logits)
    self.assertTrue(np.all(np.isfinite(grad)))

  def test_shaped_sample_sums_over_elements(self):
    # Two elements with 3 categories each: inputs [..., 6].
    dist = distributions.Categorical(n_categories=3, shape=(2,))
    self.assertEqual(dist.n_inputs, 6)
    inputs = LOGITS.reshape(1, 6)
    log_prob = dist.log_prob(inputs, jnp.array([[1, 2]]))
    expected = special.log_softmax(LOGITS[0])[1] + np.log(1.0 / 3.0)
    np.testing.assert_allclose(log_prob, [expected], rtol=1e-6)
    entropy = dist.entropy(inputs)
    expected = stats.entropy(special.softmax(LOGITS[0])) + np.log(3.0)
    np.testing.assert_allclose(entropy, [expected], rtol=1e-6)
    np.testing.assert_array_equal(dist.mode(inputs), [[2, 0]])

  @chex.variants(with_jit=True, without_jit=True)
  def test_temperature_zero_is_mode(self):
    dist = distributions.Categorical(n_categories=3)
    # Nearly tied logits: a sample at temperature 1 would often differ.
    logits = jnp.array([[0.0, 0.1, 0.05]] * 64)
    out = self.variant(dist.sample)(logits, jax.random.key(0), 0.0)
    np.testing.assert_array_equal(out, np.ones(64))
    np.testing.assert_array_equal(dist.mode(logits), np.ones(64))

  def test_sampling_frequencies(self):
    dist = distributions.Categorical(n_categories=3)
    probs = np.array([0.2, 0.3, 0.5])
    logits = jnp.broadcast_to(jnp.log(probs), (20000, 3))
    sample = jax.jit(dist.sample)(logits, jax.random.key(1), 1.0)
    freqs = np.bincount(np.asarray(sample), minlength=3) / 20000
    np.testing.assert_allclose(freqs, probs, atol=0.015)
    # Temperature 2 samples from softmax(logits / 2), i.e. ~ sqrt(probs).
    sample = jax.jit(dist.sample)(logits, jax.random.key(2), 2.0)
    freqs = np.bincount(np.asarray(sample), minlength=3) / 20000
    hot = np.sqrt(probs) / np.sum(np.sqrt(probs))
    np.testing.assert_allclose(freqs, hot, atol=0.015)

  def test_batched_shapes(self):
    dist = distributions.Categorical(n_categories=4)
    inputs = jnp.zeros((5, 7, 4))
    sample = dist.sample(inputs, jax.random.key(0))
    self.assertEqual(sample.shape, (5, 7))
    self.assertEqual(dist.mode(inputs).shape, (5, 7))
    self.assertEqual(dist.log_prob(inputs, sample).shape, (5, 7))
    self.assertEqual(dist.entropy(inputs).shape, (5, 7))

  def test_wrong_n_inputs(self):
    dist = distributions.Categorical(n_categories=4)
    with self.assertRaisesRegex(ValueError, r'expects inputs \[..., 4\]'):
      dist.entropy(jnp.zeros((2, 3)))


class MultiCategoricalTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_log_prob_and_entropy(self):
    # Components with 2 and 3 categories.
    dist = distributions.MultiCategorical(nvec=(2, 3))
    self.assertEqual(dist.n_inputs, 5)
    inputs = jnp.array([[0.5, -0.5, 1.0, 2.0, 3.0]])
    out = self.variant(dist.log_prob)(inputs, jnp.array([[1, 2]]))
    expected = (
      special.log_softmax([0.5, -0.5])[1] + special.log_softmax(LOGITS[0])[2]
    )
    np.testing.assert_allclose(out, [expected], rtol=1e-6)
    out = self.variant(dist.entropy)(inputs)
    expected = stats.entropy(special.softmax([0.5, -0.5])) + stats.entropy(
      special.softmax(LOGITS[0])
    )
    np.testing.assert_allclose(out, [expected], rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_temperature_zero_is_mode(self):
    dist = distributions.MultiCategorical(nvec=(2, 3))
    inputs = jnp.array([[0.5, -0.5, 1.0, 2.0, 1.5]] * 8)
    out = self.variant(dist.sample)(inputs, jax.random.key(0), 0.0)
    np.testing.assert_array_equal(out, [[0, 1]] * 8)
    np.testing.assert_array_equal(dist.mode(inputs), [[0, 1]] * 8)

  def test_sampling_frequencies(self):
    dist = distributions.MultiCategorical(nvec=(2, 3))
    probs_0, probs_1 = np.array([0.25, 0.75]), np.array([0.2, 0.3, 0.5])
    inputs = jnp.broadcast_to(
      jnp.log(np.concatenate([probs_0, probs_1])), (20000, 5)
    )
    sample = np.asarray(dist.sample(inputs, jax.random.key(3)))
    self.assertEqual(sample.shape, (20000, 2))
    np.testing.assert_allclose(
      np.bincount(sample[:, 0], minlength=2) / 20000, probs_0, atol=0.015
    )
    np.testing.assert_allclose(
      np.bincount(sample[:, 1], minlength=3) / 20000, probs_1, atol=0.015
    )


class GaussianTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_fixed_std(self):
    dist = distributions.Gaussian(shape=(2,), std=0.5)
    self.assertEqual(dist.n_inputs, 2)
    mean = np.array([[0.0, 1.0], [2.0, -1.0]], np.float32)
    point = np.array([[0.3, 0.0], [2.0, 1.0]], np.float32)
    out = self.variant(dist.log_prob)(mean, point)
    expected = stats.norm.logpdf(point, mean, 0.5).sum(-1)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    # Sum over 2 dims of 0.5 * log(2 pi e 0.25).
    out = self.variant(dist.entropy)(mean)
    expected = 2 * stats.norm.entropy(scale=0.5)
    np.testing.assert_allclose(out, [expected, expected], rtol=1e-6)
    self.assertAlmostEqual(expected, np.log(2 * np.pi * np.e * 0.25), 6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_learned_separate_std(self):
    dist = distributions.Gaussian(shape=(2,), std=1.0, learn_std='separate')
    self.assertEqual(dist.n_inputs, 4)
    inputs = np.array([[0.0, 1.0, -1.0, 0.5]], np.float32)
    sigma = _softplus(np.array([-1.0, 0.5]) + 1.0)
    point = np.array([[1.0, 1.0]], np.float32)
    out = self.variant(dist.log_prob)(inputs, point)
    expected = stats.norm.logpdf(point, [0.0, 1.0], sigma).sum(-1)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    out = self.variant(dist.entropy)(inputs)
    expected = stats.norm.entropy(scale=sigma).sum()
    np.testing.assert_allclose(out, [expected], rtol=1e-5)

  def test_learned_shared_std(self):
    dist = distributions.Gaussian(shape=(3,), std=0.0, learn_std='shared')
    self.assertEqual(dist.n_inputs, 4)
    inputs = jnp.array([0.0, 0.0, 0.0, 2.0])
    sigma = _softplus(2.0)
    expected = 3 * stats.norm.entropy(scale=sigma)
    np.testing.assert_allclose(dist.entropy(inputs), expected, rtol=1e-5)

  @chex.variants(with_jit=True, without_jit=True)
  def test_temperature_zero_is_mean(self):
    dist = distributions.Gaussian(shape=(2, 2), std=3.0)
    mean = jax.random.normal(jax.random.key(0), (5, 4))
    out = self.variant(dist.sample)(mean, jax.random.key(1), 0.0)
    self.assertEqual(out.shape, (5, 2, 2))
    np.testing.assert_array_equal(out, np.asarray(mean).reshape(5, 2, 2))
    np.testing.assert_array_equal(dist.mode(mean), out)

  def test_sample_moments_and_temperature(self):
    dist = distributions.Gaussian(shape=(), std=2.0)
    mean = jnp.full((20000, 1), 3.0)
    sample = np.asarray(dist.sample(mean, jax.random.key(4)))
    self.assertEqual(sample.shape, (20000,))
    self.assertAlmostEqual(sample.mean(), 3.0, delta=0.05)
    self.assertAlmostEqual(sample.std(), 2.0, delta=0.05)
    sample = np.asarray(dist.sample(mean, jax.random.key(5), 0.5))
    self.assertAlmostEqual(sample.std(), 1.0, delta=0.03)

  def test_batched_shapes(self):
    dist = distributions.Gaussian(shape=(3,), learn_std='shared')
    inputs = jnp.zeros((5, 7, 4))
    sample = dist.sample(inputs, jax.random.key(0))
    self.assertEqual(sample.shape, (5, 7, 3))
    self.assertEqual(dist.log_prob(inputs, sample).shape, (5, 7))
    self.assertEqual(dist.entropy(inputs).shape, (5, 7))

  def test_bad_learn_std(self):
    with self.assertRaisesRegex(ValueError, "learn_std must be one of.*'both'"):
      distributions.Gaussian(learn_std='both')


class CreateDistributionTest(absltest.TestCase):
  def test_discrete(self):
    dist = distributions.create_distribution(gym.spaces.Discrete(4))
    self.assertEqual(dist, distributions.Categorical(n_categories=4))
    self.assertEqual(dist.n_inputs, 4)

  def test_multi_discrete(self):
    space = gym.spaces.MultiDiscrete([2, 5])
    dist = distributions.create_distribution(space)
    self.assertEqual(dist, distributions.MultiCategorical(nvec=(2, 5)))
    self.assertEqual(dist.n_inputs, 7)

  def test_box(self):
    space = gym.spaces.Box(-1.0, 1.0, shape=(2, 3))
    dist = distributions.create_distribution(space)
    self.assertEqual(dist, distributions.Gaussian(shape=(2, 3)))
    self.assertEqual(dist.n_inputs, 6)
    dist = distributions.create_distribution(space, 0.5, 'separate')
    self.assertEqual(dist.std, 0.5)
    self.assertEqual(dist.n_inputs, 12)

  def test_distributions_are_hashable(self):
    # So they can be static arguments of jit.
    space = gym.spaces.MultiDiscrete([2, 5])
    a = distributions.create_distribution(space)
    self.assertEqual(hash(a), hash(distributions.MultiCategorical((2, 5))))

  def test_unsupported_spaces(self):
    with self.assertRaisesRegex(ValueError, 'Unsupported action space Multi'):
      distributions.create_distribution(gym.spaces.MultiBinary(3))
    with self.assertRaisesRegex(ValueError, 'start must be 0'):
      distributions.create_distribution(gym.spaces.Discrete(3, start=1))


if __name__ == '__main__':
  absltest.main()
