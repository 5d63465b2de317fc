"""seed_axis.place: the one way a learner or a source state reaches a call."""

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl.sources import seed_axis


def test_place_makes_weak_leaves_strong_as_a_restore_does():
  # A fresh gymnax reset holds `time = 0` weakly typed; a checkpoint gives
  # it back strong. Placed alike, both lower to the same program, so a
  # resumed run loads the fresh run's compile from the cache.
  fresh = {'steps': jnp.zeros(4, jnp.int32), 'x': jnp.asarray(0.5)}
  assert jax.typeof(fresh['x']).weak_type
  restored = jax.tree.map(np.asarray, fresh)
  placed, again = seed_axis.place(fresh, None), seed_axis.place(restored, None)
  for a, b in zip(jax.tree.leaves(placed), jax.tree.leaves(again)):
    assert jax.typeof(a) == jax.typeof(b)
    assert not jax.typeof(a).weak_type
    np.testing.assert_array_equal(a, b)

  def f(tree):
    # A weak float32 takes bfloat16's type, a strong one does not.
    return tree['x'] * jnp.ones((), jnp.bfloat16), tree['steps'] + 1

  text = lambda t: jax.jit(f).lower(t).as_text()
  assert text(placed) == text(again)
  assert text(fresh) != text(again)  # What the resumed run compiled anew.
