"""Where an agent's experience comes from: the host and device epochs.

One algorithm has one implementation; the data paths differ only in where
its experience comes from. An epoch on the host path collects from the
task's envs (`Agent.collect_locally`) or from a collector, then trains; an
epoch on the device path is one compiled call. The hooks are the rest: an
agent with a compiled epoch (`trax_rl.device`) implements the device ones,
an agent that acts on rollout actors (`trax_rl.distributed`) the actor
ones. `Agent` inherits them.
"""

import time
from typing import Any

from trax_rl.device import epoch as device_epoch


class DataPaths:
  """The data paths of `Agent`: host and device epochs, and their hooks."""

  _device: device_epoch.DeviceRunner | None = None  # Built on first use.
  _collector: Any = None  # None: collect in this process.

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

  def _device_epochs(self, n: int) -> list[dict[str, Any]]:
    """Evaluates, then n compiled epochs (collect and train) in one call.

    Evaluation comes first so that, as on the host path, it scores the
    parameters that collect the (first) epoch's data; its numbers go into
    the first epoch's record.
    """
    evals = self.evaluate() if self._n_eval_episodes else {}
    records = []
    for (record,) in self._device.run_epochs(n):
      self._epoch += 1
      self._avg_returns.append(record['avg_return'])
      record['n_trajectories'] = record['n_episodes']
      records.append(record)
    records[0].update(evals)
    self.set_device_learner(self._device.learner)
    return records

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

  def set_collector(self, collector: Any) -> None:
    """Hands collection to `collector` (e.g. a `RayCollector`).

    It must have `collect(agent) -> average return`, `metrics() -> dict`
    and `close()`; None collects in this process again.
    """
    self._collector = collector

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
