"""Tests of the separate-network actor-critic agents (A2C, PPO, AWR, ...)."""

import functools

import gymnasium as gym
import jax
import numpy as np
import pytest

from trax_rl import advantages, evaluation
from trax_rl import task as task_lib
from trax_rl.agents.actor_critic import algorithms as ac
from trax_rl.algorithms import actor_critic as ac_program
from trax_rl.device import rollout as rollout_lib
from trax_rl.networks import models
from trax_rl.testing import fake_envs

SMALL = functools.partial(models.MLP, layer_widths=(16,))
TINY = dict(
  policy_model=functools.partial(models.Policy, body=SMALL),
  value_model=functools.partial(models.Value, body=SMALL),
  policy_batch_size=8,
  value_batch_size=8,
  policy_train_steps_per_epoch=2,
  value_train_steps_per_epoch=2,
)


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _states(agent):
  """The agent's train states by name ('policy', 'value' or 'joint')."""
  return agent.learner.states


def _counting_task(n_envs=2, **kwargs):
  return task_lib.RLTask(
    lambda: fake_envs.CountingEnv(lengths=(3, 4)),
    initial_trajectories=0,
    gamma=0.9,
    n_envs=n_envs,
    **kwargs,
  )


class MultiDiscreteEnv(gym.Env):
  """Two sub-actions of 3 and 2 values; reward 1 if both are 0; 4 steps."""

  def __init__(self):
    self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    self.action_space = gym.spaces.MultiDiscrete([3, 2])
    self._t = 0

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._t = 0
    return np.zeros(2, np.float32), {}

  def step(self, action):
    self._t += 1
    reward = float(np.all(np.asarray(action) == 0))
    return np.full(2, self._t / 4, np.float32), reward, self._t >= 4, False, {}


def test_pack_rollouts_env_by_env():
  # Env 0: a terminated episode of 2 steps; env 1: one valid step, cut
  # (a boundary: it bootstraps), then an invalid one.
  obs = np.array([[[0.0, 0.0], [5.0, 0.0]], [[1.0, 1.0], [9.0, 9.0]]])
  rollout = rollout_lib.Rollout(
    observation=obs.astype(np.float32),
    action=np.array([[1, 1], [0, 0]]),
    reward=np.array([[1.0, 3.0], [2.0, 7.0]], np.float32),
    terminated=np.array([[False, False], [True, False]]),
    truncated=np.zeros((2, 2), bool),
    next_observation=(obs + 1).astype(np.float32),
    agent_info={'dist_inputs': np.arange(8.0).reshape(2, 2, 2)},
    episode_return=np.zeros((2, 2), np.float32),
    valid=np.array([[True, True], [True, False]]),
  )
  data = jax.jit(ac_program.pack, static_argnums=1)(rollout, False)
  np.testing.assert_array_equal(data.observation[:, 0], [0.0, 1.0, 5.0, 9.0])
  np.testing.assert_array_equal(data.action, [1, 0, 1, 0])
  np.testing.assert_array_equal(data.reward, [1.0, 2.0, 3.0, 0.0])
  np.testing.assert_array_equal(data.terminal, [0.0, 1.0, 0.0, 0.0])
  np.testing.assert_array_equal(data.boundary, [0.0, 0.0, 1.0, 0.0])
  np.testing.assert_array_equal(data.mask, [1.0, 1.0, 1.0, 0.0])
  np.testing.assert_allclose(data.dist_inputs[:, 1], [1.0, 5.0, 3.0, 7.0])


def test_valid_minibatches_are_passes_over_the_valid_steps():
  mask = np.array([1, 0, 1, 1, 0, 1, 1, 1], np.float32)  # 6 valid
  idx = np.asarray(
    ac_program.valid_minibatches(jax.random.PRNGKey(0), mask, (4, 3), 4)
  )
  valid = [i for i in range(8) if mask[i]]
  flat = idx.reshape(-1)
  assert sorted(flat[:6]) == valid and sorted(flat[6:]) == valid


