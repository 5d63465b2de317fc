"""`learner_table.insert_and_learn`: one table, and tables limited as one.

Several processes of a multi-host learner are simulated by threads whose
`gather` meets at a barrier, as `jax`'s all-gather would.
"""

import threading

import numpy as np
import pytest

from trax_rl.replay import learner_table, samplers
from trax_rl.replay import table as table_lib
from trax_rl.supervised import sharding

SPI, MIN_SIZE, PER_CALL, CHUNK = 4.0, 20, 8, 3


def _table(seed=0):
  return learner_table.make(
    1000, samplers.Uniform(), MIN_SIZE, SPI, 0.0, PER_CALL, CHUNK, seed
  )


def _run(replay, n, gather=sharding.gather_ints, forced=None):
  """insert_and_learn of n items; returns the number of learner calls."""
  calls = []

  def insert(rows, enforce_limit):
    items = np.arange(rows.start, rows.stop, dtype=np.float32)
    replay.insert_batch(items, enforce_limit=enforce_limit)
    if forced is not None and not enforce_limit:
      forced.append(rows.stop - rows.start)

  def learn():
    replay.sample(PER_CALL)  # Raises if this table is sampled past its ratio.
    calls.append(1)

  learner_table.insert_and_learn(
    replay, n, CHUNK, PER_CALL, insert, learn, gather
  )
  return len(calls)


def test_one_table_keeps_the_ratio():
  replay = _table()
  calls = sum(_run(replay, n) for n in [5, 17, 40, 0, 100, 3])
  size, inserts, samples = replay.counts
  assert inserts == 165 and calls * PER_CALL == samples
  # After the last round no further call fits.
  assert not replay.can_sample(PER_CALL)
  assert abs(samples - SPI * inserts) <= SPI * MIN_SIZE + SPI * CHUNK + PER_CALL


def test_a_blocked_table_is_an_error():
  # A window narrower than one learner call: neither side can move.
  replay = table_lib.Table(
    100, min_size_to_sample=5, samples_per_insert=1.0, error_buffer=(0.0, 2.0)
  )
  with pytest.raises(RuntimeError, match='blocks both inserts and samples'):
    _run(replay, 10)


class _Job:
  """k threads' all-gather: each call returns every thread's values."""

  def __init__(self, k):
    self._barrier = threading.Barrier(k)
    self._values = [None] * k

  def gather(self, index):
    def gather(values):
      self._values[index] = list(values)
      self._barrier.wait()
      every = np.asarray(self._values)
      self._barrier.wait()  # Nobody overwrites before all have read.
      return every

    return gather


@pytest.mark.parametrize(
  'items', [[[30, 30, 30], [30, 30, 30]], [[50, 3, 80, 0], [7, 60, 2, 90]]]
)
def test_tables_of_several_processes_learn_in_step(items):
  tables = [_table(seed=i) for i in range(len(items))]
  job = _Job(len(items))
  calls = [[] for _ in items]
  errors, forced = [], []

  def process(i):
    try:
      for n in items[i]:
        calls[i].append(_run(tables[i], n, job.gather(i), forced))
    except Exception as e:  # noqa: BLE001 - reported below
      errors.append(e)
      job._barrier.abort()

  threads = [threading.Thread(target=process, args=(i,)) for i in range(2)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout=30)
  assert not errors, errors
  # The same learner calls in every round, so the collective updates pair.
  assert calls[0] == calls[1]
  assert sum(calls[0]) > 0
  for i, replay in enumerate(tables):
    size, inserts, samples = replay.counts
    assert inserts == sum(items[i])
    # No table was sampled past its own ratio (`sample` would have raised).
    assert samples <= SPI * inserts
  # The calls follow the table with the fewest inserts.
  fewest = min(sum(n) for n in items)
  assert sum(calls[0]) * PER_CALL <= SPI * fewest
  # Uneven rounds needed inserts past a table's own limit; even ones not.
  assert bool(forced) == (items[0] != items[1])
