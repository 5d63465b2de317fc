"""R2D2: a recurrent, prioritized, sequence-replay value agent.

Kapturowski et al., 2019, "Recurrent Experience Replay in Distributed
Reinforcement Learning", after Acme's JAX R2D2 (its defaults are ours). One
process plays the roles of Acme's actors and learner:

- Acting: one jitted call per vector-env step computes Q values and the next
  LSTM state of all envs; each env's state is zeroed where its episode
  starts and the state before the step is recorded in the agent info. Env i
  explores with its own epsilon (`policies.apex_epsilons`).
- Replay: the `SequenceAdder` cuts the epoch's trajectory slices into
  overlapping segments that go into a prioritized `Table` whose rate limiter
  holds the samples-per-insert ratio; inserts and updates alternate.
- Learning: a `Trainer` on `R2D2Loss`; the new priorities go back to the
  table. `n_devices` makes the update data-parallel over local devices.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import numpy as np
import optax

from trax_rl import envs, policies, sequence_adder, types, validation
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl.agents import base
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import base as networks_base
from trax_rl.networks import recurrent
from trax_rl.replay import table as table_lib
from trax_rl.supervised import trainer as trainer_lib
from trax_rl.supervised import update

_INITIAL_PRIORITY = 1.0  # Acme's adders insert at priority 1.


class R2D2(base.Agent):
  """Recurrent Replay Distributed DQN on one machine (Kapturowski 2019)."""

  def __init__(
    self,
    task: task_lib.RLTask,
    model_fn: Callable[..., nn.Module] = recurrent.RecurrentQuality,
    loss_fn: r2d2_losses.R2D2Loss | None = None,
    trace_length: int = 80,
    sequence_period: int = 40,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    max_gradient_norm: float | None = None,
    target_update_period: int = 2500,
    samples_per_insert: float = 4.0,
    samples_per_insert_tolerance_rate: float = 0.1,
    min_replay_size: int = 50_000,
    max_replay_size: int = 100_000,
    priority_exponent: float = 0.9,
    epsilon_min: float = 0.001,
    epsilon_max: float = 0.1,
    evaluation_epsilon: float = 0.0,
    n_devices: int | None = None,
    **kwargs,
  ):
    """Configures the agent (defaults: Acme's `R2D2Config`).

    Args:
      task: the RLTask; its gamma is the discount (Acme's 0.997).
      model_fn: builds the network as `model_fn(n_actions=...)`, e.g.
        `RecurrentQuality` with its torso bound in gin.
      loss_fn: the loss, e.g. `@R2D2Loss()` with its knobs bound in gin
        (None: `R2D2Loss()`); its `burn_in_length` also sets the segments'
        burn-in.
      trace_length: steps per segment after the burn-in; the loss learns on
        them.
      sequence_period: a segment starts every this many steps.
      batch_size: segments per update.
      learning_rate: the optimizer's learning rate.
      optimizer: optax factory called as `optimizer(learning_rate=...)`.
      max_gradient_norm: clip gradients to this global norm (None: off).
      target_update_period: updates between target-network syncs.
      samples_per_insert: segments sampled per segment inserted (the table's
        rate limiter keeps this ratio once min_replay_size is reached).
      samples_per_insert_tolerance_rate: allowed relative deviation of the
        ratio, as Acme's (the buffer is at least one batch plus one insert).
      min_replay_size: segments in the table before updates start.
      max_replay_size: table capacity in segments (FIFO removal).
      priority_exponent: alpha of prioritized sampling.
      epsilon_min: smallest per-env exploration rate.
      epsilon_max: largest per-env exploration rate; env i of n explores
        with the i-th of n rates spaced log-uniformly between the two.
      evaluation_epsilon: the least exploration rate of evaluation policies
        (Acme's evaluation_epsilon); 0 keeps temperature-0 evaluation greedy.
      n_devices: learner devices (`Trainer`): None or 1, k, or -1 for all.
      **kwargs: for `Agent` (n_interactions_per_epoch, output_dir, seed ...).

    Raises:
      ValueError: naming a bad argument or a non-discrete action space.
    """
    n_actions = envs.require_discrete(task.action_space, 'R2D2')
    for name, value, low in (
      ('batch_size', batch_size, 1),
      ('min_replay_size', min_replay_size, 1),
      ('max_replay_size', max_replay_size, 1),
      ('target_update_period', target_update_period, 1),
    ):
      validation.check_count(name, value, low)
    if min_replay_size > max_replay_size:
      raise ValueError(
        f'min_replay_size ({min_replay_size}) must be <= max_replay_size '
        f'({max_replay_size})'
      )
    if not samples_per_insert > 0:
      raise ValueError(
        f'samples_per_insert must be > 0, got {samples_per_insert}'
      )
    if not 0 <= epsilon_min <= epsilon_max <= 1:
      raise ValueError(
        'need 0 <= epsilon_min <= epsilon_max <= 1, got '
        f'{epsilon_min} and {epsilon_max}'
      )
    loss_fn = r2d2_losses.R2D2Loss() if loss_fn is None else loss_fn
    if not isinstance(loss_fn, r2d2_losses.R2D2Loss):
      raise ValueError(f'R2D2 needs an R2D2Loss, got {loss_fn!r}')
    super().__init__(task, **kwargs)
    self._adder = sequence_adder.SequenceAdder(
      loss_fn.burn_in_length,
      trace_length,
      sequence_period,
      task.gamma,
      core_state_fn=recurrent.state_from_info,
    )
    self._batch_size = batch_size
    self._epsilon_range = (float(epsilon_min), float(epsilon_max))
    self._evaluation_epsilon = float(evaluation_epsilon)
    module = model_fn(n_actions=n_actions)
    self._network = recurrent.make_recurrent_network(
      module, task.example_observation()
    )
    self._loss = loss_fn
    self._trainer = trainer_lib.Trainer(
      self._network,
      self._loss,
      update.make_optimizer(learning_rate, optimizer, max_gradient_norm),
      seed=self.next_key(),
      target_update_period=target_update_period,
      name='r2d2',
      n_devices=n_devices,
    )
    tolerance = samples_per_insert_tolerance_rate * samples_per_insert
    self._table = table_lib.Table(
      max_replay_size,
      table_lib.Prioritized(priority_exponent),
      min_size_to_sample=min_replay_size,
      samples_per_insert=samples_per_insert,
      # Whole batches are sampled at once: the limiter's window must hold
      # one batch and one insert, or neither could ever proceed.
      error_buffer=max(
        tolerance * min_replay_size, batch_size + samples_per_insert
      ),
      seed=int(self._rng.integers(2**31 - 1)),
    )
    self._select = jax.jit(self._select_action)
    self._unroll = jax.jit(self._network.unroll)
    self._core_states = {False: None, True: None}
    self._actor_slot = (0, 1)  # (slot, n_slots) on a rollout actor.
    # Stream mode absorbs an epoch's trajectories as they arrive.
    self._n_absorbed = 0
    self._epoch_sums: dict[str, Any] = {}
    self._epoch_counts = [0, 0]  # updates, segments

  @property
  def network(self) -> networks_base.RecurrentNetwork:
    return self._network

  @property
  def loss(self) -> r2d2_losses.R2D2Loss:
    return self._loss

  @property
  def trainer(self) -> trainer_lib.Trainer:
    return self._trainer

  @property
  def replay(self) -> table_lib.Table:
    return self._table

  @property
  def adder(self) -> sequence_adder.SequenceAdder:
    return self._adder

  # Acting.
  def _select_action(self, params, key, index, obs, state, first, epsilon):
    state = recurrent.reset_where(first, state)
    out, new_state = self._network.apply(params, obs, state)
    key = policies.key_for_step(key, index)
    action = policies.epsilon_greedy(out.q_values, key, epsilon)
    return action, state, new_state

  def epsilons(self, n_envs: int, temperature: float, evaluation: bool):
    """Per-env exploration rates `[n_envs]` at `temperature`."""
    slot, n_slots = self._actor_slot
    # On rollout actors the rates spread over the envs of all actors.
    spread = policies.apex_epsilons(n_envs * n_slots, *self._epsilon_range)
    spread = spread[slot * n_envs : (slot + 1) * n_envs]
    floor = self._evaluation_epsilon if evaluation else 0.0
    return np.maximum(np.float32(temperature) * spread, floor).astype(
      np.float32
    )

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> task_lib.BatchPolicy:
    """Epsilon-greedy with memory; `evaluation` keeps its own core states.

    The info of each step holds the core state before it (`core_hidden`,
    `core_cell`), `first` and the env index `env`, for the sequence adder.
    """
    evaluation = bool(evaluation)
    cache = {}

    def policy(obs, first):
      n = len(obs)
      if n not in cache:
        cache[n] = self.epsilons(n, temperature, evaluation)
      state = self._core_states[evaluation]
      first = np.asarray(first, bool)
      if state is None or state.hidden.shape[0] != n:
        state = self._network.initial_state(n)
      key, index = self.acting_key(evaluation)
      action, before, after = self._select(
        self._trainer.params,
        key,
        index,
        np.asarray(obs),
        state,
        first,
        cache[n],
      )
      self._core_states[evaluation] = after
      info = recurrent.state_to_info(before)
      info[sequence_adder.FIRST_KEY] = first
      info[sequence_adder.ENV_KEY] = np.arange(n, dtype=np.int32)
      return np.asarray(action), info

    return policy

  def policy(
    self, trajectory: trajectory_lib.Trajectory, temperature: float = 1.0
  ) -> tuple[Any, dict[str, Any]]:
    """Trax's single-trajectory form: replays the trajectory's memory.

    The core state is rebuilt by unrolling the network over all of the
    trajectory's observations from the zero state.
    """
    obs = np.stack(trajectory.observations)[:, None]  # [T + 1, 1, ...]
    params = self._trainer.params
    out, _ = self._unroll(params, obs, self._network.initial_state(1))
    q_values = out.q_values[-1]  # [1, A]
    key, index = self.acting_key(evaluation=True)
    key = policies.key_for_step(key, index)
    epsilon = self.epsilons(1, temperature, evaluation=True)
    action = policies.epsilon_greedy(q_values, key, epsilon)
    return np.asarray(action)[0], {'q_values': np.asarray(q_values)[0]}

  # Learning.
  def _example_batch(self) -> types.Batch:
    example_state = jax.tree.map(
      lambda x: np.asarray(x)[0], self._network.initial_state(1)
    )
    segment = sequence_adder.zero_segment(
      self._task.example_observation(),
      np.zeros((), np.int64),
      self._adder.sequence_length,
      example_state,
    )
    data = sequence_adder.stack([segment] * self._batch_size)
    return types.Batch(data, np.ones(self._batch_size, np.float32))

  def compile_update(self) -> None:
    self._trainer.compile(self._example_batch())

  def _learn(self, sums: dict[str, Any]) -> None:
    sample = self._table.sample(self._batch_size)
    batch = types.Batch(sample.data, sample.probability.astype(np.float32))
    extra = self._trainer.train_step(batch)
    self._table.mutate_priorities(sample.keys, np.asarray(extra.priorities))
    for k, v in extra.metrics.items():
      sums[k] = sums[k] + v if k in sums else v

  # Rollout actors (`trax_rl.distributed`): stream mode.
  streams_experience = True

  def rollout_params(self) -> Any:
    return self._trainer.params

  def load_rollout_params(self, params: Any) -> None:
    self._trainer.state = self._trainer.state._replace(params=params)

  def n_updates(self) -> int:
    return self._trainer.step

  def act_as_rollout_actor(
    self, slot: int, n_slots: int, epsilon: float
  ) -> None:
    del epsilon  # R2D2 spreads its own epsilon range over all actors' envs.
    self._actor_slot = (slot, n_slots)

  def can_take(self, n_steps: int) -> bool:
    """Whether the table admits a segment now.

    `absorb` inserts segments one at a time between updates, so a chunk of
    any length goes in once one segment can.
    """
    del n_steps
    return self._table.can_insert(1)

  def absorb(self) -> None:
    """Inserts segments of this epoch's new trajectories, learning as allowed."""
    trajectories = self._task.trajectories.get(self._epoch, [])
    new = trajectories[self._n_absorbed :]
    self._n_absorbed = len(trajectories)
    segments = self._adder.add_trajectories(new)
    n_updates = self._insert_and_learn(segments, self._epoch_sums)
    self._epoch_counts[0] += n_updates
    self._epoch_counts[1] += len(segments)

  def train_epoch(self) -> dict[str, float]:
    """Cuts this epoch's slices into segments; inserts them and learns.

    Inserts and updates alternate as the table's rate limiter allows, so
    each segment is sampled about `samples_per_insert` times.
    """
    self.absorb()
    sums, (n_updates, n_segments) = self._epoch_sums, self._epoch_counts
    self._n_absorbed, self._epoch_sums, self._epoch_counts = 0, {}, [0, 0]
    metrics = {
      f'r2d2/{k}': float(v) / max(n_updates, 1) for k, v in sums.items()
    }
    metrics.update(
      {
        'r2d2/n_updates': n_updates,
        'r2d2/n_segments': n_segments,
        'r2d2/replay_size': self._table.size,
        'r2d2/step': self._trainer.step,
      }
    )
    return metrics

  def _insert_and_learn(self, segments, sums: dict[str, Any]) -> int:
    """Inserts segments and learns as the rate limiter allows; # updates."""
    n_updates, i = 0, 0
    while True:
      while i < len(segments) and self._table.can_insert(1):
        self._table.insert(segments[i], _INITIAL_PRIORITY)
        i += 1
      learned = False
      while self._table.can_sample(self._batch_size):
        self._learn(sums)
        n_updates += 1
        learned = True
      if i == len(segments):
        break
      if not learned and not self._table.can_insert(1):
        raise RuntimeError('R2D2 replay rate limiter blocks both ways')
    return n_updates

  # Checkpoints.
  def state_dict(self) -> dict[str, Any]:
    return {
      'trainer': self._trainer.state_dict(),
      'replay': self._table.state_dict(),
      'adder': self._adder.state_dict(),
    }

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self._trainer.load_state_dict(state['trainer'])
    self._table.load_state_dict(state['replay'])
    self._adder.load_state_dict(state['adder'])
    self._core_states = {False: None, True: None}
