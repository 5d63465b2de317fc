"""Loop: a Trainer plus a schedule of evaluations and checkpoints.

Also the one per-epoch evaluation mechanism of the RL agents, after Trax's
`train_epoch(steps, eval_steps)` / `remaining_evals`: an RL epoch's
updates run in `evals_per_epoch` equal rounds, each followed by the loss
metrics of `eval_steps` batches that are not trained on (`run_epoch`,
`mean_metrics`).
"""

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import jax
import numpy as np
from etils import epath

from trax_rl import checkpoint, compile_options, validation
from trax_rl.supervised import trainer as trainer_lib

LOOP_FILE = 'loop.pkl'


class Loop:
  """Trains a `Trainer` for n steps, evaluating and checkpointing on schedule.

  Evaluation runs `eval_fn(params, batch) -> metrics` (jitted here; default:
  the trainer's loss metrics, `Trainer.evaluate`) on `n_eval_batches`
  batches of `eval_batch_stream` whenever `eval_at(step)`, and after each
  round of `run_epoch`.
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
    self._eval_fn = (
      compile_options.jit(eval_fn) if eval_fn is not None else None
    )
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

  def run_epoch(
    self,
    epoch: int,
    train_steps_per_epoch: int,
    evals_per_epoch: int = 1,
    eval_batch_stream: Iterator[Any] | None = None,
  ) -> tuple[dict[str, float], dict[str, float]]:
    """Trains what is left of RL epoch `epoch`, evaluating after each round.

    The epoch's `train_steps_per_epoch` updates run in `evals_per_epoch`
    equal rounds; a run restored mid-epoch does only the rounds left
    (`remaining_evals`).

    Args:
      epoch: the RL epoch, >= 1.
      train_steps_per_epoch: updates per RL epoch.
      evals_per_epoch: rounds per epoch, each followed by an evaluation.
      eval_batch_stream: the evaluation batches from now on (an agent passes
        one seeded by the epoch, so a resumed run evaluates as an
        uninterrupted one); None keeps the current stream.

    Returns:
      (mean train metrics, eval metrics of the last round); empty dicts
      when nothing was left to do.
    """
    n_rounds = remaining_evals(
      self.step, epoch, train_steps_per_epoch, evals_per_epoch
    )
    if eval_batch_stream is not None:
      self._eval_stream = eval_batch_stream
    rounds, evals = [], {}
    for _ in range(n_rounds):
      rounds.append(
        self._trainer.train_steps(train_steps_per_epoch // evals_per_epoch)
      )
      evals = self.evaluate()
    if not rounds:
      return {}, evals
    train = {k: sum(r[k] for r in rounds) / len(rounds) for k in rounds[0]}
    return train, evals

  def evaluate(self) -> dict[str, float]:
    """Mean eval metrics over n_eval_batches batches."""
    if self._eval_stream is None or not self._n_eval_batches:
      return {}
    batches = (next(self._eval_stream) for _ in range(self._n_eval_batches))
    if self._eval_fn is None:
      return mean_metrics(self._trainer, batches)
    sums: dict[str, float] = {}
    for batch in batches:
      out = self._eval_fn(self._trainer.params, batch)
      sums = _accumulate(sums, {k: float(v) for k, v in out.items()})
    return {k: v / self._n_eval_batches for k, v in sums.items()}

  def save(self) -> None:
    checkpoint.save(self._file, self._trainer.state_dict())


def _accumulate(total: dict[str, float], new: dict[str, float]):
  return {k: total.get(k, 0.0) + v for k, v in new.items()}


def check_evals(
  owner: str, train_steps_per_epoch: int, evals_per_epoch: int, eval_steps: int
) -> None:
  """Checks an agent's per-epoch evaluation knobs, naming the culprit.

  Args:
    owner: the knobs' prefix in messages, e.g. 'DQN.value'.
    train_steps_per_epoch: updates per RL epoch.
    evals_per_epoch: rounds per epoch, each followed by an evaluation.
    eval_steps: batches per evaluation; 0 turns evaluation off.

  Raises:
    ValueError: a bad count, or rounds that do not divide the epoch.
  """
  validation.check_count(f'{owner}_evals_per_epoch', evals_per_epoch, 1)
  validation.check_count(f'{owner}_eval_steps', eval_steps, 0)
  if train_steps_per_epoch % evals_per_epoch:
    raise ValueError(
      f'{owner}_evals_per_epoch ({evals_per_epoch}) must divide the train '
      f'steps per epoch ({train_steps_per_epoch})'
    )


def remaining_evals(
  step: int, epoch: int, train_steps_per_epoch: int, evals_per_epoch: int
) -> int:
  """Evaluation rounds still to run in RL epoch `epoch` (Trax's semantics).

  Args:
    step: the trainer's step now.
    epoch: the RL epoch being trained, >= 1.
    train_steps_per_epoch: updates per RL epoch.
    evals_per_epoch: rounds per epoch.

  Returns:
    The rounds left: `evals_per_epoch` at the start of the epoch, 0 once it
    is done.

  Raises:
    ValueError: the step does not fall on a round boundary of this epoch.
  """
  if epoch < 1:
    raise ValueError(f'epoch must be >= 1, got {epoch}')
  done = step - (epoch - 1) * train_steps_per_epoch
  per_round = train_steps_per_epoch // evals_per_epoch
  if not 0 <= done <= train_steps_per_epoch or done % per_round:
    raise ValueError(
      f'trainer step {step} is not on a round boundary of epoch {epoch} '
      f'({evals_per_epoch} rounds of {per_round} steps)'
    )
  return evals_per_epoch - done // per_round


def mean_metrics(
  trainer: trainer_lib.Trainer, batches: Iterable[Any]
) -> dict[str, float]:
  """Mean of `trainer.evaluate` over batches (one transfer to the host).

  Returns:
    The mean metrics and loss; empty if there were no batches.
  """
  outs = [trainer.evaluate(batch) for batch in batches]
  if not outs:
    return {}
  means = jax.tree.map(lambda *xs: np.mean(xs), *jax.device_get(outs))
  return {k: float(v) for k, v in means.items()}
