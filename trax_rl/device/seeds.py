"""Seeds as a batch dimension: k agents of one config in one vmapped epoch.

`train_rl.n_seeds = k` builds k agents that differ only in their seed
(`seed`, `seed + 1`, ...), stacks their learner states along a leading axis
and trains them with one `DeviceRunner` whose epoch is vmapped over that
axis. `metrics.jsonl` gets one record per seed and epoch, with an integer
field `seed`. This needs the device path (a JAX env and an agent with a
`DeviceProgram`).

With an output_dir the batch checkpoints after every compiled call, as a
single agent does: `checkpoint.pkl` holds the stacked learner states and
the runner's state (envs in flight, keys), written atomically, so a run
killed at any moment resumes exactly from its last call; records written
after it are dropped on resume.

With the agents' `n_eval_episodes > 0`, every call starts with a greedy
evaluation of each seed (one compiled call per step cap,
`DeviceRunner.evaluate`), whose means go into the call's first record of
that seed, as a single agent's do. A seed's episodes are the ones that
seed trains alone plays. Other eval temperatures are refused: they step
the env from the host, one seed at a time.
"""

import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from etils import epath

from trax_rl import checkpoint, metrics
from trax_rl.agents import base as agent_base
from trax_rl.agents import checkpointing, nonfinite
from trax_rl.device import epoch as device_epoch
from trax_rl.supervised import train_state as train_state_lib
from trax_rl.supervised import update


