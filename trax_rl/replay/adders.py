"""Adders: trajectory slices -> replay items (n-step transitions, sequences).

`RLTask.collect(n_interactions=...)` hands out running episodes as slices
that continue in a later call, in no fixed order. One `StreamTracker` per
adder keeps, for each env of the vector env (a "stream"), what its episode
still owes to the next slice, and both adders read a slice's stream and
whether it starts an episode from the agent info the acting policy recorded
(`stream_info`: keys `STREAM` and `FIRST`):

- A slice that starts an episode on a stream whose previous episode never
  finished (the task restarts its envs when a run is restored) first closes
  that episode as if it had been truncated there: it still bootstraps.
- A slice without that info (e.g. the random episodes of epoch 0) is a
  whole episode piece of its own; if it ends in a cut, the cut is taken as a
  truncation.

Every adder reads a trajectory through `Trajectory.to_np`, the one
trajectory-to-arrays path of trax_rl.

`NStepTransitionAdder` (here) makes Acme's n-step transitions and
`sequence_adder.SequenceAdder` R2D2's overlapping, padded segments with
their stored recurrent core state.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import numpy as np

from trax_rl import trajectory as trajectory_lib
from trax_rl import types, validation

# New items enter at Acme's default priority (its adders' priority function
# returns 1.0; Reverb's prioritized selector samples them like any item of
# priority 1 until the learner writes their |TD|).
NEW_ITEM_PRIORITY = 1.0
STREAM = 'stream'  # Agent-info key: index of the env that played the step.
FIRST = 'first'  # Agent-info key: True where the step starts an episode.
_STREAM_KEYS = (STREAM, FIRST)
STATE_VERSION = 2


def stream_info(first: np.ndarray) -> dict[str, np.ndarray]:
  """The agent info a batched policy adds so that adders can join slices.

  Args:
    first: [N] bool, the `first` flags the policy was called with.

  Returns:
    {STREAM: [N] int32 env indices, FIRST: [N] bool}.
  """
  first = np.asarray(first, bool)
  return {STREAM: np.arange(len(first), dtype=np.int32), FIRST: first.copy()}


def origin(trajectory: trajectory_lib.Trajectory) -> tuple[int | None, bool]:
  """(stream, starts an episode) of a slice; (None, True) without the info."""
  infos = trajectory.agent_infos
  if not infos or STREAM not in infos[0]:
    return None, True
  return int(infos[0][STREAM]), bool(infos[0].get(FIRST, True))


class StreamTracker:
  """Per stream, what a running episode carries over to its next slice."""

  def __init__(self):
    self._running: dict[int, Any] = {}

  @property
  def streams(self) -> list[int]:
    """Streams whose episode is running."""
    return sorted(self._running)

  def open(
    self, trajectory: trajectory_lib.Trajectory
  ) -> tuple[int | None, Any, Any]:
    """Looks up the carried-over state of a new slice's stream.

    Returns:
      (stream or None, the state the slice continues or None, the state of
      an episode the slice cut off, to be closed as truncated, or None).
    """
    stream, first = origin(trajectory)
    if stream is None or stream not in self._running:
      return stream, None, None
    carried = self._running.pop(stream)
    return (stream, None, carried) if first else (stream, carried, None)

  def keep(self, stream: int, state: Any) -> None:
    """Holds `state` until the stream's next slice."""
    self._running[stream] = state

  def states(self) -> list[Any]:
    """Every carried-over state, by stream."""
    return [self._running[s] for s in self.streams]

  def drain(self) -> list[Any]:
    """Removes and returns every carried-over state, by stream."""
    states = self.states()
    self._running = {}
    return states

  def state_dict(self, encode: Callable[[Any], Any]) -> list[list[Any]]:
    """[[stream, encode(state)], ...] in stream order."""
    return [[s, encode(self._running[s])] for s in self.streams]

  def load_state_dict(
    self, state: list[list[Any]], decode: Callable[[Any], Any]
  ) -> None:
    """Restores what `state_dict` returned."""
    self._running = {int(s): decode(v) for s, v in state}


def slice_arrays(trajectory: trajectory_lib.Trajectory) -> dict[str, Any]:
  """A slice's arrays, read through `Trajectory.to_np`.

  Returns:
    {'observation': [T + 1, ...], 'action': [T, ...], 'reward': [T],
    'core': {agent-info entries other than STREAM and FIRST: [T, ...]}}.
  """
  data = trajectory.to_np(margin=1)
  steps = trajectory.n_steps
  fields = {
    'observation': data.observation,
    'action': data.action[:steps],
    'reward': data.reward[:steps],
  }
  info = data.agent_info or {}
  core = {k: v[:steps] for k, v in info.items() if k not in _STREAM_KEYS}
  return dict(fields, core=core)


def check_state(state: dict[str, Any], **expected: Any) -> None:
  """Checks an adder state's version and configuration.

  Raises:
    ValueError: they differ from this adder's.
  """
  found = {k: state.get(k) for k in ('version', *expected)}
  want = dict(version=STATE_VERSION, **expected)
  if found != want:
    raise ValueError(f'adder state has {found}; this adder has {want}')


