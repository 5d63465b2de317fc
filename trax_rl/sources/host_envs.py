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

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import numpy as np

from trax_rl import envs
from trax_rl.device import rollout as rollout_lib
from trax_rl.sources import seed_envs
from trax_rl.sources import steps as steps_lib

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


class Collection(NamedTuple):
  """What `HostEnvs.collect` returns (see there)."""

  rollout: rollout_lib.Rollout
  core: Any
  records: list[dict[str, Any]]
  episode_returns: list[list[float]]  # Per seed, in the order they ended.
  episode_lengths: list[list[int]]  # Likewise.


def collection_state(collected: tuple[Collection, int]) -> dict[str, Any]:
  """A collection (and the count of non-finite observations after it) as
  checkpointable values."""
  c, nonfinite = collected
  return {
    'rollout': tuple(c.rollout),
    'records': c.records,
    'episode_returns': c.episode_returns,
    'episode_lengths': c.episode_lengths,
    'nonfinite': nonfinite,
  }


def collection_from_state(state: dict[str, Any]) -> tuple[Collection, int]:
  """`collection_state`'s input back (the collection without its core)."""
  collection = Collection(
    rollout_lib.Rollout(*state['rollout']),
    None,
    [dict(r) for r in state['records']],
    [list(r) for r in state['episode_returns']],
    [list(r) for r in state['episode_lengths']],
  )
  return collection, int(state['nonfinite'])


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
    self._envs = [seed_envs.SeedEnvs(env, n_envs, s) for s in self._seeds]
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

  def example_rollout(
    self, n_steps: int, action: Any, info: Any
  ) -> rollout_lib.Rollout:
    """The shapes and dtypes of a rollout `[T, N, ...]` of one seed, given
    those of the policy's action and info for N observations."""
    space = self.observation_space
    obs = jax.ShapeDtypeStruct((self._n, *space.shape), space.dtype)
    time = lambda x: jax.ShapeDtypeStruct((n_steps, *x.shape), x.dtype)  # noqa: E731
    flag = jax.ShapeDtypeStruct((n_steps, self._n), bool)
    reward = jax.ShapeDtypeStruct((n_steps, self._n), np.float32)
    return rollout_lib.Rollout(
      observation=time(obs),
      action=time(action),
      reward=reward,
      terminated=flag,
      truncated=flag,
      next_observation=time(obs),
      agent_info=jax.tree.map(time, info),
      episode_return=reward,
      valid=flag,
    )

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
  """Each seed's `SeedEnvs.step` output -> `[k, N, ...]` per field."""
  if len(outs) == 1:
    return tuple(x[None] for x in outs[0])
  return tuple(np.stack(x) for x in zip(*outs))
