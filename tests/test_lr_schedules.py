"""Tests for trax_rl.lr_schedules, with values worked out by hand."""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl.testing import absltest, parameterized

from trax_rl import lr_schedules


class MultifactorTest(chex.TestCase):
  def _check(self, schedule, steps_and_values):
    for step, value in steps_and_values:
      np.testing.assert_allclose(
        self.variant(schedule)(step), value, rtol=1e-6, err_msg=f'step {step}'
      )

  @chex.variants(with_jit=True, without_jit=True)
  def test_constant(self):
    schedule = lr_schedules.multifactor('constant', constant=0.3)
    self._check(schedule, [(0, 0.3), (5, 0.3), (10**6, 0.3)])

  @chex.variants(with_jit=True, without_jit=True)
  def test_linear_warmup(self):
    schedule = lr_schedules.multifactor(
      'constant * linear_warmup', constant=2.0, warmup_steps=100
    )
    self._check(schedule, [(0, 0.0), (50, 1.0), (100, 2.0), (300, 2.0)])

  @chex.variants(with_jit=True, without_jit=True)
  def test_default_is_warmup_then_rsqrt_decay(self):
    schedule = lr_schedules.multifactor()
    # 0.1 * min(1, step / 400) / sqrt(max(step, 400)); sqrt(400) = 20.
    self._check(
      schedule, [(100, 0.1 * 0.25 / 20), (400, 0.1 / 20), (1600, 0.1 / 40)]
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_rsqrt_normalized_decay(self):
    schedule = lr_schedules.multifactor(
      'constant * rsqrt_normalized_decay', constant=1.0, warmup_steps=100
    )
    self._check(schedule, [(50, 1.0), (100, 1.0), (400, 0.5), (10000, 0.1)])

  @chex.variants(with_jit=True, without_jit=True)
  def test_decay_every_with_minimum(self):
    schedule = lr_schedules.multifactor(
      'constant * decay_every',
      constant=1.0,
      decay_factor=0.5,
      steps_per_decay=10,
    )
    self._check(schedule, [(9, 1.0), (10, 0.5), (35, 0.125)])
    # Trax's exploration-rate use: decay down to a floor.
    schedule = lr_schedules.multifactor(
      'constant * decay_every',
      constant=1.0,
      decay_factor=0.5,
      steps_per_decay=10,
      minimum=0.2,
    )
    self._check(schedule, [(10, 0.5), (20, 0.25), (35, 0.2), (1000, 0.2)])

  @chex.variants(with_jit=True, without_jit=True)
  def test_cosine_decay(self):
    schedule = lr_schedules.multifactor(
      'cosine_decay', warmup_steps=10, steps_per_cycle=100
    )
    # p = max(0, (step - 10) / 100); 0.5 * (1 + cos(pi * (p % 1))).
    self._check(
      schedule,
      [
        (0, 1.0),
        (10, 1.0),
        (35, 0.5 + math.sqrt(2) / 4),
        (60, 0.5),
        (110, 1.0),  # Warm restart.
      ],
    )

  @chex.variants(with_jit=True, without_jit=True)
  def test_two_constants(self):
    schedule = lr_schedules.multifactor(
      'two_constants',
      constant=0.1,
      second_constant=0.01,
      second_constant_step=10,
    )
    self._check(schedule, [(0, 0.1), (9, 0.1), (10, 0.01), (500, 0.01)])

  @parameterized.parameters(
    (7,), (np.int64(7),), (np.array(7),), (jnp.array(7),), (7.0,)
  )
  def test_step_types(self, step):
    schedule = lr_schedules.multifactor(
      'constant * linear_warmup', constant=1.0, warmup_steps=10
    )
    np.testing.assert_allclose(schedule(step), 0.7, rtol=1e-6)

  def test_array_of_steps(self):
    schedule = lr_schedules.multifactor(
      'constant * linear_warmup', constant=1.0, warmup_steps=10
    )
    np.testing.assert_allclose(
      schedule(np.array([0, 5, 20])), [0.0, 0.5, 1.0], rtol=1e-6
    )

  def test_unknown_factor(self):
    with self.assertRaisesRegex(ValueError, "Unknown factor 'linear_decay'"):
      lr_schedules.multifactor('constant * linear_decay')

  def test_zero_period(self):
    with self.assertRaisesRegex(ValueError, 'warmup_steps must be > 0'):
      lr_schedules.multifactor('constant * linear_warmup', warmup_steps=0)
    with self.assertRaisesRegex(ValueError, 'steps_per_decay must be > 0'):
      lr_schedules.multifactor('decay_every', steps_per_decay=0)


class LinearTest(absltest.TestCase):
  def test_goes_from_initial_to_final_then_stays(self):
    schedule = lr_schedules.linear_lr(initial=2e-3, final=1e-3, steps=4)
    np.testing.assert_allclose(
      [schedule(s) for s in range(7)],
      [2e-3, 1.75e-3, 1.5e-3, 1.25e-3, 1e-3, 1e-3, 1e-3],
      rtol=1e-6,
    )

  def test_bad_steps_named(self):
    with self.assertRaisesRegex(ValueError, 'linear_lr steps must be > 0'):
      lr_schedules.linear_lr(steps=0)


class OptaxTest(absltest.TestCase):
  def test_adam_under_jit(self):
    # Learning rates 1, 0.5, 0.25 at optax's steps 0, 1, 2.
    schedule = lr_schedules.multifactor(
      'constant * decay_every',
      constant=1.0,
      decay_factor=0.5,
      steps_per_decay=1,
    )
    optimizer = optax.adam(learning_rate=schedule)
    params = jnp.zeros(())
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state):
      # With a constant gradient Adam's normalized step is 1 (up to eps).
      updates, opt_state = optimizer.update(jnp.ones(()), opt_state, params)
      return optax.apply_updates(params, updates), opt_state

    for _ in range(3):
      params, opt_state = step(params, opt_state)
    np.testing.assert_allclose(params, -1.75, rtol=1e-5)


if __name__ == '__main__':
  absltest.main()
