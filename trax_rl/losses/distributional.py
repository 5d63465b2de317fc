"""Acme-family distributional Q losses: C51 double Q and QR-DQN.

Same calling convention and conventions as `q_learning`: the network's
`QOutput` carries `dist` (and `atoms` for C51), the batch discount already
holds gamma**k * (1 - terminated).
"""

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import rlax

from trax_rl import types, validation
from trax_rl.losses import q_parts
from trax_rl.networks import base as networks_base


@dataclasses.dataclass(frozen=True)
class PrioritizedCategoricalDoubleQLearning:
  """C51 with double-Q action selection and importance weights.

  Bellemare et al., 2017, "A Distributional Perspective on Reinforcement
  Learning". The target distribution of the target network at the online
  network's greedy a' is shifted by r + d * z, projected onto the support
  and matched by cross-entropy. Priorities are the per-example loss, as Acme.

  Attributes:
    importance_sampling_exponent: beta of `importance_weights`, >= 0.
    max_abs_reward: reward clipping bound; None or inf disables clipping.
  """

  importance_sampling_exponent: float = 0.2
  max_abs_reward: float | None = 1.0

  def __post_init__(self):
    q_parts.check_shared_fields(self)

  def __call__(
    self,
    network: networks_base.Network,
    params: types.Params,
    target_params: types.Params,
    batch: types.Batch,
    key: types.PRNGKey,
  ) -> types.LossOutput:
    """See `types.LossFn.__call__`."""
    del key  # Deterministic networks.
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
    c51 = jax.vmap(
      rlax.categorical_double_q_learning, in_axes=(None, 0, 0, 0, 0, None, 0, 0)
    )
    per_example = c51(
      online.atoms,
      online.dist,
      action,
      reward,
      discount,
      target.atoms,
      target.dist,
      q_t_selector,
    )  # [B]
    weights = q_parts.importance_weights(
      batch.probability, self.importance_sampling_exponent
    )
    loss = jnp.mean(weights * per_example)
    q_sa = q_parts.select(online.q_values, action)
    a_t = jnp.argmax(q_t_selector, axis=-1)
    td = reward + discount * q_parts.select(target.q_values, a_t) - q_sa
    metrics = q_parts.td_metrics(loss, td, q_sa)
    return loss, types.LossExtra(metrics, priorities=jnp.abs(per_example))


@dataclasses.dataclass(frozen=True)
class QrDqn:
  """Quantile-regression DQN.

  Dabney et al., 2018, "Distributional Reinforcement Learning with Quantile
  Regression" (https://arxiv.org/abs/1710.10044). The K quantiles of the
  network's `dist` sit at midpoints tau_i = (i + 0.5) / K; the target is
  r + d * theta_target(s', a') at a' greedy for the target network's mean,
  and the loss is rlax's quantile Huber loss (summed over i, averaged over
  target quantiles and the batch). As Acme, rewards are not clipped; unlike
  Acme, the bootstrap uses the batch discount.

  Attributes:
    huber_param: kappa of the quantile Huber loss, >= 0; 0 gives the plain
      quantile (pinball) loss.
  """

  huber_param: float = 1.0

  def __post_init__(self):
    validation.check_non_negative('huber_param', self.huber_param)

  def __call__(
    self,
    network: networks_base.Network,
    params: types.Params,
    target_params: types.Params,
    batch: types.Batch,
    key: types.PRNGKey,
  ) -> types.LossOutput:
    """See `types.LossFn.__call__`."""
    del key  # Deterministic networks.
    t = batch.data
    online = network.apply(params, t.observation)
    target = network.apply(target_params, t.next_observation)
    q_parts.require_dist(online, type(self).__name__, atoms=False)
    q_parts.require_dist(target, type(self).__name__, atoms=False)
    chex.assert_rank([online.dist, target.dist], 3)
    k = online.dist.shape[-1]
    taus = (jnp.arange(k, dtype=online.dist.dtype) + 0.5) / k  # [K]
    action, reward, discount = q_parts.transition_inputs(t, online.dist, None)
    # rlax takes quantiles first: [K, A] per example.
    dist_tm1 = jnp.swapaxes(online.dist, 1, 2)
    dist_t = jnp.swapaxes(target.dist, 1, 2)
    per_example = jax.vmap(
      functools.partial(rlax.quantile_q_learning, huber_param=self.huber_param),
      in_axes=(0, None, 0, 0, 0, 0, 0),
    )(dist_tm1, taus, action, reward, discount, dist_t, dist_t)
    loss = jnp.mean(per_example)
    q_sa = q_parts.select(jnp.mean(online.dist, axis=-1), action)
    q_t = jnp.mean(target.dist, axis=-1)
    td = reward + discount * jnp.max(q_t, axis=-1) - q_sa
    return loss, types.LossExtra(metrics=q_parts.td_metrics(loss, td, q_sa))
