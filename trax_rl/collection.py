"""Lockstep collection: one batched policy call per step of a vector env."""

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from trax_rl import env_state
from trax_rl import trajectory as trajectory_lib

_LOG = logging.getLogger(__name__)

# policy(observation[N, ...], first[N]) -> (action[N, ...], {name: [N, ...]})
# `first[i]` is True where env i's observation starts a new episode.
BatchPolicy = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, dict]]


@dataclasses.dataclass
class CollectResult:
  """What one collection produced."""

  trajectories: list[trajectory_lib.Trajectory]
  episode_returns: list[float]  # Full returns of episodes that ended.
  n_interactions: int
  episode_lengths: list[int] = dataclasses.field(default_factory=list)


class Collector:
  """Steps a vector env in lockstep with one batched policy call per step."""

  def __init__(self, vector_env: gym.vector.VectorEnv):
    self.env = vector_env
    self.n = vector_env.num_envs
    self.obs = None  # Current observation of each env; None before a reset.
    self.trajs = [None] * self.n
    self.first = np.ones(self.n, bool)
    self.ep_return = np.zeros(self.n)
    self.ep_len = np.zeros(self.n, np.int64)
    # Observations with a NaN or inf seen so far (float spaces only).
    self.check_finite = np.issubdtype(
      vector_env.single_observation_space.dtype or np.uint8, np.floating
    )
    self.n_nonfinite = 0
    # Whether episodes run on into the next collection (n_interactions).
    self.continuing = False

  def _count_nonfinite(self, obs: np.ndarray) -> None:
    """Counts the rows of `obs` [N, ...] that hold a NaN or an inf."""
    if self.check_finite and not np.isfinite(obs).all():
      finite = np.isfinite(obs.reshape(len(obs), -1)).all(axis=1)
      self.n_nonfinite += int((~finite).sum())

  def reset(self, rng: np.random.Generator) -> None:
    seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=self.n)]
    self.obs, _ = self.env.reset(seed=seeds)
    self.obs = np.array(self.obs)
    self._count_nonfinite(self.obs)
    self.trajs = [trajectory_lib.Trajectory(o) for o in self.obs]
    self.first = np.ones(self.n, bool)
    self.ep_return[:] = 0
    self.ep_len[:] = 0

  def collect(
    self,
    policy: BatchPolicy,
    rng: np.random.Generator,
    n_trajectories: int | None,
    n_interactions: int | None,
    max_steps: int | None,
    continue_episodes: bool,
  ) -> CollectResult:
    """Runs until n_trajectories episodes end or n_interactions steps pass."""
    if not continue_episodes or self.obs is None:
      self.reset(rng)
    self.continuing = continue_episodes
    counting = np.ones(self.n, bool)  # Whether env i's episode is recorded.
    started = self.n
    if n_trajectories is not None:
      counting[n_trajectories:] = False
      started = min(self.n, n_trajectories)
    finished, returns, lengths, steps = [], [], [], 0
    while True:
      if n_trajectories is not None and len(finished) >= n_trajectories:
        break
      if n_interactions is not None and steps >= n_interactions:
        break
      action, info = policy(self.obs, self.first)
      action = np.asarray(action)
      next_obs, reward, term, trunc, _ = self.env.step(action)
      next_obs = np.array(next_obs)
      self._count_nonfinite(next_obs)
      self.ep_len += 1
      if max_steps is not None:
        trunc = trunc | (self.ep_len >= max_steps)
      trunc = trunc & ~term
      self.ep_return += reward
      for i in np.flatnonzero(counting):
        self.trajs[i].extend(
          action[i],
          reward[i],
          next_obs[i],
          term[i],
          trunc[i],
          {k: v[i] for k, v in info.items()},
        )
      steps += int(counting.sum())
      done = term | trunc
      if done.any():
        for i in np.flatnonzero(done):
          if counting[i]:
            finished.append(self.trajs[i])
            returns.append(float(self.ep_return[i]))
            lengths.append(int(self.ep_len[i]))
          if n_trajectories is not None:
            counting[i] = started < n_trajectories
            started += int(counting[i])
        reset_obs, _ = self.env.reset(options={'reset_mask': done})
        # A copy: the finished trajectories hold views of their final
        # observations in next_obs.
        next_obs = next_obs.copy()
        next_obs[done] = np.asarray(reset_obs)[done]
        self._count_nonfinite(next_obs[done])
        for i in np.flatnonzero(done):
          self.trajs[i] = trajectory_lib.Trajectory(next_obs[i])
        self.ep_return[done] = 0
        self.ep_len[done] = 0
      self.first = done
      self.obs = next_obs
    if n_interactions is not None:
      # Cut the running episodes: they continue in the next collection.
      for i in range(self.n):
        if self.trajs[i].n_steps:
          finished.append(self.trajs[i])
          self.trajs[i] = trajectory_lib.Trajectory(self.obs[i])
    return CollectResult(finished, returns, steps, lengths)

  def state_dict(self) -> dict[str, Any]:
    """The running episodes, with the envs' state where it is plain data.

    Returns:
      {'running': None} when no episode runs on into the next collection;
      {'running': {...}} with the envs' state (`env_state.capture`); or
      {'running': None, 'restart': why} when the envs cannot be captured.
    """
    if not self.continuing or self.obs is None:
      return {'running': None}
    try:
      envs = env_state.capture(self.env)
    except env_state.NotCapturable as e:
      return {'running': None, 'restart': str(e)}
    # A collection with n_interactions ends with fresh (one-observation)
    # trajectories: the observations, counters and envs say everything.
    return {
      'running': {
        'obs': self.obs,
        'first': self.first,
        'ep_return': self.ep_return,
        'ep_len': self.ep_len,
        'envs': envs,
      }
    }

  def load_state_dict(self, state: dict[str, Any]) -> None:
    """Restores `state_dict`; running episodes restart where not captured."""
    running = state.get('running')
    self.obs = None  # Reset on the next collection, unless restored below.
    self.continuing = running is not None
    if state.get('restart'):
      _LOG.warning(
        'running episodes restart on resume: the env state is not plain '
        'data (%s)',
        state['restart'],
      )
    if running is None:
      return
    env_state.restore(self.env, running['envs'])
    self.obs = np.asarray(running['obs'])
    self.trajs = [trajectory_lib.Trajectory(o) for o in self.obs]
    self.first = np.asarray(running['first'], bool)
    self.ep_return = np.asarray(running['ep_return'], np.float64)
    self.ep_len = np.asarray(running['ep_len'], np.int64)


def random_policy(space: gym.Space, rng: np.random.Generator) -> BatchPolicy:
  """Uniformly random actions from `space`, seeded from `rng`."""
  space.seed(int(rng.integers(2**31 - 1)))

  def policy(obs, first):
    del first
    return np.stack([np.asarray(space.sample()) for _ in range(len(obs))]), {}

  return policy
