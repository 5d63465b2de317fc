"""The runner's evaluations: greedy (or any temperature) episodes on
separate envs, before a call's epochs and once after the last.

Each evaluation `i` of a run plays with the keys of its seed's evaluation
stream folded with `i`, so a resumed run evaluates exactly as an
uninterrupted one: the count and the returns so far are checkpointed.
"""

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from etils import epath

from trax_rl import checkpoint

FINAL_EVAL_FILE = 'final_eval.json'  # The evaluation after the last epoch.


def eval_name(temperature: float, max_steps: int | None) -> str:
  """The record field of an evaluation: 'eval_return_t0_s500', ..."""
  return f'eval_return_t{temperature:g}' + (
    f'_s{max_steps}' if max_steps else ''
  )


class Evaluations:
  """A run's evaluations and their returns so far, per seed.

  Args:
    seeds: the seeds' integer seeds (k entries).
    streams: each seed's evaluation key stream, `[k, 2]`.
    n_episodes: episodes per temperature and step cap (0: none).
    steps: episode-length caps.
    temperatures: temperatures to evaluate at.
  """

  def __init__(
    self,
    seeds: Sequence[int],
    streams: Any,
    n_episodes: int,
    steps: Sequence[int | None],
    temperatures: Sequence[float],
  ):
    self._seeds = list(seeds)
    self.streams = np.asarray(streams)
    self.n_episodes = n_episodes
    self._steps = list(steps)
    self._temperatures = tuple(temperatures)
    # {(temperature, steps): per seed, the mean return of each evaluation}
    self.returns: dict[tuple[float, Any], list[list[float]]] = {
      (t, s): [[] for _ in self._seeds]
      for t in self._temperatures
      for s in self._steps
    }
    self.count = 0

  def run(self, source: Any, learner: Any) -> list[dict[str, float]]:
    """Each seed's mean return per temperature and step cap."""
    out = [{} for _ in self._seeds]
    if not self.n_episodes:
      return out
    k = len(self._seeds)
    streams = self.streams if k > 1 else self.streams[0]
    for steps in self._steps:
      for temperature in self._temperatures:
        returns = source.evaluate(
          learner, temperature, streams, self.count, self.n_episodes, steps
        )
        self.count += 1
        for s, seed_returns in enumerate(returns):
          mean = float(np.mean(seed_returns))
          self.returns[(temperature, steps)][s].append(mean)
          out[s][eval_name(temperature, steps)] = mean
    return out

  def final(
    self, source: Any, learner: Any, epoch: int, output_dir: str | None
  ) -> dict[str, Any] | None:
    """Evaluates after the last epoch, writes `final_eval.json` (per seed)
    to output_dir if given; None if the run evaluates nothing.

    Leaves the count and the returns as they were, so a resumed run
    evaluates as it would have without it.
    """
    if not self.n_episodes:
      return None
    count = self.count
    evals = self.run(source, learner)
    self.count = count
    for per_seed in self.returns.values():
      for returns in per_seed:
        returns.pop()
    report = {'epoch': epoch, 'seeds': self._seeds}
    for name in evals[0]:
      report[name] = [e[name] for e in evals]
    if output_dir is not None:
      checkpoint.write_atomic(
        epath.Path(output_dir) / FINAL_EVAL_FILE, json.dumps(report)
      )
    return report

  def state(self) -> dict[str, Any]:
    return {
      'eval_returns': [
        [t, s, [list(v) for v in values]]
        for (t, s), values in self.returns.items()
      ],
      'n_evals': self.count,
    }

  def load(self, ckpt: dict[str, Any], index: int | None = None) -> None:
    """Restores `state()` output (of seed `index` of a batch, into a run
    of that seed alone: its returns, not the count)."""
    for t, s, values in ckpt['eval_returns']:
      if index is None:
        self.returns[(t, s)] = [list(v) for v in values]
      else:
        self.returns[(t, s)] = [list(values[index])]
    if index is None:
      self.count = int(ckpt['n_evals'])
