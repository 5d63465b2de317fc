"""Agent: the RL lifecycle (collect, evaluate, train, save) as Trax's."""

import contextlib
import contextvars
import inspect
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np
from etils import epath

from trax_rl import checkpoint, collection, metrics, validation
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl.device import epoch as device_epoch
from trax_rl.supervised import loop as loop_lib
from trax_rl.supervised import trainer as trainer_lib

CHECKPOINT_FILE = 'checkpoint.pkl'
EpochCallback = Callable[['Agent', dict[str, Any]], None]
# What a run does when a loss, gradient, parameter or observation turns
# NaN or inf: stop before saving (the default), warn and train on, or not
# check at all.
NONFINITE_POLICIES = ('stop', 'warn', 'off')
_LOG = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
  """A run stopped on a NaN or inf; the checkpoint on disk is the last finite."""


class _RestoresOnConstruction(type):
  """Calls `restore()` once the outermost `__init__` has finished."""

  def __init__(cls, name, bases, namespace, **kwargs):
    super().__init__(name, bases, namespace, **kwargs)
    # Constructing the class has the signature of its __init__, for
    # `inspect.signature` and gin, not this metaclass's (*args, **kwargs).
    init = inspect.signature(cls.__init__)
    cls.__signature__ = init.replace(
      parameters=list(init.parameters.values())[1:]
    )

  def __call__(cls, *args, **kwargs):
    agent = super().__call__(*args, **kwargs)
    if _RESTORE_ON_CONSTRUCTION.get():
      agent.restore()
    return agent


_RESTORE_ON_CONSTRUCTION = contextvars.ContextVar(
  'restore_on_construction', default=True
)


@contextlib.contextmanager
def restore_deferred() -> Iterator[None]:
  """Agents built inside restore only when `restore()` is called.

  `train_rl` builds the agent this way to compare the config with the
  checkpoint's before loading the checkpoint.
  """
  token = _RESTORE_ON_CONSTRUCTION.set(False)
  try:
    yield
  finally:
    _RESTORE_ON_CONSTRUCTION.reset(token)


