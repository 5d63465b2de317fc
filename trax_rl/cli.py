"""The `trax-rl` command: train | eval | plot | check | configs | convert."""

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from trax_rl import cli_train, plotting

EXIT_BAD_INPUT = 2
EXIT_NONFINITE = 3  # A NaN or inf stopped training (train_rl.on_nonfinite).


class _Parser(argparse.ArgumentParser):
  """argparse with exit status 2 and one line for usage errors."""

  def error(self, message: str):
    self.exit(EXIT_BAD_INPUT, f'trax-rl: error: {message}\n')


def _add_config_args(p: argparse.ArgumentParser) -> None:
  p.add_argument(
    '--config_file',
    action='append',
    default=[],
    help='gin file or shipped config name (repeatable)',
  )
  p.add_argument(
    '--config',
    action='append',
    default=[],
    help='a shipped config name or gin file ("dqn_cartpole"), or a gin '
    'binding ("train_rl.n_epochs=5"); repeatable',
  )


def _add_safety_args(p: argparse.ArgumentParser) -> None:
  p.add_argument(
    '--strict',
    action='store_true',
    help='gin bindings the run never used are an error (exit 2), not a warning',
  )
  p.add_argument(
    '--allow_config_change',
    action='store_true',
    help='resume an output_dir whose config.gin differs from this config '
    '(in more than train_rl.n_epochs)',
  )


def _config_args(args) -> tuple[list[str], list[str]]:
  """(gin files, bindings) of --config_file and --config.

  A --config value without `=` or spaces names a config (a shipped name or
  a file); any other is a binding.

  Raises:
    ValueError: no config is named.
  """
  from trax_rl import shipped_configs

  names = [c for c in args.config if shipped_configs.is_name(c)]
  bindings = [c for c in args.config if not shipped_configs.is_name(c)]
  files = [*args.config_file, *names]
  if not files:
    raise ValueError(
      'no config: give --config=NAME (see `trax-rl configs`) or '
      '--config_file=PATH'
    )
  return files, bindings


def _parser() -> argparse.ArgumentParser:
  parser = _Parser(prog='trax-rl', description=__doc__)
  parser.add_argument(
    '--debug',
    action='store_true',
    help='show full tracebacks instead of one-line errors',
  )
  sub = parser.add_subparsers(
    dest='command', required=True, parser_class=_Parser
  )
  cli_train.add_parser(sub, _add_config_args, _add_safety_args)
  ev = sub.add_parser('eval', help='evaluate a trained run')
  ev.add_argument('--output_dir', required=True)
  ev.add_argument('--episodes', type=int, default=10, help='episodes, >= 1')
  ev.add_argument(
    '--temperature', type=float, default=0.0, help='0 is greedy, >= 0'
  )
  ev.add_argument('--video', help='write one episode to this .mp4 or .gif')
  ev.add_argument(
    '--seed',
    type=int,
    default=None,
    help='which seed of a seed batch (train_rl.n_seeds) to evaluate',
  )
  plotting.add_parser(sub)
  check = sub.add_parser(
    'check',
    help='check an env (--env) or a config and its env, without training',
  )
  _add_config_args(check)
  check.add_argument(
    '--env',
    default=None,
    help="an env to check as SB3's env checker does: a gymnasium id, "
    "'module:Name', or 'gymnax:<id>'",
  )
  check.add_argument(
    '--env_steps',
    type=int,
    default=500,
    help='random-action steps of the env check (default 500)',
  )
  sub.add_parser('configs', help='list the shipped gin configs')
  convert = sub.add_parser(
    'convert', help='write the native gin file equivalent to a Trax one'
  )
  convert.add_argument('trax_config', help='a Trax RL gin file')
  convert.add_argument(
    '--out', default=None, help='output path (default: stdout)'
  )
  return parser


class _WarningLines(logging.Handler):
  """Prints the library's warnings as `trax-rl: warning: ...` lines.

  Writes to the current `sys.stderr` at each record (not the one of when it
  was made), so a caller that swaps stderr still sees them.
  """

  def __init__(self):
    super().__init__(logging.WARNING)
    self.setFormatter(logging.Formatter('trax-rl: warning: %(message)s'))

  def emit(self, record: logging.LogRecord) -> None:
    print(self.format(record), file=sys.stderr)


