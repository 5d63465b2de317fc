"""One compiled epoch on the device: collect with `rollout`, then train.

An agent that supports the device path gives a `DeviceProgram`:

  policy(learner, key, observation[N, ...]) -> (action[N, ...], info)
  train(learner, steps: rollout.Rollout, key) -> (learner, metrics)
  greedy: optional, as `policy` at temperature 0 (for `device.evaluate`,
    and the agents' per-epoch evaluation at temperature 0)
  initial_core: optional `n -> core` of a recurrent policy (leaves
    `[n, ...]`); then `policy` and `greedy` take and return the core as
    `device.rollout` describes, and the env carry holds it between epochs

where `learner` is the agent's learner state (train states, ...), a pytree.

`train` is the agent's own pure update code (the same loss and optimizer
as its gymnasium path), fed from the rollout instead of from RLTask.
`DeviceRunner` jits `epoch = rollout + train` once and keeps the whole
state on the device between epochs. One host call runs one epoch, or with
`epochs_per_call = k` up to k epochs in one compiled loop (one transfer of
their records); the Agent keeps its lifecycle (evals, metrics, checkpoints)
between calls. With `n_seeds = k` the
epoch is vmapped over a leading seed axis of the learner and env state.
The runner's `state_dict` holds the env state and keys as numpy, so a
checkpoint resumes episodes in flight exactly.
"""

import concurrent.futures
import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import checkpoint, compile_options, jax_envs, validation
from trax_rl.device import evaluate as evaluate_lib
from trax_rl.device import rollout

# Builds runners' first states off the main thread (`DeviceRunner`).
_BACKGROUND = concurrent.futures.ThreadPoolExecutor(1, 'trax_rl_device')


@dataclasses.dataclass(frozen=True)
class DeviceProgram:
  """What an agent gives the device path (see the module docstring)."""

  policy: Callable[..., tuple]
  train: Callable[[Any, rollout.Rollout, jax.Array], tuple[Any, dict]]
  greedy: Callable[..., tuple] | None = None
  initial_core: Callable[[int], Any] | None = None


class DeviceState(NamedTuple):
  """The device path's whole state (a pytree; a leading seed axis if k>1)."""

  learner: Any
  env: rollout.EnvCarry
  key: Any  # raw PRNG key for the training half of each epoch


def epoch_fn(
  env: jax_envs.JaxEnv,
  program: DeviceProgram,
  n_steps: int,
  max_steps: int | None,
  state: DeviceState,
) -> tuple[DeviceState, dict[str, Any]]:
  """One epoch: `n_steps` steps of every env, then the agent's training."""
  policy = program.policy
  carry, steps = rollout.rollout(
    env, policy, state.learner, state.env, n_steps, max_steps
  )
  key, train_key = jax.random.split(state.key)
  learner, metrics = program.train(state.learner, steps, train_key)
  record = dict(rollout.summary(steps, carry), **metrics)
  return DeviceState(learner, carry, key), record


