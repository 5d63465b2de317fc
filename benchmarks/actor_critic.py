"""Learning and speed of the actor-critic gin configs; JSON lines.

  python benchmarks/actor_critic.py --config gin/ppo_cartpole.gin \
      --seeds 0 1 2 --steps 100000 [--target 475] [--eval_every 10000]

Per seed: trains the config (its own evaluation switched off) until
--steps env steps, then plays 10 greedy episodes (temperature 0) on the
eval env and prints one JSON line: config, agent, seed, env steps, wall
seconds of training (JIT compiles included, evaluation excluded), env
steps/s, the final greedy eval return and, with --eval_every, the env step
at which a periodic greedy eval (10 episodes) first reached --target.
A summary line follows.
"""

import argparse
import json
import time

import numpy as np

from trax_rl import configurables


def greedy_return(agent, n_episodes: int) -> float:
  played = agent.task.collect(
    agent.make_policy(0.0, evaluation=True),
    n_trajectories=n_episodes,
    only_eval=True,
  )
  return float(np.mean(played.episode_returns))


def run_seed(args, seed: int) -> dict:
  configurables.parse([args.config], args.binding)
  agent_name = configurables.query('train_rl.agent_class').selector
  bindings = list(args.binding) + [
    f'RLTask.seed={seed}',
    f'{agent_name}.seed={seed}',
    f'{agent_name}.n_eval_episodes=0',
  ]
  configurables.parse([args.config], bindings)
  agent = configurables.train_rl(output_dir=None, build_only=True)
  train_s, reached, next_eval = 0.0, None, args.eval_every
  evals = []
  while agent.task.n_interactions() < args.steps:
    start = time.perf_counter()
    agent.run(1)
    train_s += time.perf_counter() - start
    steps = agent.task.n_interactions()
    if args.eval_every and steps >= next_eval:
      next_eval += args.eval_every
      ret = greedy_return(agent, args.eval_episodes)
      evals.append([steps, ret])
      if reached is None and ret >= args.target:
        reached = steps
  steps = agent.task.n_interactions()
  final = greedy_return(agent, args.eval_episodes)
  if reached is None and final >= args.target:
    reached = steps
  agent.close()
  return {
    'config': args.config,
    'agent': agent_name,
    'seed': seed,
    'env_steps': int(steps),
    'wall_s': round(train_s, 2),
    'env_steps_per_s': round(steps / train_s, 1),
    'final_eval_return': round(final, 2),
    'target': args.target,
    'reached_target_at_env_steps': reached,
    'evals': evals,
  }


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument('--config', required=True)
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  p.add_argument('--steps', type=int, default=100_000)
  p.add_argument('--target', type=float, default=475.0)
  p.add_argument('--eval_every', type=int, default=0)
  p.add_argument('--eval_episodes', type=int, default=10)
  args = p.parse_args()
  runs = []
  for seed in args.seeds:
    run = run_seed(args, seed)
    print(json.dumps(run), flush=True)
    runs.append(run)
  finals = [r['final_eval_return'] for r in runs]
  print(
    json.dumps(
      {
        'summary': args.config,
        'seeds': args.seeds,
        'steps': args.steps,
        'final_eval_returns': finals,
        'mean_final_eval_return': round(float(np.mean(finals)), 2),
        'n_seeds_at_target': sum(f >= args.target for f in finals),
        'mean_wall_s': round(float(np.mean([r['wall_s'] for r in runs])), 2),
        'mean_env_steps_per_s': round(
          float(np.mean([r['env_steps_per_s'] for r in runs])), 1
        ),
      }
    ),
    flush=True,
  )


if __name__ == '__main__':
  main()
