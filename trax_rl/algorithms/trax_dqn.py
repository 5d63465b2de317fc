"""Trax's DQN as one program: slices of the last epochs' trajectories.

`TraxDQNProgram` is the whole algorithm of the `DQN` agent (Mnih et al.,
2015, as Trax runs it), for every source:

- `act`: epsilon-greedy at the rate the exploration schedule gives the
  epoch being collected; greedy at temperature 0.
- `observe`: stores the rollout in a ring of the last `n_replay_epochs`
  epochs (`replay.slices`), cut into trajectories as `RLTask` stores them.
- `learn`: syncs the target network if `sync_each_epoch`, then runs the
  epoch's updates in `evals_per_epoch` rounds, each followed by an
  evaluation of the loss on `eval_steps` batches drawn with keys of their
  own (so evaluating changes no update). Each update is `NStepValueLoss`
  on a batch of `[B, L]` slices drawn uniformly among all (trajectory,
  start) pairs. As Trax, the target is synced again after the updates if
  their count is a multiple of `sync_freq`; with `sync_within_epoch`,
  every `sync_freq` updates as they run instead. As Trax's
  (`trajectory_batch_stream(margin=0)`), a slice lies inside its
  trajectory, so the last `margin` steps of each (its terminal step
  included) never get a target; `train_final_steps` also starts slices
  there, padded past the end (final observation, done), so they do.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from trax_rl import policies
from trax_rl.algorithms import program as program_lib
from trax_rl.device import rollout as rollout_lib
from trax_rl.networks import base as networks
from trax_rl.replay import slices
from trax_rl.supervised import update as update_lib


class DQNLearner(NamedTuple):
  """What Trax DQN's program trains and carries from epoch to epoch."""

  train: Any  # TrainState
  ring: slices.SliceRing
  epoch: Any  # [] int32, epochs learned (the schedule's step is epoch + 1)
  observed: Any  # [] int32, rollouts stored (the next slot: observed % E)


