"""Gin registration and the gin entry point `train_rl`.

This is the only library module that imports gin. Everything a gin file may
name is registered here, under its short name (`PolicyGradient`, `MLP`) and
under `trax_rl.<name>`.
"""

import functools
import inspect
import logging
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import gin
import gymnasium.wrappers
import optax
from etils import epath

from trax_rl import (
  advantages,
  checkpoint,
  envs,
  lr_schedules,
  shipped_configs,
  task,
  trax_compat,
  trax_optimizers,
  validation,
)
from trax_rl.agents import (
  base,
  policy_agents,
  r2d2,
  replay_value,
  value_agents,
)
from trax_rl.agents.actor_critic import algorithms as actor_critic
from trax_rl.device import seeds
from trax_rl.distributed import local_collector, ray_collector
from trax_rl.losses import distributional, q_learning
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import models, recurrent

CONFIG_FILE = 'config.gin'


# What each gin name stands for, for `accepts`.
_REGISTERED: dict[str, Any] = {'RLTask': task.RLTask}


def _register(*objects: Any, module: str = 'trax_rl') -> None:
  for obj in objects:
    gin.external_configurable(obj, module=module)
    _REGISTERED[obj.__name__] = obj


def registered() -> list[Any]:
  """The trax_rl functions and classes gin can configure, as registered."""
  unique = {id(o): o for o in [*_REGISTERED.values(), train_rl]}
  return list(unique.values())


# Task and environments. train_rl calls the gin-bound RLTask.
RLTask = gin.external_configurable(task.RLTask, module='trax_rl')
_register(envs.MaskVelocity, envs.masked_cartpole, envs.make_env)
# Networks.
_register(
  models.MLP,
  models.ConvTorso,
  models.MinAtarTorso,
  models.Policy,
  models.Value,
  models.PolicyAndValue,
  models.Quality,
  models.CategoricalQuality,
  models.QuantileQuality,
)
# Schedules, estimators, optimizers.
_register(lr_schedules.multifactor, lr_schedules.constant_lr)
_register(
  advantages.monte_carlo, advantages.td_k, advantages.td_lambda, advantages.gae
)
for _name in ('adam', 'adamw', 'sgd', 'rmsprop', 'lamb', 'lion', 'adabelief'):
  gin.external_configurable(getattr(optax, _name), name=_name, module='optax')
# Trax's optimizers under their Trax gin names (see trax_compat).
for _name, _fn in (
  ('Adam', trax_optimizers.trax_adam),
  ('RMSProp', trax_optimizers.trax_rmsprop),
  ('Momentum', trax_optimizers.trax_momentum),
  ('SGD', trax_optimizers.trax_sgd),
):
  gin.external_configurable(_fn, name=_name, module='trax_rl')
  _REGISTERED[_name] = _fn
# Policy agents.
_register(
  policy_agents.PolicyGradient,
  policy_agents.ExpertIteration,
  policy_agents.sharpened_network_policy,
)

# Value agents (Trax's DQN, the Acme learners on a replay Table).
_register(
  value_agents.DQN,
  value_agents.trax_exploration_rate,
  replay_value.ReplayValueAgent,
  value_agents.linear_epsilon,
  q_learning.QLearning,
  q_learning.RegularizedQLearning,
  q_learning.MunchausenQLearning,
  q_learning.PrioritizedDoubleQLearning,
  distributional.PrioritizedCategoricalDoubleQLearning,
  distributional.QrDqn,
)
# Atari: `ALE/Pong-v5` (made with frameskip=1) under gymnasium's wrappers.
_register(
  gymnasium.wrappers.AtariPreprocessing,
  gymnasium.wrappers.FrameStackObservation,
)
# R2D2: recurrent Q network, its loss and agent.
_register(
  recurrent.RecurrentQuality,
  r2d2_losses.R2D2Loss,
  r2d2_losses.signed_hyperbolic_pair,
  r2d2_losses.identity_pair,
  r2d2.R2D2,
)
# Actor-critic agents, separate and joint networks.
_register(
  actor_critic.A2C,
  actor_critic.PPO,
  actor_critic.AWR,
  actor_critic.SamplingAWR,
  models.ActionValue,
  actor_critic.PPOJoint,
  actor_critic.A2CJoint,
  actor_critic.AWRJoint,
)

# Where experience comes from. Ray itself is imported only when a
# RayCollector starts.
_register(local_collector.LocalCollector, ray_collector.RayCollector)


def write_operative_config(output_dir: str) -> None:
  """Writes the operative gin config to output_dir/config.gin atomically."""
  checkpoint.write_atomic(
    epath.Path(output_dir) / CONFIG_FILE, gin.operative_config_str()
  )


