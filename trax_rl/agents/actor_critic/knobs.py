"""The actor-critic family's knob names: old Trax names and gin values."""

from typing import Any

# Old knob names (Trax's joint agents') -> the one name; resolved here only.
ALIASES = {
  'normalize_advantages': 'advantage_normalization',
  'supervised_evals_per_epoch': 'value_evals_per_epoch',
  'supervised_eval_steps': 'value_eval_steps',
}


def resolve_aliases(kwargs: dict[str, Any]) -> dict[str, Any]:
  """kwargs with every old knob name (`ALIASES`) replaced by its new name.

  Raises:
    ValueError: both an old name and its new name are given.
  """
  out = dict(kwargs)
  for old, new in ALIASES.items():
    if old in out:
      if new in out:
        raise ValueError(f'{old} is an alias of {new}: give only {new}')
      out[new] = out.pop(old)
  return out


def as_thresholds(thresholds) -> tuple | None:
  """Thresholds from gin (lists) as a tuple of tuples, or None."""
  if not thresholds:
    return None
  return tuple(tuple(t) for t in thresholds)
