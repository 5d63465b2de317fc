"""What the device path's per-epoch progress callback costs.

  python benchmarks/progress_cost.py --config gymnax/ppo_cartpole_fast \
      --epochs_per_call 8 --calls 6 --repeats 3

Trains the config on its JAX env with `epochs_per_call` epochs per
compiled call, once with the progress callback compiled in (a host
callback as each epoch of the call ends, what `trax-rl train` shows) and
once without, alternating, `--repeats` times each, in this process. The
first call of each run (the compile) is left out: the epoch time is the
mean `epoch_s` of the other calls. Prints one JSON line per run and a
summary with the median ratio with/without (1.0 = free).
"""

import argparse
import json
import statistics
import time

from trax_rl import configurables


def run(config: str, bindings: list[str], with_progress: bool) -> dict:
  configurables.parse([config], bindings)
  ticks = []
  records = []
  start = time.perf_counter()
  configurables.train_rl(
    output_dir=None,
    callbacks=[lambda _, r: records.append(r)],
    progress=ticks.append if with_progress else None,
  )
  wall = time.perf_counter() - start
  per_call = configurables.query('train_rl.epochs_per_call')
  later = [r['epoch_s'] for r in records[per_call:]]
  return {
    'progress': with_progress,
    'ticks': len(ticks),
    'epochs': len(records),
    'wall_s': wall,
    'epoch_s': statistics.mean(later),
  }


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument('--config', default='gymnax/ppo_cartpole_fast')
  p.add_argument('--epochs_per_call', type=int, default=8)
  p.add_argument('--calls', type=int, default=6)
  p.add_argument('--repeats', type=int, default=3)
  p.add_argument('--binding', action='append', default=[])
  args = p.parse_args()
  from trax_rl import shipped_configs

  config = shipped_configs.resolve(args.config)
  bindings = [
    *args.binding,
    f'train_rl.epochs_per_call = {args.epochs_per_call}',
    f'train_rl.n_epochs = {args.epochs_per_call * args.calls}',
  ]
  agent = None
  configurables.parse([config], bindings)
  agent = configurables.query('train_rl.agent_class').selector
  bindings.append(f'{agent}.n_eval_episodes = 0')  # Time the epochs only.
  times = {True: [], False: []}
  for _ in range(args.repeats):
    for with_progress in (False, True):
      out = run(config, bindings, with_progress)
      out['config'] = args.config
      print(json.dumps(out), flush=True)
      times[with_progress].append(out['epoch_s'])
  ratio = statistics.median(times[True]) / statistics.median(times[False])
  print(
    json.dumps(
      {
        'summary': 'progress_cost',
        'config': args.config,
        'epochs_per_call': args.epochs_per_call,
        'epoch_s_without': statistics.median(times[False]),
        'epoch_s_with': statistics.median(times[True]),
        'ratio_with_over_without': ratio,
      }
    )
  )


if __name__ == '__main__':
  main()
