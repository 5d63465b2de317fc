"""Actor-critic agents with separate policy and value networks (Trax's).

ActorCriticAgent -> AdvantageBasedActorCriticAgent -> A2C, PPO, AWR,
SamplingAWR, with Trax's knobs. The family's other modules:
`epoch_batch` (trajectories packed into flat arrays, minibatch indices),
`actor_critic_base` (acting, observation normalization, training data),
`critic` (V, or Q aggregated over sampled actions), `actor_critic_agent`
(the jitted two-network epoch) and `actor_critic_joint` (one joint
network). What differs from Trax, and why:

- Data. After each collection the steps of the stored trajectories (the
  last epoch for on-policy algorithms, the last `n_replay_epochs` for AWR)
  are packed end to end into flat arrays once, on the host. Advantages and
  value targets are computed inside jit over whole trajectories (a
  time-limit truncation or an epoch cut bootstraps from V(s_next)), and
  minibatches of steps are gathered from the packed arrays. For
  feed-forward networks this is what Trax's slices with a margin of
  `added_policy_slice_length` approximated.
- Speed. One jitted call per epoch runs all value and policy updates in
  `lax.scan`s, with the pure update the `Trainer` uses (its state is read
  and written back), so a PPO epoch of 20 minibatch steps is one dispatch.
- On-policy algorithms (A2C, PPO) compute advantages and value targets once
  per epoch with the value network that acted, as in the PPO paper; AWR
  trains the value network first (recomputing its targets
  `value_evals_per_epoch` times, Trax's target-network syncs) and then
  computes the policy's advantages with it, as Trax does.
- Entropy is the full distribution's. Continuous actions are stored
  unclipped (their log-probabilities are what the policy sampled) and
  clipped to the action space only for the env.
"""

from collections.abc import Callable, Sequence

from trax_rl import advantages
from trax_rl import task as task_lib
from trax_rl.agents import (
  actor_critic_agent,
  actor_critic_base,
  epoch_batch,
  policy_agents,
)
from trax_rl.losses import actor_critic as ac_losses
from trax_rl.losses import policy_objectives
from trax_rl.networks import models

# Re-exported: this module was the home of the whole family; gin files,
# tests and other modules name these through it.
ModelFn = actor_critic_base.ModelFn
ScheduleFactory = policy_agents.ScheduleFactory
UNCLIPPED_ACTION = epoch_batch.UNCLIPPED_ACTION
EpochData = epoch_batch.EpochData
pack_trajectories = epoch_batch.pack_trajectories
pad_epoch_data = epoch_batch.pad_epoch_data
bucket_size = epoch_batch.bucket_size
minibatch_indices = epoch_batch.minibatch_indices
as_thresholds = actor_critic_base.as_thresholds
ActorCriticBase = actor_critic_base.ActorCriticBase
ActorCriticAgent = actor_critic_agent.ActorCriticAgent
ActionValue = models.ActionValue


class AdvantageBasedActorCriticAgent(actor_critic_agent.ActorCriticAgent):
  """An actor-critic whose policy loss weighs log-probs by advantages."""

  def __init__(
    self,
    task: task_lib.RLTask,
    advantage_estimator: Callable[..., advantages.Estimator] = (
      advantages.td_lambda
    ),
    advantage_normalization: bool = True,
    advantage_normalization_epsilon: float = 1e-5,
    advantage_normalization_factor: float = 1.0,
    added_policy_slice_length: int = 0,
    **kwargs,
  ):
    """Configures the advantage computation.

    Args:
      task: the RLTask.
      advantage_estimator: a factory from trax_rl.advantages (monte_carlo,
        td_k, td_lambda, gae), called as `f(gamma=, margin=)`; for the
        value targets (values + advantages) and the policy's advantages.
      advantage_normalization: normalize advantages per minibatch.
      advantage_normalization_epsilon: added to their std.
      advantage_normalization_factor: multiplies normalized advantages.
      added_policy_slice_length: the estimator's margin (see
        ActorCriticAgent).
      **kwargs: for ActorCriticAgent.
    """
    self._estimator = advantage_estimator(
      gamma=task.gamma, margin=added_policy_slice_length
    )
    self._adv_norm = dict(
      advantage_normalization=advantage_normalization,
      advantage_normalization_epsilon=advantage_normalization_epsilon,
      advantage_normalization_factor=advantage_normalization_factor,
    )
    super().__init__(
      task, added_policy_slice_length=added_policy_slice_length, **kwargs
    )

  @property
  def advantage_estimator(self) -> advantages.Estimator:
    return self._estimator


