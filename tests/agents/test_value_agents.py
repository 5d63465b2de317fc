"""Tests for trax_rl.agents.value_agents: Trax's DQN loss and agent."""

import functools
import os
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest

from trax_rl import advantages, evaluation, task, trajectory, types
from trax_rl.agents import value_agents
from trax_rl.losses import n_step_value
from trax_rl.networks import base as networks_base
from trax_rl.networks import models
from trax_rl.testing import fake_envs

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
# Q(o) = w * o: observations are the Q-values themselves, [A] per step.
Q_NET = networks_base.Network(
  init=lambda key: {'w': jnp.float32(1.0)},
  apply=lambda p, obs: types.QOutput(q_values=p['w'] * obs),
)
SMALL_Q = functools.partial(
  models.Quality, body=functools.partial(models.MLP, layer_widths=(16,))
)


def _slices(obs, action, reward, done, mask):
  """A [B, T] TimeStepBatch; obs [B, T, A]."""
  reward = np.asarray(reward, np.float32)
  return trajectory.TimeStepBatch(
    observation=np.asarray(obs, np.float32),
    action=np.asarray(action, np.int32),
    reward=reward,
    done=np.asarray(done, bool),
    mask=np.asarray(mask, np.float32),
    dist_inputs=None,
    env_info=trajectory.EnvInfo(np.ones_like(reward), np.ones_like(reward)),
    return_=np.zeros_like(reward),
    agent_info={},
  )


def _loss(margin, gamma=0.5, **kwargs):
  return n_step_value.NStepValueLoss(
    advantage_estimator=advantages.td_k(gamma, margin),
    margin=margin,
    obs_ndim=1,
    **kwargs,
  )


class NStepValueLossTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_one_step_targets(self):
    # gamma .5, margin 1, online = target params (w = 1).
    # Slice 0: running: target 1 + .5 * max(4, 2) = 3; Q(o0, a=1) = 1.
    # Slice 1: terminated at row 0: target 2; Q(o0, a=0) = 3.
    # Slice 2: truncated after one step: row 1 is the final observation
    #   (mask 0, done True as padding); it still bootstraps: 1 + .5 * 6 = 4.
    batch = _slices(
      obs=[[[0, 1], [4, 2]], [[3, 0], [9, 9]], [[0, 0], [6, 1]]],
      action=[[1, 0], [0, 0], [1, 0]],
      reward=[[1, 0], [2, 0], [1, 0]],
      done=[[0, 0], [1, 1], [0, 1]],
      mask=[[1, 1], [1, 0], [1, 0]],
    )
    params = Q_NET.init(None)
    fn = self.variant(functools.partial(_loss(1, smoothl1loss=False), Q_NET))
    loss, extra = fn(params, params, batch, None)
    # Errors q - target: 1 - 3 = -2, 3 - 2 = 1, 0 - 4 = -4.
    np.testing.assert_allclose(loss, (4 + 1 + 16) / 3, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['returns_mean'], 3, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['value_mean'], 4 / 3, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_n_step_stops_at_the_final_observation(self):
    # margin 2: slice 0 runs on: 1 + .5 * 1 + .25 * max(8, 0) = 3.5.
    # Slice 1 is truncated after its first step: row 1 is the final
    # observation and row 2 zero padding; bootstrap from row 1 with one
    # discount only: 1 + .5 * 6 = 4 (not .25 * Q(padding)).
    batch = _slices(
      obs=[[[0, 0], [0, 0], [8, 0]], [[0, 0], [6, 1], [0, 0]]],
      action=[[0, 0, 0], [0, 0, 0]],
      reward=[[1, 1, 0], [1, 0, 0]],
      done=[[0, 0, 0], [0, 1, 1]],
      mask=[[1, 1, 1], [1, 0, 0]],
    )
    params = Q_NET.init(None)
    fn = self.variant(functools.partial(_loss(2, smoothl1loss=False), Q_NET))
    _, extra = fn(params, params, batch, None)
    np.testing.assert_allclose(extra.metrics['returns_mean'], 3.75, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_double_dqn_huber_and_scale(self):
    # o0 = [3, 0], a = 0, r = 1, o1 = [4, 2]; online w = 1, target w = -1.
    batch = _slices(
      obs=[[[3, 0], [4, 2]]],
      action=[[0, 0]],
      reward=[[1, 0]],
      done=[[0, 0]],
      mask=[[1, 1]],
    )
    online = {'w': jnp.float32(1.0)}
    target = {'w': jnp.float32(-1.0)}
    # Target Q(o1) = [-4, -2]. Plain max: -2 -> target 1 - 1 = 0.
    # Double: online argmax = 0 -> -4 -> target 1 - 2 = -1.
    plain = self.variant(functools.partial(_loss(1), Q_NET))
    double = self.variant(functools.partial(_loss(1, double_dqn=True), Q_NET))
    np.testing.assert_allclose(
      plain(online, target, batch, None)[1].metrics['returns_mean'], 0
    )
    loss, extra = double(online, target, batch, None)
    np.testing.assert_allclose(extra.metrics['returns_mean'], -1)
    # Huber of error 3 - (-1) = 4: 4 - .5 = 3.5.
    np.testing.assert_allclose(loss, 3.5)
    # Scaled: the network predicts Q / 10, so Q = 30, target 1 + .5 * -40
    # = -19; error in network units (30 + 19) / 10 = 4.9 -> Huber 4.4.
    scaled = self.variant(
      functools.partial(_loss(1, double_dqn=True, value_scale=10.0), Q_NET)
    )
    loss, _ = scaled(online, target, batch, None)
    np.testing.assert_allclose(loss, 4.4, rtol=1e-6)

  def test_no_gradient_through_targets(self):
    batch = _slices([[[3, 0], [4, 2]]], [[0, 0]], [[1, 0]], [[0, 0]], [[1, 1]])
    loss = functools.partial(_loss(1), Q_NET)
    grad = jax.grad(lambda t: loss({'w': 1.0}, t, batch, None)[0])(
      {'w': jnp.float32(1.0)}
    )
    np.testing.assert_allclose(grad['w'], 0.0)


def test_trax_dense_init_is_glorot_uniform_with_tiny_biases():
  body = functools.partial(
    models.MLP, layer_widths=(32, 32), dense_init='glorot'
  )
  module = models.Quality(n_actions=2, body=body, dense_init='glorot')
  params = module.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))['params']
  layers = [params['MLP_0']['Dense_0'], params['MLP_0']['Dense_1']]
  for layer in layers + [params['Dense_0']]:
    kernel, bias = np.asarray(layer['kernel']), np.asarray(layer['bias'])
    fan_in, fan_out = kernel.shape
    limit = np.sqrt(6.0 / (fan_in + fan_out))  # Glorot uniform.
    assert np.abs(kernel).max() <= limit
    assert 0 < np.abs(bias).max() < 1e-5  # Trax's N(0, 1e-6).
  # 4 -> 32: Glorot's std is sqrt(2 / 36), LeCun's (flax's) 0.5.
  first = np.asarray(layers[0]['kernel'])
  np.testing.assert_allclose(first.std(), np.sqrt(2.0 / 36.0), rtol=0.2)
  flax_params = models.MLP(layer_widths=(32,)).init(
    jax.random.PRNGKey(0), jnp.zeros((1, 4))
  )['params']
  assert not np.any(np.asarray(flax_params['Dense_0']['bias']))
  with pytest.raises(ValueError, match="dense_init must be 'flax' or 'glorot'"):
    models.MLP(dense_init='lecun').init(
      jax.random.PRNGKey(0), jnp.zeros((1, 4))
    )


