"""Acme-family expected-value Q losses (DQN, DQNReg, M-DQN, PER double Q).

Every loss is a frozen dataclass of its own hyperparameters, called as

  loss(network, params, target_params, batch, key) -> (loss, LossExtra)

where `network.apply(params, obs[B, ...])` returns a `types.QOutput` and
`batch.data` is a `types.Transition` whose `discount` already holds
gamma**k * (1 - terminated): losses bootstrap with it as given and never see
gamma (Acme multiplies by its own `discount` field; we do not, and unlike
Acme's QR-DQN ours bootstraps with the batch discount too).

Conventions shared by the losses of this module:

- Bootstrap targets never carry gradient: the gradient of every loss with
  respect to `target_params` is zero.
- `max_abs_reward` clips rewards to [-max_abs_reward, max_abs_reward] before
  the target is formed; None or inf disables clipping. As in Acme, all losses
  but QR-DQN have it (Acme's DQNReg does not clip: pass None for that).
- `huber_loss_parameter` is the Huber delta; None or inf gives the plain
  squared loss 0.5 * td**2 (the Huber loss's limit).
- The distributional losses (C51, QR-DQN) are in `distributional`; the
  shared building blocks in `q_parts`.
- Only the prioritized losses weight examples by `importance_weights`
  (Acme's DQN form, `(1 / p)**beta` normalized by its maximum) and
  return `LossExtra.priorities` ([B], for `DeviceTable.mutate_priorities`). The
  others return priorities=None, so a learner never writes priorities that
  its loss does not correct for.
- Metrics are scalars: 'loss', 'abs_td' (mean |TD error| of expected
  Q-values; a diagnostic for the distributional losses) and 'q_mean' (mean
  online Q(s, a) of the batch's actions).
"""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import rlax

from trax_rl import types, validation
from trax_rl.losses import q_parts


@dataclasses.dataclass(frozen=True)
class QLearning(q_parts.DeterministicLoss):
  """Q-learning towards the target network's greedy value (DQN).

  Mnih et al., 2015, "Human-level control through deep reinforcement
  learning". td = r + d * max_a' Q_target(s', a') - Q(s, a); loss = mean of
  Huber(td). Acme's QLearning uses the square loss: pass
  `huber_loss_parameter=None` for it (0.5 * td**2; Acme omits the 0.5).

  Attributes:
    huber_loss_parameter: Huber delta; None or inf for the squared loss.
    max_abs_reward: reward clipping bound; None or inf disables clipping.
  """

  huber_loss_parameter: float | None = 1.0
  max_abs_reward: float | None = 1.0

  def __post_init__(self):
    q_parts.check_shared_fields(self)

  def loss(self, network, params, target_params, batch) -> types.LossOutput:
    td, q_sa = q_parts.q_learning_td(
      network, params, target_params, batch.data, self.max_abs_reward
    )
    loss = jnp.mean(q_parts.td_loss(td, self.huber_loss_parameter))
    return loss, types.LossExtra(metrics=q_parts.td_metrics(loss, td, q_sa))


@dataclasses.dataclass(frozen=True)
class RegularizedQLearning(q_parts.DeterministicLoss):
  """Q-learning plus a penalty on Q(s, a) (DQNReg).

  Co-Reyes et al., 2021, "Evolving Reinforcement Learning Algorithms"
  (https://arxiv.org/abs/2101.03958): loss = regularizer_coeff * mean Q(s, a)
  + mean TD loss. The paper and Acme use the squared TD loss and no reward
  clipping: `huber_loss_parameter=None, max_abs_reward=None`.

  Attributes:
    regularizer_coeff: weight of the mean Q(s, a) penalty, >= 0.
    huber_loss_parameter: Huber delta; None or inf for the squared loss.
    max_abs_reward: reward clipping bound; None or inf disables clipping.
  """

  regularizer_coeff: float = 0.1
  huber_loss_parameter: float | None = 1.0
  max_abs_reward: float | None = 1.0

  def __post_init__(self):
    validation.check_non_negative('regularizer_coeff', self.regularizer_coeff)
    q_parts.check_shared_fields(self)

  def loss(self, network, params, target_params, batch) -> types.LossOutput:
    td, q_sa = q_parts.q_learning_td(
      network, params, target_params, batch.data, self.max_abs_reward
    )
    loss = jnp.mean(q_parts.td_loss(td, self.huber_loss_parameter))
    loss += self.regularizer_coeff * jnp.mean(q_sa)
    return loss, types.LossExtra(metrics=q_parts.td_metrics(loss, td, q_sa))