class DeviceRunner:
  """Runs an agent's compiled epochs; jitted once, when built.

  Args:
    env: the JaxEnv.
    program: the agent's DeviceProgram.
    learner: the initial learner state (a leading seed axis if n_seeds > 1).
    n_envs: envs stepped in lockstep (per seed).
    n_steps: steps per env and epoch.
    max_steps: episode-length cap, or None.
    key: raw PRNG key of the env stream and the training keys; `[k, 2]`,
      one per seed, when n_seeds = k > 1.
    n_seeds: independent seeds vmapped in one program.
  """

  def __init__(
    self,
    env: jax_envs.JaxEnv,
    program: DeviceProgram,
    learner: Any,
    n_envs: int,
    n_steps: int,
    max_steps: int | None,
    key: jax.Array,
    n_seeds: int = 1,
  ):
    self._n_seeds = n_seeds
    self._steps_per_epoch = n_envs * n_steps * n_seeds
    epoch = functools.partial(epoch_fn, env, program, n_steps, max_steps)
    init = functools.partial(
      rollout.init_carry,
      env,
      n_envs=n_envs,
      initial_core=program.initial_core,
    )
    split = jax.random.split
    if n_seeds > 1:  # One key per seed: [k, 2].
      epoch, init, split = jax.vmap(epoch), jax.vmap(init), jax.vmap(split)

    def first(key):
      keys = split(key)
      return init(keys[..., 0, :]), keys[..., 1, :]

    self._one_epoch = epoch
    self._env = env
    self._program = program
    self._evaluations: dict[tuple[int, int | None], Callable] = {}
    self.compile_s = None  # Seconds the first compile took.
    self._sharding = seed_sharding(n_seeds)
    self._use_epochs_per_call(1)
    # The epoch compiles against the first state's shapes, and the first
    # state (one jitted reset, ~0.5 s of XLA compile cold) is built in the
    # background meanwhile: a seed batch traces its epoch program while it
    # compiles (C51, 3 seeds: ~0.3 s sooner to the first call). A single
    # agent's `run` sets the learner first, which waits for it; not
    # waiting there measured no gain (the trace and the compile's own
    # Python share the GIL). `_state` waits for it.
    carry, train_key = jax.eval_shape(first, key)
    self._first_shapes = self._abstract(DeviceState(learner, carry, train_key))
    first = compile_options.jit(first)  # With this thread's options.
    self._state_job = _BACKGROUND.submit(
      lambda: self._place(DeviceState(learner, *first(key)))
    )
    self.n_interactions = 0

  @property
  def _state(self) -> DeviceState:
    if self._state_job is not None:
      self._state_value = self._state_job.result()
      self._state_job = None
    return self._state_value

  @_state.setter
  def _state(self, state: DeviceState) -> None:
    if self._state_job is not None:
      self._state_job.result()  # Its errors are not lost.
      self._state_job = None
    self._state_value = state

  def _abstract(self, state: DeviceState) -> DeviceState:
    """The state's shapes and dtypes, placed as `_place` places it."""

    def spec(x):
      return jax.ShapeDtypeStruct(
        np.shape(x),
        x.dtype,
        sharding=self._sharding,
        weak_type=getattr(x, 'weak_type', False),
      )

    return jax.tree.map(spec, state)

  def _place(self, state: DeviceState) -> DeviceState:
    """The state on the runner's devices, in buffers only the runner holds.

    Each call donates its state (`_use_epochs_per_call`), so a buffer
    shared with the caller (an agent's learner) would be deleted under it.
    """
    return jax.device_put(state, self._sharding, may_alias=False)

  @property
  def learner(self) -> Any:
    """The learner state after the last call; the next call donates it."""
    return self._state.learner

  @property
  def n_seeds(self) -> int:
    return self._n_seeds

  @property
  def can_evaluate(self) -> bool:
    """Whether the program has a greedy policy for `evaluate`."""
    return self._program.greedy is not None

  def evaluate(
    self,
    stream: jax.Array,
    index: int,
    n_episodes: int,
    max_steps: int | None,
  ) -> np.ndarray:
    """Greedy episode returns of the current learner, played on the device.

    One compiled call (`device.evaluate`) per seed batch: `[n_episodes]`,
    or `[k, n_episodes]` for k seeds. Each seed's episodes start from
    `fold_in(stream, index)` (`stream`: a raw key, `[k, 2]` for k seeds),
    so an agent's evaluation key stream and its checkpointed counter say
    which episodes it plays. Compiled once per (n_episodes, max_steps).
    """
    program = self._evaluations.get((n_episodes, max_steps))
    if program is None:

      def one(learner, stream, index):
        return evaluate_lib.evaluate(
          self._env,
          self._program.greedy,
          learner,
          jax.random.fold_in(stream, index),
          n_episodes,
          max_steps,
          self._program.initial_core,
        )

      if self._n_seeds > 1:
        one = jax.vmap(one, in_axes=(0, 0, None))
      program = compile_options.jit(one)
      self._evaluations[(n_episodes, max_steps)] = program
    stream = jax.device_put(np.asarray(stream), self._sharding)
    returns = program(self._state.learner, stream, np.uint32(index))
    return np.asarray(jax.device_get(returns))

  def set_epochs_per_call(self, k: int) -> None:
    """Lets one compiled call run up to k epochs (`run_epochs`).

    The epochs run in a loop with a run-time trip count, so any count up
    to k reuses one compiled program.
    """
    validation.check_count('epochs_per_call', k, 1)
    if k != self.epochs_per_call:
      self._use_epochs_per_call(k)

  def _use_epochs_per_call(self, k: int) -> None:
    self.epochs_per_call = k
    epochs = _looped(self._one_epoch, k)
    if self._sharding is not None:
      # The next call is compiled for a state split along the seed axis;
      # without the constraint XLA may return a leaf replicated (a seed
      # batch's n-step tails did), which the compiled call then refuses.
      epochs = _constrained(epochs, self._sharding)
    # The state is donated: a call updates the replay and train states in
    # place instead of copying them first (and holding both in memory).
    self._epochs = compile_options.jit(epochs, donate_argnums=0)
    self._compiled = None

  def compile(self) -> float:
    """Compiles the epoch without running it; returns the seconds taken."""
    start = time.perf_counter()
    # While the first state is still being built, its shapes stand in.
    pending = self._state_job is not None
    state = self._first_shapes if pending else self._state
    self._compiled = self._epochs.lower(state, 1).compile()
    self.compile_s = time.perf_counter() - start
    return self.compile_s

  def run_epochs(self, n: int) -> list[list[dict[str, float]]]:
    """Runs n <= epochs_per_call epochs in one call.

    Returns one list per epoch of one record per seed (host floats); each
    record's `epoch_s` is the call's wall time over n. The first call
    compiles (ahead of time; `compile_s` says how long).
    """
    if not 1 <= n <= self.epochs_per_call:
      raise ValueError(f'n must be in [1, {self.epochs_per_call}], got {n}')
    if self._compiled is None:
      self.compile()
    start = time.perf_counter()
    self._state, record = self._compiled(self._state, n)
    record = jax.device_get(record)  # One transfer; waits for the epochs.
    wall = time.perf_counter() - start
    out = []
    for epoch in range(n):
      self.n_interactions += self._steps_per_epoch
      common = {
        'n_interactions': self.n_interactions // self._n_seeds,
        'env_steps_per_s': n * self._steps_per_epoch / max(wall, 1e-9),
        'epoch_s': wall / n,
      }
      records = []
      for seed in range(self._n_seeds):
        index = (epoch,) if self._n_seeds == 1 else (epoch, seed)
        one = {k: _scalar(v[index]) for k, v in record.items()}
        records.append(dict(common, **one))
      out.append(records)
    return out

  def state_dict(self) -> dict[str, Any]:
    """Env state (episodes in flight), keys and counters, as numpy."""
    leaves = jax.tree.leaves((self._state.env, self._state.key))
    return {
      'leaves': [np.asarray(x) for x in leaves],
      'n_interactions': self.n_interactions,
    }

  def load_state_dict(self, state: dict[str, Any], learner: Any) -> None:
    """Restores `state_dict` output and sets the learner state."""
    env, key = checkpoint.unflatten_like(
      (self._state.env, self._state.key), state['leaves'], 'device state'
    )
    self._state = self._place(DeviceState(learner, env, key))
    self.n_interactions = int(state['n_interactions'])

  def set_learner(self, learner: Any) -> None:
    """Replaces the learner state (recompiling if its structure changed)."""
    if jax.tree.structure(learner) != jax.tree.structure(self._state.learner):
      self._compiled = None
    self._state = self._place(self._state._replace(learner=learner))

  @property
  def sharding(self) -> jax.sharding.Sharding | None:
    """How the seed axis is split over devices (None: default device)."""
    return self._sharding


