"""Tests for trax_rl.advantages, with numbers worked out by hand."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized

from trax_rl import advantages

GAMMA = 0.5
LAMBDA = 0.5

# Three slices of 4 steps sharing rewards and values:
#   row 0: no termination (bootstraps from values[3]);
#   row 1: the episode terminates at t=1, a new one starts at t=2;
#   row 2: the episode terminates at the last step, t=3.
REWARDS = np.array([[1.0, 2.0, 3.0, 4.0]] * 3)
VALUES = np.array([[4.0, 8.0, 4.0, 8.0]] * 3)
DONES = np.array(
  [
    [False, False, False, False],
    [False, True, False, False],
    [False, False, False, True],
  ]
)
ONES = np.ones((3, 4))
# Returns per episode with gamma 0.5. Row 1 carries a wrong 99 at its done
# step: Monte Carlo must use the reward there instead.
RETURNS = np.array(
  [
    [3.25, 4.5, 5.0, 4.0],
    [2.0, 99.0, 5.0, 4.0],
    [3.25, 4.5, 5.0, 4.0],
  ]
)

# GAE / TD(lambda) with gamma = lambda = 0.5, so each decay is 0.25.
# deltas (row 0): [1 + 4 - 4, 2 + 2 - 8, 3 + 4 - 4, 0] = [1, -4, 3, 0]
#   A3 = 0, A2 = 3, A1 = -4 + 0.75 = -3.25, A0 = 1 - 0.8125 = 0.1875.
# row 1 (done at t=1): deltas [1, 2 - 8, 3, 0] = [1, -6, 3, 0], no decay
#   past t=1: A = [1 - 1.5, -6, 3, 0].
# row 2 (done at t=3): last delta is 4 - 8 = -4; A3 = -4, A2 = 3 - 1 = 2,
#   A1 = -4 + 0.5 = -3.5, A0 = 1 - 0.875 = 0.125.
LAMBDA_ADVANTAGES = np.array(
  [
    [0.1875, -3.25, 3.0, 0.0],
    [-0.5, -6.0, 3.0, 0.0],
    [0.125, -3.5, 2.0, -4.0],
  ]
)


class MaskDiscountTest(absltest.TestCase):
  def test_numpy_stays_numpy(self):
    out = advantages.mask_discount(0.9, np.array([1, 0, 1]))
    self.assertIsInstance(out, np.ndarray)
    np.testing.assert_allclose(out, [0.9, 1.0, 0.9])

  def test_jax(self):
    out = advantages.mask_discount(0.9, jnp.array([True, False, True]))
    self.assertIsInstance(out, jax.Array)
    np.testing.assert_allclose(out, [0.9, 1.0, 0.9], rtol=1e-6)


class DiscountedReturnsTest(chex.TestCase):
  def test_numpy_single_trajectory(self):
    rewards = np.array([1.0, 2.0, 3.0, 4.0])
    copy = rewards.copy()
    # 4; 3 + 2 = 5; 2 + 2.5 = 4.5; 1 + 2.25 = 3.25.
    returns = advantages.discounted_returns(rewards, np.full(4, 0.5))
    self.assertIsInstance(returns, np.ndarray)
    np.testing.assert_allclose(returns, [3.25, 4.5, 5.0, 4.0])
    np.testing.assert_array_equal(rewards, copy)

  def test_numpy_batch_with_masked_discount(self):
    rewards = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 8.0]])
    gammas = advantages.mask_discount(
      0.5, np.array([[1, 0, 1, 1], [1, 1, 1, 1]])
    )
    # Row 0: 4; 3 + 2 = 5; 2 + 1 * 5 = 7; 1 + 3.5 = 4.5.
    # Row 1: 8, 4, 2, 1.
    returns = advantages.discounted_returns(rewards, gammas)
    np.testing.assert_allclose(
      returns, [[4.5, 7.0, 5.0, 4.0], [1.0, 2.0, 4.0, 8.0]]
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_jax(self):
    rewards = jnp.array([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 8.0]])
    returns = self.variant(advantages.discounted_returns)(rewards, 0.5)
    self.assertIsInstance(returns, jax.Array)
    np.testing.assert_allclose(
      returns, [[3.25, 4.5, 5.0, 4.0], [1.0, 2.0, 4.0, 8.0]]
    )


class EstimatorTest(chex.TestCase):
  def _run(self, estimator, discount_mask=ONES, rows=slice(None)):
    args = [REWARDS, RETURNS, VALUES, DONES, discount_mask]
    return self.variant(estimator)(*[jnp.asarray(a[rows]) for a in args])

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0, 1, 2)
  def test_monte_carlo(self, margin):
    # returns - values; as Trax's, a done step has return = its reward and
    # value 0: row 1 at t=1 gives 2 (not 99 - 8), row 2 at t=3 gives 4.
    expected = np.array(
      [
        [3.25 - 4.0, 4.5 - 8.0, 5.0 - 4.0, 4.0 - 8.0],
        [2.0 - 4.0, 2.0, 5.0 - 4.0, 4.0 - 8.0],
        [3.25 - 4.0, 4.5 - 8.0, 5.0 - 4.0, 4.0],
      ]
    )
    out = self._run(advantages.monte_carlo(GAMMA, margin))
    np.testing.assert_allclose(out, expected[:, : 4 - margin])

  @chex.variants(with_jit=True, without_jit=True)
  def test_td_1(self):
    # r_t + 0.5 * (1 - d_t) * V_{t+1} - V_t.
    # Row 0: [1 + 4 - 4, 2 + 2 - 8, 3 + 4 - 4]; row 1 stops at t=1: 2 - 8.
    out = self._run(advantages.td_k(GAMMA, 1))
    np.testing.assert_allclose(
      out, [[1.0, -4.0, 3.0], [1.0, -6.0, 3.0], [1.0, -4.0, 3.0]]
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_td_2(self):
    # Row 0: t0 = 1 + 0.5 * 2 + 0.25 * 4 - 4 = -1,
    #        t1 = 2 + 0.5 * 3 + 0.25 * 8 - 8 = -2.5.
    # Row 1 (done at t=1, inside t0's window): t0 = 1 + 0.5 * 2 - 4 = -2
    #        with no bootstrap past the termination; t1 = 2 - 8 = -6.
    # Row 2: the done at t=3 lies outside both windows' sums: as row 0.
    out = self._run(advantages.td_k(GAMMA, 2))
    np.testing.assert_allclose(out, [[-1.0, -2.5], [-2.0, -6.0], [-1.0, -2.5]])

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0, 1, 2)
  def test_gae(self, margin):
    out = self._run(advantages.gae(GAMMA, margin, lambda_=LAMBDA))
    np.testing.assert_allclose(out, LAMBDA_ADVANTAGES[:, : 4 - margin])

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0, 1, 2)
  def test_td_lambda(self, margin):
    # Lambda-returns, row 0: G3 = V3 = 8; G2 = 3 + 0.5 * (4 + 4) = 7;
    # G1 = 2 + 0.5 * (2 + 3.5) = 4.75; G0 = 1 + 0.5 * (4 + 2.375) = 4.1875.
    # Minus values: the same advantages as GAE.
    out = self._run(advantages.td_lambda(GAMMA, margin, lambda_=LAMBDA))
    np.testing.assert_allclose(out, LAMBDA_ADVANTAGES[:, : 4 - margin])

  @chex.variants(with_jit=True, without_jit=True)
  def test_discount_mask(self):
    # No discount when stepping from t=1 to t=2 in row 0: g = [.5, 1, .5, .5].
    mask = np.array([[1, 0, 1, 1]] * 3)
    # TD(0): [1 + 4 - 4, 2 + 1 * 4 - 8, 3 + 4 - 4] = [1, -2, 3].
    out = self._run(advantages.td_k(GAMMA, 1), mask, rows=slice(0, 1))
    np.testing.assert_allclose(out, [[1.0, -2.0, 3.0]])
    # TD(2): t0 = 1 + 0.5 * 2 + 0.5 * 1 * 4 - 4 = 0;
    #        t1 = 2 + 1 * 3 + 1 * 0.5 * 8 - 8 = 1.
    out = self._run(advantages.td_k(GAMMA, 2), mask, rows=slice(0, 1))
    np.testing.assert_allclose(out, [[0.0, 1.0]])
    # GAE: deltas [1, -2, 3, 0], decays [.25, 1, .25, .25]:
    #   A2 = 3, A1 = -2 + 3 = 1, A0 = 1 + 0.25 = 1.25.
    for make in (advantages.gae, advantages.td_lambda):
      out = self._run(make(GAMMA, 1, LAMBDA), mask, rows=slice(0, 1))
      np.testing.assert_allclose(out, [[1.25, 1.0, 3.0]])
    # Monte Carlo reads discounts only through `returns`.
    out = self._run(advantages.monte_carlo(GAMMA, 1), mask, rows=slice(0, 1))
    np.testing.assert_allclose(out, [[-0.75, -3.5, 1.0]])

  @chex.variants(with_jit=True, without_jit=True)
  def test_lambda_one_is_bootstrapped_monte_carlo(self):
    # lambda = 1, row 0: G = discounted rewards of t..2 + gamma^k * V3.
    # G2 = 3 + 4 = 7; G1 = 2 + 3.5 = 5.5; G0 = 1 + 2.75 = 3.75.
    out = self._run(advantages.gae(GAMMA, 1, 1.0), rows=slice(0, 1))
    np.testing.assert_allclose(out, [[3.75 - 4.0, 5.5 - 8.0, 7.0 - 4.0]])

  @chex.variants(with_jit=True, without_jit=True)
  def test_lambda_zero_is_td_0(self):
    out = self._run(advantages.td_lambda(GAMMA, 1, 0.0))
    expected = self._run(advantages.td_k(GAMMA, 1))
    np.testing.assert_allclose(out, expected)


class EstimatorPropertiesTest(absltest.TestCase):
  def test_gae_equals_td_lambda_on_random_data(self):
    rng = np.random.default_rng(0)
    shape = (5, 9)
    args = (
      rng.normal(size=shape),
      rng.normal(size=shape),
      rng.normal(size=shape),
      rng.random(shape) < 0.2,
      rng.random(shape) < 0.7,
    )
    out_gae = advantages.gae(0.9, 2, 0.8)(*args)
    out_td = advantages.td_lambda(0.9, 2, 0.8)(*args)
    self.assertEqual(out_gae.shape, (5, 7))
    np.testing.assert_allclose(out_gae, out_td, rtol=1e-5, atol=1e-5)

  def test_inputs_are_not_modified(self):
    args = [a.copy() for a in (REWARDS, RETURNS, VALUES, DONES, ONES)]
    for make in (advantages.monte_carlo, advantages.td_k, advantages.gae):
      make(GAMMA, 1)(*args)
    for arg, original in zip(args, (REWARDS, RETURNS, VALUES, DONES, ONES)):
      np.testing.assert_array_equal(arg, original)

  def test_td_k_needs_margin(self):
    with self.assertRaisesRegex(ValueError, 'margin must be an int >= 1'):
      advantages.td_k(GAMMA, 0)

  def test_bad_factory_args(self):
    with self.assertRaisesRegex(ValueError, 'gamma'):
      advantages.gae(1.5, 1)
    with self.assertRaisesRegex(ValueError, 'lambda_'):
      advantages.td_lambda(0.9, 1, lambda_=-0.1)
    with self.assertRaisesRegex(ValueError, 'margin'):
      advantages.monte_carlo(0.9, -1)

  def test_slice_too_short_for_margin(self):
    estimator = advantages.gae(GAMMA, 4)
    with self.assertRaisesRegex(ValueError, 'too short for margin 4'):
      estimator(REWARDS, RETURNS, VALUES, DONES, ONES)

  def test_mismatched_shapes(self):
    estimator = advantages.td_k(GAMMA, 1)
    with self.assertRaisesRegex(ValueError, r'must all be \[B, T\]'):
      estimator(REWARDS, RETURNS, VALUES[:, :3], DONES, ONES)


if __name__ == '__main__':
  absltest.main()


class TestPaddingMask:
  """A truncated slice bootstraps from the final observation's value."""

  # Steps 0, 1 are real; row 2 holds the final observation (margin 1),
  # marked done as padding is; row 3 is batch padding.
  rewards = np.array([[1.0, 2.0, 0.0, 0.0]])
  values = np.array([[10.0, 20.0, 30.0, 7.0]])
  dones = np.array([[False, False, True, True]])
  mask = np.array([[1.0, 1.0, 0.0, 0.0]])
  ones = np.ones((1, 4))

  def _run(self, estimator, mask):
    return np.asarray(
      estimator(
        self.rewards,
        self.rewards,
        self.values,
        self.dones,
        self.ones,
        mask=mask,
      )
    )

  @pytest.mark.parametrize('factory', [advantages.gae, advantages.td_lambda])
  def test_lambda_estimators(self, factory):
    # gamma 0.5, lambda 0.5. Step 1: 2 + 0.5 * 30 - 20 = -3.
    # Step 0: delta 1 + 0.5 * 20 - 10 = 1, plus 0.5 * 0.5 * -3 = 0.25.
    est = jax.jit(factory(0.5, 2, lambda_=0.5))
    np.testing.assert_allclose(self._run(est, self.mask), [[0.25, -3.0]])
    # The padding row itself gets advantage 0.
    np.testing.assert_allclose(
      self._run(factory(0.5, 1, lambda_=0.5), self.mask), [[0.25, -3.0, 0.0]]
    )
    # Without the mask the padding row counts as a terminal step (Trax's
    # behaviour): step 1 then sees -V2 leak in, -3 + 0.25 * -30 = -10.5.
    no_mask = self._run(factory(0.5, 2, lambda_=0.5), None)
    np.testing.assert_allclose(no_mask[0, 1], -10.5)

  def test_td_k(self):
    # k = 2. Step 0: 1 + 0.5 * 2 + 0.25 * V2 = 2 + 7.5, minus 10 = -0.5.
    # Step 1: 2 + 0.5 * V2 (the window reached padding) - 20 = -3.
    est = advantages.td_k(0.5, 2)
    np.testing.assert_allclose(self._run(est, self.mask), [[-0.5, -3.0]])
    # Unmasked, the padding row stops the sum with no bootstrap.
    np.testing.assert_allclose(self._run(est, None), [[-0.5, -18.0]])

  def test_padding_after_termination_is_ignored(self):
    dones = np.array([[False, True, True, True]])
    for factory in (advantages.gae, advantages.td_lambda):
      out = factory(0.5, 1, lambda_=0.5)(
        self.rewards,
        self.rewards,
        self.values,
        dones,
        self.ones,
        mask=self.mask,
      )
      # Step 1 terminated: 2 - 20; step 0: 1 + 0.5*20 - 10 + 0.25*(-18).
      np.testing.assert_allclose(out, [[-3.5, -18.0, 0.0]], atol=1e-6)
