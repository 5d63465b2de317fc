"""Acme-family value losses for replay learners (DQN, DQNReg, M-DQN, ...).

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
- Only the prioritized losses weight examples by `importance_weights` and
  return `LossExtra.priorities` ([B], for `Table.mutate_priorities`). The
  others return priorities=None, so a learner never writes priorities that
  its loss does not correct for.
- Metrics are scalars: 'loss', 'abs_td' (mean |TD error| of expected
  Q-values; a diagnostic for the distributional losses) and 'q_mean' (mean
  online Q(s, a) of the batch's actions).
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, Protocol

import chex
import jax
import jax.numpy as jnp
import rlax

from trax_rl import types
from trax_rl.networks import base as networks_base

LossOutput = tuple[jax.Array, types.LossExtra]


class LossFn(Protocol):
  """What a value learner calls on each batch."""

  def __call__(
    self,
    network: networks_base.Network,
    params: types.Params,
    target_params: types.Params,
    batch: types.Batch,
    key: types.PRNGKey,
  ) -> LossOutput:
    """Computes the loss of one batch.

    Args:
      network: pure `apply(params, obs[B, ...]) -> QOutput`.
      params: online parameters; the loss is differentiated w.r.t. these.
      target_params: target-network parameters for bootstrapping.
      batch: `Batch(data=Transition[B], probability[B])`.
      key: PRNG key for stochastic networks (unused by deterministic ones).

    Returns:
      (scalar loss, LossExtra(metrics, priorities[B] or None)).
    """


def importance_weights(probability: types.Array, exponent: float) -> jax.Array:
  """Prioritized-replay importance weights, normalized by their maximum.

  w_i = (1 / p_i)**exponent / max_j (1 / p_j)**exponent, as in Schaul et al.,
  2016, "Prioritized Experience Replay" and Acme. The table size factor of the
  paper cancels in the normalization.

  Args:
    probability: [B] sampling probability of each item, all > 0.
    exponent: the importance-sampling exponent beta: 0 gives uniform weights,
      1 fully corrects for non-uniform sampling.

  Returns:
    [B] float32 weights in (0, 1]; the rarest item gets 1.
  """
  weights = (1.0 / jnp.asarray(probability, jnp.float32)) ** exponent
  return weights / jnp.max(weights)


# (predicate, what the message says a valid value is).
_POSITIVE_OR_NONE = (lambda x: x is None or x > 0, '> 0, or None to disable it')
_FINITE_NON_NEGATIVE = (lambda x: 0 <= x < math.inf, 'finite and >= 0')
_FINITE_POSITIVE = (lambda x: 0 < x < math.inf, 'finite and > 0')
_FINITE_NON_POSITIVE = (lambda x: -math.inf < x <= 0, 'finite and <= 0')
_UNIT = (lambda x: 0 <= x <= 1, 'in [0, 1]')


def _check(name: str, value: Any, rule: tuple[Callable, str]) -> None:
  """Raises a one-line ValueError unless `rule[0](value)`."""
  ok, requirement = rule
  if not ok(value):
    raise ValueError(f'{name} must be {requirement}; got {value!r}.')


_SHARED_FIELD_RULES = {
  'huber_loss_parameter': _POSITIVE_OR_NONE,
  'max_abs_reward': _POSITIVE_OR_NONE,
  'importance_sampling_exponent': _FINITE_NON_NEGATIVE,
}


def _check_shared_fields(loss: Any) -> None:
  """Checks the fields that several losses have in common."""
  for name, rule in _SHARED_FIELD_RULES.items():
    if hasattr(loss, name):
      _check(name, getattr(loss, name), rule)


def _clip_reward(reward: jax.Array, max_abs_reward: float | None) -> jax.Array:
  if max_abs_reward is None or math.isinf(max_abs_reward):
    return reward
  return jnp.clip(reward, -max_abs_reward, max_abs_reward)


def _td_loss(td: jax.Array, huber_loss_parameter: float | None) -> jax.Array:
  if huber_loss_parameter is None or math.isinf(huber_loss_parameter):
    return 0.5 * jnp.square(td)
  return rlax.huber_loss(td, huber_loss_parameter)


def _select(values: jax.Array, action: jax.Array) -> jax.Array:
  """values[B, A, ...], action[B] -> values[b, action[b], ...]."""
  return values[jnp.arange(values.shape[0]), action]


def _inputs(
  transition: types.Transition,
  q_tm1: jax.Array,
  max_abs_reward: float | None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Checked (action[B] int32, clipped reward[B], discount[B])."""
  action = jnp.asarray(transition.action, jnp.int32)
  reward = jnp.asarray(transition.reward, q_tm1.dtype)
  discount = jnp.asarray(transition.discount, q_tm1.dtype)
  chex.assert_shape([action, reward, discount], (q_tm1.shape[0],))
  return action, _clip_reward(reward, max_abs_reward), discount


