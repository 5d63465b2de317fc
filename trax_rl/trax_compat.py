"""Trax RL gin files, rewritten as trax_rl gin files.

A Trax config (`import trax.rl`, `@trax.models.MLP`,
`train_rl.light_rl_trainer = @trax.rl.PPOJoint`) is translated binding by
binding into the native config that means the same run: `trax.*` names map
to trax_rl's configurables by their gin names, Trax's optimizers to the
optax ones with Trax's semantics (`trax_optimizers`), network knobs to ours,
a retired env id to its current version, and Trax's defaults that differ
from ours are written out. The same translation serves `trax-rl train` (only
while the real trax package is not installed, so it never shadows trax) and
`trax-rl convert`. A binding the run would use and that has no equivalent
raises a one-line ValueError naming it; bindings of configurables the run
never calls stay in the output as comments.

This module only reads and writes text: it does not import gin. The
configurables layer passes `accepts(name, param)`, its view of the registry.
"""

import dataclasses
import importlib.util
import re
from collections.abc import Callable, Iterator

import gymnasium

from trax_rl import trax_names

Accepts = Callable[[str, str], bool]

_REFERENCE = re.compile(r'@((?:[\w.]+/)*)([\w.]+)(\(\))?')
_MACRO = re.compile(r'%([\w.]+)')
_KEY = re.compile(r'^((?:[\w.]+/)*)([\w.]+)$')


@dataclasses.dataclass(frozen=True)
class Binding:
  """One `scope/Name.param = value` (or `macro = value`) statement."""

  scope: str  # 'value/' or ''.
  name: str  # Configurable's short name; '' for a macro.
  param: str  # Parameter, or the macro's name.
  value: str

  @property
  def key(self) -> str:
    selector = f'{self.name}.{self.param}' if self.name else self.param
    return f'{self.scope}{selector}'


@dataclasses.dataclass(frozen=True)
class Conversion:
  """A translated config: native gin text and the notices to show."""

  text: str
  notices: tuple[str, ...]


def trax_installed() -> bool:
  """Whether the real trax package is importable (then it is used)."""
  return importlib.util.find_spec('trax') is not None


_TRAX_IMPORT = re.compile(r'(import|from)\s+trax[\s.]')
_OTHER_IMPORT = re.compile(r'(import|from)\s')


def is_trax_config(text: str) -> bool:
  """Whether gin text is a Trax config (imports trax or names trax.*)."""
  code = '\n'.join(_strip_comment(line) for line in text.splitlines())
  return bool(
    re.search(r'^\s*(import|from)\s+trax[\s.]', code, re.M)
    or re.search(r'@trax\.|light_rl_trainer', code)
  )


def _statements(text: str) -> Iterator[str]:
  """Gin statements without comments, continuation lines joined."""
  pending, depth = '', 0
  for line in text.splitlines():
    code = _strip_comment(line)
    if not code.strip() and not pending:
      continue
    pending += (' ' if pending else '') + code.strip()
    depth += sum(code.count(c) for c in '([{') - sum(
      code.count(c) for c in ')]}'
    )
    if depth <= 0:
      yield pending
      pending, depth = '', 0
  if pending:
    raise ValueError(f'unbalanced brackets in Trax config: {pending[:60]}')


def _strip_comment(line: str) -> str:
  quote = None
  for i, c in enumerate(line):
    if quote:
      quote = None if c == quote else quote
    elif c in '\'"':
      quote = c
    elif c == '#':
      return line[:i]
  return line


def _short(dotted: str) -> str:
  return dotted.rsplit('.', 1)[-1]


def parse(text: str) -> list[Binding]:
  """The bindings of a Trax gin file; trax imports dropped.

  Raises:
    ValueError: an include, a non-trax import or a statement that is not a
      binding.
  """
  bindings = []
  for statement in _statements(text):
    if _OTHER_IMPORT.match(statement):
      continue  # trax's are dropped; others are kept by `convert`.
    if statement.startswith('include'):
      raise ValueError(
        f'Trax config statement {statement!r}: convert the included file '
        'and include the converted one'
      )
    key, sep, value = statement.partition('=')
    match = _KEY.match(key.strip())
    if not sep or not match:
      raise ValueError(f'cannot read Trax config statement {statement!r}')
    scope, selector = match.groups()
    name, _, param = selector.rpartition('.')
    bindings.append(Binding(scope, _short(name), param, value.strip()))
  return bindings


def _references(value: str, macros: dict[str, str]) -> set[str]:
  found = {_short(m.group(2)) for m in _REFERENCE.finditer(value)}
  for macro in _MACRO.findall(value):
    if macro in macros:
      found |= _references(macros.pop(macro), macros)
  return found


