"""The replay table: Reverb's table semantics as pure jnp functions.

`DeviceTable` serves every source (one replay for the gymnasium, device
and Ray paths): it holds only the configuration and pure functions
`(state, ...) -> state`; the contents live in a `DeviceReplay` pytree of
arrays, so they are vmapped over seeds and checkpointed as numpy leaves
like any train state. The semantics are Reverb's:

- every inserted item gets a unique, increasing integer key; item `key`
  lives in slot `key % max_size` (FIFO: a ring buffer);
- `sample` draws i.i.d. with replacement, uniformly (probability 1 / size)
  or by weight priority**exponent (0**0 = 0, all-zero weights fall back to
  uniform), and returns keys and probabilities for importance weights;
- `mutate_priorities` writes priorities by key, ignores keys no longer in
  the table, and the last write of a repeated key wins;
- the same rate limiter (`rate_limiter.make`: MinSize or
  SampleToInsertRatio with the same bounds) answers `can_insert` /
  `can_sample` as traced booleans; nothing blocks inside jit, so callers
  gate their learner calls on them (the compiled epoch does).

What comes from flashbax and why the rest does not: the prioritized
weights live in flashbax's JAX sum tree (`flashbax.buffers.sum_tree`:
O(log N) batched sets with duplicate handling, descent for sampling). Its
item buffers do not fit: they add a fixed number of items per call while
the n-step adder emits a varying number (none for the first n - 1 steps of
an env, several when an episode ends), they address items by slot with no
keys (so a priority for an evicted item would land on its successor),
limit priority_exponent to [0, 1], sample stratified rather than i.i.d.,
and have no samples-per-insert limiter. So the ring, keys, masked inserts,
i.i.d. draws and the limiter are ours (small), the tree is flashbax's.
The tree is float32: probabilities hold to float32 precision.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flashbax.buffers import sum_tree

from trax_rl.replay import rate_limiter, samplers


class DeviceReplay(NamedTuple):
  """The contents of a DeviceTable: a pytree of arrays."""

  storage: Any  # the item pytree, [max_size, ...] per leaf
  keys: jax.Array  # [max_size] int32, -1 in an empty slot
  priorities: jax.Array  # [max_size] float32 as written
  tree: Any  # flashbax SumTreeState of the weights; () when uniform
  num_inserts: jax.Array  # int32 scalar, the next key
  num_samples: jax.Array  # int32 scalar, items sampled so far


class DeviceSample(NamedTuple):
  """What `DeviceTable.sample` returns (all arrays)."""

  keys: jax.Array  # [n] int32
  probability: jax.Array  # [n] float32
  table_size: jax.Array  # int32 scalar
  data: Any  # the item pytree [n, ...]


class DeviceTable:
  """Pure replay-table functions on a `DeviceReplay` state (see module)."""

  def __init__(
    self,
    max_size: int,
    sampler: samplers.Uniform | samplers.Prioritized | None = None,
    min_size_to_sample: int = 1,
    samples_per_insert: float | None = None,
    error_buffer: float | tuple[float, float] | None = None,
  ):
    """Configures the table (no seed: the caller passes keys to `sample`).

    Args:
      max_size: capacity, >= 1, < 2**31.
      sampler: `Uniform()` (also for None) or `Prioritized(exponent)`.
      min_size_to_sample: sampling is blocked below this many items.
      samples_per_insert: None (MinSize) or the SampleToInsertRatio.
      error_buffer: the ratio's allowed deviation (`rate_limiter.make`).

    Raises:
      ValueError: naming the invalid argument.
    """
    sampler = samplers.check_table_config(max_size, sampler, min_size_to_sample)
    if max_size >= 2**31:  # int32 keys on the device.
      raise ValueError(f'max_size must be < 2**31, got {max_size}')
    self.max_size = int(max_size)
    self.sampler = sampler
    self.limiter = rate_limiter.make(
      int(min_size_to_sample), samples_per_insert, error_buffer
    )
    self.prioritized = isinstance(sampler, samplers.Prioritized)

  def init(self, example_item: Any) -> DeviceReplay:
    """An empty table for items shaped like `example_item` (no batch axis)."""
    return jax.device_put(self.empty(example_item))

  def empty(self, example_item: Any) -> DeviceReplay:
    """`init`'s table in numpy, not yet placed.

    In numpy: eager jnp.zeros compile once per shape (~20 ms each, cold).
    The storage is `np.zeros`, whose pages the OS maps only when written,
    so an agent's empty replay costs no memory until a runner places it (a
    seed batch stacks k of them: `device.seeds`).
    """
    storage = jax.tree.map(
      lambda x: np.zeros((self.max_size, *np.shape(x)), jnp.asarray(x).dtype),
      example_item,
    )
    return DeviceReplay(
      storage=storage,
      keys=np.full(self.max_size, -1, np.int32),
      priorities=np.zeros(self.max_size, np.float32),
      tree=self._empty_tree() if self.prioritized else (),
      num_inserts=np.zeros((), np.int32),
      num_samples=np.zeros((), np.int32),
    )

  def _empty_tree(self) -> sum_tree.SumTreeState:
    # In numpy too: flashbax's `max_recorded_priority` is a weakly typed
    # jnp.array(1.0) and every update returns a strong one: a learner built
    # with the weak one compiled `train` twice (its first call, then the
    # rest), 1-2 s of a short CPU run.
    return jax.tree.map(np.asarray, sum_tree.init(self.max_size))

  def size(self, state: DeviceReplay) -> jax.Array:
    """The number of items in the table."""
    return jnp.minimum(state.num_inserts, self.max_size)

  def _error_after(self, state, inserts, samples):
    """(inserts * spi - samples after the call, its float32 rounding)."""
    limiter = self.limiter
    scaled = (state.num_inserts + inserts).astype(jnp.float32) * limiter.spi
    error = scaled - (state.num_samples + samples).astype(jnp.float32)
    # Reverb computes in float64; in float32 (and with the multiply-add
    # XLA may fuse) a bound met exactly, e.g. 15 * 0.3 - 1 = 3.5, can come
    # out a few ulps past it. Bounds count as met within that rounding.
    return error, 4 * jnp.finfo(jnp.float32).eps * jnp.maximum(scaled, 1.0)

  def can_insert(self, state: DeviceReplay, n: Any) -> jax.Array:
    """Whether inserting n items (all at once) is allowed (traced bool)."""
    free = self.size(state) + n <= self.limiter.min_size_to_sample
    error, rounding = self._error_after(state, n, 0)
    return free | (error <= self.limiter.max_diff + rounding)

  def can_sample(self, state: DeviceReplay, n: int) -> jax.Array:
    """Whether sampling n items is allowed (traced bool)."""
    filled = self.size(state) >= self.limiter.min_size_to_sample
    error, rounding = self._error_after(state, 0, n)
    return filled & (error >= self.limiter.min_diff - rounding)

  def _weights(self, priorities: jax.Array) -> jax.Array:
    exponent = self.sampler.priority_exponent
    return jnp.where(priorities == 0, 0.0, priorities**exponent)

  def _tree_pad(self) -> int:
    # A leaf index past the tree's last level: flashbax's sets drop it.
    return 2 ** sum_tree.get_tree_depth(self.max_size)

  def insert(
    self,
    state: DeviceReplay,
    items: Any,
    priorities: Any = 1.0,
    valid: jax.Array | None = None,
  ) -> tuple[DeviceReplay, jax.Array]:
    """Inserts the valid rows of `items`, in order (a batch insert).

    Args:
      state: the table.
      items: the item pytree with a leading axis [M, ...], M <= max_size.
      priorities: [M] or a scalar, each finite and >= 0 (not checked
        inside jit).
      valid: [M] bool, rows to insert (None: all); the others take no key.

    Returns:
      (new state, keys [M] int32, -1 for rows not inserted).
    """
    m = jax.tree.leaves(items)[0].shape[0]
    if m > self.max_size:
      raise ValueError(f'insert of {m} rows exceeds max_size={self.max_size}')
    valid = jnp.ones(m, bool) if valid is None else jnp.asarray(valid, bool)
    offsets = jnp.cumsum(valid) - 1
    keys = jnp.where(valid, state.num_inserts + offsets, -1).astype(jnp.int32)
    # Rows not inserted go to slot max_size: out of range, dropped.
    slots = jnp.where(valid, keys % self.max_size, self.max_size)
    storage = jax.tree.map(
      lambda store, x: store.at[slots].set(x.astype(store.dtype), mode='drop'),
      state.storage,
      items,
    )
    priorities = jnp.broadcast_to(jnp.asarray(priorities, jnp.float32), (m,))
    tree = state.tree
    if self.prioritized and m:  # flashbax's set of no rows fails.
      tree_slots = jnp.where(valid, slots, self._tree_pad())
      tree = sum_tree.set_batch_bincount(
        tree, tree_slots, jnp.where(valid, self._weights(priorities), 0.0)
      )
    new_state = state._replace(
      storage=storage,
      keys=state.keys.at[slots].set(keys, mode='drop'),
      priorities=state.priorities.at[slots].set(priorities, mode='drop'),
      tree=tree,
      num_inserts=state.num_inserts + jnp.sum(valid, dtype=jnp.int32),
    )
    return new_state, keys

  def sample(
    self, state: DeviceReplay, key: jax.Array, n: int
  ) -> tuple[DeviceReplay, DeviceSample]:
    """Draws n items i.i.d. with replacement (callers check `can_sample`).

    Returns:
      (state with n more samples counted, DeviceSample). Probability is
      w_key / sum(w) (Prioritized) or 1 / size (Uniform, or when every
      weight is 0).
    """
    size = self.size(state)
    u = jax.random.uniform(key, (n,))
    uniform_slots = jnp.minimum((u * size).astype(jnp.int32), size - 1)
    uniform_probability = jnp.full(n, 1.0, jnp.float32) / size
    if self.prioritized:
      total = state.tree.nodes[0]
      draw = jax.vmap(sum_tree.sample, in_axes=(None, None, 0))
      tree_slots = draw(state.tree, None, u).astype(jnp.int32)
      # Float rounding can walk past the last filled leaf; keep it inside.
      tree_slots = jnp.minimum(tree_slots, self.max_size - 1)
      positive = total > 0
      slots = jnp.where(positive, tree_slots, uniform_slots)
      probability = jnp.where(
        positive,
        sum_tree.get_batch(state.tree, slots) / jnp.where(positive, total, 1),
        uniform_probability,
      )
    else:
      slots, probability = uniform_slots, uniform_probability
    data = jax.tree.map(lambda store: store[slots], state.storage)
    sample = DeviceSample(state.keys[slots], probability, size, data)
    return state._replace(num_samples=state.num_samples + n), sample

  def mutate_priorities(
    self, state: DeviceReplay, keys: jax.Array, priorities: jax.Array
  ) -> DeviceReplay:
    """Sets the priorities of the items with `keys` (see module).

    Args:
      state: the table.
      keys: int [K] (any shape, flattened in order).
      priorities: float, the shape of keys.

    Returns:
      The new state; a Uniform table only records the priorities.
    """
    keys = jnp.asarray(keys, jnp.int32).reshape(-1)
    priorities = jnp.asarray(priorities, jnp.float32).reshape(-1)
    slots = keys % self.max_size
    present = (keys >= 0) & (state.keys[slots] == keys)
    # Keys no longer in the table (or -1) write nothing and must not hide a
    # present key's write to their slot: they sort out of range.
    slots = jnp.where(present, slots, self.max_size)
    # The last write of a repeated key wins: a stable sort by slot keeps
    # the order within a slot; each run's last element is the newest.
    order = jnp.argsort(slots, stable=True)
    sorted_slots = slots[order]
    is_last = jnp.append(sorted_slots[1:] != sorted_slots[:-1], True)
    last = jnp.zeros_like(present).at[order].set(is_last)
    write = present & last
    slots = jnp.where(write, slots, self.max_size)
    tree = state.tree
    if self.prioritized:
      tree_slots = jnp.where(write, slots, self._tree_pad())
      tree = sum_tree.set_batch_bincount(
        tree, tree_slots, jnp.where(write, self._weights(priorities), 0.0)
      )
    return state._replace(
      priorities=state.priorities.at[slots].set(priorities, mode='drop'),
      tree=tree,
    )

  def state_dict(self, state: DeviceReplay) -> dict[str, Any]:
    """The contents as numpy leaves plus the configuration."""
    return {
      'max_size': self.max_size,
      'sampler': samplers.config(self.sampler),
      'rate_limiter': self.limiter.config(),
      'leaves': [np.asarray(x) for x in jax.tree.leaves(state)],
    }

  def load_state_dict(
    self, template: DeviceReplay, state: dict[str, Any]
  ) -> DeviceReplay:
    """Rebuilds a DeviceReplay shaped like `template` from `state_dict()`.

    Raises:
      ValueError: the state is of a table configured differently.
    """
    ours = {
      'max_size': self.max_size,
      'sampler': samplers.config(self.sampler),
      'rate_limiter': self.limiter.config(),
    }
    for name, value in ours.items():
      if state[name] != value:
        raise ValueError(
          f'device table state has {name}={state[name]!r} but this table has '
          f'{value!r}; build the table as it was saved.'
        )
    leaves, treedef = jax.tree.flatten(template)
    if len(leaves) != len(state['leaves']):
      raise ValueError('device table state does not match the item structure')
    return jax.tree.unflatten(
      treedef,
      [
        jnp.asarray(np.asarray(x, np.asarray(t).dtype))
        for t, x in zip(leaves, state['leaves'])
      ],
    )
