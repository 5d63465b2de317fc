"""Fidelity, item 3: Trax DQN's metrics are in the network's (scaled) units.

Source: google/trax, trax/rl/training.py, class DQN. With
`scale_value_targets` the network predicts Q / value_scale, value_scale =
1 / (1 - gamma); Trax trains on `target_returns / value_scale`, and its
`value_mean` and `returns_mean` metrics average the raw network output at
the taken actions and those scaled targets. gamma .9 makes the factor 10.
"""

import functools

import chex
import numpy as np
from absl.testing import absltest

from trax_rl import advantages, trajectory, types
from trax_rl.losses import n_step_value
from trax_rl.networks import base

GAMMA = 0.9
SCALE = 1.0 / (1.0 - GAMMA)  # 10.

# The network outputs the observation: Q = SCALE * observation.
NET = base.Network(
  init=lambda key: None,
  apply=lambda params, obs: types.QOutput(q_values=obs),
)


def _batch():
  # One slice of two steps: o0 = [1, 0], action 0, reward 1, o1 = [2, 3].
  reward = np.array([[1.0, 0.0]], np.float32)
  return trajectory.TimeStepBatch(
    observation=np.array([[[1.0, 0.0], [2.0, 3.0]]], np.float32),
    action=np.zeros((1, 2), np.int32),
    reward=reward,
    done=np.zeros((1, 2), bool),
    mask=np.ones((1, 2), np.float32),
    dist_inputs=None,
    env_info=trajectory.EnvInfo(np.ones_like(reward), np.ones_like(reward)),
    return_=np.zeros_like(reward),
  )


class MetricsTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_value_and_returns_mean_are_scaled(self):
    loss_fn = n_step_value.NStepValueLoss(
      advantage_estimator=advantages.td_k(GAMMA, 1),
      margin=1,
      obs_ndim=1,
      value_scale=SCALE,
    )
    loss, extra = self.variant(functools.partial(loss_fn, NET))(
      None, None, _batch(), None
    )
    # Q(o0, 0) = 10 * 1 = 10; max Q(o1) = 10 * 3 = 30; one-step target
    # 1 + .9 * 30 = 28. Trax's value_mean is the network output 10 / 10 = 1
    # (the port reported 10); its returns_mean 28 / 10 = 2.8 (the port
    # reported 28).
    np.testing.assert_allclose(extra.metrics['value_mean'], 1.0, rtol=1e-6)
    np.testing.assert_allclose(extra.metrics['returns_mean'], 2.8, rtol=1e-6)
    # The loss was already in those units: Huber((10 - 28) / 10) = 1.3.
    np.testing.assert_allclose(loss, 1.3, rtol=1e-6)


if __name__ == '__main__':
  absltest.main()
