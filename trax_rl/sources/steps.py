"""A host collection's bookkeeping, step by step (`host_envs.HostEnvs`).

`Tally` decides which steps are valid and when a collection ends (epochs of
env steps or of counted episodes); `Steps` keeps each step's arrays
`[k, N, ...]` per field and stacks them once into a `Rollout` `[k, T, N,
...]`, so that a step costs a few list appends, not a pytree.
"""

from typing import Any

import jax
import numpy as np

from trax_rl.device import rollout as rollout_lib


class Tally:
  """A collection's episode bookkeeping: which envs' episodes count, the
  counted episodes that ended, and whether to step on (`HostEnvs.collect`)."""

  def __init__(
    self, k: int, n: int, n_steps: int | None, n_episodes: int | None
  ):
    self._by_episode = n_episodes is not None
    self._n_steps = n_steps
    self._n_episodes = n_episodes
    self.counting = np.ones((k, n), bool)
    self._started = np.full(k, n)
    if self._by_episode:
      self.counting[:, n_episodes:] = False
      self._started[:] = min(n, n_episodes)
    self._finished = np.zeros(k, np.int64)
    self.returns: list[list[float]] = [[] for _ in range(k)]
    self.lengths: list[list[int]] = [[] for _ in range(k)]
    self.n_steps_done = 0

  def more(self) -> bool:
    """Whether the collection takes another step."""
    if self._by_episode:
      return not (self._finished >= self._n_episodes).all()
    return self.n_steps_done < self._n_steps

  def step(
    self, done: np.ndarray, ended: np.ndarray, lengths: list[np.ndarray]
  ) -> np.ndarray:
    """Counts a step's ended episodes; returns which of its envs' steps
    are valid `[k, N]`.

    Args:
      done: `[k, N]` whose episode ended at this step.
      ended: `[k, N]` their returns (0 elsewhere).
      lengths: each seed's `[N]` episode lengths of those that ended.
    """
    self.n_steps_done += 1
    valid = self.counting.copy() if self._by_episode else self.counting
    mine = done & self.counting
    if not mine.any():
      return valid
    for s in np.flatnonzero(mine.any(axis=1)):
      self.returns[s].extend(float(r) for r in ended[s][mine[s]])
      self.lengths[s].extend(int(x) for x in lengths[s][mine[s]])
      self._finished[s] += int(mine[s].sum())
      if self._by_episode:
        for i in np.flatnonzero(mine[s]):
          self.counting[s, i] = self._started[s] < self._n_episodes
          self._started[s] += int(self.counting[s, i])
    return valid


class Steps:
  """A collection's steps `[k, N, ...]`, kept per field until the end."""

  def __init__(self):
    self._fields = {f: [] for f in rollout_lib.Rollout._fields}
    self._info_def = None

  def add(self, agent_info: Any, **fields: np.ndarray) -> None:
    for name, value in fields.items():
      self._fields[name].append(value)
    leaves, self._info_def = jax.tree.flatten(agent_info)
    self._fields['agent_info'].append([np.asarray(x) for x in leaves])

  def rollout(self) -> rollout_lib.Rollout:
    """One Rollout `[k, T, N, ...]` of the steps."""
    fields = self._fields
    stack = lambda xs: np.stack(xs, axis=1)  # noqa: E731
    infos = fields.pop('agent_info')
    out = {name: stack(xs) for name, xs in fields.items()}
    leaves = [stack(xs) for xs in zip(*infos)]
    out['agent_info'] = jax.tree.unflatten(self._info_def, leaves)
    return rollout_lib.Rollout(**out)
