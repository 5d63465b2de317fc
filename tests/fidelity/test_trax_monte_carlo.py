"""Fidelity, item 2: Trax's `monte_carlo` advantage at episode ends.

Source: google/trax, trax/rl/advantages.py, `monte_carlo(gamma, margin)`.
Its estimator sets `returns[dones] = rewards[dones]` and `values[dones] = 0`
(in place) before `(returns - values)[:, :T - margin]`: a terminal step's
advantage is its reward, with no baseline. Trax's critics and DQN then take
`values + advantages` as value targets, reading the zeroed values back.
"""

import chex
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized

from trax_rl import advantages

GAMMA = 0.5
# One slice of 5 steps; the episode terminates at t=2, the next one starts
# at t=3. Returns (gamma .5): G2 = 3, G1 = 2 + 1.5, G0 = 1 + 1.75; G4 = 5,
# G3 = 4 + 2.5. A wrong 99 at the done step: Trax reads the reward there.
REWARDS = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]])
RETURNS = np.array([[2.75, 3.5, 99.0, 6.5, 5.0]])
VALUES = np.array([[10.0, 20.0, 30.0, 40.0, 50.0]])
DONES = np.array([[False, False, True, False, False]])
ONES = np.ones((1, 5))


def trax_monte_carlo(rewards, returns, values, dones, margin):
  """Transcription of Trax's estimator; copies instead of mutating ours.

  Returns:
    (advantages, values as Trax leaves them: zeroed at done steps).
  """
  returns, values = returns.copy(), values.copy()
  length = returns.shape[1]
  returns[dones] = rewards[dones]
  values[dones] = 0
  return (returns - values)[:, : length - margin], values


class MonteCarloTest(chex.TestCase, parameterized.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0, 1, 2)
  def test_no_baseline_at_the_done_step(self, margin):
    # returns - values, but at t=2 the reward alone: 3 (was 3 - 30 = -27).
    hand = np.array([[2.75 - 10.0, 3.5 - 20.0, 3.0, 6.5 - 40.0, 5.0 - 50.0]])
    out = self.variant(advantages.monte_carlo(GAMMA, margin))(
      *[jnp.asarray(a) for a in (REWARDS, RETURNS, VALUES, DONES, ONES)]
    )
    np.testing.assert_allclose(out, hand[:, : 5 - margin])
    trax, _ = trax_monte_carlo(REWARDS, RETURNS, VALUES, DONES, margin)
    np.testing.assert_allclose(out, trax)

  @parameterized.parameters(0, 1, 2)
  def test_value_targets_are_trax(self, margin):
    # Trax: values (zeroed at dones by the estimator) + advantages, i.e. the
    # returns with the reward at the done step: [2.75, 3.5, 3, 6.5, 5].
    estimator = advantages.monte_carlo(GAMMA, margin)
    adv = estimator(REWARDS, RETURNS, VALUES, DONES, ONES)
    targets = advantages.value_targets(adv, REWARDS, VALUES, DONES)
    trax_adv, trax_values = trax_monte_carlo(
      REWARDS, RETURNS, VALUES, DONES, margin
    )
    n = 5 - margin
    np.testing.assert_allclose(targets, trax_values[:, :n] + trax_adv)
    np.testing.assert_allclose(targets, [[2.75, 3.5, 3.0, 6.5, 5.0][:n]])

  def test_inputs_are_not_modified(self):
    values = VALUES.copy()
    returns = RETURNS.copy()
    advantages.monte_carlo(GAMMA, 0)(REWARDS, returns, values, DONES, ONES)
    np.testing.assert_array_equal(values, VALUES)
    np.testing.assert_array_equal(returns, RETURNS)


if __name__ == '__main__':
  absltest.main()
