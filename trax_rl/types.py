"""Pytrees shared across trax_rl: transitions, segments, batches, outputs."""

import operator
from typing import Any, NamedTuple, Protocol

import jax
import numpy as np

Array = jax.Array | np.ndarray
PRNGKey = jax.Array
Params = Any
Metrics = dict[str, Any]


class Transition(NamedTuple):
  """One n-step transition as the adders write it into replay.

  `discount` already holds gamma**k * (1 - terminated): losses bootstrap with
  it directly and never see gamma.
  """

  observation: Array  # [B, ...] o_tm1
  action: Array  # [B] a_tm1
  reward: Array  # [B] discounted sum of the k rewards r_t .. r_{t+k-1}
  discount: Array  # [B] gamma**k * (1 - terminated)
  next_observation: Array  # [B, ...] o_{t+k}


class Segment(NamedTuple):
  """A fixed-length sequence of steps for recurrent learners (R2D2).

  Time is the leading axis inside one item (`[L, ...]`; a batch is
  `[B, L, ...]`). Step t holds observation o_t, the action a_t taken there,
  the reward r_t that followed and the discount to bootstrap from o_{t+1}.
  An episode's final observation is a step of its own with mask 0 (no action
  was taken there); steps past it are zero padding, also with mask 0.
  """

  observation: Array  # [L, ...] o_t
  action: Array  # [L] a_t
  reward: Array  # [L] r_t, received after a_t
  discount: Array  # [L] gamma * (1 - terminated after a_t)
  mask: Array  # [L] 1 where (o_t, a_t, r_t, o_{t+1}) is a real transition
  core_state: Any  # recurrent state before observation[0], e.g. [H] leaves


class Batch(NamedTuple):
  """What a learner's loss receives: sampled data and its probabilities."""

  data: Any  # a Transition or Segment with a leading batch axis [B, ...]
  probability: Array  # [B] sampling probability of each item


class LossExtra(NamedTuple):
  """Auxiliary loss outputs: metrics to log and new replay priorities."""

  metrics: Metrics
  priorities: Array | None = None  # [B] or None for non-prioritized losses


class QOutput(NamedTuple):
  """What a Q network's apply returns."""

  q_values: Array  # [B, A]
  dist: Array | None = None  # [B, A, K] C51 logits or QR-DQN quantiles
  atoms: Array | None = None  # [K] C51 support


LossOutput = tuple[jax.Array, LossExtra]


class LossFn(Protocol):
  """Every loss of trax_rl: what a `Trainer` differentiates on each batch."""

  def __call__(
    self,
    network: Any,
    params: Params,
    target_params: Params,
    batch: Any,
    key: PRNGKey,
  ) -> LossOutput:
    """Computes the loss of one batch.

    Args:
      network: the pure network (`networks.base.Network` or
        `RecurrentNetwork`).
      params: online parameters; the loss is differentiated w.r.t. these.
      target_params: target-network parameters for bootstrapping, or ().
      batch: e.g. `Batch(data=Transition[B], probability[B])` or a
        `TimeStepBatch [B, T]`.
      key: PRNG key for stochastic parts (unused by deterministic losses).

    Returns:
      (scalar loss, LossExtra(metrics, priorities[B] or None)).
    """


class Rollout(NamedTuple):
  """What every source emits: steps of N envs, fields `[T, N, ...]`.

  Time major; the device source's `rollout`, the gymnasium source's host
  envs and rollout actors all give this pytree to a program's `observe`.
  """

  observation: Any  # o_t
  action: Any  # a_t as sampled (unclipped)
  reward: Any  # r_t, float32
  terminated: Any  # bool, the episode ended naturally after a_t
  truncated: Any  # bool, it hit a time limit after a_t (bootstrap)
  next_observation: Any  # o_{t+1}; the final observation where it ended
  agent_info: dict[str, Any]  # the policy's info, e.g. dist_inputs
  episode_return: Any  # float32, the full return where an episode ended
  # bool, the step belongs to the data. Each env's valid steps are a
  # prefix of the rollout: a source pads after them (an epoch counted in
  # episodes, an actor's chunk beside other actors' envs).
  valid: Any


def read_only(attribute: str) -> property:
  """A read-only property: `seed = read_only('_seed')` reads `self._seed`."""
  return property(operator.attrgetter(attribute))