def parse(
  config_files: Sequence[str] = (),
  bindings: Sequence[str] = (),
) -> None:
  """Parses gin files and bindings; one-line ValueErrors on bad input.

  Args:
    config_files: gin files: paths, or names of shipped configs
      (`dqn_cartpole`, `atari/dqn`; `trax-rl configs` lists them).
    bindings: gin bindings or gin text, applied after the files.

  Raises:
    ValueError: a missing file, an unknown configurable or parameter, or a
      syntax error (the message names it).
  """
  files = []
  for f in config_files:
    if epath.Path(f).exists():
      files.append(f)
      continue
    try:
      files.append(shipped_configs.resolve(f))
    except ValueError:
      raise ValueError(
        f'config file {f} does not exist and is not a shipped config '
        '(`trax-rl configs` lists them)'
      ) from None
  _add_search_path()
  gin.clear_config()
  # gin logs an error for each search path an include is not found in,
  # even when a later one has it.
  quiet = _DropMessages('Path not found:')
  logging.getLogger().addFilter(quiet)
  try:
    for f in files:
      text = translated_trax_config(f)
      if text is None:
        gin.parse_config_file(f)
      else:
        gin.parse_config(text)
    gin.parse_config(list(bindings))
    gin.finalize()
  except (ValueError, KeyError, SyntaxError, TypeError, NameError) as e:
    raise ValueError(f'bad gin config: {first_line(e)}') from None
  finally:
    logging.getLogger().removeFilter(quiet)


class _DropMessages(logging.Filter):
  """Drops log records whose message starts with `prefix`."""

  def __init__(self, prefix: str):
    super().__init__()
    self._prefix = prefix

  def filter(self, record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(self._prefix)


_search_paths: set[str] = set()


def _add_search_path() -> None:
  """Lets `include 'atari/common/env.gin'` find the shipped configs."""
  path = str(shipped_configs.directory())
  if path not in _search_paths:
    gin.add_config_file_search_path(path)
    _search_paths.add(path)


def accepts(name: str, param: str) -> bool:
  """Whether the configurable of gin name `name` takes `param`.

  A class's parameters are those of every `__init__` along its MRO, as the
  agents pass `**kwargs` up to their bases, or those its
  `parameter_names()` lists where it has one.
  """
  fn = train_rl if name == 'train_rl' else _REGISTERED.get(name)
  if fn is None:
    return False
  if hasattr(fn, 'parameter_names'):
    return param in fn.parameter_names()
  targets = inspect.getmro(fn) if inspect.isclass(fn) else (fn,)
  for target in targets:
    init = target.__init__ if inspect.isclass(fn) else target
    try:
      if param in inspect.signature(init).parameters:
        return True
    except (TypeError, ValueError):
      continue
  return False


def convert_trax_config(path: str) -> trax_compat.Conversion:
  """The native translation of the Trax gin file at `path`.

  Raises:
    ValueError: the file is not a Trax config, or a binding it uses has no
      trax_rl equivalent (one line naming it).
  """
  text = epath.Path(path).read_text()
  if not trax_compat.is_trax_config(text):
    raise ValueError(f'{path} is not a Trax config: it names no trax.*')
  return trax_compat.convert(text, accepts)


def translated_trax_config(path: str) -> str | None:
  """Native text for a Trax config when trax is not installed, else None.

  Prints the translation's notices, one line each, on stderr.
  """
  text = epath.Path(path).read_text()
  if not trax_compat.is_trax_config(text) or trax_compat.trax_installed():
    return None
  conversion = trax_compat.convert(text, accepts)
  for notice in conversion.notices:
    print(f'trax-rl: note: {notice}', file=sys.stderr)
  return conversion.text


def first_line(error: BaseException) -> str:
  """The first line of an exception's message (gin appends context lines)."""
  text = str(error).strip() or type(error).__name__
  if isinstance(error, KeyError) and text.startswith(("'", '"')):
    text = text[1:-1]
  return text.splitlines()[0]


@gin.configurable
def train_rl(
  output_dir: str | None = None,
  agent_class: Callable[..., base.Agent] = gin.REQUIRED,
  n_epochs: int = 10,
  callbacks: Sequence[base.EpochCallback] = (),
  build_only: bool = False,
  on_nonfinite: str = 'stop',
  strict: bool = False,
  allow_config_change: bool = False,
  n_seeds: int = 1,
  collector: Callable[[], Any] | None = None,
) -> base.Agent | seeds.SeedBatch:
  """Trains `agent_class` on the gin-bound RLTask for n_epochs in total.

  A run finding a checkpoint in output_dir continues from it: n_epochs counts
  the epochs already done, so rerunning the same command finishes the job.

  Args:
    output_dir: where checkpoints, trajectories, metrics and config.gin go.
    agent_class: the agent, e.g. `@PolicyGradient`, its knobs bound in gin.
    n_epochs: total epochs.
    callbacks: called as `callback(agent, record)` after every epoch; one
      returning True stops training.
    build_only: only build the task and agent (for `check` and `eval`).
    on_nonfinite: 'stop' (default): a NaN or inf in a loss, gradient,
      parameter or observation ends the run with NonFiniteError and the
      last finite checkpoint kept; 'warn': log it and train on; 'off': no
      checks (see `Agent.run`).
    strict: bindings that the run never read after its first epoch (a typo
      in a name or a scope, a knob of an unused configurable) are an error,
      not a warning.
    allow_config_change: continue a run in output_dir whose config.gin
      differs from this operative config in more than n_epochs (the
      changes are logged and config.gin rewritten after the first epoch);
      without it such a resume is refused.
    n_seeds: train this many seeds (the agent's seed, seed + 1, ...) in one
      vmapped device program (`device.seeds`); needs a JAX env. It writes
      one record per seed and epoch (field `seed`) and keeps no checkpoint.
    collector: where experience comes from: `@LocalCollector` (None, the
      default: the task's own envs) or `@RayCollector` (rollout actors; its
      knobs bound in gin). Actors build their agent from this gin config.

  Returns:
    The agent (closed, after training, unless build_only).

  Raises:
    ValueError: bad input, a changed config on resume (see
      allow_config_change) or, with strict, unused bindings.
  """
  if (
    isinstance(n_epochs, bool)
    or not isinstance(n_epochs, int)
    or (n_epochs < 0)
  ):
    raise ValueError(f'n_epochs must be an integer >= 0, got {n_epochs!r}')
  validation.check_count('n_seeds', n_seeds, 1)
  if n_seeds > 1 and not build_only:
    return _train_seeds(agent_class, output_dir, n_epochs, callbacks, n_seeds)
  try:
    with base.restore_deferred():  # The config is compared first.
      agent = agent_class(task=RLTask(), output_dir=output_dir)
  except TypeError as e:
    raise _binding_error(e) from None
  if build_only:
    agent.restore()
    return agent
  if collector is not None:
    agent_collector = collector()
    agent_collector.set_agent_factory(
      functools.partial(build_agent, gin.config_str())
    )
    agent.set_collector(agent_collector)
  try:
    changed = check_config_change(output_dir, allow_config_change)
    agent.restore()
    agent.run(
      n_epochs,
      n_epochs_is_total_epochs=True,
      callbacks=[_after_first_epoch(output_dir, strict, changed), *callbacks],
      on_nonfinite=on_nonfinite,
    )
  finally:
    agent.close()
  return agent


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
  }
)
# Where experience comes from (actors, cluster address) is a run-time
# choice too: a run may resume on another cluster or with more actors.
_COLLECTORS = frozenset({'LocalCollector', 'RayCollector'})
_LOG = logging.getLogger(__name__)
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
    and b[1].split('.')[-1] not in _COLLECTORS
    and old.get(b) != new.get(b)
  )


