"""Policy agents: PolicyAgent, LoopPolicyAgent, PolicyGradient, ExpertIteration."""

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
  distributions,
  lr_schedules,
  policies,
  validation,
)
from trax_rl import task as task_lib
from trax_rl.agents import base
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
    self._select = jax.jit(self._select_action)

  @property
  def policy_distribution(self) -> Any:
    return self._policy_dist

  def policy_network(self) -> networks.Network:
    """The network whose apply returns dist_inputs (or a tuple, first)."""
    raise NotImplementedError

  def policy_params(self) -> Any:
    raise NotImplementedError

  def _select_action(self, params, key, index, obs, temperature):
    out = self.policy_network().apply(params, obs)
    dist_inputs = out[0] if isinstance(out, tuple) else out
    key = policies.key_for_step(key, index)
    action = policies.sample_action(
      self._policy_dist, dist_inputs, key, temperature
    )
    return action, dist_inputs

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> task_lib.BatchPolicy:
    space = self._task.action_space

    def policy(obs, first):
      del first  # Feed-forward: no state to reset.
      key, index = self.acting_key(evaluation)
      action, dist_inputs = self._select(
        self.policy_params(), key, index, obs, temperature
      )
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
    network_eval_at: Callable[[int], bool] | None = None,
    n_eval_batches: int = 1,
    max_slice_length: int | None = 1,
    trajectory_stream_preprocessing_fn: Callable | None = None,
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
      network_eval_at: `step -> bool`, when to evaluate the network's
        metrics on fresh batches.
      n_eval_batches: batches per network evaluation.
      max_slice_length: slice length (None: whole trajectories).
      trajectory_stream_preprocessing_fn: maps the trajectory stream before
        batching (ExpertIteration filters it).
      **kwargs: for `Agent` (n_trajectories_per_epoch, output_dir, seed ...).
    """
    validation.check_count('batch_size', batch_size, 1)
    validation.check_count(
      'n_train_steps_per_epoch', n_train_steps_per_epoch, 1
    )
    validation.check_count('n_replay_epochs', n_replay_epochs, 1)
    validation.check_count('max_slice_length', max_slice_length, 1)
    super().__init__(task, **kwargs)
    task.set_n_replay_epochs(n_replay_epochs)
    self._n_train_steps_per_epoch = n_train_steps_per_epoch
    self._max_slice_length = max_slice_length
    self._batch_size = batch_size
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
    stream = self._batch_stream(
      batch_size, n_replay_epochs, trajectory_stream_preprocessing_fn
    )
    trainer = trainer_lib.Trainer(
      self._network,
      loss,
      update.make_optimizer(lr_schedule(), optimizer, max_gradient_norm),
      batch_stream=stream,
      seed=self.next_key(),
      name='policy',
    )

    def eval_fn(params, batch):
      value, extra = loss(self._network, params, (), batch, None)
      return dict(extra.metrics, loss=value)

    self._loop = loop_lib.Loop(
      trainer,
      eval_fn=eval_fn,
      eval_batch_stream=stream,
      n_eval_batches=n_eval_batches,
      eval_at=network_eval_at,
    )

  def _batch_stream(
    self, batch_size, n_replay_epochs, preprocessing_fn
  ) -> Iterator[Any]:
    return self._task.trajectory_batch_stream(
      batch_size,
      epochs=[-(e + 1) for e in range(n_replay_epochs)],
      max_slice_length=self._max_slice_length,
      sample_trajectories_uniformly=True,
      trajectory_stream_preprocessing_fn=preprocessing_fn,
      rng=self._rng,
    )

  @property
  def loop(self) -> loop_lib.Loop:
    return self._loop

  def policy_network(self) -> networks.Network:
    return self._network

  def policy_params(self) -> Any:
    return self._loop.trainer.params

  def rollout_params(self) -> Any:
    return self._loop.trainer.params

  def load_rollout_params(self, params: Any) -> None:
    trainer = self._loop.trainer
    trainer.state = trainer.state._replace(params=params)

  def n_updates(self) -> int:
    return self._loop.trainer.step

  def compile_update(self) -> None:
    self._loop.trainer.compile(
      self.example_slice_batch(self._batch_size, self._max_slice_length, 0)
    )

  def train_epoch(self) -> dict[str, float]:
    n_evals = len(self._loop.eval_history)
    metrics = self._loop.run(self._n_train_steps_per_epoch)
    record = {f'policy/{k}': v for k, v in metrics.items()}
    if len(self._loop.eval_history) > n_evals:  # Evaluated this epoch.
      _, evals = self._loop.eval_history[-1]
      record.update({f'policy_eval/{k}': v for k, v in evals.items()})
    return record

  def state_dict(self) -> dict[str, Any]:
    return {'policy': self._loop.trainer.state_dict()}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self._loop.trainer.load_state_dict(state['policy'])

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


def sharpened_network_policy(
  temperature: float,
  network_policy: Callable[[float], task_lib.BatchPolicy],
  temperature_multiplier: float = 1.0,
) -> task_lib.BatchPolicy:
  """The expert: the policy network at a lower temperature.

  Args:
    temperature: the temperature the agent asks for.
    network_policy: `temperature -> BatchPolicy` of the policy network.
    temperature_multiplier: multiplies the temperature; < 1 sharpens.
  """
  return network_policy(temperature_multiplier * temperature)


def quantile_filter(
  trajectory_stream: Iterator[Any],
  quantile: float,
  buffer_size: int,
  gamma: float,
) -> Iterator[Any]:
  """Keeps the best (1 - quantile) of every `buffer_size` trajectories.

  Trajectories are ranked by their discounted return from the first step;
  at least one per buffer is kept.
  """
  buffer = []
  for traj in trajectory_stream:
    buffer.append(traj)
    if len(buffer) == buffer_size:
      n_best = int((1 - quantile) * buffer_size) or 1
      buffer.sort(
        key=lambda t: float(t.to_np(0, gamma).return_[0]), reverse=True
      )
      yield from buffer[:n_best]
      buffer = []


class ExpertIteration(LoopPolicyAgent):
  """Expert iteration: imitate the best trajectories of a sharpened expert.

  The expert (by default the policy network at a lower temperature) plays;
  the best (1 - quantile) trajectories of every `filter_buffer_size` sampled
  are imitated by behavioural cloning (Anthony et al., 2017).
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    model_fn: Callable[..., nn.Module] = models.Policy,
    expert_policy_fn: Callable[
      ..., task_lib.BatchPolicy
    ] = sharpened_network_policy,
    quantile: float = 0.9,
    n_replay_epochs: int = 10,
    n_train_steps_per_epoch: int = 1000,
    filter_buffer_size: int = 256,
    **kwargs,
  ):
    """Configures ExpertIteration.

    Args:
      task: the RLTask.
      model_fn: the policy module factory.
      expert_policy_fn: `(temperature, network_policy) -> BatchPolicy`.
      quantile: trajectories above this return quantile are imitated.
      n_replay_epochs: the filter draws from the last this many epochs.
      n_train_steps_per_epoch: updates per epoch.
      filter_buffer_size: trajectories ranked together by the filter.
      **kwargs: for LoopPolicyAgent.
    """
    if not 0.0 <= quantile < 1.0:
      raise ValueError(f'quantile must be in [0, 1), got {quantile}')
    validation.check_count('filter_buffer_size', filter_buffer_size, 1)
    self._expert_policy_fn = expert_policy_fn
    filter_fn = functools.partial(
      quantile_filter,
      quantile=quantile,
      buffer_size=filter_buffer_size,
      gamma=task.gamma,
    )
    super().__init__(
      task,
      model_fn,
      value_fn=policy_losses.zero_baseline,
      weight_fn=jax.numpy.ones_like,
      advantage_normalization=False,
      n_replay_epochs=n_replay_epochs,
      n_train_steps_per_epoch=n_train_steps_per_epoch,
      trajectory_stream_preprocessing_fn=filter_fn,
      **kwargs,
    )

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> task_lib.BatchPolicy:
    network_policy = functools.partial(
      super().make_policy, evaluation=evaluation
    )
    return self._expert_policy_fn(
      temperature=temperature, network_policy=network_policy
    )
