"""Value agents on CartPole-v1: greedy eval return within an env-step budget.

  python benchmarks/value_cartpole.py --config gin/dqn_cartpole.gin \
      --seeds 0 1 2 --steps 100000

Trains the gin config once per seed (no checkpoints) and every --eval_every
env steps plays --eval_episodes greedy (temperature 0) episodes on the eval
env. Prints one JSON line per seed: config, agent, seed, env steps, training
wall seconds (JIT compiles included, evals excluded), env steps/s, the eval
curve, the final and best mean eval return, and the first env step at which
the mean reached --target; then a summary line (seeds whose best or final
eval reached the target).
"""

import argparse
import json
import time

import numpy as np

from trax_rl import configurables


def _evaluate(agent, episodes: int) -> float:
  return agent.task.collect_trajectories(
    agent.make_policy(0.0, evaluation=True),
    n_trajectories=episodes,
    only_eval=True,
  )


def run_seed(args, seed: int) -> dict:
  """Trains one seed; returns its JSON record."""
  configurables.parse([args.config], args.binding)
  agent_name = configurables.query('train_rl.agent_class').selector
  bindings = args.binding + [
    f'RLTask.seed={seed}',
    f'{agent_name}.seed={seed}',
    f'{agent_name}.n_eval_episodes=0',
  ]
  configurables.parse([args.config], bindings)
  start = time.perf_counter()
  agent = configurables.train_rl(output_dir=None, build_only=True)
  evals, eval_s = [], 0.0
  next_eval = args.eval_every
  while True:
    agent.run(1)
    steps = agent.task.n_interactions()
    done = steps >= args.steps
    if steps >= next_eval or done:
      next_eval += args.eval_every
      t0 = time.perf_counter()
      evals.append((steps, round(_evaluate(agent, args.eval_episodes), 1)))
      eval_s += time.perf_counter() - t0
      print(f'# seed {seed} steps {steps} eval {evals[-1][1]}', flush=True)
    if done:
      break
  wall = time.perf_counter() - start - eval_s
  returns = [r for _, r in evals]
  reached = next((s for s, r in evals if r >= args.target), None)
  return {
    'config': args.config,
    'agent': agent_name,
    'seed': seed,
    'env_steps': int(steps),
    'wall_s': round(wall, 1),
    'eval_s': round(eval_s, 1),
    'env_steps_per_s': round(steps / wall, 1),
    'final_eval_return': returns[-1],
    'best_eval_return': max(returns),
    'reached_target_at': reached,
    'evals': evals,
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--config', required=True)
  parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  parser.add_argument('--steps', type=int, default=100_000)
  parser.add_argument('--eval_every', type=int, default=10_000)
  parser.add_argument('--eval_episodes', type=int, default=10)
  parser.add_argument('--target', type=float, default=475.0)
  parser.add_argument(
    '--binding', action='append', default=[], help='extra gin binding'
  )
  args = parser.parse_args()
  runs = []
  for seed in args.seeds:
    runs.append(run_seed(args, seed))
    print(json.dumps(runs[-1]), flush=True)
  print(
    json.dumps(
      {
        'summary': args.config,
        'seeds': args.seeds,
        'steps': args.steps,
        'target': args.target,
        'seeds_best_reached': sum(
          r['reached_target_at'] is not None for r in runs
        ),
        'seeds_final_reached': sum(
          r['final_eval_return'] >= args.target for r in runs
        ),
        'mean_final_eval_return': float(
          np.mean([r['final_eval_return'] for r in runs])
        ),
        'mean_wall_s': float(np.mean([r['wall_s'] for r in runs])),
        'mean_env_steps_per_s': float(
          np.mean([r['env_steps_per_s'] for r in runs])
        ),
      }
    )
  )


if __name__ == '__main__':
  main()
