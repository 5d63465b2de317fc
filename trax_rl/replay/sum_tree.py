"""A sum tree over non-negative weights, stored in one numpy array.

The prioritized sampler of `table.Table` draws item `i` with probability
`w_i / sum(w)`. A sum tree answers that in O(log N): each internal node holds
the sum of its two children, so a uniform draw `u` in `[0, total)` finds its
leaf by walking from the root and going right whenever `u` is past the left
child's sum.

Layout: `capacity` is rounded up to a power of two `C`; node 1 is the root,
node `k` has children `2k` and `2k + 1`, and leaf `i` lives at node `C + i`
(node 0 is unused). All operations take arrays and walk the tree one level at
a time with numpy, so setting or searching many leaves costs `log2(C)` array
operations rather than one Python loop per leaf.

Every internal node is recomputed as `left + right` from its children (never
updated by adding a delta), so the sums carry no accumulated rounding error
and a tree is a pure function of its leaves: rebuilding it from the same
leaves gives bit-identical sums.
"""

import numpy as np


class SumTree:
  """Non-negative weights with O(log N) updates and prefix-sum search."""

  def __init__(self, capacity: int):
    """Creates a tree of `capacity` leaves, all zero.

    Args:
      capacity: number of leaves, >= 1.

    Raises:
      ValueError: if `capacity` < 1.
    """
    if int(capacity) < 1:
      raise ValueError(f'capacity must be >= 1, got {capacity}.')
    self._capacity = int(capacity)
    # Number of levels below the root; the leaf level holds 2**depth nodes.
    self._depth = max(0, (self._capacity - 1).bit_length())
    self._first_leaf = 1 << self._depth
    self._nodes = np.zeros(2 * self._first_leaf, np.float64)

  @property
  def capacity(self) -> int:
    """The number of leaves the tree was created with."""
    return self._capacity

  def total(self) -> float:
    """The sum of all leaves."""
    return float(self._nodes[1])

  def get(self, indices) -> np.ndarray:
    """Returns the leaf values at `indices` [N] as float64 [N]."""
    indices = self._check_indices(indices)
    return self._nodes[self._first_leaf + indices]

  def set(self, indices, values) -> None:
    """Sets leaves `indices` [N] to `values` [N] and updates their ancestors.

    If an index repeats, the last of its values is kept.

    Args:
      indices: int array [N] of leaf indices in [0, capacity).
      values: float array [N] (or a scalar), each finite and >= 0.

    Raises:
      ValueError: on an out-of-range index or a negative, NaN or infinite
        value.
    """
    indices = self._check_indices(indices)
    values = np.broadcast_to(np.asarray(values, np.float64), indices.shape)
    self._check_values(values)
    if indices.size == 0:
      return
    order = np.argsort(indices, kind='stable')
    nodes = self._first_leaf + indices[order]
    # After a stable sort, the last of each run of equal indices is the value
    # that was written last.
    last = np.append(nodes[1:] != nodes[:-1], True)
    nodes = nodes[last]
    self._nodes[nodes] = values[order][last]
    for _ in range(self._depth):
      nodes = nodes >> 1
      # Parents of sorted nodes are sorted: drop consecutive duplicates.
      nodes = nodes[np.append(True, nodes[1:] != nodes[:-1])]
      self._nodes[nodes] = self._nodes[2 * nodes] + self._nodes[2 * nodes + 1]

  def set_range(self, start: int, values) -> None:
    """Sets the contiguous leaves [start, start + N) to `values` [N].

    Same result as `set(arange(start, start + N), values)`, but each level
    is one slice operation, which makes small writes (a ring buffer's
    inserts) several times cheaper.

    Raises:
      ValueError: if the range leaves [0, capacity) or a value is negative,
        NaN or infinite.
    """
    values = np.asarray(values, np.float64).reshape(-1)
    start, stop = int(start), int(start) + len(values)
    if start < 0 or stop > self._capacity:
      raise ValueError(
        f'Leaves [{start}, {stop}) are outside [0, {self._capacity}).'
      )
    if start == stop:
      return
    self._check_values(values)
    nodes = self._nodes
    lo, hi = self._first_leaf + start, self._first_leaf + stop
    nodes[lo:hi] = values
    for _ in range(self._depth):
      lo, hi = lo >> 1, ((hi - 1) >> 1) + 1
      nodes[lo:hi] = nodes[2 * lo : 2 * hi : 2] + nodes[2 * lo + 1 : 2 * hi : 2]

  def set_all(self, values) -> None:
    """Replaces all leaves with `values` [capacity] and rebuilds every sum.

    Raises:
      ValueError: if `values` is not [capacity] or has a negative, NaN or
        infinite entry.
    """
    values = np.asarray(values, np.float64)
    if values.shape != (self._capacity,):
      raise ValueError(
        f'values must have shape ({self._capacity},), got {values.shape}.'
      )
    self._check_values(values)
    nodes = self._nodes
    nodes[:] = 0.0
    nodes[self._first_leaf : self._first_leaf + self._capacity] = values
    lo = self._first_leaf
    while lo > 1:
      nodes[lo // 2 : lo] = nodes[lo : 2 * lo : 2] + nodes[lo + 1 : 2 * lo : 2]
      lo //= 2

  def find_prefix_sum(self, targets) -> np.ndarray:
    """Finds, for each target, the leaf whose cumulative range contains it.

    Leaf `i` covers `[c_{i-1}, c_i)` where `c_i = w_0 + ... + w_i`; a target
    in that range returns `i`. Leaves of weight zero cover an empty range and
    are never returned while the total is positive. Targets below zero are
    treated as zero, and targets at or past the total return the last leaf of
    positive weight (this absorbs rounding in `u * total`).

    Args:
      targets: float array [N].

    Returns:
      int64 array [N] of leaf indices. With a zero total the result is
      meaningless: check `total()` first.
    """
    targets = np.maximum(np.asarray(targets, np.float64), 0.0)
    nodes = self._nodes
    index = np.ones(targets.shape, np.int64)
    for _ in range(self._depth):
      left = nodes[2 * index]
      # Only step into a right subtree with positive weight, so rounding can
      # never land a search on a zero-weight leaf.
      go_right = (targets >= left) & (nodes[2 * index + 1] > 0.0)
      targets = np.where(go_right, targets - left, targets)
      index = 2 * index + go_right
    return index - self._first_leaf

  def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
    """Draws `n` leaf indices [n], leaf `i` with probability `w_i / total`.

    Args:
      rng: the numpy Generator to draw from (`n` doubles are consumed).
      n: number of draws, with replacement.

    Returns:
      int64 array [n].

    Raises:
      ValueError: if the total weight is zero.
    """
    total = self.total()
    if total <= 0.0:
      raise ValueError('Cannot sample from a sum tree whose total is zero.')
    return self.find_prefix_sum(rng.random(n) * total)

  def _check_indices(self, indices) -> np.ndarray:
    indices = np.asarray(indices)
    if indices.size and not np.issubdtype(indices.dtype, np.integer):
      raise ValueError(f'indices must be integers, got {indices.dtype}.')
    indices = indices.astype(np.int64, copy=False)
    if indices.size and (indices.min() < 0 or indices.max() >= self._capacity):
      raise ValueError(
        f'indices must be in [0, {self._capacity}), got '
        f'[{indices.min()}, {indices.max()}].'
      )
    return indices

  @staticmethod
  def _check_values(values: np.ndarray) -> None:
    if values.size and not (np.all(np.isfinite(values)) and values.min() >= 0):
      raise ValueError('values must be finite and >= 0.')
