"""Trax's CartPole regression configs, run unchanged: do they reach 195?

  python benchmarks/trax_regression.py \
      --config tests/data/trax_configs/light_ppo_cartpole_regression_test.gin \
      --seeds 0 1 2

The file is read as `trax-rl train` reads it (translated from Trax's names)
and trained for at most its own `train_rl.n_epochs`. After every epoch whose
training return reaches --gate or whose own greedy eval (the file's
n_eval_episodes, if any) reaches --target, and every --every epochs, the
policy plays
--episodes greedy episodes (temperature 0) on the eval env, under the
file's own step cap (200 for CartPole-v0); a seed stops at the first mean
of at least --target (CartPole-v0's classic solved level, 195). One JSON
line per seed, then a summary line.
"""

import argparse
import json
import os
import sys
import time

from trax_rl import compile_cache, configurables, evaluation

# Compiles are timed cold unless TRAX_RL_COMPILATION_CACHE names a folder.
os.environ.setdefault(compile_cache.ENV_VAR, 'off')


class _Solved(Exception):
  pass


def run_seed(args, seed: int) -> dict:
  configurables.parse([args.config])
  agent_name = configurables.query('train_rl.agent_class').selector
  n_epochs = configurables.query('train_rl.n_epochs')
  configurables.parse(
    [args.config],
    [f'RLTask.seed={seed}', f'{agent_name}.seed={seed}', *args.binding],
  )
  best, solved = None, None
  start = time.perf_counter()

  def watch(agent, record):
    nonlocal best, solved
    epoch = agent.current_epoch
    file_greedy = [
      v for k, v in record.items() if k.startswith('eval_return_t0')
    ]
    if (
      record['avg_return'] < args.gate
      and not any(v >= args.target for v in file_greedy)
      and epoch % args.every
    ):
      return
    greedy = evaluation.evaluate(agent, args.episodes)['return']['mean']
    best = greedy if best is None else max(best, greedy)
    if args.verbose:
      print(
        json.dumps(
          {
            'seed': seed,
            'epoch': epoch,
            'train_return': record['avg_return'],
            'greedy': greedy,
          }
        ),
        file=sys.stderr,
        flush=True,
      )
    if greedy >= args.target:
      solved = (epoch, record['n_interactions'], greedy)
      raise _Solved

  try:
    agent = configurables.train_rl(output_dir=None, callbacks=[watch])
    epochs = agent.current_epoch
  except _Solved:
    epochs = solved[0]
  return {
    'config': args.config,
    'agent': agent_name,
    'seed': seed,
    'file_n_epochs': n_epochs,
    'target': args.target,
    'solved': solved is not None,
    'solved_at_epoch': solved[0] if solved else None,
    'env_steps': solved[1] if solved else None,
    'greedy_mean_return': solved[2] if solved else best,
    'epochs_run': epochs,
    'wall_s': round(time.perf_counter() - start, 1),
  }


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument('--config', required=True)
  p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  p.add_argument('--target', type=float, default=195.0)
  p.add_argument('--episodes', type=int, default=20)
  p.add_argument('--gate', type=float, default=150.0)
  p.add_argument('--every', type=int, default=10)
  p.add_argument(
    '--binding',
    action='append',
    default=[],
    help='extra gin binding in trax_rl names, for diagnostics only '
    '(the file no longer runs unchanged); repeatable',
  )
  p.add_argument('--verbose', action='store_true', help='each check to stderr')
  args = p.parse_args()
  runs = []
  for seed in args.seeds:
    runs.append(run_seed(args, seed))
    print(json.dumps(runs[-1]), flush=True)
  print(
    json.dumps(
      {
        'summary': args.config,
        'seeds_solved': sum(r['solved'] for r in runs),
        'n_seeds': len(runs),
        'solved_at_epochs': [r['solved_at_epoch'] for r in runs],
      }
    )
  )


if __name__ == '__main__':
  sys.exit(main())
