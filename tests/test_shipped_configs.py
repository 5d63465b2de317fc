"""Shipped configs: found by name, listed, and carried by the built wheel."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

from trax_rl import cli, configurables, knobs, shipped_configs

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_names_and_resolution_from_another_directory(monkeypatch, tmp_path):
  names = shipped_configs.names()
  assert 'dqn_cartpole' in names and 'atari/dqn' in names
  assert not any('common' in n for n in names)  # Included pieces only.
  monkeypatch.chdir(tmp_path)
  for spec in ('dqn_cartpole', 'dqn_cartpole.gin', 'gin/dqn_cartpole.gin'):
    path = pathlib.Path(shipped_configs.resolve(spec))
    assert path.read_text() == (ROOT / 'gin' / 'dqn_cartpole.gin').read_text()


def test_names_are_told_from_bindings():
  for name in (
    'dqn_cartpole',
    'atari/dqn',
    'gin/x.gin',
    '/abs/x.gin',
    '../a.gin',
  ):
    assert shipped_configs.is_name(name), name
  for binding in ('RLTask.n_envs=2', "RLTask.env = 'CartPole-v1'", 'a b'):
    assert not shipped_configs.is_name(binding), binding


def test_include_inside_a_shipped_config_resolves(monkeypatch, tmp_path):
  monkeypatch.chdir(tmp_path)
  configurables.parse(['atari/dqn'])
  # Bound only in the included atari/common/env.gin.
  assert configurables.query('make_envpool.frame_skip') == 4
  assert configurables.query('make_envpool.env') == 'Pong-v5'


def test_configs_command_lists_agent_env_and_result(capsys):
  assert cli.main(['configs']) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[0].split() == ['config', 'agent', 'env', 'result']
  rows = {ln.split()[0]: ln for ln in lines[1:]}
  assert set(rows) == set(shipped_configs.names())
  assert 'DQN' in rows['dqn_cartpole'] and 'CartPole-v1' in rows['dqn_cartpole']
  # From benchmarks/results.json, in one format.
  assert (
    '100k steps, seeds 0-9: 9/10 >= 475, IQM 500 [465.8, 500], '
    in rows['dqn_cartpole']  # The claim over the most seeds.
  )
  for row in rows.values():
    assert row.endswith('not measured') or re.search(
      r' \d+(k|M) steps, seeds \d+-\d+: \d+/\d+ >= -?[\d.]+, '
      r'(final [-\d. /]+|IQM [-\d.]+ \[[-\d.]+, [-\d.]+\]), '
      r'[\d.]+ s/seed$',
      row,
    ), row
  assert 'ReplayValueAgent + QrDqn' in rows['qrdqn_cartpole']
  assert 'not measured' in rows['atari/r2d2']
  # A config in a folder: its own row, not its top-level namesake's.
  assert 'gymnax:CartPole-v1 via' in rows['gymnax/r2d2_cartpole_masked']


def test_unknown_config_name(capsys, tmp_path):
  code = cli.main(['check', '--config', 'no_such_config'])
  err = capsys.readouterr().err
  assert code == 2 and 'no_such_config does not exist' in err
  code = cli.main(['check', '--config', 'RLTask.n_envs=2'])
  assert code == 2 and 'no config' in capsys.readouterr().err


def _copy_source(dest: pathlib.Path) -> None:
  ignore = shutil.ignore_patterns('__pycache__', '*.pyc')
  shutil.copy(ROOT / 'setup.py', dest)
  shutil.copytree(ROOT / 'trax_rl', dest / 'trax_rl', ignore=ignore)
  shutil.copytree(ROOT / 'gin', dest / 'gin')
  (dest / 'benchmarks').mkdir()
  shutil.copy(ROOT / 'benchmarks' / 'results.json', dest / 'benchmarks')


def test_built_wheel_trains_a_shipped_config_by_name(tmp_path):
  # Build from a copy, so the checkout gets no build/ or egg-info.
  src, dist, venv, work = (tmp_path / d for d in ('src', 'dist', 'venv', 'w'))
  src.mkdir()
  work.mkdir()
  _copy_source(src)
  env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
  pip = [sys.executable, '-m', 'pip']

  def run(*cmd, cwd=work):
    proc = subprocess.run(
      cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout

  run(*pip, 'wheel', '--no-deps', '-q', '-w', str(dist), str(src))
  (wheel,) = dist.glob('trax_rl-*.whl')
  # A fresh venv that sees this venv's packages (jax, gin, ...) through a
  # plain path, so the .pth of the checkout's editable install is not run.
  run(sys.executable, '-m', 'venv', '--without-pip', str(venv))
  python = str(venv / 'bin' / 'python')
  site = run(
    python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
  )
  pathlib.Path(site.strip(), 'deps.pth').write_text(
    sysconfig.get_paths()['purelib'] + '\n'
  )
  run(*pip, '--python', python, 'install', '-q', '--no-deps', str(wheel))
  # The package comes from the wheel, and atari/dqn includes
  # atari/common/env.gin from inside it.
  where, frame_skip = run(
    python,
    '-c',
    'import trax_rl; print(trax_rl.__file__); '
    'from trax_rl import configurables as c; c.parse(["atari/dqn"]); '
    'print(c.query("make_envpool.frame_skip"))',
  ).split()
  assert where.startswith(str(venv)) and str(ROOT) not in where
  assert frame_skip == '4'
  out = run(
    str(venv / 'bin' / 'trax-rl'),
    'train',
    '--config=dqn_cartpole',
    '--output_dir=run',
    '--no_progress',
    '--config=RLTask.n_envs=2',
    '--config=DQN.n_interactions_per_epoch=64',
    '--config=DQN.value_train_steps_per_epoch=2',
    '--config=DQN.n_eval_episodes=0',
    '--config=train_rl.n_epochs=1',
  )
  assert json.loads(out.splitlines()[-1])['epochs'] == 1
  assert (work / 'run' / 'checkpoint.pkl').exists()
  listing = run(str(venv / 'bin' / 'trax-rl'), 'configs')
  assert 'seeds 0-9: 9/10 >= 475' in listing  # results.json travels too.


def test_every_shipped_config_evaluates():
  from trax_rl import gin_registry

  silent = []
  for name in shipped_configs.names():
    configurables.parse([shipped_configs.resolve(name)])
    agent = configurables.query('train_rl.agent_class').selector
    n = configurables.query(f'{agent}.n_eval_episodes')
    if n is None:
      n = knobs.default(gin_registry.lookup(agent), 'n_eval_episodes')
    if not n:
      silent.append(name)
  assert silent == []
