"""Trax DQN's loss: n-step Q targets on `[B, T]` trajectory slices."""

import dataclasses

import jax
import jax.numpy as jnp
import optax

from trax_rl import advantages, types
from trax_rl.losses import q_parts
from trax_rl.networks import models


@dataclasses.dataclass(frozen=True)
class NStepValueLoss(q_parts.DeterministicLoss):
  """Trax DQN's loss on `[B, T]` trajectory slices, targets inside jit.

  Q = network output * value_scale. The target of step t < T - margin is
  `values[t] + advantage_estimator(...)[t]`, with values the target
  network's max_a Q (or, with double_dqn, its Q at the online argmax): for
  td_k(margin) the n-step return sum_{i<n} gamma**i r_{t+i} + gamma**n
  values[t+n]. The estimator gets the batch mask, so a truncated or cut
  trajectory bootstraps from the value of its final observation (the first
  padding row) and a terminated one does not. A step where the episode
  terminated targets its reward, as Trax's (`advantages.value_targets`; its
  `monte_carlo` gets there by zeroing values in place).

  Metrics, as Trax DQN's `value_mean` and `returns_mean`, are in the
  network's units: Q and targets divided by `value_scale` (Trax trains on
  `target_returns / value_scale` and averages the raw network output), so
  with `scale_value_targets` they are 1 - gamma times the Q-values'.
  - value_mean: mean network output at the batch's actions, Q(s, a) / scale.
  - returns_mean: mean target, target / scale.

  Attributes:
    advantage_estimator: `advantages` estimator built for (gamma, margin).
    margin: steps at the end of each slice that only serve the targets.
    obs_ndim: rank of one observation.
    double_dqn: pick the bootstrap action with the online network.
    smoothl1loss: Huber (delta 1) if True, else squared error.
    value_scale: the network predicts Q / value_scale.
  """

  advantage_estimator: advantages.Estimator
  margin: int
  obs_ndim: int
  double_dqn: bool = False
  smoothl1loss: bool = True
  value_scale: float = 1.0

  def loss(self, network, params, target_params, batch) -> types.LossOutput:
    """Masked mean loss of a `[B, T, ...]` TimeStepBatch."""

    def q_of(p):  # [B, T, A]
      out = models.apply_over_time(
        network.apply, p, batch.observation, self.obs_ndim
      )
      return out.q_values * self.value_scale

    q = q_of(params)
    q_target = q_of(target_params)
    if self.double_dqn:
      best = jnp.argmax(q, axis=-1)[..., None]
      values = jnp.take_along_axis(q_target, best, axis=-1)[..., 0]
    else:
      values = jnp.max(q_target, axis=-1)
    values = jax.lax.stop_gradient(values)  # [B, T]
    mask = jnp.asarray(batch.mask, jnp.float32)
    length = mask.shape[1]
    # With the mask, the first padding row (a truncated or cut trajectory's
    # final observation) is a bootstrap point, and a done one is not.
    reward = jnp.asarray(batch.reward, jnp.float32)
    done = jnp.asarray(batch.done, jnp.float32)
    advantage = self.advantage_estimator(
      reward,
      jnp.asarray(batch.return_, jnp.float32),
      values,
      done,
      jnp.asarray(batch.env_info.discount_mask, jnp.float32),
      mask=mask,
    )
    n = length - self.margin
    targets = advantages.value_targets(advantage, reward, values, done)
    targets = jax.lax.stop_gradient(targets)
    actions = jnp.asarray(batch.action[:, :n], jnp.int32)[..., None]
    q_sa = jnp.take_along_axis(q[:, :n], actions, axis=-1)[..., 0]
    error = (q_sa - targets) / self.value_scale
    if self.smoothl1loss:
      per_step = optax.huber_loss(error, delta=1.0)
    else:
      per_step = jnp.square(error)
    weights = mask[:, :n]
    total = jnp.maximum(jnp.sum(weights), 1.0)
    loss = jnp.sum(weights * per_step) / total
    # In the network's units, as Trax's metrics (see the class docstring).
    metrics = {
      'value_mean': jnp.sum(weights * q_sa) / total / self.value_scale,
      'returns_mean': jnp.sum(weights * targets) / total / self.value_scale,
    }
    return loss, types.LossExtra(metrics)