def _counting_task(**kwargs):
  kwargs.setdefault('initial_trajectories', 0)
  return task.RLTask(
    lambda: fake_envs.CountingEnv((5, 8)),
    n_envs=2,
    gamma=0.9,
    max_steps=10,
    **kwargs,
  )


def _dqn(t, **kwargs):
  kwargs.setdefault('n_interactions_per_epoch', 20)
  kwargs.setdefault('sync_freq', 2)
  return value_agents.DQN(
    t,
    value_model=SMALL_Q,
    value_batch_size=4,
    value_train_steps_per_epoch=3,
    max_slice_length=4,
    margin=2,
    **kwargs,
  )


class DQNAgentTest(absltest.TestCase):
  def test_continuous_action_space_is_refused(self):
    t = task.RLTask(fake_envs.ContinuousEnv, initial_trajectories=0)
    with self.assertRaisesRegex(
      ValueError, r'^DQN needs a Discrete action space, got Box\('
    ):
      _dqn(t)

  def test_epochs_train_and_explore_by_schedule(self):
    agent = _dqn(_counting_task(), double_dqn=True)
    agent.run(2)
    self.assertEqual(int(agent.learner.train.step), 6)
    self.assertEqual(int(agent.learner.observed), 2)
    # Trax's default: max(0.1, 0.99**epoch).
    self.assertAlmostEqual(agent.exploration_rate(), 0.99**2, places=6)
    # Sync every 2 updates: after 6 the target equals the params.
    chex.assert_trees_all_close(
      agent.learner.train.target_params, agent.learner.train.params
    )

  def test_target_takes_the_params_at_each_epoch_start(self):
    # Trax's DQN copies the params into the target network before every
    # epoch's updates (trax/rl/training.py, ValueAgent.train_epoch), so a
    # sync_freq longer than an epoch never leaves the target staler.
    agent = _dqn(_counting_task(), sync_freq=1000)
    initial = jax.tree.map(np.asarray, agent.learner.train.params)
    agent.run(1)
    after_one = jax.tree.map(np.asarray, agent.learner.train.params)
    chex.assert_trees_all_close(agent.learner.train.target_params, initial)
    agent.run(1)
    self.assertEqual(int(agent.learner.train.step), 6)
    chex.assert_trees_all_close(agent.learner.train.target_params, after_one)
    with self.assertRaises(AssertionError):
      chex.assert_trees_all_close(after_one, initial)

  def test_without_epoch_syncs_only_sync_freq_syncs(self):
    agent = _dqn(_counting_task(), sync_freq=1000, sync_each_epoch=False)
    initial = jax.tree.map(np.asarray, agent.learner.train.params)
    agent.run(2)
    chex.assert_trees_all_close(agent.learner.train.target_params, initial)

  def test_greedy_and_random_acting(self):
    agent = _dqn(_counting_task(), exploration_rate=1.0)
    obs = np.stack([np.array([i, -i], np.float32) for i in range(64)])
    first = np.zeros(64, bool)
    q = agent.network.apply(agent.learner.train.params, obs).q_values
    greedy, info = agent.make_policy(0.0, evaluation=True)(obs, first)
    np.testing.assert_array_equal(greedy, np.argmax(q, axis=-1))
    self.assertEqual(info, {})
    explore, _ = agent.make_policy(1.0, evaluation=False)(obs, first)
    self.assertEqual(set(explore.tolist()), {0, 1})
    self.assertGreater(np.mean(explore != greedy), 0.2)


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_resume_equals_uninterrupted(tmp_path):
  # Whole episodes per epoch, so the restarted envs replay the same steps.
  def make(out):
    return _dqn(
      _counting_task(initial_trajectories=1),
      n_interactions_per_epoch=None,
      n_trajectories_per_epoch=3,
      n_replay_epochs=2,
      output_dir=str(out),
      n_eval_episodes=1,
    )

  straight = make(tmp_path / 'a')
  straight.run(3)
  first = make(tmp_path / 'b')
  first.run(2)
  resumed = make(tmp_path / 'b')
  resumed.run(3, n_epochs_is_total_epochs=True)
  assert resumed.current_epoch == 3 and int(resumed.learner.train.step) == 9
  for x, y in zip(_leaves(straight.learner), _leaves(resumed.learner)):
    np.testing.assert_array_equal(x, y)
  assert straight.exploration_rate() == resumed.exploration_rate()
  assert straight.avg_returns == resumed.avg_returns


