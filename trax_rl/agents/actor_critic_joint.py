"""Actor-critic agents on one joint policy-and-value network (Trax's).

PPOJoint, A2CJoint and AWRJoint train a `PolicyAndValue` network with one
optimizer on policy loss + value_loss_coeff * value loss - entropy_coeff *
entropy. Acting and data come from `actor_critic_base`, and the jitted
epoch works as in `actor_critic_agent`: the steps of the stored
trajectories are packed once per epoch, advantages come from
`advantage_estimator` over whole trajectories (Trax's joint agents used
Monte Carlo returns minus values; td_lambda is the default here,
`@monte_carlo` gives Trax's), and all `train_steps_per_epoch` minibatch
updates run in one `lax.scan`.
"""

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax

from trax_rl import advantages, lr_schedules, validation
from trax_rl import task as task_lib
from trax_rl.agents import actor_critic_base, epoch_batch, policy_agents
from trax_rl.losses import actor_critic_joint as joint_losses
from trax_rl.losses import policy_objectives, value_estimates
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import trainer as trainer_lib
from trax_rl.supervised import update


class ActorCriticJointAgent(actor_critic_base.ActorCriticBase):
  """Trains a joint policy-and-value network with an actor-critic loss."""

  def __init__(
    self,
    task: task_lib.RLTask,
    joint_model: Callable[..., Any] = models.PolicyAndValue,
    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    lr_schedule: policy_agents.ScheduleFactory = lr_schedules.constant_lr,
    batch_size: int = 64,
    train_steps_per_epoch: int = 500,
    supervised_evals_per_epoch: int = 1,
    supervised_eval_steps: int = 1,
    max_slice_length: int = 1,
    normalize_advantages: bool = True,
    advantage_normalization_epsilon: float = 1e-5,
    advantage_estimator: Callable[..., advantages.Estimator] = (
      advantages.td_lambda
    ),
    added_policy_slice_length: int = 0,
    n_replay_epochs: int = 1,
    max_gradient_norm: float | None = None,
    **kwargs,
  ):
    """Configures the joint trainer.

    Args:
      task: the RLTask.
      joint_model: the module factory, called as `joint_model(n_inputs=)`;
        its apply returns (dist_inputs [B, I], values [B]).
      optimizer: optax factory, called as `optimizer(learning_rate=...)`.
      lr_schedule: zero-argument factory of the learning rate or schedule.
      batch_size: steps per update (times max_slice_length).
      train_steps_per_epoch: updates per epoch.
      supervised_evals_per_epoch: off-policy (AWRJoint) only: how often per
        epoch advantages and value targets are recomputed with the current
        network; must divide train_steps_per_epoch.
      supervised_eval_steps: accepted for Trax configs.
      max_slice_length: Trax's slice length; a batch of B slices of length
        L is B * L steps for these feed-forward networks.
      normalize_advantages: normalize advantages per minibatch.
      advantage_normalization_epsilon: added to their std.
      advantage_estimator: a factory from trax_rl.advantages.
      added_policy_slice_length: the estimator's margin (k of td_k).
      n_replay_epochs: train on the last this many epochs.
      max_gradient_norm: clip gradients to this global norm.
      **kwargs: for ActorCriticBase and Agent.

    Raises:
      ValueError: bad counts.
    """
    for name, value in [
      ('batch_size', batch_size),
      ('train_steps_per_epoch', train_steps_per_epoch),
      ('supervised_evals_per_epoch', supervised_evals_per_epoch),
      ('supervised_eval_steps', supervised_eval_steps),
      ('max_slice_length', max_slice_length),
    ]:
      validation.check_count(name, value, 1)
    if train_steps_per_epoch % supervised_evals_per_epoch:
      raise ValueError(
        f'train_steps_per_epoch ({train_steps_per_epoch}) must be a '
        f'multiple of supervised_evals_per_epoch ({supervised_evals_per_epoch})'
      )
    self._estimator = advantage_estimator(
      gamma=task.gamma, margin=added_policy_slice_length
    )
    super().__init__(task, n_replay_epochs=n_replay_epochs, **kwargs)
    self._margin = added_policy_slice_length
    self._steps = train_steps_per_epoch
    self._rounds = supervised_evals_per_epoch if not self.on_policy else 1
    self._batch = batch_size * max_slice_length
    self._adv_norm = dict(
      normalize_advantages=normalize_advantages,
      advantage_normalization_epsilon=advantage_normalization_epsilon,
    )
    self._net = networks.from_module(
      joint_model(n_inputs=self._policy_dist.n_inputs),
      task.example_observation(),
    )
    opt = update.make_optimizer(lr_schedule(), optimizer, max_gradient_norm)
    loss = self.make_joint_loss()
    self._trainer = trainer_lib.Trainer(
      self._net, loss, opt, seed=self.next_key(), name='joint'
    )
    self._update = update.make_update_fn(self._net, loss, opt)
    self._train = jax.jit(self._train_epoch_fn)

  def make_joint_loss(self) -> joint_losses.JointLoss:
    raise NotImplementedError

  @property
  def trainer(self) -> trainer_lib.Trainer:
    return self._trainer

  def acting_network(self) -> networks.Network:
    return self._net

  def acting_params(self) -> Any:
    return self._trainer.params

  def _advantages(self, params, data):
    """(advantages, value targets, values), all [N]."""
    _, values = self._net.apply(params, data.observation)
    _, next_values = self._net.apply(params, data.next_observation)
    adv, targets = epoch_batch.advantages_and_targets(
      self._estimator, self._margin, self._task.gamma, data, values, next_values
    )
    return adv, targets, values

  def _train_epoch_fn(self, state, stats, data, idx):
    data = self.normalize_data(stats, data)
    old_log_prob = self._policy_dist.log_prob(data.dist_inputs, data.action)
    _, first_targets, first_values = self._advantages(state.params, data)

    def one_round(state, round_idx):
      adv, targets, _ = self._advantages(
        jax.lax.stop_gradient(state.params), data
      )

      def step(state, i):
        batch = joint_losses.JointBatch(
          data.observation[i],
          data.action[i],
          adv[i],
          targets[i],
          old_log_prob[i],
          data.mask[i],
        )
        return self._update(state, batch)

      return jax.lax.scan(step, state, round_idx)

    state, extras = jax.lax.scan(one_round, state, idx)
    metrics = jax.tree.map(jnp.mean, extras.metrics)
    metrics['explained_variance_before'] = value_estimates.explained_variance(
      first_values, first_targets, data.mask
    )
    return state, metrics

  def _train_args(self, data: epoch_batch.EpochData):
    n_valid = int(data.mask.sum())
    idx = self.minibatches(n_valid, self._steps, self._batch)
    idx = idx.reshape(self._rounds, -1, self._batch)
    return self._trainer.state, self._stats, data, idx

  def train_epoch(self) -> dict[str, float]:
    state, metrics = self._train(*self._train_args(self.training_data()))
    self._trainer.state = state
    return {f'joint/{k}': float(v) for k, v in metrics.items()}

  def compile_update(self) -> None:
    data = self.example_training_data()
    self._train.lower(*self._train_args(data)).compile()

  def state_dict(self) -> dict[str, Any]:
    return dict(super().state_dict(), joint=self._trainer.state_dict())

  def load_state_dict(self, state: dict[str, Any]) -> None:
    super().load_state_dict(state)
    self._trainer.load_state_dict(state['joint'])


