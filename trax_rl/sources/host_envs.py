"""Gymnasium vector envs stepped from Python, collected as rollouts.

`HostEnvs` steps k seeds of N envs each in lockstep with one batched
policy call per step on observations `[k, N, ...]`, and returns the steps
as one `Rollout` `[k, T, N, ...]`:

- Episodes run on across collections when epochs count env steps
  (`collect(n_steps=...)`), so a rollout may start and end mid-episode.
  When epochs count episodes (`collect(n_episodes=...)`, Trax's
  `n_trajectories_per_epoch`) every env is reset first; the first n envs
  start counted episodes, an env whose counted episode ends starts another
  counted one while fewer than n have started, and steps of uncounted
  episodes are not `valid`. Each env's valid steps are a prefix of the
  rollout, whose length is padded up to a power of two (`pad_steps`), so
  that a program compiles once per size, not once per epoch.
- `terminated` and `truncated` are kept apart; `max_steps` truncates.
  Where an episode ends, `next_observation` is its final observation and
  the env restarts (gymnasium's autoreset is off).
- The envs' state, their reset generators and the episode bookkeeping are
  plain data (`state_dict`), so a checkpoint resumes running episodes
  exactly where the envs allow it (`env_state`).
"""

import collections
import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import numpy as np

from trax_rl import env_state, envs, policies
from trax_rl.device import rollout as rollout_lib
from trax_rl.sources import steps as steps_lib

_LOG = logging.getLogger(__name__)

WINDOW = rollout_lib.WINDOW  # episode_return_mean: the last this many.

# act(observation [k, N, ...], first [k, N], core) -> (action [k, N, ...],
#   info {name: [k, N, ...]}, core); `core` a recurrent policy's state
#   (leaves [k, N, ...]) or (). Action and info may be numpy or JAX arrays
#   still being computed: `collect` reads them only when it needs them.
HostAct = Callable[[np.ndarray, np.ndarray, Any], tuple[Any, dict, Any]]


def pad_steps(n: int) -> int:
  """The rollout length an episode-counted collection of n steps gets."""
  return max(8, 1 << (max(n, 1) - 1).bit_length())


def pad_axis(x: np.ndarray, length: int, axis: int) -> np.ndarray:
  """`x` zero-padded (zeros are not valid) to `length` along `axis`."""
  pad = [(0, 0)] * x.ndim
  pad[axis] = (0, length - x.shape[axis])
  return np.pad(x, pad)


def pad_rollouts(parts: list[Any], n_steps: int | None = None) -> Any:
  """Rollouts `[T_i, N_i]` side by side: `[T, sum N_i]`, padded invalid."""
  length = n_steps or max(p.reward.shape[0] for p in parts)
  padded = [jax.tree.map(lambda x: pad_axis(x, length, 0), p) for p in parts]
  return jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *padded)


class _SeedEnvs:
  """The N envs of one seed and their episode bookkeeping."""

  def __init__(self, env: envs.EnvLike, n_envs: int, seed: Any):
    self.env = envs.make_vector_env(env, n_envs)
    self.n = n_envs
    self.rng = np.random.default_rng(seed)
    self.obs = None  # [N, ...]; None until the first reset.
    self.first = np.ones(n_envs, bool)
    self.episode_return = np.zeros(n_envs)
    self.episode_length = np.zeros(n_envs, np.int64)
    self.returns = collections.deque(maxlen=WINDOW)
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


class Collection(NamedTuple):
  """What `HostEnvs.collect` returns (see there)."""

  rollout: rollout_lib.Rollout
  core: Any
  records: list[dict[str, Any]]
  episode_returns: list[list[float]]  # Per seed, in the order they ended.
  episode_lengths: list[list[int]]  # Likewise.


def collection_state(c: Collection) -> dict[str, Any]:
  """A collection's rollout and records as checkpointable values."""
  return {
    'rollout': tuple(c.rollout),
    'records': c.records,
    'episode_returns': c.episode_returns,
    'episode_lengths': c.episode_lengths,
  }


def collection_from_state(state: dict[str, Any]) -> Collection:
  """`collection_state`'s input back (without its core)."""
  return Collection(
    rollout_lib.Rollout(*state['rollout']),
    None,
    [dict(r) for r in state['records']],
    [list(r) for r in state['episode_returns']],
    [list(r) for r in state['episode_lengths']],
  )


