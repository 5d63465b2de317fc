"""Fidelity, item 8: LoopPolicyAgent's network evaluation, as Trax's.

Sources: google/trax, trax/rl/training.py, `LoopPolicyAgent(network_eval_at,
n_eval_batches)` hands them to `supervised.training.Loop(eval_at=...)` and
`PolicyEvalTask(train_task, n_eval_batches)`; trax/rl/policy_tasks.py,
`PolicyEvalTask`: `advantage_{mean,std}` of the estimator's advantages
before normalization, `weight_{mean,std,min,max}` of `calculate_weights`
(normalized, then `weight_fn`); trax/supervised/training.py: `eval_at`
None evaluates at step 1 and every `n_steps_per_checkpoint` (100) steps.
"""

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest

from trax_rl import advantages, distributions, trajectory
from trax_rl.algorithms import policy_gradient
from trax_rl.losses import policy as policy_losses

GAMMA = 0.9
EPSILON = 1e-5
# Eight one-step slices (Trax's PolicyGradient default), spread returns.
RETURNS = np.array([[1.0], [3.0], [0.5], [7.0], [2.0], [2.0], [9.0], [-1.0]])
DONES = np.array([[False]] * 7 + [[True]])  # A terminal step: advantage r.
REWARDS = np.full((8, 1), 0.25)


def trax_eval_metrics(rewards, returns, dones, weight_fn):
  """Transcription of Trax's PolicyEvalTask metrics for PolicyGradient."""
  values = np.broadcast_to(np.mean(returns), returns.shape).copy()
  returns = returns.copy()
  returns[dones] = rewards[dones]  # monte_carlo(margin=0), in place.
  values[dones] = 0
  adv = returns - values
  normalized = adv - np.mean(adv)
  normalized = normalized / (np.std(normalized) + EPSILON)
  weights = weight_fn(normalized)
  return {
    'advantage_mean': np.mean(adv),
    'advantage_std': np.std(adv),
    'weight_mean': np.mean(weights),
    'weight_std': np.std(weights),
    'weight_min': np.min(weights),
    'weight_max': np.max(weights),
  }


def _batch():
  ones = np.ones((8, 1), np.float32)
  return trajectory.TimeStepBatch(
    observation=np.zeros((8, 1, 3), np.float32),
    action=np.zeros((8, 1), np.int32),
    reward=REWARDS.astype(np.float32),
    done=DONES,
    mask=ones,
    dist_inputs=None,
    env_info=trajectory.EnvInfo(control_mask=ones, discount_mask=ones),
    return_=RETURNS.astype(np.float32),
  )


class _Network:
  """A fixed policy (the metrics above do not depend on it)."""

  @staticmethod
  def apply(params, obs):
    return jnp.zeros(obs.shape[:-1] + (2,)) + params


class LoopPolicyEvalTest(absltest.TestCase):
  def _metrics(self, weight_fn):
    loss = policy_losses.WeightedLogLikelihood(
      distribution=distributions.create_distribution(gym.spaces.Discrete(2)),
      advantage_estimator=advantages.monte_carlo(GAMMA, margin=0),
      weight_fn=weight_fn,
      advantage_normalization_epsilon=EPSILON,
    )
    _, extra = loss(_Network, jnp.zeros(()), (), _batch(), None)
    return extra.metrics

  def test_advantage_and_weight_metrics(self):
    for ours_fn, trax_fn in (
      (lambda a: a, lambda a: a),  # PolicyGradient
      (jnp.exp, np.exp),  # an AWR-like weight
    ):
      ours = self._metrics(ours_fn)
      trax = trax_eval_metrics(REWARDS, RETURNS, DONES, trax_fn)
      for name, value in trax.items():
        np.testing.assert_allclose(
          ours[name], value, rtol=1e-5, atol=1e-6, err_msg=name
        )
    # Raw advantages: not the normalized ones, whose mean is 0.
    self.assertGreater(abs(float(ours['advantage_mean'])), 0.1)

  def test_default_eval_steps_are_trax_loops(self):
    def trax_default_at(step, period=100):
      return step == 1 or step % period == 0

    steps = jnp.arange(0, 1001)
    ours = np.asarray(jax.jit(policy_gradient.trax_eval_at)(steps))
    np.testing.assert_array_equal(
      ours, [trax_default_at(int(s)) for s in steps]
    )


if __name__ == '__main__':
  absltest.main()
