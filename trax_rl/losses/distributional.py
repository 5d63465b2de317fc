"""Acme-family distributional Q losses: C51 double Q and QR-DQN.

Same calling convention and conventions as `q_learning`: the network's
`QOutput` carries `dist` (and `atoms` for C51), the batch discount already
holds gamma**k * (1 - terminated).
"""

import dataclasses
import functools
import math

import chex
import jax
import jax.numpy as jnp

from trax_rl import types, validation
from trax_rl.losses import q_parts


@dataclasses.dataclass(frozen=True)
class PrioritizedCategoricalDoubleQLearning(q_parts.DeterministicLoss):
  """C51 with double-Q action selection and importance weights.

  Bellemare et al., 2017, "A Distributional Perspective on Reinforcement
  Learning". The target distribution of the target network at the online
  network's greedy a' is shifted by r + d * z, projected onto the support
  and matched by cross-entropy. Priorities are the per-example loss, and the
  importance weights `(1 / p)**beta / max((1 / p)**beta)` (no offset on p),
  as Acme's `PrioritizedCategoricalDoubleQLearning`.

  Attributes:
    importance_sampling_exponent: beta of `q_parts.importance_weights`, >= 0.
    max_abs_reward: reward clipping bound; None or inf disables clipping.
  """

  importance_sampling_exponent: float = 0.2
  max_abs_reward: float | None = 1.0

  def __post_init__(self):
    q_parts.check_shared_fields(self)

  def loss(self, network, params, target_params, batch) -> types.LossOutput:
    t = batch.data
    online = network.apply(params, t.observation)
    target = network.apply(target_params, t.next_observation)
    q_t_selector = network.apply(params, t.next_observation).q_values
    q_parts.require_dist(online, type(self).__name__, atoms=True)
    q_parts.require_dist(target, type(self).__name__, atoms=True)
    chex.assert_rank([online.dist, target.dist, online.atoms], [3, 3, 1])
    action, reward, discount = q_parts.transition_inputs(
      t, online.q_values, self.max_abs_reward
    )
    a_t = jnp.argmax(q_t_selector, axis=-1)
    # rlax's categorical_double_q_learning, batched instead of vmapped per
    # example (faster on CPU; the tests hold the numbers to rlax's).
    p_t = jax.nn.softmax(q_parts.select(target.dist, a_t))  # [B, N]
    z_t = reward[:, None] + discount[:, None] * target.atoms[None, :]
    projected = jax.lax.stop_gradient(l2_project(z_t, p_t, online.atoms))
    log_p = jax.nn.log_softmax(q_parts.select(online.dist, action))
    per_example = -jnp.sum(projected * log_p, axis=-1)  # [B]
    weights = q_parts.importance_weights(
      batch.probability, self.importance_sampling_exponent
    )
    loss = jnp.mean(weights * per_example)
    q_sa = q_parts.select(online.q_values, action)
    td = reward + discount * q_parts.select(target.q_values, a_t) - q_sa
    metrics = q_parts.td_metrics(loss, td, q_sa)
    return loss, types.LossExtra(metrics, priorities=jnp.abs(per_example))


@dataclasses.dataclass(frozen=True)
class QrDqn(q_parts.DeterministicLoss):
  """Quantile-regression DQN.

  Dabney et al., 2018, "Distributional Reinforcement Learning with Quantile
  Regression" (https://arxiv.org/abs/1710.10044). The K quantiles of the
  network's `dist` sit at midpoints tau_i = (i + 0.5) / K; the target is
  r + d * theta_target(s', a') at a' greedy for the target network's mean,
  and the loss is rlax's quantile Huber loss (summed over i, averaged over
  target quantiles and the batch). As Acme, rewards are not clipped; unlike
  Acme, the bootstrap uses the batch discount.

  Metrics: Acme's `mean_loss` (the loss), plus those of every Q loss here
  ('loss', 'abs_td', 'q_mean'). 'loss' is the same number, and the one
  `supervised.update.make_update_fn` writes over it is too.

  Attributes:
    huber_param: kappa of the quantile Huber loss, >= 0; 0 gives the plain
      quantile (pinball) loss.
  """

  huber_param: float = 1.0

  def __post_init__(self):
    validation.check_non_negative('huber_param', self.huber_param)

  def loss(self, network, params, target_params, batch) -> types.LossOutput:
    t = batch.data
    online = network.apply(params, t.observation)
    target = network.apply(target_params, t.next_observation)
    q_parts.require_dist(online, type(self).__name__, atoms=False)
    q_parts.require_dist(target, type(self).__name__, atoms=False)
    chex.assert_rank([online.dist, target.dist], 3)
    action, reward, discount = q_parts.transition_inputs(t, online.dist, None)
    q_t = jnp.mean(target.dist, axis=-1)  # [B, A]
    theta = q_parts.select(online.dist, action)  # [B, K]
    target_quantiles = jax.lax.stop_gradient(
      reward[:, None]
      + discount[:, None] * q_parts.select(target.dist, jnp.argmax(q_t, -1))
    )
    per_example = quantile_huber_loss(theta, target_quantiles, self.huber_param)
    loss = jnp.mean(per_example)
    q_sa = q_parts.select(jnp.mean(online.dist, axis=-1), action)
    td = reward + discount * jnp.max(q_t, axis=-1) - q_sa
    metrics = dict(q_parts.td_metrics(loss, td, q_sa), mean_loss=loss)
    return loss, types.LossExtra(metrics=metrics)


