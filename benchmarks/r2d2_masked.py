"""R2D2 against a feed-forward DQN on masked-velocity CartPole.

  python benchmarks/r2d2_masked.py --seeds 0 1 2 --steps 300000

CartPole-v1 with its velocities zeroed (`envs.masked_cartpole`) needs
memory: R2D2's LSTM can infer the velocities, a feed-forward Q network
cannot. Each config in --configs is trained once per seed (no checkpoints);
every --eval_every env steps --eval_episodes greedy (temperature 0)
episodes are played on the eval env. One JSON line per run: config, agent,
seed, env steps, wall seconds of training (JIT compiles included, evals
excluded), env steps/s, the eval curve, the final and best mean eval
return, and the first env step at which the mean reached --target. Then one
summary line per config: the seeds that reached the target within the
budget.
"""

import argparse
import json
import time

import numpy as np

from trax_rl import configurables

_CONFIGS = ('gin/r2d2_cartpole_masked.gin', 'gin/dqn_cartpole_masked.gin')


def _evaluate(agent, episodes: int) -> float:
  return agent.task.collect_trajectories(
    agent.make_policy(0.0, evaluation=True),
    n_trajectories=episodes,
    only_eval=True,
  )


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
  while True:
    agent.run(1)
    steps = agent.task.n_interactions()
    done = steps >= args.steps
    if steps >= next_eval or done:
      next_eval += args.eval_every
      t0 = time.perf_counter()
      value = _evaluate(agent, args.eval_episodes)
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


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument('--configs', nargs='+', default=list(_CONFIGS))
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  p.add_argument('--steps', type=int, default=300_000)
  p.add_argument('--eval_every', type=int, default=10_000)
  p.add_argument('--eval_episodes', type=int, default=16)
  p.add_argument('--target', type=float, default=400.0)
  p.add_argument('--stop_at_target', action='store_true')
  p.add_argument('--verbose', action='store_true')
  args = p.parse_args()
  for config in args.configs:
    runs = []
    for seed in args.seeds:
      record = run_seed(config, args.binding, seed, args)
      print(json.dumps(record), flush=True)
      runs.append(record)
    print(
      json.dumps(
        {
          'summary': config,
          'seeds_reaching_target': sum(
            r['reached_target_at_env_steps'] is not None for r in runs
          ),
          'n_seeds': len(runs),
          'mean_best_eval_return': round(
            float(np.mean([r['best_eval_return'] for r in runs])), 1
          ),
          'mean_wall_s': round(float(np.mean([r['wall_s'] for r in runs])), 1),
          'mean_env_steps_per_s': round(
            float(np.mean([r['env_steps_per_s'] for r in runs])), 1
          ),
        }
      ),
      flush=True,
    )


if __name__ == '__main__':
  main()
