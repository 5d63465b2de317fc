"""Policy agents: PolicyAgent, LoopPolicyAgent, PolicyGradient.

ExpertIteration, the other LoopPolicyAgent, is in `expert_iteration`.
"""

import functools
from collections.abc import Callable, Iterator
from typing import Any

import flax.linen as nn
import jax
import numpy as np
import optax

from trax_rl import (
  advantages,
  checkpoint,
  collection,
  compile_options,
  distributions,
  lr_schedules,
  normalization,
  policies,
  validation,
)
from trax_rl import task as task_lib
from trax_rl.agents import base, checks
from trax_rl.device import epoch as device_epoch
from trax_rl.device import policy_gradient as device_pg
from trax_rl.losses import policy as policy_losses
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import loop as loop_lib
from trax_rl.supervised import trainer as trainer_lib
from trax_rl.supervised import update

ScheduleFactory = Callable[[], optax.Schedule | float]


class PolicyAgent(base.Agent):
  """An agent that acts by sampling its policy network's distribution.

  One jitted `select_action(params, key, index, obs[N, ...], temperature)`
  serves all envs of the vector env. Subclasses own the networks and their
  training and implement `policy_network` and `policy_params`.
  """

  def __init__(self, task: task_lib.RLTask, **kwargs):
    super().__init__(task, **kwargs)
    self._policy_dist = distributions.create_distribution(task.action_space)
    self._obs_ndim = len(task.observation_space.shape)
    self._select = compile_options.jit(self._select_action)

  @property
  def policy_distribution(self) -> Any:
    return self._policy_dist

  def policy_network(self) -> networks.Network:
    """The network whose apply returns dist_inputs (or a tuple, first)."""
    raise NotImplementedError

  def policy_params(self) -> Any:
    raise NotImplementedError

  def policy_head_index(self) -> int:
    """Which output of a multi-head policy network is the policy."""
    return 0

  def _select_action(self, params, key, index, obs, temperature):
    return policies.network_policy(
      self.policy_network().apply,
      params,
      self._policy_dist,
      obs,
      policies.key_for_step(key, index),
      temperature,
      head_index=self.policy_head_index(),
    )

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> collection.BatchPolicy:
    space = self._task.action_space
    params = policies.acting_copy(self.policy_params())  # Fixed while acting.

    def policy(obs, first):
      del first  # Feed-forward: no state to reset.
      key, index = self.acting_key(evaluation)
      action, dist_inputs = self._select(params, key, index, obs, temperature)
      return (
        policies.clip_to_space(np.asarray(action), space),
        {'dist_inputs': np.asarray(dist_inputs)},
      )

    return policy


