"""The device source: a JAX env stepped inside the compiled epoch.

One epoch is `learn ∘ observe ∘ rollout` in one XLA program: `rollout`
steps the vmapped env `T` times in a `lax.scan` with the program's policy
inside (episodes reset on the device), and the program observes and learns
from the steps without them leaving the device. With `epochs_per_call = k`
one call runs up to k epochs in a loop (one transfer of their records).
The learner and the source's state (the envs in flight and the keys) are
donated to each call, so the replay is updated in place.

The source's state is a pytree (`rollout.EnvCarry` and a key); its
`state_dict` holds it as numpy, so a checkpoint resumes the episodes in
flight exactly. With k seeds every leaf has a leading seed axis, split
over the local devices when they divide k (`seed_axis`).
"""

import functools
import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import checkpoint, compile_options, jax_envs, types, validation
from trax_rl.algorithms import program as program_lib
from trax_rl.device import evaluate as evaluate_lib
from trax_rl.device import rollout as rollout_lib
from trax_rl.sources import seed_axis

PROGRESS_S = 0.25  # Seconds of epochs between progress reports in a call.


class CarryState(NamedTuple):
  """What the source carries between epochs (a leading seed axis if k>1)."""

  env: rollout_lib.EnvCarry
  key: Any  # raw key of the learning half of each epoch


def _epoch(
  env: jax_envs.JaxEnv,
  program: program_lib.Program,
  n_steps: int,
  max_steps: int | None,
  learner: Any,
  state: CarryState,
) -> tuple[Any, CarryState, dict[str, Any]]:
  """One epoch: `n_steps` steps of every env, then observe and learn."""
  carry, steps = rollout_lib.rollout(
    env, program.policy(1.0), learner, state.env, n_steps, max_steps
  )
  key, learn_key = jax.random.split(state.key)
  learner, metrics = program.train(learner, steps, learn_key)
  record = dict(rollout_lib.summary(steps, carry), **metrics)
  return learner, CarryState(carry, key), record


def _looped(
  epoch: Callable, k: int, report: Callable | None = None
) -> Callable:
  """`(learner, state, n) -> (learner, state, records [k, ...])`.

  n <= k epochs in a loop whose trip count is a run-time value, so a short
  last call reuses the program; records past n stay zero. With k = 1 it is
  the epoch itself. `report(i, x)`, if given, is called on the host as
  epoch i of the loop ends, for every `stride`-th epoch (a run-time value;
  x: one of the epoch's values, so that it waits for it).
  """
  if k == 1:

    def once(learner, state, n, stride):
      del n, stride  # Always 1; the runner reports the call's epoch.
      learner, state, record = epoch(learner, state)
      return learner, state, jax.tree.map(lambda x: x[None], record)

    return once
  # Jitted so that `eval_shape`'s trace is the one the loop body reuses.
  epoch = jax.jit(epoch)

  def run(learner, state, n, stride):
    _, _, shapes = jax.eval_shape(epoch, learner, state)
    buffers = jax.tree.map(lambda x: jnp.zeros((k, *x.shape), x.dtype), shapes)

    def body(i, carry):
      learner, state, buffers = carry
      learner, state, record = epoch(learner, state)
      buffers = jax.tree.map(lambda b, x: b.at[i].set(x), buffers, record)
      if report is not None:
        jax.lax.cond(
          (i + 1) % stride == 0,
          lambda x: jax.debug.callback(report, i, x),
          lambda x: None,
          jax.tree.leaves(record)[0],
        )
      return learner, state, buffers

    return jax.lax.fori_loop(0, n, body, (learner, state, buffers))

  return run


