"""SAC and TD3: their pieces by hand, and the agents on every source."""

import os

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import configurables, gin_registry, task, types
from trax_rl.algorithms import program as program_lib
from trax_rl.algorithms import sac, td3
from trax_rl.networks import continuous
from trax_rl.testing import fake_envs, resume

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def test_squashed_gaussian_log_prob_by_hand():
  mean = jnp.array([[0.3, -1.2], [2.0, 0.0]])
  log_std = jnp.array([[-0.5, 0.1], [0.4, -2.0]])
  key = jax.random.PRNGKey(3)
  action, log_prob = continuous.squashed_sample(mean, log_std, key)
  noise = np.asarray(jax.random.normal(key, mean.shape), np.float64)
  mu, sigma = np.asarray(mean, np.float64), np.exp(np.asarray(log_std))
  u = mu + sigma * noise
  # Change of variables a = tanh(u): p(a) = N(u; mu, sigma) / prod(1 - a^2).
  density = np.exp(-0.5 * noise**2) / (sigma * np.sqrt(2 * np.pi))
  expected = np.sum(np.log(density) - np.log(1 - np.tanh(u) ** 2), axis=-1)
  np.testing.assert_allclose(action, np.tanh(u), rtol=1e-5)
  np.testing.assert_allclose(log_prob, expected, rtol=1e-5)
  # Far in the tail tanh(u) rounds to 1, and the log-density stays finite.
  _, tail = continuous.squashed_sample(
    jnp.full((1, 1), 30.0), log_std[:1, :1], key
  )
  assert np.isfinite(tail).all()


def _spec(n_envs=1, n_steps=8):
  env = gym.make('Pendulum-v1')
  return program_lib.Spec(
    env.observation_space, env.action_space, 0.99, n_envs, n_steps
  )


def _rule(program):
  return program.learn.__self__.rule


def test_sac_temperature_loss_by_hand():
  rule = _rule(sac.SAC(layer_widths=(8,)).program(_spec()))
  assert rule.target_entropy == -1.0  # Minus Pendulum's one action dim.
  log_alpha, log_prob = jnp.asarray(0.5), jnp.asarray(-0.3)
  loss, _ = rule.temperature_loss(None, log_alpha, (), log_prob, None)
  np.testing.assert_allclose(loss, -0.5 * (-0.3 - 1.0), rtol=1e-6)
  # Entropy 0.3 is above the target -1: the gradient lowers alpha.
  grad = jax.grad(
    lambda a: rule.temperature_loss(None, a, (), log_prob, None)[0]
  )
  np.testing.assert_allclose(grad(log_alpha), 1.3, rtol=1e-6)


def _batch(n=4):
  return types.Transition(
    observation=jnp.ones((n, 3)),
    action=jnp.zeros((n, 1)),
    reward=jnp.arange(n, dtype=jnp.float32),
    discount=jnp.full(n, 0.5),
    next_observation=jnp.full((n, 3), -1.0),
  )


def test_td3_target_policy_smoothing_by_hand():
  # Noise far wider than its clip: every smoothed target action is exactly
  # mu_target(s') +- noise_clip, by the sign of the drawn normal.
  knobs = td3.TD3(layer_widths=(8,), policy_noise=100.0, noise_clip=0.25)
  rule = _rule(knobs.program(_spec()))
  actor, critic, _ = rule.init(jax.random.PRNGKey(0))
  batch, key = _batch(), jax.random.PRNGKey(7)
  mu = rule.actor.apply(actor.target_params, batch.next_observation)
  sign = np.sign(np.asarray(jax.random.normal(key, mu.shape)))
  smoothed = np.clip(np.asarray(mu) + 0.25 * sign, -1, 1)
  q = rule.critic.apply(critic.target_params, batch.next_observation, smoothed)
  expected = batch.reward + 0.5 * np.min(np.asarray(q), axis=-1)
  np.testing.assert_allclose(
    rule.target(actor, critic, batch, key), expected, rtol=1e-5
  )


def test_td3_updates_the_actor_every_policy_delay_updates():
  rule = _rule(td3.TD3(layer_widths=(8,), policy_delay=3).program(_spec()))
  nets = rule.init(jax.random.PRNGKey(0))
  actor_steps = []
  for i in range(6):
    nets, metrics = jax.jit(rule.update)(nets, _batch(), jax.random.PRNGKey(i))
    actor_steps.append(int(nets[0].step))
  # Critic updates 3 and 6 also update the actor.
  assert actor_steps == [0, 0, 1, 1, 1, 2]


