"""The learning-target benchmarks still run (a removed API once broke all
of benchmarks/seed_sweep.py's users without a failing test)."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _json_lines(script: str, *args: str) -> list[dict]:
  """Runs benchmarks/`script` with `args`; its JSON lines (it must pass)."""
  proc = subprocess.run(
    [sys.executable, str(ROOT / 'benchmarks' / script), *args],
    capture_output=True,
    text=True,
    timeout=600,
    check=False,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  return [json.loads(x) for x in proc.stdout.splitlines() if x.startswith('{')]


def test_seed_sweep_runs_a_value_config():
  lines = _json_lines(
    'value_cartpole.py',
    '--config',
    str(ROOT / 'gin' / 'acme_dqn_cartpole.gin'),
    '--seeds',
    '0',
    '--steps',
    '2000',
    '--eval_every',
    '1000',  # The config's epoch.
    '--eval_episodes',
    '1',
  )
  run, summary = lines[0], lines[-1]
  assert run['env_steps'] == 2000 and len(run['curve']) == 2
  assert summary['seeds'] == [0]


def test_seed_claims_runs_a_seed_batch_and_its_table():
  lines = _json_lines(
    'seed_claims.py',
    '--config',
    'gymnax/ppo_cartpole_fast',
    '--seeds',
    '3',
    '4',
    '--steps',
    '1024',
    '--eval_episodes',
    '2',
    '--target',
    '500',
  )
  assert [x['seed'] for x in lines[:2]] == [3, 4]
  summary = lines[-1]
  assert summary['seeds'] == [3, 4] and summary['n_seeds'] == 2
  assert summary['env_steps'] == 1024 and len(summary['final']) == 2
  assert summary['at_target'] == sum(x >= 500 for x in summary['final'])
  table = subprocess.run(
    [sys.executable, str(ROOT / 'benchmarks' / 'seed_claims.py'), '--table'],
    capture_output=True,
    text=True,
    check=True,
  ).stdout
  assert table.startswith('| config | budget | seeds | at target |')


def test_continuous_runs_sac_and_td3_without_the_peer():
  lines = _json_lines(
    'continuous.py',
    '--config',
    str(ROOT / 'gin' / 'sac_pendulum.gin'),
    '--binding',
    'SAC.layer_widths = (8,)',
    '--seeds',
    '0',
    '--steps',
    '400',
    '--eval_every',
    '200',
    '--eval_episodes',
    '1',
    '--no_peer',
  )
  run, summary = lines
  assert run['agent'] == 'SAC' and run['env_steps'] == 400
  assert summary['seeds'] == [0] and len(run['curve']) == 2


def test_envpool_speed_runs_tiny():
  pytest.importorskip('envpool')  # The [envpool] extra; [test] has it.
  lines = _json_lines(
    'envpool_speed.py',
    '--n_envs',
    '2',
    '--steps',
    '50',
    '--pong_steps',
    '10',
    '--train_steps',
    '64',
    '--learn_from',
    '0',  # The learner's compile would dominate.
  )
  assert len(lines) == 6 + 2 + 1
  assert 'CartPole-v1 envpool/sync' in lines[-1]['summary']
  trained = [x for x in lines if x.get('bench') == 'train_dqn']
  assert trained[0]['backend'] == 'envpool' and trained[0]['env_steps'] == 64


def test_overlap_runs_tiny_and_its_records_agree():
  lines = _json_lines(
    'overlap.py',
    '--config',
    str(ROOT / 'gin' / 'ppo_cartpole.gin'),
    '--steps',
    '1024',
    '--warmup',
    '1',
    '--random_s',
    '0.1',
  )
  modes = [x['mode'] for x in lines if 'mode' in x]
  assert modes == ['plain', 'sequential', 'overlap']
  assert all(x['epochs'] == 4 and x['counted_epochs'] == 3 for x in lines[:3])
  summary = lines[-1]
  assert summary['records_agree'] is True
  assert summary['overlap_vs_max_alone'] > 0 and summary['acting_vs_random'] > 0


def test_peers_run_returns_the_last_json_line_and_names_failures(
  tmp_path, monkeypatch
):
  """benchmarks/peers.run: the one way every benchmark launches a peer."""
  monkeypatch.syspath_prepend(str(ROOT / 'benchmarks'))
  import peers

  (tmp_path / 'ok.py').write_text(
    'import json, os, sys\n'
    "print('log line')\n"
    "print(json.dumps({'argv': sys.argv[1:], 'git': os.environ['G']}))\n"
  )
  (tmp_path / 'bad.py').write_text("raise SystemExit('no such game')\n")
  args = peers.argparse.Namespace(
    peer_python=sys.executable,
    peer_bench=str(tmp_path),
    peers=str(tmp_path),
    git_dir=str(tmp_path),
  )
  record = peers.run(args, 'ok.py', '--seeds', 3, git_var='G')
  assert record == {'argv': ['--seeds', '3'], 'git': str(tmp_path)}
  with pytest.raises(RuntimeError, match='bad.py failed: no such game'):
    peers.run(args, 'bad.py')
  args.git_dir = str(tmp_path / 'missing')
  with pytest.raises(SystemExit, match=r'--git_dir \(\$G\)'):
    peers.run(args, 'ok.py', git_var='G')
