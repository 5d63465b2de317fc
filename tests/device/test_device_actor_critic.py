"""The actor-critics on the device path (trax_rl.device.actor_critic)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import advantages, configurables, jax_envs
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl.agents.actor_critic import algorithms
from trax_rl.agents.actor_critic import data as data_lib
from trax_rl.device import batches, rollout, seeds
from trax_rl.networks import models
from trax_rl.testing import fake_jax_envs

MLP = functools.partial(models.MLP, layer_widths=(16,), activation='tanh')


def _host_trajectories(steps):
  """The rollout cut into host Trajectories, as RLTask's collector does."""
  steps = jax.device_get(steps)
  n_steps, n_envs = steps.reward.shape
  trajs = []
  for i in range(n_envs):
    traj = trajectory_lib.Trajectory(steps.observation[0, i])
    for t in range(n_steps):
      info = {'dist_inputs': steps.agent_info['dist_inputs'][t, i]}
      traj.extend(
        steps.action[t, i],
        steps.reward[t, i],
        steps.next_observation[t, i],
        steps.terminated[t, i],
        steps.truncated[t, i],
        info,
      )
      if traj.done and t + 1 < n_steps:
        trajs.append(traj)
        traj = trajectory_lib.Trajectory(steps.observation[t + 1, i])
    trajs.append(traj)
  return trajs


def test_packed_steps_and_gae_equal_the_host_estimator():
  env = jax_envs.make_jax_env('gymnax:CartPole-v1')
  carry = rollout.init_carry(env, jax.random.PRNGKey(2), 3)

  def policy(params, key, obs):
    del params
    logits = obs[:, :2]
    return jax.random.categorical(key, logits), {'dist_inputs': logits}

  _, steps = rollout.rollout(env, policy, None, carry, 60, max_steps=15)
  device = data_lib.EpochData(**batches.packed_steps(steps))
  host = data_lib.pack_trajectories(
    _host_trajectories(steps), 2, np.zeros(4, np.float32)
  )
  for name, d, h in zip(data_lib.EpochData._fields, device, host):
    np.testing.assert_allclose(d, h, rtol=1e-6, err_msg=name)
  assert host.terminal.sum() > 1 and host.boundary.sum() > 3

  def gae(data):
    value = lambda obs: jnp.sum(obs, axis=-1)  # noqa: E731
    return data_lib.advantages_and_targets(
      advantages.gae(gamma=0.9, margin=0, lambda_=0.8),
      0,
      0.9,
      data,
      value(data.observation),
      value(data.next_observation),
    )

  for d, h in zip(jax.jit(gae)(device), gae(host)):
    np.testing.assert_allclose(d, h, rtol=1e-5, atol=1e-6)


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
  before = jax.tree.map(np.asarray, agent.device_learner())
  agent.run(1)
  assert agent.device_runner() is not None
  after = agent.device_learner()
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
  agents = [
    _agent(algorithms.PPO, 'gymnax:CartPole-v1', seed=s, **SEPARATE)
    for s in (3, 4)
  ]
  seeds.SeedBatch(agents).run(2)
  alone = _agent(algorithms.PPO, 'gymnax:CartPole-v1', seed=4, **SEPARATE)
  alone.run(2)
  for a, b in zip(
    jax.tree.leaves(agents[1].device_learner()),
    jax.tree.leaves(alone.device_learner()),
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
