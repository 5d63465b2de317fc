"""Tests for the training engine: update, Trainer, Loop."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from trax_rl import types
from trax_rl.networks import base
from trax_rl.supervised import loop as loop_lib
from trax_rl.supervised import trainer as trainer_lib
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


def test_one_sgd_step_by_hand():
  # grad = mean((w x - y) x) = mean((1-3)*[1,2]*[1,2]) = -5; w <- 1 + 0.1*5.
  trainer = trainer_lib.Trainer(NETWORK, _loss, optax.sgd(0.1))
  extra = trainer.train_step(_batch())
  np.testing.assert_allclose(trainer.params['w'], 1.5)
  np.testing.assert_allclose(extra.metrics['loss'], 0.5 * (4 + 16) / 2)
  np.testing.assert_allclose(extra.priorities, [2.0, 4.0])
  assert trainer.step == 1


def test_scanned_steps_equal_repeated_steps():
  one = trainer_lib.Trainer(NETWORK, _loss, optax.adam(0.1), seed=1)
  for _ in range(3):
    one.train_step(_batch())
  three = trainer_lib.Trainer(
    NETWORK, _loss, optax.adam(0.1), seed=1, num_steps=3
  )
  stacked = jax.tree.map(lambda x: jnp.stack([x] * 3), _batch())
  extra = three.train_step(stacked)
  np.testing.assert_allclose(three.params['w'], one.params['w'], rtol=1e-6)
  assert three.step == 3 and extra.priorities.shape == (3, 2)


def test_target_network_sync_period():
  trainer = trainer_lib.Trainer(
    NETWORK, _loss, optax.sgd(0.1), target_update_period=2
  )
  trainer.train_step(_batch())
  np.testing.assert_allclose(trainer.state.target_params['w'], 1.0)
  trainer.train_step(_batch())
  np.testing.assert_allclose(
    trainer.state.target_params['w'], trainer.params['w']
  )


def test_gradient_clipping_is_applied():
  opt = update.make_optimizer(1.0, optax.sgd, max_gradient_norm=0.5)
  trainer = trainer_lib.Trainer(NETWORK, _loss, opt)
  trainer.train_step(_batch())
  np.testing.assert_allclose(trainer.params['w'], 1.5)  # 1 + 1.0 * 0.5.
  with pytest.raises(ValueError, match='max_gradient_norm'):
    update.make_optimizer(1.0, optax.sgd, max_gradient_norm=0.0)


def test_schedules_see_one_based_steps():
  opt = update.make_optimizer(lambda step: 0.1 * step, optax.sgd)
  trainer = trainer_lib.Trainer(NETWORK, _loss, opt)
  trainer.train_step(_batch())  # lr = 0.1 * 1: w = 1 + 0.1 * 5.
  np.testing.assert_allclose(trainer.params['w'], 1.5)


def test_state_round_trip():
  a = trainer_lib.Trainer(
    NETWORK, _loss, optax.adam(0.1), seed=2, target_update_period=3
  )
  a.train_step(_batch())
  b = trainer_lib.Trainer(
    NETWORK, _loss, optax.adam(0.1), seed=7, target_update_period=3
  )
  b.load_state_dict(a.state_dict())
  for x, y in zip(jax.tree.leaves(a.state), jax.tree.leaves(b.state)):
    np.testing.assert_array_equal(x, y)
  a.train_step(_batch())
  b.train_step(_batch())
  np.testing.assert_array_equal(a.params['w'], b.params['w'])


def test_train_steps_pulls_from_stream():
  stream = iter([_batch(), _batch(5.0)])
  trainer = trainer_lib.Trainer(
    NETWORK, _loss, optax.sgd(0.0), batch_stream=stream
  )
  metrics = trainer.train_steps(2)
  # err means: -2 * 1.5 = -3 and -4 * 1.5 = -6 -> mean -4.5.
  np.testing.assert_allclose(metrics['err'], -4.5)


def test_loop_evaluates_and_checkpoints(tmp_path):
  def batches():
    while True:
      yield _batch()

  make = functools.partial(
    trainer_lib.Trainer, NETWORK, _loss, optax.sgd(0.01), batches()
  )
  eval_fn = lambda params, batch: (
    _loss(NETWORK, params, (), batch, None)[1].metrics
  )
  loop = loop_lib.Loop(
    make(),
    eval_fn=eval_fn,
    eval_batch_stream=batches(),
    eval_at=lambda s: s % 2 == 0,
    checkpoint_at=lambda s: s % 3 == 0,
    output_dir=str(tmp_path),
  )
  loop.run(4)
  assert [s for s, _ in loop.eval_history] == [2, 4]
  restored = loop_lib.Loop(make(), output_dir=str(tmp_path))
  assert restored.step == 3  # The last checkpoint was at step 3.


def test_remaining_evals_as_trax():
  # Epoch 2 of 10 steps in 5 rounds: from step 10 all 5 rounds remain.
  assert loop_lib.remaining_evals(10, 2, 10, 5) == 5
  assert loop_lib.remaining_evals(14, 2, 10, 5) == 3  # Restored mid-epoch.
  assert loop_lib.remaining_evals(20, 2, 10, 5) == 0
  with pytest.raises(ValueError, match='round boundary'):
    loop_lib.remaining_evals(13, 2, 10, 5)
  with pytest.raises(ValueError, match='round boundary'):
    loop_lib.remaining_evals(4, 2, 10, 5)  # Behind the epoch.
  with pytest.raises(ValueError, match='evals_per_epoch'):
    loop_lib.check_evals('value', 10, 3, 1)
  with pytest.raises(ValueError, match='value_eval_steps'):
    loop_lib.check_evals('value', 10, 2, -1)


def test_run_epoch_trains_in_rounds_and_evaluates_fresh_batches():
  def batches(w):
    while True:
      yield _batch(w)

  trainer = trainer_lib.Trainer(NETWORK, _loss, optax.sgd(0.0), batches(3.0))
  # Evaluation batches have targets 5 x: err = (1 - 5) x = [-4, -8].
  loop = loop_lib.Loop(
    trainer, eval_batch_stream=batches(5.0), n_eval_batches=2
  )
  train, evals = loop.run_epoch(1, train_steps_per_epoch=4, evals_per_epoch=2)
  assert loop.step == 4
  np.testing.assert_allclose(train['err'], -3.0)  # (1 - 3) * mean([1, 2]).
  np.testing.assert_allclose(evals['err'], -6.0)
  np.testing.assert_allclose(evals['loss'], 0.5 * (16 + 64) / 2)
  # Epoch 1 is done: nothing is left to run.
  assert loop.run_epoch(1, 4, 2) == ({}, {})
  assert loop.step == 4
