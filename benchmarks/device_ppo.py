"""The device path against PureJaxRL and against trax_rl's gymnasium path.

Prints one JSON line per measurement. Ratios are measured in one run (the
machines are shared; absolute seconds move between runs):

  overhead   PPO with PureJaxRL's hyperparameters on gymnax CartPole-v1
             (4 envs x 128 steps, 4 epochs x 4 minibatches, 500k steps):
             env steps/s without compile, and after the first call (as
             PureJaxRL's second call), compile seconds, final returns;
             PureJaxRL's own runner in the same run (--peer), alternating
             with ours --repeats times.
  solve      gin/gymnax/ppo_cartpole_fast.gin (30k steps), 3 seeds in one
             process, wall time including build and compile, greedy eval
             return per seed.
  gymnasium  gin/ppo_cartpole.gin at 100k steps, 3 seeds: the gymnasium
             path (seeds one after another) against
             gin/gymnax/ppo_cartpole.gin, the same file with the env
             switched to gymnax and its device knobs (the CPU compile
             option of gymnax/common/fast_compile.gin), 3 seeds vmapped;
             neither evaluates during training.
  seeds      total env steps/s of 16 seeds in one program against 1 seed,
             after the first call (2 calls of 61 epochs), for
             gin/gymnax/ppo_cartpole.gin and for PureJaxRL's
             hyperparameters; with --peer also PureJaxRL's own
             `vmap(make_train)` over 1 and 16 keys at the same steps.
  breakout   gin/gymnax/ppo_breakout.gin, 3 seeds: returns and wall time.
  split      where an epoch of gin/gymnax/ppo_cartpole_purejaxrl.gin goes:
             the rollout alone, the training alone (on one fixed rollout)
             and the whole epoch, each 50 epochs in one compiled scan, and
             one DeviceRunner call of 50 epochs; ms per epoch, the four
             alternating --repeats times (at least 5).

  python benchmarks/device_ppo.py overhead solve --peer
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import time

import gymnax  # noqa: F401 - imported before any timing, as PureJaxRL's runner does
import jax
import jax.numpy as jnp
import numpy as np
import peers

from trax_rl import compile_cache, configurables
from trax_rl.device import evaluate, rollout

# Compiles are timed cold unless TRAX_RL_COMPILATION_CACHE names a folder.
os.environ.setdefault(compile_cache.ENV_VAR, 'off')

_GIT_VAR = 'PUREJAXRL_GIT_DIR'
_PEER_ARGS = None  # The --peer_* flags (`peers.add_flags`), set by main.


def train(config, bindings=(), n_seeds=1, eval_episodes=20, per_call=1):
  """Trains `config` (k seeds); returns timings, returns and greedy evals."""
  start = time.perf_counter()
  configurables.parse([config], bindings)
  agent_name = configurables.query('train_rl.agent_class').selector
  configurables.parse(
    [config],
    [
      *bindings,
      f'train_rl.n_seeds={n_seeds}',
      f'train_rl.epochs_per_call={per_call}',
      # Training alone is timed, as the peers'; the greedy eval comes after.
      f'{agent_name}.n_eval_episodes=0',
    ],
  )
  records = []
  result = configurables.train_rl(
    output_dir=None, callbacks=[lambda agent, record: records.append(record)]
  )
  wall = time.perf_counter() - start
  source = result.runner.source
  program, task = result.program, result.task
  evals = []
  for i in range(n_seeds):
    returns = jax.jit(evaluate.evaluate, static_argnums=(0, 1, 4, 5))(
      task.jax_env,
      program.policy(0.0),
      result.runner.learner_of(i),
      jax.random.PRNGKey(1000 + i),
      eval_episodes,
      task.max_steps or 1000,
    )
    evals.append(float(np.mean(returns)))
  steps = records[-1]['n_interactions'] * n_seeds
  # The records' epoch_s share each call's wall, the first call's compile
  # (`compile_s`) included.
  run_s = sum(r['epoch_s'] for r in records) - source.compile_s
  # Steady state: the calls after the first (whose run also warms up), as
  # PureJaxRL's `second_call_run_s` is its run after a first call.
  later = records[per_call:]
  steady = None
  if later:
    steady = (
      len(later) * (steps // len(records)) / sum(r['epoch_s'] for r in later)
    )
  return {
    'config': config,
    'bindings': list(bindings),
    'n_seeds': n_seeds,
    'env_steps_total': steps,
    'wall_s_incl_build_compile': round(wall, 2),
    'epochs_per_call': per_call,
    'compile_s': round(source.compile_s, 2),
    'epochs_run_s': round(run_s, 2),
    'env_steps_per_s': round(steps / run_s),
    'env_steps_per_s_after_first_call': steady and round(steady),
    'train_return_last100': records[-1]['episode_return_mean'],
    'greedy_eval_per_seed': evals,
  }


def split(config, repeats, k=50):
  """ms per epoch of the rollout, the training and the whole epoch.

  Each runs k epochs in one compiled `lax.scan` (no host loop, no records),
  so the three are the compiled program's own costs. The training scan
  trains k times on one fixed rollout. `runner` is the same k epochs as
  training runs them: one `DeviceRunner.run_epochs` call, its loop and
  per-epoch records included.
  """
  configurables.parse([config], [])
  agent = configurables.train_rl(output_dir=None, build_only=True)
  program, task = agent.program, agent.task
  env, learner = task.jax_env, agent.learner
  n_steps = -(-agent.n_interactions_per_epoch // task.n_envs)
  collect = functools.partial(
    rollout.rollout,
    env,
    program.policy(1.0),
    n_steps=n_steps,
    max_steps=task.max_steps,
  )
  carry = jax.jit(
    functools.partial(rollout.init_carry, env, n_envs=task.n_envs)
  )(jax.random.PRNGKey(0))
  steps = jax.jit(collect)(learner, carry)[1]

  def scanned(body):
    return jax.jit(lambda x: jax.lax.scan(body, x, None, length=k))

  def roll(c, _):
    c, out = collect(learner, c)
    return c, out.reward.sum()

  def fit(state, _):
    learner, key = state
    key, train_key = jax.random.split(key)
    return (program.train(learner, steps, train_key)[0], key), None

  def whole(state, _):
    learner, c, key = state
    key, train_key = jax.random.split(key)
    c, out = collect(learner, c)
    return (program.train(learner, out, train_key)[0], c, key), None

  source = agent.runner.source
  source.set_epochs_per_call(k)
  parts = {
    'rollout': (scanned(roll), carry),
    'train': (scanned(fit), (learner, jax.random.PRNGKey(1))),
    'epoch': (scanned(whole), (learner, carry, jax.random.PRNGKey(2))),
    'runner': (
      lambda n: source.run_epochs(jax.tree.map(jnp.copy, learner), n)[0],
      k,
    ),
  }
  times = {name: [] for name in parts}
  for fn, arg in parts.values():
    jax.block_until_ready(fn(arg))  # Compile and warm up.
  for _ in range(repeats):
    for name, (fn, arg) in parts.items():
      start = time.perf_counter()
      jax.block_until_ready(fn(arg))
      times[name].append((time.perf_counter() - start) / k * 1e3)
  return {
    f'{name}_ms': {
      'min': round(min(t), 3),
      'median': round(float(np.median(t)), 3),
    }
    for name, t in times.items()
  }


def _run_peer(script, *args):
  """The peer's runner in its own venv: its last JSON line, or the error."""
  try:
    return peers.run(_PEER_ARGS, script, *args, git_var=_GIT_VAR, timeout=1200)
  except (RuntimeError, subprocess.TimeoutExpired) as e:
    return {'error': str(e)}


