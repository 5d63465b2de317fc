"""Epsilon-greedy's draws: how often it explores and what it picks then."""

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import policies

Q = jnp.asarray([[0.0, 3.0, 1.0, 2.0]] * 4000)  # Greedy action: 1.


def _actions(epsilon, seed=0):
  fn = jax.jit(policies.epsilon_greedy)
  return np.asarray(fn(Q, jax.random.PRNGKey(seed), epsilon))


def test_epsilon_zero_and_one():
  assert (_actions(0.0) == 1).all()
  actions = _actions(1.0)
  counts = np.bincount(actions, minlength=4)
  # Uniform over the 4 actions: 1000 each, binomial sd ~27.
  assert np.abs(counts - 1000).max() < 130, counts


def test_explores_with_probability_epsilon():
  actions = _actions(0.2, seed=1)
  # Explores 20% of rows, a quarter of which pick the greedy action anyway.
  off_greedy = np.mean(actions != 1)
  assert abs(off_greedy - 0.2 * 0.75) < 0.02, off_greedy
  counts = np.bincount(actions[actions != 1], minlength=4)
  assert counts[1] == 0 and min(counts[[0, 2, 3]]) > 150, counts


def test_per_row_epsilons_and_int32_actions():
  eps = jnp.where(jnp.arange(4000) < 2000, 0.0, 1.0)
  actions = jax.jit(policies.epsilon_greedy)(Q, jax.random.PRNGKey(2), eps)
  assert actions.dtype == jnp.int32
  actions = np.asarray(actions)
  assert (actions[:2000] == 1).all()
  assert np.mean(actions[2000:] != 1) > 0.65  # 3/4 expected.
  # Different keys draw different actions.
  assert (_actions(1.0, 3) != _actions(1.0, 4)).any()
