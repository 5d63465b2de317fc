"""Statistics across seeds: interquartile mean, stratified bootstrap CIs.

As recommended by Agarwal et al. 2021, "Deep RL at the Edge of the
Statistical Precipice" (the rliable library): report the interquartile mean
(IQM) of the final scores of all runs, with a 95% percentile interval from a
bootstrap that resamples runs within each task (stratified), so that every
resample keeps each task's number of runs. Written here in numpy because
rliable brings pandas, statsmodels, arch and seaborn with it.
"""

from collections.abc import Callable

import numpy as np


def iqm(scores: np.ndarray) -> float:
  """Interquartile mean of all scores: the mean of the middle 50%.

  `int(0.25 * n)` of the n scores are cut at each end (scipy's `trim_mean`
  with proportion 0.25, which rliable uses), so 3 runs keep all 3 and 4
  runs keep the middle 2.
  """
  flat = np.sort(np.asarray(scores, np.float64).reshape(-1))
  if flat.size == 0:
    raise ValueError('iqm needs at least one score')
  cut = int(0.25 * flat.size)
  return float(flat[cut : flat.size - cut].mean())


def mean(scores: np.ndarray) -> float:
  """Mean of all scores."""
  return float(np.mean(scores))


def stratified_bootstrap_ci(
  scores: np.ndarray,
  statistic: Callable[[np.ndarray], float] = iqm,
  reps: int = 2000,
  confidence: float = 0.95,
  seed: int = 0,
) -> tuple[float, float]:
  """Percentile interval of `statistic` under a stratified bootstrap.

  Args:
    scores: `[n_runs, n_tasks]` final scores (a 1-D array is one task).
    statistic: maps a `[n_runs, n_tasks]` resample to a number.
    reps: bootstrap resamples.
    confidence: the interval's coverage, in (0, 1).
    seed: seed of the resampling.

  Returns:
    (low, high) percentiles of the statistic over the resamples.

  Raises:
    ValueError: bad scores, reps or confidence.
  """
  scores = np.asarray(scores, np.float64)
  if scores.ndim == 1:
    scores = scores[:, None]
  if scores.ndim != 2 or scores.shape[0] < 1:
    raise ValueError(f'scores must be [n_runs, n_tasks], got {scores.shape}')
  if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
    raise ValueError(f'reps must be an integer >= 1, got {reps!r}')
  if not 0 < confidence < 1:
    raise ValueError(f'confidence must be in (0, 1), got {confidence!r}')
  rng = np.random.default_rng(seed)
  n_runs, n_tasks = scores.shape
  columns = np.arange(n_tasks)
  values = np.empty(reps)
  for i in range(reps):
    # Runs are drawn with replacement within each task (column).
    rows = rng.integers(0, n_runs, size=(n_runs, n_tasks))
    values[i] = statistic(scores[rows, columns])
  alpha = 100 * (1 - confidence) / 2
  low, high = np.percentile(values, [alpha, 100 - alpha])
  return float(low), float(high)
