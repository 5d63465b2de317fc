"""ReplayValueAgent on the device source (compiled epochs on gymnax)."""

import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import configurables
from trax_rl import task as task_lib
from trax_rl.agents import replay_value, value_agents
from trax_rl.device import evaluate
from trax_rl.losses import distributional, q_learning
from trax_rl.networks import models
from trax_rl.sources import device as device_source
from trax_rl.testing import resume

_LOSSES = {
  'QLearning': (q_learning.QLearning(), models.Quality),
  'RegularizedQLearning': (q_learning.RegularizedQLearning(), models.Quality),
  'MunchausenQLearning': (q_learning.MunchausenQLearning(), models.Quality),
  'PrioritizedDoubleQLearning': (
    q_learning.PrioritizedDoubleQLearning(),
    models.Quality,
  ),
  'PrioritizedCategoricalDoubleQLearning': (
    distributional.PrioritizedCategoricalDoubleQLearning(),
    functools.partial(models.CategoricalQuality, num_atoms=11, v_max=20.0),
  ),
  'QrDqn': (
    distributional.QrDqn(),
    functools.partial(models.QuantileQuality, num_atoms=11),
  ),
}


def _agent(loss_name='QLearning', output_dir=None, **overrides):
  loss_fn, model = _LOSSES[loss_name]
  task = task_lib.RLTask(
    'gymnax:CartPole-v1',
    gamma=0.99,
    n_envs=4,
    max_steps=200,
    seed=0,
    initial_trajectories=0,
  )
  kwargs = dict(
    model_fn=functools.partial(
      model, body=functools.partial(models.MLP, layer_widths=(16,))
    ),
    loss_fn=loss_fn,
    batch_size=16,
    n_step=2,
    min_replay_size=64,
    max_replay_size=256,
    samples_per_insert=2.0,
    target_update_period=4,
    num_sgd_steps_per_step=2,
    n_interactions_per_epoch=48,
    output_dir=output_dir,
    seed=1,
  )
  kwargs.update(overrides)
  return replay_value.ReplayValueAgent(task, **kwargs)


@pytest.mark.parametrize('loss_name', sorted(_LOSSES))
def test_every_loss_runs_compiled_epochs(loss_name):
  agent = _agent(loss_name)
  agent.run(3)
  assert isinstance(agent.runner.source, device_source.DeviceSource)
  replay = agent.learner.replay
  table = agent.table
  # 3 epochs of 12 vector steps x 4 envs; the last n - 1 = 1 step per env
  # waits for its window, unless its episode ended.
  size = int(table.size(replay))
  assert 3 * 48 - 4 <= size <= 3 * 48
  assert int(jnp.sum(agent.learner.tail_valid)) == 3 * 48 - size
  # Learning started once 64 items were in and kept the sample/insert
  # ratio within the limiter's bounds.
  assert int(agent.learner.train.step) > 0
  assert bool(table.can_insert(replay, 48))
  assert not bool(table.can_sample(replay, 32))
  prioritized = loss_name.startswith('Prioritized')
  priorities = np.asarray(replay.priorities)[:size]
  # Prioritized losses write |td| back, others leave the insert priority 1.
  assert np.any(priorities != 1.0) == prioritized
  assert agent.env_steps == 3 * 48


def test_kill_and_resume_is_exact(tmp_path):
  # The replay, n-step tails and counters, and the envs in flight; both
  # epochs left in one compiled call give the same numbers as one by one.
  resume.assert_resumes_exactly(
    lambda d: _agent('PrioritizedDoubleQLearning', output_dir=d), str(tmp_path)
  )


def test_learns_gymnax_cartpole():
  agent = _agent(
    'QLearning',
    model_fn=functools.partial(
      models.Quality, body=functools.partial(models.MLP, layer_widths=(64, 64))
    ),
    batch_size=32,
    n_step=3,
    min_replay_size=500,
    max_replay_size=20_000,
    samples_per_insert=16.0,
    target_update_period=100,
    num_sgd_steps_per_step=4,
    epsilon=lambda: value_agents.linear_epsilon(1.0, 0.05, 3_000),
    learning_rate=1e-3,
    n_interactions_per_epoch=500,
  )
  agent.run(8)  # 4000 env steps, about 1000 updates.
  returns = _greedy_returns(agent)
  # A random policy averages about 22; the cap is 200.
  assert float(jnp.mean(returns)) >= 150.0


def _greedy_returns(agent, n_episodes=8):
  return evaluate.evaluate(
    agent.task.jax_env,
    agent.program.policy(0.0),
    agent.learner,
    jax.random.PRNGKey(0),
    n_episodes,
    200,
  )


@pytest.mark.two_devices
def test_seed_batch_reproduces_each_seed_alone():
  # The batch runs the single seed's program vmapped (and with two devices,
  # split over them): equal up to float rounding; integer keys exactly.
  batch = _agent('PrioritizedDoubleQLearning', seed=3)
  batch.use_seeds(2)
  batch.run(2)
  alone = _agent('PrioritizedDoubleQLearning', seed=4)
  alone.run(2)
  batched = batch.runner.learner_of(1)
  assert int(batched.train.step) == int(alone.learner.train.step) > 0
  np.testing.assert_array_equal(batched.replay.keys, alone.learner.replay.keys)
  for a, b in zip(jax.tree.leaves(batched), jax.tree.leaves(alone.learner)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  leaf = jax.tree.leaves(batch.runner.learner)[0]
  assert len(leaf.sharding.device_set) == jax.local_device_count()


@pytest.mark.parametrize('config', ['dqn_cartpole', 'acme_dqn_cartpole'])
def test_epochs_counted_in_trajectories_are_refused_on_the_device_path(config):
  # Fixed-length device rollouts cannot end an epoch after n episodes.
  root = pathlib.Path(__file__).resolve().parents[2]
  configurables.parse([str(root / f'gin/{config}.gin')])
  agent = configurables.query('train_rl.agent_class').selector
  small = [
    "RLTask.env = 'gymnax:CartPole-v1'",
    f'{agent}.n_interactions_per_epoch = None',
    f'{agent}.n_trajectories_per_epoch = 8',
  ]
  configurables.parse([str(root / f'gin/{config}.gin')], small)
  with pytest.raises(ValueError, match='set n_interactions_per_epoch'):
    configurables.train_rl(output_dir=None, build_only=True)
