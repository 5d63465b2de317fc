"""The R2D2 loss: burn-in, then transformed n-step double Q-learning.

Kapturowski et al., 2019, "Recurrent Experience Replay in Distributed
Reinforcement Learning". Semantics follow Acme's `R2D2Learner`, with three
deliberate differences:

- The core states after the burn-in carry no gradient (the paper's intent;
  Acme lets the gradient flow back through the burn-in unroll).
- Padding is masked: steps with mask 0 add nothing to the loss or the
  priorities, and an episode's final observation is bootstrapped from when
  the episode was truncated (Acme's zero padding gives padded steps TD
  errors of their own).
- `Segment.discount` already holds gamma * (1 - terminated), so the loss
  never sees gamma.

As Acme's R2D2 learner (and unlike its DQN losses), the importance weights
add 1e-6 to every sampling probability: `(1 / (p + 1e-6))**beta`, normalized
by the largest.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import rlax

from trax_rl import types, validation
from trax_rl.losses import q_parts

# Acme R2D2's offset on each sampling probability (its DQN losses have none).
_PROBABILITY_OFFSET = 1e-6


def signed_hyperbolic_pair() -> rlax.TxPair:
  """R2D2's value transform and its inverse (Pohlen et al., 2018).

  h(x) = sign(x) (sqrt(|x| + 1) - 1) + 1e-3 x. Gin:
  `R2D2Loss.value_transform = @signed_hyperbolic_pair()`.
  """
  return rlax.SIGNED_HYPERBOLIC_PAIR


def identity_pair() -> rlax.TxPair:
  """No value transform. Gin: `R2D2Loss.value_transform = @identity_pair()`."""
  return rlax.IDENTITY_PAIR


def mix_priorities(
  abs_td: jax.Array, mask: jax.Array, max_priority_weight: float
) -> jax.Array:
  """R2D2's sequence priorities: eta * max|td| + (1 - eta) * mean|td|.

  Args:
    abs_td: [T, B] absolute TD errors.
    mask: [T, B] 1 for real steps; the mean and max run over these only.
    max_priority_weight: eta in [0, 1].

  Returns:
    [B] priorities (0 for a sequence without real steps).
  """
  abs_td = abs_td * mask
  count = jnp.maximum(jnp.sum(mask, axis=0), 1.0)
  mean = jnp.sum(abs_td, axis=0) / count
  return (
    max_priority_weight * jnp.max(abs_td, axis=0)
    + (1.0 - max_priority_weight) * mean
  )


def _last_valid(values: jax.Array, valid: jax.Array) -> jax.Array:
  """values[T, B, ...] with each step t replaced by the latest valid s <= t."""
  steps = jnp.arange(valid.shape[0])[:, None]
  index = jax.lax.cummax(jnp.where(valid, steps, 0), axis=0)  # [T, B]
  index = index.reshape(index.shape + (1,) * (values.ndim - 2))
  return jnp.take_along_axis(values, index, axis=0)


@dataclasses.dataclass(frozen=True)
class R2D2Loss(q_parts.DeterministicLoss):
  """R2D2's recurrent, prioritized, transformed n-step double Q loss.

  Called as `loss(network, params, target_params, batch, key)` with a
  `base.RecurrentNetwork` and `batch.data` a `types.Segment` `[B, L, ...]`.
  The loss is the importance-weighted batch mean of 0.5 * sum over the trace
  of squared TD errors; priorities are `mix_priorities` of the TD errors.

  Attributes:
    burn_in_length: leading steps of each segment that only warm up the
      online and target core states (no loss, no gradient).
    bootstrap_n: n of the n-step return.
    importance_sampling_exponent: beta of the prioritized-replay weights
      `(1 / (p + 1e-6))**beta / max`, Acme R2D2's (`q_parts.importance_weights`
      with offset 1e-6).
    max_priority_weight: eta in the priority mix (`mix_priorities`).
    value_transform: the pair `(h, h^-1)` the n-step targets are formed
      under: `signed_hyperbolic_pair()` (R2D2's h) or `identity_pair()`.
    use_core_state: start from the stored core state; False starts each
      segment from the zero state.
    clip_rewards: clip rewards to [-max_abs_reward, max_abs_reward].
    max_abs_reward: the clipping bound.
  """

  burn_in_length: int = 40
  bootstrap_n: int = 5
  importance_sampling_exponent: float = 0.6
  max_priority_weight: float = 0.9
  value_transform: rlax.TxPair = rlax.SIGNED_HYPERBOLIC_PAIR
  use_core_state: bool = True
  clip_rewards: bool = False
  max_abs_reward: float = 1.0

  def __post_init__(self):
    if not (
      isinstance(self.value_transform, tuple)
      and len(self.value_transform) == 2
      and all(callable(f) for f in self.value_transform)
    ):
      raise ValueError(
        'value_transform must be a pair of functions (h, h^-1), e.g. '
        f'@signed_hyperbolic_pair(), got {self.value_transform!r}'
      )
    validation.check_count('burn_in_length', self.burn_in_length, 0)
    validation.check_count('bootstrap_n', self.bootstrap_n, 1)
    validation.check_unit('max_priority_weight', self.max_priority_weight)
    validation.check_non_negative(
      'importance_sampling_exponent', self.importance_sampling_exponent
    )
    validation.check_positive('max_abs_reward', self.max_abs_reward)

  def loss(self, network, params, target_params, batch) -> types.LossOutput:
    segment = batch.data
    n_batch = segment.action.shape[0]
    time_major = lambda x: jnp.swapaxes(x, 0, 1)
    observation = time_major(segment.observation)  # [L, B, ...]
    if segment.action.shape[1] <= self.burn_in_length + 1:
      raise ValueError(
        f'segments of {segment.action.shape[1]} steps leave no trace after a '
        f'burn-in of {self.burn_in_length}'
      )
    if self.use_core_state:
      state = segment.core_state
    else:
      state = network.initial_state(n_batch)
    online_state = target_state = state
    burn = self.burn_in_length
    if burn:
      _, online_state = network.unroll(params, observation[:burn], state)
      _, target_state = network.unroll(target_params, observation[:burn], state)
      # The burn-in only produces start states; it is not learned from.
      online_state = jax.lax.stop_gradient(online_state)
      target_state = jax.lax.stop_gradient(target_state)
    observation = observation[burn:]
    online_out, _ = network.unroll(params, observation, online_state)
    target_out, _ = network.unroll(target_params, observation, target_state)
    online_q, target_q = online_out.q_values, target_out.q_values  # [T+1,B,A]
    action = time_major(segment.action)[burn:]
    reward = time_major(segment.reward)[burn:].astype(online_q.dtype)
    discount = time_major(segment.discount)[burn:].astype(online_q.dtype)
    mask = time_major(segment.mask)[burn:].astype(online_q.dtype)
    if self.clip_rewards:
      reward = jnp.clip(reward, -self.max_abs_reward, self.max_abs_reward)
    # Past the last real observation (an episode's final one) only padding
    # follows: bootstrap from that observation there, as rlax does at the
    # end of a sequence (reward 0, discount 1 from then on).
    real = mask > 0
    observed = real.at[1:].set(real[1:] | real[:-1])
    target_q = _last_valid(target_q, observed)
    selector = _last_valid(jnp.argmax(online_q, axis=-1), observed)
    reward = jnp.where(real, reward, 0.0)
    discount = jnp.where(real, discount, 1.0)
    td_fn = jax.vmap(
      functools.partial(
        rlax.transformed_n_step_q_learning,
        n=self.bootstrap_n,
        tx_pair=self.value_transform,
      ),
      in_axes=1,
      out_axes=1,
    )
    td = td_fn(
      online_q[:-1],
      action[:-1],
      target_q[1:],
      selector[1:],
      reward[:-1],
      discount[:-1],
    )  # [T, B]
    td = td * mask[:-1]
    sequence_loss = 0.5 * jnp.sum(jnp.square(td), axis=0)  # [B]
    weights = q_parts.importance_weights(
      batch.probability,
      self.importance_sampling_exponent,
      offset=_PROBABILITY_OFFSET,
    )
    loss = jnp.mean(weights * sequence_loss)
    abs_td = jnp.abs(td)
    priorities = mix_priorities(abs_td, mask[:-1], self.max_priority_weight)
    n_real = jnp.maximum(jnp.sum(mask[:-1]), 1.0)
    q_sa = jnp.take_along_axis(online_q, action[..., None], axis=-1)[..., 0]
    metrics = {  # Means over real steps; Q values are transformed ones.
      'abs_td': jnp.sum(abs_td) / n_real,
      'q_mean': jnp.sum(q_sa * mask) / jnp.maximum(jnp.sum(mask), 1.0),
    }
    return loss, types.LossExtra(metrics, jax.lax.stop_gradient(priorities))
