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
git folders from the environment, which `peer_env` passes on.
"""

import argparse
import os
import pathlib

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


def peer_env(args: argparse.Namespace, git_var: str) -> dict[str, str]:
  """The environment of a peer runner; exits with a line if a path is off."""
  for what, path in (
    ('--peer_python', args.peer_python),
    ('--peer_bench', args.peer_bench),
    (f'--git_dir (${git_var})', args.git_dir),
  ):
    if not path or not os.path.exists(path):
      raise SystemExit(
        f'peers: {what} {path!r} does not exist; see benchmarks/peers.py '
        'and ../shared/bench/README.md for the set-up'
      )
  env = dict(os.environ, PEERS=args.peers)
  env[git_var] = args.git_dir
  env.pop('PYTHONPATH', None)  # The peers' venv, not ours.
  return env
