"""The gymnasium source: `HostEnvs` feeding a program's compiled learner.

Every source produces the same pytree, `rollout.Rollout`, fields
`[T, N, ...]` (time major) per seed, which the family's program observes
and learns from. This one collects with `host_envs.HostEnvs` (one batched
`act` per env step for all seeds and envs, on a CPU copy of what the
policy reads), then runs the program's `observe` + `learn` in one jitted
call, vmapped over seeds (or over processes in a multi-host job).
Collections can run ahead of learning, and beside it in a thread
(`pipeline`: `train_rl.pipeline_depth`, `train_rl.overlap`).
"""

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import checkpoint, compile_options, envs, types
from trax_rl.device import rollout as rollout_lib
from trax_rl.sources import host_envs as hosts
from trax_rl.sources import pipeline as pipeline_lib
from trax_rl.sources import processes, seed_axis


class GymnasiumSource:
  """A program's epochs on gymnasium envs: collect on the host, then learn.

  Each epoch steps `HostEnvs` with the program's training policy (one
  jitted call per step for every seed and env), then runs the program's
  `train` on the rollout in one jitted call, vmapped over the seeds. The
  acting keys are each seed's stream folded with the call's index, the
  learning keys each seed's key split once per epoch; both are part of
  `state_dict`, with the envs' state.

  Args:
    env: a gymnasium id, instance or factory.
    program: the family's program.
    n_envs: envs per seed.
    seeds: the seeds' integer seeds (they seed the env resets).
    keys: one raw key per seed, `[k, 2]` (`[2]` for one seed).
    max_steps: episode-length cap, or None.
    n_steps: steps per env and epoch (epochs counted in env steps); or
    n_episodes: episodes per seed and epoch (epochs counted in episodes).
    rollout_steps: with n_episodes, the T every epoch's rollout is padded
      to (the program's longest; one shape, one compile); None: the next
      power of two of each epoch's length.
    multihost: this process is one of a `jax.distributed` job's: the
      learner is its row of global arrays (`processes`), `train` runs
      vmapped over the processes, and this process's envs, acting keys and
      learning keys are its own (the chief's are a single process's).
  """

  def __init__(
    self,
    env: envs.EnvLike,
    program: Any,
    n_envs: int,
    seeds: Sequence[Any],
    keys: Any,
    max_steps: int | None = None,
    n_steps: int | None = None,
    n_episodes: int | None = None,
    rollout_steps: int | None = None,
    multihost: bool = False,
  ):
    if (n_steps is None) == (n_episodes is None):
      raise ValueError('exactly one of n_steps and n_episodes must be given')
    self._spec = env
    self._program = program
    self._seeds = list(seeds)
    self._n_seeds = len(self._seeds)
    self._placement = None
    index = jax.process_index()
    if multihost:
      if self._n_seeds != 1:
        raise ValueError('train_rl.multihost trains one seed: unbind n_seeds')
      self._placement = processes.sharding()
      if index:  # The chief's streams stay a single process's.
        self._seeds = [[s, index] for s in self._seeds]
        keys = np.asarray(jax.random.fold_in(np.asarray(keys), index))
    self._n_envs = n_envs
    self._max_steps = max_steps
    self._n_steps = n_steps
    self._n_episodes = n_episodes
    self.rollout_steps = rollout_steps
    self._envs = hosts.HostEnvs(env, n_envs, self._seeds, max_steps)
    self._eval_envs = None  # Built on the first evaluation.
    keys = np.asarray(keys)
    self._act_keys = np.asarray(
      jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys.reshape(-1, 2))
    ).reshape(keys.shape)
    self._learn_keys = np.asarray(
      jax.vmap(lambda k: jax.random.fold_in(k, 2))(keys.reshape(-1, 2))
    ).reshape(keys.shape)
    self._n_acts = 0
    self._core = (
      () if program.initial_core is None else self._initial_core(n_envs)
    )
    self._acts: dict[float, Callable] = {}
    self._view = None  # The jitted `acting_view`, built on first use.
    over = functools.partial(seed_axis.over_seeds, n_seeds=self._n_seeds)
    train = over(program.train)
    if multihost:
      train = jax.vmap(program.train, axis_name=processes.AXIS)
    self._train = compile_options.jit(train, donate_argnums=0)
    self._split = compile_options.jit(over(jax.random.split))
    self._pipeline = pipeline_lib.Pipeline(self._collect_with)
    self._nonfinite = 0  # Of the observations learned from so far.
    self.epochs_per_call = 1

  n_seeds = types.read_only('_n_seeds')

  program = types.read_only('_program')

  n_envs = types.read_only('_n_envs')  # Env columns of a rollout (a seed's).

  env_spec = types.read_only('_spec')

  host_envs = types.read_only('_envs')

  @property
  def steps_per_epoch(self) -> int | None:
    """Env steps per epoch and seed, when epochs count steps."""
    return None if self._n_steps is None else self._n_steps * self._n_envs

  def _initial_core(self, n: int) -> Any:
    core = self._program.initial_core(n)
    if self._n_seeds == 1:
      return core
    return jax.tree.map(lambda c: np.stack([c] * self._n_seeds), core)

  def place(self, learner: Any) -> Any:
    """The learner where `train` takes it (its row, across hosts)."""
    if self._placement is not None:
      return processes.to_global(learner, self._placement)
    return seed_axis.place(learner, None)

  def local(self, learner: Any) -> Any:
    """This process's learner, for the host (the learner itself if alone)."""
    if self._placement is not None:
      return processes.local(learner)
    return learner

  def set_epochs_per_call(self, k: int) -> None:
    """Epochs per `run_epochs` call (each still collects, then learns)."""
    self.epochs_per_call = k

  def _act_fn(self, temperature: float) -> Callable:
    """The jitted policy at `temperature`, every seed at once: obs `[k, N,
    ...]` and first `[k, N]` in, action and info `[k, N, ...]` out (the
    seed axis of one seed added and removed inside, not by host calls)."""
    fn = self._acts.get(temperature)
    if fn is not None:
      return fn
    program = self._program

    def one(learner, stream, index, obs, core, first):
      key = jax.random.fold_in(stream, index)
      if program.recurrent:
        return program.act(learner, key, obs, temperature, core, first)
      action, info = program.act(learner, key, obs, temperature)
      return action, info, core

    if self._n_seeds == 1:

      def seeds(learner, stream, index, obs, core, first):
        action, info, core = one(learner, stream, index, obs[0], core, first[0])
        return jax.tree.map(lambda x: x[None], (action, info)) + (core,)

    else:
      seeds = jax.vmap(one, in_axes=(0, 0, None, 0, 0, 0))
    fn = self._acts[temperature] = compile_options.jit(seeds)
    return fn

  def _host_act(self, learner, temperature, streams, counter):
    """A `HostAct` of `learner` at `temperature`; counts its calls.

    Its action and info are the jitted call's arrays, read by the
    collection when it needs them: the call runs while the host records
    the step before.
    """
    fn = self._act_fn(temperature)
    streams = jax.device_put(streams)  # Once, not at every step.

    def act(obs, first, core):
      out = fn(learner, streams, np.uint32(counter[0]), obs, core, first)
      counter[0] += 1
      return out

    return act

  def set_pipeline(self, depth: int, overlap: bool) -> None:
    """Collects `depth` epochs ahead of learning, in a thread if `overlap`
    (`pipeline.Pipeline`)."""
    self._pipeline.configure(depth, overlap)

  def set_epochs_left(self, n: int) -> None:
    """The run's epochs left: the pipeline collects none beyond them."""
    self._pipeline.set_epochs_left(n)

  def _acting_view(self, learner: Any) -> Any:
    """What the policy reads of `learner`, once per collection: a copy,
    which the learning that donates `learner` leaves alone."""
    learner = self.local(learner)
    if self._view is None:
      view = seed_axis.over_seeds(self._program.acting_view, self._n_seeds)
      copied = lambda x: jax.tree.map(jnp.copy, view(x))  # noqa: E731
      self._view = compile_options.jit(copied)
    return self._view(learner)

  def collect(self, learner: Any) -> hosts.Collection:
    """One epoch's rollout with the training policy (temperature 1)."""
    return self._collect_with(self._acting_view(learner))[0]

  def _collect_with(self, view: Any) -> tuple[hosts.Collection, int]:
    """One epoch's rollout with the policy `view`, and the count of
    non-finite observations after it."""
    counter = [self._n_acts]
    streams = self._act_keys
    collection = self._envs.collect(
      self._host_act(view, 1.0, streams, counter),
      self._core,
      n_steps=self._n_steps,
      n_episodes=self._n_episodes,
      pad_to=self.rollout_steps,
    )
    self._n_acts = counter[0]
    self._core = collection.core
    return collection, self._envs.n_nonfinite()

  def example_rollout(self, learner: Any) -> rollout_lib.Rollout:
    """The shapes and dtypes of one epoch's rollout `[T, N, ...]` (one
    seed), for compiling `train` ahead of time."""
    n_steps = (
      self._n_steps
      or self.rollout_steps
      or hosts.pad_steps(
        -(-self._n_episodes // self._n_envs) * (self._max_steps or 1)
      )
    )
    one = seed_axis.row(learner, 0, self._n_seeds)
    space = self._envs.observation_space
    action, info = self._program.act_shapes(one, space, self._n_envs)
    return self._envs.example_rollout(n_steps, action, info)

  def compile(self, learner: Any) -> None:
    """Compiles the epoch's learning for `learner` without running it."""
    rollout = self.example_rollout(learner)
    keys = jax.ShapeDtypeStruct(np.shape(self._learn_keys), np.uint32)
    if self._n_seeds > 1:
      rollout = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct((self._n_seeds, *x.shape), x.dtype),
        rollout,
      )
    self._train.lower(learner, rollout, keys).compile()

  def train(self, learner: Any, rollout: rollout_lib.Rollout):
    """The program's `train` on a rollout `[k, T, N, ...]` (one seed: k=1)."""
    if self._n_seeds == 1:
      rollout = jax.tree.map(lambda x: x[0], rollout)
    keys = np.asarray(self._split(self._learn_keys))
    self._learn_keys, learn_key = keys[..., 0, :], keys[..., 1, :]
    if self._placement is not None:
      rollout, learn_key = processes.to_global(
        (rollout, learn_key), self._placement
      )
      learner, metrics = self._train(learner, rollout, learn_key)
      return learner, processes.local(metrics)
    return self._train(learner, rollout, learn_key)

  def run_epochs(
    self, learner: Any, n: int
  ) -> tuple[Any, list[list[dict[str, float]]]]:
    """n epochs of collect, then learn (through the pipeline); one record
    per epoch and seed."""
    out = []
    for _ in range(n):

      def learn(data, learner=learner):
        start = time.perf_counter()
        learner, metrics = self.train(learner, data[0].rollout)
        metrics = jax.device_get(metrics)
        return learner, metrics, time.perf_counter() - start

      item, (learner, metrics, train_s), lag = self._pipeline.epoch(
        lambda learner=learner: self._acting_view(learner), learn
      )
      collection, self._nonfinite = item.data
      records = []
      for s, record in enumerate(collection.records):
        record = dict(
          record, collect_s=item.collect_s, train_s=train_s, policy_lag=lag
        )
        for name, value in metrics.items():
          value = np.asarray(value)
          record[name] = seed_axis.scalar(
            value if self._n_seeds == 1 else value[s]
          )
        records.append(record)
      out.append(records)
    return learner, out

  def evaluate(
    self,
    learner: Any,
    temperature: float,
    streams: Any,
    index: int,
    n_episodes: int,
    max_steps: int | None,
  ) -> np.ndarray:
    """Returns `[k, n_episodes]` of episodes played on separate eval envs.

    Each seed's eval envs reset from their own generator (seed, 1, index),
    so an evaluation depends on nothing before it (a resumed run evaluates
    as an uninterrupted one), and act with keys from
    `fold_in(fold_in(stream, index), call)`.
    """
    if self._eval_envs is None:
      self._eval_envs = hosts.HostEnvs(
        self._spec, self._n_envs, [[s, 1] for s in self._seeds]
      )
    self._eval_envs.reseed([[s, 1, index] for s in self._seeds])
    self._eval_envs._max_steps = max_steps or self._max_steps
    streams = np.asarray(
      jax.vmap(jax.random.fold_in, in_axes=(0, None))(
        np.asarray(streams).reshape(-1, 2), np.uint32(index)
      )
    ).reshape(np.shape(streams))
    core = (
      ()
      if self._program.initial_core is None
      else self._initial_core(self._n_envs)
    )
    collection = self._eval_envs.collect(
      self._host_act(
        self._acting_view(learner), float(temperature), streams, [0]
      ),
      core,
      n_episodes=n_episodes,
    )
    return np.array([r[:n_episodes] for r in collection.episode_returns])

  def n_nonfinite(self) -> int:
    """Non-finite observations (rows) in the rollouts learned from."""
    return self._nonfinite

  def set_check_finite(self, check: bool) -> None:
    self._envs.set_check_finite(check)

  def state_dict(self) -> dict[str, Any]:
    return {
      'envs': self._envs.state_dict(),
      'act_keys': np.asarray(self._act_keys),
      'learn_keys': np.asarray(self._learn_keys),
      'n_acts': self._n_acts,
      'core': jax.tree.map(np.asarray, jax.device_get(self._core)),
      'pipeline': self._pipeline.state_dict(hosts.collection_state),
      'nonfinite': self._nonfinite,
    }

  def fork(self, epoch: int) -> None:
    """A process of a job that resumed from the chief's state (it had
    none of its own): its envs restart from (seed, process index, epoch)
    and its acting keys fold in the same, so that it collects data of its
    own, as it did before the restart."""
    index = jax.process_index()
    seeds = [s[0] if isinstance(s, list) else s for s in self._seeds]
    self._envs.reseed([[s, index, epoch] for s in seeds])
    self._envs.restart()
    fork = lambda k: jax.random.fold_in(jax.random.fold_in(k, index), epoch)  # noqa: E731
    self._act_keys = np.asarray(fork(self._act_keys))
    self._pipeline.drop_pending()  # The chief's data.

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self._envs.load_state_dict(state['envs'])
    self._act_keys = np.asarray(state['act_keys'])
    self._learn_keys = np.asarray(state['learn_keys'])
    self._n_acts = int(state['n_acts'])
    self._core = checkpoint.unflatten_like(
      self._core, jax.tree.leaves(state['core']), 'recurrent core'
    )
    self._pipeline.load_state_dict(
      state.get('pipeline'), hosts.collection_from_state
    )
    self._nonfinite = int(state.get('nonfinite', 0))

  def close(self) -> None:
    self._pipeline.close()
    self._envs.close()
    if self._eval_envs is not None:
      self._eval_envs.close()
