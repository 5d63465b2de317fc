"""The Ray source: rollout actors play, the learner observes and learns.

Rollout actors (`ray_actors`) play and never learn; the learner process
feeds their rollouts to the same `train` as the other sources and keeps
the learner, the records and every checkpoint.

- Epoch mode (programs that learn once per epoch: PolicyGradient, the
  actor-critics, Trax's DQN): an epoch is split into units (`n_envs`
  episodes, or `chunk_length` steps per env from fresh resets) seeded by
  (seed, epoch, unit) and gathered in unit order, side by side as one
  rollout of `units * n_envs` envs: the data does not depend on the number
  of actors nor on actors dying.
- Stream mode (programs that learn as experience arrives: the replay
  value learners, R2D2): actors play chunks of `chunk_length` steps per env
  continuously, with Ape-X epsilons; each chunk is observed and learned
  from as it arrives, in its actor's columns of a rollout of
  `n_actors * n_envs` envs (the others not valid), so every actor's
  episodes continue in the program's own per-env state. A chunk is asked
  for only while the program can take it (`Program.can_observe`: the
  replay's rate limiter), and carries the version of the parameters that
  played it (`ray/policy_lag`). An epoch waits for every chunk it asked
  for, so a checkpoint never misses data in flight.

Failure model: an actor that dies loses only its in-flight work; it is
replaced (at most `max_restarts` times per slot) and the replacement gets
the latest parameters with its first request. Ray never retries a call: a
retried call would act with stale parameters.
"""

import collections
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from trax_rl import compile_options, types
from trax_rl.sources import gymnasium as gym_source
from trax_rl.sources import host_envs, ray_actors
from trax_rl.sources import pipeline as pipeline_lib
from trax_rl.sources import ray_chunks as chunks


