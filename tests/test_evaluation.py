"""Tests for evaluation statistics, videos and `trax-rl eval`."""

import functools
import json

import imageio.v3 as iio
import numpy as np
import PIL.Image
import pytest

from trax_rl import cli, envs, evaluation, task
from trax_rl.agents import policy_agents
from trax_rl.networks import models
from trax_rl.testing import fake_envs


def _agent(env, max_steps=None, output_dir=None):
  t = task.RLTask(env, initial_trajectories=0, seed=0, max_steps=max_steps)
  return policy_agents.PolicyGradient(
    t,
    model_fn=functools.partial(models.Policy, body=models.MLP),
    batch_size=2,
    n_interactions_per_epoch=2,
    lr_schedule=lambda: 1e-3,
    output_dir=output_dir,
  )


def test_statistics_of_known_returns():
  # One action: reward 1 per step, so episodes of 3, 5, 4 steps return
  # 3, 5, 4: mean 4, std sqrt(((-1)**2 + 1**2 + 0) / 3), min 3, max 5.
  agent = _agent(lambda: fake_envs.CountingEnv(lengths=(3, 5, 4), n_actions=1))
  report = evaluation.evaluate(agent, n_episodes=3, temperature=0.0)
  assert report['returns'] == [3.0, 5.0, 4.0]
  assert report['lengths'] == [3, 5, 4]
  want = {'mean': 4.0, 'std': np.sqrt(2 / 3), 'min': 3.0, 'max': 5.0}
  for stats in (report['return'], report['length']):
    assert stats.keys() == want.keys()
    np.testing.assert_allclose(list(stats.values()), list(want.values()))
  assert int(agent.learner.train.step) == 0  # Evaluation learns nothing.


def test_mp4_decodes_with_one_frame_per_step_and_reset(tmp_path):
  # Episodes are cut at 5 steps (a CartPole episode cannot end sooner), so
  # the video has the reset frame and 5 step frames.
  agent = _agent('CartPole-v1', max_steps=5)
  path = str(tmp_path / 'episode.mp4')
  result = evaluation.record_video(agent, path, temperature=1.0)
  assert result['frames'] == 6 and result['return'] == 5.0
  frames = iio.imread(path, index=None)
  assert frames.shape[0] == 6
  assert frames.shape[-1] == 3 and frames.shape[1] >= 100


def test_gif_plays_one_frame_time_per_step_and_reset(tmp_path):
  # A GIF writer merges identical neighbouring frames into one longer
  # frame, so count time: 6 frames at 25 fps are 240 ms.
  agent = _agent('CartPole-v1', max_steps=5)
  path = str(tmp_path / 'episode.gif')
  result = evaluation.record_video(agent, path, temperature=1.0, fps=25)
  assert result['frames'] == 6
  with PIL.Image.open(path) as gif:
    durations = []
    for i in range(gif.n_frames):
      gif.seek(i)
      durations.append(gif.info['duration'])
  assert sum(durations) == 240


def test_video_of_a_wrapped_env_factory(tmp_path):
  agent = _agent(envs.masked_cartpole, max_steps=3)
  result = evaluation.record_video(agent, str(tmp_path / 'm.gif'))
  assert result['frames'] == 4


def test_env_that_cannot_render(tmp_path):
  agent = _agent(lambda: fake_envs.CountingEnv(lengths=(3,)))
  with pytest.raises(ValueError, match='cannot render rgb_array'):
    evaluation.record_video(agent, str(tmp_path / 'x.mp4'))


def test_eval_command(capsys, tmp_path):
  run = tmp_path / 'run'
  args = ['train', '--config', 'pg_cartpole', '--output_dir', str(run)]
  small = [
    'RLTask.n_envs=2',
    'PolicyGradient.n_trajectories_per_epoch=2',
    'PolicyGradient.n_eval_episodes=0',
    'train_rl.n_epochs=1',
  ]
  for binding in small:
    args += ['--config', binding]
  assert cli.main([*args, '--no_progress']) == 0
  capsys.readouterr()
  video = tmp_path / 'ep.mp4'
  code = cli.main(
    [
      'eval',
      '--output_dir',
      str(run),
      '--episodes',
      '3',
      '--temperature',
      '1.0',
      '--video',
      str(video),
    ]
  )
  out = capsys.readouterr()
  assert code == 0, out.err
  report = json.loads(out.out)
  assert report['epoch'] == 1 and report['episodes'] == 3
  # CartPole pays 1 per step: each return is its episode's length.
  assert report['returns'] == [float(n) for n in report['lengths']]
  assert len(report['returns']) == 3
  assert report['return']['min'] <= report['return']['mean']
  assert report['return']['mean'] <= report['return']['max']
  assert report['mean_return'] == pytest.approx(np.mean(report['returns']))
  n_frames = report['video']['frames']
  assert iio.imread(video, index=None).shape[0] == n_frames
  assert n_frames == report['video']['return'] + 1


@pytest.mark.parametrize(
  'extra, message',
  [
    (['--episodes', '0'], '--episodes must be an integer >= 1'),
    (['--temperature', '-1'], 'temperature must be a number >= 0'),
    (['--temperature', 'nan'], 'temperature must be a number >= 0'),
    (['--video', 'x.avi'], 'must end in one of .mp4, .gif'),
    (['--video', '/proc/no/x.mp4'], 'is not a writable directory'),
  ],
)
def test_bad_eval_flags(capsys, tmp_path, extra, message):
  code = cli.main(['eval', '--output_dir', str(tmp_path), *extra])
  err = capsys.readouterr().err
  assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_eval_of_a_directory_without_a_run(capsys, tmp_path):
  code = cli.main(['eval', '--output_dir', str(tmp_path)])
  assert code == 2 and 'has no config.gin' in capsys.readouterr().err
