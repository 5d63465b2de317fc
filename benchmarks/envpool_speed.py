"""envpool against gymnasium's vector envs, and DQN on Atari on each.

  python benchmarks/envpool_speed.py --n_envs 8 --steps 2000 \
      --train_steps 4000

1. Random-action env steps/s of the same env through envpool
   (`envpool_env.EnvpoolVectorEnv`, what `'envpool:<id>'` builds) and
   gymnasium's `SyncVectorEnv` and `AsyncVectorEnv` (one process per env),
   all stepped as the gymnasium source steps them (autoreset off, finished
   envs restarted with a reset mask), `n_envs` envs each, for CartPole-v1
   and Pong-v5. Pong on gymnasium is ALE v5 under AtariPreprocessing and
   FrameStackObservation with gin/atari/common/ale_env.gin's settings, on
   envpool gin/atari/common/env.gin's (Acme's settings both).
2. Training env steps/s of gin/atari/dqn.gin (CI-free sizes: n_envs envs,
   two epochs of train_steps / 2 env steps, no evaluation) on envpool and
   on ALE: once as shipped (its 20k-step replay minimum: acting, env
   steps and replay inserts only) and once learning from the start
   (`--learn_from 256`: the learner's updates in the wall too).

One JSON line per measurement, then a summary with the ratios (envpool /
other). The machine may be shared and noisy: compare ratios within one
run. Pong on ALE needs the 'atari' extra; without it those lines say
`skipped`.
"""

import argparse
import ast
import importlib.util
import json
import os
import time

import gymnasium as gym
import numpy as np

from trax_rl import configurables, envpool_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAS_ALE = importlib.util.find_spec('ale_py') is not None


def _gin_bindings(name: str) -> dict:
  """`make_envpool.x = v` lines of a gin file, as {x: v}."""
  options = {}
  with open(os.path.join(ROOT, 'gin', 'atari', 'common', name)) as f:
    for line in f:
      if line.startswith('make_envpool.') and '=' in line:
        key, value = line[len('make_envpool.') :].split('=', 1)
        options[key.strip()] = ast.literal_eval(value.strip())
  return options


def _ale_pong() -> gym.Env:
  import ale_py

  gym.register_envs(ale_py)
  env = gym.make(
    'ALE/Pong-v5',
    frameskip=1,
    repeat_action_probability=0.25,
    full_action_space=True,
  )
  env = gym.wrappers.AtariPreprocessing(
    env,
    noop_max=0,
    frame_skip=4,
    screen_size=84,
    terminal_on_life_loss=False,
    grayscale_obs=True,
    scale_obs=False,
  )
  return gym.wrappers.FrameStackObservation(env, 4)


def _vector(kind: str, env_id: str, n_envs: int) -> gym.vector.VectorEnv:
  if kind == 'envpool':
    if env_id == 'Pong-v5':
      options = _gin_bindings('env.gin')
      spec = envpool_env.make_envpool(options.pop('env'), **options)
      return envpool_env.EnvpoolVectorEnv(spec, n_envs)
    return envpool_env.EnvpoolVectorEnv(envpool_env.PREFIX + env_id, n_envs)
  make = _ale_pong if env_id == 'Pong-v5' else lambda: gym.make(env_id)
  cls = {'sync': gym.vector.SyncVectorEnv, 'async': gym.vector.AsyncVectorEnv}
  return cls[kind](
    [make] * n_envs, autoreset_mode=gym.vector.AutoresetMode.DISABLED
  )


