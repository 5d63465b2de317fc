"""Records: metrics.jsonl always, log lines, and the run's trackers."""

import json
import logging
import math
from collections.abc import Sequence
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
  """Writes one JSON line per record, and gives it to the trackers.

  Args:
    output_dir: directory of `metrics.jsonl`; None logs only.
    trackers: `tracking` trackers (TensorBoard, W&B) that get each record
      too, with the seed it belongs to.
  """

  def __init__(self, output_dir: str | None, trackers: Sequence[Any] = ()):
    self._dir = epath.Path(output_dir) if output_dir is not None else None
    self._trackers = list(trackers)

  @property
  def path(self) -> epath.Path | None:
    return self._dir / METRICS_FILE if self._dir is not None else None

  def write(
    self,
    step_name: str,
    step: int,
    values: dict[str, Any],
    seed: int | None = None,
  ) -> None:
    record = {step_name: int(step)}
    record.update({k: _plain(v) for k, v in values.items()})
    logging.info('%s %d: %s', step_name, step, record)
    if self._dir is None:
      return
    with self.path.open('a') as f:
      f.write(json.dumps(record) + '\n')
    for tracker in self._trackers:
      tracker.log(seed, record)

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
    trackers, self._trackers = self._trackers, []
    for tracker in trackers:
      tracker.close()


def read(path: str) -> list[dict[str, Any]]:
  """Records of a metrics.jsonl file (or of a run directory)."""
  p = epath.Path(path)
  if p.is_dir():
    p = p / METRICS_FILE
  if not p.exists():
    raise ValueError(f'no {METRICS_FILE} in {path}')
  return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
