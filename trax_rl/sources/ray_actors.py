"""Rollout actors and the pool that keeps them alive (`sources.ray`).

An `Actor` holds its own envs (a one-seed `host_envs.HostEnvs`), the
program, and a CPU copy of what its policy reads (`Program.acting_view`)
with its version; it never learns. `ActorPool` starts them as Ray actors,
waits on their work and replaces the ones that die.
"""

import os
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from trax_rl import compile_options, policies
from trax_rl.distributed import ray_setup
from trax_rl.sources import host_envs

# () -> the agent the learner trains (built from the run's gin config).
AgentFactory = Callable[[], Any]


def apex_epsilon(slot: int, n_slots: int, base: float, alpha: float) -> float:
  """Ape-X's epsilon of actor `slot` of `n_slots` (Horgan et al., 2018)."""
  return float(policies.apex_epsilons(n_slots, base, alpha)[slot])


def unit_seed(seed: int, epoch: int, unit: int) -> list[int]:
  """The env seed of unit `unit` of epoch `epoch`."""
  return [seed, epoch, unit]


def unit_key(seed: int, epoch: int, unit: int) -> np.ndarray:
  """The acting key stream of unit `unit` of epoch `epoch`."""
  key = jax.random.fold_in(jax.random.PRNGKey(seed), 7)
  return np.asarray(jax.random.fold_in(jax.random.fold_in(key, epoch), unit))


class Actor:
  """One actor's program, envs and parameters; plays on request.

  Args:
    agent_factory: builds the learner's agent (no output_dir).
    slot: this actor's index (its stream seed and epsilon derive from it).
    n_slots: the number of actors.
    epsilon: stream mode: this actor's Ape-X rate; None keeps the agent's.
    incarnation: how many actors held this slot before (reseeds streams).
  """

  def __init__(
    self,
    agent_factory: AgentFactory,
    slot: int,
    n_slots: int = 1,
    epsilon: float | None = None,
    incarnation: int = 0,
  ):
    agent = agent_factory()
    if epsilon is not None:
      agent.act_as_rollout_actor(slot, n_slots, epsilon)
    self._program = agent.program
    task = agent.task
    self._env, self._n_envs = task.env_spec, task.n_envs
    self._max_steps = task.max_steps
    self._seed = agent.seed
    self._slot = slot
    self._view = None
    self._version = -1
    self._stream = host_envs.HostEnvs(
      self._env,
      self._n_envs,
      [[task.seed, 3, slot, incarnation]],
      self._max_steps,
    )
    key = jax.random.fold_in(jax.random.PRNGKey(self._seed), 8)
    self._stream_key = np.asarray(
      jax.random.fold_in(jax.random.fold_in(key, slot), incarnation)
    )
    self._stream_calls = 0
    self._core = self._initial_core()
    program = self._program

    def act(view, stream, index, obs, core, first):
      key = jax.random.fold_in(stream, index)
      if program.recurrent:
        return program.act(view, key, obs, 1.0, core, first)
      action, info = program.act(view, key, obs, 1.0)
      return action, info, core

    cpu = jax.local_devices(backend='cpu')[0]
    self._act = compile_options.jit(act, device=cpu)

  def _initial_core(self) -> Any:
    if self._program.initial_core is None:
      return ()
    return self._program.initial_core(self._n_envs)

  def pid(self) -> int:
    return os.getpid()

  def fetch(self, ref: Any) -> Any:
    """Resolves a published parameter reference (identity without Ray)."""
    return ref

  def _sync(self, version: int, box: list[Any]) -> None:
    # The box keeps Ray from resolving the reference on every call.
    if version != self._version:
      self._view = self.fetch(box[0])
      self._version = version

  def _host_act(self, stream: np.ndarray, counter: list[int]):
    def act(obs, first, core):
      action, info, core = self._act(
        self._view, stream, np.uint32(counter[0]), obs[0], core, first[0]
      )
      counter[0] += 1
      action, info = jax.device_get((action, info))
      return jax.tree.map(lambda x: np.asarray(x)[None], (action, info)) + (
        core,
      )

    return act

  def play_unit(
    self,
    version: int,
    box: list[Any],
    epoch: int,
    unit: int,
    n_episodes: int | None,
    n_steps: int | None,
  ) -> tuple[Any, dict[str, Any], int]:
    """Plays one unit from fresh envs seeded by (seed, epoch, unit).

    Returns:
      (its Rollout `[T, N, ...]`, its collection stats, the version).
    """
    self._sync(version, box)
    envs = host_envs.HostEnvs(
      self._env,
      self._n_envs,
      [unit_seed(self._seed, epoch, unit)],
      self._max_steps,
    )
    try:
      collection = envs.collect(
        self._host_act(unit_key(self._seed, epoch, unit), [0]),
        self._initial_core(),
        n_steps=n_steps,
        n_episodes=n_episodes,
      )
    finally:
      envs.close()
    return _first_seed(collection), version

  def play_chunk(
    self, version: int, box: list[Any], n_steps: int
  ) -> tuple[Any, dict[str, Any], int]:
    """Plays `n_steps` more steps per env; episodes run on across chunks."""
    self._sync(version, box)
    counter = [self._stream_calls]
    collection = self._stream.collect(
      self._host_act(self._stream_key, counter), self._core, n_steps=n_steps
    )
    self._stream_calls = counter[0]
    self._core = collection.core
    return _first_seed(collection), version


