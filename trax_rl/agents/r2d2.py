"""R2D2: a recurrent, prioritized, sequence-replay value agent.

Kapturowski et al., 2019, "Recurrent Experience Replay in Distributed
Reinforcement Learning", after Acme's JAX R2D2 (its defaults are ours). One
process plays the roles of Acme's actors and learner; the algorithm is
`algorithms.r2d2.SequenceProgram`, the same on every source: an LSTM
policy whose core state is recorded per step, segments of
`burn_in + trace_length + 1` steps every `sequence_period` steps into a
prioritized table whose rate limiter holds the samples-per-insert ratio,
and `R2D2Loss`'s updates with their priorities written back. Env i
explores with its own epsilon (`policies.apex_epsilons`).
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import numpy as np

from trax_rl import policies, types, validation
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl.agents import replay_value
from trax_rl.algorithms import r2d2 as r2d2_lib
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import base as networks_base
from trax_rl.networks import recurrent


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
        num_sgd_steps_per_step) and `ProgramAgent`
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
    if kwargs.get('n_interactions_per_epoch') is None:
      raise ValueError(
        'R2D2 cuts segments from epochs of env steps: set '
        'n_interactions_per_epoch instead of n_trajectories_per_epoch'
      )
    validation.check_count('trace_length', trace_length, 1)
    validation.check_count('sequence_period', sequence_period, 1)
    self._sequence_length = loss_fn.burn_in_length + trace_length + 1
    self._sequence_period = sequence_period
    self._epsilon_range = (float(epsilon_min), float(epsilon_max))
    self._evaluation_epsilon = float(evaluation_epsilon)
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

  # The replay agent's hooks.
  def _make_network(self, module: nn.Module) -> networks_base.RecurrentNetwork:
    return recurrent.make_recurrent_network(
      module, self._task.example_observation()
    )

  def _insert_rows(self, n_steps: int, n_envs: int) -> int:
    # Segments go in a chunk at a time (`SequenceProgram.observe`).
    return n_envs * (n_steps // self._sequence_period + 1)

  def _insert_chunk_size(self) -> int:
    return 1  # Segment by segment, as the rate limiter allows.

  def _example_item(self) -> types.Segment:
    return self._sequence_program(self._task.n_envs).example_item()

  def act_as_rollout_actor(
    self, slot: int, n_slots: int, epsilon: float
  ) -> None:
    """R2D2 spreads its own epsilon range over all actors' envs."""
    del epsilon
    self._actor_slot = (slot, n_slots)
    self._program = None

  def _sequence_program(self, n_envs: int, prioritized: bool = True):
    epsilons = self.epsilons(n_envs, 1.0)
    return r2d2_lib.SequenceProgram(
      network=self._network,
      loss_fn=self._loss_fn,
      optimizer=self._optimizer,
      table=getattr(self, '_table', None),
      exploration=lambda env_steps: np.float32(np.mean(epsilons)),
      n_step=1,
      batch_size=self._batch_size,
      num_sgd_steps_per_step=self._num_sgd,
      target_update_period=self._target_update_period,
      prioritized=prioritized,
      value_eval_steps=self._value_eval_steps,
      **self._program_context(n_envs),
      sequence_length=self._sequence_length,
      sequence_period=self._sequence_period,
      max_rollout_steps=self.max_rollout_steps(),
      epsilons=tuple(float(e) for e in epsilons),
      evaluation_epsilon=self._evaluation_epsilon,
    )

  def make_program(self, n_envs: int):
    return self._sequence_program(n_envs, self._prioritized).program()

  @property
  def network(self) -> networks_base.RecurrentNetwork:
    return self._network

  def epsilons(self, n_envs: int, temperature: float = 1.0) -> np.ndarray:
    """Per-env exploration rates `[n_envs]` of the training policy."""
    low, high = self._epsilon_range
    alpha = 0.0
    if low < high:  # Then 0 < high < 1: log(high) < 0.
      alpha = np.log(max(low, 1e-8)) / np.log(high) - 1.0
    slot, n_slots = self._actor_slot
    # On rollout actors the rates spread over the envs of all actors.
    spread = policies.apex_epsilons(n_envs * n_slots, high, alpha)
    spread = spread[slot * n_envs : (slot + 1) * n_envs]
    return (np.float32(temperature) * spread).astype(np.float32)

  def policy(
    self, trajectory: trajectory_lib.Trajectory, temperature: float = 1.0
  ) -> tuple[Any, dict[str, Any]]:
    """Trax's single-trajectory form: replays the trajectory's memory.

    The core state is rebuilt by unrolling the network over all of the
    trajectory's observations from the zero state.
    """
    obs = np.stack(trajectory.observations)[:, None]  # [T + 1, 1, ...]
    params = self.learner.train.params
    out, _ = self._network.unroll(params, obs, self._network.initial_state(1))
    q_values = out.q_values[-1]  # [1, A]
    key = jax.random.fold_in(jax.random.PRNGKey(self._seed), 6)
    epsilon = max(
      float(temperature) * float(self.epsilons(1)[0]), self._evaluation_epsilon
    )
    action = policies.epsilon_greedy(q_values, key, epsilon)
    return np.asarray(action)[0], {'q_values': np.asarray(q_values)[0]}
