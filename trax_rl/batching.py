"""Padded `[B, T, ...]` batches of trajectory slices (Trax's batching)."""

from collections.abc import Callable, Iterator

import numpy as np

from trax_rl import trajectory as trajectory_lib


def batch_from_trajectories(
  trajectories: list[trajectory_lib.Trajectory],
  batch_size: int,
  max_slice_length: int | None,
  margin: int,
  gamma: float,
  rng: np.random.Generator,
) -> trajectory_lib.TimeStepBatch:
  """A `[B, T, ...]` batch of random slices of the given trajectories."""
  picks = rng.integers(len(trajectories), size=batch_size)
  return stack_padded(
    [
      random_slice(trajectories[i], max_slice_length, margin, gamma, False, rng)
      for i in picks
    ],
    None,
  )


def n_slices(
  traj: trajectory_lib.Trajectory,
  max_slice_length: int | None,
  margin: int,
  include_final_state: bool,
) -> int:
  """How many slices of up to max_slice_length a trajectory has."""
  if not max_slice_length:
    return 1
  # T steps with margin m give T + m rows; slices of L start at 0..T+m-L.
  n = len(traj) + margin - max_slice_length + int(include_final_state)
  return max(1, n)


def random_slice(
  traj, max_slice_length, margin, gamma, include_final_state, rng
) -> trajectory_lib.TimeStepBatch:
  start = rng.integers(
    n_slices(traj, max_slice_length, margin, include_final_state)
  )
  data = traj.to_np(margin, gamma)
  end = start + (max_slice_length or data.observation.shape[0])
  return map_fields(lambda x: x[start:end], data)


def map_fields(
  fn, tsb: trajectory_lib.TimeStepBatch
) -> trajectory_lib.TimeStepBatch:
  def apply(x):
    if x is None:
      return None
    if isinstance(x, dict):
      return {k: apply(v) for k, v in x.items()}
    if isinstance(x, tuple):
      return type(x)(*[apply(v) for v in x])
    return fn(x)

  return trajectory_lib.TimeStepBatch(*[apply(v) for v in tsb])


def power_of_two_at_least(n: int) -> int:
  """The least power of two >= n (1 for n <= 1): few sizes, few compiles."""
  return 1 << max(int(n) - 1, 0).bit_length()


def stack_padded(slices, min_slice_length) -> trajectory_lib.TimeStepBatch:
  """Stacks `[T_i, ...]` slices into a `[B, T, ...]` TimeStepBatch.

  T is the longest slice (at least `min_slice_length`), rounded up to a
  power of two when the slices differ in length; padding rows have done
  True and mask 0.
  """
  lengths = [s.observation.shape[0] for s in slices]
  longest = max(lengths)
  if min_slice_length:
    longest = max(longest, min_slice_length)
  if min(lengths) != longest:
    longest = power_of_two_at_least(longest)

  def stack(*xs):
    if xs[0] is None:
      return None
    if isinstance(xs[0], dict):
      return {k: stack(*[x[k] for x in xs]) for k in xs[0]}
    if isinstance(xs[0], tuple):
      return type(xs[0])(
        *[stack(*[x[i] for x in xs]) for i in range(len(xs[0]))]
      )
    xs = [np.asarray(x) for x in xs]
    if xs[0].ndim == 0:
      return np.stack(xs)
    out = np.zeros((len(xs), longest) + xs[0].shape[1:], xs[0].dtype)
    for i, x in enumerate(xs):
      out[i, : len(x)] = x
    return out

  batch = trajectory_lib.TimeStepBatch(
    *[stack(*field) for field in zip(*slices)]
  )
  # Padding past a slice's end is not a real step: done True, mask 0.
  done = batch.done.copy()
  for i, n in enumerate(lengths):
    done[i, n:] = True
  return batch._replace(done=done)


def sample_trajectories(
  epochs: list[list[trajectory_lib.Trajectory]],
  n_slices_of: Callable[[trajectory_lib.Trajectory], int],
  uniformly: bool,
  rng: np.random.Generator,
) -> Iterator[trajectory_lib.Trajectory]:
  """Endless draws of trajectories from `epochs`.

  An epoch is drawn in proportion to its number of slices; a trajectory in
  it uniformly (`uniformly`) or in proportion to its number of slices.
  Epochs are drawn in chunks of 64, cheaper than one call per draw.
  """
  counts = [np.array([n_slices_of(t) for t in e], np.float64) for e in epochs]
  totals = np.array([c.sum() for c in counts])
  while True:
    for k in rng.choice(len(epochs), size=64, p=totals / totals.sum()):
      if uniformly:
        i = rng.integers(len(epochs[k]))
      else:
        i = rng.choice(len(epochs[k]), p=counts[k] / totals[k])
      yield epochs[k][i]


def slice_batches(
  stream: Iterator[trajectory_lib.Trajectory],
  batch_size: int,
  max_slice_length: int | None,
  min_slice_length: int | None,
  margin: int,
  gamma: float,
  include_final_state: bool,
  rng: np.random.Generator,
) -> Iterator[trajectory_lib.TimeStepBatch]:
  """Padded `[B, T, ...]` batches of one random slice per streamed trajectory.

  See `RLTask.trajectory_batch_stream` for the arguments.
  """
  while True:
    slices = []
    for traj in stream:
      slices.append(
        random_slice(
          traj, max_slice_length, margin, gamma, include_final_state, rng
        )
      )
      if len(slices) == batch_size:
        break
    yield stack_padded(slices, min_slice_length)
