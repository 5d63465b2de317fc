"""Reverb's rate limiters (`MinSize`, `SampleToInsertRatio`): their bounds.

A `RateLimiter` holds only its configuration, validated by `make`; the
replay table (`device_table.DeviceTable`) checks its counters against it
as traced booleans, and where Reverb would block, its callers wait.
"""

import dataclasses
import math
from typing import Any


@dataclasses.dataclass(frozen=True)
class RateLimiter:
  """Keeps `error = inserts * spi - samples` within [min_diff, max_diff].

  Below `min_size_to_sample` items sampling is blocked and inserts are free
  (Reverb's stage 1). Build it with `make`, which validates the arguments.

  Attributes:
    min_size_to_sample: sampling is blocked while the table holds fewer.
    samples_per_insert: None for `MinSize`, else the configured ratio.
    spi: the ratio used in the error (1 for `MinSize`, whose bounds are
      infinite).
    min_diff: sampling is blocked below it.
    max_diff: inserting is blocked above it.
  """

  min_size_to_sample: int
  samples_per_insert: float | None
  spi: float
  min_diff: float
  max_diff: float

  def config(self) -> dict[str, Any]:
    """The configuration as plain values (for state_dicts)."""
    return {
      'min_size_to_sample': self.min_size_to_sample,
      'samples_per_insert': self.samples_per_insert,
      'min_diff': self.min_diff,
      'max_diff': self.max_diff,
    }


def make(
  min_size_to_sample: int,
  samples_per_insert: float | None = None,
  error_buffer: float | tuple[float, float] | None = None,
) -> RateLimiter:
  """Builds the limiter of a table (see `DeviceTable` for the arguments).

  Args:
    min_size_to_sample: sampling is blocked while the table holds fewer
      items (already validated by the table).
    samples_per_insert: None for `MinSize`, else a finite ratio > 0.
    error_buffer: with samples_per_insert, a number b >= max(1,
      samples_per_insert) for [o - b, o + b] around o = samples_per_insert
      * min_size_to_sample, a (min_diff, max_diff) pair, or None for
      max(0.1 * o, 2 * max(1, samples_per_insert)).

  Returns:
    The RateLimiter.

  Raises:
    ValueError: naming the invalid argument.
  """
  ratio = None if samples_per_insert is None else float(samples_per_insert)
  spi, min_diff, max_diff = _bounds(
    samples_per_insert, min_size_to_sample, error_buffer
  )
  return RateLimiter(min_size_to_sample, ratio, spi, min_diff, max_diff)


def _bounds(samples_per_insert, min_size_to_sample, error_buffer):
  """Returns (samples_per_insert, min_diff, max_diff) of the rate limiter."""
  if samples_per_insert is None:
    if error_buffer is not None:
      raise ValueError('error_buffer needs samples_per_insert to be set.')
    return 1.0, -math.inf, math.inf  # Reverb's MinSize.
  spi = float(samples_per_insert)
  if not (math.isfinite(spi) and spi > 0):
    raise ValueError(
      f'samples_per_insert must be finite and > 0, got {samples_per_insert}.'
    )
  offset = spi * min_size_to_sample
  if error_buffer is None:
    error_buffer = max(0.1 * offset, 2.0 * max(1.0, spi))
  if isinstance(error_buffer, tuple | list):
    min_diff, max_diff = (float(x) for x in error_buffer)
    if max_diff - min_diff < 2.0 * max(1.0, spi):
      raise ValueError(
        'error_buffer (min_diff, max_diff) must span >= 2 * max(1, '
        f'samples_per_insert) = {2 * max(1.0, spi)}, got {error_buffer}.'
      )
    if min_diff > offset:
      raise ValueError(
        f'error_buffer min_diff {min_diff} exceeds samples_per_insert * '
        f'min_size_to_sample = {offset}: sampling could never start.'
      )
    return spi, min_diff, max_diff
  buffer = float(error_buffer)
  if not buffer >= max(1.0, spi):
    raise ValueError(
      f'error_buffer must be >= max(1, samples_per_insert) = '
      f'{max(1.0, spi)}, got {error_buffer}: a smaller buffer lets inserts '
      f'and samples block each other forever.'
    )
  return spi, offset - buffer, offset + buffer


def limiter_bounds(
  samples_per_insert: float,
  min_size: int,
  tolerance: float,
  per_call: int,
  insert_chunk: int,
) -> tuple[float, float]:
  """The samples-per-insert limiter's (min_diff, max_diff) window.

  Learning runs after each inserted chunk until the limiter stops it, so
  the window lets one chunk and one learner call through (wider still
  where `tolerance * samples_per_insert * min_size` is, Acme's).

  Args:
    samples_per_insert: the target ratio.
    min_size: items before the first sample.
    tolerance: the window's half-width, as a fraction of the ratio's
      offset `samples_per_insert * min_size`.
    per_call: items one learner call samples.
    insert_chunk: items inserted between two learning phases.
  """
  offset = samples_per_insert * min_size
  slack = tolerance * offset
  return (
    offset - max(per_call, slack),
    offset + max(insert_chunk * samples_per_insert + per_call, slack),
  )
