"""Tests for the R2D2 loss (trax_rl.losses.r2d2) and agent (agents.r2d2)."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
from absl.testing import absltest

from trax_rl import envs, types
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl.agents import checks, r2d2
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import base, models, recurrent

# The fake network: state s [B]; per step q_t = b * o_t + s_t (o_t [B, A])
# and s_{t+1} = s_t + a * o_t[:, 0]. With a = 0 Q values are b * o.


def _fake_unroll(params, obs, state, first=None):
  del first

  def step(s, o):
    return s + params['a'] * o[:, 0], params['b'] * o + s[:, None]

  state, q = jax.lax.scan(step, state, obs)
  return types.QOutput(q_values=q), state


FAKE = base.RecurrentNetwork(
  init=lambda key: {'a': 0.0, 'b': 1.0},
  apply=None,
  unroll=_fake_unroll,
  initial_state=lambda n: jnp.zeros(n),
)
ONLINE = {'a': 0.0, 'b': 1.0}
TARGET = {'a': 0.0, 'b': 2.0}


def _segment(obs, action, reward, discount, mask, core=0.0):
  """A batch of one segment from per-step lists."""
  f32 = lambda x: jnp.asarray(x, jnp.float32)[None]
  return types.Segment(
    observation=f32(obs),
    action=jnp.asarray(action, jnp.int32)[None],
    reward=f32(reward),
    discount=f32(discount),
    mask=f32(mask),
    core_state=f32([core])[0],
  )


# o0..o3 with A = 2; the last observation is an episode's final one.
OBS = [[1.0, 0.0], [0.0, 2.0], [3.0, 1.0], [1.0, 1.0]]
SEGMENT = _segment(
  OBS, [0, 1, 0, 0], [1, 1, 1, 0], [0.5, 0.5, 0.5, 0], [1, 1, 1, 0]
)


def _loss(loss_fn, segment, probability=(1.0,), online=ONLINE, target=TARGET):
  batch = types.Batch(segment, jnp.asarray(probability, jnp.float32))
  return loss_fn(FAKE, online, target, batch, jax.random.PRNGKey(0))


class R2D2LossTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_double_q_one_step_by_hand(self):
    # Online Q = o, target Q = 2 o; a' = argmax online Q(o_{t+1}).
    # t0: 1 + .5 * 2 * o1[1]=2 -> 3, Q = o0[0] = 1: td 2.
    # t1: 1 + .5 * 2 * o2[0]=3 -> 4, Q = o1[1] = 2: td 2.
    # t2: 1 + .5 * 2 * o3[0]=1 -> 2, Q = o2[0] = 3: td -1.
    # loss 0.5 * (4 + 4 + 1) = 4.5; priority .9 * 2 + .1 * 5 / 3.
    loss_fn = r2d2_losses.R2D2Loss(
      burn_in_length=0, bootstrap_n=1, value_transform=rlax.IDENTITY_PAIR
    )
    loss, extra = self.variant(functools.partial(_loss, loss_fn))(SEGMENT)
    np.testing.assert_allclose(loss, 4.5, rtol=1e-6)
    np.testing.assert_allclose(extra.priorities, [1.8 + 0.5 / 3], rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['abs_td'], 5 / 3, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_n_step_and_end_of_sequence(self):
    # n = 2. t0: 1 + .5 (1 + .5 * 2 * o2[0]=3) = 3: td 2.
    # t1: 1 + .5 (1 + .5 * 2 * o3[0]=1) = 2: td 0.
    # t2: one step left; bootstrap from o3 as rlax does: 1 + .5 * 2 = 2: td -1.
    loss_fn = r2d2_losses.R2D2Loss(
      burn_in_length=0, bootstrap_n=2, value_transform=rlax.IDENTITY_PAIR
    )
    loss, extra = self.variant(functools.partial(_loss, loss_fn))(SEGMENT)
    np.testing.assert_allclose(loss, 0.5 * (4 + 0 + 1), rtol=1e-6)
    np.testing.assert_allclose(extra.priorities, [1.8 + 0.1], rtol=1e-6)

  def test_terminal_and_truncated_padding(self):
    loss_fn = r2d2_losses.R2D2Loss(
      burn_in_length=0, bootstrap_n=2, value_transform=rlax.IDENTITY_PAIR
    )
    # Two real steps, final obs o2, then padding. Terminated after step 1:
    # t0: 1 + .5 (1 + 0) = 1.5, Q 1: td .5. t1: 1, Q 2: td -1. Padding: 0.
    obs = [[1.0, 0.0], [0.0, 2.0], [3.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
    terminated = _segment(
      obs, [0, 1, 0, 0, 0], [1, 1, 0, 0, 0], [.5, 0, 0, 0, 0], [1, 1, 0, 0, 0]
    )  # fmt: skip
    loss, extra = _loss(loss_fn, terminated)
    np.testing.assert_allclose(loss, 0.5 * (0.25 + 1), rtol=1e-6)
    np.testing.assert_allclose(extra.priorities, [0.9 + 0.1 * 0.75], rtol=1e-6)
    # Truncated instead: step 1 bootstraps from the final observation o2
    # (value 2 * 3 = 6), also where the n-step window reaches the padding.
    # t0: 1 + .5 (1 + .5 * 6) = 3: td 2. t1: 1 + .5 * 6 = 4: td 2.
    truncated = terminated._replace(
      discount=jnp.asarray([[0.5, 0.5, 0, 0, 0]], jnp.float32)
    )
    loss, extra = _loss(loss_fn, truncated)
    np.testing.assert_allclose(loss, 0.5 * (4 + 4), rtol=1e-6)
    np.testing.assert_allclose(extra.priorities, [2.0], rtol=1e-6)

  def test_value_transform_and_its_inverse(self):
    tx = r2d2_losses.signed_hyperbolic_pair()
    # h(x) = sign(x) (sqrt(|x| + 1) - 1) + 1e-3 x.
    x = jnp.array([0.0, 3.0, -8.0, 0.25])
    expected = [0.0, 1.003, -2.008, np.sqrt(1.25) - 1 + 0.00025]
    np.testing.assert_allclose(tx.apply(x), expected, rtol=1e-6)
    np.testing.assert_allclose(tx.apply_inv(tx.apply(x)), x, atol=1e-3)
    np.testing.assert_allclose(tx.apply_inv(jnp.array(1.003)), 3.0, rtol=1e-4)
    # In the loss: one step, target h(1 + .5 h^-1(h(3))) = h(2.5).
    loss_fn = r2d2_losses.R2D2Loss(burn_in_length=0, bootstrap_n=1)
    segment = _segment(
      [[0.5, 0.0], [1.003, 0.0]], [0, 0], [1, 0], [0.5, 0], [1, 0]
    )
    _, extra = _loss(loss_fn, segment, target=ONLINE)
    h_25 = np.sqrt(3.5) - 1 + 0.0025
    np.testing.assert_allclose(extra.priorities, [h_25 - 0.5], rtol=1e-3)
    with pytest.raises(ValueError, match='value_transform'):
      r2d2_losses.R2D2Loss(value_transform='log')

  def test_priority_mixing(self):
    abs_td = jnp.array([[1.0, 4.0], [3.0, 9.0], [2.0, 0.0]])
    mask = jnp.array([[1.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    # Seq 0: max 3, mean 2 -> .9 * 3 + .1 * 2. Seq 1: only the first step.
    np.testing.assert_allclose(
      r2d2_losses.mix_priorities(abs_td, mask, 0.9), [2.9, 4.0], rtol=1e-6
    )
    np.testing.assert_allclose(
      r2d2_losses.mix_priorities(abs_td, mask, 0.0), [2.0, 4.0], rtol=1e-6
    )

  def test_importance_weights(self):
    # Seq losses 4.5 (as above) and 2 * 4.5; probabilities .5 and .25 with
    # beta .6: w = (2 ** .6, 4 ** .6) / 4 ** .6 = (2 ** -.6, 1).
    loss_fn = r2d2_losses.R2D2Loss(
      burn_in_length=0,
      bootstrap_n=1,
      value_transform=rlax.IDENTITY_PAIR,
      importance_sampling_exponent=0.6,
    )
    double = SEGMENT._replace(
      observation=SEGMENT.observation * 2, reward=SEGMENT.reward * 2
    )
    batch = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), SEGMENT, double)
    loss, _ = _loss(loss_fn, batch, probability=(0.5, 0.25))
    expected = (2**-0.6 * 4.5 + 1.0 * 18.0) / 2
    np.testing.assert_allclose(loss, expected, rtol=1e-5)

  def test_reward_clipping(self):
    loss_fn = r2d2_losses.R2D2Loss(
      burn_in_length=0,
      bootstrap_n=1,
      value_transform=rlax.IDENTITY_PAIR,
      clip_rewards=True,
      max_abs_reward=1.0,
    )
    big = SEGMENT._replace(reward=SEGMENT.reward * 5)
    np.testing.assert_allclose(_loss(loss_fn, big)[0], 4.5, rtol=1e-6)

  def test_burn_in_carries_no_gradient(self):
    # Burn-in observations move the state by a * o[:, 0]; trace
    # observations have o[:, 0] = 0, so `a` reaches the loss only through
    # the burned-in state.
    obs = [[2.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 3.0], [0.0, 1.0]]
    segment = _segment(obs, [0, 0, 1, 0, 0], [0, 0, 1, 1, 0],
                       [.5, .5, .5, .5, 0], [1, 1, 1, 1, 0], core=0.5)  # fmt: skip
    loss_fn = r2d2_losses.R2D2Loss(
      burn_in_length=2, bootstrap_n=1, value_transform=rlax.IDENTITY_PAIR
    )
    params = {'a': 1.0, 'b': 1.0}
    grads = jax.grad(lambda p: _loss(loss_fn, segment, online=p)[0])(params)
    self.assertEqual(float(grads['a']), 0.0)
    self.assertNotEqual(float(grads['b']), 0.0)
    # The burn-in does change the values: with a = 0 the loss differs.
    with_burn_in = _loss(loss_fn, segment, online=params, target=params)[0]
    without = _loss(
      loss_fn, segment, online={'a': 0.0, 'b': 1.0}, target=params
    )[0]
    self.assertNotAlmostEqual(float(with_burn_in), float(without), places=3)

  def test_use_core_state_switch(self):
    # The stored state s adds s to every Q value; targets then add s too:
    # with discount .5 each td moves by .5 s - s = -.5 s.
    stored = SEGMENT._replace(core_state=jnp.array([2.0]))
    kwargs = dict(
      burn_in_length=0, bootstrap_n=1, value_transform=rlax.IDENTITY_PAIR
    )
    zero = _loss(r2d2_losses.R2D2Loss(use_core_state=False, **kwargs), stored)
    np.testing.assert_allclose(zero[0], 4.5, rtol=1e-6)  # As from zeros.
    used = _loss(r2d2_losses.R2D2Loss(**kwargs), stored)
    # tds 2 - 1, 2 - 1, -1 - 1 -> loss .5 (1 + 1 + 4) = 3.
    np.testing.assert_allclose(used[0], 3.0, rtol=1e-6)

  def test_bad_arguments(self):
    with pytest.raises(ValueError, match='max_priority_weight'):
      r2d2_losses.R2D2Loss(max_priority_weight=1.5)
    with pytest.raises(ValueError, match='bootstrap_n'):
      r2d2_losses.R2D2Loss(bootstrap_n=0)
    with pytest.raises(ValueError, match='no trace'):
      _loss(r2d2_losses.R2D2Loss(burn_in_length=3), SEGMENT)


# The agent, on masked CartPole with a tiny network (one model_fn object, so
# that all agents share the network's compiled init).

MODEL_FN = functools.partial(
  recurrent.RecurrentQuality,
  torso=functools.partial(models.MLP, layer_widths=(8,)),
  lstm_size=6,
)


def _agent(output_dir=None, **overrides):
  task = task_lib.RLTask(
    envs.masked_cartpole,
    initial_trajectories=0,
    gamma=0.9,
    n_envs=3,
    max_steps=40,
  )
  kwargs = dict(
    model_fn=MODEL_FN,
    loss_fn=r2d2_losses.R2D2Loss(burn_in_length=2, bootstrap_n=2),
    trace_length=4,
    sequence_period=3,
    batch_size=4,
    min_replay_size=8,
    max_replay_size=200,
    target_update_period=3,
    samples_per_insert=1.0,
    epsilon_min=0.01,
    epsilon_max=0.5,
    evaluation_epsilon=0.001,
    n_interactions_per_epoch=60,
    output_dir=output_dir,
  )
  kwargs.update(overrides)
  return r2d2.R2D2(task, **kwargs)


@pytest.fixture(scope='module')
def fresh():
  return _agent()


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp('r2d2'))
  agent = _agent(output_dir=directory)
  agent.run(2)
  return agent, directory


def test_per_env_epsilons(fresh):
  eps = fresh.epsilons(3)
  # Log-uniform from epsilon_max .5 to epsilon_min .01.
  np.testing.assert_allclose(eps, [0.5, np.sqrt(0.5 * 0.01), 0.01], rtol=1e-5)
  np.testing.assert_allclose(fresh.epsilons(3, 0.0), 0.0)


def test_acting_records_and_resets_core_states(fresh):
  policy = fresh.make_policy(0.0, evaluation=False)
  obs = np.ones((3, 4), np.float32)
  _, info = policy(obs, np.ones(3, bool))
  np.testing.assert_array_equal(info['core'].hidden, 0.0)
  _, info = policy(obs, np.array([False, True, False]))
  hidden = info['core'].hidden
  assert np.all(hidden[[0, 2]] != 0) and np.all(hidden[1] == 0)
  # A new policy starts from zeros.
  _, info = fresh.make_policy(0.0)(obs, np.zeros(3, bool))
  np.testing.assert_array_equal(info['core'].hidden, 0.0)
  # Trax's single-trajectory form replays the trajectory's memory.
  traj = trajectory_lib.Trajectory(obs[0])
  traj.extend(1, 1.0, obs[1] * 2)
  action, info = fresh.policy(traj, temperature=0.0)
  state = fresh.network.initial_state(1)
  params = fresh.learner.train.params
  for o in (obs[0], obs[1] * 2):
    out, state = fresh.network.apply(params, o[None], state)
  np.testing.assert_allclose(info['q_values'], out.q_values[0], atol=1e-5)
  assert action == np.argmax(out.q_values[0])


def test_recorded_core_states_are_the_actors_states(fresh):
  # A rollout's info holds, at each step, the LSTM state before it: the
  # network run from zeros over the episode so far.
  source = fresh.runner.source
  rollout = source.collect(fresh.learner).rollout
  params = fresh.learner.train.params
  apply = jax.jit(fresh.network.apply)
  core = rollout.agent_info['core']
  checked = 0
  for i in range(rollout.reward.shape[2]):
    state = fresh.network.initial_state(1)
    for t in range(rollout.reward.shape[1]):
      np.testing.assert_allclose(
        core.hidden[0, t, i], state.hidden[0], atol=1e-5
      )
      np.testing.assert_allclose(core.cell[0, t, i], state.cell[0], atol=1e-5)
      checked += 1
      _, state = apply(params, rollout.observation[0, t, i][None], state)
      if rollout.terminated[0, t, i] or rollout.truncated[0, t, i]:
        state = fresh.network.initial_state(1)
  assert checked == rollout.reward.size


def test_check(fresh):
  assert checks.check(fresh)['update'] == 'compiled'


def test_training_writes_priorities(trained):
  agent, _ = trained
  assert int(agent.learner.train.step) > 0
  replay = jax.device_get(agent.learner.replay)
  size = int(min(replay.num_inserts, agent.table.max_size))
  assert size > 0
  assert np.any(replay.priorities[:size] != 1.0)  # Written by the learner.


def test_resume_mid_run_equals_uninterrupted(trained, tmp_path):
  # Episodes run across epochs: the envs, the LSTM states of the running
  # episodes, the segment ring and the replay are all in the checkpoint.
  agent, directory = trained
  straight = _agent(output_dir=str(tmp_path))
  straight.run(3)
  resumed = _agent(output_dir=directory)
  assert resumed.current_epoch == 2
  resumed.run(3, n_epochs_is_total_epochs=True)
  for a, b in zip(
    jax.tree.leaves(straight.learner), jax.tree.leaves(resumed.learner)
  ):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert straight.avg_returns == resumed.avg_returns


def test_bad_arguments():
  with pytest.raises(ValueError, match='R2D2Loss'):
    _agent(loss_fn=object())
  with pytest.raises(ValueError, match='min_replay_size'):
    _agent(min_replay_size=500, max_replay_size=100)
  with pytest.raises(ValueError, match='n_interactions_per_epoch'):
    _agent(n_interactions_per_epoch=None, n_trajectories_per_epoch=2)


if __name__ == '__main__':
  absltest.main()
