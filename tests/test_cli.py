"""Tests for the trax-rl command: errors, check, eval, plot, kill and resume."""

import json
import os
import pathlib
import pickle
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from trax_rl import checkpoint, cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
PG = str(ROOT / 'gin' / 'pg_cartpole.gin')
SMALL = [
  '--config',
  'RLTask.n_envs=2',
  '--config',
  'PolicyGradient.n_trajectories_per_epoch=4',
  '--config',
  'PolicyGradient.batch_size=128',
  '--config',
  'PolicyGradient.n_eval_episodes=2',
]


def _train_args(output_dir, *extra):
  return [
    'train',
    '--config_file',
    PG,
    '--output_dir',
    str(output_dir),
    '--no_progress',
    *SMALL,
    *extra,
  ]


def _run_main(capsys, args):
  code = cli.main(args)
  return code, capsys.readouterr()


@pytest.mark.parametrize(
  'binding, culprit',
  [
    ("RLTask.env='NoSuchEnv-v3'", "unknown env id 'NoSuchEnv-v3'"),
    ('NoSuchThing.x=1', "No configurable matching 'NoSuchThing'"),
    ('RLTask.colour=1', "parameter named 'colour'"),
    ('PolicyGradient.colour=1', 'PolicyGradient.colour'),
    ('PolicyGradient.n_interactions_per_epoch=5', 'exactly one of'),
    ('PolicyGradient.n_trajectories_per_epoch=None', 'exactly one of'),
    ('RLTask.gamma=1.5', 'gamma must be in [0, 1]'),
    ('RLTask.gamma=-0.1', 'gamma must be in [0, 1]'),
    ('PolicyGradient.batch_size=0', 'batch_size must be'),
    ('RLTask.n_envs=0', 'n_envs must be'),
    ('train_rl.n_epochs=-2', 'n_epochs must be'),
    ('RLTask.gamma=', 'bad gin config'),
    # The common gin mistakes name the binding and what to write.
    (
      'RLTask.env=CartPole-v1',
      "strings need quotes: RLTask.env = 'CartPole-v1'",
    ),
    ('MLP.layer_widths=64', 'MLP.layer_widths = 64: layer_widths takes'),
    ('constant_lr.value=None', 'constant_lr.value = None: value takes float'),
    ('PolicyGradient.batch_size=1.5', 'batch_size takes int, not float'),
    ('plicy/constant_lr.value=0.1', "scope 'plicy'"),
    (
      "RLTask.env='nosuchmod_xyz:Foo-v0'",
      "its module 'nosuchmod_xyz' cannot be imported",
    ),
  ],
)
def test_bad_config_is_one_line_exit_2(capsys, tmp_path, binding, culprit):
  code, out = _run_main(
    capsys, _train_args(tmp_path / 'out', '--config', binding)
  )
  assert code == 2
  lines = out.err.strip().splitlines()
  assert len(lines) == 1, out.err
  assert lines[0].startswith('trax-rl: error: ') and culprit in lines[0]


def test_missing_config_file(capsys, tmp_path):
  code, out = _run_main(
    capsys,
    [
      'train',
      '--config_file',
      str(tmp_path / 'none.gin'),
      '--output_dir',
      str(tmp_path / 'o'),
    ],
  )
  assert code == 2 and 'none.gin does not exist' in out.err


def test_output_dir_that_is_a_file_is_untouched(capsys, tmp_path):
  target = tmp_path / 'a_file'
  target.write_text('precious')
  code, out = _run_main(capsys, _train_args(target))
  assert code == 2 and 'is not a directory' in out.err
  assert target.read_text() == 'precious'


def test_unwritable_output_dir(capsys, tmp_path):
  blocker = tmp_path / 'file'
  blocker.write_text('x')
  code, out = _run_main(capsys, _train_args(blocker / 'sub'))
  assert code == 2 and 'not writable' in out.err
  code, out = _run_main(capsys, _train_args('/proc/trax_rl_cannot_write'))
  assert code == 2 and 'not writable' in out.err


@pytest.mark.parametrize(
  'content, message',
  [
    (b'', 'is empty'),
    (b'\x80\x05garbage', 'corrupt or truncated'),
  ],
)
def test_bad_checkpoint_is_reported_and_kept(
  capsys, tmp_path, content, message
):
  (tmp_path / 'checkpoint.pkl').write_bytes(content)
  code, out = _run_main(capsys, _train_args(tmp_path))
  assert code == 2 and message in out.err
  assert len(out.err.strip().splitlines()) == 1
  assert (tmp_path / 'checkpoint.pkl').read_bytes() == content


