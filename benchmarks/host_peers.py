"""The gymnasium path against CleanRL and SBX on CartPole-v1, one sitting.

  python benchmarks/host_peers.py [--seeds 0 1 2] [--only dqn|ppo] \
      [--peer_python ...] [--peer_bench ...] [--git_dir CLEANRL_GIT]

Seed by seed, in turns (a shared machine's changing load then favours no
one):

- DQN, 50k env steps: `gin/acme_dqn_cartpole.gin` as shipped and with
  `train_rl.overlap = True`; CleanRL's `dqn_jax.py` (its defaults; wall of
  the whole process) and SBX's DQN (rl-zoo settings; training wall).
- PPO, 100k env steps: `gin/ppo_cartpole.gin` as shipped and with
  overlap; SBX's PPO (rl-zoo settings; training wall).

Ours: training wall with compiles, then 20 greedy episodes
(`seed_sweep.run_seed`). The peers' runners live in `../shared/bench/`
(`benchmarks/peers.py` says where). JSON lines: one per run, then per
task a summary with each system's mean wall per seed, seeds at the target
(475 for DQN, 500 for PPO) and our walls over each peer's.
"""

import argparse
import json

import numpy as np
import peers
import seed_sweep

OVERLAP = 'train_rl.overlap = True'
TASKS = {
  'dqn': {
    'steps': 50_000,
    'target': 475.0,
    'ours': {
      'acme_dqn': ('gin/acme_dqn_cartpole.gin', []),
      'acme_dqn_overlap': ('gin/acme_dqn_cartpole.gin', [OVERLAP]),
    },
    'peers': ('cleanrl_dqn_jax', 'sbx_dqn'),
  },
  'ppo': {
    'steps': 100_000,
    'target': 500.0,
    'ours': {
      'ppo': ('gin/ppo_cartpole.gin', []),
      'ppo_overlap': ('gin/ppo_cartpole.gin', [OVERLAP]),
    },
    'peers': ('sbx_ppo',),
  },
}
EVAL_EPISODES = 20


def peer_seed(args, name: str, seed: int, steps: int) -> dict:
  """One peer run: its runner's record (wall: training, or CleanRL's
  whole process)."""
  result = peers.run(
    args,
    f'{name}.py',
    '--seeds',
    seed,
    '--steps',
    steps,
    '--eval-episodes',
    EVAL_EPISODES,
    git_var='CLEANRL_GIT_DIR',
  )
  (run,) = result['runs']
  wall = run.get('train_wall_s', run.get('process_wall_s'))
  return {
    'system': name,
    'seed': seed,
    'wall_s': wall,
    'final_eval_return': run.get('eval_mean'),
  }


def ours_seed(config: str, bindings: list[str], seed: int, task) -> dict:
  args = argparse.Namespace(
    steps=task['steps'],
    eval_every=0,
    eval_episodes=EVAL_EPISODES,
    target=task['target'],
    verbose=False,
    stop_at_target=False,
  )
  run = seed_sweep.run_seed(
    config, bindings + ['train_rl.final_eval = False'], seed, args
  )
  return {k: run[k] for k in ('seed', 'wall_s', 'final_eval_return')}


def main() -> None:
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  p.add_argument('--only', choices=sorted(TASKS), default=None)
  peers.add_flags(p, 'CLEANRL_GIT_DIR')
  args = p.parse_args()
  for name, task in TASKS.items():
    if args.only and name != args.only:
      continue
    runs = {s: [] for s in [*task['ours'], *task['peers']]}
    for seed in args.seeds:
      for system, (config, bindings) in task['ours'].items():
        run = dict(ours_seed(config, bindings, seed, task), system=system)
        runs[system].append(run)
        print(json.dumps(run), flush=True)
      for system in task['peers']:
        run = peer_seed(args, system, seed, task['steps'])
        runs[system].append(run)
        print(json.dumps(run), flush=True)
    walls = {
      s: float(np.mean([r['wall_s'] for r in rs])) for s, rs in runs.items()
    }
    at = {
      s: sum((r['final_eval_return'] or 0) >= task['target'] for r in rs)
      for s, rs in runs.items()
    }
    print(
      json.dumps(
        {
          'summary': name,
          'steps': task['steps'],
          'seeds': args.seeds,
          'mean_wall_s': {s: round(w, 2) for s, w in walls.items()},
          'seeds_at_target': at,
          'ratios': {
            f'{ours}/{peer}': round(walls[ours] / walls[peer], 3)
            for ours in task['ours']
            for peer in task['peers']
          },
        }
      ),
      flush=True,
    )


if __name__ == '__main__':
  main()