def test_bad_action_spaces_and_knobs_are_refused():
  cartpole = task.RLTask('CartPole-v1', initial_trajectories=0)
  for name in ('SAC', 'TD3'):
    agent_class = gin_registry.lookup(name)
    with pytest.raises(ValueError, match=rf'^{name} needs a Box action space'):
      agent_class(cartpole, n_interactions_per_epoch=8)
  with pytest.raises(ValueError, match='tau'):
    sac.SAC(tau=1.5)
  with pytest.raises(ValueError, match='policy_delay'):
    td3.TD3(policy_delay=0)
  with pytest.raises(ValueError, match='max_replay_size'):
    sac.SAC(max_replay_size=4).program(_spec(n_envs=2, n_steps=8))


def test_actions_are_scaled_to_the_env_bounds():
  t = task.RLTask(fake_envs.ContinuousEnv, initial_trajectories=0)
  agent = gin_registry.lookup('SAC')(
    t, n_interactions_per_epoch=10, layer_widths=(8,), learning_starts=0
  )
  actions = agent.act(np.zeros((64, 3), np.float32), deterministic=False)
  assert actions.shape == (64, 1)
  assert np.all(np.abs(actions) <= 1.0) and np.std(actions) > 0.05


def _pendulum_agent(name, env, output_dir=None, *bindings):
  configurables.parse(
    [os.path.join(ROOT, 'gin', f'{name.lower()}_pendulum.gin')],
    [
      f'RLTask.env = {env!r}',
      f'{name}.layer_widths = (16,)',
      f'{name}.n_interactions_per_epoch = 40',
      f'{name}.learning_starts = 50',
      f'{name}.batch_size = 16',
      f'{name}.n_eval_episodes = 1',
      'RLTask.max_steps = 30',
      'train_rl.epochs_per_call = 1',
      'train_rl.eval_every = 1',
      *bindings,
    ],
  )
  return configurables.train_rl(output_dir=output_dir, build_only=True)


@pytest.mark.parametrize('name', ['SAC', 'TD3'])
@pytest.mark.parametrize('env', ['Pendulum-v1', 'gymnax:Pendulum-v1'])
def test_resumes_exactly_on_both_sources(tmp_path, name, env):
  agent = resume.assert_resumes_exactly(
    lambda out: _pendulum_agent(name, env, out), str(tmp_path / 'run')
  )
  # 160 env steps; updates from the 50th (a batch's worth of items in).
  assert int(agent.learner.env_steps) == 160
  assert 100 <= int(agent.learner.critic.step) <= 120


def test_one_program_update_on_both_sources():
  # The gymnasium source's jitted `train` and the device source's epoch
  # scan run the same program: the same rollout gives the same learner.
  agent = _pendulum_agent('SAC', 'Pendulum-v1', None, 'SAC.learning_starts = 0')
  program, learner = agent.program, agent.learner
  source = agent.runner.source
  rollout = jax.tree.map(lambda x: x[0], source.collect(learner).rollout)
  key = jax.random.PRNGKey(5)
  by_jit, _ = jax.jit(program.train)(learner, rollout, key)

  def scanned(learner, rollout, key):
    def epoch(learner, _):
      return program.train(learner, rollout, key)[0], None

    return jax.lax.scan(epoch, learner, length=1)[0]

  by_scan = jax.jit(scanned)(learner, rollout, key)
  assert int(by_jit.critic.step) > 0
  for a, b in zip(jax.tree.leaves(by_jit), jax.tree.leaves(by_scan)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('name', ['SAC', 'TD3'])
def test_learns_gymnax_pendulum(name):
  # The shipped config with 64-64 networks, 1k random steps and 8k env
  # steps of the 20k. Seeds 0-2 measured -410 / -163 / -146 (SAC) and
  # -395 / -193 / -152 (TD3) over 16 episodes; a random policy about -1200.
  configurables.parse(
    [os.path.join(ROOT, 'gin', 'gymnax', f'{name.lower()}_pendulum.gin')],
    [
      f'{name}.layer_widths = (64, 64)',
      f'{name}.learning_starts = 1000',
      f'{name}.n_eval_episodes = 16',
      'train_rl.n_epochs = 40',
    ],
  )
  agent = configurables.train_rl(output_dir=None, build_only=True)
  agent.run(40, epochs_per_call=40)
  assert agent.evaluate()['eval_return_t0_s200'] >= -600


@pytest.mark.parametrize('env', ['Pendulum-v1', 'gymnax:Pendulum-v1'])
def test_seed_batches_train_each_seed(env):
  agent = _pendulum_agent('TD3', env)
  agent.use_seeds(2)
  agent.run(3)
  seeds = [agent.runner.learner_of(i) for i in range(2)]
  for learner in seeds:
    assert int(learner.env_steps) == 120
    assert int(learner.actor.step) > 0
  kernels = [
    learner.actor.params['params']['Dense_1']['kernel'] for learner in seeds
  ]
  assert not np.allclose(*kernels)  # Seeds of their own.
