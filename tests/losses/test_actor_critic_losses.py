"""Tests of trax_rl.losses.actor_critic against hand-computed numbers."""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest

from trax_rl import advantages, distributions
from trax_rl.losses import actor_critic as ac_losses
from trax_rl.losses import value_estimates
from trax_rl.networks import base as networks

# A "network" that returns its input: observations are the dist_inputs.
IDENTITY = networks.Network(init=lambda key: {}, apply=lambda p, obs: obs)
# A joint one: (logits, value) = (obs[:, :2], obs[:, 2]).
JOINT = networks.Network(
  init=lambda key: {}, apply=lambda p, obs: (obs[:, :2], obs[:, 2])
)
KEY = jax.random.PRNGKey(0)


class PPOObjectiveTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_clipping(self):
    # ratio 1.5, A 2: min(3, 1.2 * 2) = 2.4.   ratio 0.5, A 2: min(1, 1.6) = 1.
    # ratio 0.5, A -1: min(-0.5, -0.8) = -0.8. ratio 1.5, A -1: min(-1.5,
    # -1.2) = -1.5.
    ratio = jnp.array([1.5, 0.5, 0.5, 1.5])
    adv = jnp.array([2.0, 2.0, -1.0, -1.0])
    old = jnp.log(jnp.array([0.2, 0.4, 0.4, 0.2]))
    objective, got_ratio = self.variant(
      functools.partial(ac_losses.ppo_objective, epsilon=0.2)
    )(old + jnp.log(ratio), old, adv)
    np.testing.assert_allclose(got_ratio, ratio, rtol=1e-5)
    np.testing.assert_allclose(objective, [2.4, 1.0, -0.8, -1.5], rtol=1e-5)

  @chex.variants(with_jit=True, without_jit=True)
  def test_ppo_loss_end_to_end(self):
    # Two actions, logits [log 0.75, log 0.25] -> pi(0) = 0.75. The old
    # policy had pi(0) = 0.5: ratio 1.5, clipped at 1.2 for A > 0.
    logits = jnp.log(jnp.array([[0.75, 0.25], [0.75, 0.25]]))
    batch = ac_losses.PolicyBatch(
      observation=logits,
      action=jnp.array([0, 0]),
      advantage=jnp.array([1.0, -1.0]),
      old_log_prob=jnp.log(jnp.array([0.5, 0.5])),
      mask=jnp.array([1.0, 1.0]),
      value_target=jnp.zeros(2),
    )
    loss_fn = ac_losses.PolicyLoss(
      distributions.Categorical(2),
      ac_losses.PPOObjective(epsilon=0.2),
      entropy_coeff=0.5,
      normalization=ac_losses.AdvantageNormalization(enabled=False),
    )
    loss, extra = self.variant(functools.partial(loss_fn, IDENTITY))(
      {}, (), batch, KEY
    )
    # Objectives: min(1.5, 1.2) = 1.2 and min(-1.5, -1.2) = -1.5; mean -0.15.
    entropy = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    np.testing.assert_allclose(loss, 0.15 - 0.5 * entropy, rtol=1e-5)
    np.testing.assert_allclose(extra.metrics['entropy'], entropy, rtol=1e-5)
    np.testing.assert_allclose(extra.metrics['clip_fraction'], 1.0)


class AWRWeightsTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_exp_weights_clipped_at_w_max(self):
    adv = jnp.array([0.0, 1.0, 3.0, -2.0])
    w = self.variant(
      functools.partial(ac_losses.awr_weights, beta=1.0, w_max=10.0)
    )(adv)
    np.testing.assert_allclose(w, [1.0, math.e, 10.0, math.exp(-2)], rtol=1e-5)
    w = ac_losses.awr_weights(adv, beta=2.0, w_max=4.0)
    np.testing.assert_allclose(
      w, [1.0, math.exp(0.5), 4.0, math.exp(-1)], rtol=1e-5
    )

  def test_threshold_weights(self):
    # Percentile 50 of [1, 2, 3, 4] is 2.5: entries 3 and 4 get weight 2;
    # the second threshold (percentile 0, minimum 3.5) weighs only 4 by 1.
    adv = jnp.array([1.0, 2.0, 3.0, 4.0])
    w = ac_losses.awr_weights(
      adv, 1.0, 20.0, thresholds=((50, 2.0, None), (0, 1.0, 3.5))
    )
    np.testing.assert_allclose(w, [0.0, 0.0, 2.0, 3.0])

  @chex.variants(with_jit=True, without_jit=True)
  def test_awr_loss(self):
    # Uniform policy over 2 actions: log pi = log 0.5 everywhere. Weights
    # exp(A) = [1, e] -> loss = -log(0.5) * (1 + e) / 2.
    batch = ac_losses.PolicyBatch(
      observation=jnp.zeros((3, 2)),
      action=jnp.array([0, 1, 1]),
      advantage=jnp.array([0.0, 1.0, 5.0]),
      old_log_prob=jnp.zeros(3),
      mask=jnp.array([1.0, 1.0, 0.0]),
      value_target=jnp.zeros(3),
    )
    loss_fn = ac_losses.PolicyLoss(
      distributions.Categorical(2),
      ac_losses.AWRObjective(),
      normalization=ac_losses.AdvantageNormalization(enabled=False),
    )
    loss, _ = self.variant(functools.partial(loss_fn, IDENTITY))(
      {}, (), batch, KEY
    )
    np.testing.assert_allclose(
      loss, -math.log(0.5) * (1 + math.e) / 2, rtol=1e-5
    )


