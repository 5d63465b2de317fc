"""Train gin configs per seed on an env-step budget, with greedy evals.

The shared engine of `value_cartpole.py`, `actor_critic.py` and
`r2d2_masked.py` (run those, or this module directly):

  python benchmarks/seed_sweep.py --config gin/dqn_cartpole.gin \
      --seeds 0 1 2 --steps 100000 [--eval_every 10000] [--target 475]

Each config is trained once per seed with its own evaluation switched off
and no checkpoints. Every --eval_every env steps (0: only at the end) and
at the end of the budget, --eval_episodes greedy (temperature 0) episodes
are played on the eval env. One JSON line per run: config, agent, seed, env
steps, wall seconds of training (JIT compiles included, evals excluded),
env steps/s, the eval curve, the final and best mean eval return, and the
first env step at which an eval reached --target. Then one summary line per
config.
"""

import argparse
import json
import os
import time

import numpy as np

from trax_rl import compile_cache, configurables, evaluation

# Compiles are timed cold unless TRAX_RL_COMPILATION_CACHE names a folder.
os.environ.setdefault(compile_cache.ENV_VAR, 'off')


def evaluate(agent, episodes: int) -> float:
  """Mean return of `episodes` greedy episodes on the eval env."""
  return evaluation.evaluate(agent, episodes)['return']['mean']


def run_seed(config: str, bindings: list[str], seed: int, args) -> dict:
  """Trains one config for one seed; returns its JSON record."""
  configurables.parse([config], bindings)
  agent_name = configurables.query('train_rl.agent_class').selector
  configurables.parse(
    [config],
    bindings
    + [
      f'RLTask.seed={seed}',
      f'{agent_name}.seed={seed}',
      f'{agent_name}.n_eval_episodes=0',
    ],
  )
  start = time.perf_counter()
  agent = configurables.train_rl(output_dir=None, build_only=True)
  curve, eval_s, reached = [], 0.0, None
  next_eval = args.eval_every
  records = []
  while True:
    agent.run(1, callbacks=[lambda _, record: records.append(record)])
    steps = int(records[-1]['n_interactions'])  # Env steps so far.
    done = steps >= args.steps
    if done or (args.eval_every and steps >= next_eval):
      next_eval += args.eval_every
      t0 = time.perf_counter()
      value = evaluate(agent, args.eval_episodes)
      eval_s += time.perf_counter() - t0
      curve.append([int(steps), round(value, 1)])
      if reached is None and value >= args.target:
        reached = int(steps)
      if args.verbose:
        print(json.dumps({'seed': seed, 'steps': steps, 'eval': value}))
    if done or (reached is not None and args.stop_at_target):
      break
  wall = time.perf_counter() - start - eval_s
  agent.close()
  return {
    'config': config,
    'agent': agent_name,
    'seed': seed,
    'env_steps': int(steps),
    'wall_s': round(wall, 1),
    'eval_s': round(eval_s, 1),
    'env_steps_per_s': round(steps / wall, 1),
    'target': args.target,
    'reached_target_at_env_steps': reached,
    'final_eval_return': curve[-1][1],
    'best_eval_return': max(v for _, v in curve),
    'curve': curve,
  }


def summary(config: str, runs: list[dict], target: float) -> dict:
  """Seeds reaching the target (best and final eval) and mean speed."""
  finals = [r['final_eval_return'] for r in runs]
  return {
    'summary': config,
    'seeds': [r['seed'] for r in runs],
    'steps': max(r['env_steps'] for r in runs),
    'target': target,
    'seeds_reaching_target': sum(
      r['reached_target_at_env_steps'] is not None for r in runs
    ),
    'seeds_final_at_target': sum(f >= target for f in finals),
    'final_eval_returns': finals,
    'mean_final_eval_return': round(float(np.mean(finals)), 1),
    'mean_best_eval_return': round(
      float(np.mean([r['best_eval_return'] for r in runs])), 1
    ),
    'mean_wall_s': round(float(np.mean([r['wall_s'] for r in runs])), 1),
    'mean_env_steps_per_s': round(
      float(np.mean([r['env_steps_per_s'] for r in runs])), 1
    ),
  }


def main(
  description: str = __doc__,
  configs: tuple[str, ...] = (),
  steps: int = 100_000,
  eval_every: int = 10_000,
  eval_episodes: int = 10,
  target: float = 475.0,
) -> None:
  """Parses the command line (defaults from the caller) and runs the sweep."""
  p = argparse.ArgumentParser(
    description=description,
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  p.add_argument(
    '--config',
    action='append',
    required=not configs,
    help=f'gin file (repeatable); default: {" ".join(configs) or "none"}',
  )
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  p.add_argument('--steps', type=int, default=steps)
  p.add_argument('--eval_every', type=int, default=eval_every)
  p.add_argument('--eval_episodes', type=int, default=eval_episodes)
  p.add_argument('--target', type=float, default=target)
  p.add_argument('--stop_at_target', action='store_true')
  p.add_argument('--verbose', action='store_true')
  args = p.parse_args()
  for config in args.config or configs:
    runs = []
    for seed in args.seeds:
      runs.append(run_seed(config, args.binding, seed, args))
      print(json.dumps(runs[-1]), flush=True)
    print(json.dumps(summary(config, runs, args.target)), flush=True)


if __name__ == '__main__':
  main()
