"""Tests for trax_rl.losses.q_learning against hand and numpy references.

The networks are linear in their input, `out = w * obs + b`, so Q-values,
logits and quantiles are read straight off the batch. Expected numbers are
worked out by hand in comments, or by the plain-numpy references below
(loops, no rlax).
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
from trax_rl.losses import distributional, q_learning, q_parts
from trax_rl.networks import base as networks_base

ATOMS = np.array([-1.0, 0.0, 1.0], np.float32)
KEY = jax.random.key(0)


def _linear(params, obs):
  return params['w'] * obs + params['b']


def _q_apply(params, obs):  # obs [B, A]
  return types.QOutput(q_values=_linear(params, obs))


def _c51_apply(params, obs):  # obs [B, A, K] -> logits on ATOMS
  logits = _linear(params, obs)
  q_values = jnp.sum(jax.nn.softmax(logits) * ATOMS, axis=-1)
  return types.QOutput(q_values, logits, jnp.asarray(ATOMS))


def _qr_apply(params, obs):  # obs [B, A, K] -> quantile values
  dist = _linear(params, obs)
  return types.QOutput(jnp.mean(dist, axis=-1), dist)


def _network(apply):
  return networks_base.Network(init=lambda key: None, apply=apply)


Q_NET = _network(_q_apply)
C51_NET = _network(_c51_apply)
QR_NET = _network(_qr_apply)


def _params(w, b):
  return {'w': np.float32(w), 'b': np.asarray(b, np.float32)}


def _batch(obs, action, reward, discount, next_obs, probability=None):
  n = len(action)
  if probability is None:
    probability = np.full(n, 1.0 / n)
  transition = types.Transition(
    observation=np.asarray(obs, np.float32),
    action=np.asarray(action, np.int32),
    reward=np.asarray(reward, np.float32),
    discount=np.asarray(discount, np.float32),
    next_observation=np.asarray(next_obs, np.float32),
  )
  return types.Batch(transition, np.asarray(probability, np.float32))


# B=3, A=3; Q(s) = obs online. Row 1 is terminal, rows 1 and 2 get clipped.
Q_BATCH = _batch(
  obs=[[1, 2, 3], [0, -1, 0.5], [2, 2, 0]],
  action=[2, 0, 1],  # Q(s, a) = [3, 0, 2]
  reward=[0.5, 3.0, -2.0],
  discount=[0.9, 0.0, 0.5],
  next_obs=[[1, 0, 0], [5, 5, 5], [0, 1, 5]],
)
ONLINE = _params(1.0, np.zeros(3))
TARGET_X2 = _params(2.0, np.zeros(3))  # Q_target(s') = 2 * next_obs.
TARGET_B = _params(1.0, [0.0, 4.0, 0.0])  # Argmax differs from online's.


# ---------------------------------------------------------------- references


def np_huber(x, delta):
  a = np.abs(x)
  return np.where(a <= delta, 0.5 * x**2, delta * (a - 0.5 * delta))


def np_log_softmax(x):
  x = np.asarray(x, np.float64)
  return x - x.max() - np.log(np.sum(np.exp(x - x.max())))


def np_log_softmax_last(x):
  return np.apply_along_axis(np_log_softmax, -1, x)


def np_weights(probability, beta):
  w = (1.0 / np.asarray(probability, np.float64)) ** beta
  return w / w.max()


def np_apply(params, obs):
  return params['w'] * np.asarray(obs, np.float64) + params['b']


def ref_double_q_td(q_tm1, a, r, d, q_t_value, q_t_selector):
  td = np.zeros(len(a))
  for i in range(len(a)):
    a_t = np.argmax(q_t_selector[i])
    td[i] = r[i] + d[i] * q_t_value[i, a_t] - q_tm1[i, a[i]]
  return td


def ref_munchausen_td(q_tm1, qt_tm1, qt_t, a, r, d, tau, alpha, clip_min):
  td = np.zeros(len(a))
  for i in range(len(a)):
    bonus = min(max(tau * np_log_softmax(qt_tm1[i] / tau)[a[i]], clip_min), 0)
    z = qt_t[i] / tau
    soft_v = tau * (z.max() + np.log(np.sum(np.exp(z - z.max()))))
    td[i] = r[i] + alpha * bonus + d[i] * soft_v - q_tm1[i, a[i]]
  return td


def ref_project(z, probs, support):
  """Spreads each mass probs[j] at z[j] linearly onto its two neighbours."""
  m = np.zeros(len(support))
  for zj, pj in zip(np.clip(z, support[0], support[-1]), probs):
    i = min(np.searchsorted(support, zj, side='right') - 1, len(support) - 2)
    frac = (zj - support[i]) / (support[i + 1] - support[i])
    m[i] += pj * (1 - frac)
    m[i + 1] += pj * frac
  return m


def ref_c51(logits_tm1, a, r, d, logits_t, q_t_selector, support):
  out = np.zeros(len(a))
  for i in range(len(a)):
    logits = logits_t[i, np.argmax(q_t_selector[i])]
    probs = np.exp(np_log_softmax(logits))
    m = ref_project(r[i] + d[i] * support, probs, support)
    out[i] = -np.sum(m * np_log_softmax(logits_tm1[i, a[i]]))
  return out


def ref_qr(dist_tm1, a, r, d, dist_t, kappa):
  k = dist_tm1.shape[-1]
  taus = (np.arange(k) + 0.5) / k
  out = np.zeros(len(a))
  for i in range(len(a)):
    target = r[i] + d[i] * dist_t[i, np.argmax(dist_t[i].mean(-1))]
    for src in range(k):
      for j in range(k):
        delta = target[j] - dist_tm1[i, a[i], src]
        h = np_huber(delta, kappa) if kappa > 0 else abs(delta)
        out[i] += abs(taus[src] - (delta < 0)) * h / k
  return out


def _random_batch(rng, shape, n_actions, probability=None):
  b = shape[0]
  return _batch(
    obs=rng.normal(size=shape),
    action=rng.integers(0, n_actions, size=b),
    reward=rng.uniform(-2, 2, size=b),
    discount=np.array([0.9, 0.0, 0.5][:b]),
    next_obs=rng.normal(size=shape),
    probability=probability,
  )


# --------------------------------------------------------------------- tests


class ImportanceWeightsTest(parameterized.TestCase):
  @parameterized.parameters(
    (0.5, [math.sqrt(0.5), 1.0, 1.0]),  # (1/p)**0.5 = [1.41, 2, 2] / 2.
    (1.0, [0.5, 1.0, 1.0]),  # 1/p = [2, 4, 4] / 4.
    (0.0, [1.0, 1.0, 1.0]),
  )
  def test_normalized_by_max(self, beta, expected):
    w = q_parts.importance_weights(np.array([0.5, 0.25, 0.25]), beta)
    # Acme's DQN form: no offset on p (tests/fidelity has R2D2's).
    np.testing.assert_allclose(w, expected, rtol=1e-6)
    self.assertEqual(w.dtype, jnp.float32)

  def test_offset(self):
    # (1 / (p + .5))**1 = [1, 4/3, 4/3] / (4/3).
    w = q_parts.importance_weights(np.array([0.5, 0.25, 0.25]), 1.0, 0.5)
    np.testing.assert_allclose(w, [0.75, 1.0, 1.0], rtol=1e-6)
    with self.assertRaisesRegex(ValueError, 'offset'):
      q_parts.importance_weights(np.array([0.5]), 1.0, -1e-6)

  @parameterized.parameters(0.6, 2.0)
  def test_underflowed_probability_gives_finite_weights(self, beta):
    # p = 0 counts as float32's smallest normal (~1.2e-38): it gets 1, the
    # other (1.2e-38 / .5)**beta, tiny but finite (1 / 0 would give NaN).
    w = q_parts.importance_weights(np.array([0.0, 0.5], np.float32), beta)
    self.assertTrue(np.all(np.isfinite(w)))
    np.testing.assert_allclose(w, [1.0, 0.0], atol=1e-20)


class QLearningTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_hand_values_with_clipping_and_terminal(self):
    # Q_target(s') = 2 * next_obs, max = [2, 10, 10]; rewards clip to
    # [0.5, 1, -1]; row 1 is terminal. Targets [2.3, 1, 4], Q(s, a) [3, 0, 2]:
    # td = [-0.7, 1, 2], Huber = [0.245, 0.5, 1.5], mean = 0.748333.
    loss_fn = functools.partial(q_learning.QLearning(), Q_NET)
    loss, extra = self.variant(loss_fn)(ONLINE, TARGET_X2, Q_BATCH, KEY)
    np.testing.assert_allclose(loss, 2.245 / 3, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['loss'], 2.245 / 3, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['abs_td'], 3.7 / 3, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['q_mean'], 5 / 3, rtol=1e-6)
    self.assertIsNone(extra.priorities)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(None, math.inf)
  def test_squared_loss_without_clipping(self, off):
    # Unclipped targets [2.3, 3, 3]: td = [-0.7, 3, 1]; 0.5 * td**2 summed is
    # 0.245 + 4.5 + 0.5 = 5.245.
    loss_fn = functools.partial(q_learning.QLearning(off, off), Q_NET)
    loss, _ = self.variant(loss_fn)(ONLINE, TARGET_X2, Q_BATCH, KEY)
    np.testing.assert_allclose(loss, 5.245 / 3, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_gradient_by_hand(self):
    # dL/dQ(s, a) = -clip(td, -1, 1) / 3 = [0.7, -1, -1] / 3 at actions
    # [2, 0, 1] with obs[a] = [3, 0, 2]: dL/dw = (2.1 - 2) / 3, dL/db as below.
    def loss(params, target_params):
      return q_learning.QLearning()(Q_NET, params, target_params, Q_BATCH, KEY)[
        0
      ]

    grads = self.variant(jax.grad(loss, argnums=(0, 1)))(ONLINE, TARGET_X2)
    np.testing.assert_allclose(grads[0]['w'], 0.1 / 3, atol=1e-6)
    np.testing.assert_allclose(grads[0]['b'], [-1 / 3, -1 / 3, 0.7 / 3], 1e-5)
    np.testing.assert_allclose(grads[1]['w'], 0.0)
    np.testing.assert_allclose(grads[1]['b'], [0.0, 0.0, 0.0])

  def test_terminal_ignores_next_observation(self):
    loss_fn = q_learning.QLearning()
    other = Q_BATCH._replace(
      data=Q_BATCH.data._replace(
        next_observation=Q_BATCH.data.next_observation * [[1], [-7], [1]]
      )
    )
    a, _ = loss_fn(Q_NET, ONLINE, TARGET_X2, Q_BATCH, KEY)
    b, _ = loss_fn(Q_NET, ONLINE, TARGET_X2, other, KEY)
    np.testing.assert_allclose(a, b, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_matches_numpy_reference(self):
    rng = np.random.default_rng(1)
    batch = _random_batch(rng, (3, 3), 3)
    target = _params(0.5, rng.normal(size=3))
    t = batch.data
    q_t = np_apply(target, t.next_observation)
    td = ref_double_q_td(
      np_apply(ONLINE, t.observation),
      t.action,
      np.clip(t.reward, -1, 1),
      t.discount,
      q_t,
      q_t,
    )
    loss_fn = functools.partial(q_learning.QLearning(0.5), Q_NET)
    loss, extra = self.variant(loss_fn)(ONLINE, target, batch, KEY)
    np.testing.assert_allclose(loss, np.mean(np_huber(td, 0.5)), rtol=1e-5)
    np.testing.assert_allclose(extra.metrics['abs_td'], np.mean(abs(td)), 1e-5)


class RegularizedQLearningTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_adds_mean_q_penalty(self):
    # QLearning's 0.748333 + 0.1 * mean([3, 0, 2]) = 0.915.
    loss_fn = functools.partial(q_learning.RegularizedQLearning(), Q_NET)
    loss, extra = self.variant(loss_fn)(ONLINE, TARGET_X2, Q_BATCH, KEY)
    np.testing.assert_allclose(loss, 0.915, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['loss'], 0.915, rtol=1e-6)
    self.assertIsNone(extra.priorities)

  @chex.variants(with_jit=True, without_jit=True)
  def test_acme_settings(self):
    # Squared loss, no clipping, coeff 0.5: 5.245 / 3 + 0.5 * 5 / 3.
    loss_fn = functools.partial(
      q_learning.RegularizedQLearning(0.5, None, None), Q_NET
    )
    loss, _ = self.variant(loss_fn)(ONLINE, TARGET_X2, Q_BATCH, KEY)
    np.testing.assert_allclose(loss, (5.245 + 2.5) / 3, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_penalty_gradient(self):
    # QLearning's gradient plus 0.1 * d mean(Q(s, a)): dw += 0.1 * 5 / 3 and
    # each b[a] += 0.1 / 3.
    def loss(params, target_params):
      loss_fn = q_learning.RegularizedQLearning()
      return loss_fn(Q_NET, params, target_params, Q_BATCH, KEY)[0]

    grads = self.variant(jax.grad(loss, argnums=(0, 1)))(ONLINE, TARGET_X2)
    np.testing.assert_allclose(grads[0]['w'], 0.6 / 3, rtol=1e-5)
    np.testing.assert_allclose(grads[0]['b'], [-0.3, -0.3, 0.8 / 3], 1e-5)
    np.testing.assert_allclose(grads[1]['b'], [0.0, 0.0, 0.0])


class MunchausenQLearningTest(chex.TestCase):
  # B=1, A=2. tau=1, pi_target(s) = softmax([0, ln 3]) = [1/4, 3/4], a=0;
  # Q_target(s') = [0, 0] so the soft value is ln 2; Q(s, a) = 0 online.
  BATCH = _batch(
    obs=[[0.0, math.log(3.0)]],
    action=[0],
    reward=[0.5],
    discount=[0.5],
    next_obs=[[0.0, 0.0]],
  )

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(
    # 0.5 + 0.9 * ln(1/4) + 0.5 * ln 2 = -0.401091 (no clipping).
    (-1e3, 0.5 + 0.9 * math.log(0.25) + 0.5 * math.log(2.0)),
    # clip(ln(1/4), -1, 0) = -1: 0.5 - 0.9 + 0.5 * ln 2 = -0.053426.
    (-1.0, 0.5 - 0.9 + 0.5 * math.log(2.0)),
  )
  def test_log_policy_bonus_and_clip(self, clip_value_min, td):
    loss_fn = q_learning.MunchausenQLearning(
      entropy_temperature=1.0, clip_value_min=clip_value_min
    )
    online, target = _params(0.0, [0.0, 0.0]), _params(1.0, [0.0, 0.0])
    loss, extra = self.variant(functools.partial(loss_fn, Q_NET))(
      online, target, self.BATCH, KEY
    )
    np.testing.assert_allclose(loss, 0.5 * td**2, rtol=1e-5)
    np.testing.assert_allclose(extra.metrics['abs_td'], abs(td), rtol=1e-5)
    self.assertIsNone(extra.priorities)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(-1e3, -0.3)
  def test_matches_numpy_reference(self, clip_value_min):
    rng = np.random.default_rng(2)
    batch = _random_batch(rng, (3, 3), 3)
    online = _params(1.0, rng.normal(size=3))
    target = _params(0.7, rng.normal(size=3))
    t = batch.data
    qt_tm1 = np_apply(target, t.observation)
    bonus = 0.5 * np.array([np_log_softmax(q / 0.5) for q in qt_tm1])
    if clip_value_min > -1:  # The clip must bite for this case to mean much.
      self.assertLess(bonus[np.arange(3), t.action].min(), clip_value_min)
    td = ref_munchausen_td(
      np_apply(online, t.observation),
      qt_tm1,
      np_apply(target, t.next_observation),
      t.action,
      np.clip(t.reward, -1, 1),
      t.discount,
      tau=0.5,
      alpha=0.9,
      clip_min=clip_value_min,
    )
    loss_fn = q_learning.MunchausenQLearning(0.5, 0.9, clip_value_min)
    loss, _ = self.variant(functools.partial(loss_fn, Q_NET))(
      online, target, batch, KEY
    )
    np.testing.assert_allclose(loss, np.mean(np_huber(td, 1.0)), rtol=1e-5)

  def test_hard_limit_is_q_learning(self):
    # alpha = 0 and tau -> 0: the soft value becomes the max, as in DQN.
    loss_fn = q_learning.MunchausenQLearning(1e-3, 0.0)
    loss, _ = loss_fn(Q_NET, ONLINE, TARGET_X2, Q_BATCH, KEY)
    np.testing.assert_allclose(loss, 2.245 / 3, rtol=1e-4)


class PrioritizedDoubleQLearningTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_online_selects_target_evaluates(self):
    # Online argmax at s' = [0, 0, 2]; target Q(s') = next_obs + [0, 4, 0]
    # there is [1, 5, 5] (plain max would take 4 in row 0). Clipped targets
    # [0.5 + 0.9, 1, -1 + 2.5] minus Q(s, a) [3, 0, 2]: td = [-1.6, 1, -0.5].
    # Weights for p = [.5, .25, .25], beta .5: [0.7071, 1, 1]; Huber
    # [1.1, 0.5, 0.125].
    batch = Q_BATCH._replace(probability=np.array([0.5, 0.25, 0.25]))
    loss_fn = q_learning.PrioritizedDoubleQLearning(0.5)
    loss, extra = self.variant(functools.partial(loss_fn, Q_NET))(
      ONLINE, TARGET_B, batch, KEY
    )
    np.testing.assert_allclose(extra.priorities, [1.6, 1.0, 0.5], rtol=1e-6)
    expected = (math.sqrt(0.5) * 1.1 + 0.5 + 0.125) / 3
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['abs_td'], 3.1 / 3, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_matches_numpy_reference(self):
    rng = np.random.default_rng(3)
    probability = np.array([0.1, 0.3, 0.6])
    batch = _random_batch(rng, (3, 3), 3, probability)
    online = _params(1.0, rng.normal(size=3))
    target = _params(-1.0, rng.normal(size=3))
    t = batch.data
    td = ref_double_q_td(
      np_apply(online, t.observation),
      t.action,
      np.clip(t.reward, -1, 1),
      t.discount,
      np_apply(target, t.next_observation),
      np_apply(online, t.next_observation),
    )
    expected = np.mean(np_weights(probability, 0.2) * np_huber(td, 1.0))
    loss_fn = q_learning.PrioritizedDoubleQLearning()
    loss, extra = self.variant(functools.partial(loss_fn, Q_NET))(
      online, target, batch, KEY
    )
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(extra.priorities, np.abs(td), rtol=1e-5)


# C51, B=3, A=2, K=3 on ATOMS [-1, 0, 1]. Online logits at the taken action
# are [0, 1, 2]: log-probs [0, 1, 2] - ln(1 + e + e^2) = [-2.4076, -1.4076,
# -0.4076], Q(s, a) = (e^2 - 1) / (1 + e + e^2) = 0.575213. Target logits are
# b alone: action 0 uniform (Q 0), action 1 peaked on atom 1 (Q ~ 1); the
# online network prefers action 0 at s', so double Q bootstraps on uniform.
C51_BATCH = _batch(
  obs=[[[0, 1, 2], [0, 0, 0]], [[0, 0, 0], [0, 1, 2]], [[0, 1, 2], [3, 3, 3]]],
  action=[0, 1, 0],
  reward=[0.5, -0.25, 3.0],  # The last one clips to 1.
  discount=[0.5, 0.0, 0.9],
  next_obs=[[[0, 0, 1], [1, 0, 0]]] * 3,
  probability=[0.2, 0.4, 0.4],
)
C51_TARGET = _params(0.0, [[0, 0, 0], [0, 0, 5]])
LSE = math.log(1 + math.e + math.e**2)


class PrioritizedCategoricalDoubleQLearningTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_projection_by_hand(self):
    # Shifted uniform masses r + d * z, projected on [-1, 0, 1]:
    #   [0, .5, 1]            -> [0, .5, .5]
    #   terminal, [-.25] * 3  -> [.25, .75, 0]
    #   [.1, 1, 1.9] clipped  -> [0, .3, .7]  (.1 puts .9 on 0, .1 on 1)
    # Cross-entropies against log-probs [-LSE, 1 - LSE, 2 - LSE].
    ce = [
      LSE - 1.5,
      0.25 * LSE + 0.75 * (LSE - 1),
      0.3 * (LSE - 1) + 0.7 * (LSE - 2),
    ]
    loss_fn = distributional.PrioritizedCategoricalDoubleQLearning(1.0)
    loss, extra = self.variant(functools.partial(loss_fn, C51_NET))(
      _params(1.0, np.zeros((2, 3))), C51_TARGET, C51_BATCH, KEY
    )
    np.testing.assert_allclose(extra.priorities, ce, rtol=1e-5)
    # beta = 1: weights 1/p = [5, 2.5, 2.5] / 5.
    expected = (ce[0] + 0.5 * ce[1] + 0.5 * ce[2]) / 3
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    q_sa = (math.e**2 - 1) / math.exp(LSE)
    np.testing.assert_allclose(extra.metrics['q_mean'], q_sa, rtol=1e-5)
    # Expected-value TD: [0.5, -0.25, 1] + 0 - Q(s, a).
    abs_td = np.mean(np.abs(np.array([0.5, -0.25, 1.0]) - q_sa))
    np.testing.assert_allclose(extra.metrics['abs_td'], abs_td, rtol=1e-5)

  def test_projection_matches_rlax(self):
    rng = np.random.default_rng(7)
    z_q = jnp.asarray([-2.0, -0.5, 0.0, 1.0, 3.0])  # Uneven gaps.
    z_p = jnp.asarray(rng.uniform(-4, 5, size=(6, 4)), jnp.float32)
    probs = jax.nn.softmax(jnp.asarray(rng.normal(size=(6, 4)), jnp.float32))
    want = jax.vmap(rlax.categorical_l2_project, in_axes=(0, 0, None))(
      z_p, probs, z_q
    )
    got = distributional.l2_project(z_p, probs, z_q)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)

  @chex.variants(with_jit=True, without_jit=True)
  def test_matches_numpy_reference(self):
    rng = np.random.default_rng(4)
    probability = np.array([0.5, 0.3, 0.2])
    batch = _random_batch(rng, (3, 2, 3), 2, probability)
    online = _params(1.0, rng.normal(size=(2, 3)))
    target = _params(2.0, rng.normal(size=(2, 3)))
    t = batch.data
    online_t = np.exp(np_log_softmax_last(np_apply(online, t.next_observation)))
    selector = np.sum(online_t * ATOMS, axis=-1)
    ce = ref_c51(
      np_apply(online, t.observation),
      t.action,
      np.clip(t.reward, -1, 1),
      t.discount,
      np_apply(target, t.next_observation),
      selector,
      ATOMS.astype(np.float64),
    )
    loss_fn = distributional.PrioritizedCategoricalDoubleQLearning()
    loss, extra = self.variant(functools.partial(loss_fn, C51_NET))(
      online, target, batch, KEY
    )
    np.testing.assert_allclose(extra.priorities, ce, rtol=1e-5)
    expected = np.mean(np_weights(probability, 0.2) * ce)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


# QR-DQN, B=3, A=2, K=3, taus [1/6, 1/2, 5/6]. Online quantiles at the taken
# action are [0, 1, 2]; target quantiles are b: action 1 = [-2, 2, 6] has the
# larger mean, so it is bootstrapped on.
QR_BATCH = _batch(
  obs=[[[0, 1, 2], [9, 9, 9]], [[0, 1, 2], [9, 9, 9]], [[5, 5, 5], [0, 1, 2]]],
  action=[0, 0, 1],
  reward=[1.0, 0.0, 3.0],  # Not clipped.
  discount=[0.0, 0.5, 0.0],
  next_obs=np.zeros((3, 2, 3)),
)
QR_TARGET = _params(0.0, [[0, 0, 0], [-2, 2, 6]])


class QrDqnTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_quantile_huber_with_batch_discount(self):
    # Row 0, terminal, targets [1] * 3: deltas [1, 0, -1] by source quantile,
    #   Huber .5 weighted 1/6 twice: 1/6.
    # Row 1, targets 0.5 * [-2, 2, 6] = [-1, 1, 3]:
    #   src 0 (tau 1/6): deltas [-1, 1, 3] -> (.5 * 5/6 + .5/6 + 2.5/6) / 3
    #   src 1 (tau 1/2): deltas [-2, 0, 2] -> (1.5 + 0 + 1.5) / 2 / 3
    #   src 2 (tau 5/6): deltas [-3, -1, 1] -> (2.5/6 + .5/6 + .5 * 5/6) / 3
    #   = 11/36 + 1/2 + 11/36 = 10/9.
    # Row 2, terminal, targets [3] * 3: deltas [3, 2, 1],
    #   2.5/6 + 1.5/2 + .5 * 5/6 = 19/12.
    loss_fn = functools.partial(distributional.QrDqn(), QR_NET)
    loss, extra = self.variant(loss_fn)(
      _params(1.0, np.zeros((2, 3))), QR_TARGET, QR_BATCH, KEY
    )
    np.testing.assert_allclose(loss, (1 / 6 + 10 / 9 + 19 / 12) / 3, 1e-5)
    self.assertIsNone(extra.priorities)
    # Means: Q(s, a) = 1 each; TD [1 - 1, 0 + .5 * 2 - 1, 3 - 1].
    np.testing.assert_allclose(extra.metrics['q_mean'], 1.0, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['abs_td'], 2 / 3, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0.0, 1.0, 2.0)
  def test_matches_numpy_reference(self, kappa):
    rng = np.random.default_rng(5)
    batch = _random_batch(rng, (3, 2, 3), 2)
    online = _params(1.0, rng.normal(size=(2, 3)))
    target = _params(1.5, rng.normal(size=(2, 3)))
    t = batch.data
    per_example = ref_qr(
      np_apply(online, t.observation),
      t.action,
      t.reward,
      t.discount,
      np_apply(target, t.next_observation),
      kappa,
    )
    loss_fn = functools.partial(distributional.QrDqn(kappa), QR_NET)
    loss, _ = self.variant(loss_fn)(online, target, batch, KEY)
    np.testing.assert_allclose(loss, np.mean(per_example), rtol=1e-5)

  @parameterized.parameters(0.0, 1.0, 2.0)
  def test_value_and_gradient_match_rlax(self, kappa):
    # The loss carries its own gradient (a custom VJP): it must be autodiff
    # of rlax's loss, through a batch that is no multiple of the loop's step.
    rng = np.random.default_rng(6)
    theta = jnp.asarray(rng.normal(size=(7, 5)) * 2, jnp.float32)
    target = jnp.asarray(rng.normal(size=(7, 5)) * 2, jnp.float32)
    taus = (jnp.arange(5) + 0.5) / 5
    cotangent = jnp.asarray(rng.uniform(size=7), jnp.float32)

    def ours(theta, target):
      return distributional.quantile_huber_loss(theta, target, kappa)

    def reference(theta, target):
      one = functools.partial(rlax.quantile_regression_loss, huber_param=kappa)
      return jax.vmap(one, in_axes=(0, None, 0))(theta, taus, target)

    for fn in (ours, jax.jit(ours)):
      got, vjp = jax.vjp(fn, theta, target)
      want, ref_vjp = jax.vjp(reference, theta, target)
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(
        vjp(cotangent)[0], ref_vjp(cotangent)[0], rtol=1e-5, atol=1e-6
      )
      np.testing.assert_array_equal(vjp(cotangent)[1], 0)

  def test_needs_distributional_head(self):
    with self.assertRaisesRegex(ValueError, 'QrDqn needs .* dist'):
      distributional.QrDqn()(Q_NET, ONLINE, ONLINE, Q_BATCH, KEY)
    with self.assertRaisesRegex(ValueError, 'atoms'):
      distributional.PrioritizedCategoricalDoubleQLearning()(
        QR_NET, ONLINE, ONLINE, QR_BATCH, KEY
      )


_ALL_LOSSES = (
  ('q', q_learning.QLearning(), Q_NET, Q_BATCH, TARGET_B),
  ('reg', q_learning.RegularizedQLearning(), Q_NET, Q_BATCH, TARGET_B),
  ('munchausen', q_learning.MunchausenQLearning(), Q_NET, Q_BATCH, TARGET_B),
  ('double', q_learning.PrioritizedDoubleQLearning(), Q_NET, Q_BATCH, TARGET_B),
  (
    'c51',
    distributional.PrioritizedCategoricalDoubleQLearning(),
    C51_NET,
    C51_BATCH,
    C51_TARGET,
  ),
  ('qr', distributional.QrDqn(), QR_NET, QR_BATCH, QR_TARGET),
)


class GradientTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.named_parameters(*_ALL_LOSSES)
  def test_gradient_only_through_params(self, loss_fn, net, batch, target):
    shape = np.shape(target['b'])
    online = _params(0.8, np.linspace(-1, 1, np.prod(shape)).reshape(shape))

    def loss(params, target_params):
      return loss_fn(net, params, target_params, batch, KEY)[0]

    grads = self.variant(jax.grad(loss, argnums=(0, 1)))(online, target)
    for leaf in jax.tree.leaves(grads[1]):
      np.testing.assert_array_equal(leaf, np.zeros_like(leaf))
    self.assertGreater(
      max(np.abs(g).max() for g in jax.tree.leaves(grads[0])), 0
    )


class ValidationTest(parameterized.TestCase):
  @parameterized.parameters(
    (q_learning.QLearning, {'huber_loss_parameter': 0.0}),
    (q_learning.QLearning, {'max_abs_reward': -1.0}),
    (q_learning.RegularizedQLearning, {'regularizer_coeff': -0.1}),
    (q_learning.MunchausenQLearning, {'entropy_temperature': 0.0}),
    (q_learning.MunchausenQLearning, {'munchausen_coefficient': 1.5}),
    (q_learning.MunchausenQLearning, {'clip_value_min': 1.0}),
    (
      q_learning.PrioritizedDoubleQLearning,
      {'importance_sampling_exponent': -1},
    ),
    (
      distributional.PrioritizedCategoricalDoubleQLearning,
      {'importance_sampling_exponent': math.nan},
    ),
    (distributional.QrDqn, {'huber_param': -1.0}),
  )
  def test_rejects(self, cls, kwargs):
    (name,) = kwargs
    with self.assertRaisesRegex(ValueError, name):
      cls(**kwargs)

  def test_accepts_disabled_knobs(self):
    q_learning.QLearning(huber_loss_parameter=None, max_abs_reward=math.inf)
    q_learning.MunchausenQLearning(munchausen_coefficient=0.0, clip_value_min=0)
    distributional.QrDqn(huber_param=0.0)


if __name__ == '__main__':
  absltest.main()
