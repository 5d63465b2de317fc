"""The seed axis: k independent learners as one leading axis of a pytree.

`train_rl.n_seeds = k` trains k seeds of one config as one program: every
leaf of the learner (and of a source's state) gets a leading axis of k,
and the program's functions are vmapped over it. One seed keeps no axis
(the functions run as they are), so a single run compiles exactly its own
program; checkpoints always store the axis (`stack`/`unstack`).
"""

from collections.abc import Callable
from typing import Any

import jax
import numpy as np


def over_seeds(fn: Callable[..., Any], n_seeds: int, in_axes: Any = 0):
  """`fn` vmapped over the leading seed axis (as it is for one seed)."""
  if n_seeds == 1:
    return fn
  return jax.vmap(fn, in_axes=in_axes)


def stack(trees: list[Any]) -> Any:
  """k pytrees -> one with a leading axis of k (numpy, on the host).

  All-zero rows are left unwritten: `np.zeros` pages are mapped only when
  written, so the empty replays of k seeds cost no memory here.
  """

  def one(*leaves):
    first = np.asarray(leaves[0])
    out = np.zeros((len(leaves), *first.shape), first.dtype)
    for row, leaf in enumerate(leaves):
      leaf = np.asarray(leaf)
      if leaf.any():
        out[row] = leaf
    return out

  return jax.tree.map(one, *trees)


def with_axis(tree: Any, n_seeds: int) -> Any:
  """The tree with a leading seed axis (added for one seed), as numpy."""
  tree = jax.device_get(tree)
  if n_seeds == 1:
    return jax.tree.map(lambda x: np.asarray(x)[None], tree)
  return jax.tree.map(np.asarray, tree)


def axis_shapes(tree: Any, n_seeds: int) -> Any:
  """`with_axis(tree)`'s shapes and dtypes, without reading any array."""

  def one(x):
    shape = tuple(np.shape(x))
    return jax.ShapeDtypeStruct(
      (1, *shape) if n_seeds == 1 else shape,
      np.asarray(x).dtype if not hasattr(x, 'dtype') else x.dtype,
    )

  return jax.tree.map(one, tree)


def without_axis(tree: Any, n_seeds: int) -> Any:
  """`with_axis` undone: one seed's tree loses the axis."""
  if n_seeds == 1:
    return jax.tree.map(lambda x: np.asarray(x)[0], tree)
  return tree


def row(tree: Any, index: int, n_seeds: int) -> Any:
  """Seed `index`'s tree (the tree itself for one seed)."""
  if n_seeds == 1:
    return tree
  return jax.tree.map(lambda x: x[index], tree)


def sharding(n_seeds: int) -> jax.sharding.Sharding | None:
  """Splits the seed axis over the local devices when they divide it.

  One seed, or a seed count the devices do not divide, runs on the
  default device.
  """
  devices = jax.local_devices()
  if n_seeds == 1 or len(devices) == 1 or n_seeds % len(devices):
    return None
  mesh = jax.sharding.Mesh(np.array(devices), ('seed',))
  return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('seed'))


def place(tree: Any, placement: jax.sharding.Sharding | None) -> Any:
  """`tree` on the seed axis' devices, in buffers nobody else holds.

  Sources donate the learner to their compiled calls, so a buffer shared
  with the caller would be deleted under it. Weakly typed leaves (gymnax
  resets set `time = 0`) become strong, as a checkpoint restores them: a
  fresh run and a resumed one then compile the same program, and the
  resumed run loads it from the compilation cache.
  """
  tree = jax.tree.map(_strong, tree)
  return jax.device_put(tree, placement, may_alias=False)


def _strong(x: Any) -> Any:
  if isinstance(x, jax.Array) and x.weak_type:
    return np.asarray(x)
  return x


def constrain(tree: Any, placement: jax.sharding.Sharding | None) -> Any:
  """Inside a compiled call: keep `tree` split along the seed axis.

  A program compiled for a state split over devices refuses a leaf that
  XLA chose to return replicated; this fixes the output's layout.
  """
  if placement is None:
    return tree
  return jax.lax.with_sharding_constraint(tree, placement)


def scalar(x: Any) -> float | int:
  """One seed's record value as a Python number (int for integer counters)."""
  x = np.asarray(x)
  return int(x) if np.issubdtype(x.dtype, np.integer) else float(x)