class Agent(metaclass=_RestoresOnConstruction):
  """An RL agent: collects trajectories into its RLTask and trains on them.

  As in Trax, an agent built on an `output_dir` holding a checkpoint is
  restored by its constructor: `current_epoch`, `avg_returns` and the
  parameters are the checkpoint's right after construction.

  Subclasses implement `make_policy`, `train_epoch` and, for what they add
  to the checkpoint, `state_dict` / `load_state_dict`.
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    n_trajectories_per_epoch: int | None = None,
    n_interactions_per_epoch: int | None = None,
    n_eval_episodes: int = 0,
    eval_steps: Sequence[int] | None = None,
    eval_temperatures: Sequence[float] = (0.0,),
    only_eval: bool = False,
    output_dir: str | None = None,
    seed: int = 0,
  ):
    """Configures the agent.

    Args:
      task: the RLTask to collect into and train on.
      n_trajectories_per_epoch: episodes collected per epoch (epochs then end
        at episode boundaries and resume exactly).
      n_interactions_per_epoch: env steps collected per epoch (episodes run
        on across epochs). Exactly one of the two must be given.
      n_eval_episodes: episodes played per eval temperature and eval step cap
        each epoch, on a separate env, not stored.
      eval_steps: episode-length caps for evaluation; default the task's.
      eval_temperatures: temperatures to evaluate at (0.0 is greedy).
      only_eval: Trax's evaluation mode: each epoch of `run` collects with the
        training policy without recording the trajectories and plays the
        `n_eval_episodes`, but trains nothing, keeps `current_epoch` and
        writes no checkpoint, so the checkpoint in output_dir stays exactly
        the trained one. Its records go to metrics.jsonl as 'only_eval'.
      output_dir: where checkpoints, trajectories and metrics go; a run
        finding a checkpoint there continues from it.
      seed: seeds the agent's numpy Generator and JAX key (checkpointed).
    """
    if (n_trajectories_per_epoch is None) == (n_interactions_per_epoch is None):
      raise ValueError(
        'exactly one of n_trajectories_per_epoch and '
        'n_interactions_per_epoch must be set, got '
        f'n_trajectories_per_epoch={n_trajectories_per_epoch}, '
        f'n_interactions_per_epoch={n_interactions_per_epoch}'
      )
    validation.check_count(
      'n_trajectories_per_epoch', n_trajectories_per_epoch, 1
    )
    validation.check_count(
      'n_interactions_per_epoch', n_interactions_per_epoch, 1
    )
    validation.check_count('n_eval_episodes', n_eval_episodes, 0)
    eval_steps = list(eval_steps) if eval_steps else [task.max_steps]
    for s in eval_steps:
      validation.check_count('eval_steps', s, 1)
    for t in eval_temperatures:
      if not (isinstance(t, (int, float)) and t >= 0):
        raise ValueError(f'eval_temperatures must be >= 0, got {t!r}')
    self._task = task
    self._n_trajectories_per_epoch = n_trajectories_per_epoch
    self._n_interactions_per_epoch = n_interactions_per_epoch
    self._n_eval_episodes = n_eval_episodes
    self._eval_steps = eval_steps
    self._eval_temperatures = tuple(float(t) for t in eval_temperatures)
    self._only_eval = only_eval
    self._output_dir = (
      os.fspath(validation.check_output_dir(output_dir))
      if output_dir is not None
      else None
    )
    self._seed = seed
    self._epoch = 0
    self._avg_returns: list[float] = []
    self._avg_returns_temperatures = {
      t: {s: [] for s in eval_steps} for t in self._eval_temperatures
    }
    self._rng = np.random.default_rng([seed, 2])
    self._key = jax.random.PRNGKey(seed)
    # Acting keys: one stream for collection, one for evaluation, so that
    # eval settings never change what training does.
    self._act_keys = (
      jax.random.fold_in(self._key, 1),
      jax.random.fold_in(self._key, 2),
    )
    self._act_counts = [0, 0]
    self._restored = False
    self._loaded_checkpoint = False
    self._writer = None
    self._device = None  # The device path's runner, built on first use.
    self._collector = None  # None: collect in this process, as always.

  # Read-only views, as Trax's.
  @property
  def task(self) -> task_lib.RLTask:
    return self._task

  @property
  def current_epoch(self) -> int:
    return self._epoch

  @property
  def avg_returns(self) -> list[float]:
    return self._avg_returns

  @property
  def avg_returns_temperatures(self) -> dict[float, dict[Any, list[float]]]:
    return self._avg_returns_temperatures

  @property
  def output_dir(self) -> str | None:
    return self._output_dir

  @property
  def seed(self) -> int:
    return self._seed

  @property
  def only_eval(self) -> bool:
    return self._only_eval

  @property
  def n_trajectories_per_epoch(self) -> int | None:
    return self._n_trajectories_per_epoch

  @property
  def n_interactions_per_epoch(self) -> int | None:
    return self._n_interactions_per_epoch

  def set_collector(self, collector: Any) -> None:
    """Hands collection to `collector` (e.g. a `RayCollector`).

    It must have `collect(agent) -> average return`, `metrics() -> dict`
    and `close()`; None collects in this process again.
    """
    self._collector = collector

  def next_key(self) -> jax.Array:
    """A fresh raw PRNG key from the agent's checkpointed key."""
    self._key, key = jax.random.split(self._key)
    return key

  def acting_key(self, evaluation: bool) -> tuple[jax.Array, int]:
    """(key, call index) for one batched policy call.

    Fold them inside the jitted policy (`policies.key_for_step`): no extra
    dispatch per step, and the counters are part of the checkpoint.
    """
    stream = int(evaluation)
    index = self._act_counts[stream]
    self._act_counts[stream] += 1
    return self._act_keys[stream], index

  # To implement.
  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> task_lib.BatchPolicy:
    """A batched policy at `temperature`; `evaluation` keeps its own state."""
    raise NotImplementedError

  def train_epoch(self) -> dict[str, float]:
    """Trains for one epoch; returns metrics to log."""
    raise NotImplementedError

  def state_dict(self) -> dict[str, Any]:
    """What a subclass adds to the checkpoint (numpy and plain values)."""
    return {}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    del state

  # The device path: agents with a compiled epoch implement these three.
  def device_program(self) -> device_epoch.DeviceProgram | None:
    """The agent's compiled epoch; None: it steps JAX envs from the host."""
    return None

  def device_learner(self) -> Any:
    """The learner state the device program trains (a pytree)."""
    raise NotImplementedError

  def set_device_learner(self, learner: Any) -> None:
    """Takes the learner state back from the device program."""
    raise NotImplementedError

  def device_runner(self) -> device_epoch.DeviceRunner | None:
    """The runner of the device path (built once), or None on the host path.

    Raises:
      ValueError: the agent cannot run on the device path as configured.
    """
    if self._device is None:
      self._device = device_epoch.runner_for(self)
    return self._device

  def compile_update(self) -> None:
    """Compiles one training update on a sample batch, without training."""
    raise NotImplementedError

  # Hooks for rollout actors (`trax_rl.distributed`).
  streams_experience = False  # True: learns from chunks as they arrive.

  def rollout_params(self) -> Any:
    """The parameters the training policy acts with, to ship to actors."""
    raise NotImplementedError(
      f'{type(self).__name__} cannot act on rollout actors'
    )

  def load_rollout_params(self, params: Any) -> None:
    """Acts with `params` (from `rollout_params`) from now on."""
    del params
    raise NotImplementedError(
      f'{type(self).__name__} cannot act on rollout actors'
    )

  def reseed_acting(self, key: jax.Array) -> None:
    """Restarts the acting key streams from `key` (one per work unit)."""
    self._act_keys = (
      jax.random.fold_in(key, 1),
      jax.random.fold_in(key, 2),
    )
    self._act_counts = [0, 0]

  def n_updates(self) -> int:
    """Learner updates so far: the parameter version of stream mode."""
    return 0

  def act_as_rollout_actor(
    self, slot: int, n_slots: int, epsilon: float
  ) -> None:
    """Stream mode, on actor `slot` of `n_slots`: explore as that actor.

    `epsilon` is the collector's Ape-X rate for the slot; agents that spread
    their own rates over envs (R2D2) spread them over all actors' envs.
    """
    del slot, n_slots, epsilon
    raise NotImplementedError(
      f'{type(self).__name__} does not learn from a stream'
    )

  def can_take(self, n_steps: int) -> bool:
    """Stream mode credits: whether `n_steps` more steps may be in flight."""
    del n_steps
    return True

  def absorb(self) -> None:
    """Stream mode: learns from this epoch's trajectories not yet used.

    Called by a streaming collector after each chunk it stores; agents with
    `streams_experience` implement it (`train_epoch` absorbs the rest).
    """
    raise NotImplementedError(
      f'{type(self).__name__} does not learn from a stream'
    )

  def random_episode(self) -> list[trajectory_lib.Trajectory]:
    """One episode of uniformly random actions on the eval env, not stored.

    Gives `compile_update` real data of the right shapes.
    """
    policy = collection.random_policy(self._task.action_space, self._rng)
    return self._task.collect(
      policy, n_trajectories=1, only_eval=True
    ).trajectories

  def example_slice_batch(
    self, batch_size: int, max_slice_length: int | None, margin: int
  ) -> trajectory_lib.TimeStepBatch:
    """`[B, T, ...]` slices of one random episode, for `compile_update`."""
    return task_lib.batch_from_trajectories(
      self.random_episode(),
      batch_size,
      max_slice_length,
      margin,
      self._task.gamma,
      np.random.default_rng(0),
    )

  def check(self) -> dict[str, Any]:
    """Acts once and compiles one update; what `trax-rl check` reports.

    Raises:
      ValueError: the policy's actions do not fit the env's action space.
    """
    env = self._task.env
    obs, _ = env.reset(seed=0)
    action, _ = self.make_policy(1.0, evaluation=True)(
      np.asarray(obs), np.ones(env.num_envs, bool)
    )
    for a in np.asarray(action):
      if not env.single_action_space.contains(
        np.asarray(a, env.single_action_space.dtype)
      ):
        raise ValueError(
          f'{type(self).__name__} chose action {a}, outside '
          f'the action space {env.single_action_space}'
        )
    self.compile_update()
    return {
      'observation_space': str(env.single_observation_space),
      'action_space': str(env.single_action_space),
      'n_envs': env.num_envs,
      'acting': 'ok',
      'update': 'compiled',
    }

  def policy(
    self, trajectory: trajectory_lib.Trajectory, temperature: float = 1.0
  ) -> tuple[Any, dict[str, Any]]:
    """Trax's single-trajectory form: the action after `trajectory`."""
    obs = np.asarray(trajectory.last_observation)[None]
    first = np.array([len(trajectory) == 1])
    action, info = self.make_policy(temperature, evaluation=True)(obs, first)
    return np.asarray(action)[0], {k: np.asarray(v)[0] for k, v in info.items()}

  def trainers(self) -> dict[str, trainer_lib.Trainer]:
    """The Trainers this agent trains, by name; the NaN guard reads them.

    Found among the agent's attributes (a Trainer, or a Loop's); an agent
    that keeps trainers elsewhere overrides this.
    """
    found = {}
    for value in vars(self).values():
      if isinstance(value, loop_lib.Loop):
        value = value.trainer
      if isinstance(value, trainer_lib.Trainer):
        found[value.name] = value
    return found

  # Lifecycle.
  def _collect(self) -> float:
    if self._collector is None or self._only_eval:
      return self.collect_locally()
    return self._collector.collect(self)

  def collect_locally(self) -> float:
    """This epoch's experience from the task's own envs; average return."""
    return self._task.collect_trajectories(
      self.make_policy(1.0, evaluation=False),
      n_trajectories=self._n_trajectories_per_epoch,
      n_interactions=self._n_interactions_per_epoch,
      only_eval=self._only_eval,
      epoch_id=self._epoch,
    )

  def evaluate(self) -> dict[str, float]:
    """Plays n_eval_episodes per temperature and step cap; returns means."""
    results = {}
    for steps in self._eval_steps:
      for temp in self._eval_temperatures:
        avg = self._task.collect_trajectories(
          self.make_policy(temp, evaluation=True),
          n_trajectories=self._n_eval_episodes,
          only_eval=True,
          max_steps=steps,
        )
        self._avg_returns_temperatures[temp][steps].append(avg)
        results[f'eval_return_t{temp:g}' + (f'_s{steps}' if steps else '')] = (
          avg
        )
    return results

  def run(
    self,
    n_epochs: int = 1,
    n_epochs_is_total_epochs: bool = False,
    callbacks: Sequence[EpochCallback] = (),
    on_nonfinite: str = 'stop',
  ) -> None:
    """Runs n epochs of collect -> evaluate -> train -> save.

    Args:
      n_epochs: epochs to run.
      n_epochs_is_total_epochs: count epochs restored from output_dir too.
      callbacks: each called as `callback(agent, record)` after every epoch,
        once the epoch is saved; a callback returning True stops the run.
      on_nonfinite: when a loss (checked in every update), the parameters
        (checked once per epoch: a non-finite gradient turns them
        non-finite) or a collected observation is NaN or inf: 'stop'
        raises NonFiniteError before the epoch is saved, so the checkpoint
        on disk stays the last finite one; 'warn' logs one line per epoch
        and trains on; 'off' does not check.

    Raises:
      NonFiniteError: a non-finite value, with on_nonfinite='stop'.
    """
    validation.check_count('n_epochs', n_epochs, 0)
    if on_nonfinite not in NONFINITE_POLICIES:
      raise ValueError(
        f'on_nonfinite must be one of {NONFINITE_POLICIES}, got '
        f'{on_nonfinite!r}'
      )
    self.restore()
    for trainer in self.trainers().values():
      trainer.set_check_finite(on_nonfinite != 'off')
    self._task.set_check_finite(on_nonfinite != 'off')
    if not self._only_eval and self.device_runner() is not None:
      # The guard's switch may have changed the learner's structure.
      self._device.set_learner(self.device_learner())
    n_to_run = n_epochs - self._epoch if n_epochs_is_total_epochs else n_epochs
    if self._output_dir is not None and self._writer is None:
      self._writer = metrics.MetricsWriter(self._output_dir)
    for _ in range(max(n_to_run, 0)):
      if self._only_eval:
        record = self._evaluation_epoch()
      else:
        record = self._run_epoch(on_nonfinite)
        if self._writer is not None:
          self._writer.write('epoch', self._epoch, record)
        if self._output_dir is not None:
          self.save()
      # Every callback sees the epoch, then any of them may stop the run.
      if any([callback(self, record) for callback in callbacks]):
        break

  def _run_epoch(self, on_nonfinite: str) -> dict[str, Any]:
    """Collects, evaluates and trains one epoch; returns its record."""
    self._epoch += 1
    epoch_start = time.perf_counter()
    if self._device is not None:
      record = self._device_epoch()
    else:
      record = self._host_epoch(on_nonfinite)
    for name, trainer in self.trainers().items():
      found = trainer.nonfinite()  # One read per trainer and epoch.
      if found is not None:
        self._on_nonfinite(on_nonfinite, f'{name}/{found[1]}', found[0])
        trainer.clear_nonfinite()
    record['epoch_s'] = time.perf_counter() - epoch_start
    return record

  def _device_epoch(self) -> dict[str, Any]:
    """Evaluate, then one compiled epoch (collect and train) on the device.

    Evaluation comes first so that, as on the host path, it scores the
    parameters that collect this epoch's data.
    """
    record = self.evaluate() if self._n_eval_episodes else {}
    (device_record,) = self._device.run_epoch()
    self.set_device_learner(self._device.learner)
    self._avg_returns.append(device_record['avg_return'])
    device_record['n_trajectories'] = device_record['n_episodes']
    return dict(device_record, **record)

  def _collect_record(self) -> dict[str, Any]:
    """Collects one epoch; the record of its return and speed."""
    start = time.perf_counter()
    interactions_before = self._task.n_interactions()
    avg_return = self._collect()
    collect_s = time.perf_counter() - start
    new_interactions = self._task.n_interactions() - interactions_before
    record = {
      'avg_return': avg_return,
      **self._task.episode_stats.record(),
      'n_interactions': self._task.n_interactions(),
      'n_trajectories': self._task.n_trajectories(),
      'env_steps_per_s': new_interactions / max(collect_s, 1e-9),
      'collect_s': collect_s,
    }
    if self._collector is not None:
      record.update(self._collector.metrics())
    return record

  def _host_epoch(self, on_nonfinite: str) -> dict[str, Any]:
    """Collects from the gymnasium path, evaluates, trains."""
    nonfinite_before = self._task.n_nonfinite_observations()
    record = self._collect_record()
    self._avg_returns.append(record['avg_return'])
    if self._task.n_nonfinite_observations() > nonfinite_before:
      self._on_nonfinite(on_nonfinite, 'observation', None)
    if self._n_eval_episodes:
      record.update(self.evaluate())
    start = time.perf_counter()
    record.update(self.train_epoch())
    record['train_s'] = time.perf_counter() - start
    return record

  def _evaluation_epoch(self) -> dict[str, Any]:
    """`only_eval`: collect unrecorded and evaluate; the state stays."""
    record = self._collect_record()
    if self._n_eval_episodes:
      record.update(self.evaluate())
    if self._writer is not None:
      self._writer.write('only_eval', self._epoch, record)
    return record

  def _on_nonfinite(self, policy: str, what: str, step: int | None) -> None:
    """Stops (raises) or warns about a non-finite `what`."""
    if step is None:  # An observation: say where training stood.
      step = max((t.step for t in self.trainers().values()), default=0)
    message = f'non-finite {what} at epoch {self._epoch}, update step {step}'
    if policy == 'warn':
      _LOG.warning('%s; training on (on_nonfinite=warn)', message)
      return
    saved = self._epoch - 1
    kept = (
      f'{CHECKPOINT_FILE} keeps epoch {saved}'
      if self._output_dir is not None and saved
      else 'no epoch saved'
    )
    raise NonFiniteError(
      f"{message}; {kept} (on_nonfinite='warn' trains on anyway)"
    )

  # Checkpoints.
  def _checkpoint_path(self) -> epath.Path:
    return epath.Path(self._output_dir) / CHECKPOINT_FILE

  def save(self) -> None:
    """Writes the full state; the checkpoint file is the commit point."""
    if self._output_dir is None:
      raise ValueError('save() needs an output_dir')
    task_state = self._task.save_to_dir(self._output_dir)
    checkpoint.save(
      self._checkpoint_path(),
      {
        'agent': type(self).__name__,
        'epoch': self._epoch,
        'avg_returns': self._avg_returns,
        'avg_returns_temperatures': [
          [t, s, v]
          for t, d in self._avg_returns_temperatures.items()
          for s, v in d.items()
        ],
        'rng': self._rng.bit_generator.state,
        'key': np.asarray(self._key),
        'act_counts': list(self._act_counts),
        'task': task_state,
        'state': self.state_dict(),
        'device': None if self._device is None else self._device.state_dict(),
      },
    )
    self._task.remove_stale_files(self._output_dir)

  def restore(self) -> bool:
    """Loads the checkpoint in output_dir, once (the constructor calls it).

    Returns:
      True if a checkpoint was loaded, now or by an earlier call.

    Raises:
      CheckpointError: the checkpoint is unreadable or of another agent.
    """
    if self._restored or self._output_dir is None:
      return self._loaded_checkpoint
    self._restored = True
    # Temp files of writes a crash cut short are never needed again.
    out = epath.Path(self._output_dir)
    for stale in [*out.glob('.*.tmp*'), *out.glob('*/.*.tmp*')]:
      stale.unlink()
    path = self._checkpoint_path()
    if not path.exists():
      return False
    ckpt = checkpoint.load(path)
    try:
      if ckpt['agent'] != type(self).__name__:
        raise checkpoint.CheckpointError(
          f'checkpoint {path} was written by {ckpt["agent"]}, not '
          f'{type(self).__name__}'
        )
      self._task.load_from_dir(self._output_dir, ckpt['task'])
      self.load_state_dict(ckpt['state'])
      if ckpt.get('device') is not None:
        self.device_runner().load_state_dict(
          ckpt['device'], self.device_learner()
        )
      self._epoch = int(ckpt['epoch'])
      self._avg_returns = list(ckpt['avg_returns'])
      for t, s, v in ckpt['avg_returns_temperatures']:
        self._avg_returns_temperatures.setdefault(t, {})[s] = list(v)
      self._rng.bit_generator.state = ckpt['rng']
      self._key = jax.numpy.asarray(ckpt['key'])
      self._act_counts = [int(c) for c in ckpt['act_counts']]
    except (KeyError, TypeError, IndexError) as e:
      raise checkpoint.CheckpointError(
        f'checkpoint {path} is incomplete ({e!r})'
      ) from None
    metrics.MetricsWriter(self._output_dir, tensorboard=False).truncate(
      'epoch', self._epoch
    )
    self._loaded_checkpoint = True
    return True

  def close(self) -> None:
    if self._collector is not None:
      self._collector.close()
    if self._writer is not None:
      self._writer.close()
      self._writer = None
