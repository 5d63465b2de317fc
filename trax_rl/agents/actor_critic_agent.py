"""Actor-critics with separate policy and value networks (Trax's).

`ActorCriticAgent` trains a policy network and a value network (its
`critic.Critic`: V, or Q aggregated over sampled actions). Each epoch runs
value training, then policy training, in one jitted call: all updates run
in `lax.scan`s with the pure update the `Trainer`s use (their states are
read and written back). Subclasses give the policy loss and the advantage
estimator; A2C, PPO, AWR and SamplingAWR are in `actor_critic`.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from trax_rl import advantages, lr_schedules, validation
from trax_rl import task as task_lib
from trax_rl.agents import (
  actor_critic_base,
  critic,
  epoch_batch,
  policy_agents,
)
from trax_rl.losses import actor_critic as ac_losses
from trax_rl.losses import value_estimates
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import trainer as trainer_lib
from trax_rl.supervised import update

ModelFn = actor_critic_base.ModelFn
ScheduleFactory = policy_agents.ScheduleFactory


class ActorCriticAgent(actor_critic_base.ActorCriticBase):
  """Trains a policy and a value network with an actor-critic method.

  Subclasses give the policy loss (`make_policy_loss`) and set the value
  targets' advantage estimator. Each epoch: value training, then policy
  training, all in one jitted call.
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    value_model: ModelFn = models.Value,
    value_optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    value_lr_schedule: ScheduleFactory = lr_schedules.constant_lr,
    value_batch_size: int = 64,
    value_train_steps_per_epoch: int = 500,
    value_evals_per_epoch: int = 1,
    value_eval_steps: int = 1,
    n_shared_layers: int = 0,
    added_policy_slice_length: int = 0,
    n_replay_epochs: int = 1,
    scale_value_targets: bool = False,
    q_value: bool = False,
    q_value_aggregate: str = 'logsumexp',
    q_value_temperature: float = 1.0,
    q_value_n_samples: int = 1,
    q_value_normalization: str | None = None,
    offline: bool = False,
    policy_model: ModelFn = models.Policy,
    policy_optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    policy_lr_schedule: ScheduleFactory = lr_schedules.constant_lr,
    policy_batch_size: int = 64,
    policy_train_steps_per_epoch: int = 500,
    policy_evals_per_epoch: int = 1,
    policy_eval_steps: int = 1,
    max_slice_length: int = 1,
    max_gradient_norm: float | None = None,
    **kwargs,
  ):
    """Configures the actor-critic trainer.

    Args:
      task: the RLTask.
      value_model: the value module factory (`Value`, its body bound in
        gin); with q_value it is called with `is_discrete` and `vocab_size`
        and must take (observation, action), e.g. `ActionValue`.
      value_optimizer: optax factory, called as `f(learning_rate=...)`.
      value_lr_schedule: zero-argument factory of the value learning rate.
      value_batch_size: steps per value update (times max_slice_length).
      value_train_steps_per_epoch: value updates per epoch.
      value_evals_per_epoch: how often per epoch the value targets are
        recomputed with the current value network (Trax synced its target
        network at every value evaluation); off-policy agents only.
      value_eval_steps: accepted for Trax configs (metrics are reported
        every epoch).
      n_shared_layers: number of body layers shared by the policy and value
        networks (copied between them around value training, as Trax's).
      added_policy_slice_length: the advantage estimator's margin (k of
        td_k); padding steps appended to the packed trajectories.
      n_replay_epochs: train on the last this many epochs (1 if on-policy).
      scale_value_targets: the value network predicts V * (1 - gamma).
      q_value: use a Q network; values are aggregates of Q over
        q_value_n_samples actions sampled from the behaviour policy.
      q_value_aggregate: 'mean', 'max', 'softmax' or 'logsumexp' (value
        targets; the policy's advantages always use 'mean').
      q_value_temperature: temperature of 'softmax' and 'logsumexp'.
      q_value_n_samples: actions sampled per state; equal to the number of
        discrete actions, all actions are enumerated and weighted instead.
      q_value_normalization: None, 'std' or 'abs' (before aggregating).
      offline: see ActorCriticBase.
      policy_model: the policy module factory, called as
        `policy_model(n_inputs=...)`.
      policy_optimizer: optax factory for the policy.
      policy_lr_schedule: zero-argument factory of the policy learning rate.
      policy_batch_size: steps per policy update (times max_slice_length).
      policy_train_steps_per_epoch: policy updates per epoch.
      policy_evals_per_epoch: accepted for Trax configs.
      policy_eval_steps: accepted for Trax configs.
      max_slice_length: Trax's slice length; with feed-forward networks a
        batch of B slices of length L is B * L steps.
      max_gradient_norm: clip each network's gradients to this global norm.
      **kwargs: for ActorCriticBase and Agent (normalize_observations,
        action_std, learn_std, n_interactions_per_epoch, seed, ...).

    Raises:
      ValueError: bad counts or knob values.
    """
    for name, value in [
      ('value_train_steps_per_epoch', value_train_steps_per_epoch),
      ('value_batch_size', value_batch_size),
      ('policy_train_steps_per_epoch', policy_train_steps_per_epoch),
      ('policy_batch_size', policy_batch_size),
      ('value_evals_per_epoch', value_evals_per_epoch),
      ('value_eval_steps', value_eval_steps),
      ('policy_evals_per_epoch', policy_evals_per_epoch),
      ('policy_eval_steps', policy_eval_steps),
      ('max_slice_length', max_slice_length),
      ('q_value_n_samples', q_value_n_samples),
    ]:
      validation.check_count(name, value, 1)
    validation.check_count('n_shared_layers', n_shared_layers, 0)
    if value_train_steps_per_epoch % value_evals_per_epoch:
      raise ValueError(
        f'value_train_steps_per_epoch ({value_train_steps_per_epoch}) must '
        f'be a multiple of value_evals_per_epoch ({value_evals_per_epoch})'
      )
    # Fails early on bad names.
    value_estimates.aggregate_values(
      jnp.zeros((1, 1)),
      q_value_aggregate,
      q_value_temperature,
      q_value_normalization,
    )
    super().__init__(
      task, n_replay_epochs=n_replay_epochs, offline=offline, **kwargs
    )
    self._margin = added_policy_slice_length
    self._value_steps = value_train_steps_per_epoch
    self._value_rounds = value_evals_per_epoch
    self._value_batch = value_batch_size * max_slice_length
    self._policy_steps = policy_train_steps_per_epoch
    self._policy_batch = policy_batch_size * max_slice_length
    self._n_shared_layers = n_shared_layers
    value_scale = 1.0 / (1.0 - task.gamma) if scale_value_targets else 1.0
    self._q_value = q_value
    self._q_aggregate = q_value_aggregate
    space = task.action_space
    # Trax: as many samples as discrete actions means take them all.
    self._all_discrete = q_value and q_value_n_samples == (
      critic.n_discrete_actions(space)
    )
    example = task.example_observation()
    self._policy_net = networks.from_module(
      policy_model(n_inputs=self._policy_dist.n_inputs), example
    )
    self._value_net = critic.make_value_network(
      value_model, example, space, q_value
    )
    self._critic = critic.Critic(
      self._value_net,
      self._policy_dist,
      value_scale,
      q_value,
      q_value_n_samples,
      self._all_discrete,
      q_value_temperature,
      q_value_normalization,
    )
    policy_optimizer = update.make_optimizer(
      policy_lr_schedule(), policy_optimizer, max_gradient_norm
    )
    value_optimizer = update.make_optimizer(
      value_lr_schedule(), value_optimizer, max_gradient_norm
    )
    policy_loss = self.make_policy_loss()
    value_loss = ac_losses.ValueLoss(value_scale, q_value)
    self._policy_trainer = trainer_lib.Trainer(
      self._policy_net,
      policy_loss,
      policy_optimizer,
      seed=self.next_key(),
      name='policy',
    )
    self._value_trainer = trainer_lib.Trainer(
      self._value_net,
      value_loss,
      value_optimizer,
      seed=self.next_key(),
      name='value',
    )
    critic.check_shared_layers(
      self._policy_trainer.params, self._value_trainer.params, n_shared_layers
    )
    # The Trainers' own update, unjitted, to run inside the epoch's scans.
    self._policy_update = update.make_update_fn(
      self._policy_net, policy_loss, policy_optimizer
    )
    self._value_update = update.make_update_fn(
      self._value_net, value_loss, value_optimizer
    )
    self._train = jax.jit(self._train_epoch_fn)

  # To implement.
  def make_policy_loss(self) -> Any:
    """The policy loss dataclass."""
    raise NotImplementedError

  @property
  def advantage_estimator(self) -> advantages.Estimator:
    raise NotImplementedError

  # PolicyAgent.
  def acting_network(self) -> networks.Network:
    return self._policy_net

  def acting_params(self) -> Any:
    return self._policy_trainer.params

  @property
  def policy_trainer(self) -> trainer_lib.Trainer:
    return self._policy_trainer

  @property
  def value_trainer(self) -> trainer_lib.Trainer:
    return self._value_trainer

  # Pure pieces of the jitted epoch.
  def _advantages(self, value_params, policy_params, data, key, aggregate):
    """(advantages, value targets, values), all [N], of normalized data."""
    key_now, key_next = jax.random.split(key)
    values = self._critic.state_values(
      value_params, data.observation, data.dist_inputs, key_now, aggregate
    )
    next_inputs = None
    if self._q_value:  # Nobody acted in s_next: ask the current policy.
      next_inputs = self._policy_net.apply(policy_params, data.next_observation)
    next_values = self._critic.state_values(
      value_params, data.next_observation, next_inputs, key_next, aggregate
    )
    adv, targets = epoch_batch.advantages_and_targets(
      self.advantage_estimator,
      self._margin,
      self._task.gamma,
      data,
      values,
      next_values,
    )
    return adv, targets, values

  def _value_phase(self, value_state, policy_params, data, idx, key, targets):
    """Value updates in `value_evals_per_epoch` rounds; idx [E, K, B]."""

    def one_round(state, xs):
      round_idx, round_key = xs
      round_targets = targets
      if round_targets is None:  # Off-policy: targets from the new values.
        _, round_targets, _ = self._advantages(
          state.params, policy_params, data, round_key, self._q_aggregate
        )

      def step(state, i):
        batch = ac_losses.ValueBatch(
          data.observation[i], data.action[i], round_targets[i], data.mask[i]
        )
        return self._value_update(state, batch)

      return jax.lax.scan(step, state, round_idx)

    keys = jax.random.split(key, idx.shape[0])
    state, extras = jax.lax.scan(one_round, value_state, (idx, keys))
    return state, extras.metrics

  def _policy_phase(self, policy_state, value_params, data, adv, idx, key):
    """Policy updates on minibatches idx [K, B]; returns (state, metrics)."""
    del value_params, key
    old_log_prob = self._policy_dist.log_prob(data.dist_inputs, data.action)
    return self._scan_policy_updates(
      policy_state,
      idx,
      lambda i: ac_losses.PolicyBatch(
        data.observation[i],
        data.action[i],
        adv[i],
        old_log_prob[i],
        data.mask[i],
      ),
    )

  def _scan_policy_updates(self, policy_state, idx, make_batch):
    """Policy updates on `make_batch(i)` for each row i of idx [K, B]."""

    def step(state, i):
      return self._policy_update(state, make_batch(i))

    state, extras = jax.lax.scan(step, policy_state, idx)
    return state, extras.metrics

  def _train_epoch_fn(
    self, value_state, policy_state, stats, data, value_idx, policy_idx, key
  ):
    data = self.normalize_data(stats, data)
    n = self._n_shared_layers
    value_state = value_state._replace(
      params=critic.copy_shared_layers(
        policy_state.params, value_state.params, n
      )
    )
    adv_key, value_key, policy_key = jax.random.split(key, 3)
    adv = targets = None
    if self.on_policy:  # Once, with the value network that acted.
      adv, targets, values = self._advantages(
        value_state.params,
        policy_state.params,
        data,
        adv_key,
        self._q_aggregate,
      )
    value_state, metrics = self._value_phase(
      value_state, policy_state.params, data, value_idx, value_key, targets
    )
    value_metrics = jax.tree.map(jnp.mean, metrics)
    policy_state = policy_state._replace(
      params=critic.copy_shared_layers(
        value_state.params, policy_state.params, n
      )
    )
    if adv is None:
      adv, targets, values = self._advantages(
        value_state.params, policy_state.params, data, adv_key, 'mean'
      )
    value_metrics['explained_variance'] = value_estimates.explained_variance(
      values, targets, data.mask
    )
    policy_state, metrics = self._policy_phase(
      policy_state, value_state.params, data, adv, policy_idx, policy_key
    )
    policy_metrics = jax.tree.map(jnp.mean, metrics)
    return value_state, policy_state, value_metrics, policy_metrics

  # Training.
  def _train_args(self, data: epoch_batch.EpochData):
    n_valid = int(data.mask.sum())
    value_idx = self.minibatches(
      n_valid, self._value_steps, self._value_batch
    ).reshape(self._value_rounds, -1, self._value_batch)
    policy_idx = self.minibatches(
      n_valid, self._policy_steps, self._policy_batch
    )
    return (
      self._value_trainer.state,
      self._policy_trainer.state,
      self._stats,
      data,
      value_idx,
      policy_idx,
      self.next_key(),
    )

  def train_epoch(self) -> dict[str, float]:
    args = self._train_args(self.training_data())
    value_state, policy_state, value_m, policy_m = self._train(*args)
    self._value_trainer.state = value_state
    self._policy_trainer.state = policy_state
    metrics = {f'value/{k}': float(v) for k, v in value_m.items()}
    metrics.update({f'policy/{k}': float(v) for k, v in policy_m.items()})
    return metrics

  def compile_update(self) -> None:
    data = self.example_training_data()
    self._train.lower(*self._train_args(data)).compile()

  def state_dict(self) -> dict[str, Any]:
    return dict(
      super().state_dict(),
      policy=self._policy_trainer.state_dict(),
      value=self._value_trainer.state_dict(),
    )

  def load_state_dict(self, state: dict[str, Any]) -> None:
    super().load_state_dict(state)
    self._policy_trainer.load_state_dict(state['policy'])
    self._value_trainer.load_state_dict(state['value'])
