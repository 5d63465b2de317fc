"""RayCollector: an agent's experience from rollout actors on Ray.

Ray is an optional extra (`pip install -e '.[ray]'`) imported only when a
RayCollector starts. The learner process keeps the train state, the RLTask
store, the replay Table and every checkpoint; actors (`rollout.py`) hold
envs, seeds and a CPU copy of the parameters with its version.

Two modes, chosen by the agent:

- epoch mode (PolicyGradient, ExpertIteration, the actor-critic family):
  an epoch's episodes (or steps) are split into units seeded by (seed,
  epoch, unit) and gathered in unit order, so the data does not depend on
  the number of actors nor on actors dying.
- stream mode (agents with `streams_experience`, e.g. ReplayValueAgent):
  actors play chunks continuously with Ape-X epsilons; each chunk carries
  the parameter version that produced it and is absorbed (adder, Table,
  learning) as it arrives. A chunk is requested only while the agent can
  take it (`can_take`: the Table's rate limiter); an epoch waits for all
  chunks it requested, so a checkpoint never misses one in flight.

A multi-host learner (`train_rl.multihost`) runs one RayCollector per
process, each with its own actors (on its own or a shared Ray cluster):
every process brings its own rows of each batch. Units and actor slots
are numbered over all processes, so their seeds and Ape-X epsilons differ.

Failure model: an actor that dies loses only its in-flight work; it is
replaced (at most `max_restarts` times per slot) and the replacement gets
the latest parameters with its first request. Calls are never retried by
Ray (`max_task_retries=0`): a retried call would act with stale parameters.
"""

import collections
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from trax_rl import validation
from trax_rl.agents import base
from trax_rl.distributed import ray_setup, rollout


class RayRolloutWorker(rollout.RolloutWorker):
  """A RolloutWorker whose parameters arrive as Ray object references."""

  def fetch(self, ref: Any) -> Any:
    import ray  # noqa: PLC0415 (runs only inside a Ray actor)

    return ray.get(ref)


