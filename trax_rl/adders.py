"""Adders: trajectories -> n-step transitions for a replay table.

RLTask hands out trajectories, and in `n_interactions` mode a running
episode comes in slices, one per collection. An adder keeps, per env (a
"stream"), the tail of a slice whose n-step windows reach past its cut and
joins it with the slice that continues it, so every step becomes exactly one
n-step transition, as Acme's `NStepTransitionAdder` makes them.

Which env a slice came from and whether it starts an episode are read from
the agent info a policy records (`stream_info`); slices without it are taken
as whole pieces (their cut, if any, is treated as a truncation).
"""

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from trax_rl import trajectory as trajectory_lib
from trax_rl import types

# Agent-info keys a policy fills (per step) so adders can join slices.
STREAM = 'stream'  # Index of the env of the vector env that acted.
FIRST = 'first'  # True where the step's observation started an episode.


def stream_info(first: np.ndarray) -> dict[str, np.ndarray]:
  """The agent info a batched policy returns for adders.

  Args:
    first: [N] bool, the `first` flags the policy was called with.

  Returns:
    {STREAM: [N] int32 env indices, FIRST: [N] bool}.
  """
  first = np.asarray(first, bool)
  return {STREAM: np.arange(len(first), dtype=np.int32), FIRST: first.copy()}


def origin(trajectory: trajectory_lib.Trajectory) -> tuple[int | None, bool]:
  """(stream, starts an episode) of a trajectory; (None, True) if unknown."""
  infos = trajectory.agent_infos
  if not infos or STREAM not in infos[0]:
    return None, True
  return int(infos[0][STREAM]), bool(infos[0].get(FIRST, True))


class _Piece:
  """Consecutive steps of one episode: T actions, T rewards, T + 1 obs."""

  def __init__(self, observations, actions, rewards):
    self.observations = np.asarray(observations)
    self.actions = np.asarray(actions)
    self.rewards = np.asarray(rewards, np.float32)

  @classmethod
  def of(cls, trajectory: trajectory_lib.Trajectory) -> '_Piece':
    example = np.asarray(trajectory.actions[0]) if trajectory.n_steps else 0
    actions = (
      np.stack([np.asarray(a) for a in trajectory.actions])
      if trajectory.n_steps
      else np.zeros((0,) + np.shape(example), np.asarray(example).dtype)
    )
    return cls(np.stack(trajectory.observations), actions, trajectory.rewards)

  @property
  def n_steps(self) -> int:
    return len(self.actions)

  def join(self, later: '_Piece') -> '_Piece':
    """This piece followed by `later`, which starts at our last obs."""
    return _Piece(
      np.concatenate([self.observations[:-1], later.observations]),
      np.concatenate([self.actions, later.actions.astype(self.actions.dtype)]),
      np.concatenate([self.rewards, later.rewards]),
    )

  def tail(self, start: int) -> '_Piece':
    return _Piece(
      self.observations[start:], self.actions[start:], self.rewards[start:]
    )


