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

One JSON line per repetition (wall seconds of whole epochs and of their
training part, and the process's CPU seconds, on and off), then a summary
per config: the median over repetitions of on/off for whole epochs
(`overhead_ratio`), for training alone and for CPU time, and the ratio of
the fastest repetitions (`overhead_ratio_best`: the least disturbed ones,
the better estimate on a busy machine).
"""

import argparse
import json
import time

import numpy as np

from trax_rl import configurables


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


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument(
    '--configs',
    nargs='+',
    default=['gin/dqn_cartpole.gin', 'gin/ppo_cartpole.gin'],
  )
  parser.add_argument('--reps', type=int, default=7)
  parser.add_argument(
    '--epochs', type=int, default=2, help='epochs per repetition and agent'
  )
  parser.add_argument(
    '--binding', action='append', default=[], help='extra gin binding'
  )
  args = parser.parse_args()
  for config in args.configs:
    print(
      json.dumps(bench(config, args.reps, args.epochs, args.binding)),
      flush=True,
    )


if __name__ == '__main__':
  main()
