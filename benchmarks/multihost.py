"""Throughput of the multi-host learner: 1 vs n processes on loopback.

  python benchmarks/multihost.py --config gin/pg_cartpole.gin \
      --processes 1 2 --epochs 10 [--binding ...]

For each entry of --processes, starts that many `trax-rl train --multihost`
processes on 127.0.0.1 (one CPU device each: a stand-in for hosts), trains
the config for --epochs epochs into a fresh output_dir and prints one JSON
line from the chief's metrics.jsonl, the first epoch (JIT compiles) left
out: processes, epochs, wall seconds of the job, the median epoch, collect
and train seconds, env steps/s of all processes together (each collects as
many steps as the chief). On one machine the
processes share its cores, so this measures the overhead of the global
mesh, not a speed-up.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

from trax_rl import compile_cache

# Compiles are timed cold unless TRAX_RL_COMPILATION_CACHE names a folder.
os.environ.setdefault(compile_cache.ENV_VAR, 'off')


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def run(n_processes: int, args) -> dict:
  """Trains the config with n processes; returns its JSON record."""
  out = tempfile.mkdtemp(prefix='multihost_bench_')
  port = _free_port()
  command = [
    sys.executable,
    '-m',
    'trax_rl.cli',
    'train',
    f'--config_file={args.config}',
    f'--output_dir={out}',
    '--multihost',
    '--no_progress',
    f'--config=train_rl.n_epochs={args.epochs + 1}',
    *[f'--config={b}' for b in args.binding],
  ]
  start = time.perf_counter()
  processes = [
    subprocess.Popen(
      command,
      env=dict(
        os.environ,
        JAX_PLATFORMS='cpu',
        JAX_COORDINATOR_ADDRESS=f'127.0.0.1:{port}',
        JAX_NUM_PROCESSES=str(n_processes),
        JAX_PROCESS_ID=str(i),
      ),
      stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE,
      text=True,
    )
    for i in range(n_processes)
  ]
  for p in processes:
    _, err = p.communicate()
    if p.returncode:
      raise RuntimeError(f'a process failed: {err[-2000:]}')
  wall_s = time.perf_counter() - start
  with open(os.path.join(out, 'metrics.jsonl')) as f:
    records = [json.loads(line) for line in f][1:]
  steps = records[-1]['n_interactions'] - records[0]['n_interactions']
  return {
    'config': args.config,
    'processes': n_processes,
    'epochs': len(records),
    'wall_s': round(wall_s, 2),
    'epoch_s': round(float(np.median([r['epoch_s'] for r in records])), 4),
    'collect_s': round(float(np.median([r['collect_s'] for r in records])), 4),
    'train_s': round(float(np.median([r['train_s'] for r in records])), 4),
    'env_steps_per_s': round(
      n_processes * steps / sum(r['collect_s'] for r in records[1:]), 1
    ),
  }


def main() -> None:
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument('--config', default='gin/pg_cartpole.gin')
  p.add_argument('--binding', action='append', default=[])
  p.add_argument('--processes', type=int, nargs='+', default=[1, 2])
  p.add_argument('--epochs', type=int, default=10)
  args = p.parse_args()
  for n in args.processes:
    print(json.dumps(run(n, args)), flush=True)


if __name__ == '__main__':
  main()
