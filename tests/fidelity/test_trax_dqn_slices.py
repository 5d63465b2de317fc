"""Fidelity, item 6: which steps Trax's DQN trains.

Source: google/trax, trax/rl/training.py, `DQN.value_batches_stream` asks
`task.trajectory_batch_stream(margin=0, max_slice_length=L)`;
trax/rl/task.py: a trajectory of n steps (n + 1 observations) has
`_n_slices = max(1, n + 1 + margin - L)` slices, the start drawn uniformly
below it, and `to_np(margin=0)` keeps the slice inside the trajectory. The
estimator (td_k with k = L - 1) gives a target to the first row of each
slice only. So steps `0 .. n - L` get targets and the last `L - 1` (the
terminal step among them) never do. `DQN.train_final_steps` is the port's
named difference: slices padded past the end, so every step trains.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from trax_rl import task, types
from trax_rl.agents import value_agents
from trax_rl.testing import fake_envs

EPISODE = 6  # CountingEnv episodes of 6 steps; observation[0] is the step.


class StepTable(nn.Module):
  """Q(o) = w[o[0]]: one row of parameters per step of the episode, so
  the rows an epoch of updates changes are the steps that got targets."""

  n_actions: int

  @nn.compact
  def __call__(self, obs):
    w = self.param('w', nn.initializers.zeros, (EPISODE + 1, self.n_actions))
    return types.QOutput(q_values=w[obs[..., 0].astype(jnp.int32)])


def trax_trained_steps(n, length, margin):
  """Transcription: the steps Trax's DQN gives a target (see above)."""
  starts = range(max(1, n + 1 + 0 - length))  # `_n_slices(..., margin=0)`
  return {s + row for s in starts for row in range(length - margin)}


def trax_batch_target_rows(slice_lengths, length):
  """Transcription: rows of each slice of one batch that Trax's DQN gives
  a target. `trajectory_batch_stream` pads a batch whose slices differ in
  length to its longest rounded up to a power of two (`min_slice_length`
  1), and td_k(L - 1) leaves `rows - (L - 1)` targets."""
  longest = max(max(slice_lengths), 1)
  rows = longest
  if longest != min(slice_lengths):
    rows = 2 ** int(np.ceil(np.log2(longest)))
  return max(0, rows - (length - 1))


def _trained_steps(length, margin, episode=EPISODE, **kwargs):
  t = task.RLTask(
    lambda: fake_envs.CountingEnv((episode,)),
    n_envs=1,
    gamma=0.9,
    max_steps=100,
    initial_trajectories=0,
  )
  agent = value_agents.DQN(
    t,
    value_model=StepTable,
    value_optimizer=optax.sgd,
    value_lr_schedule=lambda: 0.5,
    value_batch_size=8,
    value_train_steps_per_epoch=50,
    max_slice_length=length,
    margin=margin,
    exploration_rate=1.0,
    n_interactions_per_epoch=2 * episode,  # Two whole episodes.
    n_eval_episodes=0,
    **kwargs,
  )
  agent.run(1)
  w = np.asarray(jax.tree.leaves(agent.learner.train.params)[0])
  return {int(s) for s in np.flatnonzero(np.any(w != 0, axis=1))}


@pytest.mark.parametrize('length, margin', [(3, 2), (2, 1), (4, 1)])
def test_trax_slices_never_reach_the_last_steps(length, margin):
  trained = _trained_steps(length, margin)
  assert trained == trax_trained_steps(EPISODE, length, margin)
  assert EPISODE - 1 not in trained  # The terminal step.


@pytest.mark.parametrize('length, margin', [(3, 2), (2, 1)])
def test_train_final_steps_trains_every_step(length, margin):
  trained = _trained_steps(length, margin, train_final_steps=True)
  assert trained == set(range(EPISODE))


def test_short_trajectories_train_their_first_step():
  # Episodes of 2 steps, slices of 3: Trax's slice of such a trajectory
  # has 2 rows. A batch of only those gets no target (2 - 2 rows); one
  # that also holds a full slice is padded to 4 rows, and 2 rows of each
  # slice get targets. The port pads every slice to 3 (mask 0 past the
  # end) and trains the first row only (README, "Coming from Trax").
  assert trax_batch_target_rows([2, 2], 3) == 0
  assert trax_batch_target_rows([3, 2], 3) == 2
  assert trax_batch_target_rows([3, 3], 3) == 1
  assert _trained_steps(3, 2, episode=2) == {0}
