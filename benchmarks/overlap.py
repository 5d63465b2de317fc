"""Acting overlapped with learning on gymnasium envs: does it pay?

  python benchmarks/overlap.py [--config gin/acme_dqn_cartpole.gin ...] \
      [--steps 50000] [--depth 1] [--seed 0]

For each config, in one sitting (no evaluations, compiles excluded: the
first `--warmup` epochs are not counted):

- `random`: env steps/s of the config's vector env (`envs.make_vector_env`,
  `RLTask.n_envs` envs) stepped with random actions, finished envs reset
  as the source does: the ceiling of acting (measured before and after
  each run below, averaged; `random_spread` is max over min).
- `sequential`: the config with `train_rl.pipeline_depth = --depth`,
  without overlap: each epoch collects, then learns, so its records time
  acting alone (`collect_s`) and learning alone (`train_s`).
- `overlap`: the same with `train_rl.overlap = True`: acting in a thread
  while learning; its wall per epoch (`epoch_s`).
- `plain`: the config as shipped (depth 0), for reference.

A summary line per config: `overlap_vs_max_alone` (the overlapped wall
over max(acting alone, learning alone); the aim is at most 1.15),
`acting_vs_random` (acting alone's env steps/s over random's; aim at least
0.5), the speedup over `plain`, and whether the records of `sequential`
and `overlap` agree (they must: only timings differ).
"""

import argparse
import json
import math
import time

import numpy as np

import trax_rl
from trax_rl import configurables, envs, gin_registry

CONFIGS = ('gin/acme_dqn_cartpole.gin', 'gin/ppo_cartpole.gin')
STEPS = {'gin/acme_dqn_cartpole.gin': 50_000, 'gin/ppo_cartpole.gin': 100_000}
TIMES = ('collect_s', 'train_s', 'epoch_s', 'env_steps_per_s')


def _agent(config: str):
  """The config's agent, built only."""
  configurables.parse([config])
  return configurables.train_rl(output_dir=None, build_only=True)


def random_steps_per_s(config: str, seconds: float) -> float:
  """Env steps/s of the config's vector env under random actions."""
  configurables.parse([config])
  task = gin_registry.RLTask()
  vec = envs.make_vector_env(task.env_spec, task.n_envs)
  vec.reset(seed=list(range(task.n_envs)))
  space = vec.action_space
  space.seed(0)
  n, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    _, _, terminated, truncated, _ = vec.step(space.sample())
    done = np.asarray(terminated) | np.asarray(truncated)
    if done.any():
      vec.reset(options={'reset_mask': done})
    n += task.n_envs
  rate = n / (time.perf_counter() - start)
  vec.close()
  return rate


def run(config: str, n_epochs: int, bindings: list[str]) -> list[dict]:
  records = trax_rl.train(
    config,
    bindings=[
      'train_rl.final_eval = False',
      'train_rl.eval_every = 1000000',
      *bindings,
    ],
    n_epochs=n_epochs,
  ).records
  return [dict(r) for r in records]


def _same(a: list[dict], b: list[dict]) -> bool:
  """Whether two runs' records agree, timings aside."""
  for x, y in zip(a, b, strict=True):
    for k in x:
      if k in TIMES:
        continue
      same = x[k] == y.get(k) or (
        isinstance(x[k], float) and math.isnan(x[k]) and math.isnan(y[k])
      )
      if not same:
        return False
  return True


def main() -> None:
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument('--config', action='append', default=[])
  p.add_argument('--steps', type=int, default=None, help='default: per config')
  p.add_argument('--depth', type=int, default=1)
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--warmup', type=int, default=3, help='epochs not counted')
  p.add_argument('--random_s', type=float, default=5.0)
  args = p.parse_args()
  for config in args.config or CONFIGS:
    steps = args.steps or STEPS.get(config, 50_000)
    agent = _agent(config)
    per_epoch = agent.n_interactions_per_epoch
    agent.close()
    n_epochs = max(args.warmup + 1, -(-steps // per_epoch))
    seed = [f'RLTask.seed = {args.seed}']
    randoms = [random_steps_per_s(config, args.random_s)]
    depth = f'train_rl.pipeline_depth = {args.depth}'
    runs = {}
    for mode, extra in (
      ('plain', []),
      ('sequential', [depth]),
      ('overlap', [depth, 'train_rl.overlap = True']),
    ):
      start = time.perf_counter()
      records = run(config, n_epochs, seed + extra)
      counted = records[args.warmup :]
      runs[mode] = records
      line = {
        'config': config,
        'mode': mode,
        'epochs': n_epochs,
        'env_steps': n_epochs * per_epoch,
        'wall_s': time.perf_counter() - start,
        'counted_epochs': len(counted),
        'epoch_s': sum(r['epoch_s'] for r in counted),
        'collect_s': sum(r['collect_s'] for r in counted),
        'train_s': sum(r['train_s'] for r in counted),
        'final_avg_return': records[-1]['avg_return'],
      }
      print(json.dumps(line), flush=True)
      runs[mode + '_line'] = line
      # Between the runs too: a shared machine's pace drifts.
      randoms.append(random_steps_per_s(config, args.random_s))
    random = float(np.mean(randoms))
    seq, ov = runs['sequential_line'], runs['overlap_line']
    alone = max(seq['collect_s'], seq['train_s'])
    acting = seq['counted_epochs'] * per_epoch / seq['collect_s']
    print(
      json.dumps(
        {
          'config': config,
          'summary': True,
          'random_env_steps_per_s': random,
          'random_spread': max(randoms) / min(randoms),
          'acting_env_steps_per_s': acting,
          'acting_vs_random': acting / random,
          'acting_alone_s': seq['collect_s'],
          'learning_alone_s': seq['train_s'],
          'overlap_s': ov['epoch_s'],
          'overlap_vs_max_alone': ov['epoch_s'] / alone,
          'overlap_vs_sequential': ov['epoch_s'] / seq['epoch_s'],
          'overlap_vs_plain': ov['epoch_s'] / runs['plain_line']['epoch_s'],
          'records_agree': _same(runs['sequential'], runs['overlap']),
        }
      ),
      flush=True,
    )


if __name__ == '__main__':
  main()
