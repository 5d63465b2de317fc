"""Value agents with Trax's semantics: ValueAgent and DQN."""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from trax_rl import (
  advantages,
  checkpoint,
  collection,
  compile_options,
  envs,
  lr_schedules,
  policies,
  types,
  validation,
)
from trax_rl import task as task_lib
from trax_rl.agents import base, checks, device_slices
from trax_rl.losses import n_step_value
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import loop as loop_lib
from trax_rl.supervised import trainer as trainer_lib
from trax_rl.supervised import update

Schedule = Callable[[Any], jax.Array]
# A float, or a zero-argument factory of a schedule (gin: `@multifactor`).
ExplorationRate = float | Callable[[], Schedule | float]


def trax_exploration_rate() -> Schedule:
  """Trax's default exploration rate of the epoch: max(0.1, 0.99**epoch)."""
  return lr_schedules.multifactor(
    factors='constant * decay_every',
    constant=1.0,
    decay_factor=0.99,
    steps_per_decay=1,
    minimum=0.1,
  )


def as_schedule(rate: ExplorationRate, name: str) -> Schedule:
  """A jnp-traceable `step -> rate` from a float or a schedule factory.

  Raises:
    ValueError: a constant rate outside [0, 1].
  """
  value = rate() if callable(rate) else rate
  if callable(value):
    return value
  if isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
    raise ValueError(f'{name} must be in [0, 1], got {value!r}')
  return lambda step: jnp.full((), value, jnp.float32)


def linear_epsilon(
  initial: float = 1.0, final: float = 0.05, decay_steps: int = 10_000
) -> Schedule:
  """Epsilon falling linearly from `initial` to `final` over env steps.

  Args:
    initial: epsilon at env step 0, in [0, 1].
    final: epsilon from `decay_steps` on, in [0, 1].
    decay_steps: env steps of the linear decay, >= 1.
  """
  for name, value in (('initial', initial), ('final', final)):
    if not 0.0 <= value <= 1.0:
      raise ValueError(f'linear_epsilon {name} must be in [0, 1], got {value}')
  validation.check_count('decay_steps', decay_steps, 1)
  return optax.linear_schedule(initial, final, decay_steps)


