"""Where a run's records go besides metrics.jsonl: TensorBoard and W&B.

Each tracker gets the records metrics.jsonl gets, one per epoch and seed,
against env steps (`n_interactions`, per seed), so that configs with other
epoch sizes line up. A seed batch gets one TensorBoard folder
(`output_dir/tb/seed_S`) and one Weights & Biases run per seed, grouped.

A tracker is anything with `log(seed, record)` and `close()`;
`train_rl.tracker` picks one besides TensorBoard:

    train_rl.tracker = @WandbTracker
    WandbTracker.project = 'my_project'

or, from the command line, `trax-rl train --track --wandb_project=...`.
"""

import json
import os
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import gin
from etils import epath

from trax_rl import checkpoint, validation

STEP = 'n_interactions'  # The x axis: env steps per seed.
_WANDB_IDS = 'wandb_runs.json'  # {seed: run id}, so a resume continues them.


class Tracker(Protocol):
  def log(self, seed: int, record: dict[str, Any]) -> None: ...

  def close(self) -> None: ...


def _x(record: dict[str, Any]) -> int:
  return int(record.get(STEP, record.get('epoch', 0)))


def _scalars(record: dict[str, Any]) -> dict[str, float]:
  """The record's numbers; `seed` names the run instead (a folder, a W&B
  run per seed), else a batch's seeds would draw one saw-tooth curve."""
  return {
    k: v
    for k, v in record.items()
    if isinstance(v, (int, float)) and not isinstance(v, bool) and k != 'seed'
  }


class TensorBoard:
  """TensorBoard events in output_dir/tb (tb/seed_S for a seed batch)."""

  def __init__(self, output_dir: str, seeds: Sequence[int]):
    self._dir = epath.Path(output_dir) / 'tb'
    self._batch = len(seeds) > 1
    self._writers: dict[int, Any] = {}  # Opened on the first record.

  def _writer(self, seed: int) -> Any:
    if seed not in self._writers:
      from tensorboardX import SummaryWriter  # noqa: PLC0415 (heavy)

      path = self._dir / f'seed_{seed}' if self._batch else self._dir
      self._writers[seed] = SummaryWriter(os.fspath(path))
    return self._writers[seed]

  def log(self, seed: int, record: dict[str, Any]) -> None:
    writer = self._writer(seed)
    step = _x(record)
    for k, v in _scalars(record).items():
      if k != STEP:
        writer.add_scalar(k, v, step)
    writer.flush()

  def close(self) -> None:
    for writer in self._writers.values():
      writer.close()
    self._writers = {}


class WandbTracker:
  """Weights & Biases runs (`pip install -e '.[wandb]'`): one per seed.

  Each run's config is the run's operative gin config (`gin` holds its
  text, the other keys its bindings), its x axis `n_interactions` (env
  steps). Run ids are kept in output_dir, so a resumed run continues its
  W&B runs instead of starting new ones.

  Args:
    project: the W&B project.
    entity: the W&B team or user; None: your default entity.
    name: the run's name (a seed batch's runs add `-seed_S`); None: the
      output_dir's folder name.
    mode: 'online', 'offline' (logs to output_dir/wandb, no network; `wandb
      sync` uploads it later) or 'disabled'; None: $WANDB_MODE, else online.
    tags: tags of the runs.
  """

  def __init__(
    self,
    project: str = 'trax_rl',
    entity: str | None = None,
    name: str | None = None,
    mode: str | None = None,
    tags: Sequence[str] = (),
  ):
    wandb = validation.import_extra(
      'wandb', 'train_rl.tracker = @WandbTracker', 'wandb', 'wandb'
    )
    if mode not in (None, 'online', 'offline', 'disabled'):
      raise ValueError(
        "WandbTracker.mode must be 'online', 'offline', 'disabled' or None, "
        f'got {mode!r}'
      )
    self._wandb = wandb
    self._settings = dict(
      project=project, entity=entity, name=name, mode=mode, tags=list(tags)
    )
    self._dir: epath.Path | None = None
    self._seeds: list[int] = []
    self._runs: dict[int, Any] = {}

  def open(self, output_dir: str, seeds: Sequence[int]) -> None:
    self._dir = epath.Path(output_dir)
    self._seeds = list(seeds)

  def _ids(self) -> dict[str, str]:
    path = self._dir / _WANDB_IDS
    return json.loads(path.read_text()) if path.exists() else {}

  def _run(self, seed: int) -> Any:
    if seed in self._runs:
      return self._runs[seed]
    ids = self._ids()
    name = self._settings['name'] or self._dir.name
    batch = len(self._seeds) > 1
    run_id = ids.get(str(seed)) or uuid.uuid4().hex[:12]
    run = self._wandb.init(
      project=self._settings['project'],
      entity=self._settings['entity'],
      name=f'{name}-seed_{seed}' if batch else name,
      group=name if batch else None,
      tags=self._settings['tags'],
      mode=self._settings['mode'],
      dir=os.fspath(self._dir),
      id=run_id,
      resume='allow',
      config={**gin_config(), 'seed': seed},
      reinit='create_new',
    )
    run.define_metric(STEP)
    run.define_metric('*', step_metric=STEP)
    if ids.get(str(seed)) != run_id:
      ids[str(seed)] = run_id
      checkpoint.write_atomic(self._dir / _WANDB_IDS, json.dumps(ids))
    self._runs[seed] = run
    return run

  def log(self, seed: int, record: dict[str, Any]) -> None:
    self._run(seed).log(_scalars(record))

  def close(self) -> None:
    for run in self._runs.values():
      run.finish()
    self._runs = {}


def gin_config() -> dict[str, Any]:
  """The operative gin config as a W&B config: its text and its bindings."""
  from trax_rl import config_checks  # noqa: PLC0415 (imports gin's parser)

  text = gin.operative_config_str()
  config: dict[str, Any] = {'gin': text}
  config.update(config_checks.bindings_by_name(text))
  return config


def build(tracker: Any, output_dir: str, seeds: Sequence[int]) -> list[Any]:
  """The run's trackers: TensorBoard and `tracker` (None, 'wandb', a
  tracker or a class or function returning one)."""
  out: list[Any] = [TensorBoard(output_dir, seeds)]
  if tracker is None:
    return out
  if tracker == 'wandb':  # WandbTracker's gin bindings apply.
    tracker = WandbTracker(**gin.get_bindings('WandbTracker'))
  if isinstance(tracker, str):
    raise ValueError(
      f"train_rl.tracker must be None, 'wandb' or a tracker, got {tracker!r}"
    )
  if isinstance(tracker, type) or not hasattr(tracker, 'log'):
    tracker = tracker() if callable(tracker) else tracker
  if not (hasattr(tracker, 'log') and hasattr(tracker, 'close')):
    raise ValueError(
      'train_rl.tracker must have log(seed, record) and close(), got '
      f'{tracker!r}'
    )
  if hasattr(tracker, 'open'):
    tracker.open(output_dir, seeds)
  return [*out, tracker]
