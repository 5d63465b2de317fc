"""The gin names of the actor-critics: an objective on a network layout.

A2C, PPO, AWR and SamplingAWR train separate policy and value networks
(`separate.Separate`); A2CJoint, PPOJoint and AWRJoint are the same
algorithms on one joint network (`joint.Joint`): they differ from them only
in `layout_class`. Each name only picks its objective, its layout and its
defaults; every other knob is `agent.ActorCritic`'s (entropy_coeff, the
advantage knobs, observation normalization, ...) or its layout's
(`separate.Separate`'s policy_* and value_* knobs, `joint.Joint`'s
batch_size, train_steps_per_epoch, value_loss_coeff, ...).
"""

from collections.abc import Sequence

from trax_rl import task as task_lib
from trax_rl import validation
from trax_rl.agents.actor_critic import agent, knobs
from trax_rl.algorithms.layouts import joint, separate
from trax_rl.losses import actor_critic as ac_losses
from trax_rl.networks import models


def _awr(beta, w_max, thresholds) -> ac_losses.AWRObjective:
  validation.check_positive('beta', beta)
  return ac_losses.AWRObjective(beta, w_max, knobs.as_thresholds(thresholds))


def _ppo(epsilon) -> ac_losses.PPOObjective:
  validation.check_positive('epsilon', epsilon)
  return ac_losses.PPOObjective(epsilon)


class A2C(agent.ActorCritic):
  """Advantage actor-critic (Mnih et al., 2016, arXiv:1602.01783)."""

  on_policy = True
  layout_class = separate.Separate

  default_entropy_coeff = 0.01

  def __init__(self, task: task_lib.RLTask, **kwargs):
    """Configures A2C (its objective has no knobs).

    Args:
      task: the RLTask.
      **kwargs: for `agent.ActorCritic` and the layout.
    """
    super().__init__(task, ac_losses.A2CObjective(), **kwargs)


class PPO(agent.ActorCritic):
  """Proximal Policy Optimization (Schulman et al., 2017, 1707.06347)."""

  on_policy = True
  layout_class = separate.Separate

  default_entropy_coeff = 0.01

  def __init__(self, task: task_lib.RLTask, epsilon: float = 0.2, **kwargs):
    """Configures PPO.

    Args:
      task: the RLTask.
      epsilon: clip range of the probability ratio.
      **kwargs: for `agent.ActorCritic` and the layout.
    """
    super().__init__(task, _ppo(epsilon), **kwargs)


class AWR(agent.ActorCritic):
  """Advantage-Weighted Regression (Peng et al., 2019, 1910.00177)."""

  on_policy = False
  layout_class = separate.Separate

  def __init__(
    self,
    task: task_lib.RLTask,
    beta: float = 1.0,
    w_max: float = 20.0,
    thresholds: Sequence[ac_losses.Threshold] | None = None,
    **kwargs,
  ):
    """Configures AWR on separate networks.

    Args:
      task: the RLTask.
      beta: temperature of the weights exp(advantage / beta).
      w_max: the largest weight.
      thresholds: optional (percentile, weight, minimum) triples: weights
        by advantage percentiles instead of exp (Trax's option).
      **kwargs: for `agent.ActorCritic` and the layout.
    """
    super().__init__(task, _awr(beta, w_max, thresholds), **kwargs)


class SamplingAWR(AWR):
  """AWR on Q-values of actions sampled from the behaviour policy (Trax's).

  The value network is a Q network (q_value=True). For each state,
  q_value_n_samples actions are sampled from the stored behaviour policy;
  the advantage of each is Q(s, a_i) minus their mean.
  """

  sampled_actions = True

  def __init__(
    self,
    task: task_lib.RLTask,
    reweight: bool = False,
    value_model: separate.ModelFn = models.ActionValue,
    **kwargs,
  ):
    """Configures Sampling AWR.

    Args:
      task: the RLTask.
      reweight: weight sampled actions by pi_new / pi_behaviour.
      value_model: the Q module factory (takes observation and action).
      **kwargs: for AWR (beta, w_max, thresholds), `agent.ActorCritic` and
        `separate.Separate` (not q_value: it is on).
    """
    self._reweight = reweight
    super().__init__(task, q_value=True, value_model=value_model, **kwargs)

  def make_policy_loss(
    self, value_loss_coeff: float | None, all_discrete: bool
  ) -> ac_losses.SamplingAWRLoss:
    """Sampling AWR's loss (separate networks only)."""
    del value_loss_coeff
    return ac_losses.SamplingAWRLoss(
      self.policy_distribution,
      self._objective,
      self._adv_norm,
      self._reweight,
      all_discrete,
    )


class A2CJoint(A2C):
  """A2C (Mnih et al., 2016) on a joint policy-and-value network."""

  layout_class = joint.Joint


class PPOJoint(PPO):
  """PPO (Schulman et al., 2017) on a joint policy-and-value network."""

  layout_class = joint.Joint


class AWRJoint(AWR):
  """AWR (Peng et al., 2019) on a joint policy-and-value network.

  Trax's had no entropy bonus: entropy_coeff defaults to 0, as AWR's.
  """

  layout_class = joint.Joint
