"""Tests for the IQM and its stratified bootstrap, against hand computations."""

import itertools

import numpy as np
import pytest

from trax_rl import seed_stats


def test_iqm_by_hand():
  # 8 scores: int(0.25 * 8) = 2 cut at each end -> mean(3, 4, 5, 6) = 4.5.
  assert seed_stats.iqm([8, 1, 7, 2, 6, 3, 5, 4]) == 4.5
  # 4 scores: the middle two; the outliers 0 and 1000 do not count.
  assert seed_stats.iqm([1000, 10, 0, 20]) == 15.0
  # 3 scores: int(0.75) = 0 cut, the plain mean.
  assert seed_stats.iqm([1, 2, 6]) == 3.0
  # Over all runs and tasks together.
  assert seed_stats.iqm([[0, 100], [1, 99]]) == 50.0


def test_stratified_resamples_keep_each_task():
  # Task 0 always scores 0, task 1 always 100, 2 runs each: a stratified
  # resample always holds two 0s and two 100s, so the mean and the IQM
  # (middle two of [0, 0, 100, 100]) are 50 in every resample. A bootstrap
  # over the pooled runs would not be constant.
  scores = np.array([[0.0, 100.0], [0.0, 100.0]])
  assert seed_stats.stratified_bootstrap_ci(scores, seed_stats.mean) == (
    50.0,
    50.0,
  )
  assert seed_stats.stratified_bootstrap_ci(scores) == (50.0, 50.0)


def test_interval_matches_exact_bootstrap_distribution():
  # One task, 5 runs: the 5**5 = 3125 resamples are equally likely; their
  # IQMs (the mean of the middle 3) give the exact bootstrap distribution,
  # and the percentiles of many random resamples must come close to its
  # quantiles.
  scores = np.array([10.0, 20.0, 40.0, 80.0, 160.0])
  exact = [
    seed_stats.iqm(scores[list(i)])
    for i in itertools.product(range(5), repeat=5)
  ]
  want = np.percentile(exact, [2.5, 97.5])
  got = seed_stats.stratified_bootstrap_ci(scores, reps=20000, seed=1)
  np.testing.assert_allclose(got, want, atol=3.0)
  # By hand: IQM = (20 + 40 + 80) / 3; a resample's IQM lies in [10, 160],
  # and the 95% interval strictly inside, around the IQM.
  assert seed_stats.iqm(scores) == pytest.approx(140 / 3)
  assert 10.0 < got[0] < 140 / 3 < got[1] < 160.0


def test_same_seed_same_interval():
  scores = np.arange(10.0)[:, None]
  assert seed_stats.stratified_bootstrap_ci(
    scores, seed=3
  ) == seed_stats.stratified_bootstrap_ci(scores, seed=3)


@pytest.mark.parametrize(
  'kwargs, message',
  [
    ({'reps': 0}, 'reps must be'),
    ({'confidence': 1.0}, 'confidence must be'),
  ],
)
def test_bad_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    seed_stats.stratified_bootstrap_ci(np.ones(3), **kwargs)


def test_iqm_of_nothing():
  with pytest.raises(ValueError, match='at least one'):
    seed_stats.iqm([])