class SeedBatch:
  """Trains agents of one config, one per seed, as one device program.

  Args:
    agents: k >= 2 agents built from the same config with different seeds.
    output_dir: where metrics.jsonl (and TensorBoard events) go, or None.

  Raises:
    ValueError: an agent has no device path.
  """

  def __init__(self, agents: Sequence[Any], output_dir: str | None = None):
    first = agents[0]
    if first.task.jax_env is None:
      raise ValueError(
        'train_rl.n_seeds > 1 needs the device path: use a JAX env id such '
        'as gymnax:CartPole-v1'
      )
    program = first.device_program()
    if program is None:
      raise ValueError(
        f'train_rl.n_seeds > 1: {type(first).__name__} has no device path'
      )
    self._agents = list(agents)
    self._seeds = [a.seed for a in agents]
    # Stacked on the host: a jitted stack of every leaf costs a compile
    # (~0.4 s cold); the runner places the result on the device(s).
    learner = jax.tree.map(_stack, *[a.device_learner() for a in agents])
    self._runner = device_epoch.make_runner(
      first.task,
      program,
      learner,
      first.n_trajectories_per_epoch,
      first.n_interactions_per_epoch,
      self._seeds,
    )
    self._agent_name = type(first).__name__
    self._trainer_names = list(first.trainers())
    self._n_eval_episodes = first.n_eval_episodes
    self._eval_steps = first.eval_steps
    if self._n_eval_episodes:
      if any(t != 0 for t in first.eval_temperatures):
        raise ValueError(
          'train_rl.n_seeds > 1 evaluates greedily only: set '
          f'{self._agent_name}.eval_temperatures = (0.0,) (got '
          f'{first.eval_temperatures}) or n_eval_episodes = 0'
        )
      if not self._runner.can_evaluate:
        raise ValueError(
          f'train_rl.n_seeds > 1: {self._agent_name} has no greedy device '
          'policy to evaluate with; set n_eval_episodes = 0'
        )
    # Each seed's evaluation keys, as that seed's agent alone draws them.
    self._eval_streams = np.stack(
      [np.asarray(a.acting_stream(evaluation=True)) for a in agents]
    )
    self._n_evals = 0  # Evaluations so far (checkpointed).
    self._output_dir = output_dir
    self._epoch = 0
    self.avg_returns: list[float] = []
    self._restore()
    self._writer = metrics.MetricsWriter(output_dir) if output_dir else None

  @property
  def runner(self) -> device_epoch.DeviceRunner:
    return self._runner

  @property
  def current_epoch(self) -> int:
    return self._epoch

  @property
  def agents(self) -> list[Any]:
    """The agents, their learner states updated after `run`."""
    return self._agents

  def run(
    self,
    n_epochs: int,
    callbacks: Sequence[Callable[[Any, dict[str, Any]], Any]] = (),
    epochs_per_call: int = 1,
    n_epochs_is_total_epochs: bool = False,
    on_nonfinite: str = 'stop',
  ) -> None:
    """Runs n_epochs, up to epochs_per_call in one compiled call.

    Each call's records are written, then (with an output_dir) the
    checkpoint, then the callbacks see the mean record over seeds of each
    of its epochs; one returning True stops the run after that call.

    Args:
      n_epochs: epochs to run.
      callbacks: `callback(batch, mean_record) -> stop?` after every epoch.
      epochs_per_call: epochs per compiled call.
      n_epochs_is_total_epochs: count epochs restored from output_dir too.
      on_nonfinite: as `Agent.run`'s, checked once per call for every seed
        (the agents' guards must be on for 'stop' and 'warn'): 'stop'
        raises before the call's records and checkpoint are written.

    Raises:
      nonfinite.NonFiniteError: a seed's loss or parameters turned
        non-finite, with on_nonfinite='stop'.
    """
    nonfinite.check_policy(on_nonfinite)
    self._runner.set_epochs_per_call(epochs_per_call)
    n_left = n_epochs - self._epoch if n_epochs_is_total_epochs else n_epochs
    while n_left > 0:
      start = time.perf_counter()
      evals = self._evaluate()
      calls = self._runner.run_epochs(min(epochs_per_call, n_left))
      if on_nonfinite != 'off':
        self._check_finite(on_nonfinite, self._epoch + 1)
      # As a single agent's records: the call's wall (its compile, the
      # first time, included) shared by its epochs.
      epoch_s = (time.perf_counter() - start) / len(calls)
      for record, seed_evals in zip(calls[0], evals):
        record.update(seed_evals)  # As a single agent's, in the first.
      means = []
      for records in calls:
        self._epoch += 1
        n_left -= 1
        for seed, record in zip(self._seeds, records):
          record['seed'] = seed
          record['epoch_s'] = epoch_s
          if self._writer is not None:
            self._writer.write('epoch', self._epoch, record)
        mean = {
          k: float(np.mean([r[k] for r in records]))
          for k in records[0]
          if k != 'seed'
        }
        mean['epoch'] = self._epoch
        self.avg_returns.append(mean['avg_return'])
        means.append(mean)
      if self._output_dir is not None:
        self._save()
      stops = [callback(self, mean) for mean in means for callback in callbacks]
      if any(stops):
        break
    # Sliced on the host: one transfer and no compile (a jitted slice of
    # every leaf costs ~0.4 s cold, an eager one a compile per leaf shape).
    stacked = jax.device_get(self._runner.learner)
    for i, agent in enumerate(self._agents):
      agent.set_device_learner(
        jax.device_put(jax.tree.map(lambda x, i=i: x[i], stacked))
      )

  def _check_finite(self, policy: str, epoch: int) -> None:
    """Reports (policy 'stop': raises) the first non-finite seed, if any.

    Reads every train state of the stacked learner on the host: its
    Health (a non-finite loss, recorded in the update) and, where that is
    clean, its parameters. With 'warn' the Health is cleared after the
    report, so each problem is told once.
    """
    is_state = lambda x: isinstance(x, train_state_lib.TrainState)  # noqa: E731
    states = [
      (path, state)
      for path, state in jax.tree_util.tree_flatten_with_path(
        self._runner.learner, is_leaf=is_state
      )[0]
      if is_state(state) and isinstance(state.health, update.Health)
    ]
    # Only the train states come to the host, not the replay.
    host = jax.device_get([state for _, state in states])
    states = [(path, state) for (path, _), state in zip(states, host)]
    found = []
    for path, state in states:
      # Named as a single agent's guard names it where that is unambiguous.
      name = jax.tree_util.keystr(path).lstrip('.') or 'train state'
      if len(states) == len(self._trainer_names) == 1:
        name = self._trainer_names[0]
      for i, seed in enumerate(self._seeds):
        bad = update.describe(
          update.Health(state.health.step[i], state.health.what[i])
        )
        params = [x[i] for x in jax.tree.leaves(state.params)]
        if bad is None and not all(
          np.isfinite(x).all()
          for x in params
          if np.issubdtype(x.dtype, np.inexact)
        ):
          bad = (int(state.step[i]), 'parameters')
        if bad is not None:
          found.append((seed, name, *bad))
    if not found:
      return
    seed, name, step, what = found[0]
    kept = (
      f'{checkpointing.CHECKPOINT_FILE} keeps epoch {epoch - 1}'
      if self._output_dir is not None and epoch > 1
      else 'no epoch saved'
    )
    nonfinite.report(policy, f'{name}/{what} of seed {seed}', epoch, step, kept)
    zero = np.zeros(len(self._seeds), np.int32)
    is_health = lambda x: isinstance(x, update.Health)  # noqa: E731
    clean = jax.tree.map(
      lambda x: update.Health(zero, zero) if is_health(x) else x,
      self._runner.learner,
      is_leaf=is_health,
    )
    self._runner.set_learner(clean)

  def _evaluate(self) -> list[dict[str, float]]:
    """Each seed's greedy eval means (see the module docstring)."""
    out = [{} for _ in self._seeds]
    if not self._n_eval_episodes:
      return out
    for steps in self._eval_steps:
      returns = self._runner.evaluate(
        self._eval_streams, self._n_evals, self._n_eval_episodes, steps
      )
      self._n_evals += 1
      for seed_evals, seed_returns in zip(out, returns):
        seed_evals[agent_base.eval_name(0.0, steps)] = float(
          np.mean(seed_returns)
        )
    return out

  def _checkpoint_path(self) -> epath.Path:
    return epath.Path(self._output_dir) / checkpointing.CHECKPOINT_FILE

  def _save(self) -> None:
    """Writes the batch's whole state; the file is the commit point."""
    leaves = jax.tree.leaves(jax.device_get(self._runner.learner))
    checkpoint.save(
      self._checkpoint_path(),
      {
        'agent': f'SeedBatch[{self._agent_name}]',
        'seeds': list(self._seeds),
        'epoch': self._epoch,
        'avg_returns': list(self.avg_returns),
        'n_evals': self._n_evals,
        'learner': [np.asarray(x) for x in leaves],
        'device': self._runner.state_dict(),
      },
    )

  def _restore(self) -> None:
    """Loads output_dir's checkpoint, if any, into the runner.

    Raises:
      CheckpointError: it is unreadable, of another agent or of other seeds.
    """
    if self._output_dir is None:
      return
    out = epath.Path(self._output_dir)
    for stale in out.glob('.*.tmp*'):  # Writes a crash cut short.
      stale.unlink()
    path = self._checkpoint_path()
    if not path.exists():
      return
    ckpt = checkpoint.load(path)
    ours = f'SeedBatch[{self._agent_name}]'
    try:
      if ckpt['agent'] != ours:
        raise checkpoint.CheckpointError(
          f'checkpoint {path} was written by {ckpt["agent"]}, not {ours} '
          f'(train_rl.n_seeds = {len(self._seeds)}); use another output_dir'
        )
      if list(ckpt['seeds']) != self._seeds:
        raise checkpoint.CheckpointError(
          f'checkpoint {path} holds seeds {list(ckpt["seeds"])}, this run '
          f'has {self._seeds}: resume with the same seed and n_seeds, or '
          'use another output_dir'
        )
      learner = checkpoint.unflatten_like(
        self._runner.learner, ckpt['learner'], 'seed batch learner'
      )
      self._runner.load_state_dict(ckpt['device'], learner)
      self._epoch = int(ckpt['epoch'])
      self.avg_returns = [float(r) for r in ckpt['avg_returns']]
      # Written before evaluations came to seed batches: none were made.
      self._n_evals = int(ckpt.get('n_evals', 0))
    except (KeyError, TypeError, IndexError) as e:
      raise checkpoint.CheckpointError(
        f'checkpoint {path} is incomplete ({e!r})'
      ) from None
    metrics.MetricsWriter(self._output_dir, tensorboard=False).truncate(
      'epoch', self._epoch
    )

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None


