"""Argument checks shared by every layer: one line that names the culprit.

Each check raises `ValueError` with a message of the form
`<name> must be <requirement>, got <value>`, which the command line prints
as its one-line error.
"""

import contextlib
import importlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
from etils import epath


def is_int(value: Any) -> bool:
  """True for Python and numpy integers; False for bools."""
  return isinstance(value, int | np.integer) and not isinstance(value, bool)


def check_count(name: str, value: Any, minimum: int) -> None:
  """Raises ValueError unless value is None or an integer >= minimum."""
  if value is not None and (not is_int(value) or value < minimum):
    raise ValueError(f'{name} must be an integer >= {minimum}, got {value!r}')


def check_positive(name: str, value: Any) -> None:
  """Raises ValueError unless value is a finite number > 0."""
  if (
    isinstance(value, bool)
    or not isinstance(value, int | float | np.number)
    or not 0 < value < math.inf
  ):
    raise ValueError(f'{name} must be a finite number > 0, got {value!r}')


def _is_number(value: Any) -> bool:
  return isinstance(value, int | float | np.number) and not isinstance(
    value, bool
  )


def check_positive_or_none(name: str, value: Any) -> None:
  """Raises ValueError unless value is None or a number > 0 (inf allowed)."""
  if value is not None and not (_is_number(value) and value > 0):
    raise ValueError(
      f'{name} must be > 0, or None to disable it, got {value!r}'
    )


def check_non_negative(name: str, value: Any) -> None:
  """Raises ValueError unless value is a finite number >= 0."""
  if not (_is_number(value) and 0 <= value < math.inf):
    raise ValueError(f'{name} must be a finite number >= 0, got {value!r}')


def check_non_positive(name: str, value: Any) -> None:
  """Raises ValueError unless value is a finite number <= 0."""
  if not (_is_number(value) and -math.inf < value <= 0):
    raise ValueError(f'{name} must be a finite number <= 0, got {value!r}')


def check_unit(name: str, value: Any) -> None:
  """Raises ValueError unless value is a number in [0, 1]."""
  if (
    isinstance(value, bool)
    or not isinstance(value, int | float | np.number)
    or not 0 <= value <= 1
  ):
    raise ValueError(f'{name} must be in [0, 1], got {value!r}')


def check_output_dir(output_dir: str) -> epath.Path:
  """Creates output_dir if needed and checks that it can be written.

  Args:
    output_dir: a local path or a `gs://` URL.

  Returns:
    The directory as an `epath.Path`.

  Raises:
    ValueError: it exists and is not a directory, or cannot be written.
  """
  path = epath.Path(output_dir)
  if path.exists() and not path.is_dir():
    raise ValueError(f'output_dir {output_dir} exists and is not a directory')
  try:
    path.mkdir(parents=True, exist_ok=True)
    probe = path / '.write_probe'
    probe.write_text('')
    probe.unlink()
  except OSError as e:
    raise ValueError(
      f'output_dir {output_dir} is not writable: {e.strerror or e}'
    ) from None
  return path


def check_evals(
  owner: str, train_steps_per_epoch: int, evals_per_epoch: int, eval_steps: int
) -> None:
  """Checks an agent's per-epoch evaluation knobs, naming the culprit.

  Args:
    owner: the knobs' prefix in messages, e.g. 'value' or 'policy'.
    train_steps_per_epoch: updates per RL epoch.
    evals_per_epoch: rounds per epoch, each followed by an evaluation.
    eval_steps: batches per evaluation; 0 turns evaluation off.

  Raises:
    ValueError: a bad count, or rounds that do not divide the epoch.
  """
  check_count(f'{owner}_evals_per_epoch', evals_per_epoch, 1)
  check_count(f'{owner}_eval_steps', eval_steps, 0)
  if train_steps_per_epoch % evals_per_epoch:
    raise ValueError(
      f'{owner}_evals_per_epoch ({evals_per_epoch}) must divide the train '
      f'steps per epoch ({train_steps_per_epoch})'
    )


@contextlib.contextmanager
def removed_if_unused(output_dir: str | None) -> Iterator[None]:
  """Removes output_dir, if this block created it and fails before it
  holds a checkpoint or a record, so a run that failed at once leaves no
  empty folder behind. A folder that existed is never touched."""
  path = epath.Path(output_dir) if output_dir is not None else None
  new = path is not None and not path.exists()
  try:
    yield
  except BaseException:
    if new and path.is_dir() and not _holds_results(path):
      path.rmtree()
    raise


def _holds_results(path: epath.Path) -> bool:
  return any((path / name).exists() for name in _RESULTS)


# What makes an output_dir worth keeping (checkpoint, metrics.jsonl).
_RESULTS = ('checkpoint.pkl', 'metrics.jsonl')


def import_extra(module: str, what: str, package: str, extra: str) -> Any:
  """Imports an optional extra's `module`, or raises one line naming it.

  Raises:
    ValueError: `<what> needs <package>: pip install -e '.[<extra>]'`.
  """
  try:
    return importlib.import_module(module)
  except ImportError:
    raise ValueError(
      f"{what} needs {package}: pip install -e '.[{extra}]'"
    ) from None
