"""How a replay table picks its items: `Uniform` or `Prioritized` (Reverb's).

The replay table (`device_table.DeviceTable`) takes `Uniform()` or
`Prioritized(exponent)`; this module also checks a table's configuration
and gives the sampler's plain-value config for state_dicts.
"""

import dataclasses
import math
from typing import Any

from trax_rl import validation


@dataclasses.dataclass(frozen=True)
class Uniform:
  """Samples each item in the table with probability 1 / size."""


@dataclasses.dataclass(frozen=True)
class Prioritized:
  """Samples item i with probability w_i / sum_j w_j, w = priority**exponent.

  As in Reverb, a priority of exactly 0 gives weight 0 even when the exponent
  is 0, so such items are never drawn while any item has positive weight.
  When every weight is 0 the table samples uniformly over its items (with
  probability 1 / size), as Reverb does, instead of failing.

  Attributes:
    priority_exponent: alpha of prioritized replay (Schaul et al., 2016),
      >= 0; 0 makes every nonzero priority equally likely.
  """

  priority_exponent: float

  def __post_init__(self):
    if not (
      math.isfinite(self.priority_exponent) and self.priority_exponent >= 0
    ):
      raise ValueError(
        f'priority_exponent must be finite and >= 0, got '
        f'{self.priority_exponent}.'
      )


Sampler = Uniform | Prioritized


def check_table_config(
  max_size: int, sampler: Sampler | None, min_size_to_sample: int
) -> Sampler:
  """Checks what a table (host or device) is built from.

  Returns:
    The sampler, `Uniform()` for None.

  Raises:
    ValueError: naming the invalid argument.
  """
  validation.check_count('max_size', max_size, 1)
  sampler = Uniform() if sampler is None else sampler
  if not isinstance(sampler, Uniform | Prioritized):
    raise ValueError(
      'sampler must be samplers.Uniform() or samplers.Prioritized(exponent), '
      f'got {sampler!r}'
    )
  if not validation.is_int(min_size_to_sample) or not (
    1 <= min_size_to_sample <= max_size
  ):
    raise ValueError(
      f'min_size_to_sample must be an integer in [1, max_size={max_size}], '
      f'got {min_size_to_sample!r}'
    )
  return sampler


def config(sampler: Sampler) -> dict[str, Any]:
  """The sampler as plain values (a table state_dict's 'sampler')."""
  if isinstance(sampler, Prioritized):
    return {
      'name': 'prioritized',
      'priority_exponent': float(sampler.priority_exponent),
    }
  return {'name': 'uniform'}