def _looped(epoch: Callable, k: int) -> Callable:
  """`(state, n) -> (state, records [k, ...])`: n <= k epochs in a loop.

  Records past n stay zero. The trip count is a run-time value, so a short
  last call reuses the same compiled program. With k = 1 it is the epoch
  itself, with no loop around it.
  """
  if k == 1:

    def once(state, n):
      del n  # Always 1.
      state, record = epoch(state)
      return state, jax.tree.map(lambda x: x[None], record)

    return once

  # Jitted so that the trace `eval_shape` makes is the one the loop body
  # reuses (one trace of the epoch, not two: seconds of a cold start).
  # Only ever traced inside the runner's program, whose options it gets.
  epoch = jax.jit(epoch)

  def run(state, n):
    _, shapes = jax.eval_shape(epoch, state)
    buffers = jax.tree.map(lambda x: jnp.zeros((k, *x.shape), x.dtype), shapes)

    def body(i, carry):
      state, buffers = carry
      state, record = epoch(state)
      buffers = jax.tree.map(lambda b, x: b.at[i].set(x), buffers, record)
      return state, buffers

    return jax.lax.fori_loop(0, n, body, (state, buffers))

  return run


def _constrained(epochs: Callable, sharding: jax.sharding.Sharding):
  """`epochs` whose returned state keeps `sharding` on every leaf."""

  def run(state, n):
    state, records = epochs(state, n)
    return jax.lax.with_sharding_constraint(state, sharding), records

  return run