def test_passes_cover_every_step_once_per_pass():
  idx = ac_program.passes(jax.random.PRNGKey(0), {'x': (4, 3)}, 6)['x']
  assert idx.shape == (4, 3)
  flat = np.asarray(idx).reshape(-1)
  assert sorted(flat[:6]) == list(range(6))
  assert sorted(flat[6:]) == list(range(6))


def test_ppo_learns_cartpole():
  body = functools.partial(models.MLP, layer_widths=(64, 64), activation='tanh')
  task = task_lib.RLTask(
    'CartPole-v1', initial_trajectories=0, gamma=0.98, n_envs=8, seed=0
  )
  agent = ac.PPO(
    task,
    policy_model=functools.partial(models.Policy, body=body),
    value_model=functools.partial(models.Value, body=body),
    policy_lr_schedule=lambda: 1e-3,
    value_lr_schedule=lambda: 1e-3,
    policy_batch_size=256,
    value_batch_size=256,
    policy_train_steps_per_epoch=20,
    value_train_steps_per_epoch=20,
    advantage_estimator=functools.partial(advantages.gae, lambda_=0.8),
    entropy_coeff=0.0,
    n_interactions_per_epoch=256,
    seed=0,
  )
  agent.run(50)
  played = evaluation.evaluate(agent, 5)
  # 12.8k env steps (the benchmark reaches 500 by 40k). A random policy
  # scores about 20.
  assert played['return']['mean'] >= 100


def test_gaussian_actions_respect_bounds_and_temperature_zero():
  task = task_lib.RLTask(
    fake_envs.ContinuousEnv, initial_trajectories=0, n_envs=2, seed=0
  )
  agent = ac.PPO(
    task, action_std=3.0, n_interactions_per_epoch=10, seed=1, **TINY
  )
  rollout = agent.runner.source.collect(agent.runner.learner).rollout
  sampled = rollout.action.reshape(-1)
  assert np.any(np.abs(sampled) > 1.0)  # std 3 leaves the box often.
  # The env received the action clipped into its box: reward -|a - .5|.
  np.testing.assert_allclose(
    rollout.reward.reshape(-1),
    -np.abs(np.clip(sampled, -1, 1) - 0.5),
    rtol=1e-6,
  )
  obs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32) * 50
  action, info = agent.make_policy(0.0)(obs, np.ones(4, bool))
  mean = info['dist_inputs'][:, :1]
  np.testing.assert_allclose(action, mean, rtol=1e-6)


@pytest.mark.parametrize(
  'agent_class, kwargs',
  [
    (
      ac.AWR,
      dict(
        n_replay_epochs=3,
        value_evals_per_epoch=2,
        n_shared_layers=1,
        # Frozen policy: its shared layer must be the value net's after.
        policy_lr_schedule=lambda: 0.0,
      ),
    ),
    (
      ac.SamplingAWR,
      dict(
        value_model=functools.partial(models.ActionValue, body=SMALL),
        q_value_n_samples=2,
        q_value_aggregate='logsumexp',
        reweight=True,
        n_replay_epochs=2,
      ),
    ),
  ],
)
def test_off_policy_agents_train(agent_class, kwargs):
  agent = agent_class(
    _counting_task(), n_interactions_per_epoch=8, seed=0, **{**TINY, **kwargs}
  )
  before = _leaves(_states(agent)['value'].params)
  agent.run(2)
  after = _leaves(_states(agent)['value'].params)
  assert any(not np.allclose(a, b) for a, b in zip(before, after))
  assert int(_states(agent)['policy'].step) == 4
  assert int(_states(agent)['value'].step) == 4
  if kwargs.get('n_shared_layers'):
    policy = _states(agent)['policy'].params['params']
    value = _states(agent)['value'].params['params']
    for a, b in zip(
      _leaves(policy['MLP_0']['Dense_0']), _leaves(value['MLP_0']['Dense_0'])
    ):
      np.testing.assert_array_equal(a, b)


