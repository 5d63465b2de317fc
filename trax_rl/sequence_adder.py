"""Sequence adder: trajectory slices -> overlapping R2D2 `Segment`s.

Each env's episode is cut into segments of `burn_in_length + trace_length +
1` steps that start every `sequence_period` steps (positions 0, P, 2P, ... of
the episode), as Acme's R2D2 sequence adder with `EndBehavior.TRUNCATE` and
zero padding. A segment stores the recurrent core state the actor had just
before its first observation. When an episode ends, its final observation
becomes a step of its own (mask 0) and one last segment, padded with zeros
and mask 0, covers the steps that no full segment reached.

`RLTask.collect(n_interactions=...)` returns running episodes as cut slices
that continue in the next call, in no fixed order. The adder therefore finds
each slice's env and whether it starts an episode in the agent info the
actor recorded (`env`, `first`) and keeps, per env, the steps not yet cut
into segments. That state is part of `state_dict`. A slice that starts an
episode on an env whose previous episode never finished (the task restarts
its envs when a run is restored) first closes that episode as if it had
been truncated there: its last step still bootstraps.
"""

from collections.abc import Callable, Iterable
from typing import Any

import jax
import numpy as np

from trax_rl import trajectory as trajectory_lib
from trax_rl import types

ENV_KEY = 'env'  # Agent-info key: index of the env that played the step.
FIRST_KEY = 'first'  # Agent-info key: True where the step starts an episode.
_STATE_VERSION = 1
_FIELDS = ('observation', 'action', 'reward', 'discount', 'mask')


class _Episode:
  """The steps of one env's running episode not yet cut into segments."""

  def __init__(self, position: int = 0):
    self.position = position  # Episode step index of the first kept step.
    self.steps = {name: [] for name in _FIELDS}
    self.cores: list[dict[str, np.ndarray]] = []
    self.last_observation = None  # Observation after the last kept step.

  def __len__(self) -> int:
    return len(self.cores)

  def append(self, observation, action, reward, discount, mask, core) -> None:
    values = (observation, action, reward, discount, mask)
    for name, value in zip(_FIELDS, values):
      self.steps[name].append(np.asarray(value))
    self.cores.append(core)

  def drop(self, n: int) -> None:
    for name in _FIELDS:
      del self.steps[name][:n]
    del self.cores[:n]
    self.position += n


