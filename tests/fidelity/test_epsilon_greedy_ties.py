"""Fidelity, item 5: greedy ties go to the first maximal index (Trax's).

Sources: google/trax, trax/rl/training.py, class DQN, acts with
`jnp.argmax(values)` (first maximal index); Acme's DQN actor uses
`rlax.epsilon_greedy(epsilon).sample`, whose greedy choice is uniform among
tied maxima. trax_rl follows Trax for every agent; this pins that choice.
"""

import jax
import jax.numpy as jnp
import numpy as np
import rlax
from absl.testing import absltest

from trax_rl import policies

# Actions 1 and 3 tie for the maximum.
Q = jnp.array([0.0, 2.0, -1.0, 2.0])
N_KEYS = 64


class EpsilonGreedyTiesTest(absltest.TestCase):
  def test_first_maximal_index_at_epsilon_zero(self):
    keys = jax.random.split(jax.random.key(0), N_KEYS)
    ours = jax.vmap(lambda k: policies.epsilon_greedy(Q[None], k, 0.0)[0])(keys)
    np.testing.assert_array_equal(ours, np.ones(N_KEYS))

  def test_rlax_picks_either_tied_maximum(self):
    # Acme's choice, for contrast: both tied actions come up (each with
    # probability 1/2 per key; missing one in 64 draws has odds 2**-63),
    # never a non-maximal one.
    keys = jax.random.split(jax.random.key(0), N_KEYS)
    sample = rlax.epsilon_greedy(0.0).sample
    theirs = np.asarray(jax.vmap(lambda k: sample(k, Q))(keys))
    self.assertEqual(set(theirs.tolist()), {1, 3})


if __name__ == '__main__':
  absltest.main()
