"""Trajectories: one episode (or a slice of one) of env interaction."""

from typing import Any, NamedTuple

import numpy as np

from trax_rl import advantages, types


class EnvInfo(NamedTuple):
  """Per-step masks, as Trax's: which steps the agent controls / discounts."""

  control_mask: Any = 1
  discount_mask: Any = 1


class TimeStepBatch(NamedTuple):
  """A trajectory (slice) as arrays; Trax's layout, `[T, ...]` or `[B, T, ...]`.

  `done[t]` is True where the episode *terminated* at step t (no bootstrap past
  it). A time-limit truncation keeps `done` False, so estimators bootstrap from
  the value of the last observation. Padding steps (the margin) have mask 0 and
  done True.
  """

  observation: Any
  action: Any
  reward: Any
  done: Any
  mask: Any
  dist_inputs: Any
  env_info: EnvInfo
  return_: Any
  agent_info: Any = None  # dict[str, array] of what the policy recorded


class Trajectory:
  """Observations, actions, rewards and agent info of one episode slice.

  A trajectory of T steps holds T + 1 observations (the last one is the
  observation after the last action). `terminated` and `truncated` describe
  how the episode ended; both False means the slice was cut (at an epoch
  boundary) and the episode goes on in the next slice.
  """

  def __init__(self, observation: Any):
    self._observations = [np.asarray(observation)]
    self._actions = []
    self._rewards = []
    self._agent_infos = []
    self.terminated = False
    self.truncated = False
    self._cache = {}

  def __len__(self) -> int:
    """Number of observations (steps + 1), as Trax's."""
    return len(self._observations)

  @property
  def n_steps(self) -> int:
    return len(self._actions)

  @property
  def done(self) -> bool:
    return self.terminated or self.truncated

  @property
  def last_observation(self) -> np.ndarray:
    return self._observations[-1]

  observations = types.read_only('_observations')

  actions = types.read_only('_actions')

  rewards = types.read_only('_rewards')

  agent_infos = types.read_only('_agent_infos')

  @property
  def total_return(self) -> float:
    """Undiscounted sum of rewards."""
    return float(np.sum(self._rewards)) if self._rewards else 0.0

  def extend(
    self,
    action: Any,
    reward: float,
    new_observation: Any,
    terminated: bool = False,
    truncated: bool = False,
    agent_info: dict[str, Any] | None = None,
  ) -> None:
    """Appends one step: `action` taken at the last observation."""
    if self.done:
      raise ValueError('cannot extend a finished trajectory')
    self._actions.append(action)
    self._rewards.append(float(reward))
    self._observations.append(np.asarray(new_observation))
    self._agent_infos.append(agent_info or {})
    self.terminated = bool(terminated)
    self.truncated = bool(truncated)
    self._cache.clear()

  def suffix(self, length: int) -> 'Trajectory':
    """The last `length` observations (and the steps between them)."""
    if length < 1:
      raise ValueError(f'length must be >= 1, got {length}')
    n = min(length - 1, self.n_steps)
    t = Trajectory(self._observations[-1])
    t._observations = self._observations[-(n + 1) :]
    t._actions = self._actions[len(self._actions) - n :]
    t._rewards = self._rewards[len(self._rewards) - n :]
    t._agent_infos = self._agent_infos[len(self._agent_infos) - n :]
    t.terminated, t.truncated = self.terminated, self.truncated
    return t

  def to_np(self, margin: int = 1, gamma: float = 1.0) -> TimeStepBatch:
    """The trajectory as a `TimeStepBatch` of `[T + margin, ...]` arrays.

    Args:
      margin: padding steps after the end (mask 0, done True), so networks
        see the final observation; with margin 0 the last observation is
        dropped and every field has length T.
      gamma: discount for the `return_` field (rewards-to-go, no bootstrap).

    Returns:
      The arrays; cached until the trajectory grows.
    """
    key = (margin, gamma)
    if key not in self._cache:
      self._cache[key] = self._to_np(margin, gamma)
    return self._cache[key]

  def _to_np(self, margin: int, gamma: float) -> TimeStepBatch:
    if margin < 0:
      raise ValueError(f'margin must be >= 0, got {margin}')
    steps = self.n_steps
    length = steps + margin
    obs = np.stack(self._observations)
    if margin == 0:
      obs = obs[:steps]
    elif margin > 1:
      pad = np.zeros((margin - 1,) + obs.shape[1:], obs.dtype)
      obs = np.concatenate([obs, pad])

    def padded(values, dtype=None):
      arr = np.asarray(values, dtype)
      if arr.ndim == 0 or arr.shape[0] != steps:
        arr = arr.reshape((steps,) + arr.shape[1:])
      pad = np.zeros((margin,) + arr.shape[1:], arr.dtype)
      return np.concatenate([arr, pad])

    example_action = self._actions[0] if self._actions else 0
    actions = (
      np.stack([np.asarray(a) for a in self._actions])
      if steps
      else np.zeros(
        (0,) + np.shape(example_action), np.asarray(example_action).dtype
      )
    )
    done = np.zeros(length, bool)
    done[steps:] = True
    if steps and self.terminated:
      done[steps - 1] = True
    mask = np.zeros(length, np.float32)
    mask[:steps] = 1.0
    rewards = np.asarray(self._rewards, np.float32)
    agent_info = {}
    if steps:
      for name in self._agent_infos[0]:
        agent_info[name] = padded(
          np.stack([np.asarray(i[name]) for i in self._agent_infos])
        )
    return TimeStepBatch(
      observation=obs,
      action=padded(actions),
      reward=padded(rewards),
      done=done,
      mask=mask,
      dist_inputs=agent_info.get('dist_inputs'),
      env_info=EnvInfo(
        control_mask=np.ones(length, np.float32),
        discount_mask=np.ones(length, np.float32),
      ),
      return_=padded(advantages.discounted_returns(rewards, np.float32(gamma))),
      agent_info=agent_info,
    )

  def state_dict(self) -> dict[str, Any]:
    """Numpy arrays and plain values only, for the restricted unpickler."""
    agent_info = {}
    if self._agent_infos and self._agent_infos[0]:
      agent_info = {
        name: np.stack([np.asarray(i[name]) for i in self._agent_infos])
        for name in self._agent_infos[0]
      }
    return {
      'observations': np.stack(self._observations),
      'actions': (
        np.stack([np.asarray(a) for a in self._actions])
        if self._actions
        else np.zeros((0,), np.int64)
      ),
      'rewards': np.asarray(self._rewards, np.float32),
      'agent_info': agent_info,
      'terminated': self.terminated,
      'truncated': self.truncated,
    }

  @classmethod
  def from_state_dict(cls, state: dict[str, Any]) -> 'Trajectory':
    observations = state['observations']
    t = cls(observations[0])
    t._observations = list(observations)
    t._actions = list(state['actions'])
    t._rewards = [float(r) for r in state['rewards']]
    infos = state['agent_info']
    t._agent_infos = [
      {k: v[i] for k, v in infos.items()} for i in range(len(t._actions))
    ]
    t.terminated = bool(state['terminated'])
    t.truncated = bool(state['truncated'])
    return t
