"""Item storage of a replay table: one preallocated ring array per leaf."""

from typing import Any

import jax
import numpy as np

from trax_rl.replay import structure


class ItemStorage:
  """The items of a `Table`, stored leaf by leaf in `[max_size, ...]` arrays.

  The first item fixes the pytree structure and each leaf's shape and
  dtype; later items must match it (their dtypes are cast within the same
  kind).
  """

  def __init__(self, max_size: int):
    """Creates storage for `max_size` items; arrays come with the first."""
    self._max_size = max_size
    self._treedef = None
    self._leaf_names: list[str] = []
    self._arrays: list[np.ndarray] = []

  @property
  def arrays(self) -> list[np.ndarray]:
    """The per-leaf `[max_size, ...]` arrays (empty before the first item)."""
    return self._arrays

  def prepare(self, leaves: list[np.ndarray], treedef: Any) -> None:
    """Allocates for the first items; checks later ones against them.

    Args:
      leaves: the items' leaves, each `[N, ...]`.
      treedef: their pytree structure.

    Raises:
      ValueError: the items differ from the stored ones in structure, leaf
        shape or dtype kind.
    """
    if self._treedef is None:
      self._allocate(treedef, leaves)
      return
    if treedef != self._treedef:
      raise ValueError(
        f'Item structure {treedef} differs from the stored {self._treedef}.'
      )
    for name, leaf, store in zip(self._leaf_names, leaves, self._arrays):
      if leaf.shape[1:] != store.shape[1:] or not np.can_cast(
        leaf.dtype, store.dtype, 'same_kind'
      ):
        raise ValueError(
          f'Item leaf {name or "<root>"} has shape {leaf.shape[1:]} and dtype '
          f'{leaf.dtype}; the table stores {store.shape[1:]} {store.dtype}.'
        )

  def gather(self, slots: np.ndarray) -> Any:
    """The items in `slots` as one pytree with leaves `[len(slots), ...]`."""
    return jax.tree_util.tree_unflatten(
      self._treedef, [store[slots] for store in self._arrays]
    )

  def state_dict(self, size: int) -> dict[str, Any]:
    """Copies of the first `size` slots and the structure, as plain values.

    Raises:
      ValueError: the item structure holds a container `structure` cannot
        describe.
    """
    return {
      'structure': (
        None if self._treedef is None else structure.describe(self._treedef)
      ),
      'leaves': [store[:size].copy() for store in self._arrays],
    }

  @staticmethod
  def check_state(state: dict[str, Any]) -> Any:
    """The treedef of a `state_dict`, checked against its leaves.

    Raises:
      ValueError: the structure does not match the leaves.
    """
    if state['structure'] is None:
      return None
    treedef = structure.treedef(state['structure'])
    if treedef.num_leaves != len(state['leaves']):
      raise ValueError('Table state structure does not match its leaves.')
    return treedef

  def load_state_dict(self, state: dict[str, Any], size: int) -> None:
    """Restores `state_dict(size)` (check it first with `check_state`)."""
    treedef = self.check_state(state)
    self._treedef, self._arrays, self._leaf_names = None, [], []
    if treedef is not None:
      self._allocate(treedef, state['leaves'])
      for store, leaf in zip(self._arrays, state['leaves']):
        store[:size] = leaf

  def _allocate(self, treedef, leaves) -> None:
    self._treedef = treedef
    self._arrays = [
      np.zeros((self._max_size, *np.shape(leaf)[1:]), np.asarray(leaf).dtype)
      for leaf in leaves
    ]
    paths = jax.tree_util.tree_flatten_with_path(
      jax.tree_util.tree_unflatten(treedef, range(len(leaves)))
    )[0]
    self._leaf_names = [jax.tree_util.keystr(path) for path, _ in paths]
