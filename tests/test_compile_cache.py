"""The persistent compilation cache: where it lives, when it is off, and
that a run served from it computes what a compiled run computes."""

import json
import os
import subprocess
import sys

import jax
import pytest

from trax_rl import compile_cache


@pytest.fixture
def no_cache_dir():
  """JAX with no cache folder set (the test session sets one)."""
  saved = jax.config.jax_compilation_cache_dir
  jax.config.update('jax_compilation_cache_dir', None)
  yield
  jax.config.update('jax_compilation_cache_dir', saved)


@pytest.mark.parametrize('value', ['off', 'OFF', '', '0', 'none'])
def test_env_var_turns_it_off(monkeypatch, value):
  monkeypatch.setenv(compile_cache.ENV_VAR, value)
  assert compile_cache.default_dir() is None


def test_default_dir(monkeypatch, tmp_path):
  monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  assert compile_cache.default_dir() == str(tmp_path / 'trax_rl' / 'xla')
  monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / 'mine'))
  assert compile_cache.default_dir() == str(tmp_path / 'mine')


def test_a_folder_jax_already_uses_is_kept(tmp_path):
  current = jax.config.jax_compilation_cache_dir
  assert current  # tests/conftest.py sets one
  assert compile_cache.enable(str(tmp_path / 'other')) == current
  assert not (tmp_path / 'other').exists()


def test_enable_sets_the_folder(no_cache_dir, tmp_path):
  folder = tmp_path / 'cache'
  assert compile_cache.enable(None) is None
  assert jax.config.jax_compilation_cache_dir is None
  assert compile_cache.enable(str(folder)) == str(folder)
  assert jax.config.jax_compilation_cache_dir == str(folder)
  assert folder.is_dir()


def test_an_unusable_folder_is_a_warning_not_an_error(
  no_cache_dir, tmp_path, caplog
):
  blocker = tmp_path / 'file'
  blocker.write_text('not a folder')
  assert compile_cache.enable(str(blocker / 'cache')) is None
  assert jax.config.jax_compilation_cache_dir is None
  assert 'compilation cache off' in caplog.text


_TRAIN = """
import json
from trax_rl import configurables
configurables.parse(['gin/gymnax/ppo_cartpole.gin'],
                    ['train_rl.n_epochs = 2', 'train_rl.epochs_per_call = 1'])
records = []
configurables.train_rl(callbacks=[lambda agent, r: records.append(r)])
timing = ('epoch_s', 'env_steps_per_s')
print(json.dumps([{k: v for k, v in r.items() if k not in timing}
                  for r in records]))
"""


def test_a_run_from_the_cache_equals_a_compiled_run(tmp_path):
  env = dict(os.environ, TRAX_RL_COMPILATION_CACHE=str(tmp_path / 'xla'))
  env.pop('JAX_COMPILATION_CACHE_DIR', None)
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

  def run():
    out = subprocess.run(
      [sys.executable, '-c', _TRAIN],
      env=env,
      cwd=root,
      capture_output=True,
      text=True,
      check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])

  first = run()
  entries = set(os.listdir(tmp_path / 'xla'))
  assert len(entries) >= 2  # the epoch program and more
  second = run()
  assert second == first
  # Served from the cache: nothing new was compiled and written.
  assert set(os.listdir(tmp_path / 'xla')) == entries
