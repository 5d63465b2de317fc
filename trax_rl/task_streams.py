"""The batch streams of an RLTask, as Trax's: trajectories and slices.

`RLTask` inherits them; they sample the task's per-epoch store, which
bumps `_version` whenever it changes, so a stream never draws from an
epoch that has gone.
"""

from collections.abc import Callable, Iterator

import numpy as np

from trax_rl import batching, validation
from trax_rl import trajectory as trajectory_lib


class TrajectoryStreams:
  """`trajectory_stream` and `trajectory_batch_stream` of `RLTask`."""

  _trajectories: dict[int, list[trajectory_lib.Trajectory]]
  _version: int
  _rng: np.random.Generator
  _gamma: float

  def _epoch_ids(self, epochs: list[int] | None) -> list[int]:
    present = sorted(e for e, ts in self._trajectories.items() if ts)
    if not epochs or not present:
      return present
    last = max(self._trajectories) + 1
    wanted = {e % last for e in epochs}  # -1 means the last epoch.
    return [e for e in present if e in wanted]

  def trajectory_stream(
    self,
    epochs: list[int] | None = None,
    max_slice_length: int | None = None,
    sample_trajectories_uniformly: bool = False,
    margin: int = 0,
    include_final_state: bool = False,
    rng: np.random.Generator | None = None,
  ) -> Iterator[trajectory_lib.Trajectory]:
    """Endless stream of trajectories sampled from the given epochs.

    Epochs are sampled in proportion to their number of slices; trajectories
    within an epoch uniformly or in proportion to their number of slices.
    """
    rng = rng or self._rng
    while True:
      version = self._version
      epoch_ids = self._epoch_ids(epochs)
      if not epoch_ids:
        raise ValueError('no trajectories to sample from: collect some first')
      draws = batching.sample_trajectories(
        [self._trajectories[e] for e in epoch_ids],
        lambda t: batching.n_slices(
          t, max_slice_length, margin, include_final_state
        ),
        sample_trajectories_uniformly,
        rng,
      )
      # Start over as soon as the store changes: no draw from a stale epoch.
      for trajectory in draws:
        yield trajectory
        if version != self._version:
          break

  def trajectory_batch_stream(
    self,
    batch_size: int,
    epochs: list[int] | None = None,
    max_slice_length: int | None = None,
    min_slice_length: int | None = None,
    margin: int = 0,
    sample_trajectories_uniformly: bool = False,
    include_final_state: bool = False,
    trajectory_stream_preprocessing_fn: Callable | None = None,
    rng: np.random.Generator | None = None,
  ) -> Iterator[trajectory_lib.TimeStepBatch]:
    """Endless stream of padded `[B, T, ...]` batches of trajectory slices.

    Args:
      batch_size: B.
      epochs: epochs to sample from (negative counts from the last); all if
        None.
      max_slice_length: slice length; whole trajectories if None.
      min_slice_length: pad every batch to at least this length.
      margin: padding steps past each trajectory's end (mask 0, done True),
        so that estimators see the final observation.
      sample_trajectories_uniformly: sample trajectories uniformly instead of
        in proportion to their number of slices.
      include_final_state: let a slice also start one step later, so that the
        last slice of a trajectory ends on its final (padding) step.
      trajectory_stream_preprocessing_fn: maps the stream of trajectories
        before slicing (ExpertIteration filters it).
      rng: numpy Generator to sample with (default: the task's).

    Yields:
      TimeStepBatch with fields `[B, T, ...]`; T is the longest slice in the
      batch (at least `min_slice_length`), rounded up to a power of two when
      the slices differ in length, so that jitted consumers compile rarely.
    """
    validation.check_count('batch_size', batch_size, 1)
    rng = rng or self._rng
    stream = self.trajectory_stream(
      epochs,
      max_slice_length,
      sample_trajectories_uniformly,
      margin,
      include_final_state,
      rng,
    )
    if trajectory_stream_preprocessing_fn is not None:
      stream = trajectory_stream_preprocessing_fn(stream)
    yield from batching.slice_batches(
      stream,
      batch_size,
      max_slice_length,
      min_slice_length,
      margin,
      self._gamma,
      include_final_state,
      rng,
    )