class ValueAgent(base.Agent):
  """An agent that acts epsilon-greedily on a Q network.

  Owns the Q network, its `Trainer` (params, target params, optimizer state)
  and one jitted epsilon-greedy `select(params, key, count, step, explore,
  obs[N, ...])` for all envs. The exploration rate is a schedule of
  `exploration_step()` (the epoch here, as Trax's). Subclasses build the
  trainer with `_build_trainer(loss_fn, ...)` and implement `train_epoch`
  and `compile_update`.
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    value_model: Callable[..., nn.Module] = models.Quality,
    value_body: Callable[[], nn.Module] | None = None,
    value_optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    value_lr_schedule: Callable[[], Schedule | float] = (
      lr_schedules.constant_lr
    ),
    max_gradient_norm: float | None = None,
    exploration_rate: ExplorationRate = trax_exploration_rate,
    sync_freq: int = 1000,
    **kwargs,
  ):
    """Configures the Q network, its optimizer and exploration.

    Args:
      task: the RLTask; its action space must be Discrete.
      value_model: builds the Q module as `value_model(n_actions=...)`
        (plus `body=value_body` if given); its apply returns a QOutput.
        `models.Quality`, `CategoricalQuality` or `QuantileQuality`.
      value_body: optional body factory for value_model (gin: `@MLP`).
      value_optimizer: optax factory called as `(learning_rate=...)`.
      value_lr_schedule: zero-argument factory of a learning rate or a
        schedule of the update number (gin: `@constant_lr`, `@multifactor`).
      max_gradient_norm: clip gradients to this global norm (None: off).
      exploration_rate: epsilon of the epsilon-greedy policy at temperature
        > 0: a float, or a zero-argument factory of a schedule of
        `exploration_step()`.
      sync_freq: copy the params into the target network every this many
        updates.
      **kwargs: for `Agent` (n_interactions_per_epoch, seed, output_dir...).

    Raises:
      ValueError: the action space is not Discrete, or a bad argument.
    """
    self._n_actions = envs.require_discrete(
      task.action_space, type(self).__name__
    )
    validation.check_count('sync_freq', sync_freq, 1)
    super().__init__(task, **kwargs)
    module_kwargs = {'n_actions': self._n_actions}
    if value_body is not None:
      module_kwargs['body'] = value_body
    self._network = self._make_network(value_model(**module_kwargs))
    self._optimizer = update.make_optimizer(
      value_lr_schedule(), value_optimizer, max_gradient_norm
    )
    self._exploration = as_schedule(exploration_rate, 'exploration_rate')
    self._sync_freq = sync_freq
    self._select = compile_options.jit(self._select_action)
    self._trainer: trainer_lib.Trainer | None = None

  def _make_network(self, module: nn.Module) -> networks.Network:
    """The pure network of the Q module (a recurrent learner overrides)."""
    return networks.from_module(module, self._task.example_observation())

  def _build_trainer(
    self,
    loss_fn: types.LossFn,
    num_steps: int = 1,
    batch_stream=None,
    n_devices: int | None = None,
  ) -> None:
    """Builds the Trainer of the Q network for `loss_fn` (subclasses)."""
    self._trainer = trainer_lib.Trainer(
      self._network,
      loss_fn,
      self._optimizer,
      batch_stream=batch_stream,
      seed=self.next_key(),
      target_update_period=self._sync_freq,
      use_target_network=True,
      num_steps=num_steps,
      n_devices=n_devices,
      name='value',
    )

  @property
  def network(self) -> networks.Network:
    return self._network

  @property
  def trainer(self) -> trainer_lib.Trainer:
    return self._trainer

  @property
  def n_actions(self) -> int:
    return self._n_actions

  def exploration_step(self) -> int:
    """What the exploration schedule is a function of: the epoch."""
    return self._epoch

  def exploration_rate(self) -> float:
    """The current epsilon at temperature > 0."""
    return float(self._exploration(self.exploration_step()))

  def set_exploration_rate(self, rate: ExplorationRate) -> None:
    """Replaces the epsilon schedule (Ape-X actors act with fixed ones)."""
    self._exploration = as_schedule(rate, 'exploration_rate')
    # Traced again, with the new schedule.
    self._select = compile_options.jit(self._select_action)

  def act_as_rollout_actor(
    self, slot: int, n_slots: int, epsilon: float
  ) -> None:
    del slot, n_slots
    self.set_exploration_rate(epsilon)

  def rollout_params(self) -> Any:
    return self._trainer.params

  def load_rollout_params(self, params: Any) -> None:
    self._trainer.state = self._trainer.state._replace(params=params)

  def n_updates(self) -> int:
    return self._trainer.step

  def _select_action(self, params, key, count, step, explore, obs):
    q_values = self._network.apply(params, obs).q_values
    epsilon = jnp.where(explore, self._exploration(step), 0.0)
    key = policies.key_for_step(key, count)
    return policies.epsilon_greedy(q_values, key, epsilon)

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> collection.BatchPolicy:
    """Epsilon-greedy at temperature > 0, greedy at temperature 0."""
    explore = temperature > 0

    def policy(obs, first):
      del first  # Feed-forward: no state to reset.
      key, index = self.acting_key(evaluation)
      action = self._select(
        self._trainer.params, key, index, self.exploration_step(), explore, obs
      )
      return np.asarray(action), {}

    return policy

  def state_dict(self) -> dict[str, Any]:
    return {'value': self._trainer.state_dict()}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self._trainer.load_state_dict(state['value'])


class DQN(device_slices.SlicePath, ValueAgent):
  """Trax's DQN: n-step Q-learning on slices of the last epochs' trajectories.

  Mnih et al., 2015, "Human-level control through deep reinforcement
  learning", as Trax runs it: collection and learning alternate by epoch;
  each epoch trains `value_train_steps_per_epoch` updates on batches of
  `max_slice_length` slices drawn from the last `n_replay_epochs` epochs;
  targets come from `advantage_estimator` (td_k: n-step with n = margin =
  max_slice_length - 1) over target-network values, inside the jitted loss.
  As in Trax, the target network takes the params at the start of every
  epoch's training, and also every `sync_freq` updates. On a JAX env the
  whole epoch is one compiled call (`device.slice_epoch`).
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    advantage_estimator: Callable[..., advantages.Estimator] = (
      advantages.td_k
    ),
    max_slice_length: int = 2,
    margin: int | None = None,
    smoothl1loss: bool = True,
    double_dqn: bool = False,
    value_batch_size: int = 64,
    value_train_steps_per_epoch: int = 500,
    n_replay_epochs: int = 1,
    scale_value_targets: bool = True,
    value_evals_per_epoch: int = 1,
    value_eval_steps: int = 1,
    sync_each_epoch: bool = True,
    **kwargs,
  ):
    """Configures DQN.

    Args:
      task: the RLTask (Discrete actions).
      advantage_estimator: estimator factory called as `(gamma=, margin=)`,
        e.g. `@td_k`; the margin is max_slice_length - 1.
      max_slice_length: length of the trajectory slices; the first
        max_slice_length - margin steps of each get a target.
      margin: steps at the end of each slice that only serve the targets
        (td_k's n); None: max_slice_length - 1, Trax's, one target per
        slice. A smaller margin gives several targets per slice, so fewer
        slices (the costly part of a batch) are needed per update.
      smoothl1loss: Huber loss if True, else squared (Trax's L2Loss).
      double_dqn: double Q-learning targets (van Hasselt et al., 2016).
      value_batch_size: slices per update.
      value_train_steps_per_epoch: updates per epoch.
      n_replay_epochs: replay = trajectories of the last this many epochs.
      scale_value_targets: the network predicts Q * (1 - gamma), so that its
        outputs stay near [-1, 1] whatever the reward scale (Trax's).
      value_evals_per_epoch: the epoch's updates run in this many equal
        rounds, each followed by an evaluation of the loss metrics on
        `value_eval_steps` fresh batches (Trax's; only affects the
        `value_eval/` metrics of the epoch record).
      value_eval_steps: batches per evaluation; 0 turns evaluation off.
      sync_each_epoch: copy the params into the target network before each
        epoch's updates (Trax's DQN does, so that the target lags at most
        one epoch whatever `sync_freq` says); False: every `sync_freq`
        updates only.
      **kwargs: for ValueAgent and Agent (value_model, value_body,
        value_optimizer, value_lr_schedule, exploration_rate, sync_freq,
        n_interactions_per_epoch, n_eval_episodes, seed, output_dir...).

    Raises:
      ValueError: on a bad argument or a non-Discrete action space.
    """
    validation.check_count('max_slice_length', max_slice_length, 1)
    margin = max_slice_length - 1 if margin is None else margin
    validation.check_count('margin', margin, 0)
    if margin >= max_slice_length:
      raise ValueError(
        f'margin ({margin}) must be < max_slice_length ({max_slice_length})'
      )
    validation.check_count('value_batch_size', value_batch_size, 1)
    validation.check_count(
      'value_train_steps_per_epoch', value_train_steps_per_epoch, 1
    )
    validation.check_count('n_replay_epochs', n_replay_epochs, 1)
    loop_lib.check_evals(
      'value',
      value_train_steps_per_epoch,
      value_evals_per_epoch,
      value_eval_steps,
    )
    super().__init__(task, **kwargs)
    self._evals_per_epoch = value_evals_per_epoch
    self._sync_each_epoch = bool(sync_each_epoch)
    task.set_n_replay_epochs(n_replay_epochs)
    self._max_slice_length = max_slice_length
    self._margin = margin
    self._batch_size = value_batch_size
    self._train_steps = value_train_steps_per_epoch
    gamma = task.gamma
    scale = 1.0 / (1.0 - gamma) if scale_value_targets and gamma < 1 else 1.0
    loss = n_step_value.NStepValueLoss(
      advantage_estimator=advantage_estimator(gamma=gamma, margin=self._margin),
      margin=self._margin,
      obs_ndim=len(task.observation_space.shape),
      double_dqn=double_dqn,
      smoothl1loss=smoothl1loss,
      value_scale=scale,
    )
    self._stream_args = dict(
      epochs=[-(e + 1) for e in range(n_replay_epochs)],
      max_slice_length=max_slice_length,
      min_slice_length=max_slice_length,
      margin=self._margin,
    )
    stream = task.trajectory_batch_stream(
      value_batch_size, rng=self._rng, **self._stream_args
    )
    self._build_trainer(loss, batch_stream=stream)
    self._loop = loop_lib.Loop(self._trainer, n_eval_batches=value_eval_steps)
    self._value_eval_steps = value_eval_steps
    self._make_slice_epoch(loss, n_replay_epochs)

  def compile_update(self) -> None:
    self._trainer.compile(
      checks.example_slice_batch(
        self._task, self._batch_size, self._max_slice_length, self._margin
      )
    )

  def train_epoch(self) -> dict[str, float]:
    if self._sync_each_epoch:
      self._trainer.sync_target()
    # Evaluation batches come from a generator of their own, seeded by the
    # epoch: evaluating never changes training, and a resumed run evaluates
    # as an uninterrupted one.
    eval_stream = self._task.trajectory_batch_stream(
      self._batch_size,
      rng=np.random.default_rng([self._seed, self._epoch, 7]),
      **self._stream_args,
    )
    metrics, evals = self._loop.run_epoch(
      self._epoch, self._train_steps, self._evals_per_epoch, eval_stream
    )
    metrics['exploration_rate'] = self.exploration_rate()
    record = {f'value/{k}': v for k, v in metrics.items()}
    record.update({f'value_eval/{k}': v for k, v in evals.items()})
    return record

  def restore(self) -> bool:
    restored = super().restore()
    expected = self._epoch * self._train_steps
    if restored and self._trainer.step != expected:
      raise checkpoint.CheckpointError(
        f'{self._output_dir}: value trainer is at step {self._trainer.step}, '
        f'expected epochs x value_train_steps_per_epoch = {expected}'
      )
    return restored
