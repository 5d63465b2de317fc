"""A replay table with DeepMind Reverb's semantics, in numpy.

dm-reverb needs TensorFlow and numpy < 2, so it cannot live beside current
JAX; this is a single-process stand-in with the same contract:

- every inserted item gets a unique, increasing integer key;
- items leave in FIFO order once `max_size` is reached (a ring buffer);
- `sample(n)` draws with replacement, uniformly or by priority, and returns
  each draw's key and probability (for importance weights);
- `mutate_priorities` updates priorities by key, ignoring removed keys;
- a rate limiter (Reverb's `MinSize` / `SampleToInsertRatio`) gates inserts
  and samples. Nothing here runs concurrently, so where Reverb would block,
  `can_insert` / `can_sample` report it and `insert` / `sample` raise
  `RateLimitedError`.

Items are pytrees of numpy arrays or scalars with the same structure, leaf
shapes and dtype kinds every time. Storage is one preallocated array
[max_size, ...] per leaf, created on the first insert; item `key` lives in
slot `key % max_size` for as long as that slot still holds it.

The samplers (`samplers.Uniform`, `samplers.Prioritized`) live in
`samplers`, the rate limiter in `rate_limiter`, the item arrays in
`storage`, and the item structure's plain-value description for state_dicts
in `structure`.
"""

from typing import Any, NamedTuple

import jax
import numpy as np

from trax_rl import validation
from trax_rl.replay import rate_limiter, samplers, storage, sum_tree

_STATE_VERSION = 1


class RateLimitedError(RuntimeError):
  """An insert or sample that Reverb's rate limiter would have blocked."""


class Sample(NamedTuple):
  """What `Table.sample(n)` returns."""

  keys: np.ndarray  # [n] int64 keys of the drawn items
  probability: np.ndarray  # [n] float64 probability of each draw
  table_size: int  # number of items in the table when sampled
  data: Any  # the item pytree with a leading axis [n, ...]