def peer(timesteps=5e5):
  """PureJaxRL's runner (outside the project) in its own venv."""
  return _run_peer('purejaxrl_ppo.py', '--timesteps', timesteps)


# PureJaxRL's train function vmapped over seeds, run in the peer's venv on
# the ppo.py that its runner (purejaxrl_ppo.py) prepared under $PEERS; argv:
# that folder and the config as JSON. Prints the env steps/s of 1 and 16.
_PEER_SEEDS = """
import json, sys, time
import jax
sys.path.insert(0, sys.argv[1])
import ppo

config = json.loads(sys.argv[2])
rates = {}
for n in (1, 16):
  train = jax.jit(jax.vmap(ppo.make_train(config)))
  keys = jax.random.split(jax.random.PRNGKey(0), n)
  jax.block_until_ready(train(keys))
  best = float('inf')
  for _ in range(3):
    start = time.perf_counter()
    jax.block_until_ready(train(keys))
    best = min(best, time.perf_counter() - start)
  rates[n] = round(n * config['TOTAL_TIMESTEPS'] / best)
print(json.dumps({'sps_1_seed': rates[1], 'sps_16_seeds': rates[16],
                  'ratio': round(rates[16] / rates[1], 2)}))
"""


def peer_seeds(epochs):
  """PureJaxRL's 16 seeds against 1 (its hyperparameters, `epochs` updates)."""
  work = os.path.join(_PEER_ARGS.peers, 'purejaxrl')
  if not os.path.exists(os.path.join(work, 'ppo.py')):
    peer(timesteps=512)  # Its runner prepares ppo.py there.
  config = {
    'LR': 2.5e-4,
    'NUM_ENVS': 4,
    'NUM_STEPS': 128,
    'TOTAL_TIMESTEPS': epochs * 512,
    'UPDATE_EPOCHS': 4,
    'NUM_MINIBATCHES': 4,
    'GAMMA': 0.99,
    'GAE_LAMBDA': 0.95,
    'CLIP_EPS': 0.2,
    'ENT_COEF': 0.01,
    'VF_COEF': 0.5,
    'MAX_GRAD_NORM': 0.5,
    'ACTIVATION': 'tanh',
    'ENV_NAME': 'CartPole-v1',
    'ANNEAL_LR': True,
    'DEBUG': False,
  }
  return _run_peer('-c', _PEER_SEEDS, work, json.dumps(config))


