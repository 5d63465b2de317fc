"""`trax-rl train`: its flags, their gin bindings, progress and summary."""

import argparse
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any


def add_parser(
  sub: Any, add_config_args: Callable, add_safety_args: Callable
) -> None:
  """Adds the `train` subcommand to `trax-rl`'s subparsers."""
  train = sub.add_parser('train', help='train the gin-configured agent')
  add_config_args(train)
  train.add_argument('--output_dir', required=True)
  train.add_argument(
    '--seed',
    type=int,
    default=None,
    help="every seed of the run: RLTask.seed and the agent's seed",
  )
  train.add_argument(
    '--steps',
    type=int,
    default=None,
    help='budget in env steps per seed: sets train_rl.n_epochs to '
    "ceil(steps / the agent's n_interactions_per_epoch)",
  )
  train.add_argument(
    '--no_progress', action='store_true', help='no progress bar'
  )
  add_safety_args(train)
  train.add_argument(
    '--n_actors',
    type=int,
    default=None,
    help='collect on this many Ray rollout actors (train_rl.collector = '
    '@RayCollector, RayCollector.n_actors)',
  )
  train.add_argument(
    '--ray_address',
    default=None,
    help="join this Ray cluster ('host:port' of its head) for the actors",
  )
  _add_track_args(train)
  train.add_argument(
    '--multihost',
    action='store_true',
    help='run as one process of a multi-host learner (train_rl.multihost); '
    'the job is read from $JAX_COORDINATOR_ADDRESS, $JAX_NUM_PROCESSES and '
    '$JAX_PROCESS_ID',
  )


def _add_track_args(p: argparse.ArgumentParser) -> None:
  p.add_argument(
    '--track',
    action='store_true',
    help='log to Weights & Biases too (train_rl.tracker = @WandbTracker; '
    "pip install -e '.[wandb]')",
  )
  for flag, what in (
    ('project', 'the W&B project (default trax_rl)'),
    ('entity', 'the W&B team or user'),
    ('name', "the W&B run's name (default: the output_dir's folder name)"),
    ('mode', "W&B's mode: online, offline (no network) or disabled"),
  ):
    p.add_argument(
      f'--wandb_{flag}', default=None, help=f'with --track: {what}'
    )


def _track_bindings(args) -> list[str]:
  """Gin bindings of --track and its --wandb_* flags."""
  flags = {
    k: getattr(args, f'wandb_{k}')
    for k in ('project', 'entity', 'name', 'mode')
  }
  given = [f'--wandb_{k}' for k, v in flags.items() if v is not None]
  if not args.track:
    if given:
      raise ValueError(f'{given[0]} needs --track')
    return []
  return ['train_rl.tracker = @WandbTracker'] + [
    f'WandbTracker.{k} = {v!r}' for k, v in flags.items() if v is not None
  ]


def _ray_bindings(args) -> list[str]:
  """Gin bindings of the --n_actors and --ray_address shorthands."""
  if args.n_actors is None and args.ray_address is None:
    return []
  bindings = ['train_rl.collector = @RayCollector']
  if args.n_actors is not None:
    if args.n_actors < 1:
      raise ValueError(f'--n_actors must be >= 1, got {args.n_actors}')
    bindings.append(f'RayCollector.n_actors = {args.n_actors}')
  if args.ray_address is not None:
    bindings.append(f'RayCollector.address = {args.ray_address!r}')
  return bindings


def train(args, config_args: Callable, show_warnings: Callable) -> None:
  """`trax-rl train`: parse, train with progress, print the summary; a
  run that fails before its first checkpoint leaves no new folder."""
  from trax_rl import validation  # Heavy imports only after parsing.

  show_warnings()
  with validation.removed_if_unused(args.output_dir):
    _train(args, config_args)


def _train(args, config_args: Callable) -> None:
  from trax_rl import configurables, knobs, validation

  validation.check_output_dir(args.output_dir)
  files, bindings = config_args(args)
  if args.multihost:
    bindings = [*bindings, 'train_rl.multihost = True']
  bindings = bindings + _ray_bindings(args) + _track_bindings(args)
  configurables.parse(files, bindings)
  extra = knobs.run_bindings(args.seed, args.steps)
  if extra:
    configurables.parse(files, bindings + extra)
  n_epochs = configurables.query('train_rl.n_epochs', 10)
  from trax_rl import progress as progress_lib  # noqa: PLC0415

  bar = None
  if not args.no_progress:
    bar = progress_lib.Progress(n_epochs, time.time())
  last = {}

  def progress(_, record: dict[str, Any]) -> None:
    last.update(record)
    if bar is not None:
      bar.update(record)

  try:
    agent = configurables.train_rl(
      output_dir=args.output_dir,
      callbacks=[progress],
      strict=args.strict,
      allow_config_change=args.allow_config_change,
      progress=bar.tick if bar is not None else None,
    )
  finally:
    if bar is not None:
      bar.close()
  print(
    json.dumps(
      _summary(args.output_dir, agent.current_epoch, last, agent.final_eval)
    )
  )


def _summary(
  output_dir: str,
  epochs: int,
  record: dict[str, Any],
  final_eval: dict[str, Any] | None = None,
) -> dict:
  """The final line of `train`: the last epoch's mean training return (the
  last 100 completed episodes), its evaluations if it had any, and the
  evaluation after the last epoch (`final_eval_return_*`, mean of the
  seeds), if the run evaluates."""
  output_dir = os.path.abspath(output_dir)
  mean = record.get('episode_return_mean')
  summary = {
    'output_dir': output_dir,
    'epochs': epochs,
    'env_steps': int(record['n_interactions']) if record else None,
    'episode_return_mean': None if mean is None or math.isnan(mean) else mean,
  }
  summary.update(
    {k: v for k, v in record.items() if k.startswith('eval_return')}
  )
  for k, v in (final_eval or {}).items():
    if k.startswith('eval_return'):
      summary[f'final_{k}'] = sum(v) / len(v)
  summary['metrics'] = os.path.join(output_dir, 'metrics.jsonl')
  return summary
