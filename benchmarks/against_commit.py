"""The same configs, seeds and budgets on this tree and on another commit's.

  git worktree add /tmp/cc96e00 cc96e00
  python benchmarks/against_commit.py --old_tree /tmp/cc96e00 \
      --config gin/acme_dqn_cartpole.gin --config gin/pdqn_cartpole.gin \
      --seeds 0 --max_env_steps 50000

Each (config, seed) runs `benchmarks/run_config.py` of each tree in its own
process (the tree first on PYTHONPATH), new and old one after the other,
so both see the same machine load. Prints every run's JSON line with the
tree it ran on, then one line per config: mean wall seconds of each tree
and their ratio (new / old; below 1 is faster), and the eval returns.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parents[1]


def run(tree: pathlib.Path, config: str, seed: int, args) -> dict:
  cmd = [sys.executable, str(tree / 'benchmarks' / 'run_config.py')]
  cmd += ['--config', str(tree / config), '--seeds', str(seed)]
  cmd += ['--max_env_steps', str(args.max_env_steps)]
  cmd += ['--target', str(args.target)]
  for b in args.binding:
    cmd += ['--binding', b]
  env = dict(os.environ, PYTHONPATH=str(tree))
  out = subprocess.run(
    cmd, env=env, check=True, capture_output=True, text=True, cwd=tree
  ).stdout
  return json.loads(out.splitlines()[0])  # The seed's line.


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument('--old_tree', required=True, help="the other commit's tree")
  p.add_argument('--config', action='append', required=True)
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--seeds', type=int, nargs='+', default=[0])
  p.add_argument('--max_env_steps', type=int, default=50_000)
  p.add_argument('--target', type=float, default=475.0)
  args = p.parse_args()
  old = pathlib.Path(args.old_tree).resolve()
  for config in args.config:
    walls = {'new': [], 'old': []}
    evals = {'new': [], 'old': []}
    for seed in args.seeds:
      for name, tree in (('new', HERE), ('old', old)):
        r = run(tree, config, seed, args)
        r['tree'] = name
        print(json.dumps(r), flush=True)
        walls[name].append(r['wall_s'])
        evals[name].append(r['final_eval_return'])
    mean = {k: sum(v) / len(v) for k, v in walls.items()}
    print(
      json.dumps(
        {
          'summary': config,
          'seeds': args.seeds,
          'env_steps': args.max_env_steps,
          'new_wall_s': round(mean['new'], 2),
          'old_wall_s': round(mean['old'], 2),
          'wall_ratio_new_over_old': round(mean['new'] / mean['old'], 3),
          'new_final_evals': evals['new'],
          'old_final_evals': evals['old'],
        }
      ),
      flush=True,
    )


if __name__ == '__main__':
  main()