def reachable(bindings: list[Binding], agent: str) -> set[str]:
  """Configurables the run calls: from train_rl, RLTask and the agent."""
  macros = {b.param: b.value for b in bindings if not b.name}
  seen, todo = set(), ['train_rl', 'RLTask', agent]
  while todo:
    name = todo.pop()
    if name in seen:
      continue
    seen.add(name)
    for b in bindings:
      if b.name == name:
        todo += sorted(_references(b.value, dict(macros)))
    todo += [
      _short(v[1:])
      for v in trax_names.TRAX_DEFAULTS.get(name, {}).values()
      if '@' in v
    ]
    todo += trax_names.IMPLICIT.get(name, ())
  return seen


def agent_of(bindings: list[Binding]) -> str:
  """The agent named by train_rl.light_rl_trainer (or agent_class).

  Raises:
    ValueError: none is named, light_rl is False, or trax_rl lacks it.
  """
  for b in bindings:
    if b.name == 'train_rl' and b.param == 'light_rl' and b.value != 'True':
      raise ValueError(
        f'Trax binding train_rl.light_rl = {b.value}: only light_rl '
        'trainers are supported; set it to True'
      )
  names = [
    b.value
    for b in bindings
    if b.name == 'train_rl' and b.param in ('light_rl_trainer', 'agent_class')
  ]
  if not names or not _REFERENCE.fullmatch(names[-1]):
    raise ValueError(
      'Trax config names no agent: bind train_rl.light_rl_trainer'
    )
  agent = _short(_REFERENCE.fullmatch(names[-1]).group(2))
  if agent not in trax_names.AGENTS:
    raise ValueError(
      f'Trax binding train_rl.light_rl_trainer = {names[-1]}: trax_rl has '
      f'no {agent} agent; it has {", ".join(trax_names.AGENTS)}'
    )
  return agent


def current_env_id(env_id: str) -> str:
  """env_id, or the newest registered version of it if it is gone."""
  registry = gymnasium.envs.registry
  match = re.fullmatch(r'(.+)-v(\d+)', env_id)
  if env_id in registry or not match:
    return env_id
  versions = [
    int(m.group(1))
    for other in registry
    if (m := re.fullmatch(re.escape(match.group(1)) + r'-v(\d+)', other))
  ]
  return f'{match.group(1)}-v{max(versions)}' if versions else env_id


