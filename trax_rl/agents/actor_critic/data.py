"""Trajectories packed into flat step arrays, and minibatches of their steps.

The actor-critic agents train on the steps of their stored trajectories.
After each collection those steps are packed end to end into flat arrays
once, on the host (`pack_trajectories`), padded to a power of two so that
jit compiles for few sizes (`pad_to_bucket`), and minibatches are gathered
from them by index (`minibatch_indices`).
"""

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from trax_rl import advantages
from trax_rl.losses import actor_critic as ac_losses
from trax_rl.losses import value_estimates

# agent_info key of the sampled, unclipped continuous actions.
UNCLIPPED_ACTION = 'unclipped_action'


class EpochData(NamedTuple):
  """Steps of many trajectories packed end to end, `[N, ...]`."""

  observation: Any  # [N, ...] s_t
  action: Any  # [N, ...] a_t as sampled (unclipped)
  reward: Any  # [N]
  terminal: Any  # [N] 1 where the episode terminated at step t
  boundary: Any  # [N] 1 where the trajectory ends otherwise (bootstrap)
  next_observation: Any  # [N, ...] s_{t+1}
  dist_inputs: Any  # [N, I] the behaviour policy's distribution inputs
  mask: Any  # [N] 1 for real steps, 0 for padding


def concatenate(parts: Sequence[EpochData]) -> EpochData:
  """The steps of `parts` (at least one) end to end, in order."""
  return EpochData(*[np.concatenate(f) for f in zip(*parts)])


def pack_trajectories(
  trajectories: Sequence[Any], n_inputs: int, example_observation: np.ndarray
) -> EpochData:
  """Packs trajectories' steps end to end (numpy, on the host).

  Args:
    trajectories: `Trajectory`s; empty ones are skipped.
    n_inputs: size of dist_inputs (zeros where a trajectory has none, as
      for the random initial trajectories).
    example_observation: one observation, for the shapes of an empty pack.

  Returns:
    EpochData of N = total steps, mask all ones.
  """
  parts = []
  for traj in trajectories:
    n = traj.n_steps
    if not n:
      continue
    state = traj.state_dict()
    obs = state['observations']
    info = state['agent_info']
    action = info.get(UNCLIPPED_ACTION, state['actions'])
    dist_inputs = info.get('dist_inputs')
    if dist_inputs is None:
      dist_inputs = np.zeros((n, n_inputs), np.float32)
    terminal = np.zeros(n, np.float32)
    boundary = np.zeros(n, np.float32)
    (terminal if traj.terminated else boundary)[n - 1] = 1.0
    parts.append(
      EpochData(
        obs[:n],
        np.asarray(action),
        state['rewards'],
        terminal,
        boundary,
        obs[1:],
        np.asarray(dist_inputs, np.float32).reshape(n, n_inputs),
        np.ones(n, np.float32),
      )
    )
  if not parts:
    obs = np.zeros((0,) + np.shape(example_observation), np.float32)
    z = np.zeros(0, np.float32)
    return EpochData(obs, z, z, z, z, obs, np.zeros((0, n_inputs)), z)
  return concatenate(parts)


def pad_epoch_data(data: EpochData, size: int) -> EpochData:
  """Pads every field with zeros to `size` steps (mask 0 there)."""

  def pad(x):
    x = np.asarray(x)
    out = np.zeros((size,) + x.shape[1:], x.dtype)
    out[: len(x)] = x
    return out

  return EpochData(*[pad(x) for x in data])


def bucket_size(n: int, minimum: int = 1) -> int:
  """n rounded up to a power of two, so jit compiles for few sizes."""
  return 1 << max(int(np.ceil(np.log2(max(n, minimum, 1)))), 0)


def pad_to_bucket(data: EpochData) -> EpochData:
  """Pads data to its `bucket_size`."""
  return pad_epoch_data(data, bucket_size(data.mask.shape[0]))


def minibatch_indices(
  rng: np.random.Generator, n_valid: int, n_steps: int, batch_size: int
) -> np.ndarray:
  """[n_steps, batch_size] indices: passes over shuffled 0..n_valid-1."""
  n_valid = max(n_valid, 1)
  needed = n_steps * batch_size
  passes = [rng.permutation(n_valid) for _ in range(-(-needed // n_valid))]
  return np.concatenate(passes)[:needed].reshape(n_steps, batch_size)


def advantages_and_targets(
  estimator: advantages.Estimator,
  margin: int,
  gamma: float,
  data: EpochData,
  values: jax.Array,
  next_values: jax.Array,
) -> tuple[jax.Array, jax.Array]:
  """`value_estimates.advantages_and_targets` of packed data.

  Args:
    estimator: an estimator bound to gamma and margin.
    margin: the estimator's margin.
    gamma: the discount.
    data: the packed steps, `[N, ...]`.
    values: [N] V(s_t).
    next_values: [N] V(s_{t+1}).

  Returns:
    (advantages [N], value targets [N]).
  """
  return value_estimates.advantages_and_targets(
    estimator,
    margin,
    gamma,
    data.reward,
    data.terminal,
    data.boundary,
    data.mask,
    values,
    next_values,
  )


def policy_minibatches(
  distribution: Any,
  data: EpochData,
  adv: jax.Array,
  targets: jax.Array,
) -> Callable[[jax.Array], ac_losses.PolicyBatch]:
  """`make_batch(i)`: the `PolicyBatch` of steps i [B] of packed data.

  Args:
    distribution: the policy's action distribution (for the behaviour
      policy's log-probs of the stored dist_inputs).
    data: the packed steps, `[N, ...]`.
    adv: [N] advantages.
    targets: [N] value targets.

  Returns:
    The function from indices to minibatches.
  """
  old_log_prob = distribution.log_prob(data.dist_inputs, data.action)
  return lambda i: ac_losses.PolicyBatch(
    data.observation[i],
    data.action[i],
    adv[i],
    old_log_prob[i],
    data.mask[i],
    targets[i],
  )
