"""Env steps/s and updates/s with the local collector and Ray actors.

  python benchmarks/distributed.py --config gin/acme_dqn_cartpole.gin \
      --actors 0 1 2 --epochs 20 [--binding ...]

For each entry of --actors (0: the local collector, the learner's own
envs; n: a RayCollector with n rollout actors on a local Ray instance bound
to 127.0.0.1, or --ray_address), trains the config for --epochs epochs from
scratch, after one warm-up epoch that pays for JIT compiles and actor
start-up, and prints one JSON line: config, collector, actors, env steps,
learner updates, wall seconds, env steps/s, updates/s and, on Ray, the
mean policy lag (learner updates between a chunk's parameters and its use).
With --target, a greedy eval after each epoch (its time excluded) stops the
run at the target and the line has the wall seconds to reach it; e.g. R2D2
on masked CartPole to 400, the single process against 2 actors:

  python benchmarks/distributed.py --config gin/r2d2_cartpole_masked.gin \
      --actors 0 2 --epochs 60 --target 400
"""

import argparse
import functools
import json
import os
import time

import numpy as np

from trax_rl import compile_cache, configurables, evaluation
from trax_rl.distributed import ray_collector, ray_setup

# Compiles are timed cold unless TRAX_RL_COMPILATION_CACHE names a folder.
os.environ.setdefault(compile_cache.ENV_VAR, 'off')


def _updates(agent) -> int:
  return int(agent.learner.train.step)


def run(config: str, bindings: list[str], n_actors: int, args) -> dict:
  """Trains one config with one collector; returns its JSON record."""
  configurables.parse([config], bindings)
  agent_name = configurables.query('train_rl.agent_class').selector
  bindings = bindings + [f'{agent_name}.n_eval_episodes=0']
  configurables.parse([config], bindings)
  agent = configurables.train_rl(output_dir=None, build_only=True)
  collector = None
  if n_actors:
    collector = ray_collector.RayCollector(
      n_actors=n_actors,
      address=args.ray_address,
      chunk_length=args.chunk_length,
      publish_every=args.publish_every,
    )
    # Actors rebuild the agent from the same gin text and bindings.
    text = '\n'.join([open(config).read(), *bindings])
    agent.set_collector(
      collector, functools.partial(configurables.build_agent, text)
    )
  lags, reached, eval_s = [], None, 0.0
  counts = []  # n_interactions after each epoch.
  agent.run(1, callbacks=[lambda a, r: counts.append(r['n_interactions'])])
  steps0, updates0 = counts[-1], _updates(agent)  # After the warm-up.
  start = time.perf_counter()
  for _ in range(args.epochs):
    agent.run(
      1,
      callbacks=[
        lambda a, r: lags.append(r.get('ray/policy_lag')),
        lambda a, r: counts.append(r['n_interactions']),
      ],
    )
    if args.target is not None:
      t0 = time.perf_counter()
      value = evaluation.evaluate(agent, args.eval_episodes)['return']['mean']
      eval_s += time.perf_counter() - t0
      if value >= args.target:
        reached = time.perf_counter() - start - eval_s
        break
  wall = time.perf_counter() - start - eval_s
  steps = counts[-1] - steps0
  updates = _updates(agent) - updates0
  agent.close()
  return {
    'config': config,
    'agent': agent_name,
    'collector': 'ray' if n_actors else 'local',
    'actors': n_actors,
    'env_steps': int(steps),
    'updates': int(updates),
    'wall_s': round(wall, 2),
    'env_steps_per_s': round(steps / wall, 1),
    'updates_per_s': round(updates / wall, 1),
    'mean_policy_lag': round(float(np.mean(lags)), 1) if n_actors else None,
    'target': args.target,
    'wall_s_to_target': None if reached is None else round(reached, 1),
    'cpus': os.cpu_count(),
  }


def main() -> None:
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument('--config', default='gin/acme_dqn_cartpole.gin')
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--actors', type=int, nargs='+', default=[0, 1, 2])
  p.add_argument('--epochs', type=int, default=20)
  p.add_argument('--chunk_length', type=int, default=64)
  p.add_argument('--publish_every', type=int, default=100)
  p.add_argument('--ray_address', default=None)
  p.add_argument(
    '--target',
    type=float,
    default=None,
    help='stop once a greedy eval after an epoch reaches this mean return',
  )
  p.add_argument('--eval_episodes', type=int, default=16)
  args = p.parse_args()
  if any(args.actors):
    ray_setup.init_ray(args.ray_address)
  for n_actors in args.actors:
    print(
      json.dumps(run(args.config, args.binding, n_actors, args)), flush=True
    )


if __name__ == '__main__':
  main()