class SequenceAdder:
  """Cuts trajectory slices into overlapping, padded `types.Segment`s."""

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
      core_state_fn: builds a segment's core state from the agent info of its
        first step without the `env` and `first` entries (default: that dict).

    Raises:
      ValueError: naming a bad argument.
    """
    for name, value, low in (
      ('burn_in_length', burn_in_length, 0),
      ('trace_length', trace_length, 1),
      ('sequence_period', sequence_period, 1),
    ):
      if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f'{name} must be an integer >= {low}, got {value!r}')
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
    self._episodes: dict[int, _Episode] = {}

  @property
  def sequence_length(self) -> int:
    """Steps per segment: burn_in_length + trace_length + 1."""
    return self._length

  @property
  def running_envs(self) -> list[int]:
    """Envs whose episode is running (it has steps kept for later)."""
    return sorted(self._episodes)

  def add_trajectories(
    self, trajectories: Iterable[trajectory_lib.Trajectory]
  ) -> list[types.Segment]:
    """`add` for each trajectory, in order; all new segments."""
    segments = []
    for trajectory in trajectories:
      segments.extend(self.add(trajectory))
    return segments

  def add(self, trajectory: trajectory_lib.Trajectory) -> list[types.Segment]:
    """Adds one trajectory slice; returns the segments it completes.

    Args:
      trajectory: a slice from `RLTask.collect` whose agent infos hold `env`
        and `first` (as the R2D2 actor records them) and the core state.

    Returns:
      Segments with `[L, ...]` numpy fields, oldest first.

    Raises:
      ValueError: the agent info lacks `env` or `first`.
    """
    if not trajectory.n_steps:
      return []
    info = trajectory.agent_infos[0]
    if ENV_KEY not in info or FIRST_KEY not in info:
      raise ValueError(
        f'the sequence adder needs the agent info entries {ENV_KEY!r} and '
        f'{FIRST_KEY!r} in every step, got {sorted(info)}'
      )
    env, first = int(info[ENV_KEY]), bool(info[FIRST_KEY])
    segments = []
    episode = self._episodes.pop(env, None)
    if episode is not None and first:
      segments += self._finish(episode)  # Its episode was cut off.
      episode = None
    episode = episode or _Episode()
    last = trajectory.n_steps - 1
    for t in range(trajectory.n_steps):
      terminated = trajectory.terminated and t == last
      core = {
        k: np.asarray(v)
        for k, v in trajectory.agent_infos[t].items()
        if k not in (ENV_KEY, FIRST_KEY)
      }
      episode.append(
        trajectory.observations[t],
        trajectory.actions[t],
        np.float32(trajectory.rewards[t]),
        np.float32(self._gamma * (1.0 - terminated)),
        np.float32(1.0),
        core,
      )
      segments += self._cut_full(episode)
    episode.last_observation = np.asarray(trajectory.last_observation)
    if trajectory.done:
      segments += self._finish(episode)
    else:
      self._episodes[env] = episode
    return segments

  def _cut_full(self, episode: _Episode) -> list[types.Segment]:
    segments = []
    while len(episode) >= self._length:
      segments.append(self._segment(episode))
      episode.drop(self._period)
    return segments

  def _finish(self, episode: _Episode) -> list[types.Segment]:
    """Ends an episode: its final observation, then the last segments."""
    episode.append(
      episode.last_observation,
      np.zeros_like(episode.steps['action'][-1]),
      np.float32(0.0),
      np.float32(0.0),
      np.float32(0.0),
      {k: np.zeros_like(v) for k, v in episode.cores[-1].items()},
    )
    segments = self._cut_full(episode)
    # One padded segment from the next start, if it has a real step (the
    # start after it would begin past the episode's end or repeat it).
    if episode.steps['mask'][0] > 0:
      segments.append(self._segment(episode))
    return segments

  def _segment(self, episode: _Episode) -> types.Segment:
    n = min(len(episode), self._length)
    fields = {}
    for name in _FIELDS:
      values = np.stack(episode.steps[name][:n])
      pad = np.zeros((self._length - n,) + values.shape[1:], values.dtype)
      fields[name] = np.concatenate([values, pad])
    return types.Segment(
      **fields, core_state=self._core_state_fn(dict(episode.cores[0]))
    )

  def state_dict(self) -> dict[str, Any]:
    """The running episodes' kept steps (numpy arrays and plain values)."""
    episodes = []
    for env, episode in sorted(self._episodes.items()):
      episodes.append(
        {
          'env': env,
          'position': episode.position,
          'steps': {k: np.stack(v) for k, v in episode.steps.items()},
          'cores': {
            k: np.stack([c[k] for c in episode.cores]) for k in episode.cores[0]
          },
          'last_observation': episode.last_observation,
        }
      )
    return {'version': _STATE_VERSION, 'episodes': episodes}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    """Restores what `state_dict` returned.

    Raises:
      ValueError: the state is of another version.
    """
    if state.get('version') != _STATE_VERSION:
      raise ValueError(
        f'unsupported sequence adder state version {state.get("version")!r}'
      )
    self._episodes = {}
    for saved in state['episodes']:
      episode = _Episode(int(saved['position']))
      n = len(saved['steps']['mask'])
      for name in _FIELDS:
        episode.steps[name] = list(saved['steps'][name])
      episode.cores = [
        {k: v[i] for k, v in saved['cores'].items()} for i in range(n)
      ]
      episode.last_observation = saved['last_observation']
      self._episodes[int(saved['env'])] = episode


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


def stack(segments: list[types.Segment]) -> types.Segment:
  """Stacks segments into a batch `[B, L, ...]` (core state `[B, ...]`)."""
  return jax.tree.map(lambda *xs: np.stack(xs), *segments)
