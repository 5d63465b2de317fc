"""The work of one rollout actor, free of Ray: play units and chunks.

A `RolloutWorker` builds its own copy of the agent (from the same config as
the learner), its own envs and a CPU copy of the parameters with their
version. It never trains. `RayCollector` runs one per Ray actor; tests and
the local process can run it directly.
"""

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from trax_rl import collection, policies
from trax_rl import trajectory as trajectory_lib
from trax_rl.agents import base
from trax_rl.replay import adders

AgentFactory = Callable[[], base.Agent]


@dataclasses.dataclass
class Work:
  """What a worker returns for one unit (epoch mode) or chunk (stream)."""

  trajectories: list[trajectory_lib.Trajectory]
  episode_returns: list[float]
  n_interactions: int
  version: int  # Parameter version that acted.
  slot: int


def apex_epsilon(slot: int, n_slots: int, base_epsilon: float, alpha: float):
  """Ape-X's epsilon of actor `slot` of `n_slots` (Horgan et al., 2018).

  base_epsilon ** (1 + alpha * slot / (n_slots - 1)): log-uniform from
  base_epsilon down to base_epsilon ** (1 + alpha); one actor gets
  base_epsilon.
  """
  return float(policies.apex_epsilons(n_slots, base_epsilon, alpha)[slot])


def unit_key(seed: int, epoch: int, unit: int) -> jax.Array:
  """The acting key of unit `unit` of epoch `epoch`."""
  key = jax.random.fold_in(jax.random.PRNGKey(seed), 7)
  return jax.random.fold_in(jax.random.fold_in(key, epoch), unit)


class RolloutWorker:
  """One actor's agent copy, envs and parameters; plays on request."""

  def __init__(
    self,
    agent_factory: AgentFactory,
    slot: int,
    n_slots: int = 1,
    epsilon: float | None = None,
    incarnation: int = 0,
  ):
    """Builds the agent copy and its envs.

    Args:
      agent_factory: builds the same agent as the learner's (no output_dir).
      slot: this actor's index; stream ids and stream seeds derive from it.
      n_slots: the number of actors.
      epsilon: stream mode: this actor's Ape-X exploration rate (see
        `Agent.act_as_rollout_actor`); None (epoch mode) keeps the agent's.
      incarnation: how many actors held this slot before (reseeds streams).
    """
    self._agent = agent_factory()
    if epsilon is not None:
      self._agent.act_as_rollout_actor(slot, n_slots, epsilon)
    self._slot = slot
    self._task = self._agent.task
    self._collector = collection.Collector(self._task.env)
    self._policy = self._agent.make_policy(1.0, evaluation=False)
    self._version = -1
    seed = self._agent.seed
    self._stream_rng = np.random.default_rng([seed, 3, slot, incarnation])
    stream_key = jax.random.fold_in(jax.random.PRNGKey(seed), 8)
    self._agent.reseed_acting(
      jax.random.fold_in(jax.random.fold_in(stream_key, slot), incarnation)
    )

  def pid(self) -> int:
    """The process id (tests kill actors by it)."""
    return os.getpid()

  def fetch(self, ref: Any) -> Any:
    """Resolves a published parameter reference (identity without Ray)."""
    return ref

  def _sync(self, version: int, params_box: list[Any]) -> None:
    # The box keeps Ray from resolving the reference on every call.
    if version != self._version:
      self._agent.load_rollout_params(self.fetch(params_box[0]))
      self._version = version
      # A policy acts with the parameters it was built with.
      self._policy = self._agent.make_policy(1.0, evaluation=False)

  def play_unit(
    self,
    version: int,
    params_box: list[Any],
    epoch: int,
    unit: int,
    n_episodes: int | None,
    n_steps: int | None,
  ) -> Work:
    """Plays one epoch unit from fresh envs seeded by (seed, epoch, unit).

    Args:
      version: the parameters' version; loaded only when it changes.
      params_box: `[params]` or `[reference to params]`.
      epoch: the learner's epoch.
      unit: the unit's index in the epoch.
      n_episodes: play this many whole episodes, or
      n_steps: this many env steps (all envs together).

    Returns:
      The unit's trajectories, which do not depend on which actor played.
    """
    self._sync(version, params_box)
    seed = self._agent.seed
    self._agent.reseed_acting(unit_key(seed, epoch, unit))
    result = self._collector.collect(
      self._policy,
      np.random.default_rng([seed, epoch, unit]),
      n_episodes,
      n_steps,
      self._task.max_steps,
      continue_episodes=False,
    )
    return self._work(result, version)

  def _work(self, result: collection.CollectResult, version: int) -> Work:
    return Work(
      result.trajectories,
      result.episode_returns,
      result.n_interactions,
      version,
      self._slot,
    )

  def play_chunk(
    self, version: int, params_box: list[Any], n_steps: int
  ) -> Work:
    """Plays `n_steps` more env steps; episodes run on across chunks.

    Stream ids (for the learner's adder) are offset by slot, so that the
    envs of different actors never share one.
    """
    self._sync(version, params_box)
    result = self._collector.collect(
      self._policy,
      self._stream_rng,
      None,
      n_steps,
      self._task.max_steps,
      continue_episodes=True,
    )
    offset = self._slot * self._task.n_envs
    for traj in result.trajectories:
      for info in traj.agent_infos:
        if adders.STREAM in info:
          info[adders.STREAM] = info[adders.STREAM] + offset
    return self._work(result, version)
