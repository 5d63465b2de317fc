"""`batched_loop.while_any`: a plain while loop, also under (nested) vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl.device import batched_loop

SIZE = 64  # The "big" carried array, written at one index per iteration.


def _ours(limit, x):
  """Counts to `limit`, summing x * i and marking index i of a big array."""

  def body(carry, active):
    i, total, big = carry
    # Inactive rows write at an index past the end: nothing.
    big = big.at[jnp.where(active, i, SIZE)].set(1.0, mode='drop')
    i, total = batched_loop.keep_where(
      active, (i + 1, total + x * i), (i, total)
    )
    return i, total, big

  init = (jnp.int32(0), jnp.float32(0), jnp.zeros(SIZE))
  return batched_loop.while_any(lambda c: c[0] < limit, body, init)


def _reference(limit, x):
  def body(carry):
    i, total, big = carry
    return i + 1, total + x * i, big.at[i].set(1.0)

  init = (jnp.int32(0), jnp.float32(0), jnp.zeros(SIZE))
  return jax.lax.while_loop(lambda c: c[0] < limit, body, init)


def _assert_same(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize('jit', [False, True])
def test_unbatched_is_the_plain_loop(jit):
  ours = jax.jit(_ours) if jit else _ours
  _assert_same(ours(jnp.int32(5), jnp.float32(2.0)), _reference(5, 2.0))


def test_rows_that_finish_early_keep_their_carry():
  limits = jnp.array([3, 7, 0, 5])  # Different trip counts per row.
  xs = jnp.array([1.0, 2.0, 3.0, 4.0])
  ours = jax.jit(jax.vmap(_ours))(limits, xs)
  _assert_same(ours, jax.vmap(_reference)(limits, xs))
  np.testing.assert_array_equal(ours[0], limits)


@pytest.mark.parametrize('batched', ['both', 'outer', 'inner'])
def test_nested_vmaps(batched):
  limits = jnp.array([[3, 7], [0, 5], [2, 2]])
  xs = jnp.arange(6.0).reshape(3, 2)
  if batched == 'outer':  # The limit varies over the outer axis only.
    limits = jnp.array([[2, 2], [6, 6], [0, 0]])
  if batched == 'inner':
    limits = jnp.array([[1, 4], [1, 4], [1, 4]])
  nested = lambda f: jax.vmap(jax.vmap(f))  # noqa: E731
  _assert_same(
    jax.jit(nested(_ours))(limits, xs), nested(_reference)(limits, xs)
  )


def test_keep_where_broadcasts_leaves_no_row_changed():
  def run(limit):
    def body(carry, active):
      i, constant = carry
      return batched_loop.keep_where(active, (i + 1, constant), carry)

    init = (jnp.int32(0), jnp.float32(3.0))
    return batched_loop.while_any(lambda c: c[0] < limit, body, init)

  counts, constants = jax.vmap(run)(jnp.array([1, 4]))
  np.testing.assert_array_equal(counts, [1, 4])
  np.testing.assert_array_equal(constants, [3.0, 3.0])


def test_no_select_over_the_big_array_under_vmap():
  # The point of while_any: vmapping `lax.while_loop` with a per-row
  # condition selects every carried leaf after every iteration.
  limits, xs = jnp.array([3, 7]), jnp.array([1.0, 2.0])

  def selects_of_big(f):
    text = jax.jit(jax.vmap(f)).lower(limits, xs).as_text()
    return sum(
      1
      for line in text.splitlines()
      if 'select' in line and f'tensor<2x{SIZE}xf32>' in line
    )

  assert selects_of_big(_reference) > 0  # The check can see one.
  assert selects_of_big(_ours) == 0
