"""Tests for the Python API: trax_rl.train, trax_rl.evaluate, trax_rl.load."""

import subprocess
import sys

import pytest

import trax_rl

# A small PolicyGradient run on CartPole, as gin text.
GIN = """
RLTask.env = 'CartPole-v1'
RLTask.n_envs = 2
RLTask.initial_trajectories = 0
RLTask.max_steps = 200
Policy.body = @MLP
PolicyGradient.model_fn = @Policy
PolicyGradient.optimizer = @adam
PolicyGradient.batch_size = 64
PolicyGradient.n_trajectories_per_epoch = 2
train_rl.agent_class = @PolicyGradient
train_rl.n_epochs = 10
"""


def test_import_is_light():
  code = (
    'import sys, trax_rl; print("jax" in sys.modules, "gin" in sys.modules)'
  )
  out = subprocess.run(
    [sys.executable, '-c', code], capture_output=True, text=True, check=True
  )
  assert out.stdout.split() == ['False', 'False']


def test_train_from_gin_text_stops_when_a_callback_says_so():
  seen = []

  def stop_at_epoch_3(agent, record):
    seen.append(record['n_episodes'])
    return agent.current_epoch >= 3

  run = trax_rl.train(GIN, callbacks=[stop_at_epoch_3])
  assert run.agent.current_epoch == 3  # Not the 10 of train_rl.n_epochs.
  assert [r['epoch'] for r in run.records] == [1, 2, 3]
  # 2 episodes per epoch.
  assert seen == [2, 4, 6] == [r['n_episodes'] for r in run.records]
  assert all(r['episode_return_mean'] > 0 for r in run.records)


def test_shipped_name_output_dir_load_and_evaluate(tmp_path):
  out = str(tmp_path / 'run')
  small = [
    'RLTask.n_envs = 2',
    'PolicyGradient.n_trajectories_per_epoch = 2',
    'PolicyGradient.n_eval_episodes = 0',
  ]
  run = trax_rl.train('pg_cartpole', output_dir=out, bindings=small, n_epochs=2)
  assert [r['epoch'] for r in run.records] == [1, 2]
  # Resuming reads the earlier records from metrics.jsonl.
  run = trax_rl.train('pg_cartpole', output_dir=out, bindings=small, n_epochs=3)
  assert [r['epoch'] for r in run.records] == [1, 2, 3]
  agent = trax_rl.load(out)
  assert agent.current_epoch == 3
  report = trax_rl.evaluate(agent, episodes=2)
  assert len(report['returns']) == 2 and report['epoch'] == 3
  assert report['return']['min'] <= report['return']['max']
  by_dir = trax_rl.evaluate(out, episodes=1, video=str(tmp_path / 'v.gif'))
  assert by_dir['video']['frames'] == by_dir['video']['return'] + 1


@pytest.mark.parametrize(
  'config, message',
  [
    ([], 'config must be'),
    ('no_such_config', 'no_such_config does not exist'),
    ([GIN, 'RLTask.gamma = 2.0'], 'gamma must be'),
  ],
)
def test_bad_config(config, message):
  with pytest.raises(ValueError, match=message):
    trax_rl.train(config)


def test_load_without_a_run(tmp_path):
  with pytest.raises(ValueError, match='has no config.gin'):
    trax_rl.load(str(tmp_path))