def _metrics(loss: jax.Array, td: jax.Array, q_sa: jax.Array) -> types.Metrics:
  return {
    'loss': loss,
    'abs_td': jnp.mean(jnp.abs(td)),
    'q_mean': jnp.mean(q_sa),
  }


def _require_dist(output: types.QOutput, loss_name: str, atoms: bool) -> None:
  """Fails at trace time when the network has no distributional head."""
  if output.dist is None or (atoms and output.atoms is None):
    head = 'dist and atoms (a C51 head)' if atoms else 'dist (a quantile head)'
    raise ValueError(
      f'{loss_name} needs a network whose QOutput has {head}; this network '
      'returned dist=None or atoms=None.'
    )


def _q_learning_td(
  network: networks_base.Network,
  params: types.Params,
  target_params: types.Params,
  transition: types.Transition,
  max_abs_reward: float | None,
) -> tuple[jax.Array, jax.Array]:
  """TD errors [B] towards r + d * max_a' Q_target(s', a'), and Q(s, a) [B]."""
  q_tm1 = network.apply(params, transition.observation).q_values
  q_t = network.apply(target_params, transition.next_observation).q_values
  chex.assert_rank([q_tm1, q_t], 2)
  action, reward, discount = _inputs(transition, q_tm1, max_abs_reward)
  td = jax.vmap(rlax.q_learning)(q_tm1, action, reward, discount, q_t)
  return td, _select(q_tm1, action)


@dataclasses.dataclass(frozen=True)
class QLearning:
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
    _check_shared_fields(self)

  def __call__(
    self,
    network: networks_base.Network,
    params: types.Params,
    target_params: types.Params,
    batch: types.Batch,
    key: types.PRNGKey,
  ) -> LossOutput:
    """See `LossFn.__call__`."""
    del key  # Deterministic networks.
    td, q_sa = _q_learning_td(
      network, params, target_params, batch.data, self.max_abs_reward
    )
    loss = jnp.mean(_td_loss(td, self.huber_loss_parameter))
    return loss, types.LossExtra(metrics=_metrics(loss, td, q_sa))


@dataclasses.dataclass(frozen=True)
class RegularizedQLearning:
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
    _check('regularizer_coeff', self.regularizer_coeff, _FINITE_NON_NEGATIVE)
    _check_shared_fields(self)

  def __call__(
    self,
    network: networks_base.Network,
    params: types.Params,
    target_params: types.Params,
    batch: types.Batch,
    key: types.PRNGKey,
  ) -> LossOutput:
    """See `LossFn.__call__`."""
    del key  # Deterministic networks.
    td, q_sa = _q_learning_td(
      network, params, target_params, batch.data, self.max_abs_reward
    )
    loss = jnp.mean(_td_loss(td, self.huber_loss_parameter))
    loss += self.regularizer_coeff * jnp.mean(q_sa)
    return loss, types.LossExtra(metrics=_metrics(loss, td, q_sa))


@dataclasses.dataclass(frozen=True)
class MunchausenQLearning:
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
    _check('entropy_temperature', self.entropy_temperature, _FINITE_POSITIVE)
    _check('munchausen_coefficient', self.munchausen_coefficient, _UNIT)
    _check('clip_value_min', self.clip_value_min, _FINITE_NON_POSITIVE)
    _check_shared_fields(self)

  def __call__(
    self,
    network: networks_base.Network,
    params: types.Params,
    target_params: types.Params,
    batch: types.Batch,
    key: types.PRNGKey,
  ) -> LossOutput:
    """See `LossFn.__call__`."""
    del key  # Deterministic networks.
    t = batch.data
    tau = self.entropy_temperature
    q_tm1 = network.apply(params, t.observation).q_values
    q_target_tm1 = network.apply(target_params, t.observation).q_values
    q_target_t = network.apply(target_params, t.next_observation).q_values
    chex.assert_rank([q_tm1, q_target_tm1, q_target_t], 2)
    action, reward, discount = _inputs(t, q_tm1, self.max_abs_reward)
    log_pi = jax.nn.log_softmax(q_target_tm1 / tau, axis=-1)
    bonus = jnp.clip(tau * _select(log_pi, action), self.clip_value_min, 0.0)
    soft_v_t = tau * jax.nn.logsumexp(q_target_t / tau, axis=-1)
    target = reward + self.munchausen_coefficient * bonus + discount * soft_v_t
    q_sa = _select(q_tm1, action)
    td = jax.lax.stop_gradient(target) - q_sa
    loss = jnp.mean(_td_loss(td, self.huber_loss_parameter))
    return loss, types.LossExtra(metrics=_metrics(loss, td, q_sa))