class PPOJoint(ActorCriticJointAgent):
  """PPO (Schulman et al., 2017) on a joint policy-and-value network."""

  on_policy = True

  def __init__(
    self,
    task: task_lib.RLTask,
    epsilon: float = 0.2,
    value_loss_coeff: float = 0.1,
    entropy_coeff: float = 0.01,
    **kwargs,
  ):
    """Configures PPOJoint.

    Args:
      task: the RLTask.
      epsilon: clip range of the probability ratio.
      value_loss_coeff: weight of the value loss.
      entropy_coeff: weight of the entropy bonus.
      **kwargs: for ActorCriticJointAgent.
    """
    actor_critic_base.check_positive('epsilon', epsilon)
    self._coeffs = dict(
      epsilon=epsilon,
      value_loss_coeff=value_loss_coeff,
      entropy_coeff=entropy_coeff,
    )
    super().__init__(task, **kwargs)

  def make_joint_loss(self) -> joint_losses.PPOJointLoss:
    return joint_losses.PPOJointLoss(
      self._policy_dist, **self._coeffs, **self._adv_norm
    )


class A2CJoint(ActorCriticJointAgent):
  """A2C (Mnih et al., 2016) on a joint policy-and-value network."""

  on_policy = True

  def __init__(
    self,
    task: task_lib.RLTask,
    value_loss_coeff: float = 0.1,
    entropy_coeff: float = 0.01,
    **kwargs,
  ):
    """Configures A2CJoint.

    Args:
      task: the RLTask.
      value_loss_coeff: weight of the value loss.
      entropy_coeff: weight of the entropy bonus.
      **kwargs: for ActorCriticJointAgent.
    """
    self._coeffs = dict(
      value_loss_coeff=value_loss_coeff, entropy_coeff=entropy_coeff
    )
    super().__init__(task, **kwargs)

  def make_joint_loss(self) -> joint_losses.A2CJointLoss:
    return joint_losses.A2CJointLoss(
      self._policy_dist, **self._coeffs, **self._adv_norm
    )


class AWRJoint(ActorCriticJointAgent):
  """AWR (Peng et al., 2019) on a joint policy-and-value network."""

  on_policy = False

  def __init__(
    self,
    task: task_lib.RLTask,
    value_loss_coeff: float = 0.1,
    beta: float = 1.0,
    w_max: float = 20.0,
    thresholds: Sequence[policy_objectives.Threshold] | None = None,
    entropy_coeff: float = 0.0,
    **kwargs,
  ):
    """Configures AWRJoint.

    Args:
      task: the RLTask.
      value_loss_coeff: weight of the value loss.
      beta: temperature of the weights exp(advantage / beta).
      w_max: the largest weight.
      thresholds: optional (percentile, weight, minimum) weights instead.
      entropy_coeff: weight of an entropy bonus (Trax's had none: 0).
      **kwargs: for ActorCriticJointAgent.
    """
    actor_critic_base.check_positive('beta', beta)
    self._coeffs = dict(
      value_loss_coeff=value_loss_coeff,
      entropy_coeff=entropy_coeff,
      beta=beta,
      w_max=w_max,
      thresholds=actor_critic_base.as_thresholds(thresholds),
    )
    super().__init__(task, **kwargs)

  def make_joint_loss(self) -> joint_losses.AWRJointLoss:
    return joint_losses.AWRJointLoss(
      self._policy_dist, **self._coeffs, **self._adv_norm
    )
