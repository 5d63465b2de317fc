"""A seed batch against separate runs: env steps/s of `train_rl.n_seeds = k`.

  python benchmarks/seed_batch.py --config gin/acme_dqn_cartpole.gin \
      --n_seeds 4 --epochs 50

Runs the config for --epochs epochs once as one seed batch of k seeds and
then as k separate runs (seeds 0 .. k - 1, one after another), each in a
fresh process, no evaluation, no checkpoints. Prints one JSON line per run
(wall seconds of training, compiles included; env steps; env steps/s) and
a summary: the batch's env steps/s over the separate runs' (total steps
over total wall), and whether each seed's records matched its separate
run's (`avg_return` of every epoch).
"""

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, sys, time
from trax_rl import configurables
config, n_seeds, seed, epochs, bindings = json.loads(sys.argv[1])
configurables.parse([config], bindings)
agent = configurables.query('train_rl.agent_class').selector
configurables.parse([config], bindings + [
  f'RLTask.seed = {seed}', f'{agent}.seed = {seed}',
  f'{agent}.n_eval_episodes = 0', f'train_rl.n_epochs = {epochs}',
  f'train_rl.n_seeds = {n_seeds}',
])
records = {}
def keep(agent, record):
  records.setdefault('epochs', []).append(record)
start = time.perf_counter()
agent = configurables.train_rl(output_dir=None, callbacks=[keep])
wall = time.perf_counter() - start
runner = agent.runner
print(json.dumps({
  'wall_s': wall,
  'avg_returns': runner.avg_returns,
  'env_steps': sum(
    int(r['n_interactions']) for r in records['epochs'][-1:]) * n_seeds,
}))
"""


def child(config, n_seeds, seed, epochs, bindings) -> dict:
  arg = json.dumps([config, n_seeds, seed, epochs, bindings])
  out = subprocess.run(
    [sys.executable, '-c', _CHILD, arg],
    check=True,
    capture_output=True,
    text=True,
    env=dict(os.environ, TRAX_RL_COMPILATION_CACHE='off'),
  ).stdout
  return json.loads(out.splitlines()[-1])


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument('--config', default='gin/acme_dqn_cartpole.gin')
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--n_seeds', type=int, default=4)
  p.add_argument('--epochs', type=int, default=50)
  args = p.parse_args()
  k = args.n_seeds
  batch = child(args.config, k, 0, args.epochs, args.binding)
  batch_rate = batch['env_steps'] / batch['wall_s']
  print(
    json.dumps(
      {
        'run': f'batch of {k}',
        'wall_s': round(batch['wall_s'], 2),
        'env_steps': batch['env_steps'],
        'env_steps_per_s': round(batch_rate, 1),
      }
    ),
    flush=True,
  )
  wall, steps, same = 0.0, 0, []
  for seed in range(k):
    one = child(args.config, 1, seed, args.epochs, args.binding)
    wall += one['wall_s']
    steps += one['env_steps']
    same.append(one['avg_returns'][0] == batch['avg_returns'][seed])
    print(
      json.dumps(
        {
          'run': f'seed {seed} alone',
          'wall_s': round(one['wall_s'], 2),
          'env_steps': one['env_steps'],
          'env_steps_per_s': round(one['env_steps'] / one['wall_s'], 1),
        }
      ),
      flush=True,
    )
  print(
    json.dumps(
      {
        'summary': args.config,
        'n_seeds': k,
        'epochs': args.epochs,
        'batch_env_steps_per_s': round(batch_rate, 1),
        'separate_env_steps_per_s': round(steps / wall, 1),
        'ratio': round(batch_rate / (steps / wall), 2),
        'records_match_separate_runs': same,
      }
    ),
    flush=True,
  )


if __name__ == '__main__':
  main()
