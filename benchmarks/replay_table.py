"""Throughput of the replay Table on CartPole-sized transitions.

Fills a 1M-item prioritized table with `insert_batch`, then times
`sample(256)` and `mutate_priorities` of 256 keys (one learner step's replay
work) on the full table. Prints one JSON line.

  python benchmarks/replay_table.py [--max_size=1000000] [--batch=1024]
"""

import argparse
import json
import time

import numpy as np

from trax_rl import types
from trax_rl.replay import samplers, table


def _transitions(rng: np.random.Generator, n: int) -> types.Transition:
  """A batch [n] of CartPole-sized transitions (observation [4])."""
  observation = rng.standard_normal((n, 4), dtype=np.float32)
  return types.Transition(
    observation=observation,
    action=rng.integers(0, 2, n, dtype=np.int32),
    reward=np.ones(n, np.float32),
    discount=np.full(n, 0.99, np.float32),
    next_observation=observation + np.float32(0.01),
  )


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--max_size', type=int, default=1_000_000)
  parser.add_argument('--batch', type=int, default=1024, help='insert batch')
  parser.add_argument('--sample_steps', type=int, default=2000)
  parser.add_argument('--sample_size', type=int, default=256)
  args = parser.parse_args()

  rng = np.random.default_rng(0)
  replay = table.Table(args.max_size, samplers.Prioritized(0.6), seed=0)
  # Pre-generate the data so the timings measure the table only.
  pool = _transitions(rng, args.batch * 16)
  pool_priorities = rng.random(args.batch * 16) + 0.01

  n_batches = -(-args.max_size // args.batch)
  start = time.perf_counter()
  for i in range(n_batches):
    lo = (i % 16) * args.batch
    chunk = types.Transition(*(x[lo : lo + args.batch] for x in pool))
    replay.insert_batch(chunk, pool_priorities[lo : lo + args.batch])
  insert_s = time.perf_counter() - start

  n = args.sample_size
  new_priorities = rng.random((args.sample_steps, n)) + 0.01
  sample_s = mutate_s = 0.0
  for step in range(args.sample_steps):
    t0 = time.perf_counter()
    sample = replay.sample(n)
    t1 = time.perf_counter()
    replay.mutate_priorities(sample.keys, new_priorities[step])
    mutate_s += time.perf_counter() - t1
    sample_s += t1 - t0

  print(
    json.dumps(
      {
        'benchmark': 'replay_table',
        'sampler': 'prioritized',
        'max_size': args.max_size,
        'table_size': replay.size,
        'insert_batch': args.batch,
        'insert_items_per_s': round(n_batches * args.batch / insert_s),
        'insert_wall_s': round(insert_s, 3),
        'sample_size': n,
        'sample_calls_per_s': round(args.sample_steps / sample_s, 1),
        'sample_items_per_s': round(args.sample_steps * n / sample_s),
        'mutate_calls_per_s': round(args.sample_steps / mutate_s, 1),
      }
    )
  )


if __name__ == '__main__':
  main()
