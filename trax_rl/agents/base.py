"""Agent: the RL lifecycle (collect, evaluate, train, save) as Trax's."""

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from trax_rl import collection, metrics, validation
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl.agents import checkpointing, data_paths, nonfinite, restoring
from trax_rl.supervised import loop as loop_lib
from trax_rl.supervised import trainer as trainer_lib

EpochCallback = Callable[['Agent', dict[str, Any]], None]


def eval_name(temperature: float, max_steps: int | None) -> str:
  """The record field of an evaluation: 'eval_return_t0_s500', ..."""
  return f'eval_return_t{temperature:g}' + (
    f'_s{max_steps}' if max_steps else ''
  )


class Agent(
  checkpointing.Checkpointing,
  data_paths.DataPaths,
  metaclass=restoring.RestoresOnConstruction,
):
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
    if output_dir is not None:
      # Each process checks what it writes: the chief the output_dir, the
      # others of a multi-host job their own processes/<index> in it.
      validation.check_output_dir(
        checkpointing.process_dir(output_dir) or output_dir
      )
    self._output_dir = os.fspath(output_dir) if output_dir is not None else None
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
    # A non-chief process of a multi-host job got its own state back.
    self._restored_process_state = False
    self._writer = None

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
  def n_eval_episodes(self) -> int:
    return self._n_eval_episodes

  @property
  def eval_steps(self) -> list[int | None]:
    return list(self._eval_steps)

  @property
  def eval_temperatures(self) -> tuple[float, ...]:
    return self._eval_temperatures

  @property
  def n_trajectories_per_epoch(self) -> int | None:
    return self._n_trajectories_per_epoch

  @property
  def n_interactions_per_epoch(self) -> int | None:
    return self._n_interactions_per_epoch

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

  def acting_stream(self, evaluation: bool) -> jax.Array:
    """The key `acting_key` folds its indices into (counting nothing)."""
    return self._act_keys[int(evaluation)]

  def reseed_acting(self, key: jax.Array) -> None:
    """Restarts the acting key streams from `key` (one per work unit)."""
    self._act_keys = (
      jax.random.fold_in(key, 1),
      jax.random.fold_in(key, 2),
    )
    self._act_counts = [0, 0]

  # To implement.
  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> collection.BatchPolicy:
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

  def compile_update(self) -> None:
    """Compiles one training update on a sample batch, without training."""
    raise NotImplementedError

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
    """Plays n_eval_episodes per temperature and step cap; returns means.

    On the device path the greedy episodes (temperature 0) are one compiled
    call (`DeviceRunner.evaluate`); other temperatures, and the host path,
    step the task's eval env from the host.
    """
    results = {}
    for steps in self._eval_steps:
      for temp in self._eval_temperatures:
        if temp == 0 and self._device is not None and self._device.can_evaluate:
          stream, index = self.acting_key(evaluation=True)
          avg = float(
            np.mean(
              self._device.evaluate(stream, index, self._n_eval_episodes, steps)
            )
          )
        else:
          avg = self._task.collect_trajectories(
            self.make_policy(temp, evaluation=True),
            n_trajectories=self._n_eval_episodes,
            only_eval=True,
            max_steps=steps,
          )
        self._avg_returns_temperatures[temp][steps].append(avg)
        results[eval_name(temp, steps)] = avg
    return results

  def run(
    self,
    n_epochs: int = 1,
    n_epochs_is_total_epochs: bool = False,
    callbacks: Sequence[EpochCallback] = (),
    on_nonfinite: str = 'stop',
    epochs_per_call: int = 1,
  ) -> None:
    """Runs n epochs of collect -> evaluate -> train -> save.

    Args:
      n_epochs: epochs to run.
      n_epochs_is_total_epochs: count epochs restored from output_dir too.
      callbacks: each called as `callback(agent, record)` after every epoch,
        once the epoch is saved; `record['epoch']` is that epoch's number. A
        callback returning True stops the run.
      on_nonfinite: when a loss (checked in every update), the parameters
        (checked once per epoch: a non-finite gradient turns them
        non-finite) or a collected observation is NaN or inf: 'stop'
        raises `nonfinite.NonFiniteError` before the epoch is saved, so the
        checkpoint on disk stays the last finite one; 'warn' logs one line
        per epoch and trains on; 'off' does not check.
      epochs_per_call: the device path runs up to this many epochs in one
        compiled call. Every epoch still gets its record and callbacks, but
        evaluation (before the call's first epoch), the checkpoint, the
        non-finite check and a callback's stop happen once per call.

    Raises:
      nonfinite.NonFiniteError: a non-finite value, with on_nonfinite='stop'.
      ValueError: epochs_per_call > 1 on the host path.
    """
    validation.check_count('n_epochs', n_epochs, 0)
    validation.check_count('epochs_per_call', epochs_per_call, 1)
    nonfinite.check_policy(on_nonfinite)
    self.restore()
    for trainer in self.trainers().values():
      trainer.set_check_finite(on_nonfinite != 'off')
    self._task.set_check_finite(on_nonfinite != 'off')
    device = not self._only_eval and self.device_runner() is not None
    if device:
      # The guard's switch may have changed the learner's structure.
      self._device.set_learner(self.device_learner())
      self._device.set_epochs_per_call(epochs_per_call)
    elif epochs_per_call > 1 and not self._only_eval:
      raise ValueError(
        f'epochs_per_call={epochs_per_call} needs the device path (a JAX '
        f'env id such as gymnax:CartPole-v1 and an agent with a compiled '
        f'epoch); {type(self).__name__} on this env trains on the host'
      )
    n_left = n_epochs - self._epoch if n_epochs_is_total_epochs else n_epochs
    saves = self._output_dir is not None  # Every process of a job saves.
    writes = saves and checkpointing.writes_outputs()
    if writes and self._writer is None:
      self._writer = metrics.MetricsWriter(self._output_dir)
    while n_left > 0:
      if self._only_eval:
        records = [{'epoch': self._epoch, **self._evaluation_epoch()}]
      else:
        first = self._epoch + 1
        records = self._run_epochs(on_nonfinite, min(epochs_per_call, n_left))
        for epoch, record in enumerate(records, first):
          # A call's records all reach the callbacks after the call, when
          # current_epoch is already its last: each names its own.
          record['epoch'] = epoch
          if self._writer is not None:
            self._writer.write('epoch', epoch, record)
        if saves:
          self.save()
      n_left -= len(records)
      # Every callback sees every epoch, then any of them may stop the run.
      stops = [cb(self, record) for record in records for cb in callbacks]
      if any(stops):
        break

  def _run_epochs(self, on_nonfinite: str, n: int) -> list[dict[str, Any]]:
    """Collects, evaluates and trains n epochs (one, on the host path)."""
    saved = self._epoch
    start = time.perf_counter()
    if self._device is not None:
      records = self._device_epochs(n)
    else:
      self._epoch += 1
      records = [self._host_epoch(on_nonfinite)]
    for name, trainer in self.trainers().items():
      found = trainer.nonfinite()  # One read per trainer and call.
      if found is not None:
        self._on_nonfinite(on_nonfinite, f'{name}/{found[1]}', found[0], saved)
        trainer.clear_nonfinite()
    for record in records:
      record['epoch_s'] = (time.perf_counter() - start) / len(records)
    return records

  def _evaluation_epoch(self) -> dict[str, Any]:
    """`only_eval`: collect unrecorded and evaluate; the state stays."""
    record = self._collect_record()
    if self._n_eval_episodes:
      record.update(self.evaluate())
    if self._writer is not None:
      self._writer.write('only_eval', self._epoch, record)
    return record

  def _on_nonfinite(
    self, policy: str, what: str, step: int | None, saved: int | None = None
  ) -> None:
    """Stops (raises) or warns about a non-finite `what`.

    `saved`: the epoch on disk (default: the one before this epoch).
    """
    if step is None:  # An observation: say where training stood.
      step = max((t.step for t in self.trainers().values()), default=0)
    saved = self._epoch - 1 if saved is None else saved
    kept = (
      f'{checkpointing.CHECKPOINT_FILE} keeps epoch {saved}'
      if self._output_dir is not None and saved
      else 'no epoch saved'
    )
    nonfinite.report(policy, what, self._epoch, step, kept)

  def close(self) -> None:
    if self._collector is not None:
      self._collector.close()
    if self._writer is not None:
      self._writer.close()
      self._writer = None
