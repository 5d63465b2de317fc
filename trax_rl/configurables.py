"""Gin registration and the gin entry point `train_rl`.

gin is imported only here, in `gin_registry` (everything a gin file may
name) and in `config_checks` (the checks of a run's bindings).
"""

import functools
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gin
from etils import epath

from trax_rl import (
  binding_types,
  compile_cache,
  compile_options,
  config_checks,
  gin_registry,
  knobs,
  shipped_configs,
  trax_compat,
  validation,
)
from trax_rl.agents import (
  program_agent,
  restoring,
)
from trax_rl.distributed import multihost as multihost_lib
from trax_rl.sources import processes

CONFIG_FILE = config_checks.CONFIG_FILE
_LOG = logging.getLogger(__name__)


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
  config_checks.add_search_path(str(shipped_configs.directory()))
  gin.clear_config()
  try:
    with config_checks.quiet_search_misses():
      for f in files:
        text = translated_trax_config(f)
        if text is None:
          gin.parse_config_file(f)
        else:
          gin.parse_config(text)
      gin.parse_config(list(bindings))
      gin.finalize()
  except SyntaxError as e:
    raise ValueError(
      f'bad gin config: {config_checks.syntax_message(e)}'
    ) from None
  except (ValueError, KeyError, TypeError, NameError) as e:
    raise ValueError(f'bad gin config: {first_line(e)}') from None
  config_checks.check_scopes()
  _check_binding_types()


def _check_binding_types() -> None:
  """Raises a one-line ValueError for a binding whose value its knob's
  annotation rules out (`binding_types`)."""
  for binding in config_checks.parsed_bindings():
    scope, selector, param = binding
    fn = train_rl if selector == 'train_rl' else gin_registry.lookup(selector)
    if fn is None:
      continue
    name = config_checks.binding_name(binding)
    value = gin.query_parameter(name)
    annotation = binding_types.annotation_of(fn, param)
    wanted = binding_types.mismatch(value, annotation)
    if wanted is not None:
      raise ValueError(
        f'gin binding {name} = {value!r}: {param} takes {wanted}, '
        f'not {"None" if value is None else type(value).__name__}'
        f'{binding_types.hint(value, annotation)}'
      )


def accepts(name: str, param: str) -> bool:
  """Whether the configurable of gin name `name` takes `param`
  (`knobs.accepts`)."""
  fn = train_rl if name == 'train_rl' else gin_registry.lookup(name)
  return fn is not None and knobs.accepts(fn, param)


