"""Building blocks shared by the Q losses (`q_learning`, `distributional`).

Pure functions: importance weights, reward clipping, the TD loss, the
per-example selection of Q(s, a), the checked inputs of a transition batch
and the metrics every Q loss reports.
"""

import math
from typing import Any

import chex
import jax
import jax.numpy as jnp
import rlax

from trax_rl import types, validation
from trax_rl.networks import base as networks_base

# Probabilities are floored here: below it 1 / p is no longer finite.
_SMALLEST_PROBABILITY = float(jnp.finfo(jnp.float32).tiny)


class DeterministicLoss:
  """A `types.LossFn` of deterministic networks, which need no key.

  A subclass implements `loss(network, params, target_params, batch)`,
  with `LossFn.__call__`'s arguments but the key.
  """

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
    return self.loss(network, params, target_params, batch)

  def loss(self, network, params, target_params, batch) -> types.LossOutput:
    raise NotImplementedError


def importance_weights(
  probability: types.Array, exponent: float, offset: float = 0.0
) -> jax.Array:
  """Prioritized-replay importance weights, normalized by their maximum.

  w_i = (1 / (p_i + offset))**exponent / max_j (1 / (p_j + offset))**exponent,
  as in Schaul et al., 2016, "Prioritized Experience Replay"; the table size
  factor of the paper cancels in the normalization.

  Which source each loss follows:
  - offset 0 (the default) is Acme's DQN family: `PrioritizedDoubleQLearning`
    and `PrioritizedCategoricalDoubleQLearning` weigh by
    `(1 / p)**beta / max((1 / p)**beta)` (acme/agents/jax/dqn/losses.py).
  - offset 1e-6 is Acme's R2D2 learner, `1 / (p + 1e-6)`
    (acme/agents/jax/r2d2/learning.py); only `r2d2.R2D2Loss` passes it.

  Computed as (min_j p_j / p_i)**exponent, the same number without the
  overflow of (1 / p)**exponent. A probability below float32's smallest
  normal number (one that underflowed to 0, say) counts as that number, so
  the weights stay finite where Acme's would be NaN; no larger probability
  is affected.

  Args:
    probability: [B] sampling probability of each item, >= 0.
    exponent: the importance-sampling exponent beta: 0 gives uniform weights,
      1 fully corrects for non-uniform sampling.
    offset: added to every probability first, >= 0.

  Returns:
    [B] float32 weights in (0, 1]; the rarest item gets 1.

  Raises:
    ValueError: if offset is negative.
  """
  if not offset >= 0:
    raise ValueError(f'offset must be >= 0, got {offset!r}')
  probability = jnp.asarray(probability, jnp.float32) + offset
  probability = jnp.maximum(probability, _SMALLEST_PROBABILITY)
  return (jnp.min(probability) / probability) ** exponent


def check_shared_fields(loss: Any) -> None:
  """Checks the fields several losses share (whichever `loss` has).

  Raises:
    ValueError: naming the bad field.
  """
  for name in ('huber_loss_parameter', 'max_abs_reward'):
    if hasattr(loss, name):
      validation.check_positive_or_none(name, getattr(loss, name))
  if hasattr(loss, 'importance_sampling_exponent'):
    validation.check_non_negative(
      'importance_sampling_exponent', loss.importance_sampling_exponent
    )


def clip_reward(reward: jax.Array, max_abs_reward: float | None) -> jax.Array:
  """Rewards clipped to [-max_abs_reward, max_abs_reward]; None/inf: as is."""
  if max_abs_reward is None or math.isinf(max_abs_reward):
    return reward
  return jnp.clip(reward, -max_abs_reward, max_abs_reward)


def td_loss(td: jax.Array, huber_loss_parameter: float | None) -> jax.Array:
  """Huber(td) with that delta; None or inf: 0.5 * td**2."""
  if huber_loss_parameter is None or math.isinf(huber_loss_parameter):
    return 0.5 * jnp.square(td)
  return rlax.huber_loss(td, huber_loss_parameter)


def select(values: jax.Array, action: jax.Array) -> jax.Array:
  """values[B, A, ...], action[B] -> values[b, action[b], ...]."""
  return values[jnp.arange(values.shape[0]), action]


def transition_inputs(
  transition: types.Transition,
  q_tm1: jax.Array,
  max_abs_reward: float | None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Checked (action[B] int32, clipped reward[B], discount[B])."""
  action = jnp.asarray(transition.action, jnp.int32)
  reward = jnp.asarray(transition.reward, q_tm1.dtype)
  discount = jnp.asarray(transition.discount, q_tm1.dtype)
  chex.assert_shape([action, reward, discount], (q_tm1.shape[0],))
  return action, clip_reward(reward, max_abs_reward), discount


def td_metrics(
  loss: jax.Array, td: jax.Array, q_sa: jax.Array
) -> types.Metrics:
  """The metrics every Q loss reports: loss, mean |td| and mean Q(s, a)."""
  return {
    'loss': loss,
    'abs_td': jnp.mean(jnp.abs(td)),
    'q_mean': jnp.mean(q_sa),
  }


def require_dist(output: types.QOutput, loss_name: str, atoms: bool) -> None:
  """Fails at trace time when the network has no distributional head."""
  if output.dist is None or (atoms and output.atoms is None):
    head = 'dist and atoms (a C51 head)' if atoms else 'dist (a quantile head)'
    raise ValueError(
      f'{loss_name} needs a network whose QOutput has {head}; this network '
      'returned dist=None or atoms=None.'
    )


def q_learning_td(
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
  action, reward, discount = transition_inputs(
    transition, q_tm1, max_abs_reward
  )
  td = jax.vmap(rlax.q_learning)(q_tm1, action, reward, discount, q_t)
  return td, select(q_tm1, action)
