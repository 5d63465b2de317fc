"""Trains a gin config for several seeds; one JSON line per seed + a summary.

  python benchmarks/run_config.py --config gin/pg_cartpole.gin --seeds 0 1 2 \
      --max_env_steps 200000 --target 475

Each epoch's greedy eval return (the config's n_eval_episodes, temperature 0)
is checked against --target; a seed stops at its env-step budget or once the
target is reached (--stop_at_target). Reported per seed: epochs, env steps,
wall seconds (training process, JIT compile included), env steps/s, the
first env step at which the target was reached, and the last and best eval.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

from trax_rl import compile_cache, configurables

# Compiles are timed cold unless TRAX_RL_COMPILATION_CACHE names a folder.
os.environ.setdefault(compile_cache.ENV_VAR, 'off')


class _Stop(Exception):
  pass


def run_seed(args, seed: int) -> dict:
  bindings = list(args.binding)
  configurables.parse(args.config, bindings)
  agent_name = configurables.query('train_rl.agent_class').selector
  bindings += [
    f'RLTask.seed={seed}',
    f'{agent_name}.seed={seed}',
    'train_rl.n_epochs=1000000',
  ]
  configurables.parse(args.config, bindings)
  evals, reached = [], None
  start = time.perf_counter()

  def watch(agent, record):
    nonlocal reached
    ev = next(
      (v for k, v in record.items() if k.startswith('eval_return_t0')), None
    )
    steps = record['n_interactions']
    if ev is not None:
      evals.append((steps, ev))
      if reached is None and ev >= args.target:
        reached = steps
        if args.stop_at_target:
          raise _Stop
    if steps >= args.max_env_steps:
      raise _Stop

  with tempfile.TemporaryDirectory() as tmp:
    try:
      configurables.train_rl(
        output_dir=tmp if args.save else None, callbacks=[watch]
      )
    except _Stop:
      pass
  wall = time.perf_counter() - start
  steps = evals[-1][0] if evals else 0
  return {
    'config': ','.join(args.config),
    'agent': agent_name,
    'seed': seed,
    'epochs': len(evals),
    'env_steps': int(steps),
    'wall_s': round(wall, 2),
    'env_steps_per_s': round(steps / wall, 1),
    'target': args.target,
    'reached_target_at_env_steps': reached,
    'final_eval_return': evals[-1][1] if evals else None,
    'best_eval_return': max(e for _, e in evals) if evals else None,
  }


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument('--config', action='append', required=True)
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  p.add_argument('--max_env_steps', type=int, default=100_000)
  p.add_argument('--target', type=float, default=475.0)
  p.add_argument('--stop_at_target', action='store_true')
  p.add_argument(
    '--save', action='store_true', help='also write checkpoints (to a temp dir)'
  )
  args = p.parse_args()
  runs = []
  for seed in args.seeds:
    r = run_seed(args, seed)
    print(json.dumps(r), flush=True)
    runs.append(r)
  print(
    json.dumps(
      {
        'summary': ','.join(args.config),
        'seeds_reaching_target': sum(
          r['reached_target_at_env_steps'] is not None for r in runs
        ),
        'n_seeds': len(runs),
        'mean_wall_s': round(float(np.mean([r['wall_s'] for r in runs])), 2),
        'mean_env_steps_per_s': round(
          float(np.mean([r['env_steps_per_s'] for r in runs])), 1
        ),
      }
    )
  )


if __name__ == '__main__':
  sys.exit(main())
