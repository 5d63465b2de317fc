"""Trax and Acme behaviours: constructor restore, only_eval, head_index, ...

Each test here failed on the tree before issue 8's fixes.
"""

import jax
import numpy as np
import pytest

from trax_rl import policies, task
from trax_rl.agents import policy_agents, value_agents
from trax_rl.losses import q_parts
from trax_rl.testing import fake_envs


def _pg(output_dir, **kwargs):
  t = task.RLTask(
    lambda: fake_envs.CountingEnv((3, 4)),
    initial_trajectories=0,
    n_envs=2,
    max_steps=10,
  )
  return policy_agents.PolicyGradient(
    t, n_trajectories_per_epoch=2, batch_size=4, output_dir=output_dir, **kwargs
  )


def _leaves(agent):
  return [np.asarray(x) for x in jax.tree.leaves(agent.learner.train.params)]


def test_constructor_restores_from_output_dir(tmp_path):
  trained = _pg(str(tmp_path))
  trained.run(2)
  again = _pg(str(tmp_path))  # No run(): the constructor restores.
  assert again.current_epoch == 2
  assert again.avg_returns == trained.avg_returns
  for a, b in zip(_leaves(again), _leaves(trained), strict=True):
    np.testing.assert_array_equal(a, b)
  again.run(3, n_epochs_is_total_epochs=True)  # run() still restores once.
  assert again.current_epoch == 3


def test_only_eval_evaluates_and_keeps_a_loadable_checkpoint(tmp_path):
  _pg(str(tmp_path)).run(1)
  evaluator = _pg(str(tmp_path), only_eval=True, n_eval_episodes=2)
  before = _leaves(evaluator)
  records = []
  evaluator.run(2, callbacks=[lambda agent, record: records.append(record)])
  assert len(records) == 2
  assert all(any(k.startswith('eval_return_t0') for k in r) for r in records)
  assert evaluator.current_epoch == 1  # Nothing trained, nothing advanced.
  for a, b in zip(before, _leaves(evaluator), strict=True):
    np.testing.assert_array_equal(a, b)
  resumed = _pg(str(tmp_path))  # The trainer-step check passes.
  assert resumed.current_epoch == 1
  resumed.run(1)
  assert resumed.current_epoch == 2


def test_network_policy_picks_the_head_index():
  dist = policy_agents.distributions.create_distribution(
    fake_envs.CountingEnv().action_space
  )

  def apply(params, obs):
    del params
    n = obs.shape[0]
    return (jnp_full(n, [0.0, -1e9]), jnp_full(n, [-1e9, 0.0]))

  obs = np.zeros((3, 1), np.float32)
  key = jax.random.PRNGKey(0)
  first, _ = policies.network_policy(apply, {}, dist, obs, key, 0.0)
  second, inputs = policies.network_policy(
    apply, {}, dist, obs, key, 0.0, head_index=1
  )
  np.testing.assert_array_equal(first, [0, 0, 0])
  np.testing.assert_array_equal(second, [1, 1, 1])
  np.testing.assert_array_equal(inputs[:, 1], [0.0] * 3)


def jnp_full(n, row):
  return jax.numpy.tile(jax.numpy.asarray(row), (n, 1))


def test_apex_epsilons_honour_alpha():
  eps = policies.apex_epsilons(3, 0.4, alpha=7.0)
  np.testing.assert_allclose(eps, [0.4, 0.4**4.5, 0.4**8], rtol=1e-6)
  flat = policies.apex_epsilons(3, 0.4, alpha=0.0)
  np.testing.assert_allclose(flat, [0.4] * 3, rtol=1e-6)
  with pytest.raises(ValueError, match='alpha'):
    policies.apex_epsilons(3, 0.4, alpha=-1.0)


def test_importance_weights_of_an_underflowing_probability_are_finite():
  # R2D2's offset (Acme's R2D2 learner): w ~ (1 / (p + 1e-6))**beta,
  # normalized by the largest. The DQN-family form (no offset) is pinned in
  # tests/fidelity; a probability of 0 stays finite there too.
  w = q_parts.importance_weights(np.array([0.0, 0.5], np.float32), 0.6, 1e-6)
  assert np.all(np.isfinite(w))
  expected = (1.0 / (np.array([0.0, 0.5]) + 1e-6)) ** 0.6
  np.testing.assert_allclose(w, expected / expected.max(), rtol=1e-5)
  assert np.all(
    np.isfinite(q_parts.importance_weights(np.array([0.0, 0.5]), 0.6))
  )


def test_value_agent_constructor_restores_params(tmp_path):
  def make():
    t = task.RLTask(
      lambda: fake_envs.CountingEnv((3,)),
      initial_trajectories=1,
      n_envs=1,
      max_steps=10,
    )
    return value_agents.DQN(
      t,
      n_trajectories_per_epoch=1,
      value_batch_size=2,
      value_train_steps_per_epoch=2,
      output_dir=str(tmp_path),
    )

  trained = make()
  trained.run(1)
  again = make()
  assert again.current_epoch == 1
  assert int(again.learner.train.step) == int(trained.learner.train.step) == 2