def _hint(owner: str, param: str) -> str | None:
  """What to bind instead of `owner.param` (`knobs.suggest`)."""
  fn = train_rl if owner == 'train_rl' else gin_registry.lookup(owner)
  if fn is None:
    return None
  return knobs.suggest(owner, param, knobs.parameter_names(fn))


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
  agent_class: Callable[..., program_agent.ProgramAgent] = gin.REQUIRED,
  n_epochs: int = 10,
  callbacks: Sequence[program_agent.EpochCallback] = (),
  build_only: bool = False,
  on_nonfinite: str = 'stop',
  strict: bool = False,
  allow_config_change: bool = False,
  n_seeds: int = 1,
  epochs_per_call: int = 1,
  collector: Callable[[], Any] | None = None,
  multihost: bool = False,
  coordinator_address: str | None = None,
  num_processes: int | None = None,
  process_id: int | None = None,
  compilation_cache: str | None = compile_cache.DEFAULT,
  compiler_options: Mapping[str, Mapping[str, Any]] | None = None,
  tracker: Any = None,
  progress: Callable[[int], None] | None = None,
  eval_every: int = 1,
  final_eval: bool = True,
  overlap: bool = False,
  pipeline_depth: int | None = None,
) -> program_agent.ProgramAgent:
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
      one record per seed and epoch (field `seed`) and one checkpoint of
      all seeds after every compiled call, so it resumes as a single run
      does (with the same seed and n_seeds).
    epochs_per_call: on the device path, run up to this many epochs in one
      compiled call on a JAX env, in one source call on gymnasium envs
      (fewer host round trips; evaluations happen once per call).
    collector: where experience comes from: None (the default: the task's
      own envs) or `@RayCollector` (rollout actors; its knobs bound in
      gin). Actors build their agent from this gin config.
    multihost: run the learner as one process of a multi-host job (one
      process per host, `jax.distributed`): the program runs over the
      processes' axis, each process collects with its own envs or rollout
      actors, and only process 0 writes output_dir (which every process
      reads on resume).
    coordinator_address: with multihost, process 0's 'host:port'; None:
      $JAX_COORDINATOR_ADDRESS or JAX's cluster detection.
    num_processes: with multihost, the number of processes; None:
      $JAX_NUM_PROCESSES or JAX's cluster detection.
    process_id: with multihost, this process's index; None:
      $JAX_PROCESS_ID or JAX's cluster detection.
    compilation_cache: a folder for JAX's persistent compilation cache, so
      a rerun of this config loads its compiled programs instead of
      compiling them (`trax_rl.compile_cache`); 'default':
      $TRAX_RL_COMPILATION_CACHE or ~/.cache/trax_rl/xla; None: no cache.
    compiler_options: XLA options for every program the run compiles, per
      platform (`trax_rl.compile_options`), e.g.
      `{'cpu': {'xla_backend_optimization_level': 1}}`: a third less
      compile on CPU, for short runs; None: XLA's defaults.
    tracker: where the records go besides metrics.jsonl and TensorBoard:
      None, `@WandbTracker` (or 'wandb'; `trax-rl train --track`) or any
      object with `log(seed, record)` and `close()` (`trax_rl.tracking`).
    progress: `progress(epoch)` as each epoch ends, also inside a compiled
      call of several epochs (`trax_rl.progress`; the device source calls
      it from its program).
    eval_every: evaluate (the agent's `n_eval_episodes`) before every
      eval_every-th epoch only (1: every epoch, as Trax; with
      epochs_per_call, before each call holding such an epoch).
    final_eval: after the last epoch, evaluate once more and write
      `final_eval.json` (the trained policy's greedy return, which the
      epochs' records, evaluated before each epoch, never show); `trax-rl
      train`'s summary shows it. Nothing the checkpoint holds changes.
    overlap: on gymnasium envs, step the envs in a thread while the
      learner learns (`trax_rl.sources.pipeline`): an epoch costs about
      the longer of acting and learning, not their sum. Needs a
      pipeline_depth >= 1; the records are those of the same depth
      without overlap.
    pipeline_depth: on gymnasium envs, learn from rollouts collected this
      many epochs earlier (their policy `pipeline_depth` epochs older,
      `policy_lag` in the records); None: 1 with overlap, else 0 (each
      epoch collects with the latest learner, as Trax).

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
  validation.check_count('epochs_per_call', epochs_per_call, 1)
  compile_cache.enable(compilation_cache)
  if multihost and not build_only:
    # Before anything starts a JAX backend: checking compiler_options
    # compiles a program, and a job can only be joined before that.
    multihost_lib.join_job(
      coordinator_address,
      num_processes,
      process_id,
      n_seeds,
      query('RLTask.env'),
    )
  # A run that fails before its first checkpoint leaves no new folder.
  cleanup = validation.removed_if_unused(None if build_only else output_dir)
  with cleanup, compile_options.applied(compiler_options):
    try:
      with restoring.restore_deferred():  # The config is compared first.
        agent = agent_class(task=gin_registry.RLTask(), output_dir=output_dir)
    except TypeError as e:
      raise config_checks.binding_error(e, _hint) from None
    if build_only:
      agent.restore()
      return agent
    if multihost:
      agent.join_job()
    if collector is not None:
      agent.set_collector(
        collector(), functools.partial(build_agent, gin.config_str())
      )
    try:
      if n_seeds > 1:
        agent.use_seeds(n_seeds)
      changed = _config_changes(output_dir, allow_config_change)
      agent.restore()
      epochs_before = agent.current_epoch
      agent.run(
        n_epochs,
        n_epochs_is_total_epochs=True,
        callbacks=[_after_first_epoch(output_dir, strict, changed), *callbacks],
        on_nonfinite=on_nonfinite,
        epochs_per_call=epochs_per_call,
        tracker=tracker,
        progress=progress,
        eval_every=eval_every,
        pipeline_depth=int(overlap)
        if pipeline_depth is None
        else pipeline_depth,
        overlap=overlap,
      )
      if final_eval and agent.current_epoch > epochs_before:
        agent.final_eval = agent.runner.final_evaluation()
    finally:
      agent.close()
    return agent


def _after_first_epoch(
  output_dir: str | None, strict: bool, changed: list[str]
) -> program_agent.EpochCallback:
  """Writes config.gin and reports unused bindings, after the first epoch."""
  done = False

  def callback(
    agent: program_agent.ProgramAgent, record: dict[str, Any]
  ) -> None:
    nonlocal done
    del agent, record
    if done:
      return
    done = True
    # `Agent.run` wrote it after epoch 1, as Trax; here also if a crash
    # lost it, and anew when the config changed on purpose.
    if (
      output_dir is not None
      and processes.writes_outputs()
      and (changed or not (epath.Path(output_dir) / CONFIG_FILE).exists())
    ):
      config_checks.write_operative_config(output_dir)
    unused = config_checks.unused_bindings()
    if unused:
      message = f'gin bindings never used: {", ".join(unused)}'
      if strict:
        raise ValueError(f'{message} (--strict)')
      _LOG.warning(message)

  return callback


def _config_changes(output_dir: str | None, allow: bool) -> list[str]:
  """The bindings changed since output_dir's config.gin (see config_checks)."""
  return config_checks.check_config_change(
    epath.Path(output_dir) / CONFIG_FILE if output_dir else None, allow
  )


def build_agent(config: str) -> program_agent.ProgramAgent:
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
