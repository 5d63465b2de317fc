"""The Ray source's actors and streams, without Ray: `sources.ray`."""

import functools

import gin
import jax
import numpy as np
import pytest

from trax_rl import configurables
from trax_rl.distributed import ray_collector
from trax_rl.sources import ray_actors, ray_chunks

DQN = """
RLTask.env = 'CartPole-v1'
RLTask.initial_trajectories = 0
RLTask.n_envs = 2
MLP.layer_widths = (8,)
Quality.body = @MLP
ReplayValueAgent.model_fn = @Quality
ReplayValueAgent.batch_size = 4
ReplayValueAgent.min_replay_size = 10
ReplayValueAgent.samples_per_insert = 2.0
ReplayValueAgent.n_interactions_per_epoch = 40
train_rl.agent_class = @ReplayValueAgent
"""

R2D2 = """
RLTask.env = @masked_cartpole
RLTask.initial_trajectories = 0
RLTask.n_envs = 2
RLTask.max_steps = 30
MLP.layer_widths = (8,)
RecurrentQuality.torso = @MLP
RecurrentQuality.lstm_size = 8
RecurrentQuality.head_widths = (8,)
R2D2Loss.burn_in_length = 2
R2D2Loss.bootstrap_n = 2
R2D2.model_fn = @RecurrentQuality
R2D2.loss_fn = @R2D2Loss()
R2D2.trace_length = 4
R2D2.sequence_period = 3
R2D2.batch_size = 4
R2D2.min_replay_size = 8
R2D2.max_replay_size = 1000
R2D2.samples_per_insert = 2.0
R2D2.epsilon_min = 0.01
R2D2.epsilon_max = 0.5
R2D2.n_interactions_per_epoch = 64
train_rl.agent_class = @R2D2
"""


def _lines(config):
  return [line for line in config.splitlines() if line.strip()]


def _actor(config, slot=0, n_slots=1, epsilon=None):
  factory = functools.partial(configurables.build_agent, config)
  return ray_actors.Actor(factory, slot, n_slots, epsilon)


def _view(agent):
  return jax.device_get(agent.program.acting_view(agent.learner))


def test_chunks_continue_episodes_and_carry_their_version():
  configurables.parse([], _lines(DQN))
  view = _view(configurables.train_rl(build_only=True))
  actor = _actor(DQN, slot=3, n_slots=4, epsilon=0.1)
  (chunk, stats), version = actor.play_chunk(5, [view], 16)
  (later, _), _ = actor.play_chunk(5, [view], 16)
  assert version == 5 and chunk.reward.shape == (16, 2)
  assert stats['n_interactions'] == 32
  # The second chunk continues the episodes the first one cut.
  done = chunk.terminated[-1] | chunk.truncated[-1]
  np.testing.assert_array_equal(
    later.observation[0][~done], chunk.next_observation[-1][~done]
  )


def test_a_unit_depends_only_on_seed_epoch_and_unit():
  configurables.parse([], _lines(DQN))
  view = _view(configurables.train_rl(build_only=True))
  a, b = _actor(DQN), _actor(DQN, slot=1, n_slots=2)
  first = a.play_unit(0, [view], 4, 2, None, 8)[0][0]
  a.play_unit(0, [view], 4, 0, None, 8)  # Another unit in between.
  again = a.play_unit(0, [view], 4, 2, None, 8)[0][0]
  elsewhere = b.play_unit(0, [view], 4, 2, None, 8)[0][0]
  other = b.play_unit(0, [view], 4, 3, None, 8)[0][0]
  for x, y, z in zip(first, again, elsewhere):
    if not isinstance(x, dict):
      np.testing.assert_array_equal(x, y)
      np.testing.assert_array_equal(x, z)
  assert not np.array_equal(first.observation, other.observation)


def test_streaming_needs_interactions_per_epoch():
  lines = [
    line for line in _lines(DQN) if 'n_interactions_per_epoch' not in line
  ] + ['ReplayValueAgent.n_trajectories_per_epoch = 2']
  configurables.parse([], lines)
  agent = configurables.train_rl(build_only=True)
  # A fresh agent of the config: its runner is built with the collector.
  fresh = configurables.build_agent(gin.config_str())
  fresh.set_collector(ray_collector.RayCollector(n_actors=1), lambda: None)
  with pytest.raises(ValueError, match='set n_interactions_per_epoch'):
    fresh.run(1)
  agent.close()


def _learn_from_two_actors(config, check_chunk):
  """What the Ray source does in stream mode, in one process: chunks of two
  actors (Ape-X epsilon 0.4) in their own columns of the learner's
  rollout, observed and learned from as they come, two rounds. Calls
  `check_chunk(slot, rollout)` on each; returns (learner agent, learner).
  """
  settings = ray_collector.RayCollector(n_actors=2, chunk_length=16)
  learner_agent = configurables.build_agent(gin.config_str())
  learner_agent.set_collector(settings, lambda: None)
  source = learner_agent.runner.source
  learner = learner_agent.runner.learner
  view = jax.device_get(source._view_fn(source.local(learner)))
  actors = [_actor(config, slot, 2, 0.4) for slot in (0, 1)]
  for _ in range(2):
    for slot, actor in enumerate(actors):
      (chunk, _), _ = actor.play_chunk(0, [view], 16)
      rollout = ray_chunks.in_columns(chunk, slot, 2)
      assert rollout.valid.sum() == 32  # Only this actor's two envs.
      check_chunk(slot, rollout)
      assert bool(source._can_take(learner, 16))
      learner, _ = source._local.train(
        learner, ray_chunks.with_seed_axis(rollout)
      )
  return learner_agent, jax.device_get(learner)


def test_r2d2_learns_from_chunks_of_two_actors():
  configurables.parse([], _lines(R2D2))
  agent = configurables.train_rl(build_only=True)

  def in_its_columns(slot, rollout):
    assert rollout.valid[:, 2 * slot : 2 * slot + 2].all()

  _, learner = _learn_from_two_actors(R2D2, in_its_columns)
  replay = jax.device_get(learner.replay)
  assert int(replay.num_inserts) > 0 and int(learner.train.step) > 0
  # Actor 1 of 2 takes the last two of the four rates (from epsilon_max
  # down to epsilon_min) that one process with four envs would use.
  four = agent.epsilons(4)
  np.testing.assert_allclose(four[[0, -1]], [0.5, 0.01], rtol=1e-5)
  agent.act_as_rollout_actor(1, 2, 0.4)
  np.testing.assert_allclose(agent.epsilons(2), four[2:])


SAC = """
RLTask.env = 'Pendulum-v1'
RLTask.initial_trajectories = 0
RLTask.n_envs = 2
RLTask.max_steps = 30
SAC.layer_widths = (8,)
SAC.batch_size = 8
SAC.learning_starts = 16
SAC.n_interactions_per_epoch = 32
train_rl.agent_class = @SAC
"""


def test_sac_learns_from_chunks_of_two_actors():
  # SAC is a streaming replay program too: two actors' chunks feed one
  # learner (each actor's Ape-X epsilon means nothing to it).
  configurables.parse([], _lines(SAC))

  def in_bounds(slot, rollout):
    del slot
    assert np.all(np.abs(rollout.action) <= 2.0)  # Pendulum's bounds.

  learner_agent, learner = _learn_from_two_actors(SAC, in_bounds)
  assert learner_agent.program.streams
  assert int(learner.replay.num_inserts) == 128
  # One update per env step once 16 items are in.
  assert 100 <= int(learner.critic.step) <= 128
