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
- On a JAX env id (`gymnax:...`) all of it runs as one compiled epoch
  (`device.sequence_epoch`): the same loss, update and segments.

Validation, table setup, the insert/learn loop, priorities and checkpoints
are those of `replay_value.ReplayValueAgent`, the replay-agent base; R2D2
brings the recurrent network, the sequence adder and the acting policy.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import collection, compile_options, policies, types, validation
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl.agents import replay_value
from trax_rl.device import sequence_epoch
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import base as networks_base
from trax_rl.networks import recurrent
from trax_rl.replay import sequence_adder


class R2D2(replay_value.ReplayValueAgent):
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
    target_update_period: int = 2500,
    samples_per_insert: float = 4.0,
    samples_per_insert_tolerance_rate: float = 0.1,
    min_replay_size: int = 50_000,
    max_replay_size: int = 100_000,
    priority_exponent: float = 0.9,
    epsilon_min: float = 0.001,
    epsilon_max: float = 0.1,
    evaluation_epsilon: float = 0.0,
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
      target_update_period: updates between target-network syncs.
      samples_per_insert: segments sampled per segment inserted (the table's
        rate limiter keeps this ratio once min_replay_size is reached).
      samples_per_insert_tolerance_rate: allowed relative deviation of the
        ratio, as Acme's (the window holds at least one batch and one insert).
      min_replay_size: segments in the table before updates start.
      max_replay_size: table capacity in segments (FIFO removal).
      priority_exponent: alpha of prioritized sampling.
      epsilon_min: smallest per-env exploration rate.
      epsilon_max: largest per-env exploration rate; env i of n explores
        with Ape-X's `epsilon_max ** (1 + alpha i / (n - 1))`, alpha chosen
        so that the last env gets epsilon_min (`policies.apex_epsilons`).
      evaluation_epsilon: the least exploration rate of evaluation policies
        (Acme's evaluation_epsilon); 0 keeps temperature-0 evaluation greedy.
      **kwargs: for `ReplayValueAgent` (optimizer, max_gradient_norm,
        n_devices, num_sgd_steps_per_step) and `Agent`
        (n_interactions_per_epoch, output_dir, seed ...).

    Raises:
      ValueError: naming a bad argument or a non-discrete action space.
    """
    if not 0 <= epsilon_min <= epsilon_max <= 1:
      raise ValueError(
        'need 0 <= epsilon_min <= epsilon_max <= 1, got '
        f'{epsilon_min} and {epsilon_max}'
      )
    if epsilon_max == 1 and epsilon_min < 1:
      raise ValueError(
        'epsilon_max must be < 1 when epsilon_min < epsilon_max: Ape-X rates '
        f'are powers of epsilon_max, got {epsilon_max}'
      )
    loss_fn = r2d2_losses.R2D2Loss() if loss_fn is None else loss_fn
    if not isinstance(loss_fn, r2d2_losses.R2D2Loss):
      raise ValueError(f'R2D2 needs an R2D2Loss, got {loss_fn!r}')
    validation.check_count('trace_length', trace_length, 1)
    validation.check_count('sequence_period', sequence_period, 1)
    self._burn_in = loss_fn.burn_in_length
    self._trace_length = trace_length
    self._sequence_period = sequence_period
    self._epsilon_range = (float(epsilon_min), float(epsilon_max))
    self._evaluation_epsilon = float(evaluation_epsilon)
    self._core_states = {False: None, True: None}
    self._actor_slot = (0, 1)  # (slot, n_slots) on a rollout actor.
    super().__init__(
      task,
      model_fn=model_fn,
      loss_fn=loss_fn,
      batch_size=batch_size,
      n_step=1,  # Segments, not transitions: the loss has bootstrap_n.
      min_replay_size=min_replay_size,
      max_replay_size=max_replay_size,
      samples_per_insert=samples_per_insert,
      samples_per_insert_tolerance_rate=samples_per_insert_tolerance_rate,
      priority_exponent=priority_exponent,
      target_update_period=target_update_period,
      epsilon=float(epsilon_max),  # Per-env rates: see `epsilons`.
      learning_rate=learning_rate,
      **kwargs,
    )
    self._unroll = compile_options.jit(self._network.unroll)

  # The replay agent's hooks.
  def _make_network(self, module: nn.Module) -> networks_base.RecurrentNetwork:
    return recurrent.make_recurrent_network(
      module, self._task.example_observation()
    )

  # The device path (a JAX env id): `sequence_epoch.SequenceEpoch`.
  _device_epoch_class = sequence_epoch.SequenceEpoch
  _device_rows_per_step = sequence_epoch.SLOTS

  def _device_epoch_args(self) -> dict[str, Any]:
    epsilons = self.epsilons(self._task.n_envs, 1.0, evaluation=False)
    mean = float(np.mean(epsilons))
    return dict(
      exploration=lambda env_steps: jnp.float32(mean),  # The record's.
      sequence_length=self._adder.sequence_length,
      sequence_period=self._sequence_period,
      epsilons=tuple(float(e) for e in epsilons),
      evaluation_epsilon=self._evaluation_epsilon,
    )

  def _make_adder(self) -> sequence_adder.SequenceAdder:
    return sequence_adder.SequenceAdder(
      self._burn_in,
      self._trace_length,
      self._sequence_period,
      self._task.gamma,
      core_state_fn=self._core_state,
    )

  def _core_state(self, info: dict[str, np.ndarray]) -> recurrent.LSTMState:
    """A segment's stored core state; zeros for a slice recorded without."""
    if info:
      return recurrent.state_from_info(info)
    return jax.tree.map(
      lambda x: np.asarray(x)[0], self._network.initial_state(1)
    )

  def _new_items(self, trajectories) -> types.Segment | None:
    segments = self._adder.add_trajectories(trajectories)
    return sequence_adder.stack(segments) if segments else None

  def _insert_chunk_size(self) -> int:
    return 1  # Segment by segment, as the rate limiter allows.

  def _example_batch(self, n: int) -> types.Batch:
    segment = sequence_adder.zero_segment(
      self._task.example_observation(),
      np.zeros((), np.int32),
      self._adder.sequence_length,
      self._core_state({}),
    )
    return types.Batch(
      sequence_adder.stack([segment] * n), np.ones(n, np.float32)
    )

  @property
  def network(self) -> networks_base.RecurrentNetwork:
    return self._network

  # Acting.
  def _select_action(self, params, key, index, obs, state, first, epsilon):
    state = recurrent.reset_where(first, state)
    out, new_state = self._network.apply(params, obs, state)
    key = policies.key_for_step(key, index)
    action = policies.epsilon_greedy(out.q_values, key, epsilon)
    return action, state, new_state

  def epsilons(self, n_envs: int, temperature: float, evaluation: bool):
    """Per-env exploration rates `[n_envs]` at `temperature`."""
    low, high = self._epsilon_range
    alpha = 0.0
    if low < high:  # Then 0 < high < 1: log(high) < 0.
      alpha = np.log(max(low, 1e-8)) / np.log(high) - 1.0
    slot, n_slots = self._actor_slot
    # On rollout actors the rates spread over the envs of all actors.
    spread = policies.apex_epsilons(n_envs * n_slots, high, alpha)
    spread = spread[slot * n_envs : (slot + 1) * n_envs]
    floor = self._evaluation_epsilon if evaluation else 0.0
    return np.maximum(np.float32(temperature) * spread, floor).astype(
      np.float32
    )

  def _acting_policy(
    self, temperature: float, evaluation: bool
  ) -> collection.BatchPolicy:
    """Epsilon-greedy with memory; `evaluation` keeps its own core states.

    The info of each step holds the core state before it (`core_hidden`,
    `core_cell`), for the sequence adder.
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
      return np.asarray(action), recurrent.state_to_info(before)

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

  # Rollout actors (`trax_rl.distributed`).
  def act_as_rollout_actor(
    self, slot: int, n_slots: int, epsilon: float
  ) -> None:
    del epsilon  # R2D2 spreads its own epsilon range over all actors' envs.
    self._actor_slot = (slot, n_slots)

  def can_take(self, n_steps: int) -> bool:
    """Whether the table admits a segment now.

    Segments go in one at a time between updates, so a chunk of any length
    goes in once one segment can.
    """
    del n_steps
    return self._table.can_insert(1)

  def load_state_dict(self, state: dict[str, Any]) -> None:
    super().load_state_dict(state)
    self._core_states = {False: None, True: None}