class NStepTransitionAdder:
  """Makes n-step `types.Transition`s out of trajectory slices (Acme's).

  For step t of an episode with T steps and k = min(n_step, T - t):
    observation = o_t, action = a_t, next_observation = o_{t+k},
    reward = sum_{i<k} gamma**i * r_{t+i},
    discount = gamma**k, times 0 if the episode terminated at t + k = T.
  A truncated episode (time limit) bootstraps: its last transitions keep
  discount gamma**k. Steps of a running episode whose window reaches past
  the end of its slice wait for the slice that continues it.
  """

  def __init__(self, n_step: int, gamma: float):
    """Configures the adder.

    Args:
      n_step: n of the n-step transitions, >= 1.
      gamma: discount per step, in [0, 1].

    Raises:
      ValueError: on a bad n_step or gamma.
    """
    validation.check_count('n_step', n_step, 1)
    validation.check_unit('gamma', gamma)
    self._n = n_step
    self._gamma = float(gamma)
    self._streams = StreamTracker()

  @property
  def n_step(self) -> int:
    return self._n

  @property
  def pending_steps(self) -> int:
    """Steps held back until their episode continues."""
    return sum(len(p['action']) for p in self._streams.states())

  def add_trajectories(
    self, trajectories: Iterable[trajectory_lib.Trajectory]
  ) -> types.Transition | None:
    """Adds slices in collection order; returns the new transitions.

    Returns:
      A Transition of numpy arrays [N, ...], or None if N is 0.
    """
    parts = []
    for trajectory in trajectories:
      parts.extend(self._add(trajectory))
    return _concatenate(parts)

  def flush(self) -> types.Transition | None:
    """Emits every pending tail, bootstrapping at its cut (a truncation)."""
    pieces = self._streams.drain()
    return _concatenate(
      [self._emit(p, False, len(p['action'])) for p in pieces]
    )

  def _add(self, trajectory) -> list[types.Transition]:
    stream, carried, cut_off = self._streams.open(trajectory)
    parts = []
    if cut_off is not None:
      parts.append(self._emit(cut_off, False, len(cut_off['action'])))
    piece = slice_arrays(trajectory)
    if carried is not None:
      piece = {
        'observation': np.concatenate(
          [carried['observation'][:-1], piece['observation']]
        ),
        'action': np.concatenate(
          [carried['action'], piece['action'].astype(carried['action'].dtype)]
        ),
        'reward': np.concatenate([carried['reward'], piece['reward']]),
      }
    steps = len(piece['action'])
    if trajectory.done or stream is None:
      parts.append(self._emit(piece, trajectory.terminated, steps))
    else:
      ready = max(0, steps - self._n + 1)
      parts.append(self._emit(piece, False, ready))
      self._streams.keep(
        stream,
        {
          'observation': piece['observation'][ready:],
          'action': piece['action'][ready:],
          'reward': piece['reward'][ready:],
        },
      )
    return parts

  def _emit(self, piece, terminated: bool, count: int) -> types.Transition:
    """Transitions of the first `count` steps of `piece`."""
    steps = len(piece['action'])
    t = np.arange(count)
    window = t[:, None] + np.arange(self._n)[None, :]  # [count, n]
    valid = window < steps
    k = valid.sum(axis=1)  # min(n, steps - t)
    powers = self._gamma ** np.arange(self._n, dtype=np.float64)
    rewards = piece['reward'][np.minimum(window, max(steps - 1, 0))]
    reward = np.sum(np.where(valid, rewards * powers, 0.0), axis=1)
    discount = self._gamma ** k.astype(np.float64)
    if terminated:
      discount = np.where(t + k == steps, 0.0, discount)
    return types.Transition(
      observation=piece['observation'][t],
      action=piece['action'][t],
      reward=reward.astype(np.float32),
      discount=discount.astype(np.float32),
      next_observation=piece['observation'][t + k],
    )

  def state_dict(self) -> dict[str, Any]:
    """The pending tails, as numpy arrays and plain values."""
    return {
      'version': STATE_VERSION,
      'n_step': self._n,
      'gamma': self._gamma,
      'pending': self._streams.state_dict(dict),
    }

  def load_state_dict(self, state: dict[str, Any]) -> None:
    """Restores `state_dict()` of an adder with the same n_step and gamma.

    Raises:
      ValueError: the state is of another version or configuration.
    """
    check_state(state, n_step=self._n, gamma=self._gamma)
    self._streams.load_state_dict(state['pending'], dict)


def _concatenate(
  parts: Sequence[types.Transition],
) -> types.Transition | None:
  parts = [p for p in parts if len(p.reward)]
  if not parts:
    return None
  if len(parts) == 1:
    return parts[0]
  return types.Transition(*[np.concatenate(field) for field in zip(*parts)])


def as_stored(items: Any) -> Any:
  """Items with integer actions as int32, as the table stores them."""
  if np.issubdtype(items.action.dtype, np.integer):
    return items._replace(action=items.action.astype(np.int32))
  return items


def concatenate(chunks: list[Any]) -> Any:
  """The items of an epoch's chunks as one `[N, ...]` pytree, or None."""
  if len(chunks) <= 1:
    return chunks[0] if chunks else None
  return jax.tree.map(lambda *xs: np.concatenate(xs), *chunks)