def test_sampling_awr_on_continuous_actions_with_learned_std():
  task = task_lib.RLTask(
    fake_envs.ContinuousEnv, initial_trajectories=0, n_envs=2, seed=0
  )
  agent = ac.SamplingAWR(
    task,
    learn_std='separate',
    q_value_n_samples=3,
    n_interactions_per_epoch=10,
    seed=0,
    **{
      **TINY,
      'value_model': functools.partial(models.ActionValue, body=SMALL),
    },
  )
  agent.run(2)
  assert agent.policy_distribution.n_inputs == 2
  assert int(_states(agent)['value'].step) == 4


def test_a2c_on_multi_discrete_actions():
  task = task_lib.RLTask(MultiDiscreteEnv, initial_trajectories=0, n_envs=2)
  agent = ac.A2C(task, n_interactions_per_epoch=8, seed=0, **TINY)
  before = _leaves(_states(agent)['policy'].params)
  agent.run(1)
  after = _leaves(_states(agent)['policy'].params)
  assert any(not np.allclose(a, b) for a, b in zip(before, after))
  action, info = agent.make_policy(1.0, evaluation=True)(
    np.zeros((2, 2), np.float32), np.ones(2, bool)
  )
  assert action.shape == (2, 2) and info['dist_inputs'].shape == (2, 5)
  assert np.all(action[:, 0] < 3) and np.all(action[:, 1] < 2)


def test_bad_configurations():
  with pytest.raises(ValueError, match='on-policy'):
    ac.PPO(_counting_task(), n_replay_epochs=2, n_interactions_per_epoch=8)
  with pytest.raises(ValueError, match='ActionValue'):
    ac.SamplingAWR(
      _counting_task(), value_model=models.Value, n_interactions_per_epoch=8
    )
  with pytest.raises(ValueError, match='offline'):
    ac.AWR(_counting_task(), offline=True, n_interactions_per_epoch=8)
  with pytest.raises(ValueError, match='q_value_aggregate'):
    ac.AWR(
      _counting_task(), q_value_aggregate='median', n_interactions_per_epoch=8
    )


def test_save_and_restore_mid_run_with_observation_statistics(tmp_path):
  def make():
    return ac.PPO(
      _counting_task(),
      normalize_observations=True,
      n_interactions_per_epoch=8,
      n_eval_episodes=2,
      output_dir=str(tmp_path),
      seed=3,
      **TINY,
    )

  agent = make()
  agent.run(2)
  # Statistics saw the 2 x 8 collected observations, none of the evals.
  assert int(agent.observation_statistics.count) == 16
  assert float(agent.observation_statistics.mean[0]) > 0
  agent.make_policy(1.0, evaluation=True)(
    np.ones((2, 2), np.float32), np.ones(2, bool)
  )
  assert int(agent.observation_statistics.count) == 16
  restored = make()
  assert restored.restore()
  assert restored.current_epoch == 2
  for x, y in zip(_leaves(agent.learner), _leaves(restored.learner)):
    np.testing.assert_array_equal(x, y)
  for x, y in zip(
    agent.observation_statistics, restored.observation_statistics
  ):
    np.testing.assert_array_equal(x, y)
  restored.run(1)
  assert restored.current_epoch == 3
  assert int(_states(restored)['policy'].step) == 6
  assert int(restored.observation_statistics.count) == 24


@pytest.mark.parametrize('agent_class', [ac.PPO, ac.PPOJoint])
def test_train_on_batch_is_a_pure_function_of_its_arguments(agent_class):
  tiny = TINY
  if agent_class is ac.PPOJoint:
    tiny = dict(batch_size=8, train_steps_per_epoch=2)
  agent = agent_class(
    _counting_task(), n_interactions_per_epoch=8, seed=0, **tiny
  )
  rollout = agent.runner.source.collect(agent.runner.learner).rollout
  data = ac_program.pack(jax.tree.map(lambda x: x[0], rollout), False)
  key = jax.random.PRNGKey(1)
  idx = ac_program.passes(key, agent.layout.minibatch_shapes(), 8)
  states = _states(agent)
  # Inside an outer jit, as the programs call it.
  train = jax.jit(lambda s, d, i, k: agent.layout.train_on_batch(s, d, i, k))
  out_a, metrics_a = train(states, data, idx, key)
  out_b, metrics_b = train(states, data, idx, key)
  for a, b in zip(_leaves(out_a), _leaves(out_b)):
    np.testing.assert_array_equal(a, b)
  assert set(out_a) == set(states)
  assert all(np.isfinite(float(v)) for v in metrics_a.values())
  # The states were not touched; every network took its updates.
  for name, state in states.items():
    assert int(state.step) == 0 and int(out_a[name].step) == 2


