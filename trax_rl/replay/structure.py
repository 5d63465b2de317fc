"""A pytree's structure as plain values, and back, for table checkpoints.

A replay table's state_dict must hold only numpy arrays and plain values,
so the structure of its items (a `PyTreeDef`) is written as nested dicts
and lists (`describe`) and rebuilt on load (`treedef`). Items may be built
from dicts (str or int keys), lists, tuples, NamedTuples and None.
"""

import sys
from typing import Any

import jax

LEAF = 'leaf'  # Marks a leaf in a structure description.


class _Leaf:
  """Stands for an array leaf while an item structure is walked."""


def describe(treedef: Any) -> Any:
  """Describes an item structure with plain values.

  Args:
    treedef: the items' `PyTreeDef`.

  Returns:
    Nested dicts, lists, strings and None.

  Raises:
    ValueError: if the structure holds a container other than dicts with
      str or int keys, lists, tuples, NamedTuples and None.
  """
  leaves = [_Leaf() for _ in range(treedef.num_leaves)]
  return _describe_node(jax.tree_util.tree_unflatten(treedef, leaves))


def treedef(description: Any) -> Any:
  """Inverts `describe`: the `PyTreeDef` of a description.

  Raises:
    ValueError: on an unknown node type, or a NamedTuple class whose module
      is not imported.
  """
  return jax.tree_util.tree_structure(_build(description))


def _describe_node(node) -> Any:
  if isinstance(node, _Leaf):
    return LEAF
  if node is None:
    return None
  if isinstance(node, tuple) and hasattr(type(node), '_fields'):
    cls = type(node)
    return {
      'type': 'namedtuple',
      'class': f'{cls.__module__}:{cls.__qualname__}',
      'children': [_describe_node(child) for child in node],
    }
  if type(node) in (tuple, list):
    return {
      'type': type(node).__name__,
      'children': [_describe_node(child) for child in node],
    }
  if type(node) is dict and all(isinstance(k, str | int) for k in node):
    return {
      'type': 'dict',
      'keys': list(node),
      'children': [_describe_node(child) for child in node.values()],
    }
  raise ValueError(
    f'Cannot record an item node of type {type(node).__name__} in a '
    f'state_dict; build items from dicts, lists, tuples and NamedTuples.'
  )


def _build(description) -> Any:
  """Inverts `describe`: a pytree with `_Leaf` leaves."""
  if description == LEAF:
    return _Leaf()
  if description is None:
    return None
  children = [_build(child) for child in description['children']]
  kind = description['type']
  if kind == 'tuple':
    return tuple(children)
  if kind == 'list':
    return children
  if kind == 'dict':
    return dict(zip(description['keys'], children))
  if kind == 'namedtuple':
    return _namedtuple_class(description['class'])(*children)
  raise ValueError(f'Unknown node type {kind!r} in a table state structure.')


def _namedtuple_class(name: str) -> type:
  """Finds a NamedTuple class among the modules already imported.

  Modules are looked up, never imported, so loading a state runs no code.
  """
  module_name, _, qualname = name.partition(':')
  obj = sys.modules.get(module_name)
  for part in qualname.split('.'):
    obj = getattr(obj, part, None)
  if not (isinstance(obj, type) and hasattr(obj, '_fields')):
    raise ValueError(
      f'Table items are {name} NamedTuples: import {module_name} before '
      f'loading the table state.'
    )
  return obj
