"""Observation normalization with running statistics as an explicit pytree.

Trax's `Normalize` layer kept the statistics as hidden layer state and updated
them only in 'collect' mode. Here the statistics are a NamedTuple that the
caller threads through: `update` while collecting, `normalize` everywhere.
Everything is pure and jittable.

The statistics start at mean 0 and variance 1 (so `normalize` is nearly the
identity before any data arrives) and then hold the exact mean and population
variance of every observation seen, merged batch by batch with Chan et al.'s
parallel formula. Once `count` reaches `sample_limit` they stop changing, as
in Trax.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from trax_rl import types


class RunningStatistics(NamedTuple):
  """Mean and population variance of the observations seen so far."""

  mean: jax.Array  # [*shape] float32
  var: jax.Array  # [*shape] float32; 1 while count is 0
  count: jax.Array  # [] int32, number of observations merged in


def init_statistics(shape: tuple[int, ...]) -> RunningStatistics:
  """Returns statistics of no data: mean 0, variance 1, count 0.

  Args:
    shape: shape of one observation.

  Returns:
    RunningStatistics with mean and var of the given shape.
  """
  return RunningStatistics(
    mean=jnp.zeros(shape, jnp.float32),
    var=jnp.ones(shape, jnp.float32),
    count=jnp.zeros((), jnp.int32),
  )


def update(
  stats: RunningStatistics,
  batch: types.Array,
  sample_limit: float = float('inf'),
  valid: types.Array | None = None,
) -> RunningStatistics:
  """Merges a batch of observations into the statistics.

  Only the first `sample_limit - stats.count` observations of the batch are
  used, so the count never exceeds `sample_limit`: the same statistics Trax's
  one-by-one updates would reach.

  Args:
    stats: the statistics so far.
    batch: [N, *shape] observations.
    sample_limit: stop updating once this many observations have been merged
      in; a Python number or a scalar array. Infinite by default.
    valid: [N] bool, the observations to merge (None: all), in order.

  Returns:
    The updated statistics (unchanged if the limit was already reached or N
    is 0).

  Raises:
    ValueError: if `batch` is not [N, *stats.mean.shape].
  """
  batch = jnp.asarray(batch, jnp.float32)
  if batch.shape[1:] != stats.mean.shape:
    raise ValueError(
      f'update expects a batch [N, *{stats.mean.shape}], '
      f'got shape {batch.shape}.'
    )
  # Weight 1 for the observations still under the limit, 0 for the rest.
  remaining = jnp.maximum(sample_limit - stats.count, 0)
  if valid is None:
    weights = jnp.arange(batch.shape[0]) < remaining
  else:
    valid = jnp.asarray(valid, bool)
    weights = valid & (jnp.cumsum(valid) <= remaining)
  weights = weights.astype(jnp.float32)
  weights = weights.reshape((-1,) + (1,) * stats.mean.ndim)

  count_a = stats.count.astype(jnp.float32)
  count_b = jnp.sum(weights)
  count = count_a + count_b
  safe_count_b = jnp.maximum(count_b, 1.0)
  safe_count = jnp.maximum(count, 1.0)

  mean_b = jnp.sum(weights * batch, axis=0) / safe_count_b
  m2_b = jnp.sum(weights * (batch - mean_b) ** 2, axis=0)
  delta = mean_b - stats.mean
  mean = stats.mean + delta * (count_b / safe_count)
  m2 = stats.var * count_a + m2_b + delta**2 * (count_a * count_b / safe_count)
  var = m2 / safe_count

  changed = count_b > 0
  return RunningStatistics(
    mean=jnp.where(changed, mean, stats.mean),
    var=jnp.where(changed, var, stats.var),
    count=stats.count + count_b.astype(jnp.int32),
  )


def normalize(
  stats: RunningStatistics,
  x: types.Array,
  epsilon: float = 1e-5,
  clip: float | None = None,
) -> jax.Array:
  """Returns (x - mean) / (std + epsilon), optionally clipped to [-clip, clip].

  Args:
    stats: the statistics to normalize with.
    x: [..., *shape] observations; any leading dimensions.
    epsilon: added to the std, so constant features do not blow up.
    clip: if not None, the bound on the absolute normalized value.

  Returns:
    [..., *shape] normalized observations, float32.
  """
  x = jnp.asarray(x, jnp.float32)
  out = (x - stats.mean) / (jnp.sqrt(stats.var) + epsilon)
  if clip is not None:
    out = jnp.clip(out, -clip, clip)
  return out
