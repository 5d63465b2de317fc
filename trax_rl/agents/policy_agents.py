"""Policy agents: LoopPolicyAgent and PolicyGradient (Trax's names).

ExpertIteration, the other LoopPolicyAgent, is in `expert_iteration`. The
algorithm is `algorithms.policy_gradient.PolicyProgram`, on every source.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import optax

from trax_rl import (
  advantages,
  distributions,
  lr_schedules,
  normalization,
  types,
  validation,
)
from trax_rl import task as task_lib
from trax_rl.agents import program_agent
from trax_rl.algorithms import policy_gradient
from trax_rl.losses import policy as policy_losses
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import update

ScheduleFactory = Callable[[], optax.Schedule | float]


class LoopPolicyAgent(program_agent.ProgramAgent):
  """A policy-only agent trained on weighted log-likelihood (Trax's).

  Each epoch: collect, then `n_train_steps_per_epoch` updates on batches of
  trajectory slices from the last `n_replay_epochs` epochs.
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    model_fn: Callable[..., nn.Module] = models.Policy,
    value_fn: policy_losses.ValueFn = policy_losses.mean_return_baseline,
    weight_fn: Callable[[jax.Array], jax.Array] = lambda a: a,
    n_replay_epochs: int = 1,
    n_train_steps_per_epoch: int = 1,
    advantage_normalization: bool = True,
    advantage_normalization_epsilon: float = 1e-5,
    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    lr_schedule: ScheduleFactory = lr_schedules.constant_lr,
    max_gradient_norm: float | None = None,
    batch_size: int = 64,
    network_eval_at: Callable[[int], bool] | None = None,
    n_eval_batches: int = 1,
    max_slice_length: int | None = 1,
    normalize_observations: bool = False,
    normalization_sample_limit: float = float('inf'),
    normalization_epsilon: float = 1e-5,
    **kwargs,
  ):
    """Configures the agent.

    Args:
      task: the RLTask.
      model_fn: builds the policy module as `model_fn(n_inputs=...)`, e.g.
        `models.Policy` with its `body` bound in gin.
      value_fn: baseline `TimeStepBatch -> values[B, T]` (jnp).
      weight_fn: maps advantages to log-likelihood weights.
      n_replay_epochs: train on the last this many epochs.
      n_train_steps_per_epoch: updates per epoch.
      advantage_normalization: normalize advantages before weight_fn.
      advantage_normalization_epsilon: added to the std when normalizing.
      optimizer: optax factory called as `optimizer(learning_rate=...)`.
      lr_schedule: zero-argument factory of a learning rate or schedule,
        e.g. `@multifactor` with its factors bound in gin.
      max_gradient_norm: clip gradients to this global norm (None: off).
      batch_size: trajectory slices per update.
      network_eval_at: `step -> bool`: evaluate the network after the
        update that brings the update count to `step` (Trax's `Loop`
        `eval_at`); None: Trax's default, after update 1 and every 100th.
        Each epoch record carries the latest evaluation as `policy_eval/`
        metrics (`policy_eval/step`: its update step, 0 before the first);
        evaluating changes no update.
      n_eval_batches: fresh batches per evaluation, averaged.
      max_slice_length: slice length (None: whole trajectories).
      normalize_observations: normalize observations by running statistics
        (Trax's `Policy.normalizer = @Normalize`), updated from each
        collected rollout.
      normalization_sample_limit: stop updating them after this many
        observations.
      normalization_epsilon: added to the std when normalizing.
      **kwargs: for `ProgramAgent` (n_trajectories_per_epoch, output_dir,
        seed ...).
    """
    validation.check_count('batch_size', batch_size, 1)
    validation.check_count(
      'n_train_steps_per_epoch', n_train_steps_per_epoch, 1
    )
    validation.check_count('n_replay_epochs', n_replay_epochs, 1)
    validation.check_count('max_slice_length', max_slice_length, 1)
    validation.check_count('n_eval_batches', n_eval_batches, 1)
    if network_eval_at is not None and not callable(network_eval_at):
      raise ValueError(
        f'network_eval_at must be a function step -> bool or None, '
        f'got {network_eval_at!r}'
      )
    super().__init__(task, **kwargs)
    self._policy_dist = distributions.create_distribution(task.action_space)
    module = model_fn(n_inputs=self._policy_dist.n_inputs)
    self._network = networks.from_module(module, task.example_observation())
    self._loss = policy_losses.WeightedLogLikelihood(
      distribution=self._policy_dist,
      # Without a value network a better estimator than MC makes no sense.
      advantage_estimator=advantages.monte_carlo(task.gamma, margin=0),
      value_fn=value_fn,
      weight_fn=weight_fn,
      advantage_normalization=advantage_normalization,
      advantage_normalization_epsilon=advantage_normalization_epsilon,
      obs_ndim=len(task.observation_space.shape),
    )
    self._optimizer = update.make_optimizer(
      lr_schedule(), optimizer, max_gradient_norm
    )
    self._knobs = dict(
      n_replay_epochs=n_replay_epochs,
      batch_size=batch_size,
      slice_length=max_slice_length,
      train_steps=n_train_steps_per_epoch,
      eval_at=network_eval_at,
      eval_batches=n_eval_batches,
      normalize=normalize_observations,
      sample_limit=normalization_sample_limit,
      norm_epsilon=normalization_epsilon,
    )

  def _expert(self) -> dict[str, Any]:
    """The program's knobs that make the expert (ExpertIteration)."""
    return {}

  def make_program(self, n_envs: int):
    return policy_gradient.PolicyProgram(
      network=self._network,
      loss_fn=self._loss,
      optimizer=self._optimizer,
      distribution=self._policy_dist,
      n_steps=self.max_rollout_steps(),
      **self._program_context(n_envs),
      **self._knobs,
      **self._expert(),
    ).program()

  policy_distribution = types.read_only('_policy_dist')

  network = types.read_only('_network')

  @property
  def observation_statistics(self) -> normalization.RunningStatistics:
    return self.learner.stats


class PolicyGradient(LoopPolicyAgent):
  """REINFORCE (Williams, 1992) with the batch's mean return as baseline."""

  def __init__(
    self,
    task: task_lib.RLTask,
    model_fn: Callable[..., nn.Module] = models.Policy,
    n_train_steps_per_epoch: int = 1,
    **kwargs,
  ):
    """Configures PolicyGradient.

    Args:
      task: the RLTask.
      model_fn: the policy module factory (see LoopPolicyAgent).
      n_train_steps_per_epoch: updates per epoch; 1 (Trax's) keeps it
        strictly on-policy.
      **kwargs: for LoopPolicyAgent (batch_size, optimizer, lr_schedule...).
    """
    super().__init__(
      task,
      model_fn,
      value_fn=policy_losses.mean_return_baseline,
      weight_fn=lambda a: a,
      advantage_normalization=True,
      n_replay_epochs=1,  # On-policy: only the last epoch.
      n_train_steps_per_epoch=n_train_steps_per_epoch,
      **kwargs,
    )
