"""R2D2's sequence adder: trajectory slices -> overlapping `Segment`s.

Slices are joined per stream as in `adders` (same agent-info keys, same
handling of slices without them, same `Trajectory.to_np` reading).
"""

from collections.abc import Callable, Iterable
from typing import Any

import jax
import numpy as np

from trax_rl import trajectory as trajectory_lib
from trax_rl import types, validation
from trax_rl.replay import adders

_SEGMENT_FIELDS = ('observation', 'action', 'reward', 'discount', 'mask')


class SequenceAdder:
  """Cuts trajectory slices into overlapping, padded R2D2 `types.Segment`s.

  Each episode is cut into segments of `burn_in_length + trace_length + 1`
  steps that start every `sequence_period` steps (positions 0, P, 2P, ...),
  as Acme's R2D2 sequence adder with `EndBehavior.TRUNCATE` and zero
  padding. A segment stores the recurrent core state the actor had just
  before its first observation (the agent info entries other than `STREAM`
  and `FIRST`). When an episode ends, its final observation becomes a step
  of its own (mask 0) and one last segment, padded with zeros and mask 0,
  covers the steps no full segment reached.
  """

  def __init__(
    self,
    burn_in_length: int,
    trace_length: int,
    sequence_period: int,
    gamma: float,
    core_state_fn: Callable[[dict[str, np.ndarray]], Any] = dict,
  ):
    """Configures the cut.

    Args:
      burn_in_length: steps at the start of a segment that only warm up the
        core state, >= 0.
      trace_length: steps after the burn-in that the loss learns on, >= 1.
      sequence_period: a segment starts every this many steps, in [1,
        burn_in_length + trace_length + 1]; less than the length gives
        overlapping segments.
      gamma: discount per step; `Segment.discount` = gamma * (1 - terminated).
      core_state_fn: builds a segment's core state from the core entries of
        its first step's agent info (empty for a slice recorded without them).

    Raises:
      ValueError: naming a bad argument.
    """
    validation.check_count('burn_in_length', burn_in_length, 0)
    validation.check_count('trace_length', trace_length, 1)
    validation.check_count('sequence_period', sequence_period, 1)
    validation.check_unit('gamma', gamma)
    length = burn_in_length + trace_length + 1
    if sequence_period > length:
      raise ValueError(
        f'sequence_period must be <= burn_in_length + trace_length + 1 = '
        f'{length}, got {sequence_period}: longer periods skip steps'
      )
    self._length = length
    self._period = sequence_period
    self._gamma = float(gamma)
    self._core_state_fn = core_state_fn
    self._streams = adders.StreamTracker()

  @property
  def sequence_length(self) -> int:
    """Steps per segment: burn_in_length + trace_length + 1."""
    return self._length

  @property
  def running_streams(self) -> list[int]:
    """Streams whose episode is running (it has steps kept for later)."""
    return self._streams.streams

  def add_trajectories(
    self, trajectories: Iterable[trajectory_lib.Trajectory]
  ) -> list[types.Segment]:
    """Adds slices in collection order; returns the segments they complete.

    Returns:
      Segments with `[L, ...]` numpy fields, oldest first.
    """
    segments = []
    for trajectory in trajectories:
      if trajectory.n_steps:
        segments.extend(self._add(trajectory))
    return segments

  def _add(self, trajectory) -> list[types.Segment]:
    stream, carried, cut_off = self._streams.open(trajectory)
    segments = [] if cut_off is None else self._finish(cut_off)
    arrays = adders.slice_arrays(trajectory)
    n = trajectory.n_steps
    discount = np.full(n, self._gamma, np.float32)
    if trajectory.terminated:
      discount[-1] = 0.0
    new = {
      'observation': arrays['observation'][:n],
      'action': arrays['action'],
      'reward': arrays['reward'],
      'discount': discount,
      'mask': np.ones(n, np.float32),
      'core': arrays['core'],
    }
    episode = new if carried is None else _join(carried, new)
    episode['last_observation'] = arrays['observation'][n]
    episode, segments_now = self._cut_full(episode)
    segments += segments_now
    if trajectory.done or stream is None:
      segments += self._finish(episode)
    else:
      self._streams.keep(stream, episode)
    return segments

  def _cut_full(self, episode) -> tuple[dict[str, Any], list[types.Segment]]:
    segments = []
    while len(episode['mask']) >= self._length:
      segments.append(self._segment(episode))
      episode = _drop(episode, self._period)
    return episode, segments

  def _finish(self, episode) -> list[types.Segment]:
    """Ends an episode: its final observation, then the last segments."""
    last = {
      'observation': episode['last_observation'][None],
      'action': np.zeros_like(episode['action'][-1:]),
      'reward': np.zeros(1, np.float32),
      'discount': np.zeros(1, np.float32),
      'mask': np.zeros(1, np.float32),
      'core': {k: np.zeros_like(v[-1:]) for k, v in episode['core'].items()},
    }
    episode, segments = self._cut_full(_join(episode, last))
    # One padded segment from the next start, if it has a real step (the
    # start after it would begin past the episode's end or repeat it).
    if episode['mask'][0] > 0:
      segments.append(self._segment(episode))
    return segments

  def _segment(self, episode) -> types.Segment:
    n = min(len(episode['mask']), self._length)
    fields = {}
    for name in _SEGMENT_FIELDS:
      values = episode[name][:n]
      pad = np.zeros((self._length - n,) + values.shape[1:], values.dtype)
      fields[name] = np.concatenate([values, pad])
    core = {k: v[0] for k, v in episode['core'].items()}
    return types.Segment(**fields, core_state=self._core_state_fn(core))

  def state_dict(self) -> dict[str, Any]:
    """The running episodes' kept steps (numpy arrays and plain values)."""
    return {
      'version': adders.STATE_VERSION,
      'sequence_length': self._length,
      'episodes': self._streams.state_dict(dict),
    }

  def load_state_dict(self, state: dict[str, Any]) -> None:
    """Restores what `state_dict` returned.

    Raises:
      ValueError: the state is of another version or sequence length.
    """
    adders.check_state(state, sequence_length=self._length)
    self._streams.load_state_dict(state['episodes'], dict)


