"""Fidelity, item 1: prioritized-replay importance weights, as Acme's.

Sources: acme/agents/jax/dqn/losses.py (`PrioritizedDoubleQLearning`,
`PrioritizedCategoricalDoubleQLearning`) weigh by (1 / p)**beta / max, with
no offset on p; acme/agents/jax/r2d2/learning.py adds 1e-6 to p. Tiny
probabilities show the offset: with p = 1e-7 it is ten times p.
"""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import rlax
from absl.testing import absltest, parameterized

from trax_rl import types
from trax_rl.losses import distributional, q_learning, q_parts, r2d2
from trax_rl.networks import base

PROBABILITY = np.array([1e-7, 1e-3, 0.5])
KEY = jax.random.key(0)


def acme_dqn_weights(probability, beta):
  """Transcription of Acme's DQN losses: (1. / probs) ** beta, / max."""
  weights = (1.0 / np.asarray(probability, np.float64)) ** beta
  return weights / np.max(weights)


def acme_r2d2_weights(probability, beta):
  """Transcription of Acme's R2D2 learner: (1. / (probs + 1e-6)) ** beta."""
  weights = (1.0 / (np.asarray(probability, np.float64) + 1e-6)) ** beta
  return weights / np.max(weights)


def _batch(reward, probability, obs_shape):
  n = len(reward)
  transition = types.Transition(
    observation=np.zeros((n,) + obs_shape, np.float32),
    action=np.zeros(n, np.int32),
    reward=np.asarray(reward, np.float32),
    discount=np.zeros(n, np.float32),  # Terminal: td = r - Q(s, a).
    next_observation=np.zeros((n,) + obs_shape, np.float32),
  )
  return types.Batch(transition, np.asarray(probability, np.float32))


# Q = observation; C51 logits = observation on the atoms [-1, 0, 1].
Q_NET = base.Network(
  init=lambda key: None,
  apply=lambda params, obs: types.QOutput(q_values=obs),
)
ATOMS = jnp.array([-1.0, 0.0, 1.0])
C51_NET = base.Network(
  init=lambda key: None,
  apply=lambda params, obs: types.QOutput(
    jnp.sum(jax.nn.softmax(obs) * ATOMS, axis=-1), obs, ATOMS
  ),
)


def _r2d2_unroll(params, obs, state, first=None):
  del params, first
  return types.QOutput(q_values=obs), state  # Q = observation.


R2D2_NET = base.RecurrentNetwork(
  init=lambda key: None,
  apply=None,
  unroll=_r2d2_unroll,
  initial_state=lambda n: jnp.zeros(n),
)


class ImportanceWeightsTest(parameterized.TestCase):
  def test_hand_values(self):
    # beta .2, Acme's DQN: (1e-7 / p)**.2 = [1, 1e-4**.2, (2e-7)**.2].
    np.testing.assert_allclose(
      q_parts.importance_weights(PROBABILITY, 0.2),
      [1.0, 10**-0.8, 2e-7**0.2],
      rtol=1e-5,
    )
    # R2D2: (1.1e-6 / (p + 1e-6))**.2: the offset raises the second weight
    # from .158 to .256.
    np.testing.assert_allclose(
      q_parts.importance_weights(PROBABILITY, 0.2, offset=1e-6),
      [1.0, (1.1e-6 / 1.001e-3) ** 0.2, (1.1e-6 / 0.500001) ** 0.2],
      rtol=1e-5,
    )

  @parameterized.parameters(0.2, 0.6)
  def test_default_is_acme_dqn_and_offset_is_r2d2(self, beta):
    acme = q_parts.importance_weights(PROBABILITY, beta)
    offset = q_parts.importance_weights(PROBABILITY, beta, offset=1e-6)
    np.testing.assert_allclose(
      acme, acme_dqn_weights(PROBABILITY, beta), rtol=1e-5
    )
    np.testing.assert_allclose(
      offset, acme_r2d2_weights(PROBABILITY, beta), rtol=1e-5
    )
    # Where the difference shows: above 1.5x on the second weight.
    self.assertGreater(offset[1] / acme[1], 1.5)


class PrioritizedLossesTest(chex.TestCase, parameterized.TestCase):
  # Rewards [1, 2, 4] at Q = 0, terminal: td = r, 0.5 * td**2 = [.5, 2, 8].
  reward = [1.0, 2.0, 4.0]
  half_square = np.array([0.5, 2.0, 8.0])

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0.2, 0.6)
  def test_prioritized_double_q_learning(self, beta):
    loss_fn = q_learning.PrioritizedDoubleQLearning(
      importance_sampling_exponent=beta,
      huber_loss_parameter=None,
      max_abs_reward=None,
    )
    batch = _batch(self.reward, PROBABILITY, (2,))
    loss, extra = self.variant(functools.partial(loss_fn, Q_NET))(
      None, None, batch, KEY
    )
    expected = np.mean(acme_dqn_weights(PROBABILITY, beta) * self.half_square)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(extra.priorities, self.reward)
    # R2D2's offset would have given another loss.
    r2d2_loss = np.mean(acme_r2d2_weights(PROBABILITY, beta) * self.half_square)
    self.assertGreater(abs(r2d2_loss - expected) / expected, 1e-2)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0.2, 0.6)
  def test_prioritized_categorical_double_q_learning(self, beta):
    # Uniform online logits, terminal with reward 0: the target puts all
    # mass on atom 0, so each example's cross-entropy is log 3.
    loss_fn = distributional.PrioritizedCategoricalDoubleQLearning(
      importance_sampling_exponent=beta
    )
    batch = _batch([0.0, 0.0, 0.0], PROBABILITY, (2, 3))
    loss, extra = self.variant(functools.partial(loss_fn, C51_NET))(
      None, None, batch, KEY
    )
    weights = acme_dqn_weights(PROBABILITY, beta)
    np.testing.assert_allclose(loss, math.log(3) * np.mean(weights), rtol=1e-5)
    np.testing.assert_allclose(extra.priorities, [math.log(3)] * 3, rtol=1e-6)
    r2d2_loss = math.log(3) * np.mean(acme_r2d2_weights(PROBABILITY, beta))
    self.assertGreater(abs(r2d2_loss - loss) / loss, 1e-2)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0.2, 0.6)
  def test_r2d2_keeps_its_offset(self, beta):
    # Segments of two steps, Q = observation = 0, no burn-in, one step: the
    # first step is terminal with reward r, so each sequence loss is
    # 0.5 * r**2 = [.5, 2, 8].
    segment = types.Segment(
      observation=jnp.zeros((3, 2, 2)),
      action=jnp.zeros((3, 2), jnp.int32),
      reward=jnp.array([[r, 0.0] for r in self.reward]),
      discount=jnp.zeros((3, 2)),
      mask=jnp.array([[1.0, 0.0]] * 3),
      core_state=jnp.zeros(3),
    )
    loss_fn = r2d2.R2D2Loss(
      burn_in_length=0,
      bootstrap_n=1,
      importance_sampling_exponent=beta,
      value_transform=rlax.IDENTITY_PAIR,
    )
    batch = types.Batch(segment, jnp.asarray(PROBABILITY, jnp.float32))
    loss, _ = self.variant(functools.partial(loss_fn, R2D2_NET))(
      None, None, batch, KEY
    )
    expected = np.mean(acme_r2d2_weights(PROBABILITY, beta) * self.half_square)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    dqn_loss = np.mean(acme_dqn_weights(PROBABILITY, beta) * self.half_square)
    self.assertGreater(abs(dqn_loss - expected) / expected, 1e-2)


if __name__ == '__main__':
  absltest.main()
