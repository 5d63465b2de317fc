"""Statistics of the episodes completed during training.

The mean return of the last 100 completed episodes is the honest training
return (the convention of Stable-Baselines3's `ep_rew_mean`): unlike the
mean over one epoch's collected slices, it never reports the length of a cut
slice as a return, and it is defined at every epoch once one episode ended.
"""

import collections
import math
from collections.abc import Iterable
from typing import Any

WINDOW = 100


class EpisodeStats:
  """Counts completed episodes and keeps the returns of the latest ones.

  Args:
    window: how many of the latest episode returns the mean covers.
  """

  def __init__(self, window: int = WINDOW):
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
      raise ValueError(f'window must be an integer >= 1, got {window!r}')
    self._returns = collections.deque(maxlen=window)
    self._n_episodes = 0

  def add(self, returns: Iterable[float]) -> None:
    """Records the full returns of episodes that just ended."""
    for r in returns:
      self._returns.append(float(r))
      self._n_episodes += 1

  @property
  def n_episodes(self) -> int:
    """Episodes completed so far."""
    return self._n_episodes

  @property
  def return_mean(self) -> float:
    """Mean return of the last `window` episodes; NaN before the first."""
    if not self._returns:
      return math.nan
    return sum(self._returns) / len(self._returns)

  def record(self) -> dict[str, float | int]:
    """The metrics of one epoch record."""
    return {
      'episode_return_mean': self.return_mean,
      'n_episodes': self._n_episodes,
    }

  def state_dict(self) -> dict[str, Any]:
    return {'returns': list(self._returns), 'n_episodes': self._n_episodes}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    self._returns.clear()
    self._returns.extend(float(r) for r in state['returns'])
    self._n_episodes = int(state['n_episodes'])