class Table:
  """A Reverb-like replay table: keys, priorities, FIFO removal, rate limit."""

  def __init__(
    self,
    max_size: int,
    sampler: samplers.Uniform | samplers.Prioritized | None = None,
    min_size_to_sample: int = 1,
    samples_per_insert: float | None = None,
    error_buffer: float | tuple[float, float] | None = None,
    seed: int = 0,
  ):
    """Creates an empty table.

    Args:
      max_size: capacity, >= 1; inserting into a full table removes the
        oldest item.
      sampler: `Uniform()` (the default, also for None) or
        `Prioritized(priority_exponent)`.
      min_size_to_sample: sampling is blocked while the table holds fewer
        items; in [1, max_size].
      samples_per_insert: None for Reverb's `MinSize` limiter (only
        `min_size_to_sample` gates sampling; inserts never block). A number
        > 0 gives `SampleToInsertRatio`: the average number of times each
        item is sampled, enforced by keeping
        `error = num_inserts * samples_per_insert - num_samples` within
        [min_diff, max_diff] once the table holds `min_size_to_sample` items.
      error_buffer: with `samples_per_insert`, the allowed deviation. A number
        b gives [o - b, o + b] around o = samples_per_insert *
        min_size_to_sample (Reverb's convention) and must be
        >= max(1, samples_per_insert), else inserts and samples can block
        each other forever; a pair is (min_diff, max_diff) used as is. None
        picks max(0.1 * o, 2 * max(1, samples_per_insert)): Acme's 10%
        tolerance on the ratio, floored so that a sample always fits between
        two inserts.
      seed: seed of the numpy Generator that draws samples.

    Raises:
      ValueError: naming the invalid argument.
    """
    sampler = samplers.check_table_config(max_size, sampler, min_size_to_sample)
    self._max_size = int(max_size)
    self._sampler = sampler
    self._limiter = rate_limiter.make(
      int(min_size_to_sample), samples_per_insert, error_buffer
    )
    self._rng = np.random.default_rng(seed)
    self._num_inserts = 0
    self._num_samples = 0
    self._keys = np.full(self._max_size, -1, np.int64)  # -1: empty slot.
    self._priorities = np.zeros(self._max_size, np.float64)
    self._tree = (
      sum_tree.SumTree(self._max_size)
      if isinstance(sampler, samplers.Prioritized)
      else None
    )
    self._storage = storage.ItemStorage(self._max_size)

  @property
  def max_size(self) -> int:
    return self._max_size

  @property
  def sampler(self) -> samplers.Uniform | samplers.Prioritized:
    return self._sampler

  @property
  def size(self) -> int:
    """The number of items in the table."""
    return min(self._num_inserts, self._max_size)

  def __len__(self) -> int:
    return self.size

  @property
  def num_inserts(self) -> int:
    """Items inserted since creation (the next key)."""
    return self._num_inserts

  @property
  def num_samples(self) -> int:
    """Items sampled since creation (`sample(n)` counts n)."""
    return self._num_samples

  @property
  def limiter(self) -> rate_limiter.RateLimiter:
    """The rate limiter (a pure check of `counts`)."""
    return self._limiter

  @property
  def counts(self) -> rate_limiter.Counts:
    """(size, inserts, samples), as the rate limiter reads them."""
    return rate_limiter.Counts(self.size, self._num_inserts, self._num_samples)

  def can_insert(self, n: int = 1) -> bool:
    """Whether inserting `n` items now (all at once) is allowed."""
    validation.check_count('n', n, 1)
    return self._limiter.can_insert(n, self.counts)

  def can_sample(self, n: int = 1) -> bool:
    """Whether sampling `n` items now is allowed."""
    validation.check_count('n', n, 1)
    return self._limiter.can_sample(n, self.counts)

  def insert(self, item: Any, priority: float = 1.0) -> int:
    """Inserts one item and returns its key.

    Args:
      item: a pytree of arrays or scalars, structured like every other item.
        The first insert fixes each leaf's shape and dtype (a Python float
        becomes float64); later items are cast to it within the same kind.
      priority: finite and >= 0.

    Returns:
      The item's key.

    Raises:
      ValueError: on a bad priority or an item unlike the earlier ones.
      RateLimitedError: if `can_insert(1)` is False.
    """
    leaves, treedef = jax.tree_util.tree_flatten(item)
    leaves = [np.asarray(leaf)[None] for leaf in leaves]
    return int(self._insert(leaves, treedef, [priority])[0])

  def insert_batch(
    self, items: Any, priorities: Any = 1.0, *, enforce_limit: bool = True
  ) -> np.ndarray:
    """Inserts N items at once, in order; equivalent to N `insert` calls.

    The rate limit is checked for the whole batch: either all N items go in
    or (when `can_insert(N)` is False) none do.

    Args:
      items: the item pytree with a leading axis [N, ...] on every leaf.
      priorities: [N] or a scalar, each finite and >= 0.
      enforce_limit: False: insert even where the rate limiter would block
        (for a caller that limits several tables as one, `ReplayValueAgent`
        across hosts); the counts still go up.

    Returns:
      The keys [N], int64. With N > max_size only the last max_size items
      stay in the table, as if inserted one by one.

    Raises:
      ValueError: on bad priorities, leaves without a common leading axis, or
        items unlike the earlier ones.
      RateLimitedError: if `can_insert(N)` is False.
    """
    leaves, treedef = jax.tree_util.tree_flatten(items)
    return self._insert(
      [np.asarray(x) for x in leaves], treedef, priorities, enforce_limit
    )

  def sample(self, n: int) -> Sample:
    """Draws `n` items with replacement.

    Args:
      n: number of draws, >= 1; each counts as one sample for the limiter.

    Returns:
      `Sample(keys [n], probability [n], table_size, data [n, ...])`, where
      probability is w_key / sum(w) (Prioritized) or 1 / table_size
      (Uniform, or Prioritized when every weight is 0).

    Raises:
      RateLimitedError: if `can_sample(n)` is False.
    """
    if not self.can_sample(n):
      raise RateLimitedError(
        self._limiter.sample_blocked_message(n, self.counts)
      )
    n, size = int(n), self.size
    # Both branches draw exactly n doubles so the RNG stream does not depend
    # on the priorities.
    u = self._rng.random(n)
    total = self._tree.total() if self._tree is not None else 0.0
    if total > 0.0:
      slots = self._tree.find_prefix_sum(u * total)
      probability = self._tree.get(slots) / total
    else:
      # Slots [0, size) are filled: the ring starts at slot 0.
      slots = np.minimum((u * size).astype(np.int64), size - 1)
      probability = np.full(n, 1.0 / size)
    self._num_samples += n
    return Sample(
      self._keys[slots], probability, size, self._storage.gather(slots)
    )

  def mutate_priorities(self, keys: Any, priorities: Any) -> None:
    """Sets the priorities of the items with `keys`.

    Keys no longer in the table (removed by FIFO) or never issued are
    ignored. If a key repeats, its last priority wins.

    Args:
      keys: int [K].
      priorities: [K] or a scalar, each finite and >= 0.

    Raises:
      ValueError: on a negative, NaN or infinite priority, or mismatched
        shapes.
    """
    keys = np.asarray(keys).astype(np.int64).reshape(-1)
    priorities = samplers.check_priorities(priorities, len(keys))
    slots = keys % self._max_size
    present = (keys >= 0) & (self._keys[slots] == keys)
    slots, priorities = slots[present], priorities[present]
    # Keep the last write per slot, whatever numpy does with duplicates.
    _, first_in_reversed = np.unique(slots[::-1], return_index=True)
    last = len(slots) - 1 - first_in_reversed
    slots, priorities = slots[last], priorities[last]
    self._priorities[slots] = priorities
    if self._tree is not None:
      self._tree.set(slots, self._weights(priorities))

  def state_dict(self) -> dict[str, Any]:
    """Returns the table's full state as numpy arrays and plain values.

    The arrays are copies. Items must be built from dicts (str or int keys),
    lists, tuples, NamedTuples and None for their structure to be recorded.

    Raises:
      ValueError: if the item structure holds another container type.
    """
    size = self.size
    return {
      'version': _STATE_VERSION,
      'max_size': self._max_size,
      'sampler': samplers.config(self._sampler),
      'rate_limiter': self._limiter.config(),
      'num_inserts': self._num_inserts,
      'num_samples': self._num_samples,
      'keys': self._keys[:size].copy(),
      'priorities': self._priorities[:size].copy(),
      # Stored, not recomputed on load, so the sums are bit-identical.
      'weights': (
        None if self._tree is None else self._tree.get(np.arange(size))
      ),
      **self._storage.state_dict(size),
      'rng_state': self._rng.bit_generator.state,  # A fresh dict.
    }

  def load_state_dict(self, state: dict[str, Any]) -> None:
    """Restores a `state_dict()` taken from a table configured like this one.

    Afterwards the table holds the same items, keys, priorities and counters
    and continues the same random stream.

    Raises:
      ValueError: on a version or configuration mismatch, an inconsistent
        state, or a NamedTuple item class whose module is not imported.
    """
    if state.get('version') != _STATE_VERSION:
      raise ValueError(
        f'Unsupported table state version {state.get("version")!r}; '
        f'expected {_STATE_VERSION}.'
      )
    ours = {
      'max_size': self._max_size,
      'sampler': samplers.config(self._sampler),
      'rate_limiter': self._limiter.config(),
    }
    for name, value in ours.items():
      if state[name] != value:
        raise ValueError(
          f'Table state has {name}={state[name]!r} but this table has '
          f'{value!r}; build the table as it was saved.'
        )
    num_inserts, num_samples = int(state['num_inserts']), state['num_samples']
    size = min(num_inserts, self._max_size)
    arrays = [state['keys'], state['priorities'], *state['leaves']]
    if state['weights'] is not None:
      arrays.append(state['weights'])
    if any(len(a) != size for a in arrays):
      raise ValueError(f'Table state arrays must all hold {size} items.')
    storage.ItemStorage.check_state(state)
    # Build the new tree and generator aside, so a bad state (which raises
    # here) leaves this table untouched.
    tree = None
    if self._tree is not None:
      tree = sum_tree.SumTree(self._max_size)
      weights = np.zeros(self._max_size)
      weights[:size] = state['weights']
      tree.set_all(weights)
    rng = np.random.default_rng()
    rng.bit_generator.state = state['rng_state']
    self._rng, self._tree = rng, tree
    self._num_inserts, self._num_samples = num_inserts, int(num_samples)
    self._keys[:] = -1
    self._keys[:size] = state['keys']
    self._priorities[:] = 0.0
    self._priorities[:size] = state['priorities']
    self._storage.load_state_dict(state, size)

  def _insert(
    self, leaves, treedef, priorities, enforce_limit: bool = True
  ) -> np.ndarray:
    if not leaves:
      raise ValueError('Items must have at least one array leaf.')
    if any(leaf.ndim == 0 for leaf in leaves):
      raise ValueError('insert_batch items need a leading axis on each leaf.')
    n = len(leaves[0])
    if any(len(leaf) != n for leaf in leaves):
      raise ValueError(
        f'Every leaf needs the same leading size; got '
        f'{[len(leaf) for leaf in leaves]}.'
      )
    priorities = samplers.check_priorities(priorities, n)
    weights = self._weights(priorities) if self._tree is not None else None
    if n == 0:
      return np.zeros(0, np.int64)
    if enforce_limit and not self.can_insert(n):
      raise RateLimitedError(
        self._limiter.insert_blocked_message(n, self.counts)
      )
    self._storage.prepare(leaves, treedef)
    keys = np.arange(self._num_inserts, self._num_inserts + n, dtype=np.int64)
    # Of a batch larger than the table only the newest max_size items stay.
    keep = min(n, self._max_size)
    start = int(keys[n - keep]) % self._max_size
    first = min(keep, self._max_size - start)  # Rows before the ring wraps.
    columns = [*leaves, keys, priorities]
    targets = [*self._storage.arrays, self._keys, self._priorities]
    for source, target in zip(columns, targets):
      source = source[n - keep :]
      target[start : start + first] = source[:first]
      target[: keep - first] = source[first:]
    if self._tree is not None:
      weights = weights[n - keep :]
      self._tree.set_range(start, weights[:first])
      self._tree.set_range(0, weights[first:])
    self._num_inserts += n
    return keys

  def _weights(self, priorities: np.ndarray) -> np.ndarray:
    return samplers.priority_weights(
      priorities, self._sampler.priority_exponent
    )