class AdvantageTest(chex.TestCase):
  # Two packed trajectories: [r 1, r 2] terminated and [r 3, r 4] cut (to be
  # bootstrapped from V(s_next) = 8), then one padding step. gamma 0.5.
  reward = jnp.array([1.0, 2.0, 3.0, 4.0, 7.0])
  terminal = jnp.array([0.0, 1.0, 0.0, 0.0, 0.0])
  boundary = jnp.array([0.0, 0.0, 0.0, 1.0, 0.0])
  mask = jnp.array([1.0, 1.0, 1.0, 1.0, 0.0])
  values = jnp.array([10.0, 20.0, 30.0, 40.0, 50.0])
  next_values = jnp.array([20.0, 99.0, 40.0, 8.0, 60.0])

  def _run(self, variant, estimator, margin=0):
    fn = functools.partial(
      value_estimates.advantages_and_targets, estimator, margin, 0.5
    )
    return variant(fn)(
      self.reward,
      self.terminal,
      self.boundary,
      self.mask,
      self.values,
      self.next_values,
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_monte_carlo_like_gae(self):
    # lambda 1: G1 = 2, G0 = 1 + 0.5 * 2 = 2; G3 = 4 + 0.5 * 8 = 8,
    # G2 = 3 + 0.5 * 8 = 7. A = G - V; targets = G; padding 0.
    adv, targets = self._run(
      self.variant, advantages.gae(0.5, margin=0, lambda_=1.0)
    )
    np.testing.assert_allclose(adv, [-8.0, -18.0, -23.0, -32.0, 0.0])
    np.testing.assert_allclose(targets, [2.0, 2.0, 7.0, 8.0, 0.0])

  @chex.variants(with_jit=True, without_jit=True)
  def test_td0(self):
    # A0 = 1 + 0.5 * 20 - 10 = 1; A1 = 2 - 20; A2 = 3 + 0.5 * 40 - 30 = -7;
    # A3 = 4 + 0.5 * 8 - 40 = -32.
    expected_adv = [1.0, -18.0, -7.0, -32.0, 0.0]
    expected_targets = [11.0, 2.0, 23.0, 8.0, 0.0]
    for estimator, margin in [
      (advantages.td_lambda(0.5, margin=0, lambda_=0.0), 0),
      (advantages.td_k(0.5, margin=1), 1),
    ]:
      adv, targets = self._run(self.variant, estimator, margin)
      np.testing.assert_allclose(adv, expected_adv)
      np.testing.assert_allclose(targets, expected_targets)

  @chex.variants(with_jit=True, without_jit=True)
  def test_monte_carlo_estimator(self):
    # Returns G = [2, 2, 7, 8]. As Trax's monte_carlo, the step where the
    # episode terminated (1) has no baseline: A = G there. The cut at 3,
    # with V(s_next) folded into its reward, keeps it: A = G - V = 8 - 40.
    # The targets are Trax's: G, the (folded) reward at those last steps.
    adv, targets = self._run(self.variant, advantages.monte_carlo(0.5, 0))
    np.testing.assert_allclose(adv, [-8.0, 2.0, -23.0, -32.0, 0.0])
    np.testing.assert_allclose(targets, [2.0, 2.0, 7.0, 8.0, 0.0])


class NormalizationAndAggregationTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_advantage_normalization(self):
    # Over the unmasked [1, 2, 3]: mean 2, std sqrt(2/3); factor 2.
    fn = functools.partial(
      value_estimates.preprocess_advantages, epsilon=0.0, factor=2.0
    )
    out = self.variant(fn)(
      jnp.array([1.0, 2.0, 3.0, 4.0]), jnp.array([1.0, 1.0, 1.0, 0.0])
    )
    std = math.sqrt(2 / 3)
    np.testing.assert_allclose(
      out, [-2 / std, 0.0, 2 / std, 4 / std], rtol=1e-5
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_aggregate_values(self):
    q = jnp.array([[1.0, 2.0], [3.0, 6.0]])  # [S=2, B=2]

    def agg(aggregate, **kw):
      aggregate = value_estimates.aggregate_fn(aggregate)
      return self.variant(
        functools.partial(
          value_estimates.aggregate_values, aggregate=aggregate, **kw
        )
      )(q)

    np.testing.assert_allclose(agg(aggregate='mean'), [2.0, 4.0])
    np.testing.assert_allclose(agg(aggregate='max'), [3.0, 6.0])
    # A function is a choice too; 'std' scales Q by its std and back.
    np.testing.assert_allclose(
      agg(value_estimates.maximum, normalization=value_estimates.std_scale),
      [3.0, 6.0],
      rtol=1e-5,
    )
    # Column [2, 6] at T 2: 2 * log(mean(e^1, e^3)).
    out = agg(aggregate='logsumexp', temperature=2.0)
    np.testing.assert_allclose(
      out[1], 2 * math.log((math.e + math.e**3) / 2), rtol=1e-5
    )
    # Softmax of [1, 3] at T 1: weights e/(e+e^3), e^3/(e+e^3).
    w = math.e**3 / (math.e + math.e**3)
    np.testing.assert_allclose(
      agg(aggregate='softmax')[0], (1 - w) * 1 + w * 3, rtol=1e-5
    )
    # Probability-weighted mean over all actions (probs 0.25, 0.75).
    logp = jnp.log(jnp.array([[0.25, 0.25], [0.75, 0.75]]))
    out = value_estimates.mean(q, weights=jnp.exp(logp))
    np.testing.assert_allclose(out, [2.5, 5.0], rtol=1e-5)

  def test_bad_aggregate(self):
    with self.assertRaisesRegex(ValueError, 'q_value_aggregate'):
      value_estimates.aggregate_fn('median')
    with self.assertRaisesRegex(ValueError, 'q_value_normalization'):
      value_estimates.normalization_fn('var')


class JointLossTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_a2c_joint(self):
    # Uniform logits, value 1, target 3: value loss 4. log pi = log 0.5,
    # advantages [1, -1] (not normalized): objective mean 0.
    obs = jnp.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    batch = ac_losses.PolicyBatch(
      observation=obs,
      action=jnp.array([0, 1]),
      advantage=jnp.array([1.0, 3.0]),
      old_log_prob=jnp.zeros(2),
      mask=jnp.ones(2),
      value_target=jnp.array([3.0, 3.0]),
    )
    loss_fn = ac_losses.PolicyLoss(
      distributions.Categorical(2),
      ac_losses.A2CObjective(),
      entropy_coeff=0.1,
      normalization=ac_losses.AdvantageNormalization(enabled=False),
      value_loss_coeff=0.5,
    )
    loss, extra = self.variant(functools.partial(loss_fn, JOINT))(
      {}, (), batch, KEY
    )
    # -mean(log 0.5 * [1, 3]) = 2 log 2; + 0.5 * 4; - 0.1 * log 2.
    np.testing.assert_allclose(
      loss, 2 * math.log(2) + 2.0 - 0.1 * math.log(2), rtol=1e-5
    )
    np.testing.assert_allclose(extra.metrics['value_loss'], 4.0)


class SameObjectiveOnBothLayoutsTest(chex.TestCase):
  # Three steps, two actions; the policy network's output is the joint
  # one's policy head (obs[:, :2]); values obs[:, 2].
  obs = jnp.array(
    [[0.2, -0.3, 1.0], [1.0, 0.5, 2.0], [-0.4, 0.1, 0.5]], jnp.float32
  )
  batch = ac_losses.PolicyBatch(
    observation=obs,
    action=jnp.array([0, 1, 1]),
    advantage=jnp.array([1.5, -0.5, 2.0]),
    old_log_prob=jnp.log(jnp.array([0.4, 0.5, 0.6])),
    mask=jnp.array([1.0, 1.0, 1.0]),
    value_target=jnp.array([2.0, 2.0, 2.0]),
  )
  policy_net = networks.Network(
    init=lambda key: {}, apply=lambda p, obs: obs[:, :2]
  )

  @chex.variants(with_jit=True, without_jit=True)
  def test_policy_and_joint_losses_share_the_objective(self):
    dist = distributions.Categorical(2)
    logp = jax.nn.log_softmax(self.obs[:, :2])[jnp.arange(3), self.batch.action]
    # Advantages normalized over the batch (epsilon 1e-5), no gradient.
    adv = self.batch.advantage
    adv = (adv - adv.mean()) / (adv.std() + 1e-5)
    ratio = jnp.exp(logp - self.batch.old_log_prob)
    expected = {
      'a2c': -jnp.mean(logp * adv),
      'ppo': -jnp.mean(
        jnp.minimum(ratio * adv, jnp.clip(ratio, 0.8, 1.2) * adv)
      ),
      'awr': -jnp.mean(logp * jnp.minimum(jnp.exp(adv / 0.5), 20.0)),
    }
    objectives = {
      'a2c': ac_losses.A2CObjective(),
      'ppo': ac_losses.PPOObjective(0.2),
      'awr': ac_losses.AWRObjective(beta=0.5),
    }
    # Value loss of the joint network: mean((v - 2)^2) of v = 1, 2, 0.5.
    value_loss = (1.0 + 0.0 + 2.25) / 3
    for name, objective in objectives.items():
      policy = ac_losses.PolicyLoss(dist, objective)
      joint = ac_losses.PolicyLoss(dist, objective, value_loss_coeff=0.5)
      got_policy, _ = self.variant(functools.partial(policy, self.policy_net))(
        {}, (), self.batch, KEY
      )
      got_joint, extra = self.variant(functools.partial(joint, JOINT))(
        {}, (), self.batch, KEY
      )
      np.testing.assert_allclose(got_policy, expected[name], rtol=1e-5)
      np.testing.assert_allclose(
        got_joint, expected[name] + 0.5 * value_loss, rtol=1e-5
      )
      np.testing.assert_allclose(
        extra.metrics['value_loss'], value_loss, rtol=1e-5
      )


if __name__ == '__main__':
  absltest.main()
