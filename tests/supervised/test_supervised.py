"""Tests for the pure update step (trax_rl.supervised.update)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from trax_rl import types
from trax_rl.networks import base
from trax_rl.supervised import update

# A linear model y = w * x; loss 0.5 * mean((w x - y)^2).
NETWORK = base.Network(
  init=lambda key: {'w': jnp.array(1.0)},
  apply=lambda params, x: params['w'] * x,
)


def _loss(network, params, target_params, batch, key):
  del target_params, key
  x, y = batch
  err = network.apply(params, x) - y
  return 0.5 * jnp.mean(err**2), types.LossExtra(
    {'err': jnp.mean(err)}, jnp.abs(err)
  )


def _batch(w=3.0):
  x = jnp.array([1.0, 2.0])
  return x, w * x


def _state(optimizer, seed=0, target=False):
  return update.init_state(NETWORK, optimizer, jax.random.PRNGKey(seed), target)


def test_one_sgd_step_by_hand():
  # grad = mean((w x - y) x) = mean((1-3)*[1,2]*[1,2]) = -5; w <- 1 + 0.1*5.
  opt = optax.sgd(0.1)
  state, extra = update.make_update_fn(NETWORK, _loss, opt)(
    _state(opt), _batch()
  )
  np.testing.assert_allclose(state.params['w'], 1.5)
  np.testing.assert_allclose(extra.metrics['loss'], 0.5 * (4 + 16) / 2)
  np.testing.assert_allclose(extra.priorities, [2.0, 4.0])
  assert int(state.step) == 1


def test_scanned_steps_equal_repeated_steps():
  opt = optax.adam(0.1)
  one_fn = update.make_update_fn(NETWORK, _loss, opt)
  one = _state(opt, seed=1)
  for _ in range(3):
    one, _ = one_fn(one, _batch())
  three_fn = update.make_update_fn(NETWORK, _loss, opt, num_steps=3)
  stacked = jax.tree.map(lambda x: jnp.stack([x] * 3), _batch())
  three, extra = three_fn(_state(opt, seed=1), stacked)
  np.testing.assert_allclose(three.params['w'], one.params['w'], rtol=1e-6)
  assert int(three.step) == 3 and extra.priorities.shape == (3, 2)


def test_target_network_sync_period():
  opt = optax.sgd(0.1)
  fn = update.make_update_fn(NETWORK, _loss, opt, target_update_period=2)
  state, _ = fn(_state(opt, target=True), _batch())
  np.testing.assert_allclose(state.target_params['w'], 1.0)
  state, _ = fn(state, _batch())
  np.testing.assert_allclose(state.target_params['w'], state.params['w'])


def test_gradient_clipping_is_applied():
  opt = update.make_optimizer(1.0, optax.sgd, max_gradient_norm=0.5)
  state, _ = update.make_update_fn(NETWORK, _loss, opt)(_state(opt), _batch())
  np.testing.assert_allclose(state.params['w'], 1.5)  # 1 + 1.0 * 0.5.
  with pytest.raises(ValueError, match='max_gradient_norm'):
    update.make_optimizer(1.0, optax.sgd, max_gradient_norm=0.0)


def test_schedules_see_one_based_steps():
  opt = update.make_optimizer(lambda step: 0.1 * step, optax.sgd)
  # lr = 0.1 * 1 on the first update: w = 1 + 0.1 * 5.
  state, _ = update.make_update_fn(NETWORK, _loss, opt)(_state(opt), _batch())
  np.testing.assert_allclose(state.params['w'], 1.5)


def test_a_nonfinite_loss_is_recorded_once():
  opt = optax.sgd(0.1)
  fn = update.make_update_fn(NETWORK, _loss, opt)
  state, _ = fn(_state(opt), _batch())
  assert update.describe(state.health) is None
  bad = (jnp.array([1.0, 2.0]), jnp.array([jnp.nan, 1.0]))
  state, _ = fn(state, bad)
  state, _ = fn(state, bad)
  assert update.describe(state.health) == (2, 'loss')