class RaySource:
  """A program's epochs from rollout actors (see the module docstring).

  Args:
    settings: the `RayCollector` (its knobs: actors, chunks, Ape-X ...).
    agent_factory: builds the agent on each actor.
    program: the learner's program, built for `n_columns` envs.
    local: a one-seed `GymnasiumSource` of the same program: the learning
      keys, the jitted `train` and the evaluations.
    seed: the agent's seed (units' seeds and keys derive from it).
    n_envs: envs per actor (and per unit).
    n_interactions: env steps per epoch, or
    n_episodes: episodes per epoch (epoch mode only).
    stream: stream mode (the program learns from each chunk).
    n_columns: env columns of the learner's rollouts (`program`'s n_envs).
  """

  def __init__(
    self,
    settings: Any,
    agent_factory: ray_actors.AgentFactory,
    program: Any,
    local: gym_source.GymnasiumSource,
    seed: int,
    n_envs: int,
    n_interactions: int | None,
    n_episodes: int | None,
    stream: bool,
    n_columns: int,
  ):
    if stream and n_interactions is None:
      raise ValueError(
        'this agent learns from a stream of rollout chunks: set '
        'n_interactions_per_epoch, not n_trajectories_per_epoch'
      )
    self._settings = settings
    self._program = program
    self._columns = n_columns
    self._local = local
    self._seed = seed
    self._n_envs = n_envs
    self._n_interactions = n_interactions
    self._n_episodes = n_episodes
    self._stream = stream
    self._epoch = 0
    self._gathered = 0  # Epochs of units collected (ahead of _epoch).
    self._returns = collections.deque(maxlen=host_envs.WINDOW)
    self._n_episodes_done = 0
    self._n_steps_done = 0
    self._version = -1
    self._box: list[Any] = []
    self._pool = ray_actors.ActorPool(settings, agent_factory, stream)
    self._view_fn = compile_options.jit(program.acting_view)
    self._can_observe = (
      None
      if program.can_observe is None
      else compile_options.jit(program.can_observe, static_argnums=1)
    )
    self._pipeline = pipeline_lib.Pipeline(self._gather)
    self.epochs_per_call = 1
    # Called with the index (in its epoch) of every unit or chunk gathered;
    # tests kill actors from here.
    self.on_work_done: Callable[[int], None] | None = None

  @property
  def n_seeds(self) -> int:
    return 1

  program = types.read_only('_program')

  @property
  def n_envs(self) -> int:
    """Env columns of the learner's rollouts (every actor's or unit's)."""
    return self._columns

  steps_per_epoch = types.read_only('_n_interactions')

  @property
  def restarts(self) -> int:
    return self._pool.restarts

  def actor_pids(self) -> list[int]:
    return self._pool.pids()

  def place(self, learner: Any) -> Any:
    return self._local.place(learner)

  def set_epochs_per_call(self, k: int) -> None:
    self.epochs_per_call = k

  def set_pipeline(self, depth: int, overlap: bool) -> None:
    """Epoch mode: units played `depth` epochs ahead of learning, beside
    it if `overlap` (`pipeline.Pipeline`, as on the gymnasium source)."""
    if self._stream and (depth or overlap):
      raise ValueError(
        'train_rl.pipeline_depth and train_rl.overlap pipeline epochs of '
        'units; this agent streams chunks, which its actors already play '
        'while the learner learns (RayCollector.max_in_flight): unbind them'
      )
    self._pipeline.configure(depth, overlap)

  def set_epochs_left(self, n: int) -> None:
    self._pipeline.set_epochs_left(n)

  def close(self) -> None:
    self._pipeline.close()
    self._local.close()
    self._pool.close()

  def local(self, learner: Any) -> Any:
    return self._local.local(learner)

  def _publish(self, learner: Any, version: int) -> None:
    view = jax.device_get(self._view_fn(self.local(learner)))
    self._box = [self._pool.put(view)]
    self._version = version

  # Epochs.
  def run_epochs(self, learner: Any, n: int):
    self._pool.start()
    out = []
    for _ in range(n):
      start = time.perf_counter()
      restarts = self.restarts
      if self._stream:
        learner, record = self._stream_epoch(learner)
        record['collect_s'] = time.perf_counter() - start
      else:
        learner, record = self._unit_epoch(learner)
      record['ray/restarts'] = float(self.restarts - restarts)
      record['ray/actors'] = float(self._settings.n_actors)
      self._epoch += 1
      out.append([record])
    return learner, out

  def _units(self) -> list[tuple[int | None, int | None]]:
    """(n_episodes, n_steps per env) of each unit of an epoch."""
    if self._n_episodes is not None:
      total, size = self._n_episodes, self._n_envs
      return [(min(size, total - s), None) for s in range(0, total, size)]
    per_env = self._settings.chunk_length
    total = -(-self._n_interactions // self._n_envs)
    return [(None, min(per_env, total - s)) for s in range(0, total, per_env)]

  def _unit_epoch(self, learner: Any):
    """One epoch of units through the pipeline: learns from the units
    due, while those of the epoch ahead play."""

    def view(learner=learner):
      params = self._view_fn(self.local(learner))
      return self._epoch, jax.device_get(params)

    def learn(data, learner=learner):
      start = time.perf_counter()
      rollout, _ = data
      out = self._local.train(learner, chunks.with_seed_axis(rollout))
      return out, time.perf_counter() - start

    item, ((learner, metrics), train_s), lag = self._pipeline.epoch(view, learn)
    record = dict(item.data[1], collect_s=item.collect_s, train_s=train_s)
    record['policy_lag'] = lag
    record.update(chunks.host_metrics(metrics))
    return learner, record

  def _gather(self, view: tuple[int, Any]) -> tuple[Any, dict[str, Any]]:
    """The units of the next epoch collected, played with `view` (the
    learner's epoch and its policy): their rollout and record."""
    version, params = view
    self._box = [self._pool.put(params)]
    self._version = version
    epoch = self._gathered
    self._gathered += 1
    units = self._units()
    pending = collections.deque(range(len(units)))
    done: dict[int, Any] = {}
    in_flight: dict[Any, tuple[int, int]] = {}  # ref -> (slot, unit)
    limit = self._settings.max_in_flight
    while len(done) < len(units):
      for slot, actor in enumerate(self._pool.actors):
        busy = sum(s == slot for s, _ in in_flight.values())
        for _ in range(min(limit - busy, len(pending))):
          unit = pending.popleft()
          # Each learner process plays units of its own (seeds differ).
          unit_id = jax.process_index() * len(units) + unit
          ref = actor.play_unit.remote(
            self._version, self._box, epoch, unit_id, *units[unit]
          )
          in_flight[ref] = (slot, unit)
      for ref in self._pool.wait(list(in_flight)):
        slot, unit = in_flight.pop(ref)
        work = self._pool.fetch(ref)
        if work is None:
          lost = [unit] + [u for s, u in in_flight.values() if s == slot]
          for r in [r for r, (s, _) in in_flight.items() if s == slot]:
            del in_flight[r]
          pending.extendleft(sorted(lost, reverse=True))
          self._pool.replace(slot)
          continue
        done[unit] = work
        if self.on_work_done is not None:
          self.on_work_done(unit)
    works = [done[u] for u in range(len(units))]
    n_steps = None
    if self._n_episodes is not None:
      longest = max(w[0][0].reward.shape[0] for w in works)
      n_steps = max(
        self._local.rollout_steps or 0, host_envs.pad_steps(longest)
      )
    rollout = host_envs.pad_rollouts([w[0][0] for w in works], n_steps)
    return rollout, self._stats([w[0][1] for w in works], rollout)

  def _stats(self, stats: list[dict[str, Any]], rollouts: Any) -> dict:
    """The epoch's collection record, from its units' or chunks' stats."""
    returns = [r for s in stats for r in s['returns']]
    self._returns.extend(returns)
    self._n_episodes_done += len(returns)
    steps = int(np.sum(rollouts.valid)) if rollouts is not None else 0
    self._n_steps_done += steps
    if returns:
      avg = float(np.mean(returns))
    else:  # As Trax: the mean return of the slices.
      avg = float(np.mean([s['avg_return'] for s in stats])) if stats else 0.0
    return {
      'avg_return': avg,
      'episode_return_mean': (
        float(np.mean(self._returns)) if self._returns else float('nan')
      ),
      'n_episodes': self._n_episodes_done,
      'n_trajectories': self._n_episodes_done,
      'n_interactions': self._n_steps_done,
    }

  def _request(self, learner: Any, in_flight: dict, issued: int) -> int:
    """Asks actors for chunks while credits last; returns steps issued."""
    s = self._settings
    per_chunk = s.chunk_length * self._n_envs
    # Across hosts the tables are limited as one: one chunk is always
    # welcome where none is in flight.
    always_one = jax.process_count() > 1
    for slot, actor in enumerate(self._pool.actors):
      busy = sum(x == slot for x in in_flight.values())
      while (
        busy < s.max_in_flight
        and issued < self._n_interactions
        and (
          self._can_take(learner, (len(in_flight) + 1) * per_chunk)
          or (always_one and not in_flight)
        )
      ):
        ref = actor.play_chunk.remote(self._version, self._box, s.chunk_length)
        in_flight[ref], busy, issued = slot, busy + 1, issued + per_chunk
    if not in_flight and issued < self._n_interactions:
      raise ValueError(
        f'the learner cannot take a chunk of {per_chunk} steps (its replay '
        'rate limiter admits fewer at once): lower RayCollector.chunk_length '
        'or raise n_interactions_per_epoch'
      )
    return issued

  def _can_take(self, learner: Any, n_steps: int) -> bool:
    if self._can_observe is None:
      return True
    return bool(self._can_observe(self.local(learner), n_steps))

  def _stream_epoch(self, learner: Any):
    s = self._settings
    n_updates = chunks.update_count(self.local(learner))
    if self._version < 0 or n_updates - self._version >= s.publish_every:
      self._publish(learner, n_updates)
    per_chunk = s.chunk_length * self._n_envs
    issued, lags, lost, stats, metrics = 0, [], 0, [], []
    steps = 0
    in_flight: dict[Any, int] = {}  # ref -> slot
    while True:
      issued = self._request(learner, in_flight, issued)
      if not in_flight:
        break
      for ref in self._pool.wait(list(in_flight)):
        slot = in_flight.pop(ref)
        work = self._pool.fetch(ref)
        if work is None:  # Its in-flight chunks are lost; play them again.
          dead = [r for r, x in in_flight.items() if x == slot]
          for r in dead:
            del in_flight[r]
          lost += 1 + len(dead)
          issued -= (1 + len(dead)) * per_chunk
          self._pool.replace(slot)
          continue
        (rollout, chunk_stats), version = work
        rollout = chunks.in_columns(rollout, slot, self._settings.n_actors)
        lags.append(n_updates - version)  # The learner's count before it.
        learner, m = self._local.train(learner, chunks.with_seed_axis(rollout))
        metrics.append(m)
        stats.append(chunk_stats)
        steps += int(np.sum(rollout.valid))
        n_updates = chunks.update_count(self.local(learner))
        if n_updates - self._version >= s.publish_every:
          self._publish(learner, n_updates)
        if self.on_work_done is not None:
          self.on_work_done(len(stats) - 1)
    record = self._stats(stats, None)
    self._n_steps_done += steps
    record['n_interactions'] = self._n_steps_done
    record.update(chunks.combine([chunks.host_metrics(m) for m in metrics]))
    record.update(
      {
        'ray/chunks': float(len(stats)),
        'ray/lost_chunks': float(lost),
        'ray/policy_lag': float(np.mean(lags)) if lags else 0.0,
        'ray/policy_lag_max': float(np.max(lags)) if lags else 0.0,
      }
    )
    return learner, record

  def evaluate(self, learner, temperature, streams, index, n_episodes, steps):
    return self._local.evaluate(
      learner, temperature, streams, index, n_episodes, steps
    )

  def state_dict(self) -> dict[str, Any]:
    return {
      'local': self._local.state_dict(),
      'epoch': self._epoch,
      'returns': list(self._returns),
      'n_episodes': self._n_episodes_done,
      'n_interactions': self._n_steps_done,
      'pipeline': self._pipeline.state_dict(chunks.encode_units),
    }

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self._local.load_state_dict(state['local'])
    self._epoch = int(state['epoch'])
    self._returns.clear()
    self._returns.extend(float(r) for r in state['returns'])
    self._n_episodes_done = int(state['n_episodes'])
    self._n_steps_done = int(state['n_interactions'])
    self._pipeline.load_state_dict(state.get('pipeline'), chunks.decode_units)
    self._gathered = self._epoch + self._pipeline.n_pending
