"""The DQN family on gymnax CartPole-v1, device path vs gymnasium vs CleanRL.

  python benchmarks/device_dqn.py [--configs gin/gymnax/dqn_cartpole.gin ...]
      [--seeds 0 1 2] [--steps 50000] [--gymnasium] [--cleanrl]

R2D2 on the velocity-masked CartPole, against its gymnasium config:

  python benchmarks/device_dqn.py --configs gin/gymnax/r2d2_cartpole_masked.gin
      --steps 300000 --target 400 --vmap_seeds --gymnasium
      --gymnasium_config gin/r2d2_cartpole_masked.gin

Each gin/gymnax config is trained per seed for --steps env steps on the
device path (one jitted call per epoch) and then evaluated on
--eval_episodes greedy episodes (compiled, on gymnax). With --gymnasium the
same config runs again with only `RLTask.env = 'CartPole-v1'` (the host
path, gymnasium env, numpy Table), evaluated on gymnasium; or, with
--gymnasium_config, that config (the one the gymnax config includes). With --cleanrl,
CleanRL's `dqn_jax.py` runs for the same steps and seeds through the
shared runner `cleanrl_dqn_jax.py` (its locations: `benchmarks/peers.py`,
e.g. --git_dir or $CLEANRL_GIT_DIR). Wall seconds count everything from building the agent
to the end of training: JIT compiles included, evaluation excluded;
CleanRL's is its whole training process (`process_wall_s`).

With --vmap_seeds the device path trains all seeds at once
(`train_rl.n_seeds`, the compiled epoch vmapped over consecutive seeds
from the first of --seeds); its wall per seed is total / S.

One JSON line per run, one summary line per config and path, then one
comparison line with the ratios (device / CleanRL wall, gymnasium / device
wall) measured in this run.
"""

import argparse
import json
import os
import time

import jax
import numpy as np
import peers

from trax_rl import compile_cache, configurables
from trax_rl.device import evaluate

# Compiles are timed cold unless TRAX_RL_COMPILATION_CACHE names a folder.
os.environ.setdefault(compile_cache.ENV_VAR, 'off')

_CONFIGS = tuple(
  f'gin/gymnax/{name}_cartpole.gin'
  for name in ('dqn', 'dqnreg', 'mdqn', 'pdqn', 'c51', 'qrdqn')
)


def _build(config: str, seed: int, gymnasium: bool, extra=()):
  bindings = list(extra)
  if gymnasium and config.startswith('gin/gymnax/'):
    bindings.append("RLTask.env = 'CartPole-v1'")
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
  per_epoch = configurables.query(f'{agent_name}.n_interactions_per_epoch')
  agent = configurables.train_rl(output_dir=None, build_only=True)
  return agent, agent_name, per_epoch


def _greedy(agent, index=0):
  """(greedy policy, learner of seed `index`, initial core) on the device."""
  program = agent.program
  learner = agent.runner.learner_of(index)
  return program.policy(0.0), learner, program.initial_core


def _sgd_steps(agent, index=0) -> int:
  return int(agent.runner.learner_of(index).train.step)


def _evaluate(agent, episodes: int, seed: int, index: int = 0) -> list[float]:
  """Greedy returns of `episodes` episodes (compiled on a JAX env)."""
  task = agent.task
  if task.jax_env is not None:
    greedy, learner, initial_core = _greedy(agent, index)
    play = jax.jit(
      lambda learner, key: evaluate.evaluate(
        task.jax_env,
        greedy,
        learner,
        key,
        episodes,
        task.max_steps or 500,
        initial_core,
      )
    )
    returns = play(learner, jax.random.PRNGKey(10_000 + seed))
    return [float(r) for r in np.asarray(returns)]
  policy = agent.make_policy(0.0, evaluation=True)
  result = task.collect(policy, n_trajectories=episodes, only_eval=True)
  return [float(sum(t.rewards)) for t in result.trajectories]