def test_cli_refuses_a_continuous_env(tmp_path):
  result = subprocess.run(
    [
      sys.executable,
      '-m',
      'trax_rl.cli',
      'train',
      '--config_file',
      os.path.join(ROOT, 'gin', 'dqn_cartpole.gin'),
      '--config',
      "RLTask.env='Pendulum-v1'",
      '--output_dir',
      str(tmp_path / 'out'),
      '--no_progress',
    ],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert result.returncode == 2
  lines = result.stderr.strip().splitlines()
  errors = [line for line in lines if line.startswith('trax-rl: error:')]
  assert errors == lines[-1:], result.stderr
  assert 'Traceback' not in result.stderr
  assert errors[0].startswith(
    'trax-rl: error: DQN needs a Discrete action space, got Box('
  )


def test_learns_cartpole():
  # A small budget (26k env steps) with a lower bar than the benchmark's 475:
  # the best of the greedy evals every 2k steps from 4k on. The float bits,
  # and so the run, depend on the CPU's instruction set: at 14k steps seed 0
  # passed on one machine and peaked at 103 on a 2-CPU AMD EPYC (AVX2).
  # There, with 26k steps, seeds 0-3 peaked at 167, 500, 500 and 465.
  t = task.RLTask(
    'CartPole-v1', initial_trajectories=0, n_envs=8, gamma=0.99, seed=0
  )
  agent = value_agents.DQN(
    t,
    value_model=functools.partial(
      models.Quality,
      body=functools.partial(models.MLP, layer_widths=(64, 64)),
    ),
    value_lr_schedule=lambda: 2e-3,
    exploration_rate=lambda: (
      lambda epoch: jnp.maximum(0.04, 0.8 ** jnp.asarray(epoch, jnp.float32))
    ),
    value_batch_size=16,
    value_train_steps_per_epoch=250,
    max_slice_length=16,
    margin=3,
    double_dqn=True,
    sync_freq=256,
    n_replay_epochs=100,
    n_interactions_per_epoch=500,
    seed=0,
  )
  agent.run(4)
  evals = []
  for _ in range(12):
    agent.run(4)
    evals.append(evaluation.evaluate(agent, 8)['return']['mean'])
  assert max(evals) >= 150, evals


if __name__ == '__main__':
  pytest.main([__file__])
