"""Trax DQN's compiled epoch: slices of the last epochs' trajectories.

The device twin of `DQN`'s host epoch, as a `device.epoch.DeviceProgram`:

  1. collect `T` vmapped env steps epsilon-greedily at the rate the
     exploration schedule gives the epoch (as the host, per epoch);
  2. store them in a ring of the last `n_replay_epochs` epochs
     (`SliceReplay`), each env's steps cut into trajectories at episode ends
     and at the epoch's end, as `RLTask` stores them;
  3. sync the target network if `sync_each_epoch`, then run the epoch's
     updates in `evals_per_epoch` rounds, each followed by an evaluation of
     the loss on `eval_steps` batches drawn with keys of their own (so
     evaluating changes no update). Each update is `Trainer`'s (the same
     `NStepValueLoss`, the target synced every `sync_freq` updates) on a
     batch of `[B, L]` slices.

Slices are those of `RLTask.trajectory_batch_stream(max_slice_length=L,
min_slice_length=L, margin=m)` over the same trajectories: a start is drawn
uniformly among all (trajectory, start) pairs, as the host draws an epoch
and a trajectory in proportion to their slice counts and then a start; a
trajectory of n steps has `max(1, n + 1 + m - L)` starts; rows past its last
step are `Trajectory.to_np(m)`'s margin (the final observation, then
zeros; mask 0, done True) and then the batch's zero padding (done True,
discount_mask 0).
"""

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import jax_envs, policies
from trax_rl import trajectory as trajectory_lib
from trax_rl.device import batches, rollout
from trax_rl.device import epoch as device_epoch
from trax_rl.networks import base as networks
from trax_rl.supervised import update as update_lib


class SliceReplay(NamedTuple):
  """The last E epochs' steps, fields `[E, T, N, ...]` (ring by epoch)."""

  observation: Any  # o_t
  action: Any  # a_t, int32
  reward: Any  # r_t, float32
  terminated: Any  # bool, the episode terminated after a_t
  next_observation: Any  # o_{t+1}, the final observation where it ended
  return_: Any  # float32, discounted rewards-to-go within the trajectory
  position: Any  # int32, t's index in its trajectory
  length: Any  # int32, steps of t's trajectory
  filled: Any  # [E] bool, slots holding an epoch


class SliceLearner(NamedTuple):
  """What Trax DQN's program trains and carries from epoch to epoch."""

  train: Any  # TrainState
  replay: SliceReplay
  epoch: Any  # [] int32, epochs completed (the schedule's step is +1)