def _show_warnings() -> None:
  logger = logging.getLogger('trax_rl')
  if not any(isinstance(h, _WarningLines) for h in logger.handlers):
    logger.addHandler(_WarningLines())
    logger.propagate = False  # Else absl's root handler prints them again.


def _plot(args) -> None:
  _show_warnings()  # Runs that differ in budget, metric or seed.
  plotting.run(args)


def _check(args) -> None:
  from trax_rl import env_checker, validation

  validation.check_count('--env_steps', args.env_steps, 1)
  if args.env is not None and not (args.config or args.config_file):
    report = env_checker.check_env(args.env, args.env_steps)
    print(json.dumps(dict({'env_check': 'ok'}, **report)))
    return
  from trax_rl import configurables
  from trax_rl.agents import checks

  configurables.parse(*_config_args(args))
  agent = configurables.train_rl(output_dir=None, build_only=True)
  env = env_checker.check_env(agent.task.env_spec, args.env_steps)
  report = checks.check(agent)
  report['env_check'] = 'ok'
  report['env_warnings'] = env['warnings']
  print(
    json.dumps(dict({'config': 'ok', 'agent': type(agent).__name__}, **report))
  )


def _eval(args) -> None:
  from trax_rl import api, evaluation, validation

  validation.check_count('--episodes', args.episodes, 1)
  evaluation.check_temperature(args.temperature)
  if args.video is not None:
    evaluation.check_video_path(args.video)
  report = api.evaluate(
    args.output_dir, args.episodes, args.temperature, args.video, args.seed
  )
  report['output_dir'] = args.output_dir
  report['mean_return'] = report['return']['mean']
  print(json.dumps(report))


def _configs(args) -> None:
  del args
  from trax_rl import shipped_configs

  rows = shipped_configs.describe()
  columns = ('config', 'agent', 'env', 'result')
  widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns[:-1]}
  print('  '.join(c.ljust(widths.get(c, 0)) for c in columns).rstrip())
  for r in rows:
    print('  '.join(r[c].ljust(widths.get(c, 0)) for c in columns).rstrip())


def _convert(args) -> None:
  from trax_rl import checkpoint, configurables

  conversion = configurables.convert_trax_config(args.trax_config)
  for notice in conversion.notices:
    print(f'trax-rl: note: {notice}', file=sys.stderr)
  if args.out is None:
    sys.stdout.write(conversion.text)
    return
  checkpoint.write_atomic(args.out, conversion.text)
  print(json.dumps({'converted': args.trax_config, 'out': args.out}))


def main(argv: Sequence[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  commands = {
    'train': lambda args: cli_train.train(args, _config_args, _show_warnings),
    'eval': _eval,
    'plot': _plot,
    'check': _check,
    'configs': _configs,
    'convert': _convert,
  }
  try:
    commands[args.command](args)
  except RuntimeError as e:
    from trax_rl.run import nonfinite  # Loaded already: it raised.

    if args.debug or not isinstance(e, nonfinite.NonFiniteError):
      raise
    from trax_rl import configurables

    print(f'trax-rl: error: {configurables.first_line(e)}', file=sys.stderr)
    return EXIT_NONFINITE
  except KeyboardInterrupt:
    print(
      'trax-rl: interrupted; the last completed epoch is saved', file=sys.stderr
    )
    return 130
  except (ValueError, OSError, TypeError, KeyError, ImportError) as e:
    if args.debug:
      raise
    return _report(e)
  except Exception as e:  # noqa: BLE001 - third-party errors of bad input.
    # gymnasium reports a missing optional dependency (e.g. opencv for
    # AtariPreprocessing) with its own error class.
    if args.debug or type(e).__module__.split('.')[0] != 'gymnasium':
      raise
    return _report(e)
  return 0


def _report(e: BaseException) -> int:
  """Prints the one-line error of bad input; returns exit status 2."""
  from trax_rl import configurables

  print(f'trax-rl: error: {configurables.first_line(e)}', file=sys.stderr)
  return EXIT_BAD_INPUT


if __name__ == '__main__':
  sys.exit(main())
