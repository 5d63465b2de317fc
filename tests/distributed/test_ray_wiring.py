"""Tests of the rollout actors' wiring without Ray: knobs, CLI, imports."""

import subprocess
import sys

import numpy as np
import pytest

from trax_rl import cli, configurables
from trax_rl.distributed import ray_collector
from trax_rl.sources import ray_actors

PG = """
RLTask.env = 'CartPole-v1'
RLTask.initial_trajectories = 0
RLTask.n_envs = 2
RLTask.max_steps = 30
MLP.layer_widths = (8,)
Policy.body = @MLP
PolicyGradient.model_fn = @Policy
PolicyGradient.batch_size = 8
PolicyGradient.n_trajectories_per_epoch = 5
PolicyGradient.seed = 3
train_rl.agent_class = @PolicyGradient
train_rl.n_epochs = 1
"""


def _lines(config):
  return [line for line in config.splitlines() if line.strip()]


def test_apex_epsilons():
  assert ray_actors.apex_epsilon(0, 1, 0.4, 7.0) == pytest.approx(0.4)
  eps = [ray_actors.apex_epsilon(i, 3, 0.4, 7.0) for i in range(3)]
  np.testing.assert_allclose(eps, [0.4, 0.4**4.5, 0.4**8], rtol=1e-5)


@pytest.mark.parametrize(
  'kwargs, message',
  [
    ({'n_actors': 0}, 'n_actors'),
    ({'chunk_length': 0}, 'chunk_length'),
    ({'apex_epsilon': 1.5}, 'apex_epsilon'),
    ({'max_restarts': -1}, 'max_restarts'),
  ],
)
def test_ray_collector_validates_its_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    ray_collector.RayCollector(**kwargs)


def test_cli_shorthands_bind_the_ray_collector(tmp_path):
  config = tmp_path / 'pg.gin'
  config.write_text(PG)
  status = cli.main(
    [
      'train',
      f'--config_file={config}',
      f'--output_dir={tmp_path / "o"}',
      '--config=train_rl.n_epochs=0',
      '--no_progress',
      '--n_actors=3',
      '--ray_address=127.0.0.1:6379',
    ]
  )
  assert status == 0
  assert configurables.query('train_rl.collector') is not None
  assert configurables.query('RayCollector.n_actors') == 3
  assert configurables.query('RayCollector.address') == '127.0.0.1:6379'


def test_cli_refuses_zero_actors(tmp_path, capsys):
  config = tmp_path / 'pg.gin'
  config.write_text(PG)
  status = cli.main(
    [
      'train',
      f'--config_file={config}',
      f'--output_dir={tmp_path / "o"}',
      '--n_actors=0',
    ]
  )
  assert status == 2
  assert capsys.readouterr().err.startswith(
    'trax-rl: error: --n_actors must be >= 1'
  )


def test_configurables_do_not_import_ray():
  code = "import sys; import trax_rl.configurables; print('ray' in sys.modules)"
  out = subprocess.run(
    [sys.executable, '-c', code], capture_output=True, text=True, check=True
  )
  assert out.stdout.strip() == 'False'