def _trajectory_layout(ends: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(position in trajectory, trajectory length), `[T, N]` int32, of steps
  whose trajectories end where `ends[T, N]` (the last row always ends)."""

  def forward(count, end):
    return jnp.where(end, 0, count + 1), count

  _, position = jax.lax.scan(forward, jnp.zeros(ends.shape[1], jnp.int32), ends)

  def backward(after, x):
    position, end = x
    # Steps left after t in its trajectory.
    left = jnp.where(end, 0, after + 1)
    return left, position + left + 1

  _, length = jax.lax.scan(
    backward,
    jnp.zeros(ends.shape[1], jnp.int32),
    (position, ends),
    reverse=True,
  )
  return position, length


def store(
  replay: SliceReplay, steps: rollout.Rollout, slot: jax.Array, gamma: float
) -> SliceReplay:
  """Writes an epoch's `[T, N]` steps into ring slot `slot`."""
  ends = batches.trajectory_ends(steps)
  position, length = _trajectory_layout(ends)
  epoch = dict(
    observation=steps.observation,
    action=steps.action.astype(jnp.int32),
    reward=steps.reward.astype(jnp.float32),
    terminated=steps.terminated,
    next_observation=steps.next_observation,
    return_=batches.rewards_to_go(steps.reward, ends, gamma),
    position=position,
    length=length,
  )
  fields = {
    name: getattr(replay, name).at[slot].set(value)
    for name, value in epoch.items()
  }
  return SliceReplay(**fields, filled=replay.filled.at[slot].set(True))


def start_mask(replay: SliceReplay, length: int, margin: int) -> jax.Array:
  """`[E, T, N]` bool: the steps a slice may start at."""
  # As `batching.n_slices`: n steps have n + 1 observations.
  starts = jnp.maximum(1, replay.length + 1 + margin - length)
  return replay.filled[:, None, None] & (replay.position < starts)


def slices(
  replay: SliceReplay, index: jax.Array, length: int, margin: int
) -> trajectory_lib.TimeStepBatch:
  """The `[B, L, ...]` slices starting at flat indices `index[B]` of
  `[E, T, N]` (see the module docstring for the rows past the end)."""
  n_epochs, n_steps, n_envs = replay.position.shape
  e, rest = jnp.divmod(index, n_steps * n_envs)
  t, i = jnp.divmod(rest, n_envs)
  at = lambda x, time: x[e[:, None], time, i[:, None]]
  j = replay.position[e, t, i][:, None]  # [B, 1]
  n = replay.length[e, t, i][:, None]
  k = jnp.arange(length)[None, :]  # [1, L]
  time = jnp.minimum(t[:, None] + k, n_steps - 1)
  last = t[:, None] + n - 1 - j  # The trajectory's last step.
  rows = jnp.minimum(length, n + margin - j)  # The slice's own rows.
  real = k < n - j
  final = (k == n - j) & (k < rows)

  def where(cond, x, other):
    cond = cond.reshape(cond.shape + (1,) * (x.ndim - 2))
    return jnp.where(cond, x, other)

  obs = at(replay.observation, time)
  final_obs = at(replay.next_observation, jnp.broadcast_to(last, time.shape))
  observation = where(real, obs, where(final, final_obs, jnp.zeros_like(obs)))
  ones = jnp.ones(k.shape, jnp.float32)
  own = (k < rows).astype(jnp.float32) * ones
  zero = lambda x: jnp.where(real, x, jnp.zeros_like(x))
  return trajectory_lib.TimeStepBatch(
    observation=observation,
    action=zero(at(replay.action, time)),
    reward=zero(at(replay.reward, time)),
    done=jnp.where(real, at(replay.terminated, time), True),
    mask=real.astype(jnp.float32),
    dist_inputs=None,
    env_info=trajectory_lib.EnvInfo(control_mask=own, discount_mask=own),
    return_=zero(at(replay.return_, time)),
    agent_info={},
  )


def start_cdf(replay: SliceReplay, length: int, margin: int) -> jax.Array:
  """`[E * T * N]` cumulative probabilities of the starts (uniform over
  `start_mask`); computed once per epoch, sampled by every update."""
  mask = start_mask(replay, length, margin).reshape(-1)
  return jnp.cumsum(mask / jnp.maximum(jnp.sum(mask), 1))


def sample(
  replay: SliceReplay,
  cdf: jax.Array,
  key: jax.Array,
  batch_size: int,
  length: int,
  margin: int,
) -> trajectory_lib.TimeStepBatch:
  """A batch of slices whose starts are drawn from `cdf` (`start_cdf`), as
  `jax.random.choice(p=...)` draws them."""
  u = jax.random.uniform(key, (batch_size,), dtype=cdf.dtype)
  index = jnp.searchsorted(cdf, cdf[-1] * (1 - u)).astype(int)
  return slices(replay, index, length, margin)


@dataclasses.dataclass(frozen=True)
class SliceEpoch:
  """The pure pieces of Trax DQN's compiled epoch (`program()`).

  Attributes:
    env: the JaxEnv.
    network: the Q network (apply returns a QOutput).
    loss_fn: the `NStepValueLoss`, the same object the host path uses.
    optimizer: the Trainer's optax transformation.
    exploration: `epoch -> epsilon` (jnp-traceable), as the host's.
    n_envs: N, envs stepped together.
    n_steps: T, vector steps per epoch.
    n_replay_epochs: E, epochs the slices come from.
    gamma: the task's discount.
    batch_size: slices per update.
    slice_length: L.
    margin: m.
    train_steps: updates per epoch.
    evals_per_epoch: rounds per epoch, each followed by an evaluation.
    eval_steps: batches per evaluation (0: none).
    sync_freq: target sync period in updates.
    sync_each_epoch: also sync the target before each epoch's updates.
  """

  env: jax_envs.JaxEnv
  network: networks.Network
  loss_fn: Callable[..., Any]
  optimizer: Any
  exploration: Callable[[Any], jax.Array]
  n_envs: int
  n_steps: int
  n_replay_epochs: int
  gamma: float
  batch_size: int
  slice_length: int
  margin: int
  train_steps: int
  evals_per_epoch: int
  eval_steps: int
  sync_freq: int
  sync_each_epoch: bool

  def init(self, train: Any, epoch: int) -> SliceLearner:
    """An empty ring (through numpy: no weak types) after `epoch` epochs."""
    space = self.env.observation_space
    shape = (self.n_replay_epochs, self.n_steps, self.n_envs)
    zeros = lambda dtype, extra=(): np.zeros(shape + extra, dtype)
    replay = SliceReplay(
      observation=zeros(space.dtype, space.shape),
      action=zeros(np.int32),
      reward=zeros(np.float32),
      terminated=zeros(bool),
      next_observation=zeros(space.dtype, space.shape),
      return_=zeros(np.float32),
      position=zeros(np.int32),
      length=zeros(np.int32),
      filled=np.zeros(self.n_replay_epochs, bool),
    )
    learner = SliceLearner(train, replay, np.int32(epoch))
    return jax.tree.map(np.asarray, learner)

  def policy(self, learner: SliceLearner, key: jax.Array, obs: Any):
    """Epsilon-greedy at the rate of the epoch being collected."""
    q_values = self.network.apply(learner.train.params, obs).q_values
    epsilon = self.exploration(learner.epoch + 1)
    return policies.epsilon_greedy(q_values, key, epsilon), {}

  def greedy(self, learner: SliceLearner, key: jax.Array, obs: Any):
    del key
    q_values = self.network.apply(learner.train.params, obs).q_values
    return jnp.argmax(q_values, axis=-1), {}

  def _sample(self, replay, cdf, key):
    return sample(
      replay, cdf, key, self.batch_size, self.slice_length, self.margin
    )

  def _evaluate(self, train, replay, cdf, key) -> dict[str, jax.Array]:
    """Mean loss metrics over `eval_steps` fresh batches."""

    def one(key):
      loss, extra = self.loss_fn(
        self.network,
        train.params,
        train.target_params,
        self._sample(replay, cdf, key),
        key,
      )
      return dict(extra.metrics, loss=loss)

    keys = jax.random.split(key, self.eval_steps)
    return jax.tree.map(jnp.mean, jax.vmap(one)(keys))

  def program(self) -> device_epoch.DeviceProgram:
    """The DeviceProgram: policy, train (store + rounds) and greedy."""
    update = update_lib.make_update_fn(
      self.network, self.loss_fn, self.optimizer, self.sync_freq
    )
    per_round = self.train_steps // self.evals_per_epoch

    def train(learner: SliceLearner, steps: rollout.Rollout, key: jax.Array):
      epoch = learner.epoch + 1
      slot = (epoch - 1) % self.n_replay_epochs
      replay = store(learner.replay, steps, slot, self.gamma)
      cdf = start_cdf(replay, self.slice_length, self.margin)
      state = learner.train
      if self.sync_each_epoch:
        state = state._replace(target_params=state.params)
      train_key, eval_key = jax.random.split(key)

      def one_update(state, key):
        return update(state, self._sample(replay, cdf, key))

      def one_round(state, keys):
        round_keys, round_eval_key = keys
        state, extras = jax.lax.scan(one_update, state, round_keys)
        evals = {}
        if self.eval_steps:
          evals = self._evaluate(state, replay, cdf, round_eval_key)
        return state, (jax.tree.map(jnp.mean, extras.metrics), evals)

      keys = jax.random.split(train_key, self.train_steps).reshape(
        self.evals_per_epoch, per_round, -1
      )
      eval_keys = jax.random.split(eval_key, self.evals_per_epoch)
      state, (metrics, evals) = jax.lax.scan(
        one_round, state, (keys, eval_keys)
      )
      record = {f'value/{k}': jnp.mean(v) for k, v in metrics.items()}
      record['value/exploration_rate'] = self.exploration(epoch)
      record.update({f'value_eval/{k}': v[-1] for k, v in evals.items()})
      learner = SliceLearner(state, replay, epoch)
      return learner, record

    return device_epoch.DeviceProgram(self.policy, train, self.greedy)