def seed_sharding(n_seeds: int) -> jax.sharding.Sharding | None:
  """Splits the seed axis over the local devices when they divide it.

  One seed, or a seed count the devices do not divide, runs on the default
  device.
  """
  devices = jax.local_devices()
  if n_seeds == 1 or len(devices) == 1 or n_seeds % len(devices):
    return None
  mesh = jax.sharding.Mesh(np.array(devices), ('seed',))
  return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('seed'))


def _scalar(x: Any) -> float | int:
  x = np.asarray(x)
  return int(x) if np.issubdtype(x.dtype, np.integer) else float(x)


def require_step_epochs(
  task: Any, n_trajectories_per_epoch: int | None, n_interactions: int | None
) -> None:
  """Raises ValueError if epochs count trajectories on the device path.

  Fixed-length device rollouts cannot end an epoch after n episodes.
  """
  if n_interactions is None:
    raise ValueError(
      f'the device path (env {task.jax_env.name!r}) collects fixed-length '
      'rollouts: set n_interactions_per_epoch instead of '
      f'n_trajectories_per_epoch={n_trajectories_per_epoch}'
    )


def make_runner(
  task: Any,
  program: DeviceProgram,
  learner: Any,
  n_trajectories_per_epoch: int | None,
  n_interactions_per_epoch: int | None,
  seed: int | Sequence[int],
) -> DeviceRunner:
  """A DeviceRunner for an agent on `task` (an RLTask with a `jax_env`).

  Each epoch steps every env `ceil(n_interactions_per_epoch / n_envs)`
  times. The keys derive from `seed` alone (not from the agent's key), so
  a run resumed from a checkpoint builds the same runner, and seed s in a
  batch of seeds (`seed` a sequence: one vmapped program) gets the keys
  it gets alone.

  Raises:
    ValueError: the agent counts epochs in trajectories, which the device
      path's fixed-length rollouts cannot.
  """
  require_step_epochs(task, n_trajectories_per_epoch, n_interactions_per_epoch)
  n_steps = -(-n_interactions_per_epoch // task.n_envs)
  seeds = [seed] if isinstance(seed, int) else list(seed)
  keys = [jax.random.fold_in(jax.random.PRNGKey(s), 3) for s in seeds]
  n_seeds = len(seeds)
  key = keys[0] if isinstance(seed, int) else jnp.stack(keys)
  return DeviceRunner(
    task.jax_env,
    program,
    learner,
    task.n_envs,
    n_steps,
    task.max_steps,
    key,
    n_seeds,
  )


def runner_for(agent: Any) -> DeviceRunner | None:
  """The DeviceRunner of `agent`, or None if it trains on the host path.

  The host path is taken when the task's env is a gymnasium env, or when
  the agent has no `device_program` (it then steps the JAX env from the
  host).

  Raises:
    ValueError: the agent cannot run on the device path as configured.
  """
  if agent.task.jax_env is None:
    return None
  program = agent.device_program()
  if program is None:
    return None
  return make_runner(
    agent.task,
    program,
    agent.device_learner(),
    agent.n_trajectories_per_epoch,
    agent.n_interactions_per_epoch,
    agent.seed,
  )
