"""Summaries: metrics.jsonl always, TensorBoard events, log lines."""

import json
import logging
import math
import os
from typing import Any

from etils import epath

from trax_rl import checkpoint

METRICS_FILE = 'metrics.jsonl'


def _plain(value: Any) -> Any:
  try:
    value = float(value)
  except (TypeError, ValueError):
    return str(value)
  return value if math.isfinite(value) else None


class MetricsWriter:
  """Writes one JSON line per record and TensorBoard scalars.

  Args:
    output_dir: directory of `metrics.jsonl` and the TensorBoard events
      (`output_dir/tb`); None logs only.
    tensorboard: also write TensorBoard events.
  """

  def __init__(self, output_dir: str | None, tensorboard: bool = True):
    self._dir = epath.Path(output_dir) if output_dir is not None else None
    self._tb = None
    if self._dir is not None and tensorboard:
      from tensorboardX import SummaryWriter  # Heavy import, only if used.

      self._tb = SummaryWriter(os.fspath(self._dir / 'tb'))

  @property
  def path(self) -> epath.Path | None:
    return self._dir / METRICS_FILE if self._dir is not None else None

  def write(self, step_name: str, step: int, values: dict[str, Any]) -> None:
    record = {step_name: int(step)}
    record.update({k: _plain(v) for k, v in values.items()})
    logging.info('%s %d: %s', step_name, step, record)
    if self._dir is None:
      return
    with self.path.open('a') as f:
      f.write(json.dumps(record) + '\n')
    if self._tb is not None:
      for k, v in record.items():
        if k != step_name and isinstance(v, float):
          self._tb.add_scalar(k, v, step)
      self._tb.flush()

  def truncate(self, step_name: str, last_step: int) -> None:
    """Drops records after `last_step` (written before a crash), atomically."""
    if self.path is None or not self.path.exists():
      return
    kept = []
    for line in self.path.read_text().splitlines():
      try:
        if json.loads(line).get(step_name, 0) <= last_step:
          kept.append(line)
      except json.JSONDecodeError:
        continue  # A line cut by a crash.
    checkpoint.write_atomic(self.path, ''.join(k + '\n' for k in kept))

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()
      self._tb = None


def read(path: str) -> list[dict[str, Any]]:
  """Records of a metrics.jsonl file (or of a run directory)."""
  p = epath.Path(path)
  if p.is_dir():
    p = p / METRICS_FILE
  if not p.exists():
    raise ValueError(f'no {METRICS_FILE} in {path}')
  return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