class LoopPolicyAgent(PolicyAgent):
  """A policy-only agent trained by a `Loop` on weighted log-likelihood.

  Each epoch: collect, then `n_train_steps_per_epoch` steps on batches of
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
    policy_evals_per_epoch: int = 1,
    policy_eval_steps: int = 1,
    max_slice_length: int | None = 1,
    trajectory_stream_preprocessing_fn: Callable | None = None,
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
      policy_evals_per_epoch: the epoch's updates run in this many equal
        rounds, each followed by an evaluation of the loss metrics on
        `policy_eval_steps` fresh batches (Trax's; only affects the
        `policy_eval/` metrics of the epoch record).
      policy_eval_steps: batches per evaluation; 0 turns evaluation off.
      max_slice_length: slice length (None: whole trajectories).
      trajectory_stream_preprocessing_fn: maps the trajectory stream before
        batching (ExpertIteration filters it).
      normalize_observations: normalize observations by running statistics
        (Trax's `Policy.normalizer = @Normalize`), updated while collecting
        for training only.
      normalization_sample_limit: stop updating them after this many
        observations.
      normalization_epsilon: added to the std when normalizing.
      **kwargs: for `Agent` (n_trajectories_per_epoch, output_dir, seed ...).
    """
    validation.check_count('batch_size', batch_size, 1)
    validation.check_count(
      'n_train_steps_per_epoch', n_train_steps_per_epoch, 1
    )
    validation.check_count('n_replay_epochs', n_replay_epochs, 1)
    validation.check_count('max_slice_length', max_slice_length, 1)
    loop_lib.check_evals(
      'policy',
      n_train_steps_per_epoch,
      policy_evals_per_epoch,
      policy_eval_steps,
    )
    super().__init__(task, **kwargs)
    self._evals_per_epoch = policy_evals_per_epoch
    task.set_n_replay_epochs(n_replay_epochs)
    self._n_train_steps_per_epoch = n_train_steps_per_epoch
    self._max_slice_length = max_slice_length
    self._batch_size = batch_size
    self._preprocessing_fn = trajectory_stream_preprocessing_fn
    module = model_fn(n_inputs=self._policy_dist.n_inputs)
    self._network = networks.from_module(module, task.example_observation())
    loss = policy_losses.WeightedLogLikelihood(
      distribution=self._policy_dist,
      # Without a value network a better estimator than MC makes no sense.
      advantage_estimator=advantages.monte_carlo(task.gamma, margin=0),
      value_fn=value_fn,
      weight_fn=weight_fn,
      advantage_normalization=advantage_normalization,
      advantage_normalization_epsilon=advantage_normalization_epsilon,
      obs_ndim=self._obs_ndim,
    )
    self._normalize = normalize_observations
    self._norm_epsilon = normalization_epsilon
    self._stats = normalization.init_statistics(task.observation_space.shape)
    self._update_stats = compile_options.jit(
      functools.partial(
        normalization.update, sample_limit=normalization_sample_limit
      )
    )
    stream = self._batch_stream(
      batch_size, n_replay_epochs, trajectory_stream_preprocessing_fn, self._rng
    )
    if normalize_observations:
      # Read at each batch: training sees the statistics of the moment.
      stream = (
        b._replace(observation=self._normalized(self._stats, b.observation))
        for b in stream
      )
    self._loss = loss
    self._optimizer = update.make_optimizer(
      lr_schedule(), optimizer, max_gradient_norm
    )
    trainer = trainer_lib.Trainer(
      self._network,
      loss,
      self._optimizer,
      batch_stream=stream,
      seed=self.next_key(),
      name='policy',
    )
    self._eval_stream_args = (
      batch_size,
      n_replay_epochs,
      trajectory_stream_preprocessing_fn,
    )
    self._loop = loop_lib.Loop(trainer, n_eval_batches=policy_eval_steps)

  def _batch_stream(
    self, batch_size, n_replay_epochs, preprocessing_fn, rng
  ) -> Iterator[Any]:
    return self._task.trajectory_batch_stream(
      batch_size,
      epochs=[-(e + 1) for e in range(n_replay_epochs)],
      max_slice_length=self._max_slice_length,
      sample_trajectories_uniformly=True,
      trajectory_stream_preprocessing_fn=preprocessing_fn,
      rng=rng,
    )

  @property
  def loop(self) -> loop_lib.Loop:
    return self._loop

  def _normalized(self, stats, obs: jax.Array) -> jax.Array:
    if not self._normalize:
      return obs
    return normalization.normalize(stats, obs, self._norm_epsilon)

  def policy_network(self) -> networks.Network:
    return networks.Network(
      init=self._network.init,
      apply=lambda p, obs: self._network.apply(
        p['net'], self._normalized(p['stats'], obs)
      ),
    )

  def policy_params(self) -> Any:
    return {'net': self._loop.trainer.params, 'stats': self._stats}

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> collection.BatchPolicy:
    policy = super().make_policy(temperature, evaluation)
    if not self._normalize or evaluation:
      return policy

    def collecting_policy(obs, first):
      self._stats = self._update_stats(self._stats, obs)
      return policy(obs, first)

    return collecting_policy

  def rollout_params(self) -> Any:
    return self._loop.trainer.params

  def load_rollout_params(self, params: Any) -> None:
    trainer = self._loop.trainer
    trainer.state = trainer.state._replace(params=params)

  def n_updates(self) -> int:
    return self._loop.trainer.step

  def compile_update(self) -> None:
    self._loop.trainer.compile(
      checks.example_slice_batch(
        self._task, self._batch_size, self._max_slice_length, 0
      )
    )

  def train_epoch(self) -> dict[str, float]:
    # Evaluation batches come from a generator of their own, seeded by the
    # epoch: evaluating never changes training, and a resumed run evaluates
    # as an uninterrupted one.
    eval_stream = self._batch_stream(
      *self._eval_stream_args,
      np.random.default_rng([self._seed, self._epoch, 7]),
    )
    metrics, evals = self._loop.run_epoch(
      self._epoch,
      self._n_train_steps_per_epoch,
      self._evals_per_epoch,
      eval_stream,
    )
    record = {f'policy/{k}': v for k, v in metrics.items()}
    record.update({f'policy_eval/{k}': v for k, v in evals.items()})
    return record

  # The device path: the same loss and optimizer on the rollout's steps.
  def device_program(self) -> device_epoch.DeviceProgram:
    """Samples slices of length 1 as `trajectory_batch_stream` does.

    Raises:
      ValueError: slices longer than one step, a trajectory filter or
        observation normalization, which only the gymnasium path has.
    """
    if (
      self._preprocessing_fn is not None
      or self._max_slice_length != 1
      or self._normalize
    ):
      raise ValueError(
        f'{type(self).__name__} on the device path needs max_slice_length=1, '
        'no trajectory filter and no observation normalization; use a '
        'gymnasium env id for this config'
      )
    return device_pg.make_program(
      self._network,
      self._loss,
      self._optimizer,
      self._policy_dist,
      self._task.gamma,
      self._n_train_steps_per_epoch,
      self._batch_size,
    )

  def device_learner(self) -> Any:
    return self._loop.trainer.state

  def set_device_learner(self, learner: Any) -> None:
    self._loop.trainer.state = learner

  def state_dict(self) -> dict[str, Any]:
    state = {'policy': self._loop.trainer.state_dict()}
    if self._normalize:
      state['observation_statistics'] = [np.asarray(x) for x in self._stats]
    return state

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self._loop.trainer.load_state_dict(state['policy'])
    if self._normalize:
      self._stats = normalization.RunningStatistics(
        *[jax.numpy.asarray(x) for x in state['observation_statistics']]
      )

  def restore(self) -> bool:
    restored = super().restore()
    expected = self._epoch * self._n_train_steps_per_epoch
    if restored and self._loop.step != expected:
      raise checkpoint.CheckpointError(
        f'{self._output_dir}: policy trainer is at step {self._loop.step}, '
        f'expected epochs x steps per epoch = {expected}'
      )
    return restored


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
