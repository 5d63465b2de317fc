"""Fidelity, item 9: Trax DQN's default targets, and the port's defaults.

Source: google/trax, trax/rl/training.py, class DQN: `advantage_estimator`
defaults to `monte_carlo` and `max_slice_length` to 1, so its margin is
`max_slice_length - 1 = 0`; `value_batches_stream` builds the targets as
`values_max[:, :-margin] + estimator(...)`, and with margin 0 `[:, :-0]` is
`[:, :0]`: every batch has no target at all. Its `SmoothL1Loss` is then
`sum(empty) / sum(empty)`, NaN, with a zero gradient: with its own defaults
Trax's DQN never moves its Q-network. The port's defaults are `td_k` with
slices of 2 (what Trax's `dqn_cartpole_regression.gin` binds); a file that
binds Trax's defaults trains here on each step's Monte Carlo return.
"""

import functools
import inspect

import chex
import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest

from trax_rl import advantages, trajectory, types
from trax_rl.agents import value_agents
from trax_rl.losses import n_step_value
from trax_rl.networks import base

GAMMA = 0.9
SCALE = 1.0 / (1.0 - GAMMA)  # Trax's scale_value_targets: 10.

# The network outputs the observation: Q = SCALE * observation.
NET = base.Network(
  init=lambda key: None,
  apply=lambda params, obs: types.QOutput(q_values=obs),
)


# Transcriptions of Trax's numpy code (trax/rl/advantages.py, training.py).
def trax_monte_carlo(margin):
  def estimator(rewards, returns, values, dones):
    length = returns.shape[1]
    returns[dones] = rewards[dones]  # In place, as Trax.
    values[dones] = 0
    return (returns - values)[:, : length - margin]

  return estimator


def trax_td_k(margin):
  def estimator(rewards, returns, values, dones):
    del returns
    k = margin
    adv = np.zeros_like(values[:, k:])
    discount = 1.0
    for i in range(k):
      adv += discount * rewards[:, i : -(k - i)]
      discount *= GAMMA  # discount_mask is all ones here.
    adv += discount * values[:, k:]
    first_done = dones[:, :-k]
    adv[first_done] = rewards[:, :-k][first_done]
    return adv - values[:, :-k]

  return estimator


def trax_value_batch(estimator_fn, slice_length, observation, batch):
  """Trax's `value_batches_stream` targets and its loss and metrics on them.

  Returns (scaled targets [B, n], value_mean, returns_mean, loss, d loss /
  d network output).
  """
  margin = slice_length - 1
  estimator = estimator_fn(margin)
  values_max = np.max(observation, axis=-1) * SCALE  # _run_value_model.
  # Not a copy: Trax's monte_carlo zeroes values_max in place, which the
  # view on the left then reads.
  n_step_returns = values_max[:, :-margin] + estimator(
    rewards=batch.reward.copy(),
    returns=batch.return_.copy(),
    values=values_max,
    dones=batch.done.copy(),
  )
  length = n_step_returns.shape[1]
  targets = n_step_returns[:, :length] / SCALE
  mask = np.ones(targets.shape)  # Trax's all-ones mask.

  def loss(net_out):  # tl.SmoothL1Loss on the selected values.
    b, t = np.indices(batch.action[:, :length].shape)
    selected = net_out[:, :length][b, t, batch.action[:, :length]]
    dist = jnp.abs(selected - targets)
    smooth = jnp.where(dist < 1, 0.5 * dist**2, dist - 0.5)
    return jnp.sum(mask * smooth) / jnp.sum(mask), selected

  (value, selected), grad = jax.value_and_grad(loss, has_aux=True)(
    jnp.asarray(observation)
  )
  value_mean = jnp.sum(selected) / jnp.sum(mask)
  returns_mean = jnp.sum(targets) / jnp.sum(mask)
  return targets, value_mean, returns_mean, value, grad


def _batch(observation, action, reward, done, return_, mask):
  reward = np.asarray(reward, np.float32)
  return trajectory.TimeStepBatch(
    observation=np.asarray(observation, np.float32),
    action=np.asarray(action, np.int32),
    reward=reward,
    done=np.asarray(done, bool),
    mask=np.asarray(mask, np.float32),
    dist_inputs=None,
    env_info=trajectory.EnvInfo(np.ones_like(reward), np.ones_like(reward)),
    return_=np.asarray(return_, np.float32),
  )