def _one_epoch_record(agent_class, n_interactions=8, **kwargs):
  agent = agent_class(
    _counting_task(),
    n_interactions_per_epoch=n_interactions,
    seed=0,
    **{**TINY, **kwargs},
  )
  records = []
  agent.run(1, callbacks=[lambda a, record: records.append(record)])
  return agent, records[0]


@pytest.mark.parametrize('agent_class', [ac.PPO, ac.AWR])
def test_supervised_evals_are_reported_and_change_no_update(agent_class):
  # Trax's per-epoch evals: rounds of updates, each ending with the loss
  # averaged over `*_eval_steps` batches, the last round's reported.
  rounds = dict(
    policy_train_steps_per_epoch=4,
    value_train_steps_per_epoch=4,
    policy_evals_per_epoch=2,
    value_evals_per_epoch=2,
  )
  off, quiet = _one_epoch_record(
    agent_class, policy_eval_steps=0, value_eval_steps=0, **rounds
  )
  on, loud = _one_epoch_record(
    agent_class, policy_eval_steps=3, value_eval_steps=2, **rounds
  )
  assert not any(k.startswith(('policy_eval/', 'value_eval/')) for k in quiet)
  for name in ('policy_eval/loss', 'value_eval/loss'):
    assert np.isfinite(loud[name])
  # The same updates on the same batches; the two programs differ only by
  # the evals, which XLA may fuse with them, so equal up to float rounding.
  # An eval that took a batch, a key or an update would move them by far
  # more than 1e-5.
  for name in ('policy', 'value'):
    for a, b in zip(
      _leaves(_states(off)[name].params), _leaves(_states(on)[name].params)
    ):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('agent_class', [ac.PPO, ac.AWR])
def test_each_round_evaluates_its_own_batches(agent_class):
  # 32 steps and batches of 8: each round's minibatches are other rows of
  # the epoch's passes, and each eval takes its round's first rows. With one
  # round of 4 updates the eval reads minibatches 0 and 1; with two rounds
  # of 2 the last eval reads minibatches 2 and 3. The parameters evaluated
  # are the same (4 updates on minibatches 0-3), the batches are not, so
  # the losses differ by more than rounding. (With 8 steps, as above, every
  # minibatch is a permutation of the same 8 steps and the mean losses are
  # equal up to the order of summation.)
  rounds = dict(
    policy_train_steps_per_epoch=4,
    value_train_steps_per_epoch=4,
    policy_eval_steps=2,
    value_eval_steps=2,
    n_interactions=32,
  )
  _, one = _one_epoch_record(
    agent_class, policy_evals_per_epoch=1, value_evals_per_epoch=1, **rounds
  )
  _, two = _one_epoch_record(
    agent_class, policy_evals_per_epoch=2, value_evals_per_epoch=2, **rounds
  )
  assert one['policy/loss'] == pytest.approx(two['policy/loss'], rel=1e-5)
  for name in ('policy_eval/loss', 'value_eval/loss'):
    assert one[name] != pytest.approx(two[name], rel=1e-3), name


def test_evals_per_epoch_must_divide_the_updates():
  with pytest.raises(ValueError, match='policy_evals_per_epoch'):
    ac.PPO(
      _counting_task(),
      n_interactions_per_epoch=8,
      **dict(TINY, policy_evals_per_epoch=3),
    )
  with pytest.raises(ValueError, match='value_eval_steps'):
    ac.PPO(
      _counting_task(),
      n_interactions_per_epoch=8,
      **dict(TINY, value_eval_steps=-1),
    )
