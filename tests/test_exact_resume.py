"""Exact resume of runs whose epochs cut episodes (n_interactions)."""

import json
import logging
import pathlib
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from trax_rl import checkpoint, cli, env_state, envs
from trax_rl.sources import host_envs, seed_envs
from trax_rl.testing import fake_envs

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLASSIC = [
  'CartPole-v1',
  'Acrobot-v1',
  'MountainCar-v0',
  'MountainCarContinuous-v0',
  'Pendulum-v1',
]
TIMING = ('env_steps_per_s', 'collect_s', 'train_s', 'epoch_s')


def _play(vector_env, actions):
  out = []
  for a in actions:
    obs, reward, term, trunc, _ = vector_env.step(a)
    if (term | trunc).any():
      vector_env.reset(options={'reset_mask': term | trunc})
    out.append((obs.copy(), reward, term, trunc))
  return out


@pytest.mark.parametrize('env_id', CLASSIC)
def test_classic_control_state_round_trips_through_a_checkpoint(
  env_id, tmp_path
):
  env = envs.make_vector_env(env_id, 2)
  env.reset(seed=[3, 4])
  space = env.action_space
  space.seed(0)
  actions = [space.sample() for _ in range(300)]
  _play(env, actions[:100])
  checkpoint.save(tmp_path / 'env.pkl', env_state.capture(env))
  expected = _play(env, actions[100:])
  fresh = envs.make_vector_env(env_id, 2)  # Never reset.
  env_state.restore(fresh, checkpoint.load(tmp_path / 'env.pkl'))
  for (o1, r1, te1, tr1), (o2, r2, te2, tr2) in zip(
    expected, _play(fresh, actions[100:])
  ):
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_array_equal(r1, r2)
    assert (te1 == te2).all() and (tr1 == tr2).all()


def test_what_cannot_be_captured_or_restored_is_named():
  lunar = envs.make_vector_env('LunarLander-v3', 1)
  lunar.reset(seed=0)
  with pytest.raises(env_state.NotCapturable, match='LunarLander.world'):
    env_state.capture(lunar)
  cartpole = envs.make_vector_env('CartPole-v1', 1)
  cartpole.reset(seed=0)
  state = env_state.capture(cartpole)
  with pytest.raises(ValueError, match="saved for \\['TimeLimit'"):
    env_state.restore(envs.make_vector_env('Pendulum-v1', 1), state)
  state['envs'][0][-1]['_np_random']['__generator__']['bit_generator'] = 'X'
  with pytest.raises(ValueError, match="unknown bit generator 'X'"):
    env_state.restore(envs.make_vector_env('CartPole-v1', 1), state)
  state['envs'][0][-1] = {'__class__': 1}
  with pytest.raises(ValueError, match='cannot be restored'):
    env_state.restore(envs.make_vector_env('CartPole-v1', 1), state)


class _Messages(logging.Handler):
  def __init__(self):
    super().__init__(logging.WARNING)
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


class _OpaqueEnv(fake_envs.CountingEnv):
  """A CountingEnv holding an object: its state is not plain data."""

  def __init__(self):
    super().__init__(lengths=(5,))
    self.simulator = object()


def test_envs_that_cannot_be_captured_restart_with_a_notice():
  act = lambda obs, first, core: (np.zeros(obs.shape[:2], np.int64), {}, core)

  def collect(env):
    host = host_envs.HostEnvs(env, n_envs=2, seeds=[0])
    host.collect(act, n_steps=3)  # Cuts episodes.
    return host, host.state_dict()

  counting = lambda: fake_envs.CountingEnv(lengths=(5,))
  _, state = collect(counting)
  running = state['seeds'][0]['running']
  assert running['episode_length'].tolist() == [3, 3]
  _, state = collect(_OpaqueEnv)
  assert state['seeds'][0]['running'] is None
  assert state['seeds'][0]['restart'] == '_OpaqueEnv.simulator is a object'
  resumed = host_envs.HostEnvs(_OpaqueEnv, n_envs=2, seeds=[0])
  # Listen on the module's logger itself: the CLI, if an earlier test in
  # this process ran it, stops trax_rl's records from reaching the root.
  notices = _Messages()
  logger = logging.getLogger(seed_envs.__name__)
  logger.addHandler(notices)
  try:
    resumed.load_state_dict(checkpoint.loads(checkpoint.dumps(state)))
  finally:
    logger.removeHandler(notices)
  assert notices.messages == [
    'running episodes restart on resume: the env state is not plain data '
    '(_OpaqueEnv.simulator is a object)'
  ]
  # The counting env's running episodes, though, continue where they were.
  host, state = collect(counting)
  resumed = host_envs.HostEnvs(counting, n_envs=2, seeds=[0])
  resumed.load_state_dict(checkpoint.loads(checkpoint.dumps(state)))
  a = host.collect(act, n_steps=4).rollout
  b = resumed.collect(act, n_steps=4).rollout
  np.testing.assert_array_equal(a.observation, b.observation)
  np.testing.assert_array_equal(a.terminated, b.terminated)


# The default job, made small: a few short epochs of 13 lockstep steps of 8
# envs, so every epoch ends inside running episodes.
def _dqn_args(output_dir, n_epochs):
  args = ['train', '--config_file', str(ROOT / 'gin' / 'dqn_cartpole.gin')]
  args += ['--output_dir', str(output_dir), '--no_progress']
  for b in (
    'DQN.n_interactions_per_epoch = 100',
    'DQN.value_train_steps_per_epoch = 10',
    'DQN.n_eval_episodes = 1',
    'RLTask.max_steps = 50',
    'MLP.layer_widths = (16,)',
    f'train_rl.n_epochs = {n_epochs}',
  ):
    args += ['--config', b]
  return args


def _records(output_dir):
  lines = (output_dir / 'metrics.jsonl').read_text().splitlines()
  records = [json.loads(x) for x in lines]
  return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def test_dqn_cartpole_killed_and_resumed_equals_uninterrupted(capsys, tmp_path):
  ref, run = tmp_path / 'ref', tmp_path / 'run'
  assert cli.main(_dqn_args(ref, 5)) == 0
  proc = subprocess.Popen(
    [sys.executable, '-m', 'trax_rl.cli', *_dqn_args(run, 5)],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  deadline = time.time() + 300
  while not (run / 'checkpoint.pkl').exists() and time.time() < deadline:
    if proc.poll() is not None:
      break
    time.sleep(0.02)
  time.sleep(random.Random(time.time_ns()).uniform(0.0, 0.05))
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  killed_at = checkpoint.load(run / 'checkpoint.pkl')['epoch']
  assert 1 <= killed_at < 5
  capsys.readouterr()
  assert cli.main(_dqn_args(run, 5)) == 0
  assert 'restart' not in capsys.readouterr().err
  assert _records(run) == _records(ref)
  ours, theirs = (checkpoint.load(d / 'checkpoint.pkl') for d in (run, ref))
  for a, b in zip(ours['learner'], theirs['learner'], strict=True):
    np.testing.assert_array_equal(a, b)
  # Episodes ran across epoch ends: the envs were saved mid-episode.
  running = ours['source']['envs']['seeds'][0]['running']
  assert running['episode_length'].any()
