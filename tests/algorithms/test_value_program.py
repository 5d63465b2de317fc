"""The value program's pure pieces: n-step transitions and valid prefixes."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from trax_rl.algorithms import n_step, value
from trax_rl.device import rollout as rollout_lib
from trax_rl.losses import q_learning
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.replay import device_table


def test_n_step_transitions_by_hand():
  # One env, n = 3, gamma = 0.5. Steps 0-2 end by termination, 3-4 by
  # truncation, 5-6 start the next episode (only serve the windows).
  t = 7
  obs = jnp.arange(t, dtype=jnp.float32)[:, None, None]
  steps = n_step.Steps(
    observation=obs,
    action=jnp.zeros((t, 1), jnp.int32),
    reward=jnp.arange(1, t + 1, dtype=jnp.float32)[:, None],
    terminated=jnp.array([0, 0, 1, 0, 0, 0, 0], bool)[:, None],
    truncated=jnp.array([0, 0, 0, 0, 1, 0, 0], bool)[:, None],
    next_observation=obs + 100.0,
  )
  valid = jnp.ones((t, 1), bool).at[0].set(False)
  tr, ok = jax.jit(n_step.n_step_transitions, static_argnums=(2, 3, 4))(
    steps, valid, 3, 0.5, 5
  )
  np.testing.assert_allclose(tr.reward[:, 0], [2.75, 3.5, 3.0, 6.5, 5.0])
  np.testing.assert_allclose(tr.discount[:, 0], [0, 0, 0, 0.25, 0.5])
  np.testing.assert_allclose(
    tr.next_observation[:, 0, 0], [102, 102, 102, 104, 104]
  )
  np.testing.assert_allclose(tr.observation[:, 0, 0], [0, 1, 2, 3, 4])
  np.testing.assert_array_equal(ok[:, 0], [False, True, True, True, True])


def test_complete_transitions_emit_ended_episodes_at_once():
  # n = 3: the last two steps wait for more steps, unless their episode
  # ended (step 3 terminates: steps 2 and 3 are complete now; step 4,
  # of the next episode, waits).
  t = 5
  obs = jnp.arange(t, dtype=jnp.float32)[:, None, None]
  steps = n_step.Steps(
    observation=obs,
    action=jnp.zeros((t, 1), jnp.int32),
    reward=jnp.ones((t, 1), jnp.float32),
    terminated=jnp.array([0, 0, 0, 1, 0], bool)[:, None],
    truncated=jnp.zeros((t, 1), bool),
    next_observation=obs + 1.0,
  )
  tr, emit = n_step.complete_transitions(steps, jnp.ones((t, 1), bool), 3, 0.5)
  np.testing.assert_array_equal(emit[:, 0], [1, 1, 1, 1, 0])
  np.testing.assert_allclose(tr.reward[:4, 0], [1.75, 1.75, 1.5, 1.0])
  np.testing.assert_allclose(tr.discount[:4, 0], [0.125, 0, 0, 0])


def test_align_valid_puts_each_envs_valid_steps_last():
  tail = jnp.array([[10, 20], [11, 21]])  # [m=2, N=2]
  tail_valid = jnp.array([[True, False], [True, True]])
  new = jnp.array([[1, 5], [2, 6], [3, 7]])  # [T=3, N=2]
  valid = jnp.array([[1, 1], [1, 0], [0, 0]], bool)  # prefixes 2 and 1
  joined, ok = n_step.align_valid(tail, tail_valid, new, valid)
  np.testing.assert_array_equal(joined[:, 0], [3, 10, 11, 1, 2])
  np.testing.assert_array_equal(ok[:, 0], [0, 1, 1, 1, 1])
  np.testing.assert_array_equal(joined[:, 1], [6, 7, 20, 21, 5])
  np.testing.assert_array_equal(ok[:, 1], [0, 0, 0, 1, 1])


def _program(n_envs, n_step=3):
  network = networks.from_module(
    models.Quality(
      n_actions=2, body=functools.partial(models.MLP, layer_widths=(8,))
    ),
    np.zeros(1, np.float32),
  )
  return value.ValueProgram(
    network=network,
    loss_fn=q_learning.QLearning(),
    optimizer=optax.adam(1e-3),
    table=device_table.DeviceTable(256, min_size_to_sample=200),
    exploration=lambda step: jnp.float32(0.1),
    example_observation=np.zeros(1, np.float32),
    n_envs=n_envs,
    n_step=n_step,
    gamma=0.5,
    batch_size=4,
    num_sgd_steps_per_step=1,
    target_update_period=10,
    prioritized=False,
  )


def _rollout(obs, done, valid):
  """One env's steps `[T, 1]` as a Rollout (reward = observation)."""
  obs = jnp.asarray(obs, jnp.float32)[:, None, None]
  done = jnp.asarray(done, bool)[:, None]
  return rollout_lib.Rollout(
    observation=obs,
    action=jnp.zeros(done.shape, jnp.int32),
    reward=obs[..., 0],
    terminated=done,
    truncated=jnp.zeros_like(done),
    next_observation=obs + 0.5,
    agent_info={},
    episode_return=jnp.zeros(done.shape, jnp.float32),
    valid=jnp.asarray(valid, bool)[:, None],
  )


def _items(program, learner):
  replay = jax.device_get(learner.replay)
  n = int(replay.num_inserts)
  return sorted(
    zip(
      replay.storage.observation[:n, 0].tolist(),
      replay.storage.reward[:n].tolist(),
      replay.storage.discount[:n].tolist(),
    )
  )


def test_padded_rollouts_insert_what_full_ones_do():
  # The steps 1..7 (an episode ends at 4) as two full rollouts, or as
  # three padded ones with 2, 4 and 1 valid steps: the same transitions.
  program = _program(1)
  observe = jax.jit(program.observe)
  steps = np.arange(1.0, 8.0)
  done = steps == 4
  full = program.init(jax.random.PRNGKey(0))
  for part in (slice(0, 4), slice(4, 7)):
    n = part.stop - part.start
    full = observe(full, _rollout(steps[part], done[part], [1] * n))
  padded = program.init(jax.random.PRNGKey(0))
  for lo, n in ((0, 2), (2, 4), (6, 1)):
    obs = np.zeros(4)
    obs[:n] = steps[lo : lo + n]
    ends = np.zeros(4, bool)
    ends[:n] = done[lo : lo + n]
    padded = observe(padded, _rollout(obs, ends, np.arange(4) < n))
  assert _items(program, full) == _items(program, padded)
  # Steps 1-4 (ended) and 5 (window of 5, 6, 7 complete) are in; 6 and 7
  # wait for more steps.
  assert [x[0] for x in _items(program, full)] == [1, 2, 3, 4, 5]
