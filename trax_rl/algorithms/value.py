"""The replay value learners (every Acme-family loss) as one program.

`ValueProgram` is the whole algorithm of `ReplayValueAgent`, for every
source (`trax_rl.algorithms.program`):

- `act`: epsilon-greedy on the Q network at the exploration schedule's
  rate for the env steps taken so far (read when the rollout starts);
  greedy at temperature 0.
- `observe`: turns a `[T, N]` rollout into n-step transitions (truncation
  bootstraps, termination does not) and inserts each as soon as it is
  complete (its n steps are in, or its episode ended), into a
  `DeviceTable` at `NEW_ITEM_PRIORITY` (Acme's adders insert at 1.0,
  prioritized or not); each env's last n - 1 steps carry to the next
  rollout, so every step becomes exactly one transition.
- `learn`: learner calls while the table's rate limiter allows sampling
  `batch_size * num_sgd_steps_per_step` items (about `samples_per_insert`
  samples per inserted item once `min_replay_size` items are in); each
  call is `num_sgd_steps_per_step` updates in one `lax.scan`, syncing the
  target every `target_update_period` updates; a prioritized loss's
  priorities are written back by key. Then, with `value_eval_steps`, the
  loss metrics of that many uniform batches of the items this rollout
  inserted (no update, the table untouched) as `value_eval/...`.

The learner is a `ValueLearner` pytree (train state, n-step tails, the
replay, counters), so it checkpoints as numpy leaves and vmaps over seeds.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import policies, types
from trax_rl.algorithms import n_step
from trax_rl.algorithms import program as program_lib
from trax_rl.device import batched_loop
from trax_rl.device import rollout as rollout_lib
from trax_rl.networks import base as networks
from trax_rl.replay import device_table
from trax_rl.supervised import train_state as train_state_lib
from trax_rl.supervised import update as update_lib

# A new item's priority, as Acme's adders insert it.
NEW_ITEM_PRIORITY = 1.0


class ValueLearner(NamedTuple):
  """What the value program trains and carries from rollout to rollout."""

  train: train_state_lib.TrainState
  tail: n_step.Steps  # [n - 1, N, ...] each env's last steps, not yet emitted
  tail_valid: Any  # [n - 1, N] bool, False before the first steps exist
  replay: device_table.DeviceReplay
  env_steps: Any  # [] int32, env steps of the training policy so far
  new_items: Any  # [2] int32, keys [first, end) the last observe inserted


@dataclasses.dataclass(frozen=True)
class ValueProgram:
  """The replay value learner's pure functions (see the module docstring).

  Attributes:
    network: the Q network (apply returns a QOutput).
    loss_fn: the `q_learning` or `distributional` loss.
    optimizer: the optax transformation.
    table: the DeviceTable (sampler, rate limiter, capacity).
    exploration: `env_steps -> epsilon` (jnp-traceable).
    example_observation: one observation (shapes and dtype of the items).
    n_envs: N, envs per rollout.
    n_step: n of the n-step transitions.
    gamma: the task's discount.
    batch_size: transitions per update.
    num_sgd_steps_per_step: updates per learner call (one `lax.scan`).
    target_update_period: target sync period in updates.
    prioritized: write the loss's priorities back.
    value_eval_steps: eval batches of the newly inserted items (0: none).
    axis_name: across hosts, the name of the mapped axis of the processes'
      learners (`train_rl.multihost`): gradients are averaged over it and
      the processes' tables are limited as one (every process makes as
      many learner calls as the table with the fewest inserts allows).
  """

  network: networks.Network
  loss_fn: Callable[..., Any]
  optimizer: Any
  table: device_table.DeviceTable
  exploration: Callable[[Any], jax.Array]
  example_observation: np.ndarray
  n_envs: int
  n_step: int
  gamma: float
  batch_size: int
  num_sgd_steps_per_step: int
  target_update_period: int
  prioritized: bool
  value_eval_steps: int = 0
  axis_name: str | None = None

  def example_item(self) -> types.Transition:
    return n_step.transition_like(self.example_observation)

  def init(self, key: jax.Array) -> ValueLearner:
    """The learner before the first rollout: empty tails and replay."""
    train = update_lib.init_state(
      self.network, self.optimizer, key, target=True
    )
    obs = self.example_observation
    tail_len = self.n_step - 1
    zeros = lambda shape, dtype: np.zeros(
      (tail_len, self.n_envs) + shape, dtype
    )
    tail = n_step.Steps(
      observation=zeros(obs.shape, obs.dtype),
      action=zeros((), np.int32),
      reward=zeros((), np.float32),
      terminated=zeros((), bool),
      truncated=zeros((), bool),
      next_observation=zeros(obs.shape, obs.dtype),
    )
    return ValueLearner(
      train=train,
      tail=tail,
      tail_valid=zeros((), bool),
      replay=self.table.empty(self.example_item()),
      env_steps=np.zeros((), np.int32),
      new_items=np.zeros(2, np.int32),
    )

  def q_values(self, learner: ValueLearner, obs: Any) -> jax.Array:
    return self.network.apply(learner.train.params, obs).q_values

  def act(self, learner: ValueLearner, key, obs, temperature: float):
    """Epsilon-greedy at temperature > 0, greedy at 0."""
    q_values = self.q_values(learner, obs)
    if temperature == 0:
      return jnp.argmax(q_values, axis=-1), {}
    epsilon = self.exploration(learner.env_steps)
    return policies.epsilon_greedy(q_values, key, epsilon), {}

  def observe(
    self, learner: ValueLearner, rollout: rollout_lib.Rollout
  ) -> ValueLearner:
    """Inserts the rollout's n-step transitions (see the module docstring)."""
    new = n_step.Steps(
      rollout.observation,
      rollout.action.astype(jnp.int32),
      rollout.reward,
      rollout.terminated,
      rollout.truncated,
      rollout.next_observation,
    )
    n_steps = rollout.reward.shape[0]
    joined, valid = n_step.align_valid(
      learner.tail, learner.tail_valid, new, rollout.valid
    )
    transitions, emit = n_step.complete_transitions(
      joined, valid, self.n_step, self.gamma
    )
    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # Time major.
    first = learner.replay.num_inserts
    replay, _ = self.table.insert(
      learner.replay,
      jax.tree.map(flat, transitions),
      NEW_ITEM_PRIORITY,
      flat(emit),
    )
    return learner._replace(
      replay=replay,
      tail=jax.tree.map(lambda x: x[n_steps:], joined),
      tail_valid=(valid & ~emit)[n_steps:],
      env_steps=learner.env_steps + jnp.sum(rollout.valid, dtype=jnp.int32),
      new_items=jnp.stack([first, replay.num_inserts]),
    )

  def _stack(self, x: jax.Array) -> jax.Array:
    """[K * B, ...] -> [K, B, ...] for a fused call of K updates."""
    if self.num_sgd_steps_per_step == 1:
      return x
    shape = (self.num_sgd_steps_per_step, self.batch_size)
    return x.reshape(shape + x.shape[1:])

  def update_fn(self) -> Callable:
    return update_lib.make_update_fn(
      self.network,
      self.loss_fn,
      self.optimizer,
      self.target_update_period,
      self.num_sgd_steps_per_step,
      axis_name=self.axis_name,
    )

  def _can_sample(self, replay: device_table.DeviceReplay, n: int):
    can = self.table.can_sample(replay, n)
    if self.axis_name is None:
      return can
    return jax.lax.pmin(can.astype(jnp.int32), self.axis_name) > 0

  def learn(self, learner: ValueLearner, key: jax.Array):
    """Learner calls while the limiter allows; then the evals."""
    update = self.update_fn()
    per_call = self.batch_size * self.num_sgd_steps_per_step
    learn_key, eval_key = jax.random.split(key)
    example = types.Batch(
      jax.tree.map(lambda x: self._stack(x[:per_call]), learner.replay.storage),
      self._stack(jnp.zeros(per_call, jnp.float32)),
    )
    _, extra = jax.eval_shape(update, learner.train, example)
    zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), extra.metrics)

    def cond(state):
      return self._can_sample(state[0].replay, per_call)

    def body(state, active):
      # Under a seed vmap, seeds that may not sample ride along (see
      # `batched_loop`): their keys are -1, so no priority is written, and
      # everything else they changed is put back.
      c, sums, calls = state
      replay, sample = self.table.sample(
        c.replay, jax.random.fold_in(learn_key, calls), per_call
      )
      batch = types.Batch(
        jax.tree.map(self._stack, sample.data), self._stack(sample.probability)
      )
      train, extra = update(c.train, batch)
      if self.prioritized:
        keys = batched_loop.keep_where(
          active, sample.keys, jnp.full_like(sample.keys, -1)
        )
        priorities = extra.priorities.reshape(-1)
        replay = self.table.mutate_priorities(replay, keys, priorities)
      num_samples = batched_loop.keep_where(
        active, replay.num_samples, c.replay.num_samples
      )
      train, sums, calls = batched_loop.keep_where(
        active,
        (train, jax.tree.map(jnp.add, sums, extra.metrics), calls + 1),
        (c.train, sums, calls),
      )
      replay = replay._replace(num_samples=num_samples)
      return c._replace(replay=replay, train=train), sums, calls

    learner, sums, calls = batched_loop.while_any(
      cond, body, (learner, zeros, jnp.zeros((), jnp.int32))
    )
    means = jax.tree.map(lambda s: s / jnp.maximum(calls, 1), sums)
    metrics = dict(
      means,
      learner_calls=calls,
      n_updates=calls * self.num_sgd_steps_per_step,
      new_items=learner.new_items[1] - learner.new_items[0],
      replay_size=self.table.size(learner.replay),
      epsilon=self.exploration(learner.env_steps),
      env_steps=learner.env_steps,
      sgd_steps=learner.train.step,
    )
    record = {f'value/{k}': v for k, v in metrics.items()}
    if self.value_eval_steps:
      evals = self.evaluate_new_items(learner, eval_key)
      record.update({f'value_eval/{k}': v for k, v in evals.items()})
    return learner, record

  def evaluate_new_items(self, learner: ValueLearner, key: jax.Array):
    """Mean loss metrics of `value_eval_steps` uniform batches of the items
    the last `observe` inserted (no update; the table untouched)."""
    first, end = learner.new_items[0], learner.new_items[1]
    count = jnp.maximum(end - first, 1)
    size = self.table.max_size

    def one(key):
      u = jax.random.uniform(key, (self.batch_size,))
      keys = first + jnp.minimum((u * count).astype(jnp.int32), count - 1)
      data = jax.tree.map(
        lambda store: store[keys % size], learner.replay.storage
      )
      probability = jnp.full(self.batch_size, 1.0, jnp.float32) / count
      loss, extra = self.loss_fn(
        self.network,
        learner.train.params,
        learner.train.target_params,
        types.Batch(data, probability),
        key,
      )
      return dict(extra.metrics, loss=loss)

    keys = jax.random.split(key, self.value_eval_steps)
    means = jax.tree.map(jnp.mean, jax.vmap(one)(keys))
    # No new items (a learner fed nothing): no evaluation to report.
    return jax.tree.map(lambda x: jnp.where(end > first, x, jnp.nan), means)

  def acting(self, learner: ValueLearner) -> ValueLearner:
    """The learner without its tails and replay (what `act` reads)."""
    return learner._replace(tail=(), tail_valid=(), replay=())

  def can_observe(self, learner: ValueLearner, n_steps: int) -> jax.Array:
    """Whether the table's rate limiter admits n_steps more items."""
    return self.table.can_insert(learner.replay, max(n_steps, 1))

  def program(self) -> program_lib.Program:
    return program_lib.Program.of(
      self, streams=True, can_observe=self.can_observe
    )
