"""Gin bindings checked against the annotations of the knobs they bind.

gin hands a binding's value to the configurable as it is, so a wrong type
(`MLP.layer_widths = 64`, `constant_lr.value = None`) only fails deep
inside training, in a message that names no binding. `mismatch` compares
a value with a parameter's annotation before anything runs. It is
deliberately partial: references (`@MLP`), macros and annotations it does
not understand pass, so it only refuses what is certainly wrong.
"""

import collections.abc
import inspect
import types
import typing
from typing import Any

_UNKNOWN = None  # `_matches` could not tell.


def parameter_of(fn: Any, param: str) -> tuple[Any, inspect.Parameter] | None:
  """(the callable declaring it, the parameter) for `param` of a
  configurable: a class's first `__init__` along its MRO that names it (the
  agents pass `**kwargs` up to their bases); None if none does."""
  targets = inspect.getmro(fn) if inspect.isclass(fn) else (fn,)
  for target in targets:
    init = target.__init__ if inspect.isclass(fn) else target
    try:
      found = inspect.signature(init).parameters.get(param)
    except (TypeError, ValueError):
      continue
    if found is not None and found.kind is not found.VAR_KEYWORD:
      return init, found
  return None


def annotation_of(fn: Any, param: str) -> Any:
  """The annotation of `param` of a configurable, or `Parameter.empty`."""
  found = parameter_of(fn, param)
  if found is None:
    return inspect.Parameter.empty
  try:
    return typing.get_type_hints(found[0]).get(param, inspect.Parameter.empty)
  except Exception:  # noqa: BLE001 - an unresolvable forward reference.
    return inspect.Parameter.empty


def mismatch(value: Any, annotation: Any) -> str | None:
  """None if `value` may bind a parameter of `annotation`, else the type
  it takes, as text."""
  if _matches(value, annotation) is False:
    return _describe(annotation)
  return None


def hint(value: Any, annotation: Any) -> str:
  """What to write instead, where it is plain: `(64,)` for a sequence."""
  origin = typing.get_origin(annotation)
  arms = (
    typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType)
    else (annotation,)
  )
  for arm in arms:
    arm_origin = typing.get_origin(arm) or arm
    if arm_origin in (tuple, list, collections.abc.Sequence) and isinstance(
      value, (int, float, str)
    ):
      return f'; for one element write ({value!r},)'
  return ''


def _matches(value: Any, annotation: Any) -> bool | None:
  if annotation in (inspect.Parameter.empty, Any):
    return True
  if type(value).__module__.startswith('gin'):  # @reference, %macro.
    return True
  if annotation is None or annotation is type(None):
    return value is None
  origin = typing.get_origin(annotation)
  args = typing.get_args(annotation)
  if origin in (typing.Union, types.UnionType):
    found = [_matches(value, arm) for arm in args]
    if any(found):
      return True
    return _UNKNOWN if _UNKNOWN in found else False
  if origin is typing.Literal:
    return value in args
  if annotation is bool:
    return isinstance(value, bool)
  if annotation is int:
    return isinstance(value, int) and not isinstance(value, bool)
  if annotation is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if annotation is str:
    return isinstance(value, str)
  if value is None:
    return False if _is_known(annotation, origin) else _UNKNOWN
  if (
    origin is collections.abc.Callable or annotation is collections.abc.Callable
  ):
    return callable(value)
  if origin in (tuple, list, collections.abc.Sequence) or annotation in (
    tuple,
    list,
    collections.abc.Sequence,
  ):
    return _sequence_matches(value, args, fixed=origin is tuple)
  if origin in (dict, collections.abc.Mapping) or annotation in (
    dict,
    collections.abc.Mapping,
  ):
    return isinstance(value, collections.abc.Mapping)
  return _UNKNOWN


def _is_known(annotation: Any, origin: Any) -> bool:
  """Whether `annotation` is a form `_matches` checks (None fails it)."""
  plain = (bool, int, float, str, tuple, list, dict)
  abstract = (
    collections.abc.Callable,
    collections.abc.Sequence,
    collections.abc.Mapping,
  )
  return annotation in plain + abstract or origin in plain + abstract


def _sequence_matches(value: Any, args: tuple, fixed: bool) -> bool | None:
  if not isinstance(value, (tuple, list)):
    return False
  if not args:
    return True
  if fixed and not (len(args) == 2 and args[1] is Ellipsis):
    if len(args) != len(value):
      return False
    found = [_matches(v, a) for v, a in zip(value, args, strict=True)]
  else:
    found = [_matches(v, args[0]) for v in value]
  if all(found):
    return True
  return _UNKNOWN if _UNKNOWN in found else False


def _describe(annotation: Any) -> str:
  if isinstance(annotation, type) and not typing.get_args(annotation):
    return annotation.__name__
  text = str(annotation)
  for prefix in ('collections.abc.', 'typing.', 'builtins.'):
    text = text.replace(prefix, '')
  return text.replace('NoneType', 'None')
