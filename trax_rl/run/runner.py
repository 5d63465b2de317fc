"""The runner: one loop for every source and any number of seeds.

Each call of `run` repeats: evaluate (before the call's first epoch, so it
scores the parameters that collect its data), let the source run up to
`epochs_per_call` epochs (collect, observe, learn), check for non-finite
values, write one record per epoch and seed, save the checkpoint, call the
callbacks. The learner carries a leading seed axis when k > 1
(`seed_axis`): seed s of a batch trains exactly as it would alone.

The checkpoint (`checkpoint.pkl`, written atomically after every call) is
one format for every source and seed count: the learner's leaves with a
seed axis, the source's state (envs in flight, keys, counters), the
runner's counters (epoch, returns, evaluations). Records written after it
are dropped on resume, so a run killed at any moment resumes from its last
call exactly.
"""

import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from etils import epath

from trax_rl import checkpoint, metrics, tracking, types, validation
from trax_rl.run import evaluations, nonfinite
from trax_rl.sources import processes, seed_axis

CHECKPOINT_FILE = checkpoint.CHECKPOINT_FILE
FORMAT = 'program'  # The checkpoint's 'kind'.


class Runner:
  """Trains a program's learner on a source (see the module docstring).

  Args:
    name: the agent's name (the checkpoint records it).
    source: a `DeviceSource` or `GymnasiumSource` (or anything with their
      `run_epochs`, `evaluate`, `place`, `state_dict` methods).
    learner: the initial learner, with a seed axis when k > 1.
    seeds: the seeds' integer seeds (k entries).
    eval_streams: each seed's evaluation key stream, `[k, 2]`.
    output_dir: where checkpoints and metrics go, or None.
    n_eval_episodes: episodes per evaluation temperature and step cap.
    eval_steps: episode-length caps of the evaluations.
    eval_temperatures: temperatures to evaluate at.
    writes_outputs: whether this process writes output_dir.
  """

  def __init__(
    self,
    name: str,
    source: Any,
    learner: Any,
    seeds: Sequence[int],
    eval_streams: Any,
    output_dir: str | None = None,
    n_eval_episodes: int = 0,
    eval_steps: Sequence[int | None] = (None,),
    eval_temperatures: Sequence[float] = (0.0,),
    writes_outputs: bool = True,
  ):
    self._name = name
    self._source = source
    self._seeds = list(seeds)
    self._k = len(self._seeds)
    self._learner = source.place(learner)
    self._output_dir = output_dir
    self.evaluations = evaluations.Evaluations(
      self._seeds,
      eval_streams,
      n_eval_episodes,
      eval_steps,
      eval_temperatures,
    )
    self._writes = writes_outputs and output_dir is not None
    self.epoch = 0
    self.avg_returns: list[list[float]] = [[] for _ in self._seeds]
    self._writer = None
    self._restored = False
    self._loaded = False

  # Views.
  source = types.read_only('_source')

  @property
  def learner(self) -> Any:
    """The learner after the last call (the next call donates it)."""
    return self._learner

  def set_learner(self, learner: Any) -> None:
    self._learner = self._source.place(learner)

  @property
  def seeds(self) -> list[int]:
    return list(self._seeds)

  n_seeds = types.read_only('_k')

  output_dir = types.read_only('_output_dir')

  def local_learner(self) -> Any:
    """The learner as this process holds it (its row, across hosts)."""
    local = getattr(self._source, 'local', None)
    return self._learner if local is None else local(self._learner)

  @property
  def eval_streams(self) -> np.ndarray:
    """Each seed's evaluation key stream, `[k, 2]`."""
    return self.evaluations.streams

  @property
  def eval_returns(self) -> dict[tuple[float, Any], list[list[float]]]:
    """{(temperature, steps): per seed, each evaluation's mean return}."""
    return self.evaluations.returns

  def learner_of(self, index: int) -> Any:
    """Seed `index`'s learner (host copy for a seed batch)."""
    learner = self.local_learner()
    if self._k == 1:
      return learner
    return jax.tree.map(lambda x: np.asarray(x)[index], learner)

  # Evaluation.
  def evaluate(self) -> list[dict[str, float]]:
    """Each seed's mean eval return per temperature and step cap."""
    return self.evaluations.run(self._source, self._learner)

  def final_evaluation(self) -> dict[str, Any] | None:
    """The evaluation after the last epoch (`Evaluations.final`)."""
    return self.evaluations.final(
      self._source,
      self._learner,
      self.epoch,
      self._output_dir if self._writes else None,
    )

  # The loop.
  def run(
    self,
    n_epochs: int,
    callbacks: Sequence[Callable[[dict[str, Any]], Any]] = (),
    on_nonfinite: str = 'stop',
    epochs_per_call: int = 1,
    n_epochs_is_total_epochs: bool = False,
    tracker: Any = None,
    progress: Callable[[int], None] | None = None,
    eval_every: int = 1,
    pipeline_depth: int = 0,
    overlap: bool = False,
  ) -> None:
    """Runs n_epochs, up to epochs_per_call per source call.

    Args:
      n_epochs: epochs to run.
      callbacks: `callback(record) -> stop?` after every epoch, once the
        call is saved; a seed batch's callbacks see the mean over seeds.
      on_nonfinite: 'stop' raises `nonfinite.NonFiniteError` before the
        call's records and checkpoint are written; 'warn' logs and trains
        on; 'off' does not check.
      epochs_per_call: epochs per source call (the device source compiles
        them into one program).
      n_epochs_is_total_epochs: count epochs restored from output_dir too.
      tracker: where records go besides metrics.jsonl and TensorBoard
        (`tracking.build`): None, 'wandb' or a tracker.
      progress: `progress(epoch)` as each epoch ends inside a source call
        of several epochs (the device source calls it from its program);
        the callbacks follow once the call is saved.
      eval_every: evaluate before a call only if one of its epochs is a
        multiple of this (counted from 0; 1: before every call, as Trax).
      pipeline_depth: a host source collects this many epochs ahead of
        learning (`sources.pipeline`; 0: each epoch collects, then learns).
      overlap: a host source collects the epoch ahead while learning.
    """
    validation.check_count('n_epochs', n_epochs, 0)
    validation.check_count('epochs_per_call', epochs_per_call, 1)
    validation.check_count('eval_every', eval_every, 1)
    nonfinite.check_policy(on_nonfinite)
    self.restore()
    if hasattr(self._source, 'set_progress'):
      self._source.set_progress(
        None if progress is None else lambda i: progress(self.epoch + i)
      )
    self._source.set_epochs_per_call(epochs_per_call)
    n_left = n_epochs - self.epoch if n_epochs_is_total_epochs else n_epochs
    _set_pipeline(self._source, pipeline_depth, overlap, n_left)
    if self._writes and self._writer is None and n_left > 0:
      self._writer = metrics.MetricsWriter(
        self._output_dir,
        tracking.build(tracker, self._output_dir, self._seeds),
      )
    while n_left > 0:
      n = min(epochs_per_call, n_left)
      start = time.perf_counter()
      due = -(-self.epoch // eval_every) * eval_every < self.epoch + n
      evals = self.evaluate() if due else [{} for _ in self._seeds]
      nonfinite_before = nonfinite.observation_count(self._source)
      steps_before = (
        nonfinite.steps_done(self.local_learner())
        if on_nonfinite != 'off'
        else 0
      )
      self._learner, calls = self._source.run_epochs(self._learner, n)
      wall = time.perf_counter() - start
      if on_nonfinite != 'off':
        self._check_finite(on_nonfinite, nonfinite_before, steps_before)
      means = self._record(calls, evals, wall)
      n_left -= len(calls)
      if self._output_dir is not None:
        self.save()
      stops = [cb(mean) for mean in means for cb in callbacks]
      if any(stops):
        break

  def _record(self, calls, evals, wall) -> list[dict[str, Any]]:
    """Writes the call's records; returns each epoch's (mean) record."""
    steps = getattr(self._source, 'steps_per_epoch', None)
    for record, seed_evals in zip(calls[0], evals):
      record.update(seed_evals)  # In the call's first epoch.
    means = []
    for records in calls:
      self.epoch += 1
      for s, record in enumerate(records):
        record['epoch_s'] = wall / len(calls)
        if steps is not None:
          record.setdefault(
            'n_interactions', self.epoch * steps
          )  # The device source counts epochs.
          record['env_steps_per_s'] = (
            steps * self._k / max(record['epoch_s'], 1e-9)
          )
        self.avg_returns[s].append(float(record['avg_return']))
        if self._k > 1:
          record['seed'] = self._seeds[s]
        if self._writer is not None:
          self._writer.write('epoch', self.epoch, record, self._seeds[s])
      mean = records[0] if self._k == 1 else _mean(records)
      mean['epoch'] = self.epoch
      means.append(mean)
    return means

  # Non-finite values.
  def _check_finite(
    self, policy: str, observations_before: int, steps_before: int
  ) -> None:
    # A non-finite observation comes first: the updates after it are its
    # consequence, and it was collected before them.
    found = None
    if nonfinite.observation_count(self._source) > observations_before:
      found = (self._seeds[0], 'observation', steps_before)
    if found is None:
      found = nonfinite.first_in_learner(
        self.local_learner(), self._seeds, self._source.program.train_name
      )
    if found is None:
      return
    seed, what, step = found
    epoch = self.epoch + 1
    saved = self.epoch if self._output_dir is not None else 0
    where = f' of seed {seed}' if self._k > 1 else ''
    nonfinite.report(policy, f'{what}{where}', epoch, step, saved)
    # Forgets the recorded non-finite updates: 'warn' reports each once.
    self.set_learner(nonfinite.cleared(self.local_learner(), self._k))

  # Checkpoints.
  def _path(self) -> epath.Path:
    return epath.Path(self._output_dir) / CHECKPOINT_FILE

  def state(self) -> dict[str, Any]:
    """The whole state, as plain values and numpy (for the checkpoint)."""
    learner = seed_axis.with_axis(self.local_learner(), self._k)
    return {
      'kind': FORMAT,
      'agent': self._name,
      'seeds': list(self._seeds),
      'epoch': self.epoch,
      'avg_returns': [list(r) for r in self.avg_returns],
      **self.evaluations.state(),
      'learner': [np.asarray(x) for x in jax.tree.leaves(learner)],
      'source': self._source.state_dict(),
    }

  def save(self) -> None:
    """Writes the checkpoint; the file is the commit point of the call
    (across hosts: `processes.save`)."""
    if self._output_dir is not None:
      processes.save(self._path(), self.state(), self.epoch)

  def _check_agent(self, ckpt: dict[str, Any], path: Any) -> None:
    if ckpt.get('kind') != FORMAT or ckpt['agent'] != self._name:
      raise checkpoint.CheckpointError(
        f'checkpoint {path} was written by {ckpt.get("agent")}, not '
        f'{self._name}; use another output_dir'
      )

  def load(self, ckpt: dict[str, Any], path: Any) -> None:
    """Restores `state()` output.

    Raises:
      CheckpointError: of another agent, other seeds, or incomplete.
    """
    try:
      self._check_agent(ckpt, path)
      if list(ckpt['seeds']) != self._seeds:
        raise checkpoint.CheckpointError(
          f'checkpoint {path} holds seeds {list(ckpt["seeds"])}, this run '
          f'has {self._seeds}: resume with the same seed and n_seeds, or '
          'use another output_dir'
        )
      template = seed_axis.axis_shapes(self.local_learner(), self._k)
      learner = checkpoint.unflatten_like(template, ckpt['learner'], 'learner')
      self.set_learner(seed_axis.without_axis(learner, self._k))
      self._source.load_state_dict(ckpt['source'])
      self.epoch = int(ckpt['epoch'])
      self.avg_returns = [[float(r) for r in x] for x in ckpt['avg_returns']]
      self.evaluations.load(ckpt)
    except (KeyError, TypeError, IndexError) as e:
      raise checkpoint.CheckpointError(
        f'checkpoint {path} is incomplete ({e!r})'
      ) from None

  def load_seed(self, ckpt: dict[str, Any], path: Any, seed: int) -> None:
    """Loads seed `seed` of a seed batch's checkpoint into this runner of
    that seed alone: its learner and returns, not its envs (to evaluate).

    Raises:
      CheckpointError: of another agent, or incomplete.
    """
    try:
      self._check_agent(ckpt, path)
      seeds = [int(s) for s in ckpt['seeds']]
      i = seeds.index(seed)
      template = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct((len(seeds), *np.shape(x)), x.dtype),
        self.local_learner(),
      )
      learner = checkpoint.unflatten_like(template, ckpt['learner'], 'learner')
      self.set_learner(jax.tree.map(lambda x: x[i], learner))
      self.epoch = int(ckpt['epoch'])
      self.avg_returns = [[float(r) for r in ckpt['avg_returns'][i]]]
      self.evaluations.load(ckpt, i)
    except (KeyError, TypeError, IndexError, ValueError) as e:
      raise checkpoint.CheckpointError(
        f'checkpoint {path} is incomplete ({e!r})'
      ) from None

  def restore(self) -> bool:
    """Loads output_dir's checkpoint, once; True if one was loaded."""
    if self._restored or self._output_dir is None:
      return self._loaded
    self._restored = True
    out = epath.Path(self._output_dir)
    if self._writes:
      for stale in out.glob('.*.tmp*'):  # Writes a crash cut short.
        stale.unlink()
    path = self._path()
    if not path.exists():
      return False
    path, ckpt, forked = processes.load(path)
    self.load(ckpt, path)
    if forked and hasattr(self._source, 'fork'):
      self._source.fork(self.epoch)
    if self._writes:
      metrics.MetricsWriter(self._output_dir).truncate('epoch', self.epoch)
    self._loaded = True
    return True

  def close(self) -> None:
    self._source.close()
    if self._writer is not None:
      self._writer.close()
      self._writer = None


def _set_pipeline(source: Any, depth: int, overlap: bool, n_left: int) -> None:
  """Configures a host source's pipeline; refuses one elsewhere."""
  if hasattr(source, 'set_pipeline'):
    source.set_pipeline(depth, overlap)
    source.set_epochs_left(max(n_left, 0))
  elif depth or overlap:
    raise ValueError(
      'train_rl.pipeline_depth and train_rl.overlap pipeline the gymnasium '
      f'source (host envs); this run collects with a {type(source).__name__}'
      ': unbind them'
    )


def _mean(records: list[dict[str, Any]]) -> dict[str, Any]:
  return {
    k: float(np.mean([r[k] for r in records]))
    for k in records[0]
    if k != 'seed' and isinstance(records[0][k], (int, float))
  }
