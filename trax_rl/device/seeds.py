"""Seeds as a batch dimension: k agents of one config in one vmapped epoch.

`train_rl.n_seeds = k` builds k agents that differ only in their seed
(`seed`, `seed + 1`, ...), stacks their learner states along a leading axis
and trains them with one `DeviceRunner` whose epoch is vmapped over that
axis. `metrics.jsonl` gets one record per seed and epoch, with an integer
field `seed`. This needs the device path (a JAX env and an agent with a
`DeviceProgram`).

Not done yet: per-epoch greedy evaluation and checkpoints (a k-seed run
restarts from scratch); single-seed runs have both.
"""

import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from trax_rl import metrics
from trax_rl.device import epoch as device_epoch


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
    learner = jax.tree.map(
      lambda *xs: np.stack([np.asarray(x) for x in xs]),
      *[a.device_learner() for a in agents],
    )
    self._runner = device_epoch.make_runner(
      first.task,
      program,
      learner,
      first.n_trajectories_per_epoch,
      first.n_interactions_per_epoch,
      self._seeds,
    )
    self._writer = metrics.MetricsWriter(output_dir) if output_dir else None
    self._epoch = 0
    self.avg_returns: list[float] = []

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
  ) -> None:
    """Runs n_epochs, up to epochs_per_call in one compiled call.

    Callbacks get the mean record over seeds of every epoch; one returning
    True stops the run at the end of the call.
    """
    self._runner.set_epochs_per_call(epochs_per_call)
    n_left = n_epochs
    while n_left > 0:
      stops = []
      start = time.perf_counter()
      calls = self._runner.run_epochs(min(epochs_per_call, n_left))
      # As a single agent's records: the call's wall (its compile, the
      # first time, included) shared by its epochs.
      epoch_s = (time.perf_counter() - start) / len(calls)
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
        stops += [callback(self, mean) for callback in callbacks]
      if any(stops):
        break
    # Sliced on the host: one transfer and no compile (a jitted slice of
    # every leaf costs ~0.4 s cold, an eager one a compile per leaf shape).
    stacked = jax.device_get(self._runner.learner)
    for i, agent in enumerate(self._agents):
      agent.set_device_learner(
        jax.device_put(jax.tree.map(lambda x, i=i: x[i], stacked))
      )

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None