@dataclasses.dataclass(frozen=True)
class TraxDQNProgram:
  """Trax DQN's pure functions (see the module docstring).

  Attributes:
    network: the Q network (apply returns a QOutput).
    loss_fn: the `NStepValueLoss`.
    optimizer: the optax transformation.
    exploration: `epoch -> epsilon` (jnp-traceable), Trax's schedule.
    example_observation: one observation (shapes of the ring).
    n_envs: N, envs per rollout.
    n_steps: T, the longest rollout.
    n_replay_epochs: E, epochs the slices come from.
    gamma: the task's discount.
    batch_size: slices per update.
    slice_length: L.
    margin: m, td_k's n: the first L - m rows of a slice get targets.
    train_final_steps: start slices at a trajectory's last m steps too,
      padded past its end, so every step gets a target; False (Trax's):
      only the steps with m more after them in the trajectory do.
    train_steps: updates per epoch.
    evals_per_epoch: rounds per epoch, each followed by an evaluation.
    eval_steps: batches per evaluation (0: none).
    sync_freq: target sync period in updates.
    sync_each_epoch: sync the target before each epoch's updates.
    sync_within_epoch: sync every `sync_freq` updates as they run; False
      (Trax's): only after the epoch's updates, when the update count is a
      multiple of `sync_freq`.
    axis_name: across hosts, the processes' mapped axis (gradients averaged).
  """

  network: networks.Network
  loss_fn: Callable[..., Any]
  optimizer: Any
  exploration: Callable[[Any], jax.Array]
  example_observation: np.ndarray
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
  sync_within_epoch: bool = False
  train_final_steps: bool = False
  axis_name: str | None = None

  @property
  def _padding(self) -> int:
    """Rows a slice may reach past its trajectory's end."""
    return self.margin if self.train_final_steps else 0

  def init(self, key: jax.Array) -> DQNLearner:
    train = update_lib.init_state(
      self.network, self.optimizer, key, target=True
    )
    ring = slices.empty(
      self.n_replay_epochs,
      self.n_steps,
      self.n_envs,
      self.example_observation,
      np.zeros((), np.int32),
    )
    zero = np.zeros((), np.int32)
    return DQNLearner(train, ring, zero, zero)

  def acting(self, learner: DQNLearner) -> DQNLearner:
    return learner._replace(ring=())

  def act(self, learner: DQNLearner, key, obs, temperature: float):
    """Epsilon-greedy at the rate of the epoch being collected, at
    temperature 1 only: as Trax's `DQN.policy`, any other temperature
    (0, evaluation) acts greedily."""
    q_values = self.network.apply(learner.train.params, obs).q_values
    if temperature != 1:
      return jnp.argmax(q_values, axis=-1), {}
    epsilon = self.exploration(learner.epoch + 1)
    return policies.epsilon_greedy(q_values, key, epsilon), {}

  def observe(
    self, learner: DQNLearner, rollout: rollout_lib.Rollout
  ) -> DQNLearner:
    rollout = rollout._replace(action=rollout.action.astype(jnp.int32))
    slot = learner.observed % self.n_replay_epochs
    ring = slices.store(learner.ring, rollout, slot, self.gamma)
    return learner._replace(ring=ring, observed=learner.observed + 1)

  def _sample(self, ring, cdf, key):
    index = slices.draw(cdf, key, self.batch_size)
    return slices.gather(ring, index, self.slice_length, self._padding)

  def _evaluate(self, train, ring, cdf, key) -> dict[str, jax.Array]:
    """Mean loss metrics over `eval_steps` fresh batches."""

    def one(key):
      loss, extra = self.loss_fn(
        self.network,
        train.params,
        train.target_params,
        self._sample(ring, cdf, key),
        key,
      )
      return dict(extra.metrics, loss=loss)

    keys = jax.random.split(key, self.eval_steps)
    return jax.tree.map(jnp.mean, jax.vmap(one)(keys))

  def learn(self, learner: DQNLearner, key: jax.Array):
    update = update_lib.make_update_fn(
      self.network,
      self.loss_fn,
      self.optimizer,
      self.sync_freq if self.sync_within_epoch else None,
      axis_name=self.axis_name,
    )
    per_round = self.train_steps // self.evals_per_epoch
    epoch = learner.epoch + 1
    ring = learner.ring
    weights = slices.start_weights(
      ring, self.slice_length, self._padding, False
    )
    cdf = jnp.cumsum(weights)
    state = learner.train
    if self.sync_each_epoch:
      state = state._replace(target_params=state.params)
    train_key, eval_key = jax.random.split(key)

    def one_update(state, key):
      return update(state, self._sample(ring, cdf, key))

    def one_round(state, keys):
      round_keys, round_eval_key = keys
      state, extras = jax.lax.scan(one_update, state, round_keys)
      evals = {}
      if self.eval_steps:
        evals = self._evaluate(state, ring, cdf, round_eval_key)
      return state, (jax.tree.map(jnp.mean, extras.metrics), evals)

    keys = jax.random.split(train_key, self.train_steps).reshape(
      self.evals_per_epoch, per_round, -1
    )
    eval_keys = jax.random.split(eval_key, self.evals_per_epoch)
    state, (metrics, evals) = jax.lax.scan(one_round, state, (keys, eval_keys))
    if not self.sync_within_epoch:  # Trax's end-of-epoch sync.
      target = optax.periodic_update(
        state.params, state.target_params, state.step, self.sync_freq
      )
      state = state._replace(target_params=target)
    record = {f'value/{k}': jnp.mean(v) for k, v in metrics.items()}
    record['value/exploration_rate'] = self.exploration(epoch)
    record.update({f'value_eval/{k}': v[-1] for k, v in evals.items()})
    return learner._replace(train=state, epoch=epoch), record

  def program(self) -> program_lib.Program:
    return program_lib.Program.of(self)