class DeviceSource:
  """Compiled epochs of a program on a JAX env (see the module docstring).

  Args:
    env: the JaxEnv.
    program: the family's program.
    n_envs: envs stepped in lockstep, per seed.
    n_steps: steps per env and epoch (T).
    max_steps: episode-length cap, or None.
    keys: one raw key per seed, `[k, 2]` (`[2]` for one seed): the env
      stream and the learning keys derive from it.
  """

  def __init__(
    self,
    env: jax_envs.JaxEnv,
    program: program_lib.Program,
    n_envs: int,
    n_steps: int,
    max_steps: int | None,
    keys: Any,
  ):
    keys = np.asarray(keys)
    self._n_seeds = 1 if keys.ndim == 1 else keys.shape[0]
    self._env = env
    self._program = program
    self._n_envs = n_envs
    self._steps_per_epoch = n_envs * n_steps
    self._sharding = seed_axis.sharding(self._n_seeds)
    self._one_epoch = functools.partial(
      _epoch, env, program, n_steps, max_steps
    )

    def first(key):
      env_key, learn_key = jax.random.split(key)
      carry = rollout_lib.init_carry(
        env, env_key, n_envs, initial_core=program.initial_core
      )
      return CarryState(carry, learn_key)

    first = seed_axis.over_seeds(first, self._n_seeds)
    self._state = seed_axis.place(
      compile_options.jit(first)(keys), self._sharding
    )
    self._evaluations: dict[tuple, Callable] = {}
    self._progress: Callable[[int], None] | None = None
    self._stride = 1  # Epochs between progress reports inside a call.
    self.epochs_per_call = 0
    self.set_epochs_per_call(1)
    self.compile_s = None  # Seconds the first compile took.

  n_seeds = types.read_only('_n_seeds')

  program = types.read_only('_program')

  @property
  def n_envs(self) -> int:
    """Env columns of a rollout (per seed)."""
    return self._n_envs

  @property
  def steps_per_epoch(self) -> int:
    """Env steps per epoch and seed."""
    return self._steps_per_epoch

  sharding = types.read_only('_sharding')

  def place(self, learner: Any) -> Any:
    """The learner on this source's devices, ready to be donated."""
    return seed_axis.place(learner, self._sharding)

  def set_epochs_per_call(self, k: int) -> None:
    """Lets one compiled call run up to k epochs (`run_epochs`)."""
    validation.check_count('epochs_per_call', k, 1)
    if k == self.epochs_per_call:
      return
    self.epochs_per_call = k
    report = self._report if self._progress is not None else None
    epochs = _looped(
      seed_axis.over_seeds(self._one_epoch, self._n_seeds), k, report
    )
    placement = self._sharding

    def call(learner, state, n, stride):
      learner, state, records = epochs(learner, state, n, stride)
      learner, state = seed_axis.constrain((learner, state), placement)
      return learner, state, records

    # Donated: the replay and train states update in place.
    self._epochs = compile_options.jit(call, donate_argnums=(0, 1))
    self._compiled = None

  def set_progress(self, progress: Callable[[int], None] | None) -> None:
    """Calls `progress(i)` on the host as epoch i (1-based) of a compiled
    call of several epochs ends, from inside the program (None: no
    calls; changing between the two recompiles)."""
    had = self._progress is not None
    self._progress = progress
    if had != (progress is not None) and self.epochs_per_call > 1:
      k, self.epochs_per_call = self.epochs_per_call, 0
      self.set_epochs_per_call(k)

  def _report(self, i: Any, _: Any) -> None:
    if self._progress is not None:
      self._progress(int(i) + 1)

  def compile(self, learner: Any) -> float:
    """Compiles the epoch for `learner`'s shapes; returns the seconds."""
    start = time.perf_counter()
    self._compiled = self._epochs.lower(learner, self._state, 1, 1).compile()
    self.compile_s = time.perf_counter() - start
    return self.compile_s

  def run_epochs(
    self, learner: Any, n: int
  ) -> tuple[Any, list[list[dict[str, float]]]]:
    """Runs n <= epochs_per_call epochs in one call.

    Args:
      learner: the learner, placed by `place`; donated.
      n: epochs to run.

    Returns:
      (learner, one list per epoch of one record per seed, host floats).
    """
    if not 1 <= n <= self.epochs_per_call:
      raise ValueError(f'n must be in [1, {self.epochs_per_call}], got {n}')
    if self._compiled is None:
      self.compile(learner)
    start = time.perf_counter()
    learner, self._state, records = self._compiled(
      learner, self._state, n, self._stride
    )
    records = jax.device_get(records)  # One transfer; waits for the epochs.
    # Progress every ~PROGRESS_S seconds of epochs: a host callback per
    # epoch costs a tenth of a 4 ms epoch (benchmarks/progress_cost.py).
    epoch_s = (time.perf_counter() - start) / n
    self._stride = max(
      1, min(self.epochs_per_call, math.ceil(PROGRESS_S / max(epoch_s, 1e-9)))
    )
    out = []
    for epoch in range(n):
      per_seed = []
      for seed in range(self._n_seeds):
        index = (epoch,) if self._n_seeds == 1 else (epoch, seed)
        per_seed.append(
          {k: seed_axis.scalar(v[index]) for k, v in records.items()}
        )
      out.append(per_seed)
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
    """Episode returns `[k, n_episodes]` at `temperature`, in one call.

    Each seed's episodes start from `fold_in(stream, index)` (`streams`:
    one raw key per seed), so a seed plays the episodes it plays alone.
    Compiled once per (temperature, n_episodes, max_steps).
    """
    spec = (float(temperature), n_episodes, max_steps)
    program = self._evaluations.get(spec)
    if program is None:
      policy = self._program.policy(float(temperature))

      def one(learner, stream, index):
        return evaluate_lib.evaluate(
          self._env,
          policy,
          learner,
          jax.random.fold_in(stream, index),
          n_episodes,
          max_steps,
          self._program.initial_core,
        )

      one = seed_axis.over_seeds(one, self._n_seeds, in_axes=(0, 0, None))
      program = compile_options.jit(one)
      self._evaluations[spec] = program
    streams = jax.device_put(np.asarray(streams), self._sharding)
    returns = np.asarray(
      jax.device_get(program(learner, streams, np.uint32(index)))
    )
    return returns.reshape(self._n_seeds, n_episodes)

  def state_dict(self) -> dict[str, Any]:
    """The envs in flight and the keys, as numpy leaves."""
    leaves = jax.tree.leaves(self._state)
    return {'leaves': [np.asarray(x) for x in leaves]}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    restored = checkpoint.unflatten_like(
      self._state, state['leaves'], 'device source state'
    )
    self._state = seed_axis.place(restored, self._sharding)

  def close(self) -> None:
    pass