def test_truncated_real_checkpoint(capsys, tmp_path):
  code, _ = _run_main(
    capsys, _train_args(tmp_path, '--config', 'train_rl.n_epochs=1')
  )
  assert code == 0
  ckpt = tmp_path / 'checkpoint.pkl'
  raw = ckpt.read_bytes()
  ckpt.write_bytes(raw[: len(raw) // 3])
  metrics_before = (tmp_path / 'metrics.jsonl').read_text()
  code, out = _run_main(
    capsys, _train_args(tmp_path, '--config', 'train_rl.n_epochs=2')
  )
  assert code == 2 and 'corrupt or truncated' in out.err
  assert ckpt.read_bytes() == raw[: len(raw) // 3]
  assert (tmp_path / 'metrics.jsonl').read_text() == metrics_before


class _Exploit:
  def __init__(self, marker):
    self.marker = marker

  def __reduce__(self):
    return (os.system, (f'touch {self.marker}',))


def test_checkpoint_that_would_run_code_is_refused(tmp_path):
  marker = tmp_path / 'pwned'
  (tmp_path / 'checkpoint.pkl').write_bytes(pickle.dumps(_Exploit(marker)))
  proc = subprocess.run(
    [sys.executable, '-m', 'trax_rl.cli', *_train_args(tmp_path)],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 2
  assert 'refusing to load' in proc.stderr
  assert not marker.exists()


def test_check_command(capsys):
  code, out = _run_main(capsys, ['check', '--config_file', PG])
  assert code == 0
  report = json.loads(out.out)
  assert report['agent'] == 'PolicyGradient'
  assert report['update'] == 'compiled' and report['acting'] == 'ok'
  code, out = _run_main(
    capsys, ['check', '--config_file', PG, '--config', "RLTask.env='Nope-v0'"]
  )
  assert code == 2 and 'Nope-v0' in out.err


def test_train_eval_plot(capsys, tmp_path):
  out_dir = tmp_path / 'run'
  code, out = _run_main(
    capsys, _train_args(out_dir, '--config', 'train_rl.n_epochs=2')
  )
  assert code == 0
  summary = json.loads(out.out.strip().splitlines()[-1])
  assert summary['epochs'] == 2
  for name in ('checkpoint.pkl', 'config.gin', 'metrics.jsonl', 'tb'):
    assert (out_dir / name).exists(), name
  assert (
    'PolicyGradient.batch_size = 128' in (out_dir / 'config.gin').read_text()
  )
  code, out = _run_main(
    capsys, ['eval', '--output_dir', str(out_dir), '--episodes', '2']
  )
  assert code == 0
  assert json.loads(out.out)['epoch'] == 2
  png = tmp_path / 'c.png'
  code, out = _run_main(capsys, ['plot', str(out_dir), '--out', str(png)])
  assert code == 0 and png.stat().st_size > 1000
  code, out = _run_main(capsys, ['eval', '--output_dir', str(tmp_path)])
  assert code == 2 and 'config.gin' in out.err


def _final_state(output_dir):
  ckpt = checkpoint.load(pathlib.Path(output_dir) / 'checkpoint.pkl')
  return ckpt


def test_sigkill_at_random_moments_then_resume(tmp_path):
  n_epochs = ['--config', 'train_rl.n_epochs=6']
  cmd = [sys.executable, '-m', 'trax_rl.cli']
  ref_dir, run_dir = tmp_path / 'ref', tmp_path / 'run'
  subprocess.run(
    cmd + _train_args(ref_dir, *n_epochs),
    check=True,
    capture_output=True,
    timeout=300,
  )
  rng = random.Random(time.time_ns())
  for _ in range(2):  # Kill twice, at random moments after a first save.
    proc = subprocess.Popen(
      cmd + _train_args(run_dir, *n_epochs),
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not (run_dir / 'checkpoint.pkl').exists() and time.time() < deadline:
      if proc.poll() is not None:
        break
      time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 1.0))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # Whatever the moment, what is on disk loads.
    assert _final_state(run_dir)['epoch'] >= 1
  subprocess.run(
    cmd + _train_args(run_dir, *n_epochs),
    check=True,
    capture_output=True,
    timeout=300,
  )
  ref, run = _final_state(ref_dir), _final_state(run_dir)
  assert run['epoch'] == ref['epoch'] == 6
  assert run['avg_returns'] == ref['avg_returns']
  for a, b in zip(ref['learner'], run['learner'], strict=True):
    np.testing.assert_array_equal(a, b)  # Params, optimizer state, ring.
  epochs = [
    json.loads(x)['epoch']
    for x in (run_dir / 'metrics.jsonl').read_text().splitlines()
  ]
  assert epochs == [1, 2, 3, 4, 5, 6]
  leftovers = [p for p in run_dir.rglob('*') if '.tmp' in p.name]
  assert len(leftovers) <= 1  # At most the one write the kill cut short.


def test_seed_and_steps_flags(capsys, tmp_path):
  out_dir = tmp_path / 'out'
  code, out = _run_main(
    capsys,
    [
      'train',
      '--config=acme_dqn_cartpole',
      '--config=ReplayValueAgent.n_interactions_per_epoch=100',
      '--config=ReplayValueAgent.n_eval_episodes=1',
      '--seed=7',
      '--steps=150',
      f'--output_dir={out_dir}',
      '--no_progress',
    ],
  )
  assert code == 0, out.err
  summary = json.loads(out.out.strip().splitlines()[-1])
  # ceil(150 / 100) epochs; the headline is the training and greedy return.
  assert summary['epochs'] == 2 and 200 <= summary['env_steps'] < 300
  assert 'last_avg_return' not in summary
  assert 'episode_return_mean' in summary
  assert any(k.startswith('eval_return') for k in summary)
  config = (out_dir / 'config.gin').read_text()
  assert 'RLTask.seed = 7' in config and 'ReplayValueAgent.seed = 7' in config
  code, out = _run_main(capsys, _train_args(tmp_path / 'pg', '--steps=1000'))
  assert code == 2 and 'counts episodes' in out.err
