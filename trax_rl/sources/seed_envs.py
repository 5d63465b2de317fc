"""One seed's gymnasium vector env, stepped with its episode bookkeeping.

`host_envs.HostEnvs` steps k of these in lockstep. Where an episode ends,
the step returns its final observation and the env restarts (gymnasium's
autoreset is off); `state_dict` holds running episodes where the env state
is plain data (`env_state`).
"""

import collections
import logging
from typing import Any

import numpy as np

from trax_rl import env_state, envs, policies
from trax_rl.device import rollout as rollout_lib

_LOG = logging.getLogger(__name__)


class SeedEnvs:
  """The N envs of one seed and their episode bookkeeping.

  Args:
    env: a gymnasium id, instance or factory (`envs.make_vector_env`).
    n_envs: N.
    seed: seeds the envs' resets (`np.random.default_rng(seed)`).
  """

  def __init__(self, env: envs.EnvLike, n_envs: int, seed: Any):
    self.env = envs.make_vector_env(env, n_envs)
    self.n = n_envs
    self.rng = np.random.default_rng(seed)
    self.obs = None  # [N, ...]; None until the first reset.
    self.first = np.ones(n_envs, bool)
    self.episode_return = np.zeros(n_envs)
    self.episode_length = np.zeros(n_envs, np.int64)
    self.returns = collections.deque(maxlen=rollout_lib.WINDOW)
    self.n_episodes = 0
    self.n_interactions = 0
    self.n_nonfinite = 0
    self.ended_length = np.zeros(n_envs, np.int64)  # Of the last step.
    self.continuing = False  # Whether episodes run on into the next call.
    space = self.env.single_observation_space
    self.check_finite = np.issubdtype(space.dtype or np.uint8, np.floating)

  def count_nonfinite(self, obs: np.ndarray) -> None:
    if self.check_finite and not np.isfinite(obs).all():
      finite = np.isfinite(obs.reshape(len(obs), -1)).all(axis=1)
      self.n_nonfinite += int((~finite).sum())

  def reset(self) -> None:
    seeds = [int(s) for s in self.rng.integers(0, 2**31 - 1, size=self.n)]
    obs, _ = self.env.reset(seed=seeds)
    self.obs = np.array(obs)
    self.count_nonfinite(self.obs)
    self.first = np.ones(self.n, bool)
    self.episode_return[:] = 0
    self.episode_length[:] = 0

  def step(self, action: np.ndarray, max_steps: int | None):
    """Steps every env; restarts those that ended. Returns the step's data."""
    space = self.env.single_action_space
    next_obs, reward, terminated, truncated, _ = self.env.step(
      policies.clip_to_space(np.asarray(action), space)
    )
    next_obs = np.array(next_obs)
    self.count_nonfinite(next_obs)
    terminated = np.array(terminated, bool)  # Rollouts keep it.
    self.episode_length += 1
    truncated = np.array(truncated, bool)  # A copy: gymnax's is read-only.
    if max_steps is not None:
      truncated = truncated | (self.episode_length >= max_steps)
    truncated &= ~terminated
    reward = np.asarray(reward, np.float32)
    self.episode_return += reward
    done = terminated | truncated
    ended = np.where(done, self.episode_return, 0.0).astype(np.float32)
    self.ended_length = np.where(done, self.episode_length, 0)
    obs = next_obs
    if done.any():
      reset_obs, _ = self.env.reset(options={'reset_mask': done})
      obs = next_obs.copy()  # next_obs keeps the final observations.
      obs[done] = np.asarray(reset_obs)[done]
      self.count_nonfinite(obs[done])
      self.episode_return[done] = 0
      self.episode_length[done] = 0
    self.first = done
    self.obs = obs
    return next_obs, reward, terminated, truncated, ended

  def state_dict(self) -> dict[str, Any]:
    state = {
      'rng': self.rng.bit_generator.state,
      'returns': list(self.returns),
      'n_episodes': self.n_episodes,
      'n_interactions': self.n_interactions,
      'running': None,
    }
    if not self.continuing or self.obs is None:
      return state
    try:
      captured = env_state.capture(self.env)
    except env_state.NotCapturable as e:
      state['restart'] = str(e)
      return state
    state['running'] = {  # Copies: stepping updates them in place.
      'envs': captured,
      'obs': self.obs.copy(),
      'first': self.first.copy(),
      'episode_return': self.episode_return.copy(),
      'episode_length': self.episode_length.copy(),
    }
    return state

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self.rng.bit_generator.state = state['rng']
    self.returns.clear()
    self.returns.extend(float(r) for r in state['returns'])
    self.n_episodes = int(state['n_episodes'])
    self.n_interactions = int(state['n_interactions'])
    self.obs = None  # Reset at the next collection unless restored here.
    if state.get('restart'):
      _LOG.warning(
        'running episodes restart on resume: the env state is not plain '
        'data (%s)',
        state['restart'],
      )
    running = state['running']
    self.continuing = running is not None
    if running is None:
      return
    env_state.restore(self.env, running['envs'])
    self.obs = np.asarray(running['obs'])
    self.first = np.asarray(running['first'], bool)
    self.episode_return = np.asarray(running['episode_return'], np.float64)
    self.episode_length = np.asarray(running['episode_length'], np.int64)
