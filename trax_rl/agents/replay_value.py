"""ReplayValueAgent: Acme-style value learners on a replay Table.

The replay-agent base of trax_rl: validation, table setup, the insert and
learn loop, priorities and checkpoints live here once. `ReplayValueAgent`
learns on n-step transitions; `r2d2.R2D2` overrides the network, adder,
acting policy and example batch for recurrent sequence replay.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import numpy as np
import optax

from trax_rl import collection, types, validation
from trax_rl import task as task_lib
from trax_rl.agents import device_value, value_agents
from trax_rl.losses import q_learning
from trax_rl.networks import models
from trax_rl.replay import adders, learner_table, samplers
from trax_rl.replay import table as table_lib
from trax_rl.supervised import loop as loop_lib
from trax_rl.supervised import sharding

LearningRate = float | Callable[[], Any]
_DQN_LOSS = q_learning.QLearning()


class ReplayValueAgent(device_value.DevicePath, value_agents.ValueAgent):
  """A value learner on a Reverb-like replay Table, any Acme-family loss.

  Each epoch: collect `n_interactions_per_epoch` env steps epsilon-greedily,
  turn the new trajectories into replay items (n-step transitions here,
  `adders`), then alternate inserting them and learning while the table's
  rate limiter lets `batch_size * num_sgd_steps_per_step` items be sampled
  (about `samples_per_insert` samples per inserted item once
  `min_replay_size` items are in). Each learner call runs
  `num_sgd_steps_per_step` updates in one jitted `lax.scan`. Losses that
  return priorities (the prioritized ones) get a prioritized table and have
  their priorities written back. A new item's priority is 1.0, as Acme's
  adders insert it (their default priority function), whether or not the
  table is prioritized.

  With a JAX env (`RLTask.env = 'gymnax:CartPole-v1'`) the same epoch runs
  on the device as one jitted call (`device.value_epoch`): collection,
  n-step transitions, insertion, every learner call, target syncs and
  priority writes, on a `DeviceTable` configured as the Table.
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    model_fn: Callable[..., nn.Module] = models.Quality,
    loss_fn: types.LossFn = _DQN_LOSS,
    batch_size: int = 256,
    n_step: int = 5,
    min_replay_size: int = 1_000,
    max_replay_size: int = 1_000_000,
    samples_per_insert: float = 32.0,
    samples_per_insert_tolerance_rate: float = 0.0,
    priority_exponent: float = 0.6,
    target_update_period: int = 100,
    epsilon: value_agents.ExplorationRate = 0.05,
    num_sgd_steps_per_step: int = 1,
    max_gradient_norm: float | None = None,
    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    learning_rate: LearningRate = 5e-4,
    n_devices: int | None = None,
    value_eval_steps: int = 1,
    **kwargs,
  ):
    """Configures the learner (defaults: Acme's DQNConfig).

    Args:
      task: the RLTask (Discrete actions); its gamma discounts the items.
      model_fn: builds the Q module as `model_fn(n_actions=...)`: Quality
        (optionally dueling), CategoricalQuality (num_atoms, v_min, v_max)
        or QuantileQuality, with `body` bound in gin (MLP or ConvTorso).
      loss_fn: a `q_learning` or `distributional` loss, e.g.
        `@PrioritizedDoubleQLearning()`.
      batch_size: items per update.
      n_step: n of the n-step transitions.
      min_replay_size: no learning before the table holds this many items.
      max_replay_size: table capacity (oldest items leave first).
      samples_per_insert: items sampled per item inserted (> 0), Reverb's
        SampleToInsertRatio; updates per env step = this / batch_size.
      samples_per_insert_tolerance_rate: allowed relative deviation of the
        sample-to-insert ratio (Acme's), as a fraction of
        samples_per_insert * min_replay_size; the limiter's window always
        holds at least one insert chunk and one learner call.
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
      value_eval_steps: after each epoch's learning, the loss metrics of this
        many batches of the epoch's new items (drawn uniformly by a
        generator of their own, not trained on, the table untouched) go
        into the epoch record as `value_eval/`; 0 turns it off. Updates per
        epoch follow the rate limiter, so Trax's `value_evals_per_epoch`
        has no meaning here.
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
      ('value_eval_steps', value_eval_steps, 0),
    ):
      validation.check_count(name, value, minimum)
    if min_replay_size > max_replay_size:
      raise ValueError(
        f'min_replay_size ({min_replay_size}) must not exceed '
        f'max_replay_size ({max_replay_size})'
      )
    validation.check_positive('samples_per_insert', samples_per_insert)
    validation.check_non_negative(
      'samples_per_insert_tolerance_rate', samples_per_insert_tolerance_rate
    )
    lr = learning_rate if callable(learning_rate) else lambda: learning_rate
    self._n_step = n_step
    self._batch_size = batch_size
    self._num_sgd = num_sgd_steps_per_step
    self._value_eval_steps = value_eval_steps
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
    self._loss_fn = loss_fn
    self._env_steps = 0
    self._adder = self._make_adder()
    # Stream mode absorbs an epoch's trajectories as they arrive.
    self._n_absorbed = 0
    self._epoch_metrics: list[Any] = []
    self._epoch_items: list[Any] = []
    self._build_trainer(
      loss_fn, num_steps=num_sgd_steps_per_step, n_devices=n_devices
    )
    self._prioritized = self._returns_priorities()
    self._table = self._make_table(
      min_replay_size,
      max_replay_size,
      samples_per_insert,
      samples_per_insert_tolerance_rate,
      priority_exponent,
    )
    # Episodes the task played before the agent existed (epoch 0).
    self._add_to_replay(task.trajectories.get(0, []))
    self._device_store = self._make_device_store(n_step, target_update_period)

  # What a replay learner specializes.
  def _make_adder(self) -> Any:
    """The adder that turns trajectory slices into replay items."""
    return adders.NStepTransitionAdder(self._n_step, self._task.gamma)

  def _new_items(self, trajectories) -> Any:
    """The items `[N, ...]` the slices complete, or None."""
    return self._adder.add_trajectories(trajectories)

  def _insert_chunk_size(self) -> int:
    """Items inserted between two learning phases (an epoch's worth)."""
    chunk = self._n_interactions_per_epoch or 1024
    return chunk + self._task.n_envs * self._n_step

  def _example_batch(self, n: int) -> types.Batch:
    """A zero batch of `n` items, for shapes."""
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

  def _acting_policy(
    self, temperature: float, evaluation: bool
  ) -> collection.BatchPolicy:
    """The policy before the replay bookkeeping (`make_policy` adds it)."""
    return super().make_policy(temperature, evaluation)

  # Shared machinery.
  def _make_table(self, min_size, max_size, spi, tolerance, exponent):
    return learner_table.make(
      max_size,
      samplers.Prioritized(exponent)
      if self._prioritized
      else samplers.Uniform(),
      min_size,
      spi,
      tolerance,
      self._batch_size * self._num_sgd,
      self._insert_chunk_size(),
      seed=int(self._rng.integers(2**31 - 1)),
    )

  @property
  def table(self) -> table_lib.Table:
    return self._table

  @property
  def adder(self) -> Any:
    return self._adder

  @property
  def loss_fn(self) -> types.LossFn:
    return self._loss_fn

  @property
  def env_steps(self) -> int:
    """Env steps taken by the training policy (the epsilon schedule's step)."""
    return self._env_steps

  def exploration_step(self) -> int:
    return self._env_steps

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> collection.BatchPolicy:
    """The acting policy; for training it also records the stream info."""
    policy = self._acting_policy(temperature, evaluation)
    if evaluation:
      return policy

    def train_policy(obs, first):
      action, info = policy(obs, first)
      self._env_steps += len(obs)
      return action, dict(info, **adders.stream_info(first))

    return train_policy

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

  def _insert(self, items: Any, enforce_limit: bool = True) -> None:
    self._table.insert_batch(
      adders.as_stored(items),
      adders.NEW_ITEM_PRIORITY,
      enforce_limit=enforce_limit,
    )

  def _learner_call(self, metrics: list[Any]) -> None:
    """One learner call: sample, update, write the priorities back."""
    sample = self._table.sample(self._batch_size * self._num_sgd)
    batch = types.Batch(sample.data, sample.probability.astype(np.float32))
    extra = self._trainer.train_step(self._stack(batch))
    if self._prioritized:
      priorities = np.asarray(extra.priorities, np.float64).reshape(-1)
      self._table.mutate_priorities(sample.keys, priorities)
    metrics.append(extra.metrics)  # Read once per epoch: no sync here.

  def _add_to_replay(self, trajectories) -> tuple[list[Any], Any]:
    """Inserts the slices' items, learning as the rate limiter allows.

    `learner_table.insert_and_learn` says how; across hosts
    (`train_rl.multihost`) the processes' tables are limited as one.

    Returns:
      (the metrics of each learner call (device arrays), the items `[N, ...]`
      or None).
    """
    items = self._new_items(trajectories)
    metrics = []

    def insert(rows: slice, enforce_limit: bool) -> None:
      self._insert(jax.tree.map(lambda x: x[rows], items), enforce_limit)

    learner_table.insert_and_learn(
      self._table,
      0 if items is None else len(items.reward),
      self._insert_chunk_size(),
      self._batch_size * self._num_sgd,
      insert,
      lambda: self._learner_call(metrics),
      name=type(self).__name__,
    )
    return metrics, items

  def _evaluate(self, items: Any) -> dict[str, float]:
    """Loss metrics on `value_eval_steps` batches of the epoch's new items."""
    n = 0 if items is None else len(items.reward)
    # Across hosts every process evaluates (a collective) or none does.
    if not (self._value_eval_steps and sharding.gather_ints([n]).min()):
      return {}
    rng = np.random.default_rng([self._seed, self._epoch, 7])
    probability = np.full(self._batch_size, 1.0 / n, np.float32)
    batches = []
    for _ in range(self._value_eval_steps):
      rows = rng.integers(n, size=self._batch_size)
      data = adders.as_stored(jax.tree.map(lambda x, r=rows: x[r], items))
      batches.append(types.Batch(data, probability))
    return loop_lib.mean_metrics(self._trainer, batches)

  streams_experience = True

  def can_take(self, n_steps: int) -> bool:
    """Whether the Table's rate limiter lets `n_steps` more items in."""
    return self._table.can_insert(max(n_steps, 1))

  def absorb(self) -> None:
    """Adds this epoch's trajectories not added yet, learning as allowed."""
    trajectories = self._task.trajectories.get(self._epoch, [])
    new = trajectories[self._n_absorbed :]
    self._n_absorbed = len(trajectories)
    per_call, items = self._add_to_replay(new)
    self._epoch_metrics.extend(per_call)
    if items is not None:
      self._epoch_items.append(items)

  def train_epoch(self) -> dict[str, float]:
    """Adds this epoch's trajectories to replay and learns on it."""
    self.absorb()
    per_call = jax.device_get(self._epoch_metrics)
    items = adders.concatenate(self._epoch_items)
    self._n_absorbed, self._epoch_metrics, self._epoch_items = 0, [], []
    n_items = 0 if items is None else len(items.reward)
    metrics = {
      k: float(np.mean([m[k] for m in per_call]))
      for k in (per_call[0] if per_call else {})
    }
    metrics.update(
      new_items=n_items,
      n_updates=len(per_call) * self._num_sgd,
      replay_size=self._table.size,
      sgd_steps=self._trainer.step,
      epsilon=self.exploration_rate(),
    )
    record = {f'value/{k}': v for k, v in metrics.items()}
    evals = self._evaluate(items)
    record.update({f'value_eval/{k}': v for k, v in evals.items()})
    return record

  def state_dict(self) -> dict[str, Any]:
    state = dict(
      super().state_dict(),
      env_steps=self._env_steps,
      adder=self._adder.state_dict(),
      table=self._table.state_dict(),
    )
    if self._device_store is not None:
      state['device_learner'] = self._device_store.state_dict()
    return state

  def load_state_dict(self, state: dict[str, Any]) -> None:
    super().load_state_dict(state)
    self._env_steps = int(state['env_steps'])
    self._adder.load_state_dict(state['adder'])
    self._table.load_state_dict(state['table'])
    if self._device_store is not None:
      self._device_store.load_state_dict(state['device_learner'])