def check_config_change(output_dir: str | None, allow: bool) -> list[str]:
  """Compares output_dir's config.gin with the operative config.

  Returns:
    The changed bindings (empty without an earlier config.gin).

  Raises:
    ValueError: bindings changed and `allow` is False.
  """
  path = epath.Path(output_dir) / CONFIG_FILE if output_dir else None
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


def _after_first_epoch(
  output_dir: str | None, strict: bool, changed: list[str]
) -> base.EpochCallback:
  """Writes config.gin and reports unused bindings, after the first epoch."""
  done = False

  def callback(agent: base.Agent, record: dict[str, Any]) -> None:
    nonlocal done
    del agent, record
    if done:
      return
    done = True
    # As Trax, after the first epoch; also if a crash lost it, and anew
    # when the config changed on purpose.
    if output_dir is not None and (
      changed or not (epath.Path(output_dir) / CONFIG_FILE).exists()
    ):
      write_operative_config(output_dir)
    unused = unused_bindings()
    if unused:
      message = f'gin bindings never used: {", ".join(unused)}'
      if strict:
        raise ValueError(f'{message} (--strict)')
      _LOG.warning(message)

  return callback


def _binding_error(error: TypeError) -> Exception:
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
    return ValueError(
      f'unknown gin binding {owner}.{name}: {owner} has no parameter {name!r}'
    )
  twice = re.search(r"multiple values for keyword argument '(\w+)'", text)
  if twice is not None:
    name = twice.group(1)
    return ValueError(
      f'gin binding {owner}.{name} cannot take effect: {owner} sets {name} '
      'itself'
    )
  return error


def _train_seeds(agent_class, output_dir, n_epochs, callbacks, n_seeds):
  """Builds n_seeds agents (seeds seed..seed+k-1) and trains them at once."""
  first = agent_class(task=RLTask(), output_dir=None)
  agents = [first] + [
    agent_class(task=RLTask(), output_dir=None, seed=first.seed + i)
    for i in range(1, n_seeds)
  ]
  group = seeds.SeedBatch(agents, output_dir)
  try:
    group.run(n_epochs, callbacks)
    if output_dir is not None:
      write_operative_config(output_dir)
  finally:
    group.close()
  return group


def build_agent(config: str) -> base.Agent:
  """The agent a gin config describes, without output_dir (actors' copy)."""
  gin.clear_config()
  gin.parse_config(config)
  return train_rl(output_dir=None, build_only=True)


def query(binding: str, default: Any = None) -> Any:
  """The value bound to `binding` ('train_rl.n_epochs'), or default."""
  try:
    return gin.query_parameter(binding)
  except ValueError:
    return default


logging.getLogger('absl').setLevel(logging.WARNING)
