"""A learning claim over many seeds: a config's seeds as one seed batch.

  python benchmarks/seed_claims.py --config gymnax/dqn_cartpole \
      --seeds 0 9 --target 475 [--steps 50000] [--eval_episodes 20] [--store]

Trains the shipped config (or gin file) on seeds FIRST..LAST as one seed
batch (`train_rl.n_seeds`) on the config's own data path: vmapped in one
compiled program on a JAX env, k x n_envs envs and one vmapped learner on
gymnasium envs. No evaluation during training; after the budget, each seed
plays --eval_episodes greedy episodes (the runner's final evaluation,
compiled on the device path). Prints one JSON line per seed and a summary:
the fraction of seeds whose final greedy return reaches --target, the IQM
of the final returns with its 95% stratified-bootstrap interval (Agarwal
et al. 2021), the mean, and the wall per seed (the batch's wall, compiles
included, over its seeds).

--store writes the summary into benchmarks/results.json (one entry per
config and seed range), which `trax-rl configs` shows; --table prints the
stored claims of 4 or more seeds as the markdown table of RESULTS.md.
"""

import argparse
import json
import os
import pathlib
import time

import numpy as np

from trax_rl import (
  compile_cache,
  configurables,
  knobs,
  seed_stats,
  shipped_configs,
)

os.environ.setdefault(compile_cache.ENV_VAR, 'off')  # Compiles timed cold.
RESULTS = pathlib.Path(__file__).resolve().parent / 'results.json'


def run(config: str, first: int, last: int, args) -> dict:
  """Trains seeds first..last as one batch; returns the summary."""
  path = shipped_configs.resolve(config)
  n = last - first + 1
  bindings = list(args.binding)
  configurables.parse([path], bindings)
  agent = configurables.query('train_rl.agent_class').selector
  bindings += knobs.run_bindings(first, args.steps)
  bindings += [
    f'train_rl.n_seeds = {n}',
    f'{agent}.n_eval_episodes = {args.eval_episodes}',
    'train_rl.eval_every = 1000000000',  # Only before epoch 1: cheap.
  ]
  configurables.parse([path], bindings)
  start = time.perf_counter()
  trained = configurables.train_rl(output_dir=None)
  wall = time.perf_counter() - start
  final = trained.final_eval
  name = next(k for k in final if k.startswith('eval_return_t0'))
  finals = np.asarray(final[name], float)
  env_steps = trained.current_epoch * trained.runner.source.steps_per_epoch
  for seed, value in zip(final['seeds'], finals):
    print(json.dumps({'config': config, 'seed': seed, 'final': value}))
  low, high = seed_stats.stratified_bootstrap_ci(finals[:, None], reps=2000)
  return {
    'config': shipped_configs.name_of(path) or config,
    'seeds': [first, last],
    'env_steps': int(env_steps),
    'target': args.target,
    'at_target': int(np.sum(finals >= args.target)),
    'n_seeds': n,
    'final': [round(float(x), 1) for x in finals],
    'iqm': round(seed_stats.iqm(finals[:, None]), 1),
    'ci': [round(low, 1), round(high, 1)],
    'mean': round(float(finals.mean()), 1),
    'wall_s_per_seed': round(wall / n, 1),
    'eval_episodes': args.eval_episodes,
    'bindings': list(args.binding),
    'command': 'python benchmarks/seed_claims.py ' + ' '.join(args.argv),
    'date': time.strftime('%Y-%m-%d'),
  }


def store(summary: dict) -> None:
  """Puts `summary` into results.json, replacing the same config's entry
  over the same seeds and bindings."""
  entries = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
  key = lambda e: (e['config'], e['seeds'], e.get('bindings', []))  # noqa: E731
  entries = [e for e in entries if key(e) != key(summary)] + [summary]
  entries.sort(key=lambda e: (e['config'], e['seeds']))
  RESULTS.write_text(json.dumps(entries, indent=1) + '\n')


def table() -> str:
  """The stored claims over 4 or more seeds, as a markdown table."""
  rows = [
    '| config | budget | seeds | at target | IQM of final [95% CI] | '
    'finals | wall s/seed |',
    '|---|---|---|---|---|---|---|',
  ]
  for e in json.loads(RESULTS.read_text()):
    if e['n_seeds'] < 4:
      continue
    finals = ' / '.join(f'{x:g}' for x in e['final'])
    rows.append(
      f'| `{e["config"]}` | {e["env_steps"]} | {e["seeds"][0]}-'
      f'{e["seeds"][1]} | {e["at_target"]}/{e["n_seeds"]} >= '
      f'{e["target"]:g} | {e["iqm"]:g} [{e["ci"][0]:g}, {e["ci"][1]:g}] | '
      f'{finals} | {e["wall_s_per_seed"]:g} |'
    )
  return '\n'.join(rows)


def main(argv=None) -> None:
  import sys

  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument('--config', action='append', default=[])
  p.add_argument(
    '--seeds', type=int, nargs=2, default=[0, 9], metavar=('FIRST', 'LAST')
  )
  p.add_argument('--target', type=float, default=None)
  p.add_argument('--steps', type=int, default=None, help='default: config')
  p.add_argument('--eval_episodes', type=int, default=20)
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--store', action='store_true')
  p.add_argument('--table', action='store_true')
  args = p.parse_args(argv)
  if args.table:
    print(table())
    return
  if not args.config or args.target is None:
    p.error('--config and --target are needed (or --table)')
  args.argv = list(sys.argv[1:] if argv is None else argv)
  first, last = args.seeds
  if last < first:
    p.error('--seeds FIRST LAST with FIRST <= LAST')
  for config in args.config:
    summary = run(config, first, last, args)
    print(json.dumps(dict(summary, summary=True)), flush=True)
    if args.store:
      store(summary)


if __name__ == '__main__':
  main()
