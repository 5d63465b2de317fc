"""A run's gin bindings: written to config.gin, and checked (unused,
changed on resume, unknown).

They read gin's parsed and operative configs as text (gin's own parser),
so they see exactly the bindings the run was given and the values its
calls took.
"""

import contextlib
import difflib
import logging
import re
from collections.abc import Callable, Iterator

import gin
from etils import epath

from trax_rl import checkpoint

_LOG = logging.getLogger(__name__)

CONFIG_FILE = 'config.gin'


_search_paths: set[str] = set()


def add_search_path(path: str) -> None:
  """Lets gin's includes find files under `path` (e.g. the shipped
  configs: `include 'atari/common/env.gin'`)."""
  if path not in _search_paths:
    gin.add_config_file_search_path(path)
    _search_paths.add(path)


class _DropMessages(logging.Filter):
  """Drops log records whose message starts with `prefix`."""

  def __init__(self, prefix: str):
    super().__init__()
    self._prefix = prefix

  def filter(self, record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(self._prefix)


@contextlib.contextmanager
def quiet_search_misses() -> Iterator[None]:
  """Mutes gin's error for each search path an include is not found in
  (gin logs one even when a later path has the file)."""
  quiet = _DropMessages('Path not found:')
  logging.getLogger().addFilter(quiet)
  try:
    yield
  finally:
    logging.getLogger().removeFilter(quiet)


def write_operative_config(output_dir: str) -> None:
  """Writes the operative gin config to output_dir/config.gin atomically."""
  checkpoint.write_atomic(
    epath.Path(output_dir) / CONFIG_FILE, gin.operative_config_str()
  )


# Run-time switches of train_rl: they may differ between a run and its resume.
_NOT_CONFIG = frozenset(
  {
    'n_epochs',
    'callbacks',
    'output_dir',
    'build_only',
    'on_nonfinite',
    'strict',
    'allow_config_change',
    'collector',  # Where experience comes from; resuming may change it.
    'tracker',  # Where the records go.
    'progress',
    'final_eval',
    'multihost',  # How many hosts learn; resuming may change it.
    'coordinator_address',
    'num_processes',
    'process_id',
  }
)
# Where experience comes from (actors, cluster address) and where records
# go are run-time choices too: a run may resume on another cluster, with
# more actors, or with tracking turned on.
_RUN_TIME = frozenset({'LocalCollector', 'RayCollector', 'WandbTracker'})
Binding = tuple[str, str, str]  # (scope, selector, parameter)


def _bindings(config_text: str) -> dict[Binding, str]:
  """The bindings of a gin config text, with their values as text."""
  parser = gin.config_parser.ConfigParser(
    config_text, gin.config.ParserDelegate(skip_unknown=True)
  )
  return {
    (st.scope or '', st.selector, st.arg_name): repr(st.value)
    for st in parser
    if isinstance(st, gin.config_parser.BindingStatement)
    and not st.selector.endswith('macro')
  }


def bindings_by_name(config_text: str) -> dict[str, str]:
  """`{'scope/Selector.param': value as text}` of a gin config text."""
  return {_name(b): v for b, v in _bindings(config_text).items()}


def parsed_bindings() -> list[Binding]:
  """The bindings of the parsed config, in order."""
  return list(_bindings(gin.config_str()))


def check_scopes() -> None:
  """Raises a one-line ValueError for a binding in a scope that no
  reference (`@scope/name`) of the parsed config opens: it could never be
  read (a misspelt scope would otherwise only warn after the first epoch,
  with training going on under the default)."""
  text = gin.config_str()
  opened = set()
  for path in re.findall(r'@((?:[\w.]+/)+)', text):
    parts = path.strip('/').split('/')
    opened.update('/'.join(parts[: i + 1]) for i in range(len(parts)))
  for binding in _bindings(text):
    scope = binding[0]
    if scope and scope not in opened:
      close = difflib.get_close_matches(scope, sorted(opened), n=1)
      hint = f"; did you mean '{close[0]}'?" if close else ''
      raise ValueError(
        f'gin binding {_name(binding)} is never used: no @{scope}/... '
        f'reference opens scope {scope!r}{hint}'
      )


def syntax_message(error: SyntaxError) -> str:
  """One line for a gin syntax error: the line, where, and, for a bare
  word where a value goes (`RLTask.env=CartPole-v1`), the quoted form."""
  location = error.args[1] if len(error.args) > 1 else None
  line = getattr(location, 'line_content', None) or error.text or ''
  line = line.strip()
  where = getattr(location, 'filename', None) or error.filename
  number = getattr(location, 'line_num', None) or error.lineno
  place = f'line {number} of {where}' if where else f'binding {number}'
  name, equals, value = line.partition('=')
  value = value.strip()
  if equals and re.fullmatch(r'[A-Za-z_][\w.:/-]*', value):
    return (
      f'{line!r} ({place}): {value} is not a value; strings need quotes: '
      f"{name.strip()} = '{value}'"
    )
  token = re.search(r"Failed to parse token '([^']*)'", str(error))
  what = f'cannot read {token.group(1)!r}' if token else 'cannot parse it'
  return f'{line!r} ({place}): {what}'


def binding_name(binding: Binding) -> str:
  """'scope/selector.parameter'."""
  return _name(binding)


def _name(binding: Binding) -> str:
  scope, selector, parameter = binding
  name = f'{scope + "/" if scope else ""}{selector}'
  return f'{name}.{parameter}' if parameter else name  # A macro: no parameter.


def unused_bindings() -> list[str]:
  """Parsed bindings that no configurable call has read, by name.

  A binding is read when some call in the operative config took its value
  from it: the call's selector and parameter match, and of the bindings
  whose scope encloses the call's scope it is the innermost. So a binding
  to a configurable nobody calls, one in a misspelt scope, and an unscoped
  one that every (scoped) call overrides are all unused.

  Returns:
    Sorted 'scope/selector.parameter' names.
  """
  parsed = _bindings(gin.config_str())
  used = set()
  for scope, selector, parameter in _bindings(gin.operative_config_str()):
    enclosing = [
      b
      for b in parsed
      if b[1:] == (selector, parameter)
      and (not b[0] or scope == b[0] or scope.startswith(b[0] + '/'))
    ]
    if enclosing:
      used.add(max(enclosing, key=lambda b: len(b[0])))
  return sorted(_name(b) for b in parsed if b not in used)


def changed_bindings(config_text: str) -> list[str]:
  """How the operative config differs from an earlier run's config.gin.

  Only configurables already called are compared (one called later in the
  run has no operative values yet); train_rl's run-time switches (n_epochs,
  on_nonfinite, ...) are not config.

  Args:
    config_text: the earlier run's config.gin.

  Returns:
    Sorted 'name: old -> new' lines ('unset' where one side has none).
  """
  old = _bindings(config_text)
  new = _bindings(gin.operative_config_str())
  called = {b[:2] for b in new}
  return sorted(
    f'{_name(b)}: {old.get(b, "unset")} -> {new.get(b, "unset")}'
    for b in set(old) | set(new)
    if b[:2] in called
    and not (b[1] == 'train_rl' and b[2] in _NOT_CONFIG)
    and b[1].split('.')[-1] not in _RUN_TIME
    and old.get(b) != new.get(b)
  )


def check_config_change(path: epath.Path | None, allow: bool) -> list[str]:
  """Compares an earlier run's config.gin with the operative config.

  Args:
    path: the earlier run's config.gin, or None.
    allow: whether a changed config may go on (else it is an error).

  Returns:
    The changed bindings (empty without an earlier config.gin).

  Raises:
    ValueError: bindings changed and `allow` is False.
  """
  if path is None or not path.exists():
    return []
  changed = changed_bindings(path.read_text())
  if changed and not allow:
    raise ValueError(
      f'the config differs from {path} in {"; ".join(changed)}: rerun with '
      '--allow_config_change to continue with it, or use a new --output_dir'
    )
  if changed:
    _LOG.warning('resuming with changed bindings: %s', '; '.join(changed))
  return changed


def binding_error(
  error: TypeError, hint: Callable[[str, str], str | None] | None = None
) -> Exception:
  """A one-line ValueError for a gin binding the agent cannot take.

  An agent's **kwargs lets gin accept any parameter name, and an agent that
  fixes a parent's knob itself (PolicyGradient's on-policy
  `n_replay_epochs`) receives a binding of it twice: both name the binding.
  """
  text = str(error)
  where = re.search(r"In call to configurable '([\w.]+)'", text)
  owner = where.group(1) if where else 'the agent'
  unknown = re.search(r"unexpected keyword argument '(\w+)'", text)
  if unknown is not None:
    name = unknown.group(1)
    found = hint(owner, name) if hint is not None else None
    return ValueError(
      f'unknown gin binding {owner}.{name}: {owner} has no parameter '
      f'{name!r}' + (f'; {found}' if found else '')
    )
  twice = re.search(r"multiple values for keyword argument '(\w+)'", text)
  if twice is not None:
    name = twice.group(1)
    return ValueError(
      f'gin binding {owner}.{name} cannot take effect: {owner} sets {name} '
      'itself'
    )
  return error