class _Translator:
  """Translates the bindings of one Trax config (see `convert`)."""

  def __init__(self, bindings: list[Binding], accepts: Accepts):
    self.bindings = bindings
    self.accepts = accepts
    self.agent = agent_of(bindings)
    self.used = reachable(bindings, self.agent)
    macros = {b.param: b.value for b in bindings if not b.name}
    self.used_macros, self.scoped = set(), set()
    size = None
    while size != (len(self.used_macros), len(self.scoped)):
      size = (len(self.used_macros), len(self.scoped))
      for b in filter(self.needed, bindings):
        self._mark_macros(b.value, macros)
        self.scoped |= {
          (m.group(1), _short(m.group(2)))
          for m in _REFERENCE.finditer(b.value)
          if m.group(1)
        }
    self.notices: list[str] = []

  def _mark_macros(self, value: str, macros: dict[str, str]) -> None:
    for macro in _MACRO.findall(value):
      if macro in macros and macro not in self.used_macros:
        self.used_macros.add(macro)
        self._mark_macros(macros[macro], macros)

  def needed(self, b: Binding) -> bool:
    """Whether the run reads b: a used macro, or a binding of a configurable
    it calls, in a scope that some used binding names (`@value/multifactor`).
    """
    if not b.name:
      return b.param in self.used_macros
    return b.name in self.used and (
      not b.scope or (b.scope, b.name) in self.scoped
    )

  def value(self, b: Binding) -> str:
    """b's value with trax.* references renamed; unported ones raise."""
    for m in _REFERENCE.finditer(b.value):
      short = _short(m.group(2))
      if short not in trax_names.SAME and short not in ('Normalize',):
        reason = trax_names.NOT_PORTED.get(short, 'not ported to trax_rl')
        raise ValueError(
          f'Trax binding {b.key} = {b.value}: {short} has no trax_rl '
          f'equivalent ({reason})'
        )
    return _REFERENCE.sub(
      lambda m: f'@{m.group(1)}{_short(m.group(2))}{m.group(3) or ""}',
      b.value,
    )

  def fail(self, b: Binding, why: str) -> ValueError:
    return ValueError(
      f'Trax binding {b.key} = {b.value} has no trax_rl equivalent: {why}'
    )

  def translate(self, b: Binding) -> list[str]:
    """The native lines for a binding the run uses."""
    agent = self.agent
    if not b.name:
      return [f'{b.key} = {self.value(b)}']
    if b.name in trax_names.NOT_PORTED:
      raise self.fail(b, trax_names.NOT_PORTED[b.name])
    if (b.name, b.param) in trax_names.UNSUPPORTED_PARAMS:
      raise self.fail(b, trax_names.UNSUPPORTED_PARAMS[b.name, b.param])
    if b.name == 'train_rl' and b.param == 'light_rl':
      return []  # Checked by agent_of; every trax_rl trainer is light.
    if b.param == 'normalizer':
      if not self.accepts(agent, 'normalize_observations'):
        raise self.fail(b, f'{agent} has no observation normalization')
      return [f'{agent}.normalize_observations = True']
    if b.name == 'Normalize':
      native = trax_names.NORMALIZE.get(b.param)
      if native is None or not self.accepts(agent, native):
        raise self.fail(b, f'{agent} has no such normalization knob')
      return [f'{agent}.{native} = {b.value}']
    if b.name == 'Gaussian':
      native = {'std': 'action_std', 'learn_std': 'learn_std'}.get(b.param)
      if native is None or not self.accepts(agent, native):
        raise self.fail(b, f'{agent} has no such Gaussian knob')
      return [f'{agent}.{native} = {b.value}']
    if b.name not in trax_names.SAME:
      raise self.fail(b, f'{b.name} is not ported to trax_rl')
    if b.name in ('Policy', 'Value') and 'PolicyAndValue' in self.used:
      raise self.fail(b, 'the heads of PolicyAndValue are plain Dense layers')
    return self.native(b)

  def native(self, b: Binding) -> list[str]:
    param = 'agent_class' if b.param == 'light_rl_trainer' else b.param
    value = self.value(b)
    if (b.name, param) == ('RLTask', 'env'):
      value = self.env(value)
    if not self.accepts(b.name, param):
      raise self.fail(b, f'{b.name} has no parameter {param!r}; remove it')
    return [f'{b.scope}{b.name}.{param} = {value}']

  def env(self, value: str) -> str:
    match = re.fullmatch(r'([\'"])(.+)\1', value)
    if not match:
      return value
    current = current_env_id(match.group(2))
    if current != match.group(2):
      self.notices.append(
        f'env {match.group(2)} is gone from gymnasium: using {current}'
      )
    return repr(current)

  def defaults(self) -> list[str]:
    """Trax's defaults that differ from ours, for what the run uses."""
    bound = {(b.name, b.param) for b in self.bindings if not b.scope}
    lines = []
    wanted = {
      (name, param): value
      for name in sorted(self.used)
      for param, value in trax_names.TRAX_DEFAULTS.get(name, {}).items()
    }
    for param in trax_names.LR_SCHEDULES:
      if self.accepts(self.agent, param):
        wanted.setdefault((self.agent, param), '@multifactor')
    for (name, param), value in wanted.items():
      if (name, param) not in bound and self.accepts(name, param):
        lines.append(f'{name}.{param} = {value}')
    return lines


def convert(text: str, accepts: Accepts) -> Conversion:
  """Translates a Trax gin config into the equivalent native one.

  Args:
    text: the Trax config's text.
    accepts: `accepts(gin_name, param)`: whether trax_rl's configurable of
      that gin name takes that parameter.

  Returns:
    The native gin text and the one-line notices to show the user.

  Raises:
    ValueError: one line naming a binding the run uses that has no trax_rl
      equivalent, and what to do.
  """
  t = _Translator(parse(text), accepts)
  lines = ['# Converted from a Trax RL config by `trax-rl convert`.', '']
  imports = [
    s
    for s in _statements(text)
    if _OTHER_IMPORT.match(s) and not _TRAX_IMPORT.match(s + ' ')
  ]
  lines += imports + ([''] if imports else [])
  unused = []
  for b in t.bindings:
    if t.needed(b):
      lines += t.translate(b)
    else:
      unused.append(b)
  defaults = t.defaults()
  if defaults:
    lines += ['', "# Trax's defaults where trax_rl's differ."] + defaults
  if unused:
    names = sorted({b.name or f'%{b.param}' for b in unused})
    t.notices.append(
      f'{len(unused)} bindings of what this run does not use are left out '
      f'({", ".join(names)})'
    )
    lines += ['', '# Not used by this run (inert in Trax too), left out:']
    lines += [f'# {b.key} = {b.value}' for b in unused]
  return Conversion('\n'.join(lines) + '\n', tuple(t.notices))