def random_steps(kind: str, env_id: str, n_envs: int, steps: int) -> dict:
  """Env steps/s of random actions (`steps` per env), resets included."""
  row = {'bench': 'random_actions', 'env': env_id, 'backend': kind}
  if env_id == 'Pong-v5' and kind != 'envpool' and not HAS_ALE:
    return dict(row, skipped="no ale-py (pip install -e '.[atari]')")
  env = _vector(kind, env_id, n_envs)
  space = env.single_action_space
  rng = np.random.default_rng(0)
  env.reset(seed=list(range(n_envs)))
  start = time.perf_counter()
  for _ in range(steps):
    action = rng.integers(0, space.n, n_envs)
    _, _, terminated, truncated, _ = env.step(action)
    done = np.logical_or(terminated, truncated)
    if done.any():
      env.reset(options={'reset_mask': done})
  wall = time.perf_counter() - start
  env.close()
  return dict(
    row,
    n_envs=n_envs,
    env_steps=steps * n_envs,
    wall_s=round(wall, 3),
    env_steps_per_s=round(steps * n_envs / wall, 1),
  )


def train_steps(
  backend: str, n_envs: int, steps: int, learn_from: int | None
) -> dict:
  """Env steps/s of training gin/atari/dqn.gin for `steps` env steps."""
  row = {
    'bench': 'train_dqn',
    'config': 'atari/dqn',
    'backend': backend,
    'learn_from': learn_from or 'config',
  }
  if backend == 'ale' and not HAS_ALE:
    return dict(row, skipped="no ale-py (pip install -e '.[atari]')")
  bindings = [
    f'RLTask.n_envs = {n_envs}',
    f'ReplayValueAgent.n_interactions_per_epoch = {steps // 2}',
    'ReplayValueAgent.max_replay_size = 50000',
    'ReplayValueAgent.n_eval_episodes = 0',
    'train_rl.final_eval = False',
    'train_rl.n_epochs = 2',
  ]
  if learn_from:
    bindings.append(f'ReplayValueAgent.min_replay_size = {learn_from}')
  if backend == 'ale':
    bindings.append("include 'atari/common/ale_env.gin'")
  configurables.parse(['atari/dqn'], bindings)
  records = []
  start = time.perf_counter()
  configurables.train_rl(
    output_dir=None, callbacks=[lambda _, r: records.append(r)]
  )
  wall = time.perf_counter() - start
  # The second epoch's steps/s: the first holds the compiles.
  epoch_s = records[-1]['epoch_s']
  return dict(
    row,
    n_envs=n_envs,
    env_steps=records[-1]['n_interactions'],
    wall_s=round(wall, 3),
    epoch2_env_steps_per_s=round((steps // 2) / epoch_s, 1),
  )


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument('--n_envs', type=int, default=8)
  p.add_argument('--steps', type=int, default=2000, help='per env')
  p.add_argument('--pong_steps', type=int, default=500, help='per env')
  p.add_argument('--train_steps', type=int, default=4000, help='0: skip')
  p.add_argument(
    '--learn_from', type=int, default=256, help='0: no learning run'
  )
  args = p.parse_args()
  rows = []
  for env_id, steps in (
    ('CartPole-v1', args.steps),
    ('Pong-v5', args.pong_steps),
  ):
    for kind in ('envpool', 'sync', 'async'):
      rows.append(random_steps(kind, env_id, args.n_envs, steps))
      print(json.dumps(rows[-1]), flush=True)
  if args.train_steps:
    for learn_from in (None, args.learn_from) if args.learn_from else (None,):
      for backend in ('envpool', 'ale'):
        rows.append(
          train_steps(backend, args.n_envs, args.train_steps, learn_from)
        )
        print(json.dumps(rows[-1]), flush=True)
  print(json.dumps({'summary': _ratios(rows), 'cpus': os.cpu_count()}))


def _ratios(rows: list[dict]) -> dict:
  speed = {}
  for r in rows:
    if 'skipped' in r:
      continue
    if r['bench'] == 'random_actions':
      speed[(r['env'], r['backend'])] = r['env_steps_per_s']
    else:
      key = ('dqn_learn_from_' + str(r['learn_from']), r['backend'])
      speed[key] = r['epoch2_env_steps_per_s']
  ratios = {}
  for (what, backend), value in speed.items():
    if backend != 'envpool' and (what, 'envpool') in speed:
      ratios[f'{what} envpool/{backend}'] = round(
        speed[(what, 'envpool')] / value, 2
      )
  return ratios


if __name__ == '__main__':
  main()
