"""Pure jnp helpers that turn `[T, N]` rollouts into training batches.

Env-major order (all steps of env 0, then env 1, ...), rewards-to-go
within trajectories, and shuffled passes over a batch's steps.
"""

import jax
import jax.numpy as jnp


def env_major(x: jax.Array) -> jax.Array:
  """`[T, N, ...]` -> `[N * T, ...]`, the steps of each env contiguous."""
  x = jnp.swapaxes(x, 0, 1)
  return x.reshape((-1,) + x.shape[2:])


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
  """`[n_steps, batch_size]` indices: passes over shuffled 0..n_valid-1
  (every index once per pass), drawn with a JAX key."""
  needed = n_steps * batch_size
  n_passes = -(-needed // n_valid)
  passes = permutations(key, n_passes, n_valid)
  return passes.reshape(-1)[:needed].reshape(n_steps, batch_size)
