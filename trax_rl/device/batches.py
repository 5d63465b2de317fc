"""A device rollout as the batches the gymnasium path would build (jnp).

The host path cuts the rollout of each env into trajectories at episode
ends and at the epoch's end, and batches them (`batching`). These pure
functions do the same on the device, in env-major order (all steps of env
0, then env 1, ...), so the agents' losses see the same data.
"""

import jax
import jax.numpy as jnp

from trax_rl import trajectory
from trax_rl.device import rollout


def env_major(x: jax.Array) -> jax.Array:
  """`[T, N, ...]` -> `[N * T, ...]`, the steps of each env contiguous."""
  x = jnp.swapaxes(x, 0, 1)
  return x.reshape((-1,) + x.shape[2:])


def trajectory_ends(steps: rollout.Rollout) -> jax.Array:
  """`[T, N]` bool: a trajectory ends at t (episode end or last step)."""
  ends = steps.terminated | steps.truncated
  return ends.at[-1].set(True)


def rewards_to_go(
  reward: jax.Array, ends: jax.Array, gamma: float
) -> jax.Array:
  """Discounted rewards-to-go within each trajectory, `[T, N]` (no bootstrap).

  As `trajectory.discounted_returns` of each trajectory slice.
  """

  def body(acc, x):
    r, end = x
    acc = r + gamma * acc * (1.0 - end)
    return acc, acc

  _, out = jax.lax.scan(
    body,
    jnp.zeros(reward.shape[1:], jnp.float32),
    (reward, ends.astype(jnp.float32)),
    reverse=True,
  )
  return out


def uniform_trajectory_probabilities(ends: jax.Array) -> jax.Array:
  """`[N * T]` probability of each step when a trajectory is drawn uniformly
  and then one of its steps uniformly (RLTask's uniform trajectory sampling
  with slices of length 1)."""
  flat = env_major(ends).astype(jnp.int32)
  segment = jnp.cumsum(flat) - flat  # Trajectory index of each step.
  n = flat.shape[0]
  lengths = jax.ops.segment_sum(jnp.ones(n), segment, num_segments=n)
  return 1.0 / (jnp.sum(flat) * lengths[segment])


def single_steps(
  steps: rollout.Rollout, gamma: float
) -> trajectory.TimeStepBatch:
  """Every step as a slice of length 1, `[N * T, 1, ...]`.

  Fields as `Trajectory.to_np(margin=0, gamma)` gives them: `done` marks a
  termination, `return_` is the reward-to-go within the trajectory.
  """
  returns = rewards_to_go(steps.reward, trajectory_ends(steps), gamma)

  def one(x):
    flat = env_major(x)
    return flat.reshape((flat.shape[0], 1) + flat.shape[1:])

  ones = one(jnp.ones_like(steps.reward))
  dist_inputs = steps.agent_info.get('dist_inputs')
  return trajectory.TimeStepBatch(
    observation=one(steps.observation),
    action=one(steps.action),
    reward=one(steps.reward),
    done=one(steps.terminated),
    mask=ones,
    dist_inputs=None if dist_inputs is None else one(dist_inputs),
    env_info=trajectory.EnvInfo(control_mask=ones, discount_mask=ones),
    return_=one(returns),
    agent_info={k: one(v) for k, v in steps.agent_info.items()},
  )


def permutations(key: jax.Array, count: int, n: int) -> jax.Array:
  """`[count, n]` independent uniformly random permutations of 0..n-1.

  `jax.random.permutation` sorts (key, value) pairs, which XLA's CPU sort
  does several times slower than one array of uint32: here each round
  sorts random bits with the position packed into the low bits, and a
  round's ties are broken by the previous round's random order. The
  rounds are enough that some pair ties in all of them with probability
  at most 2^-20 (2 rounds up to n = 2048); only then is the order biased.
  Past n = 2^20 the packed bits are too few: `jax.random.permutation`.
  """
  width = max(1, (n - 1).bit_length())
  free = 32 - width
  if free < 12:
    keys = jax.random.split(key, count)
    return jax.vmap(lambda k: jax.random.permutation(k, n))(keys)
  rounds = -(-(2 * width - 1 + 20) // free)
  mask = jnp.uint32((1 << width) - 1)
  position = jax.lax.broadcasted_iota(jnp.uint32, (count, n), 1)
  bits = jax.random.bits(key, (rounds, count, n))
  order = None  # The first round's ranks are the order itself.
  for r in range(rounds):
    ranked = jax.lax.sort((bits[r] & ~mask) | position, dimension=1) & mask
    order = (
      ranked if order is None else jnp.take_along_axis(order, ranked, axis=1)
    )
  return order.astype(jnp.int32)


def minibatch_indices(
  key: jax.Array, n_valid: int, n_steps: int, batch_size: int
) -> jax.Array:
  """`[n_steps, batch_size]` indices: passes over shuffled 0..n_valid-1.

  The device twin of the actor-critics' host `minibatch_indices` (same
  passes, drawn with a JAX key).
  """
  needed = n_steps * batch_size
  n_passes = -(-needed // n_valid)
  passes = permutations(key, n_passes, n_valid)
  return passes.reshape(-1)[:needed].reshape(n_steps, batch_size)
