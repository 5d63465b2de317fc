"""The rough edges a newcomer met: paths the docs name exist, no fork
warnings from subprocesses, and a failed run leaves no empty folder."""

import pathlib
import re
import subprocess
import sys

import pytest

import trax_rl
from trax_rl import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
_PATH = re.compile(
  r'(?<![\w/])((?:tests|benchmarks|trax_rl|gin|colabs|docs)/[\w/.-]+'
  r'\.(?:py|gin|ipynb|md|png))'
)


def test_files_the_docs_and_notebooks_name_exist():
  texts = [ROOT / 'README.md', ROOT / 'benchmarks' / 'RESULTS.md']
  texts += sorted((ROOT / 'colabs').glob('*.ipynb'))
  texts += sorted((ROOT / 'docs').rglob('*.md'))
  missing = []
  for text in texts:
    for path in set(_PATH.findall(text.read_text())):
      if not (ROOT / path).exists():
        missing.append(f'{text.name}: {path}')
  assert missing == []


def test_subprocesses_after_jax_do_not_warn_about_fork():
  script = (
    'import subprocess, trax_rl, jax.numpy as jnp\n'
    'jnp.zeros(3).block_until_ready()\n'
    "subprocess.run(['true'], check=True)\n"
  )
  out = subprocess.run(
    [sys.executable, '-W', 'default', '-c', script],
    capture_output=True,
    text=True,
    check=True,
  )
  assert 'os.fork()' not in out.stderr
  # A real fork still warns: only subprocess's fork + exec is silenced.
  forked = (
    script
    + 'import os\npid = os.fork()\nos._exit(0) if pid == 0 else os.waitpid(pid, 0)\n'
  )
  out = subprocess.run(
    [sys.executable, '-W', 'default', '-c', forked],
    capture_output=True,
    text=True,
    check=True,
  )
  assert 'os.fork() was called' in out.stderr


def test_a_failed_run_leaves_no_new_folder(tmp_path, capsys):
  new = tmp_path / 'new' / 'run'
  code = cli.main(
    [
      'train',
      '--config=ppo_cartpole',
      '--config=PPO.lr=1e-3',
      '--output_dir',
      str(new),
    ]
  )
  assert code == cli.EXIT_BAD_INPUT
  assert 'PPO.lr' in capsys.readouterr().err
  assert not new.exists()
  with pytest.raises(ValueError, match='PPO.lr'):
    trax_rl.train('ppo_cartpole', str(new), bindings=['PPO.lr = 1e-3'])
  assert not new.exists()
  # A folder that was there stays, with what it held.
  old = tmp_path / 'old'
  old.mkdir()
  (old / 'notes.txt').write_text('mine')
  assert (
    cli.main(
      [
        'train',
        '--config=ppo_cartpole',
        '--config=PPO.lr=1e-3',
        '--output_dir',
        str(old),
      ]
    )
    == cli.EXIT_BAD_INPUT
  )
  assert (old / 'notes.txt').read_text() == 'mine'
