"""Cost of the NaN/inf guard: epochs with the guard on over epochs with it off.

  python benchmarks/nan_guard.py --configs gin/dqn_cartpole.gin \
      gin/ppo_cartpole.gin --reps 7

For each config, two agents with the same seed are built: one runs with
`on_nonfinite='stop'` (every update checks its loss inside the compiled
step; collection checks observations; the flag and the parameters are read
once per epoch), the other with `on_nonfinite='off'`. After a warm-up epoch
each (JIT compile), repetitions of `--epochs` epochs alternate between them,
in alternating order, so that machine noise hits both alike. Both agents
train on, in lockstep, so each repetition does the same work on both.

`--update_reps N` adds the guard's own cost inside the compiled update,
free of the machine's noise: `update.make_update_fn` on a 64-64 MLP
Q-network (DQN CartPole's) with a batch of 256, `--update_steps` updates in
one `lax.scan`, with the Health in the state and without, the fastest of N
alternating calls each.

One JSON line per repetition (wall seconds of whole epochs and of their
training part, and the process's CPU seconds, on and off), then a summary
per config: the median over repetitions of on/off for whole epochs
(`overhead_ratio`), for training alone and for CPU time, and the ratio of
the fastest repetitions (`overhead_ratio_best`: the least disturbed ones,
the better estimate on a busy machine).
"""

import argparse
import functools
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from trax_rl import compile_cache, configurables, types
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import train_state, update

# Compiles are timed cold unless TRAX_RL_COMPILATION_CACHE names a folder.
os.environ.setdefault(compile_cache.ENV_VAR, 'off')


def _timed(agent, n_epochs: int, policy: str) -> tuple[float, float, float]:
  """(wall seconds, summed train_s, CPU seconds) of n epochs of `agent`."""
  train_s = []
  start, cpu = time.perf_counter(), time.process_time()
  agent.run(
    n_epochs,
    callbacks=[lambda a, record: train_s.append(record['train_s'])],
    on_nonfinite=policy,
  )
  wall = time.perf_counter() - start
  return wall, float(sum(train_s)), time.process_time() - cpu


def bench(config: str, reps: int, epochs: int, bindings: list[str]) -> dict:
  configurables.parse([config], bindings)
  name = configurables.query('train_rl.agent_class').selector
  configurables.parse([config], [*bindings, f'{name}.n_eval_episodes=0'])
  agents = {
    policy: configurables.train_rl(output_dir=None, build_only=True)
    for policy in ('stop', 'off')
  }
  for policy, agent in agents.items():
    _timed(agent, 1, policy)  # Compiles.
  rows = []
  for rep in range(reps):
    order = ('stop', 'off') if rep % 2 == 0 else ('off', 'stop')
    times = {p: _timed(agents[p], epochs, p) for p in order}
    row = dict(zip(('on_s', 'on_train_s', 'on_cpu_s'), times['stop']))
    row.update(zip(('off_s', 'off_train_s', 'off_cpu_s'), times['off']))
    rows.append(row)
    line = {'config': config, 'rep': rep, 'epochs': epochs}
    print(json.dumps(dict(line, **{k: round(v, 4) for k, v in row.items()})))

  def median_ratio(kind: str) -> float:
    ratios = [r[f'on{kind}'] / r[f'off{kind}'] for r in rows]
    return round(float(np.median(ratios)), 4)

  for agent in agents.values():
    agent.close()
  return {
    'config': config,
    'agent': name,
    'reps': reps,
    'epochs_per_rep': epochs,
    'overhead_ratio': median_ratio('_s'),
    'train_overhead_ratio': median_ratio('_train_s'),
    'cpu_overhead_ratio': median_ratio('_cpu_s'),
    'overhead_ratio_best': round(
      min(r['on_s'] for r in rows) / min(r['off_s'] for r in rows), 4
    ),
  }


def _squared_q_loss(network, params, target_params, batch, key):
  """A TD-like loss on a Q-network: regress Q(s, a) onto the rewards."""
  del target_params, key
  q = network.apply(params, batch['observation']).q_values
  q_sa = jnp.take_along_axis(q, batch['action'][:, None], axis=1)[:, 0]
  return jnp.mean((q_sa - batch['reward']) ** 2), types.LossExtra({})


def bench_update(reps: int, steps: int) -> dict:
  """The compiled update with the guard's check against without it."""
  module = models.Quality(
    n_actions=2, body=functools.partial(models.MLP, layer_widths=(64, 64))
  )
  network = networks.from_module(module, np.zeros(4, np.float32))
  optimizer = optax.adam(1e-3)
  scan = jax.jit(
    update.make_update_fn(network, _squared_q_loss, optimizer, num_steps=steps)
  )
  rng = np.random.default_rng(0)
  batch = {
    'observation': rng.normal(size=(steps, 256, 4)).astype(np.float32),
    'action': rng.integers(2, size=(steps, 256)),
    'reward': rng.normal(size=(steps, 256)).astype(np.float32),
  }
  params = network.init(jax.random.PRNGKey(0))
  states = {
    guard: train_state.TrainState(
      params,
      (),
      optimizer.init(params),
      jnp.zeros((), jnp.int32),
      jax.random.PRNGKey(1),
      update.healthy() if guard == 'on' else (),
    )
    for guard in ('on', 'off')
  }
  times = {'on': [], 'off': []}
  for rep in range(reps + 1):  # The first call of each compiles.
    for guard in ('on', 'off') if rep % 2 else ('off', 'on'):
      start = time.perf_counter()
      jax.block_until_ready(scan(states[guard], batch))
      if rep:
        times[guard].append(time.perf_counter() - start)
  return {
    'update_microbenchmark': 'Quality MLP 64-64, batch 256',
    'updates_per_call': steps,
    'reps': reps,
    'on_us_per_update': round(min(times['on']) / steps * 1e6, 2),
    'off_us_per_update': round(min(times['off']) / steps * 1e6, 2),
    'update_overhead_ratio': round(min(times['on']) / min(times['off']), 4),
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument(
    '--configs',
    nargs='*',
    default=['gin/dqn_cartpole.gin', 'gin/ppo_cartpole.gin'],
  )
  parser.add_argument('--reps', type=int, default=7)
  parser.add_argument(
    '--epochs', type=int, default=2, help='epochs per repetition and agent'
  )
  parser.add_argument(
    '--binding', action='append', default=[], help='extra gin binding'
  )
  parser.add_argument(
    '--update_reps', type=int, default=0, help='reps of the update timing'
  )
  parser.add_argument('--update_steps', type=int, default=200)
  args = parser.parse_args()
  if args.update_reps:
    print(json.dumps(bench_update(args.update_reps, args.update_steps)))
  for config in args.configs:
    print(
      json.dumps(bench(config, args.reps, args.epochs, args.binding)),
      flush=True,
    )


if __name__ == '__main__':
  main()
