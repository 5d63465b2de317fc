"""A replay Table set up for a learner that alternates inserts and updates."""

from collections.abc import Callable, Sequence

import numpy as np

from trax_rl.replay import samplers, table
from trax_rl.supervised import sharding


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


def insert_and_learn(
  replay: table.Table,
  n: int,
  chunk: int,
  per_call: int,
  insert: Callable[[slice, bool], None],
  learner_call: Callable[[], None],
  gather: Callable[[Sequence[int]], np.ndarray] = sharding.gather_ints,
  name: str = 'the learner',
) -> None:
  """Inserts n items in chunks, with learner calls as the limiter allows.

  Rounds of: insert chunks while the table admits them, then learner calls
  while it lets `per_call` items be sampled, until every item is in and
  the last round has learned.

  A learner across hosts (`train_rl.multihost`) has one table per process,
  limited as one: `gather` all-gathers every table's (size, inserts, items
  left) once per round, and every process makes as many learner calls
  (each a collective update) as the table with the fewest inserts allows,
  so no table is sampled past its ratio. When no table can sample and a
  process still has items its own limiter blocks, it inserts a chunk
  anyway: the tables' insert counts drift apart by what their envs
  produce, and this keeps the job moving (a single table never gets here).

  Args:
    replay: this process's table.
    n: items to insert.
    chunk: items per insert.
    per_call: items one learner call samples.
    insert: `insert(rows, enforce_limit)` puts rows of the items in.
    learner_call: samples `per_call` items and updates.
    gather: every process's values `[processes, k]` (the job's all-gather;
      tests pass their own).
    name: the learner, for the error.

  Raises:
    RuntimeError: a single table blocks both inserts and samples.
  """
  done = 0

  def insert_next(enforce_limit: bool = True) -> int:
    rows = slice(done, min(done + chunk, n))
    insert(rows, enforce_limit)
    return rows.stop

  while True:
    while done < n and replay.can_insert(min(chunk, n - done)):
      done = insert_next()
    counts = replay.counts
    job = np.asarray(gather([counts.size, counts.inserts, n - done]))
    lagging = counts._replace(
      size=int(job[:, 0].min()), inserts=int(job[:, 1].min())
    )
    calls = replay.limiter.calls_allowed(per_call, lagging)
    for _ in range(calls):
      learner_call()
    if not job[:, 2].any():
      return
    if not calls:
      if len(job) == 1:
        raise RuntimeError(
          f'{name}: the replay rate limiter blocks both inserts and samples'
        )
      if done < n:
        done = insert_next(enforce_limit=False)
