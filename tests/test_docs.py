"""The documentation site builds with `mkdocs build --strict`: a broken
link or an API name that no longer exists fails the suite."""

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _build(
  root: pathlib.Path, site: pathlib.Path
) -> subprocess.CompletedProcess:
  return subprocess.run(
    [
      sys.executable,
      '-m',
      'mkdocs',
      'build',
      '--strict',  # Not -q: it hides the warnings strict counts.
      '-d',
      str(site),
    ],
    cwd=root,
    capture_output=True,
    text=True,
    env={'NO_MKDOCS_2_WARNING': '1', 'PATH': '/usr/bin:/bin'},
  )


def test_the_site_builds_strictly(tmp_path):
  out = _build(ROOT, tmp_path / 'site')
  assert out.returncode == 0, out.stderr
  api = (tmp_path / 'site' / 'api' / 'index.html').read_text()
  assert 'def act' in api or 'act(' in api  # The reference is rendered.
  knobs = tmp_path / 'site' / 'agents' / 'value_learners' / 'index.html'
  assert 'max_replay_size' in knobs.read_text()


def test_a_stale_api_name_or_link_fails_the_build(tmp_path):
  copy = tmp_path / 'repo'
  copy.mkdir()
  shutil.copy(ROOT / 'mkdocs.yml', copy)
  shutil.copytree(ROOT / 'docs', copy / 'docs')
  shutil.copytree(
    ROOT / 'trax_rl',
    copy / 'trax_rl',
    ignore=shutil.ignore_patterns('__pycache__'),
  )
  api = copy / 'docs' / 'api.md'
  api.write_text(api.read_text() + '\n::: trax_rl.no_such_module.Thing\n')
  assert _build(copy, tmp_path / 's1').returncode != 0
  api.write_text(
    api.read_text().replace('::: trax_rl.no_such_module.Thing', '')
  )
  page = copy / 'docs' / 'concepts.md'
  page.write_text(page.read_text() + '\nSee [gone](no_such_page.md).\n')
  out = _build(copy, tmp_path / 's2')
  assert out.returncode != 0 and 'no_such_page.md' in out.stdout + out.stderr