def _join(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
  """Steps of `earlier` followed by those of `later` (a segment episode)."""
  joined = {
    name: np.concatenate(
      [earlier[name], later[name].astype(earlier[name].dtype)]
    )
    for name in _SEGMENT_FIELDS
  }
  joined['core'] = {
    k: np.concatenate([v, later['core'][k]]) for k, v in earlier['core'].items()
  }
  joined['last_observation'] = later.get(
    'last_observation', earlier['last_observation']
  )
  return joined


def _drop(episode: dict[str, Any], n: int) -> dict[str, Any]:
  """The episode without its first n steps."""
  dropped = {name: episode[name][n:] for name in _SEGMENT_FIELDS}
  dropped['core'] = {k: v[n:] for k, v in episode['core'].items()}
  dropped['last_observation'] = episode['last_observation']
  return dropped


def zero_segment(
  observation: np.ndarray, action: np.ndarray, length: int, core_state: Any
) -> types.Segment:
  """An all-zero segment `[length, ...]` shaped like the given examples.

  Args:
    observation: one observation, for shape and dtype.
    action: one action, for shape and dtype.
    length: L.
    core_state: one (unbatched) core state pytree; zeroed.

  Returns:
    The segment (for compiling an update without data).
  """
  zeros = lambda x: np.zeros((length,) + np.shape(x), np.asarray(x).dtype)
  return types.Segment(
    observation=zeros(observation),
    action=zeros(action),
    reward=np.zeros(length, np.float32),
    discount=np.zeros(length, np.float32),
    mask=np.zeros(length, np.float32),
    core_state=jax.tree.map(lambda x: np.zeros_like(np.asarray(x)), core_state),
  )


def stack(items: list[Any]) -> Any:
  """Stacks items (e.g. segments) into a batch `[B, ...]` on every leaf."""
  return jax.tree.map(lambda *xs: np.stack(xs), *items)
