"""The Python entry points behind `trax_rl.train`, `evaluate` and `load`.

Gin stays the single source of a run's configuration: these functions only
parse gin (files, shipped config names or gin text) and drive `train_rl`,
so a run started from a notebook is the same as one started by `trax-rl`.
"""

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

from etils import epath

from trax_rl import (
  checkpoint,
  configurables,
  evaluation,
  metrics,
  shipped_configs,
)
from trax_rl.agents import program_agent
from trax_rl.run import runner as runner_lib

# callback(agent, record) -> True to stop after this epoch.
Callback = Callable[[program_agent.ProgramAgent, dict[str, Any]], bool | None]


@dataclasses.dataclass
class Run:
  """A trained agent and the records of its epochs.

  Attributes:
    agent: the agent (closed: its files are written).
    records: one dict per epoch (`epoch`, `episode_return_mean`,
      `avg_return`, `n_interactions`, eval returns, losses, ...); with an
      output_dir, all epochs of the run, also those before a resume.
  """

  agent: program_agent.ProgramAgent
  records: list[dict[str, Any]]


def _is_gin_text(spec: str) -> bool:
  return '\n' in spec or '=' in spec or not shipped_configs.is_name(spec)


def split_config(
  config: str | Sequence[str],
) -> tuple[list[str], list[str]]:
  """Splits gin files and shipped config names from gin text.

  Raises:
    ValueError: `config` is empty or not strings.
  """
  specs = [config] if isinstance(config, str) else list(config)
  if not specs or not all(isinstance(s, str) for s in specs):
    raise ValueError(
      'config must be a gin file, a shipped config name or gin text '
      f'(or a list of them), got {config!r}'
    )
  files = [s for s in specs if not _is_gin_text(s)]
  texts = [s for s in specs if _is_gin_text(s)]
  return files, texts


def train(
  config: str | Sequence[str],
  output_dir: str | None = None,
  bindings: Sequence[str] = (),
  n_epochs: int | None = None,
  callbacks: Sequence[Callback] = (),
) -> Run:
  """Parses `config`, trains, returns the agent and its records."""
  files, texts = split_config(config)
  extra = [*texts, *bindings]
  if n_epochs is not None:
    extra.append(f'train_rl.n_epochs = {n_epochs!r}')
  configurables.parse(files, extra)
  records = []

  def keep(_: program_agent.ProgramAgent, record: dict[str, Any]) -> None:
    records.append(dict(record))  # The record names its epoch.

  agent = configurables.train_rl(
    output_dir=output_dir, callbacks=[keep, *callbacks]
  )
  if output_dir is not None:
    records = metrics.read(output_dir)
  return Run(agent, records)


def load(
  output_dir: str, seed: int | None = None
) -> program_agent.ProgramAgent:
  """Builds the agent of a trained run from its config.gin and checkpoint.

  Args:
    output_dir: the run's output_dir.
    seed: for a seed batch (`train_rl.n_seeds`), which of its seeds.

  Raises:
    ValueError: output_dir holds no config.gin or no checkpoint, or a seed
      batch and no (or another) seed.
  """
  return _load(output_dir, seed)[0]


def _load(
  output_dir: str, seed: int | None
) -> tuple[program_agent.ProgramAgent, int]:
  """(agent, the epoch its checkpoint holds); see `load`."""
  config = epath.Path(output_dir) / configurables.CONFIG_FILE
  if not config.exists():
    raise ValueError(
      f'{output_dir} has no {configurables.CONFIG_FILE}: '
      'is it the output_dir of a trained run?'
    )
  configurables.parse([os.fspath(config)])
  if configurables.query('train_rl.n_seeds', 1) > 1:  # A seed batch.
    path = epath.Path(output_dir) / runner_lib.CHECKPOINT_FILE
    if not path.exists():
      raise ValueError(f'{output_dir} has no checkpoint to evaluate')
    ckpt = checkpoint.load(path)
    batch = [int(s) for s in ckpt.get('seeds', ())]
    if seed not in batch:
      which = '' if seed is None else f', not seed {seed}'
      raise ValueError(
        f'{output_dir} holds a seed batch (seeds {batch}){which}: name the '
        'seed to evaluate (trax-rl eval --seed S)'
      )
    name = configurables.query('train_rl.agent_class').selector
    configurables.parse([os.fspath(config)], [f'{name}.seed = {seed}'])
    agent = configurables.train_rl(output_dir=None, build_only=True)
    agent.runner.load_seed(ckpt, path, seed)
    return agent, agent.current_epoch
  agent = configurables.train_rl(output_dir=output_dir, build_only=True)
  if not agent.restore():
    raise ValueError(f'{output_dir} has no checkpoint to evaluate')
  if seed is not None and seed != agent.seed:
    raise ValueError(
      f'{output_dir} is a run of seed {agent.seed}, not of seed {seed}'
    )
  return agent, agent.current_epoch


def evaluate(
  agent: program_agent.ProgramAgent | str,
  episodes: int = 10,
  temperature: float = 0.0,
  video: str | None = None,
  seed: int | None = None,
) -> dict[str, Any]:
  """Evaluation statistics of `agent` (or of the run in that output_dir).

  `seed` picks one seed of a seed batch's output_dir (see `load`).
  """
  if isinstance(agent, str):
    agent, epoch = _load(agent, seed)
  else:
    epoch = agent.current_epoch
  if video is not None:  # Before the episodes: a bad path fails fast.
    evaluation.check_video_path(video)
  report = evaluation.evaluate(agent, episodes, temperature)
  report['epoch'] = epoch
  report['seed'] = agent.seed
  if video is not None:
    report['video'] = evaluation.record_video(agent, video, temperature)
  return report
