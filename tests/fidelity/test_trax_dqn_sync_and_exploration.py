"""Fidelity, items 4 and 5: Trax DQN's exploration and target sync.

Source: google/trax, trax/rl/training.py, class DQN.

- `DQN.policy` draws a random action only when `random() < epsilon and
  temperature == 1`; every other temperature takes the argmax.
- `ValueAgent.train_epoch` copies the trainer's weights into the target
  model before the epoch's updates, runs them all, then copies again if
  `step % sync_freq == 0`: the target moves only at epoch boundaries.
"""

import functools

import jax
import numpy as np
import pytest
from flax import linen as nn

from trax_rl import task
from trax_rl.agents import value_agents
from trax_rl.networks import models
from trax_rl.testing import fake_envs


def _task():
  return task.RLTask(
    lambda: fake_envs.CountingEnv((5, 8)),
    n_envs=2,
    gamma=0.9,
    max_steps=10,
    initial_trajectories=0,
  )


def _dqn(**kwargs):
  return value_agents.DQN(
    _task(),
    value_model=functools.partial(models.Quality, body=lambda: nn.Dense(4)),
    value_batch_size=4,
    max_slice_length=3,
    margin=1,
    n_interactions_per_epoch=20,
    **kwargs,
  )


def _trax_policy(q_values, u, random_action, epsilon, temperature):
  """Trax's `DQN.policy` for one observation, transcribed."""
  if u < epsilon and temperature == 1:
    return random_action
  return int(np.argmax(q_values))


@pytest.mark.parametrize('temperature', [1.0, 0.5, 0.0])
def test_explores_only_at_temperature_one(temperature):
  agent = _dqn(exploration_rate=1.0)  # Always explore, where Trax would.
  program, learner = agent.program, agent.learner
  obs = np.arange(8, dtype=np.float32).reshape(4, 2)
  q = np.asarray(agent.network.apply(learner.train.params, obs).q_values)
  greedy = [_trax_policy(row, 0.5, None, 1.0, temperature) for row in q]
  acted = np.concatenate(
    [
      np.asarray(
        program.act(learner, jax.random.PRNGKey(i), obs, temperature)[0]
      )
      for i in range(25)
    ]
  )
  if temperature == 1:
    assert greedy == [None] * 4  # Trax draws at random...
    assert len(set(acted.tolist())) > 1  # ...and so does the port.
  else:
    np.testing.assert_array_equal(acted, np.tile(greedy, 25))


def _params(agent):
  return jax.tree.map(np.asarray, agent.learner.train.params)


def _assert_equal(a, b):
  jax.tree.map(np.testing.assert_array_equal, a, b)


def _differ(a, b):
  return any(
    not np.array_equal(x, y)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
  )


@pytest.mark.parametrize('train_steps', [4, 3])
def test_target_moves_only_at_epoch_boundaries(train_steps):
  # One epoch of `train_steps` updates, sync_freq 3. Trax: the target takes
  # the params before the updates, and again after them only if the update
  # count is a multiple of 3.
  agent = _dqn(sync_freq=3, value_train_steps_per_epoch=train_steps)
  before = _params(agent)
  agent.run(1)
  after = _params(agent)
  assert int(agent.learner.train.step) == train_steps
  target = jax.tree.map(np.asarray, agent.learner.train.target_params)
  trax_target = after if train_steps % 3 == 0 else before
  _assert_equal(target, trax_target)
  assert _differ(before, after)


def test_sync_within_epoch_is_the_named_difference():
  # The port's older behaviour, kept behind a knob: after update 3 of 4.
  agent = _dqn(
    sync_freq=3, value_train_steps_per_epoch=4, sync_within_epoch=True
  )
  before = _params(agent)
  agent.run(1)
  target = jax.tree.map(np.asarray, agent.learner.train.target_params)
  assert _differ(target, before) and _differ(target, _params(agent))


def _trax_window(dqn_epochs, task_epochs, current):
  """The epochs Trax's DQN samples from after collecting epoch `current`:
  the task keeps ids >= current - task_epochs (`RLTask.collect_trajectories`)
  and the DQN asks for ids -1 .. -dqn_epochs modulo current + 1
  (`RLTask._trajectory_stream`)."""
  kept = {e for e in range(current + 1) if e >= current - task_epochs}
  asked = {-(i + 1) % (current + 1) for i in range(dqn_epochs)}
  return kept & asked


@pytest.mark.parametrize(
  'dqn_epochs, task_epochs', [(500, 1), (5, 1), (5, 9), (3, 2)]
)
def test_replay_window_is_the_task_s(dqn_epochs, task_epochs):
  t = task.RLTask(
    lambda: fake_envs.CountingEnv((5, 8)),
    n_envs=2,
    gamma=0.9,
    max_steps=10,
    initial_trajectories=0,
    n_replay_epochs=task_epochs,
  )
  agent = value_agents.DQN(
    t,
    value_model=functools.partial(models.Quality, body=lambda: nn.Dense(4)),
    value_batch_size=4,
    max_slice_length=3,
    margin=1,
    n_interactions_per_epoch=20,
    n_replay_epochs=dqn_epochs,
  )
  # The ring holds as many epochs as Trax's window has once it is full.
  window = _trax_window(dqn_epochs, task_epochs, current=1000)
  assert agent.learner.ring.position.shape[0] == len(window)
