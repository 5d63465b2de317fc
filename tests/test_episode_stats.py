"""Tests for the honest training return: mean of the last completed episodes."""

import functools
import json

from trax_rl import cli, metrics, task
from trax_rl.agents import policy_agents
from trax_rl.networks import models
from trax_rl.testing import fake_envs


def _agent(output_dir):
  # One action: reward 1 per step, so a return is an episode's length.
  # Episodes last 10, 6, 10, 6, ... steps; an epoch is 4 steps.
  t = task.RLTask(
    lambda: fake_envs.CountingEnv(lengths=(10, 6), n_actions=1),
    initial_trajectories=0,
    seed=0,
  )
  return policy_agents.PolicyGradient(
    t,
    model_fn=functools.partial(models.Policy, body=models.MLP),
    batch_size=2,
    n_interactions_per_epoch=4,
    lr_schedule=lambda: 1e-3,
    output_dir=output_dir,
  )


def test_metric_when_no_episode_ends_inside_an_epoch(tmp_path):
  agent = _agent(str(tmp_path))
  agent.run(4)
  agent.close()
  # Resumes after epoch 4, when no episode is running: the window and the
  # count come from the checkpoint.
  agent = _agent(str(tmp_path))
  agent.run(5, n_epochs_is_total_epochs=True)
  agent.close()
  records = metrics.read(str(tmp_path))
  # Steps 1-4, 5-8: no episode ended, avg_return is the slice length 4.
  # Step 10 ends the 10-step episode, step 16 the 6-step one; epoch 5
  # (steps 17-20) ends none, and the honest mean stays (10 + 6) / 2.
  assert [r['avg_return'] for r in records] == [4.0, 4.0, 10.0, 6.0, 4.0]
  assert [r['episode_return_mean'] for r in records] == [
    None,
    None,
    10.0,
    8.0,
    8.0,
  ]
  assert [r['n_episodes'] for r in records] == [0, 0, 1, 2, 2]


def test_progress_bar_shows_completed_episode_mean(capsys, tmp_path):
  # CartPole with 1 env and 5 steps per epoch: no episode can end in
  # epoch 1 (a CartPole episode lasts at least 8 steps).
  code = cli.main(
    [
      'train',
      '--config_file',
      'gin/pg_cartpole.gin',
      '--output_dir',
      str(tmp_path),
      '--config',
      'RLTask.n_envs=1',
      '--config',
      'PolicyGradient.n_trajectories_per_epoch=None',
      '--config',
      'PolicyGradient.n_interactions_per_epoch=5',
      '--config',
      'PolicyGradient.n_eval_episodes=0',
      '--config',
      'train_rl.n_epochs=1',
    ]
  )
  err = capsys.readouterr().err
  assert code == 0, err
  assert 'return=-' in err and 'episodes=0' in err
  (record,) = metrics.read(str(tmp_path))
  assert record['avg_return'] == 5.0 and record['episode_return_mean'] is None
  assert json.loads(json.dumps(record))['n_episodes'] == 0