class HostEnvs:
  """k seeds of N gymnasium envs, collected as `Rollout`s `[k, T, N, ...]`.

  Args:
    env: a gymnasium id, instance or zero-argument factory (`envs`).
    n_envs: N, envs per seed.
    seeds: one entry per seed; each seeds that seed's env resets
      (`np.random.default_rng(seed)`), as `RLTask(seed=...)` does.
    max_steps: episode-length cap (truncation), or None.
  """

  def __init__(
    self,
    env: envs.EnvLike,
    n_envs: int,
    seeds: Sequence[Any],
    max_steps: int | None = None,
  ):
    self._spec = env
    self._seeds = list(seeds)
    self._envs = [_SeedEnvs(env, n_envs, s) for s in self._seeds]
    self._n = n_envs
    self._max_steps = max_steps

  @property
  def n_seeds(self) -> int:
    return len(self._envs)

  @property
  def observation_space(self) -> gym.Space:
    return self._envs[0].env.single_observation_space

  @property
  def action_space(self) -> gym.Space:
    return self._envs[0].env.single_action_space

  def n_nonfinite(self) -> int:
    """Collected observations (rows) holding a NaN or an inf, so far."""
    return sum(e.n_nonfinite for e in self._envs)

  def restart(self) -> None:
    """Every env resets at the next collection (running episodes end)."""
    for e in self._envs:
      e.obs = None

  def reseed(self, seeds: Sequence[Any]) -> None:
    """Each seed's env resets from `np.random.default_rng(seeds[i])` on."""
    for e, seed in zip(self._envs, seeds, strict=True):
      e.rng = np.random.default_rng(seed)

  def set_check_finite(self, check: bool) -> None:
    for e in self._envs:
      space = e.env.single_observation_space
      e.check_finite = check and np.issubdtype(
        space.dtype or np.uint8, np.floating
      )

  def collect(
    self,
    act: HostAct,
    core: Any = (),
    n_steps: int | None = None,
    n_episodes: int | None = None,
    pad_to: int | None = None,
  ) -> 'Collection':
    """Steps every seed's envs until the epoch's steps or episodes are in.

    Args:
      act: the batched policy (`HostAct`).
      core: the recurrent policy's state before the first step, or ().
      n_steps: steps per env (epochs counted in env steps); or
      n_episodes: counted episodes per seed (epochs counted in episodes).
      pad_to: an episode-counted rollout is padded (not valid) to this
        many steps (one shape for every epoch: one compile), or to the
        next power of two if None or too short.

    Returns:
      A `Collection`: the Rollout (fields `[k, T, N, ...]`, numpy), the
      core after the last step, one record per seed (`avg_return`,
      `episode_return_mean`, `n_episodes`, `n_interactions`) and the
      returns of the counted episodes that ended, per seed.
    """
    if (n_steps is None) == (n_episodes is None):
      raise ValueError('exactly one of n_steps and n_episodes must be given')
    by_episode = n_episodes is not None
    for e in self._envs:
      if by_episode or e.obs is None:
        e.reset()
      e.continuing = not by_episode
    tally = steps_lib.Tally(len(self._envs), self._n, n_steps, n_episodes)
    steps = steps_lib.Steps()
    obs = self._stacked('obs')
    # The next step's policy call is dispatched before this step's
    # bookkeeping, so that a jitted policy computes while Python records.
    pending = act(obs, self._stacked('first'), core) if tally.more() else None
    while pending is not None:
      action, info, core = pending
      action = np.asarray(action)
      outs = [
        e.step(action[s], self._max_steps) for s, e in enumerate(self._envs)
      ]
      next_obs, reward, terminated, truncated, ended = _stack_seeds(outs)
      valid = tally.step(
        terminated | truncated, ended, [e.ended_length for e in self._envs]
      )
      step_obs, obs = obs, self._stacked('obs')
      if tally.more():
        pending = act(obs, self._stacked('first'), core)
      else:
        pending = None
      steps.add(
        observation=step_obs,
        action=action,
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        next_observation=next_obs,
        agent_info=info,
        episode_return=(
          np.where(valid, ended, 0.0).astype(np.float32)
          if by_episode
          else ended
        ),
        valid=valid,
      )
    rollout = steps.rollout()
    for s, e in enumerate(self._envs):
      e.n_interactions += int(rollout.valid[s].sum())
    if by_episode:
      length = tally.n_steps_done
      total = pad_to if pad_to and pad_to >= length else pad_steps(length)
      rollout = jax.tree.map(lambda x: pad_axis(x, total, 1), rollout)
    ended_returns, ended_lengths = tally.returns, tally.lengths
    records = []
    for s, e in enumerate(self._envs):
      e.returns.extend(ended_returns[s])
      e.n_episodes += len(ended_returns[s])
      if ended_returns[s]:
        avg = float(np.mean(ended_returns[s]))
      else:  # As Trax: the mean return of the envs' slices.
        valid_rewards = rollout.reward[s] * rollout.valid[s]
        avg = float(np.mean(valid_rewards.sum(axis=0)))
      records.append(
        {
          'avg_return': avg,
          'episode_return_mean': (
            float(np.mean(e.returns)) if e.returns else float('nan')
          ),
          'n_episodes': e.n_episodes,
          'n_trajectories': e.n_episodes,
          'n_interactions': e.n_interactions,
        }
      )
    return Collection(rollout, core, records, ended_returns, ended_lengths)

  def _stacked(self, name: str) -> np.ndarray:
    """Every seed's `obs` or `first`, `[k, N, ...]` (a view for one seed)."""
    if len(self._envs) == 1:
      return getattr(self._envs[0], name)[None]
    return np.stack([getattr(e, name) for e in self._envs])

  def state_dict(self) -> dict[str, Any]:
    return {'seeds': [e.state_dict() for e in self._envs]}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    for e, s in zip(self._envs, state['seeds'], strict=True):
      e.load_state_dict(s)

  def close(self) -> None:
    for e in self._envs:
      e.env.close()


def _stack_seeds(outs: list[tuple]) -> tuple:
  """Each seed's `_SeedEnvs.step` output -> `[k, N, ...]` per field."""
  if len(outs) == 1:
    return tuple(x[None] for x in outs[0])
  return tuple(np.stack(x) for x in zip(*outs))
