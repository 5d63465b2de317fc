"""One joint policy-and-value network with one optimizer (Trax's *Joint).

The network's apply returns (dist_inputs [B, I], values [B]); it is
trained on the algorithm's policy loss + value_loss_coeff * the L2 value
loss (`losses.actor_critic.PolicyLoss` with a value_loss_coeff). Trax's
joint agents used Monte Carlo returns minus values as advantages;
`@monte_carlo` as the advantage estimator gives Trax's.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from trax_rl import lr_schedules
from trax_rl.algorithms.layouts import data as data_lib
from trax_rl.algorithms.layouts import layout
from trax_rl.losses import value_estimates
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import update


class Joint:
  """A joint policy-and-value network, trained on one summed loss."""

  uses_key = False

  def __init__(
    self,
    context: layout.Context,
    joint_model: Callable[..., Any] = models.PolicyAndValue,
    value_loss_coeff: float = 0.1,
    batch_size: int = 64,
    train_steps_per_epoch: int = 500,
    value_evals_per_epoch: int = 1,
    value_eval_steps: int = 1,
    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    lr_schedule: Callable[[], Any] = lr_schedules.constant_lr,
  ):
    """Builds the network, its optimizer and Trainer.

    Args:
      context: what the agent decides (see `layout.Context`).
      joint_model: the module factory, called as `joint_model(n_inputs=)`;
        its apply returns (dist_inputs [B, I], values [B]).
      optimizer: optax factory, called as `optimizer(learning_rate=...)`.
      lr_schedule: zero-argument factory of the learning rate or schedule.
      batch_size: steps per update (times max_slice_length).
      train_steps_per_epoch: updates per epoch.
      value_evals_per_epoch: rounds per epoch, each ending with an
        evaluation; must divide train_steps_per_epoch. Off-policy agents
        (AWRJoint) recompute advantages and value targets with the current
        network at the start of each (Trax's joint name:
        supervised_evals_per_epoch).
      value_eval_steps: batches each evaluation averages its loss metrics
        over (`joint_eval/...`, the last round's); 0: none (Trax's joint
        name: supervised_eval_steps).
      value_loss_coeff: weight of the value loss.

    Raises:
      ValueError: bad counts.
    """
    layout.check_counts(
      dict(
        batch_size=batch_size,
        train_steps_per_epoch=train_steps_per_epoch,
        value_evals_per_epoch=value_evals_per_epoch,
        value_eval_steps=value_eval_steps,
      ),
      {'value_evals_per_epoch': 'train_steps_per_epoch'},
    )
    self._context = context
    self._steps = train_steps_per_epoch
    self._rounds = value_evals_per_epoch
    self._eval_steps = value_eval_steps
    self._batch = batch_size * context.max_slice_length
    self._net = networks.from_module(
      joint_model(n_inputs=context.distribution.n_inputs),
      context.example_observation,
    )
    opt = update.make_optimizer(
      lr_schedule(), optimizer, context.max_gradient_norm
    )
    loss = context.make_policy_loss(value_loss_coeff, False)
    self.specs = {'joint': (self._net, opt)}
    self._loss = loss
    self._update = update.make_update_fn(self._net, loss, opt)
    # The acting policy: its network and the name of its train state.
    self.acting_network = self._net
    self.acting_name = 'joint'

  def minibatch_shapes(self) -> dict[str, tuple[int, ...]]:
    """{'joint': [E, K, B]}: the epoch's step indices, E rounds of K."""
    return {'joint': (self._rounds, self._steps // self._rounds, self._batch)}

  def _advantages(self, params, data):
    """(advantages, value targets, values), all [N]."""
    _, values = self._net.apply(params, data.observation)
    _, next_values = self._net.apply(params, data.next_observation)
    adv, targets = self._context.estimate(data, values, next_values)
    return adv, targets, values

  def train_on_batch(self, states, data, idx, key):
    """One epoch of joint updates (pure; see the package doc).

    Args:
      states: {'joint': TrainState}.
      data: the epoch's steps, `[N, ...]`, observations normalized.
      idx: index arrays of `minibatch_shapes()`.
      key: unused (the joint updates draw no randomness).

    Returns:
      (new states, {'joint/...': ...} metrics).
    """
    del key
    first_adv, first_targets, first_values = self._advantages(
      states['joint'].params, data
    )

    def one_round(state, round_idx):
      adv, targets = first_adv, first_targets  # On-policy: the acting net's.
      if not self._context.on_policy:
        adv, targets, _ = self._advantages(
          jax.lax.stop_gradient(state.params), data
        )
      make_batch = data_lib.policy_minibatches(
        self._context.distribution, data, adv, targets
      )
      state, extras = jax.lax.scan(
        lambda state, i: self._update(state, make_batch(i)), state, round_idx
      )
      evals = layout.evaluate(
        self._loss, self._net, state, make_batch, round_idx, self._eval_steps
      )
      return state, (extras.metrics, evals)

    state, (metrics, evals) = jax.lax.scan(
      one_round, states['joint'], idx['joint']
    )
    metrics = jax.tree.map(jnp.mean, metrics)
    metrics['explained_variance_before'] = value_estimates.explained_variance(
      first_values, first_targets, data.mask
    )
    record = {f'joint/{k}': v for k, v in metrics.items()}
    record.update(
      {f'joint_eval/{k}': v for k, v in layout.last_round(evals).items()}
    )
    return {'joint': state}, record
