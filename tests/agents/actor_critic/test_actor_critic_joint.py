"""Tests of the joint policy-and-value agents (PPOJoint, A2CJoint, AWRJoint)."""

import functools

import gin
import jax
import numpy as np
import pytest

from trax_rl import configurables
from trax_rl import task as task_lib
from trax_rl.agents.actor_critic import algorithms as acj
from trax_rl.networks import models
from trax_rl.testing import fake_envs

TINY = dict(
  joint_model=functools.partial(
    models.PolicyAndValue,
    body=functools.partial(models.MLP, layer_widths=(16,)),
  ),
  batch_size=8,
  train_steps_per_epoch=2,
)


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _joint(agent):
  """The joint network's train state."""
  return agent.learner.states['joint']


def _counting_task(**kwargs):
  return task_lib.RLTask(
    lambda: fake_envs.CountingEnv(lengths=(3, 5)),
    initial_trajectories=0,
    gamma=0.9,
    n_envs=2,
    **kwargs,
  )


@pytest.mark.parametrize(
  'agent_class, kwargs',
  [
    (acj.PPOJoint, dict(value_loss_coeff=0.5)),
    (acj.A2CJoint, {}),
    (
      acj.AWRJoint,
      dict(n_replay_epochs=3, supervised_evals_per_epoch=2, beta=0.5),
    ),
  ],
)
def test_joint_agents_train(agent_class, kwargs):
  agent = agent_class(
    _counting_task(), n_interactions_per_epoch=8, seed=0, **TINY, **kwargs
  )
  before = _leaves(_joint(agent).params)
  agent.run(2)
  assert int(_joint(agent).step) == 4
  after = _leaves(_joint(agent).params)
  assert any(not np.allclose(a, b) for a, b in zip(before, after))


def test_ppo_joint_on_continuous_actions_respects_bounds():
  task = task_lib.RLTask(
    fake_envs.ContinuousEnv, initial_trajectories=0, n_envs=2, seed=0
  )
  agent = acj.PPOJoint(
    task,
    learn_std='shared',
    action_std=2.0,
    n_interactions_per_epoch=10,
    seed=0,
    **TINY,
  )
  rollout = agent.runner.source.collect(agent.runner.learner).rollout
  sampled = rollout.action.reshape(-1)
  # The env received the sampled actions clipped into its box.
  np.testing.assert_allclose(
    rollout.reward.reshape(-1),
    -np.abs(np.clip(sampled, -1, 1) - 0.5),
    rtol=1e-6,
  )
  assert np.any(np.abs(sampled) > 1.0)  # std 2 leaves the box often.
  assert agent.policy_distribution.n_inputs == 2


def test_on_policy_joint_refuses_replay():
  with pytest.raises(ValueError, match='on-policy'):
    acj.PPOJoint(
      _counting_task(), n_replay_epochs=4, n_interactions_per_epoch=8
    )
  with pytest.raises(ValueError, match='value_evals_per_epoch'):
    acj.AWRJoint(
      _counting_task(),
      train_steps_per_epoch=3,
      supervised_evals_per_epoch=2,
      n_interactions_per_epoch=8,
    )


def test_save_and_restore_mid_run(tmp_path):
  def make():
    return acj.PPOJoint(
      _counting_task(),
      normalize_observations=True,
      n_interactions_per_epoch=8,
      output_dir=str(tmp_path),
      seed=5,
      **TINY,
    )

  agent = make()
  agent.run(2)
  restored = make()
  assert restored.restore()
  assert restored.current_epoch == 2
  for x, y in zip(_leaves(agent.learner), _leaves(restored.learner)):
    np.testing.assert_array_equal(x, y)
  for x, y in zip(
    agent.observation_statistics, restored.observation_statistics
  ):
    np.testing.assert_array_equal(x, y)
  assert int(restored.observation_statistics.count) == 16
  restored.run(1)
  assert restored.current_epoch == 3 and int(_joint(restored).step) == 6


def _one_epoch_params(**kwargs):
  agent = acj.PPOJoint(
    _counting_task(seed=0), n_interactions_per_epoch=8, seed=0, **TINY, **kwargs
  )
  agent.run(1)
  return _leaves(_joint(agent).params)


def test_old_knob_name_is_an_alias_of_the_new_one():
  old = _one_epoch_params(normalize_advantages=False)
  new = _one_epoch_params(advantage_normalization=False)
  default = _one_epoch_params()
  for a, b in zip(old, new):
    np.testing.assert_array_equal(a, b)
  # The knob matters: normalized advantages train differently.
  assert any(not np.allclose(a, b) for a, b in zip(new, default))
  with pytest.raises(ValueError, match='normalize_advantages is an alias'):
    acj.PPOJoint(
      _counting_task(),
      normalize_advantages=False,
      advantage_normalization=False,
      n_interactions_per_epoch=8,
    )


def test_alias_and_misspelled_knob_in_gin(tmp_path):
  def build(*bindings):
    gin.clear_config()
    configurables.parse(['gin/ppo_joint_cartpole.gin'], bindings)
    try:
      return configurables.train_rl(output_dir=str(tmp_path), build_only=True)
    finally:
      gin.clear_config()

  agent = build('PPOJoint.supervised_evals_per_epoch = 4')
  agent.close()
  with pytest.raises(ValueError, match='value_evals_per_epoch'):
    build(
      'PPOJoint.supervised_evals_per_epoch = 4',
      'PPOJoint.train_steps_per_epoch = 6',
    )
  with pytest.raises(ValueError, match='unknown gin binding PPOJoint.normal'):
    build('PPOJoint.normalise_advantages = False')


def test_joint_evals_are_reported_and_change_no_update():
  records = {}
  agents = {}
  for steps in (0, 2):
    agent = acj.PPOJoint(
      _counting_task(),
      n_interactions_per_epoch=8,
      seed=0,
      **dict(TINY, train_steps_per_epoch=4),
      value_evals_per_epoch=2,
      value_eval_steps=steps,
    )
    out = []
    agent.run(1, callbacks=[lambda a, r, out=out: out.append(r)])
    records[steps], agents[steps] = out[0], agent
  assert 'joint_eval/loss' not in records[0]
  assert np.isfinite(records[2]['joint_eval/loss'])
  # The same updates on the same batches; the programs differ only by the
  # evals, which XLA may fuse with them: equal up to float rounding. An
  # eval that took a batch, a key or an update would move them far more.
  for a, b in zip(
    _leaves(_joint(agents[0]).params), _leaves(_joint(agents[2]).params)
  ):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
