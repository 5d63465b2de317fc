"""Loop: a Trainer plus a schedule of evaluations and checkpoints."""

import logging
from collections.abc import Callable, Iterator
from typing import Any

import jax
from etils import epath

from trax_rl import checkpoint
from trax_rl.supervised import trainer as trainer_lib

LOOP_FILE = 'loop.pkl'


class Loop:
  """Trains a `Trainer` for n steps, evaluating and checkpointing on schedule.

  Evaluation runs `eval_fn(params, batch) -> metrics` (jitted here) on
  `n_eval_batches` batches of `eval_batch_stream` whenever `eval_at(step)`.
  With an `output_dir`, the trainer state is written atomically to
  `output_dir/loop.pkl` whenever `checkpoint_at(step)`, and restored from
  there when the Loop is built.
  """

  def __init__(
    self,
    trainer: trainer_lib.Trainer,
    eval_fn: Callable[[Any, Any], dict[str, Any]] | None = None,
    eval_batch_stream: Iterator[Any] | None = None,
    n_eval_batches: int = 1,
    eval_at: Callable[[int], bool] | None = None,
    checkpoint_at: Callable[[int], bool] | None = None,
    output_dir: str | None = None,
  ):
    self._trainer = trainer
    self._eval_fn = jax.jit(eval_fn) if eval_fn is not None else None
    self._eval_stream = eval_batch_stream
    self._n_eval_batches = n_eval_batches
    self._eval_at = eval_at or (lambda step: False)
    self._checkpoint_at = checkpoint_at or (lambda step: False)
    self._output_dir = output_dir
    self.eval_history: list[tuple[int, dict[str, float]]] = []
    if output_dir is not None and checkpoint.exists(self._file):
      self._trainer.load_state_dict(checkpoint.load(self._file))

  @property
  def _file(self) -> epath.Path:
    return epath.Path(self._output_dir) / LOOP_FILE

  @property
  def trainer(self) -> trainer_lib.Trainer:
    return self._trainer

  @property
  def step(self) -> int:
    return self._trainer.step

  def run(self, n_steps: int = 1) -> dict[str, float]:
    """Trains n steps; returns the mean train metrics (and last evals)."""
    metrics: dict[str, float] = {}
    for _ in range(n_steps):
      metrics = _accumulate(metrics, self._trainer.train_steps(1))
      step = self._trainer.step
      if self._eval_fn is not None and self._eval_at(step):
        evals = self.evaluate()
        self.eval_history.append((step, evals))
        logging.info('step %d eval %s', step, evals)
      if self._output_dir is not None and self._checkpoint_at(step):
        self.save()
    return {k: v / max(n_steps, 1) for k, v in metrics.items()}

  def evaluate(self) -> dict[str, float]:
    """Mean eval metrics over n_eval_batches batches."""
    if self._eval_fn is None or self._eval_stream is None:
      return {}
    sums: dict[str, float] = {}
    for _ in range(self._n_eval_batches):
      out = self._eval_fn(self._trainer.params, next(self._eval_stream))
      sums = _accumulate(sums, {k: float(v) for k, v in out.items()})
    return {k: v / self._n_eval_batches for k, v in sums.items()}

  def save(self) -> None:
    checkpoint.save(self._file, self._trainer.state_dict())


def _accumulate(total: dict[str, float], new: dict[str, float]):
  return {k: total.get(k, 0.0) + v for k, v in new.items()}