def _first_seed(collection: host_envs.Collection):
  """A one-seed collection's rollout `[T, N]` and stats."""
  rollout = jax.tree.map(lambda x: x[0], collection.rollout)
  stats = dict(collection.records[0], returns=collection.episode_returns[0])
  return rollout, stats


class RayActor(Actor):
  """An Actor whose parameters arrive as Ray object references."""

  def fetch(self, ref: Any) -> Any:
    import ray  # noqa: PLC0415 (runs only inside a Ray actor)

    return ray.get(ref)


class ActorPool:
  """`settings.n_actors` Ray actors, replaced when they die.

  Args:
    settings: the `RayCollector` (actors, cpus, restarts, timeout ...).
    agent_factory: builds the agent on each actor.
    stream: whether actors play streams (they get Ape-X epsilons).
  """

  def __init__(self, settings: Any, agent_factory: AgentFactory, stream: bool):
    self._settings = settings
    self._factory = agent_factory
    self._stream = stream
    self.ray = None
    self._started_ray = False
    self.actors: list[Any] = []
    self._incarnations: list[int] = []
    self._last_death = ''

  @property
  def restarts(self) -> int:
    return sum(self._incarnations)

  def start(self) -> None:
    if self.ray is not None:
      return
    s = self._settings
    self._started_ray = ray_setup.init_ray(s.address, s.local_cpus)
    self.ray = ray_setup.import_ray(s.address)
    self._remote = self.ray.remote(
      num_cpus=s.actor_cpus, max_restarts=0, max_task_retries=0
    )(RayActor)
    self._incarnations = [0] * s.n_actors
    self.actors = [self._spawn(slot) for slot in range(s.n_actors)]

  def _spawn(self, slot: int) -> Any:
    # Across hosts each learner process drives its own actors: their slots
    # (stream seeds, Ape-X epsilons) count over every process's actors.
    s = self._settings
    n_slots = jax.process_count() * s.n_actors
    global_slot = jax.process_index() * s.n_actors + slot
    epsilon = (
      apex_epsilon(global_slot, n_slots, s.apex_epsilon, s.apex_alpha)
      if self._stream
      else None
    )
    return self._remote.remote(
      self._factory, global_slot, n_slots, epsilon, self._incarnations[slot]
    )

  def replace(self, slot: int) -> None:
    """Kills actor `slot` and starts its replacement."""
    self.ray.kill(self.actors[slot], no_restart=True)
    if self._incarnations[slot] >= self._settings.max_restarts:
      raise RuntimeError(
        f'rollout actor {slot} died more than max_restarts='
        f'{self._settings.max_restarts} times; last: {self._last_death}'
      )
    self._incarnations[slot] += 1
    self.actors[slot] = self._spawn(slot)

  def pids(self) -> list[int]:
    return self.ray.get([a.pid.remote() for a in self.actors])

  def put(self, value: Any) -> Any:
    return self.ray.put(value)

  def wait(self, refs: list[Any]) -> list[Any]:
    """The refs of `refs` that are ready (at least one, or a timeout)."""
    timeout = self._settings.timeout_s
    ready, _ = self.ray.wait(refs, num_returns=1, timeout=timeout)
    if not ready:
      raise TimeoutError(
        f'no rollout actor answered within timeout_s={timeout}'
      )
    return ready

  def fetch(self, ref: Any) -> Any:
    """The work of `ref`; None if its actor died."""
    try:
      return self.ray.get(ref)
    except self.ray.exceptions.RayActorError as e:
      self._last_death = str(e).strip().splitlines()[-1][:300]
      return None

  def close(self) -> None:
    if self.ray is None:
      return
    for actor in self.actors:
      self.ray.kill(actor, no_restart=True)
    self.actors = []
    if self._started_ray:
      self.ray.shutdown()
    self.ray = None
