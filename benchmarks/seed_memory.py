"""Peak memory of a seed batch (`train_rl.n_seeds`) of a replay learner.

Builds k agents of a gin/gymnax value config, the batch, and runs epochs,
each k in a fresh process; prints one JSON line per k with the process's
resident memory (VmRSS, MB) after each phase and its peak (VmHWM), beside
the learner state's own size (replay included), so the overhead over the
state itself reads off directly:

  python benchmarks/seed_memory.py --config gin/gymnax/dqn_breakout.gin --seeds 2 3 8
"""

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, os, sys
os.environ.setdefault('TRAX_RL_COMPILATION_CACHE', 'off')
import gin, jax
from trax_rl import configurables, gin_registry

def status():
  fields = {}
  for line in open('/proc/self/status'):
    name, _, value = line.partition(':')
    if name in ('VmRSS', 'VmHWM'):
      fields[name] = round(int(value.split()[0]) / 1024)
  return fields

config, k, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
configurables.parse([config], [f'train_rl.n_seeds={k}'])
name = configurables.query('train_rl.agent_class').selector
out = {'config': config, 'n_seeds': k, 'epochs': epochs, 'start': status()}
cls = gin.get_configurable(name)
agent = cls(task=gin_registry.RLTask(), output_dir=None)
agent.use_seeds(k)
out['agents_built'] = status()
out['learner_mb_per_seed'] = round(
  sum(x.nbytes for x in jax.tree.leaves(agent.runner.learner_of(0))) / 2**20
)
out['batch_built'] = status()
agent.run(epochs)
out['trained'] = status()
print(json.dumps(out))
"""


def main():
  p = argparse.ArgumentParser()
  p.add_argument('--config', default='gin/gymnax/dqn_breakout.gin')
  p.add_argument('--seeds', type=int, nargs='+', default=[2, 3])
  p.add_argument('--epochs', type=int, default=2)
  args = p.parse_args()
  for k in args.seeds:
    if k < 2:
      raise SystemExit('--seeds: a seed batch has at least 2 seeds')
    run = subprocess.run(
      [sys.executable, '-c', _CHILD, args.config, str(k), str(args.epochs)],
      capture_output=True,
      text=True,
      env=dict(os.environ),
    )
    if run.returncode:
      raise SystemExit(run.stderr.strip().splitlines()[-1])
    line = json.loads(run.stdout.strip().splitlines()[-1])
    line['bench'] = 'seed_memory'
    # MB the run added over the state itself (k learners).
    line['peak_mb_over_start'] = (
      line['trained']['VmHWM'] - line['start']['VmRSS']
    )
    line['peak_over_k_learners'] = round(
      line['peak_mb_over_start'] / (k * line['learner_mb_per_seed']), 2
    )
    print(json.dumps(line))
    sys.stdout.flush()


if __name__ == '__main__':
  main()
