"""Where the peer baselines live: flags and environment variables.

The peer runners (`cleanrl_dqn_jax.py`, `purejaxrl_ppo.py`, ...) live in
the shared bench folder beside the repository (`../shared/bench/`), run in
a Python environment of their own, and read the peer's code from a bare
git copy of its repository. Each location is a flag of the benchmark that
uses it, whose default comes from an environment variable, else from a
folder relative to this repository:

  TRAX_RL_PEER_BENCH    the peer runners      default: ../shared/bench
  TRAX_RL_PEER_PYTHON   the peers' Python     default: ../peers/venv/bin/python
  PEERS                 the runners' scratch  default: ../peers
  CLEANRL_GIT_DIR       bare git copy of vwxyzjn/cleanrl       (no default)
  PUREJAXRL_GIT_DIR     bare git copy of luchris429/purejaxrl  (no default)

(`..` is the repository's parent folder.) The runners read PEERS and the
git folders from the environment, which `peer_env` passes on; `run`
runs one runner there and returns its last JSON line.
"""

import argparse
import json
import os
import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[1]


def _default(var: str, relative: str) -> str:
  return os.environ.get(var) or str((REPO.parent / relative).resolve())


def bench_dir() -> str:
  return _default('TRAX_RL_PEER_BENCH', 'shared/bench')


def python() -> str:
  return _default('TRAX_RL_PEER_PYTHON', 'peers/venv/bin/python')


def scratch() -> str:
  return _default('PEERS', 'peers')


def add_flags(p: argparse.ArgumentParser, git_var: str) -> None:
  """--peer_python, --peer_bench, --peers and --<repo>_git_dir flags."""
  p.add_argument(
    '--peer_python',
    default=python(),
    help="the peers' Python ($TRAX_RL_PEER_PYTHON; default %(default)s)",
  )
  p.add_argument(
    '--peer_bench',
    default=bench_dir(),
    help='folder of the peer runners ($TRAX_RL_PEER_BENCH; default '
    '%(default)s)',
  )
  p.add_argument(
    '--peers',
    default=scratch(),
    help="the runners' scratch folder ($PEERS; default %(default)s)",
  )
  p.add_argument(
    '--git_dir',
    default=os.environ.get(git_var),
    help=f"bare git copy of the peer's repository (${git_var})",
  )


def peer_env(args: argparse.Namespace, git_var: str | None) -> dict[str, str]:
  """The environment of a peer runner; exits with a line if a path is off.

  git_var: the variable naming the peer's git copy, or None for runners
  that install their peer from PyPI (SBX).
  """
  paths = [
    ('--peer_python', args.peer_python),
    ('--peer_bench', args.peer_bench),
  ]
  if git_var:
    paths.append((f'--git_dir (${git_var})', args.git_dir))
  for what, path in paths:
    if not path or not os.path.exists(path):
      raise SystemExit(
        f'peers: {what} {path!r} does not exist; see benchmarks/peers.py '
        'and ../shared/bench/README.md for the set-up'
      )
  env = dict(os.environ, PEERS=getattr(args, 'peers', None) or scratch())
  if git_var:
    env[git_var] = args.git_dir
  env.pop('PYTHONPATH', None)  # The peers' venv, not ours.
  return env


def run(
  args: argparse.Namespace,
  script: str,
  *argv,
  git_var: str | None = None,
  timeout: float | None = None,
) -> dict:
  """Runs a peer runner (a file of --peer_bench, or '-c' and code) in the
  peers' Python; returns the last JSON line it printed. A failed run
  raises with the end of its stderr."""
  if script != '-c':
    script = os.path.join(args.peer_bench, script)
  out = subprocess.run(
    [args.peer_python, script, *map(str, argv)],
    capture_output=True,
    text=True,
    timeout=timeout,
    env=peer_env(args, git_var),
  )
  if out.returncode:
    raise RuntimeError(f'peer {script} failed: {out.stderr[-500:]}')
  return json.loads(out.stdout.strip().splitlines()[-1])