class NStepTransitionAdder:
  """Makes n-step `types.Transition`s out of trajectories.

  For step t of an episode with T steps and k = min(n_step, T - t):
    observation = o_t, action = a_t, next_observation = o_{t+k},
    reward = sum_{i<k} gamma**i * r_{t+i},
    discount = gamma**k, times 0 if the episode terminated at t + k = T.
  A truncated episode (time limit) bootstraps: its last transitions keep
  discount gamma**k. Steps of a running episode whose window reaches past
  the end of the slice wait for the slice that continues it.
  """

  def __init__(self, n_step: int, gamma: float):
    """Configures the adder.

    Args:
      n_step: n of the n-step transitions, >= 1.
      gamma: discount per step, in [0, 1].

    Raises:
      ValueError: on a bad n_step or gamma.
    """
    if isinstance(n_step, bool) or not isinstance(n_step, int) or n_step < 1:
      raise ValueError(f'n_step must be an integer >= 1, got {n_step!r}')
    if not 0.0 <= gamma <= 1.0:
      raise ValueError(f'gamma must be in [0, 1], got {gamma}')
    self._n = n_step
    self._gamma = float(gamma)
    self._pending: dict[int, _Piece] = {}

  @property
  def n_step(self) -> int:
    return self._n

  @property
  def pending_steps(self) -> int:
    """Steps held back until their episode continues."""
    return sum(p.n_steps for p in self._pending.values())

  def add_trajectories(
    self, trajectories: Iterable[trajectory_lib.Trajectory]
  ) -> types.Transition | None:
    """Adds trajectories in collection order; returns the new transitions.

    The stream and episode start of each trajectory come from `origin`.

    Returns:
      A Transition of numpy arrays [N, ...], or None if N is 0.
    """
    parts = []
    for traj in trajectories:
      stream, first = origin(traj)
      parts.extend(self._add(traj, stream, first))
    return _concatenate(parts)

  def add(
    self,
    trajectory: trajectory_lib.Trajectory,
    stream: int | None = None,
    first: bool = True,
  ) -> types.Transition | None:
    """Adds one trajectory.

    Args:
      trajectory: steps of one episode, in order.
      stream: the env it came from; None takes it as a whole piece.
      first: whether it starts an episode. If not, it continues the pending
        tail of `stream`; if so, that tail is flushed first.

    Returns:
      The transitions now complete [N, ...], or None.
    """
    return _concatenate(self._add(trajectory, stream, first))

  def flush(self) -> types.Transition | None:
    """Emits every pending tail, bootstrapping at its cut (a truncation)."""
    parts = [self._emit(p, 'cut', p.n_steps) for p in self._pending.values()]
    self._pending = {}
    return _concatenate([p for p in parts if p is not None])

  def _add(self, trajectory, stream, first) -> list[types.Transition]:
    parts = []
    piece = _Piece.of(trajectory)
    pending = self._pending.pop(stream, None) if stream is not None else None
    if pending is not None:
      if first:  # Its episode never continued (e.g. after a restore).
        parts.append(self._emit(pending, 'cut', pending.n_steps))
      else:
        piece = pending.join(piece)
    if trajectory.terminated:
      parts.append(self._emit(piece, 'terminated', piece.n_steps))
    elif trajectory.truncated or stream is None:
      parts.append(self._emit(piece, 'truncated', piece.n_steps))
    else:
      ready = max(0, piece.n_steps - self._n + 1)
      parts.append(self._emit(piece, 'cut', ready))
      self._pending[stream] = piece.tail(ready)
    return [p for p in parts if p is not None]

  def _emit(
    self, piece: _Piece, end: str, count: int
  ) -> types.Transition | None:
    """Transitions of the first `count` steps of `piece`."""
    if count <= 0:
      return None
    steps = piece.n_steps
    t = np.arange(count)
    window = t[:, None] + np.arange(self._n)[None, :]  # [count, n]
    valid = window < steps
    k = valid.sum(axis=1)  # min(n, steps - t)
    powers = self._gamma ** np.arange(self._n, dtype=np.float64)
    rewards = piece.rewards[np.minimum(window, steps - 1)]
    reward = np.sum(np.where(valid, rewards * powers, 0.0), axis=1)
    discount = self._gamma ** k.astype(np.float64)
    if end == 'terminated':
      discount = np.where(t + k == steps, 0.0, discount)
    return types.Transition(
      observation=piece.observations[t],
      action=piece.actions[t],
      reward=reward.astype(np.float32),
      discount=discount.astype(np.float32),
      next_observation=piece.observations[t + k],
    )

  def state_dict(self) -> dict[str, Any]:
    """The pending tails, as numpy arrays and plain values."""
    return {
      'n_step': self._n,
      'gamma': self._gamma,
      'pending': [
        [stream, p.observations, p.actions, p.rewards]
        for stream, p in sorted(self._pending.items())
      ],
    }

  def load_state_dict(self, state: dict[str, Any]) -> None:
    """Restores `state_dict()` of an adder with the same n_step and gamma.

    Raises:
      ValueError: the state is of an adder configured differently.
    """
    if state['n_step'] != self._n or state['gamma'] != self._gamma:
      raise ValueError(
        f'adder state has n_step={state["n_step"]}, gamma={state["gamma"]}; '
        f'this adder has n_step={self._n}, gamma={self._gamma}'
      )
    self._pending = {
      int(stream): _Piece(obs, actions, rewards)
      for stream, obs, actions, rewards in state['pending']
    }


def _concatenate(
  parts: Sequence[types.Transition],
) -> types.Transition | None:
  if not parts:
    return None
  if len(parts) == 1:
    return parts[0]
  return types.Transition(*[np.concatenate(field) for field in zip(*parts)])
