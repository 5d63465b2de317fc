"""Throughput of the replay table (`DeviceTable`) on CartPole-sized items.

Fills a 1M-item prioritized table with jitted inserts, then times jitted
`sample(256)` and `mutate_priorities` of the sampled keys (one learner
step's replay work) on the full table, each call blocked on. Prints one
JSON line. Inside a program's compiled epoch these calls fuse with the
rest; here each is its own dispatch, an upper bound on their cost.

  python benchmarks/replay_table.py [--max_size=1000000] [--batch=1024]
"""

import argparse
import json
import time

import jax
import numpy as np

from trax_rl import types
from trax_rl.replay import device_table, samplers


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
  table = device_table.DeviceTable(args.max_size, samplers.Prioritized(0.6))
  example = jax.tree.map(lambda x: x[0], _transitions(rng, 1))
  state = table.init(example)
  # Pre-generated data, so that the timings measure the table only.
  pool = [
    (
      jax.device_put(_transitions(rng, args.batch)),
      jax.device_put(rng.random(args.batch).astype(np.float32) + 0.01),
    )
    for _ in range(16)
  ]
  insert = jax.jit(table.insert, donate_argnums=0)
  sample = jax.jit(table.sample, static_argnums=2, donate_argnums=0)
  mutate = jax.jit(table.mutate_priorities, donate_argnums=0)
  state, _ = insert(state, *pool[0])  # Compiles.
  n_batches = -(-args.max_size // args.batch)
  start = time.perf_counter()
  for i in range(1, n_batches):
    state, _ = insert(state, *pool[i % 16])
  jax.block_until_ready(state)
  insert_s = time.perf_counter() - start

  n = args.sample_size
  new_priorities = jax.device_put(
    rng.random((args.sample_steps, n)).astype(np.float32) + 0.01
  )
  key = jax.random.PRNGKey(0)
  state, s = sample(state, key, n)  # Compiles.
  state = mutate(state, s.keys, new_priorities[0])
  sample_s = mutate_s = 0.0
  for step in range(args.sample_steps):
    t0 = time.perf_counter()
    state, s = sample(state, jax.random.fold_in(key, step), n)
    jax.block_until_ready(s)
    t1 = time.perf_counter()
    state = mutate(state, s.keys, new_priorities[step])
    jax.block_until_ready(state.priorities)
    mutate_s += time.perf_counter() - t1
    sample_s += t1 - t0

  print(
    json.dumps(
      {
        'benchmark': 'replay_table',
        'table': 'DeviceTable',
        'sampler': 'prioritized',
        'max_size': args.max_size,
        'table_size': int(table.size(state)),
        'insert_batch': args.batch,
        'insert_items_per_s': round((n_batches - 1) * args.batch / insert_s),
        'sample_size': n,
        'sample_calls_per_s': round(args.sample_steps / sample_s, 1),
        'mutate_calls_per_s': round(args.sample_steps / mutate_s, 1),
      }
    )
  )


if __name__ == '__main__':
  main()
