"""SAC and TD3 on Pendulum-v1 against SBX's SAC, in one sitting.

  python benchmarks/continuous.py [--config gin/sac_pendulum.gin ...] \
      [--seeds 0 1 2] [--steps 20000] [--no_peer]

For each seed in turn, trains each config (`seed_sweep.run_seed`: greedy
evals of --eval_episodes episodes every --eval_every env steps and at the
end; training wall with compiles, evals excluded), then SBX's SAC with
rl-baselines3-zoo's Pendulum settings on that seed
(`../shared/bench/sbx_sac.py`, in the peers' Python: see
`benchmarks/peers.py`). Taking turns seed by seed keeps a shared
machine's changing load from favouring either side. JSON lines: one per
run, one summary per config and for SBX, and one line of ratios: each
config's mean training wall per seed over SBX's.
"""

import argparse
import json

import peers
import seed_sweep

CONFIGS = ('gin/sac_pendulum.gin', 'gin/td3_pendulum.gin')


def main() -> None:
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument('--config', action='append', default=[])
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  p.add_argument('--steps', type=int, default=20_000)
  p.add_argument('--eval_every', type=int, default=5_000)
  p.add_argument('--eval_episodes', type=int, default=10)
  p.add_argument('--target', type=float, default=-200.0)
  p.add_argument('--no_peer', action='store_true', help='ours only')
  p.add_argument('--verbose', action='store_true')
  p.add_argument('--stop_at_target', action='store_true')
  p.add_argument('--peer_python', default=peers.python())
  p.add_argument('--peer_bench', default=peers.bench_dir())
  args = p.parse_args()
  configs = args.config or CONFIGS
  runs = {config: [] for config in configs}
  sbx_runs = []
  for seed in args.seeds:
    for config in configs:
      runs[config].append(seed_sweep.run_seed(config, args.binding, seed, args))
      print(json.dumps(runs[config][-1]), flush=True)
    if not args.no_peer:
      sbx_runs.append(sbx_seed(args, seed))
      print(json.dumps(sbx_runs[-1]), flush=True)
  walls = {}
  for config in configs:
    summary = seed_sweep.summary(config, runs[config], args.target)
    print(json.dumps(summary), flush=True)
    walls[config] = summary['mean_wall_s']
  if not sbx_runs:
    return
  sbx_wall = sum(r['train_wall_s'] for r in sbx_runs) / len(sbx_runs)
  finals = [r['eval_mean'] for r in sbx_runs]
  print(
    json.dumps(
      {
        'summary': 'sbx_sac',
        'seeds': args.seeds,
        'final_eval_returns': finals,
        'seeds_final_at_target': sum(f >= args.target for f in finals),
        'mean_wall_s': round(sbx_wall, 1),
      }
    ),
    flush=True,
  )
  print(
    json.dumps(
      {
        'ratios': 'mean training wall per seed, ours / SBX SAC',
        **{c: round(w / sbx_wall, 3) for c, w in walls.items()},
      }
    ),
    flush=True,
  )


def sbx_seed(args: argparse.Namespace, seed: int) -> dict:
  """SBX SAC on one seed: its runner's record of that run."""
  result = peers.run(
    args,
    'sbx_sac.py',
    '--seeds',
    seed,
    '--steps',
    args.steps,
    '--eval-episodes',
    args.eval_episodes,
  )
  (run,) = result['runs']
  return dict(run, system='sbx_sac')


if __name__ == '__main__':
  main()
