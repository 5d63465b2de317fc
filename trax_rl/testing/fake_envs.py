"""Tiny deterministic environments for tests."""

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
  """Observation [step, action sum]; reward = action + 1; ends after n steps.

  Episode i (counted from the first reset) lasts `lengths[i % len(lengths)]`
  steps and ends terminated unless `truncate` is set, in which case it ends
  truncated. Fully deterministic, so returns can be worked out by hand.
  """

  metadata = {'render_modes': []}

  def __init__(self, lengths=(3,), n_actions: int = 2, truncate: bool = False):
    self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    self.action_space = gym.spaces.Discrete(n_actions)
    self._lengths = tuple(lengths)
    self._truncate = truncate
    self._episode = -1
    self._t = 0
    self._sum = 0

  def _obs(self):
    return np.array([self._t, self._sum], np.float32)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._episode += 1
    self._t = 0
    self._sum = 0
    return self._obs(), {}

  def step(self, action):
    self._t += 1
    self._sum += int(action)
    done = self._t >= self._lengths[self._episode % len(self._lengths)]
    terminated = done and not self._truncate
    truncated = done and self._truncate
    return self._obs(), float(action) + 1.0, terminated, truncated, {}


class ContinuousEnv(gym.Env):
  """A 1-D continuous-action env: reward -|action - 0.5|, 5 steps."""

  def __init__(self):
    self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    self._t = 0

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._t = 0
    return np.zeros(3, np.float32), {}

  def step(self, action):
    self._t += 1
    reward = -float(abs(np.asarray(action).reshape(-1)[0] - 0.5))
    obs = np.full(3, self._t / 5.0, np.float32)
    return obs, reward, self._t >= 5, False, {}


class NonFiniteEnv(CountingEnv):
  """CountingEnv whose rewards or observations turn NaN from an episode on.

  Episodes are counted from the first reset, as CountingEnv's: with one env
  collecting one episode per epoch, episode i is epoch i + 1's.
  """

  def __init__(
    self,
    nan_reward_from_episode: int | None = None,
    nan_observation_from_episode: int | None = None,
    lengths=(5,),
  ):
    super().__init__(lengths=lengths)
    self._nan_reward_from = nan_reward_from_episode
    self._nan_obs_from = nan_observation_from_episode

  def _late(self, first_episode: int | None) -> bool:
    return first_episode is not None and self._episode >= first_episode

  def step(self, action):
    obs, reward, terminated, truncated, info = super().step(action)
    if self._late(self._nan_reward_from):
      reward = float('nan')
    if self._late(self._nan_obs_from):
      obs = np.full_like(obs, np.nan)
    return obs, reward, terminated, truncated, info