@dataclasses.dataclass(frozen=True)
class PrioritizedDoubleQLearning:
  """Double Q-learning with importance weights; priorities are |td|.

  van Hasselt et al., 2016, "Deep Reinforcement Learning with Double
  Q-learning"; Schaul et al., 2016, "Prioritized Experience Replay". The
  online network picks a' = argmax Q(s', .), the target network values it.

  Attributes:
    importance_sampling_exponent: beta of `importance_weights`, >= 0.
    huber_loss_parameter: Huber delta; None or inf for the squared loss.
    max_abs_reward: reward clipping bound; None or inf disables clipping.
  """

  importance_sampling_exponent: float = 0.2
  huber_loss_parameter: float | None = 1.0
  max_abs_reward: float | None = 1.0

  def __post_init__(self):
    _check_shared_fields(self)

  def __call__(
    self,
    network: networks_base.Network,
    params: types.Params,
    target_params: types.Params,
    batch: types.Batch,
    key: types.PRNGKey,
  ) -> LossOutput:
    """See `LossFn.__call__`."""
    del key  # Deterministic networks.
    t = batch.data
    q_tm1 = network.apply(params, t.observation).q_values
    q_t_value = network.apply(target_params, t.next_observation).q_values
    q_t_selector = network.apply(params, t.next_observation).q_values
    chex.assert_rank([q_tm1, q_t_value, q_t_selector], 2)
    action, reward, discount = _inputs(t, q_tm1, self.max_abs_reward)
    td = jax.vmap(rlax.double_q_learning)(
      q_tm1, action, reward, discount, q_t_value, q_t_selector
    )
    weights = importance_weights(
      batch.probability, self.importance_sampling_exponent
    )
    loss = jnp.mean(weights * _td_loss(td, self.huber_loss_parameter))
    metrics = _metrics(loss, td, _select(q_tm1, action))
    return loss, types.LossExtra(metrics, priorities=jnp.abs(td))


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
    _check_shared_fields(self)

  def __call__(
    self,
    network: networks_base.Network,
    params: types.Params,
    target_params: types.Params,
    batch: types.Batch,
    key: types.PRNGKey,
  ) -> LossOutput:
    """See `LossFn.__call__`."""
    del key  # Deterministic networks.
    t = batch.data
    online = network.apply(params, t.observation)
    target = network.apply(target_params, t.next_observation)
    q_t_selector = network.apply(params, t.next_observation).q_values
    _require_dist(online, type(self).__name__, atoms=True)
    _require_dist(target, type(self).__name__, atoms=True)
    chex.assert_rank([online.dist, target.dist, online.atoms], [3, 3, 1])
    action, reward, discount = _inputs(t, online.q_values, self.max_abs_reward)
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
    weights = importance_weights(
      batch.probability, self.importance_sampling_exponent
    )
    loss = jnp.mean(weights * per_example)
    q_sa = _select(online.q_values, action)
    a_t = jnp.argmax(q_t_selector, axis=-1)
    td = reward + discount * _select(target.q_values, a_t) - q_sa
    metrics = _metrics(loss, td, q_sa)
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
    _check('huber_param', self.huber_param, _FINITE_NON_NEGATIVE)

  def __call__(
    self,
    network: networks_base.Network,
    params: types.Params,
    target_params: types.Params,
    batch: types.Batch,
    key: types.PRNGKey,
  ) -> LossOutput:
    """See `LossFn.__call__`."""
    del key  # Deterministic networks.
    t = batch.data
    online = network.apply(params, t.observation)
    target = network.apply(target_params, t.next_observation)
    _require_dist(online, type(self).__name__, atoms=False)
    _require_dist(target, type(self).__name__, atoms=False)
    chex.assert_rank([online.dist, target.dist], 3)
    k = online.dist.shape[-1]
    taus = (jnp.arange(k, dtype=online.dist.dtype) + 0.5) / k  # [K]
    action, reward, discount = _inputs(t, online.dist, None)
    # rlax takes quantiles first: [K, A] per example.
    dist_tm1 = jnp.swapaxes(online.dist, 1, 2)
    dist_t = jnp.swapaxes(target.dist, 1, 2)
    per_example = jax.vmap(
      functools.partial(rlax.quantile_q_learning, huber_param=self.huber_param),
      in_axes=(0, None, 0, 0, 0, 0, 0),
    )(dist_tm1, taus, action, reward, discount, dist_t, dist_t)
    loss = jnp.mean(per_example)
    q_sa = _select(jnp.mean(online.dist, axis=-1), action)
    q_t = jnp.mean(target.dist, axis=-1)
    td = reward + discount * jnp.max(q_t, axis=-1) - q_sa
    return loss, types.LossExtra(metrics=_metrics(loss, td, q_sa))
