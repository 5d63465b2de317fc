"""PQN: its returns by hand, its loss, and the agent on every source."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import configurables, gin_registry, task
from trax_rl.algorithms import pqn
from trax_rl.losses import value_estimates
from trax_rl.testing import fake_envs, resume

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def test_lambda_returns_by_hand():
  # One env, gamma 0.5, lambda 0.5. Step 1 terminates; step 3 is cut (the
  # rollout's last step): it bootstraps from q alone.
  reward = jnp.array([1.0, 2.0, 3.0, 4.0])[:, None]
  terminated = jnp.array([0, 1, 0, 0], bool)[:, None]
  cut = jnp.array([0, 0, 0, 1], bool)[:, None]
  q = jnp.array([10.0, 20.0, 30.0, 40.0])[:, None]
  g = value_estimates.q_lambda_returns(reward, terminated, cut, q, 0.5, 0.5)
  g3 = 4 + 0.5 * 40  # 24
  g2 = 3 + 0.5 * (30 + 0.5 * (g3 - 30))  # 16.5
  g1 = 2.0  # terminated: no bootstrap
  g0 = 1 + 0.5 * (10 + 0.5 * (g1 - 10))  # 4
  np.testing.assert_allclose(g[:, 0], [g0, g1, g2, g3])


def test_lambda_zero_is_one_step_and_one_is_monte_carlo():
  key = jax.random.PRNGKey(0)
  reward = jax.random.normal(key, (6, 3))
  terminated = jnp.zeros((6, 3), bool).at[2, 1].set(True)
  cut = jnp.zeros((6, 3), bool).at[-1].set(True)
  q = jax.random.normal(jax.random.PRNGKey(1), (6, 3))
  one_step = value_estimates.q_lambda_returns(
    reward, terminated, cut, q, 0.9, 0.0
  )
  np.testing.assert_allclose(
    one_step, reward + 0.9 * jnp.where(terminated, 0.0, q), rtol=1e-6
  )
  mc = value_estimates.q_lambda_returns(reward, terminated, cut, q, 0.9, 1.0)
  # Column 0: no termination, so G_0 = sum 0.9^t r_t + 0.9^6 q_5.
  expected = sum(0.9**t * reward[t, 0] for t in range(6)) + 0.9**6 * q[5, 0]
  np.testing.assert_allclose(mc[0, 0], expected, rtol=1e-5)
  # Column 1 terminates at step 2: G_0 is the sum of its three rewards.
  np.testing.assert_allclose(
    mc[0, 1],
    reward[0, 1] + 0.9 * reward[1, 1] + 0.81 * reward[2, 1],
    rtol=1e-5,
  )


def test_cut_steps_mark_truncations_and_the_last_valid_step():
  truncated = jnp.array([[0, 0], [1, 0], [0, 0], [0, 0]], bool)
  valid = jnp.array([[1, 1], [1, 1], [1, 1], [1, 0]], bool)
  cut = value_estimates.cut_steps(truncated, valid)
  np.testing.assert_array_equal(cut, [[0, 0], [1, 0], [0, 1], [1, 1]])


def test_loss_ignores_invalid_steps():
  program = _program(n_envs=1)
  learner = program.init(jax.random.PRNGKey(0))
  obs = jnp.ones((4, 4), jnp.float32)
  batch = pqn.Steps(
    observation=obs,
    action=jnp.zeros(4, jnp.int32),
    target=jnp.array([1.0, 2.0, 1e6, -1e6]),
    valid=jnp.array([1, 1, 0, 0], bool),
  )
  network = _network(program)
  loss, extra = pqn.q_loss(network, learner.train.params, None, batch, None)
  q = network.apply(learner.train.params, obs[:1])[0, 0]
  expected = 0.25 * ((q - 1.0) ** 2 + (q - 2.0) ** 2)
  np.testing.assert_allclose(loss, expected, rtol=1e-5)
  np.testing.assert_allclose(extra.metrics['target_mean'], 1.5)


def _program(n_envs):
  import gymnasium

  from trax_rl.algorithms import program as program_lib

  spec = program_lib.Spec(
    observation_space=gymnasium.spaces.Box(-1, 1, (4,), np.float32),
    action_space=gymnasium.spaces.Discrete(2),
    gamma=0.9,
    n_envs=n_envs,
    n_steps=8,
    axis_name=None,
  )
  return pqn.PQN(layer_widths=(8,), n_minibatches=2).program(spec)


def _network(program):
  # The program closes over its network: read it from act's closure.
  return program.act.__self__.network


def test_continuous_actions_and_bad_knobs_are_refused():
  t = task.RLTask(fake_envs.ContinuousEnv, initial_trajectories=0)
  agent_class = gin_registry.lookup('PQN')
  with pytest.raises(ValueError, match=r'^PQN needs a Discrete action space'):
    agent_class(t, n_interactions_per_epoch=8)
  with pytest.raises(ValueError, match='lambda_'):
    pqn.PQN(lambda_=1.5)
  with pytest.raises(ValueError, match='n_minibatches'):
    pqn.PQN(n_minibatches=0)


def _cartpole_agent(env, output_dir=None, **bindings):
  configurables.parse(
    [os.path.join(ROOT, 'gin', 'gymnax', 'pqn_cartpole.gin')],
    [
      f'RLTask.env = {env!r}',
      'RLTask.n_envs = 4',
      'PQN.n_interactions_per_epoch = 32',
      'PQN.n_minibatches = 2',
      'PQN.layer_widths = (16,)',
      'PQN.n_eval_episodes = 1',
      'train_rl.epochs_per_call = 1',
    ]
    + [f'{k} = {v}' for k, v in bindings.items()],
  )
  return configurables.train_rl(output_dir=output_dir, build_only=True)


@pytest.mark.parametrize('env', ['CartPole-v1', 'gymnax:CartPole-v1'])
def test_resumes_exactly_on_both_sources(tmp_path, env):
  agent = resume.assert_resumes_exactly(
    lambda out: _cartpole_agent(env, out), str(tmp_path / 'run')
  )
  # 4 epochs of 2 passes x 2 minibatches.
  assert int(agent.learner.train.step) == 4 * 4 * 2
  assert int(agent.learner.env_steps) == 4 * 32


def test_learns_gymnax_cartpole():
  # The shipped config and seed, a tenth of its budget (49k env steps,
  # epsilon still about 0.6; seed 0 measured 426 greedy there, 387 at 32
  # epochs; at 48 epochs seeds 0-2 measured 495 / 280 / 500; a random
  # policy scores about 20).
  configurables.parse(
    [os.path.join(ROOT, 'gin', 'gymnax', 'pqn_cartpole.gin')], []
  )
  agent = configurables.train_rl(output_dir=None, build_only=True)
  agent.run(24, epochs_per_call=24)
  # The runner evaluates before each call: this is the trained policy's.
  assert agent.evaluate()['eval_return_t0_s500'] >= 200