# Three slices of two steps, as the port's default draws them:
# - o0 = [1, 0], a 0, r 1; o1 = [2, 3], where the episode then terminates
#   (done in the bootstrap row: the step before the terminal one);
# - a one-step episode, terminated at row 0, r 2 (row 1 is padding);
# - o0 = [0, 5], a 1, r -1; o1 = [1, 1].
TWO_STEP = _batch(
  observation=[[[1, 0], [2, 3]], [[4, 1], [0, 0]], [[0, 5], [1, 1]]],
  action=[[0, 0], [1, 0], [1, 0]],
  reward=[[1, 0], [2, 0], [-1, 0]],
  done=[[False, True], [True, True], [False, False]],
  return_=[[1, 0], [2, 0], [-1, 0]],  # Not read by td_k.
  mask=[[1, 1], [1, 0], [1, 1]],
)
# Two slices of one step (Trax's default length): Monte Carlo returns 5
# (cut, not terminated) and 2 (terminated: its reward).
ONE_STEP = _batch(
  observation=[[[1, 0]], [[4, 1]]],
  action=[[0], [1]],
  reward=[[1], [2]],
  done=[[False], [True]],
  return_=[[5], [2]],
  mask=[[1], [1]],
)


class DQNDefaultsTest(chex.TestCase):
  def test_trax_defaults_give_no_target_and_no_gradient(self):
    params = inspect.signature(value_agents.DQN).parameters
    # Trax's defaults, for the record: monte_carlo, max_slice_length=1.
    targets, _, _, loss, grad = trax_value_batch(
      trax_monte_carlo, 1, ONE_STEP.observation, ONE_STEP
    )
    self.assertEqual(targets.shape, (2, 0))
    self.assertTrue(np.isnan(loss))
    np.testing.assert_array_equal(grad, 0.0)
    # The port's differ (documented in the DQN docstring and the README).
    self.assertIs(params['advantage_estimator'].default, advantages.td_k)
    self.assertEqual(params['max_slice_length'].default, 2)
    self.assertIsNone(params['margin'].default)  # slice length - 1.

  @chex.variants(with_jit=True, without_jit=True)
  def test_port_defaults_are_trax_td_k_on_slices_of_two(self):
    loss_fn = n_step_value.NStepValueLoss(
      advantage_estimator=advantages.td_k(GAMMA, 1),
      margin=1,
      obs_ndim=1,
      value_scale=SCALE,
    )
    loss, extra = self.variant(functools.partial(loss_fn, NET))(
      None, None, TWO_STEP, None
    )
    targets, value_mean, returns_mean, trax_loss, _ = trax_value_batch(
      trax_td_k, 2, TWO_STEP.observation, TWO_STEP
    )
    # By hand: targets 1 + .9 * 30 = 28, 2 (terminated), -1 + .9 * 10 = 8,
    # over SCALE; network outputs at the actions 1, 1, 5.
    np.testing.assert_allclose(targets[:, 0], [2.8, 0.2, 0.8], rtol=1e-6)
    np.testing.assert_allclose(trax_loss, (1.3 + 0.32 + 3.7) / 3, rtol=1e-6)
    np.testing.assert_allclose(loss, trax_loss, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['value_mean'], value_mean, 1e-6)
    np.testing.assert_allclose(
      extra.metrics['returns_mean'], returns_mean, rtol=1e-6
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_binding_trax_defaults_trains_on_monte_carlo_returns(self):
    loss_fn = n_step_value.NStepValueLoss(
      advantage_estimator=advantages.monte_carlo(GAMMA, 0),
      margin=0,
      obs_ndim=1,
      value_scale=SCALE,
    )
    loss, extra = self.variant(functools.partial(loss_fn, NET))(
      None, None, ONE_STEP, None
    )
    # Targets 5 / 10 and 2 / 10 (the terminated step's reward); outputs at
    # the actions 1 and 1: Huber(0.5) = 0.125, Huber(0.8) = 0.32.
    np.testing.assert_allclose(extra.metrics['returns_mean'], 0.35, 1e-6)
    np.testing.assert_allclose(loss, (0.125 + 0.32) / 2, rtol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_monte_carlo_on_slices_of_two_is_trax_s(self):
    # With a margin Trax's monte_carlo does give targets: the return, or
    # the reward where the step terminated (values zeroed in place).
    loss_fn = n_step_value.NStepValueLoss(
      advantage_estimator=advantages.monte_carlo(GAMMA, 1),
      margin=1,
      obs_ndim=1,
      value_scale=SCALE,
    )
    loss, extra = self.variant(functools.partial(loss_fn, NET))(
      None, None, TWO_STEP, None
    )
    targets, _, returns_mean, trax_loss, _ = trax_value_batch(
      trax_monte_carlo, 2, TWO_STEP.observation, TWO_STEP
    )
    np.testing.assert_allclose(targets[:, 0], [0.1, 0.2, -0.1], rtol=1e-6)
    np.testing.assert_allclose(loss, trax_loss, rtol=1e-6)
    np.testing.assert_allclose(
      extra.metrics['returns_mean'], returns_mean, rtol=1e-6
    )


if __name__ == '__main__':
  absltest.main()