def _stack(*leaves: Any) -> np.ndarray:
  """np.stack, leaving all-zero rows unwritten.

  `np.zeros` pages are mapped only when written, so the empty replays of a
  value learner's seeds (hundreds of MB each on MinAtar) cost no memory
  here, only in the runner's placed copy.
  """
  first = np.asarray(leaves[0])
  out = np.zeros((len(leaves), *first.shape), first.dtype)
  for row, leaf in enumerate(leaves):
    leaf = np.asarray(leaf)
    if leaf.any():
      out[row] = leaf
  return out


def read_checkpoint(output_dir: str) -> dict[str, Any]:
  """output_dir's seed-batch checkpoint, read once for `load_seed`.

  Raises:
    ValueError: output_dir has no checkpoint.
    CheckpointError: it is unreadable or not a seed batch's.
  """
  path = epath.Path(output_dir) / checkpointing.CHECKPOINT_FILE
  if not path.exists():
    raise ValueError(f'{output_dir} has no checkpoint to evaluate')
  ckpt = checkpoint.load(path)
  if not str(ckpt.get('agent', '')).startswith('SeedBatch['):
    raise checkpoint.CheckpointError(
      f'checkpoint {path} was written by {ckpt.get("agent")}, not by a '
      'seed batch'
    )
  return ckpt


def load_seed(agent: Any, ckpt: dict[str, Any], seed: int) -> int:
  """Puts one seed of a seed-batch checkpoint into `agent`.

  Args:
    agent: a fresh agent of the batch's config (best built with `seed`,
      so that its evaluation draws that seed's keys).
    ckpt: the batch's checkpoint (`read_checkpoint`).
    seed: one of the batch's seeds (`ckpt['seeds']`).

  Returns:
    The epoch the checkpoint holds.

  Raises:
    CheckpointError: the checkpoint is of another agent class.
    ValueError: `seed` is not one of the batch's seeds.
  """
  ours = f'SeedBatch[{type(agent).__name__}]'
  if ckpt['agent'] != ours:
    raise checkpoint.CheckpointError(
      f'checkpoint was written by {ckpt["agent"]}, not {ours}'
    )
  seeds = [int(s) for s in ckpt['seeds']]
  if seed not in seeds:
    raise ValueError(f'the batch holds seeds {seeds}, not seed {seed}')
  row = seeds.index(seed)
  leaves = [np.asarray(x)[row] for x in ckpt['learner']]
  if len(leaves) != len(jax.tree.leaves(agent.device_learner())):
    # Trained with on_nonfinite='off': a learner without Health leaves.
    for trainer in agent.trainers().values():
      trainer.set_check_finite(False)
  learner = checkpoint.unflatten_like(
    agent.device_learner(), leaves, 'seed batch learner'
  )
  agent.set_device_learner(jax.device_put(learner))
  return int(ckpt['epoch'])
