"""The actor-critics on the device source: packing, GAE, epochs, seeds."""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import advantages, configurables, jax_envs
from trax_rl import task as task_lib
from trax_rl.agents.actor_critic import algorithms
from trax_rl.algorithms import actor_critic as ac_program
from trax_rl.algorithms.layouts import data as data_lib
from trax_rl.device import rollout
from trax_rl.networks import models
from trax_rl.sources import device as device_source
from trax_rl.testing import fake_jax_envs, resume

MLP = functools.partial(models.MLP, layer_widths=(16,), activation='tanh')


def _gae_by_hand(steps, values_of, gamma, lambda_):
  """GAE per env, step by step backwards (a transcription of the usual
  recursion): bootstrap from V(s') unless the episode terminated; a
  trajectory ends at a termination, a truncation or the rollout's end."""
  steps = jax.device_get(steps)
  n_steps, n_envs = steps.reward.shape
  adv = np.zeros((n_steps, n_envs))
  for i in range(n_envs):
    running = 0.0
    for t in reversed(range(n_steps)):
      v = values_of(steps.observation[t, i])
      v_next = values_of(steps.next_observation[t, i])
      if steps.terminated[t, i]:
        v_next = 0.0
      ends = steps.terminated[t, i] or steps.truncated[t, i] or t == n_steps - 1
      delta = steps.reward[t, i] + gamma * v_next - v
      running = delta + (0.0 if ends else gamma * lambda_ * running)
      adv[t, i] = running
  return adv.T.reshape(-1)  # Env-major, as packed.


def test_packed_rollout_gae_equals_the_recursion_by_hand():
  env = jax_envs.make_jax_env('gymnax:CartPole-v1')
  carry = rollout.init_carry(env, jax.random.PRNGKey(2), 3)

  def policy(params, key, obs):
    del params
    logits = obs[:, :2]
    return jax.random.categorical(key, logits), {'dist_inputs': logits}

  _, steps = rollout.rollout(env, policy, None, carry, 60, max_steps=15)
  data = ac_program.pack(steps, offline=False)
  assert data.terminal.sum() > 1 and data.boundary.sum() > 3
  value = lambda obs: jnp.sum(obs, axis=-1)  # noqa: E731
  adv, targets = jax.jit(
    lambda d: data_lib.advantages_and_targets(
      advantages.gae(gamma=0.9, margin=0, lambda_=0.8),
      0,
      0.9,
      d,
      value(d.observation),
      value(d.next_observation),
    )
  )(data)
  want = _gae_by_hand(steps, lambda o: float(np.sum(o)), 0.9, 0.8)
  np.testing.assert_allclose(adv, want, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(
    targets, want + np.asarray(value(data.observation)), rtol=1e-4, atol=1e-4
  )


def _agent(cls, env, **kwargs):
  task = task_lib.RLTask(env, n_envs=4, max_steps=50, initial_trajectories=0)
  return cls(task, n_interactions_per_epoch=64, **kwargs)


SEPARATE = dict(
  policy_model=functools.partial(models.Policy, body=MLP),
  value_model=functools.partial(models.Value, body=MLP),
  policy_batch_size=32,
  value_batch_size=32,
  policy_train_steps_per_epoch=2,
  value_train_steps_per_epoch=2,
)
JOINT = dict(
  joint_model=functools.partial(models.PolicyAndValue, body=MLP),
  batch_size=32,
  train_steps_per_epoch=2,
)


@pytest.mark.parametrize(
  'cls, env, kwargs',
  [
    (algorithms.PPO, 'gymnax:CartPole-v1', SEPARATE),
    (algorithms.PPOJoint, 'gymnax:CartPole-v1', JOINT),
    (algorithms.AWR, 'gymnax:CartPole-v1', SEPARATE),
    (algorithms.A2C, fake_jax_envs.PointEnv(), SEPARATE),
  ],
  ids=['ppo', 'ppo_joint', 'awr', 'a2c_gaussian'],
)
def test_one_device_epoch_trains_every_network(cls, env, kwargs):
  agent = _agent(cls, env, **kwargs)
  before = jax.tree.map(np.asarray, agent.learner.states)
  agent.run(1)
  assert isinstance(agent.runner.source, device_source.DeviceSource)
  after = agent.learner.states
  for name in before:
    changed = jax.tree.map(
      lambda a, b: not np.allclose(a, b),
      before[name].params,
      after[name].params,
    )
    assert any(jax.tree.leaves(changed)), name


@pytest.mark.two_devices
def test_ppo_seed_batch_reproduces_each_seed_alone():
  # The batch's programs are the single agent's, vmapped (and with two
  # devices, split over them): equal up to float rounding.
  batch = _agent(algorithms.PPO, 'gymnax:CartPole-v1', seed=3, **SEPARATE)
  batch.use_seeds(2)
  batch.run(2)
  alone = _agent(algorithms.PPO, 'gymnax:CartPole-v1', seed=4, **SEPARATE)
  alone.run(2)
  for a, b in zip(
    jax.tree.leaves(batch.runner.learner_of(1)),
    jax.tree.leaves(alone.learner),
  ):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_ppo_learns_on_gymnax_cartpole():
  configurables.parse(
    ['gin/gymnax/ppo_cartpole.gin'], ['train_rl.n_epochs = 150']
  )
  records = []
  configurables.train_rl(
    output_dir=None, callbacks=[lambda agent, record: records.append(record)]
  )
  assert records[-1]['episode_return_mean'] > 150, records[-1]


def test_ppo_pendulum_normalizes_observations_on_the_device(tmp_path):
  # gin/ppo_pendulum.gin (observation normalization) with the env on
  # gymnax: the running statistics live in the learner, count every
  # collected observation, resume exactly, and evaluation leaves them be.
  root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

  def make(output_dir):
    configurables.parse(
      [os.path.join(root, 'gin', 'ppo_pendulum.gin')],
      [
        "RLTask.env = 'gymnax:Pendulum-v1'",
        'PPO.n_interactions_per_epoch = 64',
        'PPO.policy_train_steps_per_epoch = 2',
        'PPO.value_train_steps_per_epoch = 2',
        'PPO.n_eval_episodes = 1',
        'MLP.layer_widths = (8,)',
      ],
    )
    return configurables.train_rl(output_dir=output_dir, build_only=True)

  agent = resume.assert_resumes_exactly(make, str(tmp_path / 'run'))
  stats = agent.learner.stats
  assert int(stats.count) == 4 * 64
  assert np.all(np.asarray(stats.var) != 1.0)  # Moved off the prior.
  agent.evaluate()
  assert int(agent.learner.stats.count) == 4 * 64
