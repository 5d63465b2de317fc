"""ReplayValueAgent: Acme-style value learners on a replay Table."""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import numpy as np
import optax

from trax_rl import adders, types, validation
from trax_rl import task as task_lib
from trax_rl.agents import value_agents
from trax_rl.losses import q_learning
from trax_rl.networks import models
from trax_rl.replay import table as table_lib

LearningRate = float | Callable[[], Any]
_DQN_LOSS = q_learning.QLearning()


def linear_epsilon(
  initial: float = 1.0, final: float = 0.05, decay_steps: int = 10_000
) -> value_agents.Schedule:
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


class ReplayValueAgent(value_agents.ValueAgent):
  """A value learner on a Reverb-like replay Table, any Acme-family loss.

  Each epoch: collect `n_interactions_per_epoch` env steps epsilon-greedily,
  turn the new trajectories into n-step transitions (`adders`), insert them
  into the Table, then learn while its rate limiter lets `batch_size *
  num_sgd_steps_per_step` items be sampled (about `samples_per_insert`
  samples per inserted item once `min_replay_size` items are in). Each
  learner call runs `num_sgd_steps_per_step` updates in one jitted
  `lax.scan`. Losses that return priorities (the prioritized ones) get a
  prioritized table and have their priorities written back; new items get
  the largest priority written so far (Schaul et al., 2016).
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    model_fn: Callable[..., nn.Module] = models.Quality,
    loss_fn: q_learning.LossFn = _DQN_LOSS,
    batch_size: int = 256,
    n_step: int = 5,
    min_replay_size: int = 1_000,
    max_replay_size: int = 1_000_000,
    samples_per_insert: float = 32.0,
    priority_exponent: float = 0.6,
    target_update_period: int = 100,
    epsilon: value_agents.ExplorationRate = 0.05,
    num_sgd_steps_per_step: int = 1,
    max_gradient_norm: float | None = None,
    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    learning_rate: LearningRate = 5e-4,
    n_devices: int | None = None,
    **kwargs,
  ):
    """Configures the learner (defaults: Acme's DQNConfig).

    Args:
      task: the RLTask (Discrete actions); its gamma discounts the n-step
        transitions.
      model_fn: builds the Q module as `model_fn(n_actions=...)`: Quality
        (optionally dueling), CategoricalQuality (num_atoms, v_min, v_max)
        or QuantileQuality, with `body` bound in gin (MLP or ConvTorso).
      loss_fn: a `q_learning` loss, e.g. `@PrioritizedDoubleQLearning()`.
      batch_size: transitions per update.
      n_step: n of the n-step transitions.
      min_replay_size: no learning before the table holds this many items.
      max_replay_size: table capacity (oldest items leave first).
      samples_per_insert: items sampled per item inserted (> 0), Reverb's
        SampleToInsertRatio; updates per env step = this / batch_size.
      priority_exponent: alpha of prioritized sampling (prioritized losses).
      target_update_period: sync the target network every this many updates.
      epsilon: exploration rate at temperature > 0: a float or a
        zero-argument factory of a schedule of env steps (gin:
        `@linear_epsilon`).
      num_sgd_steps_per_step: updates fused into one jitted call.
      max_gradient_norm: clip gradients to this global norm (None: off).
      optimizer: optax factory called as `optimizer(learning_rate=...)`.
      learning_rate: a float or a zero-argument factory of a schedule of the
        update number.
      n_devices: learner devices: None or 1, k, or -1 for all local ones;
        each batch is sharded across them, gradients averaged.
      **kwargs: for Agent: n_interactions_per_epoch (or
        n_trajectories_per_epoch), n_eval_episodes, seed, output_dir...

    Raises:
      ValueError: on a bad argument or a non-Discrete action space.
    """
    for name, value, minimum in (
      ('batch_size', batch_size, 1),
      ('n_step', n_step, 1),
      ('min_replay_size', min_replay_size, 1),
      ('max_replay_size', max_replay_size, 1),
      ('num_sgd_steps_per_step', num_sgd_steps_per_step, 1),
    ):
      validation.check_count(name, value, minimum)
    if min_replay_size > max_replay_size:
      raise ValueError(
        f'min_replay_size ({min_replay_size}) must not exceed '
        f'max_replay_size ({max_replay_size})'
      )
    if not samples_per_insert > 0:
      raise ValueError(
        f'samples_per_insert must be > 0, got {samples_per_insert!r}'
      )
    lr = learning_rate if callable(learning_rate) else lambda: learning_rate
    super().__init__(
      task,
      value_model=model_fn,
      value_optimizer=optimizer,
      value_lr_schedule=lr,
      max_gradient_norm=max_gradient_norm,
      exploration_rate=epsilon,
      sync_freq=target_update_period,
      **kwargs,
    )
    task.set_n_replay_epochs(1)  # The Table is the memory.
    self._batch_size = batch_size
    self._num_sgd = num_sgd_steps_per_step
    self._loss_fn = loss_fn
    self._env_steps = 0
    self._max_priority = 1.0
    # Stream mode absorbs an epoch's trajectories as they arrive.
    self._n_absorbed = 0
    self._epoch_metrics: list[Any] = []
    self._adder = adders.NStepTransitionAdder(n_step, task.gamma)
    self._build_trainer(
      loss_fn, num_steps=num_sgd_steps_per_step, n_devices=n_devices
    )
    self._prioritized = self._returns_priorities()
    self._table = self._make_table(
      min_replay_size, max_replay_size, samples_per_insert, priority_exponent
    )
    # Episodes the task played before the agent existed (epoch 0).
    self._add_to_replay(task.trajectories.get(0, []))

  def _make_table(self, min_size, max_size, spi, priority_exponent):
    sampler = (
      table_lib.Prioritized(priority_exponent)
      if self._prioritized
      else table_lib.Uniform()
    )
    # Learning runs after each insert until the limiter stops it, so the
    # limiter must let one insert chunk and one learner call through.
    per_call = self._batch_size * self._num_sgd
    chunk = self._n_interactions_per_epoch or 1024
    self._insert_chunk = chunk + self._task.n_envs * self._adder.n_step
    offset = spi * min_size
    error_buffer = (
      offset - per_call,
      offset + self._insert_chunk * spi + per_call,
    )
    return table_lib.Table(
      max_size,
      sampler=sampler,
      min_size_to_sample=min_size,
      samples_per_insert=spi,
      error_buffer=error_buffer,
      seed=int(self._rng.integers(2**31 - 1)),
    )

  @property
  def table(self) -> table_lib.Table:
    return self._table

  @property
  def adder(self) -> adders.NStepTransitionAdder:
    return self._adder

  @property
  def env_steps(self) -> int:
    """Env steps taken by the training policy (the epsilon schedule's step)."""
    return self._env_steps

  def exploration_step(self) -> int:
    return self._env_steps

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> task_lib.BatchPolicy:
    policy = super().make_policy(temperature, evaluation)
    if evaluation:
      return policy

    def train_policy(obs, first):
      action, info = policy(obs, first)
      self._env_steps += len(obs)
      return action, dict(info, **adders.stream_info(first))

    return train_policy

  def _example_batch(self, n: int) -> types.Batch:
    """A zero batch of `n` transitions, for shapes."""
    obs = self._task.example_observation()
    zeros = lambda shape, dtype: np.zeros((n,) + shape, dtype)
    data = types.Transition(
      observation=zeros(obs.shape, obs.dtype),
      action=zeros((), np.int32),
      reward=zeros((), np.float32),
      discount=zeros((), np.float32),
      next_observation=zeros(obs.shape, obs.dtype),
    )
    return types.Batch(data, np.full(n, 1.0 / n, np.float32))

  def _returns_priorities(self) -> bool:
    """Whether the loss returns priorities (traced once, nothing run)."""
    state = self._trainer.state
    _, extra = jax.eval_shape(
      lambda p, t, b: self._loss_fn(self._network, p, t, b, state.key),
      state.params,
      state.target_params,
      self._example_batch(self._batch_size),
    )
    return extra.priorities is not None

  def _stack(self, batch: types.Batch) -> types.Batch:
    """[K * B, ...] -> [K, B, ...] for a fused call of K updates."""
    if self._num_sgd == 1:
      return batch
    shape = (self._num_sgd, self._batch_size)
    return jax.tree.map(lambda x: x.reshape(shape + x.shape[1:]), batch)

  def compile_update(self) -> None:
    self._trainer.compile(
      self._stack(self._example_batch(self._batch_size * self._num_sgd))
    )

  def _insert(self, transitions: types.Transition) -> None:
    action = transitions.action
    if np.issubdtype(action.dtype, np.integer):
      transitions = transitions._replace(action=action.astype(np.int32))
    priority = self._max_priority if self._prioritized else 1.0
    self._table.insert_batch(transitions, priority)

  def _learn(self, metrics: list[Any]) -> None:
    """Learner calls while the rate limiter allows; appends their metrics."""
    per_call = self._batch_size * self._num_sgd
    while self._table.can_sample(per_call):
      sample = self._table.sample(per_call)
      batch = types.Batch(sample.data, sample.probability.astype(np.float32))
      extra = self._trainer.train_step(self._stack(batch))
      if self._prioritized:
        priorities = np.asarray(extra.priorities, np.float64).reshape(-1)
        self._table.mutate_priorities(sample.keys, priorities)
        self._max_priority = max(self._max_priority, float(priorities.max()))
      metrics.append(extra.metrics)  # Read once per epoch: no sync here.

  def _add_to_replay(self, trajectories) -> list[Any]:
    """Inserts the trajectories' transitions, learning as allowed.

    Returns:
      The metrics of each learner call (device arrays).
    """
    transitions = self._adder.add_trajectories(trajectories)
    metrics = []
    n = 0 if transitions is None else len(transitions.reward)
    for start in range(0, n, self._insert_chunk):
      rows = slice(start, start + self._insert_chunk)
      self._insert(types.Transition(*[x[rows] for x in transitions]))
      self._learn(metrics)
    return metrics

  streams_experience = True

  def can_take(self, n_steps: int) -> bool:
    """Whether the Table's rate limiter lets `n_steps` more items in."""
    return self._table.can_insert(max(n_steps, 1))

  def absorb(self) -> None:
    """Adds this epoch's trajectories not added yet, learning as allowed."""
    trajectories = self._task.trajectories.get(self._epoch, [])
    new = trajectories[self._n_absorbed :]
    self._n_absorbed = len(trajectories)
    self._epoch_metrics.extend(self._add_to_replay(new))

  def train_epoch(self) -> dict[str, float]:
    """Adds this epoch's trajectories to replay and learns on it."""
    self.absorb()
    per_call = jax.device_get(self._epoch_metrics)
    self._n_absorbed, self._epoch_metrics = 0, []
    metrics = {
      k: float(np.mean([m[k] for m in per_call]))
      for k in (per_call[0] if per_call else {})
    }
    metrics.update(
      replay_size=self._table.size,
      sgd_steps=self._trainer.step,
      epsilon=self.exploration_rate(),
    )
    return {f'value/{k}': v for k, v in metrics.items()}

  def state_dict(self) -> dict[str, Any]:
    return dict(
      super().state_dict(),
      env_steps=self._env_steps,
      max_priority=self._max_priority,
      adder=self._adder.state_dict(),
      table=self._table.state_dict(),
    )

  def load_state_dict(self, state: dict[str, Any]) -> None:
    super().load_state_dict(state)
    self._env_steps = int(state['env_steps'])
    self._max_priority = float(state['max_priority'])
    self._adder.load_state_dict(state['adder'])
    self._table.load_state_dict(state['table'])