class A2C(AdvantageBasedActorCriticAgent):
  """Advantage actor-critic (Mnih et al., 2016, arXiv:1602.01783)."""

  on_policy = True

  def __init__(
    self, task: task_lib.RLTask, entropy_coeff: float = 0.01, **kwargs
  ):
    """Configures A2C.

    Args:
      task: the RLTask.
      entropy_coeff: weight of the entropy bonus.
      **kwargs: for AdvantageBasedActorCriticAgent.
    """
    self._entropy_coeff = entropy_coeff
    super().__init__(task, **kwargs)

  def make_policy_loss(self) -> ac_losses.A2CLoss:
    return ac_losses.A2CLoss(
      self._policy_dist, self._entropy_coeff, **self._adv_norm
    )


class PPO(AdvantageBasedActorCriticAgent):
  """Proximal Policy Optimization (Schulman et al., 2017, 1707.06347)."""

  on_policy = True

  def __init__(
    self,
    task: task_lib.RLTask,
    epsilon: float = 0.2,
    entropy_coeff: float = 0.01,
    **kwargs,
  ):
    """Configures PPO.

    Args:
      task: the RLTask.
      epsilon: clip range of the probability ratio.
      entropy_coeff: weight of the entropy bonus.
      **kwargs: for AdvantageBasedActorCriticAgent.
    """
    actor_critic_base.check_positive('epsilon', epsilon)
    self._epsilon = epsilon
    self._entropy_coeff = entropy_coeff
    super().__init__(task, **kwargs)

  def make_policy_loss(self) -> ac_losses.PPOLoss:
    return ac_losses.PPOLoss(
      self._policy_dist,
      self._entropy_coeff,
      epsilon=self._epsilon,
      **self._adv_norm,
    )


class AWR(AdvantageBasedActorCriticAgent):
  """Advantage-Weighted Regression (Peng et al., 2019, 1910.00177)."""

  on_policy = False

  def __init__(
    self,
    task: task_lib.RLTask,
    beta: float = 1.0,
    w_max: float = 20.0,
    thresholds: Sequence[policy_objectives.Threshold] | None = None,
    **kwargs,
  ):
    """Configures AWR.

    Args:
      task: the RLTask.
      beta: temperature of the weights exp(advantage / beta).
      w_max: the largest weight.
      thresholds: optional (percentile, weight, minimum) triples: weights
        by advantage percentiles instead of exp (Trax's option).
      **kwargs: for AdvantageBasedActorCriticAgent.
    """
    actor_critic_base.check_positive('beta', beta)
    self._awr = dict(
      beta=beta,
      w_max=w_max,
      thresholds=actor_critic_base.as_thresholds(thresholds),
    )
    super().__init__(task, **kwargs)

  def make_policy_loss(self) -> ac_losses.AWRLoss:
    return ac_losses.AWRLoss(self._policy_dist, **self._adv_norm, **self._awr)


class SamplingAWR(AdvantageBasedActorCriticAgent):
  """AWR on Q-values of actions sampled from the behaviour policy (Trax's).

  The value network is a Q network (q_value=True). For each state,
  q_value_n_samples actions are sampled from the stored behaviour policy;
  the advantage of each is Q(s, a_i) minus their mean.
  """

  on_policy = False

  def __init__(
    self,
    task: task_lib.RLTask,
    beta: float = 1.0,
    w_max: float = 20.0,
    thresholds: Sequence[policy_objectives.Threshold] | None = None,
    reweight: bool = False,
    value_model: ModelFn = models.ActionValue,
    **kwargs,
  ):
    """Configures Sampling AWR.

    Args:
      task: the RLTask.
      beta: temperature of the weights.
      w_max: the largest weight.
      thresholds: as in AWR.
      reweight: weight sampled actions by pi_new / pi_behaviour.
      value_model: the Q module factory (takes observation and action).
      **kwargs: for AdvantageBasedActorCriticAgent (not q_value: it is on).
    """
    actor_critic_base.check_positive('beta', beta)
    self._awr = dict(
      beta=beta,
      w_max=w_max,
      thresholds=actor_critic_base.as_thresholds(thresholds),
      reweight=reweight,
    )
    super().__init__(task, q_value=True, value_model=value_model, **kwargs)

  def make_policy_loss(self) -> ac_losses.SamplingAWRLoss:
    return ac_losses.SamplingAWRLoss(
      self._policy_dist,
      sampled_all_discrete=self._all_discrete,
      **self._awr,
      **self._adv_norm,
    )

  def _policy_phase(self, policy_state, value_params, data, adv, idx, key):
    del adv
    actions, act_log_probs = self._critic.sample_actions(data.dist_inputs, key)
    q_values = self._critic.q_values(value_params, data.observation, actions)
    return self._scan_policy_updates(
      policy_state,
      idx,
      lambda i: ac_losses.SamplingBatch(
        data.observation[i],
        actions[:, i],
        q_values[:, i],
        act_log_probs[:, i],
        data.mask[i],
      ),
    )
