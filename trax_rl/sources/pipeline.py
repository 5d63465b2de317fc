"""Collections ahead of learning: a host source's acting/learning pipeline.

Without a pipeline (`depth = 0`) an epoch collects its rollout with the
learner of the epoch before, then learns from it: the envs wait while the
learner updates and the learner waits while the envs step. With `depth =
d`, epoch e learns from a rollout collected d epochs earlier, with the
learner of epoch `e - 1 - d` (the first ones with the initial learner):
while it learns, the rollout of epoch `e + d` is collected with the
learner it starts from. With `overlap`, that collection runs in a thread
at the same time as the learning, so an epoch costs about the longer of
the two instead of their sum (Podracer's Sebulba, Hessel et al. 2021).

The schedule depends only on `depth`, never on timing: the same seed gives
the same records with and without `overlap` (it only runs the same two
steps side by side), and the collections waiting to be learned from are
part of `state_dict`, so a run killed at any moment resumes exactly. The
record of each epoch says its `policy_lag`: how many learner updates (of
this pipeline) its data's policy was behind.

No rollout is collected past the run's last epoch (`set_epochs_left`); a finished
run extended later starts its pipeline afresh, so those first epochs act
with a newer learner than an uninterrupted longer run would.
"""

import collections
import concurrent.futures
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from trax_rl import validation


class Collected(NamedTuple):
  """One collected rollout waiting to be learned from."""

  data: Any  # What the source's collect returned.
  version: int  # Epochs learned when its policy was taken.
  collect_s: float  # Seconds the collection took.


class Pipeline:
  """Runs a source's collections up to `depth` epochs ahead of learning.

  Args:
    collect: `collect(view) -> data`, one epoch's rollout with the policy
      `view`; called in order, from one thread at a time.
    depth: epochs of collected data waiting ahead of learning (0: none).
    overlap: collect the epoch ahead in a thread while learning.
  """

  def __init__(
    self, collect: Callable[[Any], Any], depth: int = 0, overlap: bool = False
  ):
    self._collect = collect
    self._pending: collections.deque[Collected] = collections.deque()
    self._collected = 0  # Epochs collected so far.
    self._learned = 0  # Epochs learned so far.
    self._end: int | None = None
    self._threads = None
    self.configure(depth, overlap)

  def configure(self, depth: int, overlap: bool) -> None:
    """Sets the depth and whether collection overlaps learning.

    Raises:
      ValueError: a negative depth, or overlap without depth.
    """
    validation.check_count('pipeline_depth', depth, 0)
    if overlap and depth < 1:
      raise ValueError(
        'train_rl.overlap collects an epoch ahead while learning: it needs '
        f'train_rl.pipeline_depth >= 1, got {depth}'
      )
    self.depth = depth
    self.overlap = bool(overlap)

  def set_epochs_left(self, n: int) -> None:
    """Epochs the run has left: nothing is collected for epochs after."""
    self._end = self._learned + n

  @property
  def n_pending(self) -> int:
    return len(self._pending)

  def _timed(self, view: Any, version: int) -> Collected:
    start = time.perf_counter()
    data = self._collect(view)
    return Collected(data, version, time.perf_counter() - start)

  def epoch(
    self, view: Callable[[], Any], learn: Callable[[Any], Any]
  ) -> tuple[Collected, Any, int]:
    """One epoch: learns from the rollout due, collecting ahead.

    Args:
      view: returns the policy of the learner before this epoch's
        learning (called at most once, before `learn`).
      learn: `learn(data) -> out`, this epoch's learning.

    Returns:
      The learned `Collected`, `learn`'s output and the epoch's policy lag.
    """
    e = self._learned + 1
    target = e + self.depth
    if self._end is not None:
      target = max(e, min(target, self._end))
    views = []

    def policy():
      if not views:
        views.append(view())
      return views[0]

    while self._collected < max(e, target - 1):
      self._push(self._timed(policy(), self._learned))
    ahead = None
    if self._collected < target:
      if self.overlap:
        if self._threads is None:
          self._threads = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix='trax_rl-actor'
          )
        ahead = self._threads.submit(self._timed, policy(), self._learned)
        self._collected += 1
      else:  # The same schedule, one step after the other.
        self._push(self._timed(policy(), self._learned))
    item = self._pending.popleft()
    try:
      out = learn(item.data)
    finally:
      if ahead is not None:
        self._pending.append(ahead.result())
    self._learned = e
    return item, out, e - 1 - item.version

  def _push(self, item: Collected) -> None:
    self._pending.append(item)
    self._collected += 1

  def state_dict(self, encode: Callable[[Any], Any]) -> dict[str, Any]:
    return {
      'pending': [
        {'data': encode(c.data), 'version': c.version, 'collect_s': c.collect_s}
        for c in self._pending
      ],
      'learned': self._learned,
    }

  def load_state_dict(
    self, state: dict[str, Any] | None, decode: Callable[[Any], Any]
  ) -> None:
    """Restores `state_dict` output (None: a checkpoint without one)."""
    state = state or {'pending': [], 'learned': 0}
    self._pending = collections.deque(
      Collected(decode(c['data']), int(c['version']), float(c['collect_s']))
      for c in state['pending']
    )
    self._learned = int(state['learned'])
    self._collected = self._learned + len(self._pending)

  def drop_pending(self) -> None:
    """Forgets the collections waiting (the next epoch collects anew)."""
    self._pending.clear()
    self._collected = self._learned

  def close(self) -> None:
    if self._threads is not None:
      self._threads.shutdown(wait=True)
      self._threads = None