@dataclasses.dataclass(frozen=True)
class MunchausenQLearning(q_parts.DeterministicLoss):
  """Munchausen Q-learning (M-DQN).

  Vieillard et al., 2020, "Munchausen Reinforcement Learning"
  (https://arxiv.org/abs/2007.14430). With pi = softmax(Q_target(s) / tau),
  the target is
    r + alpha * clip(tau * log pi(a|s), clip_value_min, 0)
      + d * tau * logsumexp(Q_target(s') / tau),
  the last term being the soft value sum_a' pi(a'|s') (Q - tau log pi)(s', a').

  Attributes:
    entropy_temperature: tau, > 0.
    munchausen_coefficient: alpha in [0, 1]; 0 gives soft Q-learning.
    clip_value_min: lower clip of the scaled log-policy bonus, <= 0; keeps
      log pi -> -inf from blowing up the target.
    huber_loss_parameter: Huber delta; None or inf for the squared loss.
    max_abs_reward: reward clipping bound; None or inf disables clipping.
  """

  entropy_temperature: float = 0.03
  munchausen_coefficient: float = 0.9
  clip_value_min: float = -1e3
  huber_loss_parameter: float | None = 1.0
  max_abs_reward: float | None = 1.0

  def __post_init__(self):
    validation.check_positive('entropy_temperature', self.entropy_temperature)
    validation.check_unit('munchausen_coefficient', self.munchausen_coefficient)
    validation.check_non_positive('clip_value_min', self.clip_value_min)
    q_parts.check_shared_fields(self)

  def loss(self, network, params, target_params, batch) -> types.LossOutput:
    t = batch.data
    tau = self.entropy_temperature
    q_tm1 = network.apply(params, t.observation).q_values
    q_target_tm1 = network.apply(target_params, t.observation).q_values
    q_target_t = network.apply(target_params, t.next_observation).q_values
    chex.assert_rank([q_tm1, q_target_tm1, q_target_t], 2)
    action, reward, discount = q_parts.transition_inputs(
      t, q_tm1, self.max_abs_reward
    )
    log_pi = jax.nn.log_softmax(q_target_tm1 / tau, axis=-1)
    bonus = jnp.clip(
      tau * q_parts.select(log_pi, action), self.clip_value_min, 0.0
    )
    soft_v_t = tau * jax.nn.logsumexp(q_target_t / tau, axis=-1)
    target = reward + self.munchausen_coefficient * bonus + discount * soft_v_t
    q_sa = q_parts.select(q_tm1, action)
    td = jax.lax.stop_gradient(target) - q_sa
    loss = jnp.mean(q_parts.td_loss(td, self.huber_loss_parameter))
    return loss, types.LossExtra(metrics=q_parts.td_metrics(loss, td, q_sa))


@dataclasses.dataclass(frozen=True)
class PrioritizedDoubleQLearning(q_parts.DeterministicLoss):
  """Double Q-learning with importance weights; priorities are |td|.

  van Hasselt et al., 2016, "Deep Reinforcement Learning with Double
  Q-learning"; Schaul et al., 2016, "Prioritized Experience Replay". The
  online network picks a' = argmax Q(s', .), the target network values it.
  Examples are weighted as Acme's `PrioritizedDoubleQLearning`:
  `(1 / p)**beta / max((1 / p)**beta)`, with no offset on p (R2D2's 1e-6 is
  only in `r2d2.R2D2Loss`).

  Attributes:
    importance_sampling_exponent: beta of `q_parts.importance_weights`, >= 0.
    huber_loss_parameter: Huber delta; None or inf for the squared loss.
    max_abs_reward: reward clipping bound; None or inf disables clipping.
  """

  importance_sampling_exponent: float = 0.2
  huber_loss_parameter: float | None = 1.0
  max_abs_reward: float | None = 1.0

  def __post_init__(self):
    q_parts.check_shared_fields(self)

  def loss(self, network, params, target_params, batch) -> types.LossOutput:
    t = batch.data
    q_tm1 = network.apply(params, t.observation).q_values
    q_t_value = network.apply(target_params, t.next_observation).q_values
    q_t_selector = network.apply(params, t.next_observation).q_values
    chex.assert_rank([q_tm1, q_t_value, q_t_selector], 2)
    action, reward, discount = q_parts.transition_inputs(
      t, q_tm1, self.max_abs_reward
    )
    td = jax.vmap(rlax.double_q_learning)(
      q_tm1, action, reward, discount, q_t_value, q_t_selector
    )
    weights = q_parts.importance_weights(
      batch.probability, self.importance_sampling_exponent
    )
    loss = jnp.mean(weights * q_parts.td_loss(td, self.huber_loss_parameter))
    metrics = q_parts.td_metrics(loss, td, q_parts.select(q_tm1, action))
    return loss, types.LossExtra(metrics, priorities=jnp.abs(td))
