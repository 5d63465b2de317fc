"""The device program of replay value learners (the Acme-family losses).

The device twin of `ReplayValueAgent`'s host epoch, as a
`device.epoch.DeviceProgram`, so that one jitted call per epoch does:

  1. collect `T` vmapped env steps epsilon-greedily (`device.rollout`, auto
     reset on the device); epsilon is the schedule of env steps at the
     epoch's start (the host re-reads it at every vector step);
  2. turn them into n-step transitions exactly as `adders.NStepTransition
     Adder` defines them (truncation bootstraps, termination does not),
     carrying each env's last n - 1 steps to the next epoch as the adder
     carries its pending tail: step t is emitted once its n-step window is
     in, so every step becomes exactly one transition;
  3. insert them into a `DeviceTable` at `adders.NEW_ITEM_PRIORITY`, as the
     host path inserts them;
  4. run learner calls while the table's rate limiter allows sampling
     `batch_size * num_sgd_steps_per_step` items: each call is the very
     update `Trainer` jits (`update.make_update_fn`: the same loss, target
     syncs every `target_update_period` updates), and the loss's priorities
     are written back by key.

The learner state is a `ValueLearner` pytree (train state, n-step tails,
replay, counters), so it checkpoints as numpy leaves and vmaps over seeds
(`train_rl.n_seeds`); the runner keeps the envs in flight.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import jax_envs, policies, types
from trax_rl.device import batched_loop, rollout
from trax_rl.device import epoch as device_epoch
from trax_rl.networks import base as networks
from trax_rl.replay import adders, device_table
from trax_rl.supervised import train_state as train_state_lib
from trax_rl.supervised import update as update_lib


class Steps(NamedTuple):
  """Env steps as the n-step builder needs them, `[T, N, ...]`."""

  observation: Any  # o_t
  action: Any  # a_t
  reward: Any  # r_t
  terminated: Any  # bool, ended naturally after a_t
  truncated: Any  # bool, cut by a time limit after a_t
  next_observation: Any  # o_{t+1}, the final observation where it ended


class ValueLearner(NamedTuple):
  """What the value program trains and carries from epoch to epoch."""

  train: train_state_lib.TrainState
  tail: Steps  # [n - 1, N, ...] the last steps, not yet emitted
  tail_valid: Any  # [n - 1, N] bool, False before the first steps exist
  replay: device_table.DeviceReplay
  env_steps: Any  # [] int32, env steps of the training policy so far


def n_step_transitions(
  steps: Steps, valid: jax.Array, n_step: int, gamma: float, count: int
) -> tuple[types.Transition, jax.Array]:
  """The n-step transitions of the first `count` steps of `steps`.

  Args:
    steps: `[count + n_step - 1, N, ...]`, time major, consecutive per env.
    valid: `[count + n_step - 1, N]` bool, which steps are real.
    n_step: n >= 1.
    gamma: discount per step.
    count: how many steps (from the first) to emit.

  Returns:
    (Transition `[count, N, ...]`, valid `[count, N]`). For step t with
    k = min(n, steps until its episode ended): reward sum_{i<k} gamma**i
    r_{t+i}, discount gamma**k (0 if the episode terminated at t + k),
    next_observation the observation after step t + k - 1.
  """
  window = lambda x: jnp.stack([x[i : i + count] for i in range(n_step)], 1)
  done = window(steps.terminated | steps.truncated)  # [count, n, N]
  # alive[:, i]: step t + i still belongs to step t's episode.
  ended_before = jnp.cumsum(done, axis=1) - done
  alive = ended_before == 0
  k = jnp.sum(alive, axis=1)  # [count, N], in [1, n]
  powers = (gamma ** jnp.arange(n_step, dtype=jnp.float32))[None, :, None]
  rewards = window(steps.reward.astype(jnp.float32))
  reward = jnp.sum(jnp.where(alive, powers * rewards, 0.0), axis=1)
  terminated = jnp.any(alive & window(steps.terminated), axis=1)
  discount = jnp.where(terminated, 0.0, gamma ** k.astype(jnp.float32))
  last = jnp.arange(count)[:, None] + k - 1  # [count, N] index into steps
  env_index = jnp.arange(k.shape[1])[None, :]
  transition = types.Transition(
    observation=steps.observation[:count],
    action=steps.action[:count].astype(jnp.int32),
    reward=reward,
    discount=discount.astype(jnp.float32),
    next_observation=steps.next_observation[last, env_index],
  )
  return transition, valid[:count]


@dataclasses.dataclass(frozen=True)
class ValueEpoch:
  """The pure pieces of a compiled replay-value epoch (`program()`).

  Attributes:
    env: the JaxEnv.
    network: the Q network (apply returns a QOutput).
    loss_fn: the `q_learning` loss, the same object the host path uses.
    optimizer: the optax transformation (the Trainer's).
    table: the DeviceTable, configured as the host Table.
    exploration: `env_steps -> epsilon` (jnp-traceable).
    n_envs: N, envs stepped together.
    n_steps: T, vector steps collected per epoch.
    n_step: n of the n-step transitions.
    gamma: the task's discount.
    batch_size: transitions per update.
    num_sgd_steps_per_step: updates per learner call (one `lax.scan`).
    target_update_period: target sync period in updates.
    prioritized: write the loss's priorities back.
  """

  env: jax_envs.JaxEnv
  network: networks.Network
  loss_fn: Callable[..., Any]
  optimizer: Any
  table: device_table.DeviceTable
  exploration: Callable[[Any], jax.Array]
  n_envs: int
  n_steps: int
  n_step: int
  gamma: float
  batch_size: int
  num_sgd_steps_per_step: int
  target_update_period: int
  prioritized: bool

  def init(self, train: train_state_lib.TrainState) -> ValueLearner:
    """The learner before the first epoch: empty tails and replay.

    Through numpy, so it has no weak types and the epoch compiles once.
    """
    obs = np.zeros(
      self.env.observation_space.shape, self.env.observation_space.dtype
    )
    tail_len = self.n_step - 1
    zeros = lambda shape, dtype: np.zeros(
      (tail_len, self.n_envs) + shape, dtype
    )
    tail = Steps(
      observation=zeros(obs.shape, obs.dtype),
      action=zeros((), np.int32),
      reward=zeros((), np.float32),
      terminated=zeros((), bool),
      truncated=zeros((), bool),
      next_observation=zeros(obs.shape, obs.dtype),
    )
    example = types.Transition(
      observation=obs,
      action=np.zeros((), np.int32),
      reward=np.zeros((), np.float32),
      discount=np.zeros((), np.float32),
      next_observation=obs,
    )
    learner = ValueLearner(
      train=train,
      tail=tail,
      tail_valid=zeros((), bool),
      replay=self.table.empty(example),
      env_steps=np.zeros((), np.int32),
    )
    return jax.tree.map(np.asarray, learner)

  def policy(self, learner: ValueLearner, key: jax.Array, obs: Any):
    """Epsilon-greedy at the epoch's epsilon (see the module docstring)."""
    q_values = self.network.apply(learner.train.params, obs).q_values
    epsilon = self.exploration(learner.env_steps)
    return policies.epsilon_greedy(q_values, key, epsilon), {}

  def greedy(self, learner: ValueLearner, key: jax.Array, obs: Any):
    """The greedy policy (temperature 0), for compiled evaluation."""
    del key
    q_values = self.network.apply(learner.train.params, obs).q_values
    return jnp.argmax(q_values, axis=-1), {}

  def _insert(self, learner: ValueLearner, steps: rollout.Rollout):
    new = Steps(
      steps.observation,
      steps.action.astype(jnp.int32),
      steps.reward,
      steps.terminated,
      steps.truncated,
      steps.next_observation,
    )
    joined = jax.tree.map(
      lambda a, b: jnp.concatenate([a, b.astype(a.dtype)]), learner.tail, new
    )
    valid = jnp.concatenate(
      [learner.tail_valid, jnp.ones((self.n_steps, self.n_envs), bool)]
    )
    transitions, ok = n_step_transitions(
      joined, valid, self.n_step, self.gamma, self.n_steps
    )
    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # Time major, as host.
    replay, _ = self.table.insert(
      learner.replay,
      jax.tree.map(flat, transitions),
      adders.NEW_ITEM_PRIORITY,
      flat(ok),
    )
    return learner._replace(
      replay=replay,
      tail=jax.tree.map(lambda x: x[self.n_steps :], joined),
      tail_valid=valid[self.n_steps :],
      env_steps=learner.env_steps + self.n_steps * self.n_envs,
    )

  def _stack(self, x: jax.Array) -> jax.Array:
    """[K * B, ...] -> [K, B, ...] for a fused call of K updates."""
    if self.num_sgd_steps_per_step == 1:
      return x
    shape = (self.num_sgd_steps_per_step, self.batch_size)
    return x.reshape(shape + x.shape[1:])

  def _learn(self, learner: ValueLearner, key: jax.Array, update: Callable):
    per_call = self.batch_size * self.num_sgd_steps_per_step
    example = types.Batch(
      jax.tree.map(lambda x: self._stack(x[:per_call]), learner.replay.storage),
      self._stack(jnp.zeros(per_call, jnp.float32)),
    )
    _, extra = jax.eval_shape(update, learner.train, example)
    zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), extra.metrics)

    def cond(state):
      return self.table.can_sample(state[0].replay, per_call)

    def body(state, active):
      # Under a seed vmap, seeds that may not sample ride along (see
      # `batched_loop`): their keys are -1, so no priority is written, and
      # everything else they changed is put back.
      c, sums, calls = state
      replay, sample = self.table.sample(
        c.replay, jax.random.fold_in(key, calls), per_call
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
    return learner, dict(means, learner_calls=calls)

  def program(self) -> device_epoch.DeviceProgram:
    """The DeviceProgram: policy, train (insert + learn) and greedy."""
    update = update_lib.make_update_fn(
      self.network,
      self.loss_fn,
      self.optimizer,
      self.target_update_period,
      self.num_sgd_steps_per_step,
    )

    def train(learner: ValueLearner, steps: rollout.Rollout, key: jax.Array):
      learner = self._insert(learner, steps)
      learner, learned = self._learn(learner, key, update)
      metrics = dict(
        learned,
        replay_size=self.table.size(learner.replay),
        epsilon=self.exploration(learner.env_steps),
        env_steps=learner.env_steps,
        sgd_steps=learner.train.step,
      )
      return learner, {f'value/{k}': v for k, v in metrics.items()}

    return device_epoch.DeviceProgram(self.policy, train, self.greedy)