def run(config: str, seed: int, args, gymnasium: bool) -> dict:
  start = time.perf_counter()
  agent, agent_name, per_epoch = _build(config, seed, gymnasium, args.bindings)
  per_call = 1
  if agent.task.jax_env is not None:
    per_call = configurables.query('train_rl.epochs_per_call', 1)
  agent.run(max(1, -(-args.steps // per_epoch)), epochs_per_call=per_call)
  wall = time.perf_counter() - start
  returns = _evaluate(agent, args.eval_episodes, seed)
  agent.close()
  steps = getattr(agent, 'env_steps', agent.current_epoch * per_epoch)
  return {
    'config': config,
    'path': 'gymnasium' if gymnasium else 'device',
    'agent': agent_name,
    'seed': seed,
    'env_steps': int(steps),
    'sgd_steps': _sgd_steps(agent),
    'wall_s': round(wall, 2),
    'env_steps_per_s': round(steps / wall, 1),
    'eval_return': round(float(np.mean(returns)), 1),
    'eval_returns': [round(r, 1) for r in returns],
  }


def run_vmapped(config: str, args) -> list[dict]:
  """All seeds at once: `train_rl.n_seeds`, the epoch vmapped over seeds."""
  n_seeds = len(args.seeds)
  start = time.perf_counter()
  configurables.parse([config], args.bindings)
  agent_name = configurables.query('train_rl.agent_class').selector
  per_epoch = configurables.query(f'{agent_name}.n_interactions_per_epoch')
  configurables.parse(
    [config],
    args.bindings
    + [
      f'RLTask.seed={args.seeds[0]}',
      f'{agent_name}.seed={args.seeds[0]}',
      f'{agent_name}.n_eval_episodes=0',
      f'train_rl.n_seeds={n_seeds}',
      f'train_rl.n_epochs={max(1, -(-args.steps // per_epoch))}',
    ],
  )
  group = configurables.train_rl(output_dir=None)
  wall = time.perf_counter() - start
  records = []
  if hasattr(group, 'program'):  # A program agent: one runner of k seeds.
    members = [(group, i, s) for i, s in enumerate(group.runner.seeds)]
  else:
    members = [(a, 0, a.seed) for a in group.agents]
  for agent, index, seed in members:
    returns = _evaluate(agent, args.eval_episodes, seed, index)
    records.append(
      {
        'config': config,
        'path': 'device_vmapped_seeds',
        'agent': agent_name,
        'seed': seed,
        'env_steps': int(group.current_epoch * per_epoch),
        'sgd_steps': _sgd_steps(agent, index),
        'wall_s_all_seeds': round(wall, 2),
        'wall_s': round(wall / n_seeds, 2),
        'eval_return': round(float(np.mean(returns)), 1),
        'eval_returns': [round(r, 1) for r in returns],
      }
    )
  return records


def cleanrl(seed: int, args) -> dict:
  """CleanRL dqn_jax.py through the shared runner; its JSON line."""
  start = time.perf_counter()
  record = peers.run(
    args,
    'cleanrl_dqn_jax.py',
    '--seeds',
    seed,
    '--steps',
    args.steps,
    git_var='CLEANRL_GIT_DIR',
  )
  record['runner_wall_s'] = round(time.perf_counter() - start, 2)
  return {'config': 'cleanrl/dqn_jax.py', 'seed': seed, 'result': record}


def _summary(config, path, runs, target):
  returns = [r['eval_return'] for r in runs]
  return {
    'summary': config,
    'path': path,
    'seeds': [r['seed'] for r in runs],
    'eval_returns': returns,
    'seeds_at_target': sum(r >= target for r in returns),
    'mean_wall_s': round(float(np.mean([r['wall_s'] for r in runs])), 2),
  }


def main() -> None:
  p = argparse.ArgumentParser(
    description=__doc__,
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  p.add_argument('--configs', nargs='+', default=list(_CONFIGS))
  p.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  p.add_argument('--steps', type=int, default=50_000)
  p.add_argument('--eval_episodes', type=int, default=20)
  p.add_argument('--target', type=float, default=475.0)
  p.add_argument('--gymnasium', action='store_true')
  p.add_argument('--cleanrl', action='store_true')
  p.add_argument(
    '--cleanrl_seeds', type=int, nargs='+', help='default: --seeds'
  )
  p.add_argument(
    '--gymnasium_seeds', type=int, nargs='+', help='default: --seeds'
  )
  p.add_argument(
    '--gymnasium_config',
    help='the gymnasium run trains this config (default: each --configs '
    "file with RLTask.env = 'CartPole-v1')",
  )
  p.add_argument(
    '--vmap_seeds',
    action='store_true',
    help='train all seeds at once (the compiled epoch vmapped over seeds)',
  )
  peers.add_flags(p, 'CLEANRL_GIT_DIR')
  p.add_argument(
    '--bindings',
    nargs='*',
    default=[],
    help="extra gin bindings for every trax_rl run, e.g. 'MLP.layer_widths=(64, 64)'",
  )
  args = p.parse_args()
  compare = {}
  if args.cleanrl:
    walls = []
    for seed in args.cleanrl_seeds or args.seeds:
      record = cleanrl(seed, args)
      print(json.dumps(record), flush=True)
      peer = record['result']['runs'][0]
      if peer['rc'] != 0:
        # A peer that crashed has no wall time to compare against.
        raise SystemExit(
          f'CleanRL seed {seed} failed (rc {peer["rc"]}): '
          f'{peer.get("stderr_tail", "").strip().splitlines()[-1:]}'
        )
      walls.append(peer['process_wall_s'])
    compare['cleanrl_mean_wall_s'] = round(float(np.mean(walls)), 2)
  for config in args.configs:
    runs_by_path = []
    if args.vmap_seeds:
      runs_by_path.append(run_vmapped(config, args))
    else:
      runs_by_path.append([run(config, s, args, False) for s in args.seeds])
    if args.gymnasium:
      gym_seeds = args.gymnasium_seeds or args.seeds
      host = args.gymnasium_config or config
      runs_by_path.append([run(host, s, args, True) for s in gym_seeds])
    for runs, path in zip(runs_by_path, ('device', 'gymnasium')):
      for r in runs:
        print(json.dumps(r), flush=True)
      line = _summary(config, runs[0]['path'], runs, args.target)
      print(json.dumps(line), flush=True)
      compare[f'{config}:{path}_wall_s'] = line['mean_wall_s']
  for config in args.configs:
    device = compare[f'{config}:device_wall_s']
    if 'cleanrl_mean_wall_s' in compare:
      compare[f'{config}:device_over_cleanrl'] = round(
        device / compare['cleanrl_mean_wall_s'], 3
      )
    if args.gymnasium:
      compare[f'{config}:gymnasium_over_device'] = round(
        compare[f'{config}:gymnasium_wall_s'] / device, 2
      )
  print(json.dumps({'compare': compare}), flush=True)


if __name__ == '__main__':
  main()