def l2_project(z_p: jax.Array, probs: jax.Array, z_q: jax.Array) -> jax.Array:
  """Projects distributions on supports z_p onto the support z_q.

  rlax's `categorical_l2_project` (Rowland et al., 2018), batched: each
  mass moves to the two neighbouring atoms of z_q in proportion to its
  distance from them; masses outside [z_q[0], z_q[-1]] go to the end atom.

  Args:
    z_p: [B, N] the support of each example's distribution.
    probs: [B, N] its probabilities.
    z_q: [M] the target support, increasing.

  Returns:
    [B, M] the projected probabilities.
  """
  z_p = jnp.clip(z_p, z_q[0], z_q[-1])[:, None, :]  # [B, 1, N]

  def inverse(gap):  # 1 / gap between neighbours, 0 past either end.
    return jnp.where(gap > 0, 1.0 / jnp.where(gap > 0, gap, 1.0), 0.0)

  above = inverse(jnp.roll(z_q, -1) - z_q)[None, :, None]  # [1, M, 1]
  below = inverse(z_q - jnp.roll(z_q, 1))[None, :, None]
  delta = z_p - z_q[None, :, None]  # [B, M, N]
  scaled = jnp.where(delta >= 0, delta * above, -delta * below)
  return jnp.einsum('bmn,bn->bm', jnp.clip(1.0 - scaled, 0.0, 1.0), probs)


# Examples per step of the quantile loss's loop: each step's [chunk, K, K]
# temporaries stay in cache, where the whole batch's [B, K, K] would not.
_QUANTILE_CHUNK = 4


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def quantile_huber_loss(
  theta: jax.Array, target: jax.Array, huber_param: float
) -> jax.Array:
  """Per-example quantile Huber loss of quantiles theta towards target.

  rlax's `quantile_regression_loss` over a batch: with tau_i = (i + .5) / K
  and delta_ij = target_j - theta_i, the loss is
  sum_i mean_j |tau_i - 1{delta_ij < 0}| * huber(delta_ij), huber with
  parameter kappa (|delta| for kappa = 0). The target gets no gradient.
  The forward pass computes the gradient too (one pass over the [K, K]
  pairs instead of autodiff's several).

  Args:
    theta: [B, K] the predicted quantiles.
    target: [B, K] the target samples.
    huber_param: kappa >= 0.

  Returns:
    [B] the loss of each example.
  """
  return _quantile_loss_and_grad(theta, target, huber_param)[0]


def _quantile_loss_and_grad(theta, target, huber_param):
  b, k = theta.shape
  chunk = math.gcd(b, _QUANTILE_CHUNK)
  taus = (jnp.arange(k, dtype=theta.dtype) + 0.5) / k

  def part(xs):
    theta, target = xs  # [chunk, K]
    delta = target[:, None, :] - theta[:, :, None]  # [chunk, i, j]
    weight = jnp.where(delta < 0, 1.0 - taus[:, None], taus[:, None])
    if huber_param > 0:
      slope = jnp.clip(delta, -huber_param, huber_param)  # d huber / d delta
      # rlax's huber: .5 q^2 + kappa (|x| - q), q = min(|x|, kappa).
      huber = slope * (delta - 0.5 * slope)
    else:
      slope = jnp.sign(delta)
      huber = jnp.abs(delta)
    loss = jnp.sum(jnp.mean(weight * huber, axis=-1), axis=-1)
    return loss, -jnp.mean(weight * slope, axis=-1)  # d loss / d theta_i

  split = lambda x: x.reshape(b // chunk, chunk, k)
  loss, grad = jax.lax.map(part, (split(theta), split(target)))
  return loss.reshape(b), grad.reshape(b, k)


def _quantile_bwd(huber_param, grad_theta, cotangent):
  del huber_param
  return cotangent[:, None] * grad_theta, jnp.zeros_like(grad_theta)


quantile_huber_loss.defvjp(_quantile_loss_and_grad, _quantile_bwd)