def emit(name, **fields):
  print(json.dumps({'bench': 'device_ppo', 'measure': name, **fields}))
  sys.stdout.flush()


def main():
  p = argparse.ArgumentParser()
  p.add_argument('measures', nargs='+')
  p.add_argument('--peer', action='store_true', help='run PureJaxRL too')
  peers.add_flags(p, _GIT_VAR)
  p.add_argument('--breakout_steps', type=int, default=500_000)
  p.add_argument(
    '--repeats',
    type=int,
    default=1,
    help='overhead: alternate PureJaxRL and trax_rl this many times; '
    'split: time each part this many times',
  )
  p.add_argument(
    '--epochs_per_call',
    type=int,
    default=1,
    help='train_rl.epochs_per_call of every trax_rl run',
  )
  args = p.parse_args()
  global _PEER_ARGS
  _PEER_ARGS = args
  train_ = functools.partial(train, per_call=args.epochs_per_call)
  peer_result = peer() if args.peer else None
  if peer_result is not None:
    emit('peer', purejaxrl=peer_result)
  for m in args.measures:
    if m == 'overhead':
      # Ours and the peer alternate `repeats` times: the machine's speed
      # drifts by 10-15 % within minutes, so one pair can mislead.
      ratios = []
      for repeat in range(args.repeats):
        pair = peer_result if repeat == 0 else (peer() if args.peer else None)
        if repeat and pair is not None:
          emit('peer', purejaxrl=pair)
        ours = train_('gin/gymnax/ppo_cartpole_purejaxrl.gin')
        ratio = steady_ratio = None
        if pair and 'env_sps' in pair:
          ratio = round(ours['env_steps_per_s'] / pair['env_sps'], 2)
          steady = ours['env_steps_per_s_after_first_call']
          steady_ratio = steady and round(steady / pair['env_sps'], 2)
          ratios.append(steady_ratio or ratio)
        emit(
          m,
          trax_rl=ours,
          sps_ratio_vs_purejaxrl=ratio,
          steady_sps_ratio_vs_purejaxrl=steady_ratio,
        )
      if ratios:
        emit(
          'overhead_summary',
          steady_ratios=ratios,
          median_steady_ratio=float(np.median(ratios)),
        )
    elif m == 'solve':
      ours = train_('gin/gymnax/ppo_cartpole_fast.gin', n_seeds=3)
      ratio = None
      if peer_result and 'first_call_compile_plus_run_s' in peer_result:
        ratio = round(
          ours['wall_s_incl_build_compile']
          / peer_result['first_call_compile_plus_run_s'],
          2,
        )
      emit(m, trax_rl=ours, wall_ratio_vs_purejaxrl_500k=ratio)
    elif m == 'gymnasium':
      host = []
      for seed in range(3):
        start = time.perf_counter()
        # No per-epoch greedy evals, as on the gymnax side.
        configurables.parse(
          ['gin/ppo_cartpole.gin'],
          [f'PPO.seed={seed}', 'PPO.n_eval_episodes=0'],
        )
        configurables.train_rl(output_dir=None)
        host.append(time.perf_counter() - start)
      ours = train_('gin/gymnax/ppo_cartpole.gin', n_seeds=3)
      emit(
        m,
        gymnasium_wall_s_per_seed=[round(h, 2) for h in host],
        trax_rl_gymnax=ours,
        wall_ratio=round(ours['wall_s_incl_build_compile'] / sum(host), 3),
      )
    elif m == 'seeds':
      # Two calls of 61 epochs: the rate after the first call is the
      # steady one (a single call's rate is mostly its start-up for 1 seed).
      epochs = 122
      fields = {}
      for config in (
        'gin/gymnax/ppo_cartpole.gin',
        'gin/gymnax/ppo_cartpole_purejaxrl.gin',
      ):
        rates = [
          train(config, [f'train_rl.n_epochs={epochs}'], n, 1, per_call=61)[
            'env_steps_per_s_after_first_call'
          ]
          for n in (1, 16)
        ]
        fields[config] = {
          'sps_1_seed': rates[0],
          'sps_16_seeds': rates[1],
          'ratio': round(rates[1] / rates[0], 2),
        }
      if args.peer:
        fields['purejaxrl_vmap_make_train'] = peer_seeds(epochs)
      emit(m, **fields)
    elif m == 'breakout':
      epochs = args.breakout_steps // (64 * 128)
      ours = train_(
        'gin/gymnax/ppo_breakout.gin',
        [f'train_rl.n_epochs={epochs}'],
        n_seeds=3,
      )
      emit(m, trax_rl=ours)
    elif m == 'split':
      config = 'gin/gymnax/ppo_cartpole_purejaxrl.gin'
      emit(m, config=config, **split(config, max(args.repeats, 5)))
    else:
      raise SystemExit(f'unknown measure {m!r}')


if __name__ == '__main__':
  main()