class RayCollector:
  """Collects an agent's experience on Ray rollout actors."""

  def __init__(
    self,
    n_actors: int = 2,
    address: str | None = None,
    chunk_length: int = 64,
    max_in_flight: int = 2,
    publish_every: int = 100,
    apex_epsilon: float = 0.4,
    apex_alpha: float = 7.0,
    max_restarts: int = 3,
    actor_cpus: float = 1.0,
    local_cpus: int | None = None,
    timeout_s: float = 600.0,
  ):
    """Configures the actors.

    Args:
      n_actors: rollout actors.
      address: an existing Ray cluster ('host:port' of its head, or
        'auto'); None starts a local instance on 127.0.0.1 and stops it at
        the end.
      chunk_length: env steps per env in a stream chunk, and in an epoch
        unit of an agent with `n_interactions_per_epoch` (units of an agent
        with `n_trajectories_per_epoch` are `n_envs` episodes).
      max_in_flight: requests outstanding per actor.
      publish_every: stream mode: publish the parameters after this many
        learner updates (epoch mode publishes once per epoch).
      apex_epsilon: stream mode: Ape-X base epsilon; actor i of N acts with
        apex_epsilon ** (1 + apex_alpha * i / (N - 1)).
      apex_alpha: the Ape-X exponent spread.
      max_restarts: replacements allowed per actor slot.
      actor_cpus: CPUs Ray reserves per actor.
      local_cpus: CPUs of a local instance (None: all of the machine's).
      timeout_s: fail if no actor answers for this long.
    """
    for name, value, minimum in (
      ('n_actors', n_actors, 1),
      ('chunk_length', chunk_length, 1),
      ('max_in_flight', max_in_flight, 1),
      ('publish_every', publish_every, 1),
      ('max_restarts', max_restarts, 0),
      ('local_cpus', local_cpus, 1),
    ):
      validation.check_count(name, value, minimum)
    if not 0.0 <= apex_epsilon <= 1.0:
      raise ValueError(f'apex_epsilon must be in [0, 1], got {apex_epsilon}')
    if not (actor_cpus >= 0 and timeout_s > 0):
      raise ValueError(
        f'actor_cpus must be >= 0 and timeout_s > 0, got {actor_cpus}, '
        f'{timeout_s}'
      )
    self._n_actors = n_actors
    self._address = address
    self._chunk_length = chunk_length
    self._max_in_flight = max_in_flight
    self._publish_every = publish_every
    self._apex = (apex_epsilon, apex_alpha)
    self._max_restarts = max_restarts
    self._actor_cpus = actor_cpus
    self._local_cpus = local_cpus
    self._timeout_s = timeout_s
    self._factory = None
    self._ray = None
    self._started_ray = False
    self._actors: list[Any] = []
    self._incarnations: list[int] = []
    self._stream = False
    self._version = -1
    self._params_box: list[Any] = []
    self._metrics: dict[str, float] = {}
    self._last_death = ''
    # Called with the index (in its epoch) of every unit or chunk gathered;
    # tests kill actors from here.
    self.on_work_done: Callable[[int], None] | None = None

  def set_agent_factory(self, factory: rollout.AgentFactory) -> None:
    """How actors build their agent copy (train_rl passes the gin config)."""
    self._factory = factory

  @property
  def restarts(self) -> int:
    """Actors replaced so far."""
    return sum(self._incarnations)

  def actor_pids(self) -> list[int]:
    """Process ids of the live actors, by slot."""
    return self._ray.get([a.pid.remote() for a in self._actors])

  def metrics(self) -> dict[str, float]:
    """This epoch's collection metrics (restarts, chunks, policy lag)."""
    return dict(self._metrics)

  # Starting and stopping.
  def start(self, agent: base.Agent) -> None:
    """Starts the actors for `agent` (the first `collect` does it too).

    Raises:
      ValueError: no agent factory, or an agent that cannot use actors.
    """
    if self._ray is not None:
      return
    if self._factory is None:
      raise ValueError(
        'RayCollector has no agent factory: use it through train_rl '
        '(train_rl.collector = @RayCollector) or call set_agent_factory'
      )
    self._stream = agent.streams_experience
    if self._stream and agent.n_interactions_per_epoch is None:
      raise ValueError(
        f'{type(agent).__name__} streams on rollout actors: set '
        'n_interactions_per_epoch, not n_trajectories_per_epoch'
      )
    agent.rollout_params()  # Fails early for agents that cannot.
    self._started_ray = ray_setup.init_ray(self._address, self._local_cpus)
    self._ray = ray_setup.import_ray(self._address)
    self._remote = self._ray.remote(
      num_cpus=self._actor_cpus, max_restarts=0, max_task_retries=0
    )(RayRolloutWorker)
    self._incarnations = [0] * self._n_actors
    self._actors = [self._spawn(slot) for slot in range(self._n_actors)]

  def _spawn(self, slot: int) -> Any:
    # Across hosts each learner process drives its own actors: their slots
    # (stream seeds, Ape-X epsilons) count over every process's actors.
    n_slots = jax.process_count() * self._n_actors
    global_slot = jax.process_index() * self._n_actors + slot
    epsilon = (
      rollout.apex_epsilon(global_slot, n_slots, *self._apex)
      if self._stream
      else None
    )
    return self._remote.remote(
      self._factory, global_slot, n_slots, epsilon, self._incarnations[slot]
    )

  def _replace(self, slot: int) -> None:
    """Replaces the dead actor of `slot`, within `max_restarts`."""
    self._ray.kill(self._actors[slot], no_restart=True)
    if self._incarnations[slot] >= self._max_restarts:
      raise RuntimeError(
        f'rollout actor {slot} died more than max_restarts='
        f'{self._max_restarts} times; last: {self._last_death}'
      )
    self._incarnations[slot] += 1
    self._actors[slot] = self._spawn(slot)

  def close(self) -> None:
    """Stops the actors, and Ray if this collector started it."""
    if self._ray is None:
      return
    for actor in self._actors:
      self._ray.kill(actor, no_restart=True)
    self._actors = []
    if self._started_ray:
      self._ray.shutdown()
    self._ray = None

  # Collection.
  def _publish(self, agent: base.Agent, version: int) -> None:
    params = jax.device_get(agent.rollout_params())
    self._params_box = [self._ray.put(params)]
    self._version = version

  def _wait(self, refs: list[Any]) -> list[Any]:
    ready, _ = self._ray.wait(refs, num_returns=1, timeout=self._timeout_s)
    if not ready:
      raise TimeoutError(
        f'no rollout actor answered within timeout_s={self._timeout_s}'
      )
    return ready

  def _fetch(self, ref: Any) -> rollout.Work | None:
    """The work of `ref`; None if its actor died."""
    try:
      return self._ray.get(ref)
    except self._ray.exceptions.RayActorError as e:
      self._last_death = str(e).strip().splitlines()[-1][:300]
      return None

  def collect(self, agent: base.Agent) -> float:
    """Collects the agent's current epoch; returns its average return."""
    self.start(agent)
    restarts = self.restarts
    works = (
      self._collect_stream(agent)
      if self._stream
      else self._collect_epoch(agent)
    )
    returns = [r for w in works for r in w.episode_returns]
    self._metrics['ray/restarts'] = float(self.restarts - restarts)
    self._metrics['ray/actors'] = float(self._n_actors)
    if returns:
      return float(np.mean(returns))
    trajectories = [t for w in works for t in w.trajectories]
    if trajectories:
      return float(np.mean([t.total_return for t in trajectories]))
    return 0.0

  def _units(self, agent: base.Agent) -> list[tuple[int | None, int | None]]:
    """(n_episodes, n_steps) of each unit of an epoch."""
    n_envs = agent.task.n_envs
    if agent.n_trajectories_per_epoch is not None:
      total, size = agent.n_trajectories_per_epoch, n_envs
      return [(min(size, total - s), None) for s in range(0, total, size)]
    total, size = agent.n_interactions_per_epoch, self._chunk_length * n_envs
    return [(None, min(size, total - s)) for s in range(0, total, size)]

  def _collect_epoch(self, agent: base.Agent) -> list[rollout.Work]:
    epoch = agent.current_epoch
    self._publish(agent, epoch)
    units = self._units(agent)
    pending = collections.deque(range(len(units)))
    done: dict[int, rollout.Work] = {}
    in_flight: dict[Any, tuple[int, int]] = {}  # ref -> (slot, unit)
    while len(done) < len(units):
      for slot, actor in enumerate(self._actors):
        busy = sum(s == slot for s, _ in in_flight.values())
        for _ in range(min(self._max_in_flight - busy, len(pending))):
          unit = pending.popleft()
          # Each learner process plays units of its own (seeds differ).
          unit_id = jax.process_index() * len(units) + unit
          ref = actor.play_unit.remote(
            self._version, self._params_box, epoch, unit_id, *units[unit]
          )
          in_flight[ref] = (slot, unit)
      for ref in self._wait(list(in_flight)):
        slot, unit = in_flight.pop(ref)
        work = self._fetch(ref)
        if work is None:
          lost = [unit] + [u for r, (s, u) in in_flight.items() if s == slot]
          for r in [r for r, (s, _) in in_flight.items() if s == slot]:
            del in_flight[r]
          pending.extendleft(sorted(lost, reverse=True))
          self._replace(slot)
          continue
        done[unit] = work
        if self.on_work_done is not None:
          self.on_work_done(unit)
    works = [done[u] for u in range(len(units))]
    agent.task.add_trajectories(
      [t for w in works for t in w.trajectories],
      sum(w.n_interactions for w in works),
      epoch,
      [r for w in works for r in w.episode_returns],
    )
    return works

  def _request_chunks(
    self, agent: base.Agent, in_flight: dict[Any, int], issued: int
  ) -> int:
    """Asks actors for chunks while credits last; returns steps issued."""
    per_chunk = self._chunk_length * agent.task.n_envs
    # Across hosts the tables are limited as one, and a table ahead of the
    # others waits for them in `absorb`: one chunk is always welcome there.
    always_one = jax.process_count() > 1
    for slot, actor in enumerate(self._actors):
      busy = sum(s == slot for s in in_flight.values())
      while (
        busy < self._max_in_flight
        and issued < agent.n_interactions_per_epoch
        and (
          agent.can_take((len(in_flight) + 1) * per_chunk)
          or (always_one and not in_flight)
        )
      ):
        ref = actor.play_chunk.remote(
          self._version, self._params_box, per_chunk
        )
        in_flight[ref], busy, issued = slot, busy + 1, issued + per_chunk
    if not in_flight and issued < agent.n_interactions_per_epoch:
      raise ValueError(
        f'{type(agent).__name__} cannot take a chunk of {per_chunk} '
        'steps (its replay rate limiter admits fewer at once): lower '
        'RayCollector.chunk_length or raise n_interactions_per_epoch'
      )
    return issued

  def _absorb(self, agent: base.Agent, work: rollout.Work) -> int:
    """Stores and learns from one chunk; returns its policy lag."""
    lag = agent.n_updates() - work.version
    agent.task.add_trajectories(
      work.trajectories,
      work.n_interactions,
      agent.current_epoch,
      work.episode_returns,
    )
    agent.absorb()
    if agent.n_updates() - self._version >= self._publish_every:
      self._publish(agent, agent.n_updates())
    return lag

  def _collect_stream(self, agent: base.Agent) -> list[rollout.Work]:
    if self._version < 0 or (
      agent.n_updates() - self._version >= self._publish_every
    ):
      self._publish(agent, agent.n_updates())
    per_chunk = self._chunk_length * agent.task.n_envs
    issued, works, lags, lost = 0, [], [], 0
    in_flight: dict[Any, int] = {}  # ref -> slot
    while True:
      issued = self._request_chunks(agent, in_flight, issued)
      if not in_flight:
        break
      for ref in self._wait(list(in_flight)):
        slot = in_flight.pop(ref)
        work = self._fetch(ref)
        if work is None:  # Its in-flight chunks are lost; play them again.
          dead = [r for r, s in in_flight.items() if s == slot]
          for r in dead:
            del in_flight[r]
          lost += 1 + len(dead)
          issued -= (1 + len(dead)) * per_chunk
          self._replace(slot)
          continue
        lags.append(self._absorb(agent, work))
        works.append(work)
        if self.on_work_done is not None:
          self.on_work_done(len(works) - 1)
    self._metrics.update(
      {
        'ray/chunks': float(len(works)),
        'ray/lost_chunks': float(lost),
        'ray/policy_lag': float(np.mean(lags)) if lags else 0.0,
        'ray/policy_lag_max': float(np.max(lags)) if lags else 0.0,
      }
    )
    return works
