"""`trax-rl train`'s progress: a bar on a terminal, log lines elsewhere.

On a terminal with a width, a tqdm bar whose fields fit 80 columns (env
steps first, then the training return, the greedy evals, episodes). Where
stderr is not a terminal or reports no width (`script`, `docker -t`
without a size, CI logs, a file), one plain line at most every `interval`
seconds and at the last epoch, so logs stay readable.

`tick(epoch)` moves it inside a compiled call of several epochs (the
device source calls it from the program as each epoch ends); `update(record)`
after each epoch's record adds the values.
"""

import math
import shutil
import sys
import time
from typing import Any, TextIO


def _fields(record: dict[str, Any]) -> list[tuple[str, str]]:
  """(name, value) pairs shown, most useful first."""
  out = [('steps', str(int(record.get('n_interactions', 0))))]
  mean = record.get('episode_return_mean', math.nan)
  out.append(
    ('return', '-' if mean is None or math.isnan(mean) else f'{mean:.1f}')
  )
  for k, v in record.items():
    if k.startswith('eval_return') and v is not None:
      out.append((k.replace('eval_return_', 'eval_'), f'{v:.1f}'))
  if 'n_episodes' in record:
    out.append(('episodes', str(int(record['n_episodes']))))
  return out


def _compact(fields: list[tuple[str, str]]) -> str:
  """The bar's values in about 40 columns: 123k steps, one eval as `eval`."""
  evals = [k for k, _ in fields if k.startswith('eval_')]
  out = []
  for k, v in fields:
    if k == 'steps':
      n = int(v)
      v = (
        f'{n / 1e6:.2f}M' if n >= 1e6 else f'{n / 1e3:.0f}k' if n >= 1e4 else v
      )
    k = {'return': 'ret', 'episodes': 'ep'}.get(k, k)
    out.append(f'{"eval" if len(evals) == 1 and k == evals[0] else k} {v}')
  return ' '.join(out)


def is_terminal(stream: TextIO) -> bool:
  """Whether `stream` is a terminal that reports a width."""
  try:
    if not stream.isatty():
      return False
    return shutil.get_terminal_size(fallback=(0, 0)).columns > 0
  except (AttributeError, ValueError, OSError):
    return False


class Progress:
  """Progress of a run of `total` epochs, started at `start` (time.time()).

  Args:
    total: the run's epochs (all of them, a resume's earlier ones too).
    start: when the command started (compiles count in the rate).
    stream: where to write; None: the current sys.stderr.
    interval: seconds between log lines where stream is no terminal.
    bar: force the bar (True) or the lines (False); None: decide by stream.
  """

  def __init__(
    self,
    total: int,
    start: float,
    stream: TextIO | None = None,
    interval: float = 10.0,
    bar: bool | None = None,
  ):
    self._total = total
    self._start = start
    self._stream = stream if stream is not None else sys.stderr
    self._interval = interval
    self._bar_wanted = is_terminal(self._stream) if bar is None else bar
    self._bar = None
    self._first = None  # The epoch the run started from.
    self._last_line = -math.inf
    self._fields: list[tuple[str, str]] = []

  def _open_bar(self, epoch: int) -> None:
    import tqdm  # noqa: PLC0415 (only for a terminal)

    # A compiled call of several epochs reports them all at once, so the
    # rate is this run's average since it started (compiles included).
    self._bar = tqdm.tqdm(
      total=self._total,
      initial=epoch,
      unit='epoch',
      file=self._stream,
      dynamic_ncols=True,
      smoothing=0,
      bar_format='{percentage:3.0f}%|{bar:6}| {n_fmt}/{total_fmt} '
      '[{elapsed}<{remaining}] {desc}',
    )
    self._bar.start_t = self._start

  def tick(self, epoch: int) -> None:
    """`epoch` epochs are done (the record may not be there yet)."""
    if self._first is None:
      self._first = epoch - 1
    if self._bar_wanted:
      if self._bar is None:
        self._open_bar(epoch - 1)
      self._bar.update(epoch - self._bar.n)
      self._bar.refresh()
    else:
      self._line(epoch, with_values=False)

  def update(self, record: dict[str, Any]) -> None:
    """After an epoch's record: shows its values."""
    self._fields = _fields(record)
    if self._bar_wanted:
      self.tick(record['epoch'])
      self._bar.set_description_str(_compact(self._fields), refresh=True)
    else:
      self._line(record['epoch'], force=record['epoch'] >= self._total)

  def _line(
    self, epoch: int, force: bool = False, with_values: bool = True
  ) -> None:
    now = time.time()
    if self._first is None:
      self._first = epoch - 1
    if not force and now - self._last_line < self._interval:
      return
    self._last_line = now
    elapsed = now - self._start
    rate = (epoch - self._first) / max(elapsed, 1e-9)
    values = (
      ' '.join(f'{k}={v}' for k, v in self._fields) if with_values else ''
    )
    print(
      f'trax-rl: epoch {epoch}/{self._total} {elapsed:.0f}s '
      f'{rate:.2f} epochs/s {values}'.rstrip(),
      file=self._stream,
      flush=True,
    )

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()
      self._bar = None
