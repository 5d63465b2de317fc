"""The gin configs shipped with trax_rl: find them by name and list them.

In a built wheel the configs of the repository's `gin/` folder (and
`benchmarks/results.json`, their measured claims) travel inside the package,
as `trax_rl/configs/`; in a checkout they are read from `gin/` and
`benchmarks/` beside the package.
"""

import json
import pathlib
import re
from typing import Any

PACKAGE = pathlib.Path(__file__).resolve().parent
RESULTS_FILE = 'results.json'
_NAME = re.compile(r'[\w-]+(/[\w-]+)*(\.gin)?')


def directory() -> pathlib.Path:
  """The folder of the shipped gin files.

  Raises:
    ValueError: neither an installed package nor a checkout holds them.
  """
  for candidate in (PACKAGE / 'configs', PACKAGE.parent / 'gin'):
    if candidate.is_dir():
      return candidate
  raise ValueError(f'no shipped configs beside {PACKAGE}: reinstall trax_rl')


def results_file() -> pathlib.Path | None:
  """`results.json`, the stored claims (`benchmarks/seed_claims.py`)."""
  for candidate in (
    PACKAGE / 'configs' / RESULTS_FILE,
    PACKAGE.parent / 'benchmarks' / RESULTS_FILE,
  ):
    if candidate.is_file():
      return candidate
  return None


def is_name(spec: str) -> bool:
  """Whether `spec` looks like a config name or path, not a gin binding."""
  if '=' in spec or any(c.isspace() for c in spec):
    return False
  return _NAME.fullmatch(spec) is not None or spec.endswith('.gin')


def resolve(spec: str) -> str:
  """A path for a gin file path or a shipped config name.

  Args:
    spec: an existing file (`gin/dqn_cartpole.gin`, any path), or the name of
      a shipped config with or without `.gin` (`dqn_cartpole`,
      `atari/dqn`); a leading `gin/` is allowed.

  Returns:
    The path of the file.

  Raises:
    ValueError: `spec` is neither a file nor a shipped config.
  """
  if pathlib.Path(spec).is_file():
    return spec
  if is_name(spec):
    name = spec.removeprefix('gin/').removesuffix('.gin')
    path = directory() / f'{name}.gin'
    if path.is_file():
      return str(path)
  raise ValueError(
    f'config {spec} is neither a file nor a shipped config '
    '(`trax-rl configs` lists them)'
  )


def names() -> list[str]:
  """Names of the shipped configs (`dqn_cartpole`, `atari/dqn`, ...).

  Files under a `common/` folder are pieces that configs include.
  """
  root = directory()
  return sorted(
    p.relative_to(root).with_suffix('').as_posix()
    for p in root.rglob('*.gin')
    if 'common' not in p.relative_to(root).parts
  )


def _text_with_includes(path: pathlib.Path) -> str:
  text = path.read_text()
  for include in re.findall(r"^include\s+'([^']+)'", text, re.M):
    text += '\n' + _text_with_includes(directory() / include)
  return text


def _binding(text: str, name: str) -> str | None:
  found = re.search(rf'^{re.escape(name)}\s*=\s*(.+)$', text, re.M)
  return found.group(1).strip().strip('\'"@') if found else None


def name_of(path: str) -> str | None:
  """The shipped name of a config file's path, or None."""
  try:
    rel = pathlib.Path(path).resolve().relative_to(directory().resolve())
  except ValueError:
    return None
  return rel.with_suffix('').as_posix()


def _results() -> list[dict[str, Any]]:
  """The stored claims (`benchmarks/seed_claims.py --store`)."""
  path = results_file()
  return json.loads(path.read_text()) if path is not None else []


def _steps(n: int) -> str:
  return f'{n / 1e6:.3g}M' if n >= 1e6 else f'{round(n / 1e3)}k'


def format_result(entry: dict[str, Any]) -> str:
  """One claim in the common format: budget, seeds at the target, the
  final greedy returns (their IQM and interval from 4 seeds on), wall."""
  first, last = entry['seeds']
  finals = entry['final']
  if len(finals) >= 4:
    low, high = entry['ci']
    returns = f'IQM {entry["iqm"]:g} [{low:g}, {high:g}]'
  else:
    returns = 'final ' + ' / '.join(f'{x:g}' for x in finals)
  return (
    f'{_steps(entry["env_steps"])} steps, seeds {first}-{last}: '
    f'{entry["at_target"]}/{entry["n_seeds"]} >= {entry["target"]:g}, '
    f'{returns}, {entry["wall_s_per_seed"]:g} s/seed'
  )


def _result_of(name: str, entries: list[dict[str, Any]]) -> str:
  """The config's claim over the most seeds (without extra bindings)."""
  own = [e for e in entries if e['config'] == name and not e.get('bindings')]
  if not own:
    return 'not measured'
  return format_result(max(own, key=lambda e: (e['n_seeds'], e['date'])))


def describe() -> list[dict[str, str]]:
  """Name, agent, env and measured result of each shipped config."""
  rows = _results()
  described = []
  for name in names():
    text = _text_with_includes(directory() / f'{name}.gin')
    env = _binding(text, 'make_env.env') or _binding(text, 'RLTask.env')
    if env and env.endswith('()'):  # A configurable's result: say its env.
      inner = _binding(text, f'{env[:-2]}.env')
      env = f'{inner} via {env}' if inner else env
    agent = _binding(text, 'train_rl.agent_class') or '?'
    loss = _binding(text, f'{agent}.loss_fn')
    described.append(
      {
        'config': name,
        'agent': f'{agent} + {loss.removesuffix("()")}' if loss else agent,
        'env': env or '?',
        'result': _result_of(name, rows),
      }
    )
  return described
