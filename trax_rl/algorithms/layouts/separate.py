"""Separate policy and value networks, each with its own optimizer (Trax's).

Each epoch runs value training, then policy training, as one pure function
(`Separate.train_on_batch`): all updates run in `lax.scan`s with the pure
update the `Trainer`s use. The value network is a `critic.Critic`: V, or Q
aggregated over sampled actions (`q_value`).
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from trax_rl import lr_schedules, validation
from trax_rl.algorithms.layouts import critic, layout
from trax_rl.algorithms.layouts import data as data_lib
from trax_rl.losses import actor_critic as ac_losses
from trax_rl.losses import value_estimates
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import update

ModelFn = Callable[..., Any]
ScheduleFactory = Callable[[], Any]


class Separate:
  """A policy network and a value network (or Q network), trained in turn."""

  uses_key = True

  def __init__(
    self,
    context: layout.Context,
    value_model: ModelFn = models.Value,
    value_optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    value_lr_schedule: ScheduleFactory = lr_schedules.constant_lr,
    value_batch_size: int = 64,
    value_train_steps_per_epoch: int = 500,
    value_evals_per_epoch: int = 1,
    value_eval_steps: int = 1,
    n_shared_layers: int = 0,
    scale_value_targets: bool = False,
    q_value: bool = False,
    q_value_aggregate: str | value_estimates.Aggregate = 'logsumexp',
    q_value_temperature: float = 1.0,
    q_value_n_samples: int = 1,
    q_value_normalization: str | value_estimates.Normalization | None = None,
    policy_model: ModelFn = models.Policy,
    policy_batch_size: int = 64,
    policy_train_steps_per_epoch: int = 500,
    policy_evals_per_epoch: int = 1,
    policy_eval_steps: int = 1,
    policy_optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    policy_lr_schedule: ScheduleFactory = lr_schedules.constant_lr,
  ):
    """Builds both networks, their optimizers and Trainers.

    Args:
      context: what the agent decides (see `layout.Context`).
      value_model: the value module factory (`Value`, its body bound in
        gin); with q_value it is called with `is_discrete` and `vocab_size`
        and must take (observation, action), e.g. `ActionValue`.
      value_optimizer: optax factory, called as `f(learning_rate=...)`.
      value_lr_schedule: zero-argument factory of the value learning rate.
      value_batch_size: steps per value update (times max_slice_length).
      value_train_steps_per_epoch: value updates per epoch.
      value_evals_per_epoch: value rounds per epoch; must divide
        value_train_steps_per_epoch. Each ends with an evaluation, and
        off-policy agents recompute the value targets with the current
        value network at the start of each (Trax synced its target network
        at every value evaluation).
      value_eval_steps: batches each value evaluation averages its loss
        metrics over (`value_eval/...`, the last round's); 0: none.
      n_shared_layers: number of body layers shared by the policy and value
        networks (copied between them around value training, as Trax's).
      scale_value_targets: the value network predicts V * (1 - gamma).
      q_value: use a Q network; values are aggregates of Q over
        q_value_n_samples actions sampled from the behaviour policy.
      q_value_aggregate: 'mean', 'max', 'softmax', 'logsumexp' or a
        function of `value_estimates` (value targets; the policy's
        advantages always use the mean).
      q_value_temperature: temperature of 'softmax' and 'logsumexp'.
      q_value_n_samples: actions sampled per state; equal to the number of
        discrete actions, all actions are enumerated and weighted instead.
      q_value_normalization: None, 'std', 'abs' or a scale function (Q is
        divided by it before aggregating).
      policy_model: the policy module factory, called as
        `policy_model(n_inputs=...)`.
      policy_optimizer: optax factory for the policy.
      policy_lr_schedule: zero-argument factory of the policy learning rate.
      policy_batch_size: steps per policy update (times max_slice_length).
      policy_train_steps_per_epoch: policy updates per epoch.
      policy_evals_per_epoch: policy rounds per epoch, each ending with an
        evaluation; must divide policy_train_steps_per_epoch.
      policy_eval_steps: batches each policy evaluation averages its loss
        metrics over (`policy_eval/...`, the last round's); 0: none.

    Raises:
      ValueError: bad counts or knob values.
    """
    layout.check_counts(
      dict(
        value_train_steps_per_epoch=value_train_steps_per_epoch,
        value_batch_size=value_batch_size,
        policy_train_steps_per_epoch=policy_train_steps_per_epoch,
        policy_batch_size=policy_batch_size,
        value_evals_per_epoch=value_evals_per_epoch,
        value_eval_steps=value_eval_steps,
        policy_evals_per_epoch=policy_evals_per_epoch,
        policy_eval_steps=policy_eval_steps,
        q_value_n_samples=q_value_n_samples,
      ),
      {
        'value_evals_per_epoch': 'value_train_steps_per_epoch',
        'policy_evals_per_epoch': 'policy_train_steps_per_epoch',
      },
    )
    validation.check_count('n_shared_layers', n_shared_layers, 0)
    self._context = context
    self._aggregate = value_estimates.aggregate_fn(q_value_aggregate)
    normalization = value_estimates.normalization_fn(q_value_normalization)
    self._value_steps = value_train_steps_per_epoch
    self._value_rounds = value_evals_per_epoch
    self._value_eval_steps = value_eval_steps
    self._policy_rounds = policy_evals_per_epoch
    self._policy_eval_steps = policy_eval_steps
    self._value_batch = value_batch_size * context.max_slice_length
    self._policy_steps = policy_train_steps_per_epoch
    self._policy_batch = policy_batch_size * context.max_slice_length
    self._n_shared = n_shared_layers
    self._q_value = q_value
    scale = 1.0 / (1.0 - context.gamma) if scale_value_targets else 1.0
    space = context.action_space
    dist = context.distribution
    # Trax: as many samples as discrete actions means take them all.
    all_discrete = q_value and (
      q_value_n_samples == critic.n_discrete_actions(space)
    )
    example = context.example_observation
    self._policy_net = networks.from_module(
      policy_model(n_inputs=dist.n_inputs), example
    )
    value_net = critic.make_value_network(value_model, example, space, q_value)
    self._critic = critic.Critic(
      value_net,
      dist,
      scale,
      q_value,
      q_value_n_samples,
      all_discrete,
      q_value_temperature,
      normalization,
    )
    policy_opt = update.make_optimizer(
      policy_lr_schedule(), policy_optimizer, context.max_gradient_norm
    )
    value_opt = update.make_optimizer(
      value_lr_schedule(), value_optimizer, context.max_gradient_norm
    )
    policy_loss = context.make_policy_loss(None, all_discrete)
    value_loss = ac_losses.ValueLoss(scale, q_value)
    # Each network, its optimizer and its loss, by train-state name.
    self.specs = {
      'policy': (self._policy_net, policy_opt),
      'value': (value_net, value_opt),
    }
    shapes = {
      name: jax.eval_shape(net.init, jax.random.PRNGKey(0))
      for name, (net, _) in self.specs.items()
    }
    critic.check_shared_layers(
      shapes['policy'], shapes['value'], n_shared_layers
    )
    # The Trainers' own update, unjitted, to run inside the epoch's scans.
    self._policy_update = update.make_update_fn(
      self._policy_net, policy_loss, policy_opt
    )
    self._value_update = update.make_update_fn(value_net, value_loss, value_opt)
    self._losses = {
      'policy': (policy_loss, self._policy_net),
      'value': (value_loss, value_net),
    }
    # The acting policy: its network and the name of its train state.
    self.acting_network = self._policy_net
    self.acting_name = 'policy'

  def minibatch_shapes(self) -> dict[str, tuple[int, ...]]:
    """{'value': [E, K, B], 'policy': [R, K, B]}: the epoch's step indices.

    E and R are the value and policy rounds (`*_evals_per_epoch`); each
    round's K minibatches of B steps.
    """
    return {
      'value': (
        self._value_rounds,
        self._value_steps // self._value_rounds,
        self._value_batch,
      ),
      'policy': (
        self._policy_rounds,
        self._policy_steps // self._policy_rounds,
        self._policy_batch,
      ),
    }

  def _rounds(self, name, state, idx, key, make_batch, eval_steps):
    """Rounds of updates, each ending with an eval; idx [R, K, B].

    `make_batch(state, key)` gives the round's `batch(i)` of steps i, from
    the round's starting state and a key of its own.
    """
    loss_fn, network = self._losses[name]
    update_fn = {'policy': self._policy_update, 'value': self._value_update}

    def one_round(state, xs):
      round_idx, round_key = xs
      batch_of = make_batch(state, round_key)
      state, extras = jax.lax.scan(
        lambda s, i: update_fn[name](s, batch_of(i)), state, round_idx
      )
      evals = layout.evaluate(
        loss_fn, network, state, batch_of, round_idx, eval_steps
      )
      return state, (extras.metrics, evals)

    keys = jax.random.split(key, idx.shape[0])
    state, (metrics, evals) = jax.lax.scan(one_round, state, (idx, keys))
    return state, metrics, layout.last_round(evals)

  # The pure epoch.
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
    adv, targets = self._context.estimate(data, values, next_values)
    return adv, targets, values

  def _value_phase(self, value_state, policy_params, data, idx, key, targets):
    """Value updates in `value_evals_per_epoch` rounds; idx [E, K, B]."""

    def make_batch(state, round_key):
      round_targets = targets
      if round_targets is None:  # Off-policy: targets from the new values.
        _, round_targets, _ = self._advantages(
          state.params, policy_params, data, round_key, self._aggregate
        )
      return lambda i: ac_losses.ValueBatch(
        data.observation[i], data.action[i], round_targets[i], data.mask[i]
      )

    return self._rounds(
      'value', value_state, idx, key, make_batch, self._value_eval_steps
    )

  def _policy_batches(self, value_params, data, adv, targets, key):
    """`make_batch(i)` of the policy loss for minibatch indices i [B]."""
    if not self._context.sampled_actions:
      return data_lib.policy_minibatches(
        self._context.distribution, data, adv, targets
      )
    actions, act_log_probs = self._critic.sample_actions(data.dist_inputs, key)
    q_values = self._critic.q_values(value_params, data.observation, actions)
    return lambda i: ac_losses.SamplingBatch(
      data.observation[i],
      actions[:, i],
      q_values[:, i],
      act_log_probs[:, i],
      data.mask[i],
    )

  def train_on_batch(self, states, data, idx, key):
    """One epoch of value, then policy updates (pure; see the package doc).

    Args:
      states: {'value': TrainState, 'policy': TrainState}.
      data: the epoch's steps, `[N, ...]`, observations normalized.
      idx: index arrays of `minibatch_shapes()`.
      key: PRNG key (Q-value action samples).

    Returns:
      (new states, {'value/...': ..., 'policy/...': ...} metrics).
    """
    value_state, policy_state = states['value'], states['policy']
    n = self._n_shared
    value_state = value_state._replace(
      params=critic.copy_shared_layers(
        policy_state.params, value_state.params, n
      )
    )
    adv_key, value_key, policy_key = jax.random.split(key, 3)
    adv = targets = None
    if self._context.on_policy:  # Once, with the value network that acted.
      adv, targets, values = self._advantages(
        value_state.params, policy_state.params, data, adv_key, self._aggregate
      )
    value_state, value_metrics, value_evals = self._value_phase(
      value_state, policy_state.params, data, idx['value'], value_key, targets
    )
    value_metrics = jax.tree.map(jnp.mean, value_metrics)
    policy_state = policy_state._replace(
      params=critic.copy_shared_layers(
        value_state.params, policy_state.params, n
      )
    )
    if adv is None:
      adv, targets, values = self._advantages(
        value_state.params,
        policy_state.params,
        data,
        adv_key,
        value_estimates.mean,
      )
    value_metrics['explained_variance'] = value_estimates.explained_variance(
      values, targets, data.mask
    )
    make_batch = self._policy_batches(
      value_state.params, data, adv, targets, policy_key
    )
    policy_state, policy_metrics, policy_evals = self._rounds(
      'policy',
      policy_state,
      idx['policy'],
      policy_key,
      lambda state, key: make_batch,
      self._policy_eval_steps,
    )
    metrics = {f'value/{k}': v for k, v in value_metrics.items()}
    metrics.update(
      {f'policy/{k}': jnp.mean(v) for k, v in policy_metrics.items()}
    )
    metrics.update({f'value_eval/{k}': v for k, v in value_evals.items()})
    metrics.update({f'policy_eval/{k}': v for k, v in policy_evals.items()})
    return {'value': value_state, 'policy': policy_state}, metrics
