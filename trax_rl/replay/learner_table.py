"""A replay Table set up for a learner that alternates inserts and updates."""

from trax_rl.replay import samplers, table


def make(
  max_size: int,
  sampler: samplers.Uniform | samplers.Prioritized,
  min_size: int,
  samples_per_insert: float,
  tolerance: float,
  per_call: int,
  insert_chunk: int,
  seed: int,
) -> table.Table:
  """A Table for a learner that inserts chunks and learns in between.

  Learning runs after each inserted chunk until the rate limiter stops it,
  so the limiter's window lets one chunk and one learner call through
  (wider still where `tolerance * samples_per_insert * min_size` is).

  Args:
    max_size: the table's capacity.
    sampler: how it samples.
    min_size: items before the first sample.
    samples_per_insert: the target ratio.
    tolerance: the window's half-width, as a fraction of the ratio's
      offset `samples_per_insert * min_size`.
    per_call: items one learner call samples.
    insert_chunk: items inserted between two learning phases.
    seed: the sampler's seed.
  """
  offset = samples_per_insert * min_size
  slack = tolerance * offset
  error_buffer = (
    offset - max(per_call, slack),
    offset + max(insert_chunk * samples_per_insert + per_call, slack),
  )
  return table.Table(
    max_size,
    sampler=sampler,
    min_size_to_sample=min_size,
    samples_per_insert=samples_per_insert,
    error_buffer=error_buffer,
    seed=seed,
  )
