"""Every gin file parses, passes `check`, and trains one tiny epoch."""

import importlib.util
import pathlib

import gin
import pytest

from trax_rl import configurables
from trax_rl.agents import checks
from trax_rl.sources import device as device_source

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = sorted(p for p in (ROOT / 'gin').glob('*.gin'))
ATARI = sorted((ROOT / 'gin' / 'atari').glob('*.gin'))
GYMNAX = sorted((ROOT / 'gin' / 'gymnax').glob('*.gin'))
BRAX = sorted((ROOT / 'gin' / 'brax').glob('*.gin'))
HAS_ALE = importlib.util.find_spec('ale_py') is not None
HAS_ENVPOOL = importlib.util.find_spec('envpool') is not None


def _ids(paths):
  return [p.relative_to(ROOT / 'gin').as_posix() for p in paths]


def test_there_are_configs():
  assert len(CONFIGS) >= 2


@pytest.mark.parametrize('config', CONFIGS, ids=_ids(CONFIGS))
def test_config_trains_one_epoch_and_checks(config, tmp_path):
  configurables.parse([str(config)], ['train_rl.n_epochs=1'])
  # strict: every binding of a shipped config is used by the run.
  agent = configurables.train_rl(output_dir=str(tmp_path), strict=True)
  assert agent.current_epoch == 1
  assert (tmp_path / 'config.gin').exists()
  assert (tmp_path / 'checkpoint.pkl').exists()
  # One agent for both (a second build cost seconds per config); `check`
  # on a fresh build is tested with the gymnax configs and in test_cli.
  assert checks.check(agent)['update'] == 'compiled'
  gin.clear_config()


# CI-sized: 2 envs, 2 epochs of 64 env steps, a small replay, one sample per
# insert, no evaluation (a Pong episode is thousands of steps).
def _ci_sized(agent_name):
  bindings = [
    'RLTask.n_envs = 2',
    f'{agent_name}.n_interactions_per_epoch = 64',
    f'{agent_name}.min_replay_size = 32',
    f'{agent_name}.max_replay_size = 256',
    f'{agent_name}.batch_size = 4',
    f'{agent_name}.samples_per_insert = 1.0',
    f'{agent_name}.n_eval_episodes = 0',
    'train_rl.final_eval = False',
    'train_rl.n_epochs = 2',
  ]
  return bindings


@pytest.mark.parametrize('config', ATARI, ids=_ids(ATARI))
def test_atari_config_trains_two_epochs_on_envpool(config, tmp_path):
  configurables.parse([str(config)])
  agent_name = configurables.query('train_rl.agent_class').selector
  configurables.parse([str(config)], _ci_sized(agent_name))
  if not HAS_ENVPOOL:
    # Without the optional extra the error says what to install.
    with pytest.raises(ValueError, match=r'needs envpool: pip install'):
      configurables.train_rl(output_dir=None, build_only=True)
    return
  records = []
  agent = configurables.train_rl(
    output_dir=str(tmp_path),
    strict=True,
    callbacks=[lambda _, r: records.append(r)],
  )
  assert agent.task.env_spec.name == 'envpool:Pong-v5'
  assert [r['n_interactions'] for r in records] == [64, 128]
  gin.clear_config()


def test_atari_on_ale_without_envpool():
  # The same settings through gymnasium's wrappers, for users without
  # envpool: the included file's bindings replace envpool's.
  # (CI-sized: the shipped 1M-item replay of stacked frames is 26 GiB.)
  for config, include, agent_name, shape in (
    ('dqn', 'ale_env', 'ReplayValueAgent', (4, 84, 84)),
    ('r2d2', 'ale_rgb_env', 'R2D2', (84, 84, 3)),
  ):
    configurables.parse(
      [f'atari/{config}'],
      [f"include 'atari/common/{include}.gin'", *_ci_sized(agent_name)],
    )
    if HAS_ALE:
      agent = configurables.train_rl(output_dir=None, build_only=True)
      assert agent.task.observation_space.shape == shape
    else:
      with pytest.raises(ValueError, match='needs ale-py'):
        configurables.train_rl(output_dir=None, build_only=True)
  gin.clear_config()


@pytest.mark.parametrize('config', GYMNAX, ids=_ids(GYMNAX))
def test_gymnax_config_builds_on_the_device_path_and_checks(config):
  configurables.parse([str(config)])
  agent = configurables.train_rl(output_dir=None, build_only=True)
  assert agent.task.jax_env is not None
  # Every shipped gymnax config trains in compiled epochs, not from the host.
  assert isinstance(agent.runner.source, device_source.DeviceSource)
  assert checks.check(agent)['update'] == 'compiled'
  gin.clear_config()


@pytest.mark.parametrize('config', BRAX, ids=_ids(BRAX))
def test_brax_config_trains_two_epochs_on_the_device(config):
  # Training only: evaluation compiles another 1000-step program.
  configurables.parse([str(config)])
  agent_name = configurables.query('train_rl.agent_class').selector
  configurables.parse(
    [str(config)],
    [
      f'{agent_name}.n_eval_episodes = 0',
      'train_rl.final_eval = False',
      'train_rl.epochs_per_call = 2',
    ],
  )
  agent = configurables.train_rl(output_dir=None, build_only=True)
  assert agent.task.jax_env.name.startswith('brax:')
  assert isinstance(agent.runner.source, device_source.DeviceSource)
  records = []
  agent.run(2, epochs_per_call=2, callbacks=[lambda _, r: records.append(r)])
  steps = configurables.query(f'{agent_name}.n_interactions_per_epoch')
  assert [r['n_interactions'] for r in records] == [steps, 2 * steps]
  gin.clear_config()


def test_missing_simulators_name_the_extra(monkeypatch):
  import sys

  from trax_rl import envs, jax_envs

  # Brax's modules may be loaded already (another test trained a config).
  for name in [m for m in sys.modules if m.split('.')[0] == 'brax'] + ['brax']:
    monkeypatch.setitem(sys.modules, name, None)
  with pytest.raises(
    ValueError, match=r"needs Brax: pip install -e '\.\[brax\]'"
  ):
    jax_envs.make_jax_env('brax:inverted_pendulum')
  monkeypatch.setitem(sys.modules, 'mujoco', None)
  for name in [m for m in sys.modules if m.startswith('gymnasium.envs.mujoco')]:
    monkeypatch.delitem(sys.modules, name)
  with pytest.raises(ValueError, match=r"pip install -e '\.\[mujoco\]'$"):
    envs.make_env('HalfCheetah-v5')


def test_unknown_brax_env_is_named():
  from trax_rl import jax_envs

  with pytest.raises(ValueError, match="unknown env id 'brax:half_cheetah'"):
    jax_envs.make_jax_env('brax:half_cheetah')
