"""Fidelity, item 4: Acme QR-DQN's `mean_loss` metric.

Source: acme/agents/jax/dqn/losses.py, class QrDqn, which reports
`LossExtra(metrics={'mean_loss': loss})`. The port reports it too, next to
its own 'loss', and the update (which writes its own 'loss') keeps both.
"""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl.testing import absltest

from trax_rl import types
from trax_rl.losses import distributional
from trax_rl.networks import base
from trax_rl.supervised import train_state, update

# Two quantiles (tau .25, .75) of one action: dist = observation + b.
NET = base.Network(
  init=lambda key: None,
  apply=lambda params, obs: types.QOutput(
    jnp.mean(obs + params['b'], -1), obs + params['b']
  ),
)
PARAMS = {'b': jnp.zeros(2)}


def _batch():
  # Quantiles 0, terminal, rewards .5 and 2: every target is above both
  # quantiles, so each pair weighs tau_i; Huber (kappa 1) of .5 is .125,
  # of 2 is 1.5. Per example sum_i mean_j tau_i * h = (.25 + .75) * h:
  # [.125, 1.5]; mean .8125.
  transition = types.Transition(
    observation=np.zeros((2, 1, 2), np.float32),
    action=np.zeros(2, np.int32),
    reward=np.array([0.5, 2.0], np.float32),
    discount=np.zeros(2, np.float32),
    next_observation=np.zeros((2, 1, 2), np.float32),
  )
  return types.Batch(transition, np.full(2, 0.5, np.float32))


EXPECTED = 0.8125


class QrDqnMetricsTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_mean_loss_is_the_loss(self):
    loss_fn = functools.partial(distributional.QrDqn(), NET)
    loss, extra = self.variant(loss_fn)(PARAMS, PARAMS, _batch(), None)
    np.testing.assert_allclose(loss, EXPECTED, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['mean_loss'], EXPECTED, 1e-6)
    self.assertIn('loss', extra.metrics)

  def test_update_keeps_mean_loss_and_loss(self):
    optimizer = optax.sgd(0.0)
    state = train_state.TrainState(
      PARAMS,
      PARAMS,
      optimizer.init(PARAMS),
      jnp.zeros((), jnp.int32),
      jax.random.PRNGKey(0),
    )
    step = jax.jit(
      update.make_update_fn(NET, distributional.QrDqn(), optimizer)
    )
    _, extra = step(state, _batch())
    np.testing.assert_allclose(extra.metrics['mean_loss'], EXPECTED, 1e-6)
    np.testing.assert_allclose(extra.metrics['loss'], EXPECTED, 1e-6)


if __name__ == '__main__':
  absltest.main()
