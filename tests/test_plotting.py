"""Tests for `trax-rl plot`: grouping seeds, mean curves, the IQM table."""

import json

import numpy as np
import pytest

from trax_rl import cli, plotting

CONFIG = """# Parameters for PPO:
PPO.seed = {seed}
PPO.n_interactions_per_epoch = 256
RLTask.env = '{env}'
RLTask.seed = {seed}
"""


def _run(path, records, seed=0, env='CartPole-v1'):
  path.mkdir()
  (path / 'config.gin').write_text(CONFIG.format(seed=seed, env=env))
  (path / 'metrics.jsonl').write_text(
    ''.join(json.dumps(r) + '\n' for r in records)
  )
  return str(path)


def _records(returns, seed=None, epoch_s=2.0):
  out = []
  for i, ret in enumerate(returns):
    r = {
      'epoch': i + 1,
      'n_interactions': 256 * (i + 1),
      'episode_return_mean': ret,
      'avg_return': 1.0,
      'epoch_s': epoch_s,
    }
    if seed is not None:
      r['seed'] = seed
    out.append(r)
  return out


def _plot(capsys, *args):
  code = cli.main(['plot', *args])
  out = capsys.readouterr()
  return code, out


def test_run_directories_of_one_config_are_one_group(capsys, tmp_path):
  runs = [
    _run(tmp_path / f'ppo_seed{s}', _records(rets), seed=s)
    for s, rets in enumerate([[10, 100], [20, 300], [None, 500]])
  ]
  other = _run(tmp_path / 'other', _records([1, 2]), env='Acrobot-v1')
  png = tmp_path / 'c.png'
  code, out = _plot(capsys, *runs, other, '--out', str(png), '--iqm')
  assert code == 0, out.err
  summary = json.loads(out.out.strip().splitlines()[-1])
  assert summary['metric'] == 'episode_return_mean'
  assert summary['groups'] == {'ppo': runs, 'other': [other]}
  # 3 seeds: int(0.75) = 0 cut, the IQM is the mean of 100, 300, 500.
  ppo = summary['iqm'][0]
  assert ppo['seeds'] == 3 and ppo['iqm'] == ppo['mean'] == 300.0
  assert 100.0 <= ppo['ci_low'] < 300.0 < ppo['ci_high'] <= 500.0
  assert '| ppo | 3 | 300.0 |' in out.out
  assert png.stat().st_size > 5000


def test_records_of_several_seeds_in_one_run(capsys, tmp_path):
  finals = {0: 100.0, 1: 200.0, 2: 300.0, 3: 1000.0}
  records = []
  for epoch in (1, 2):  # Interleaved, as one process writes them.
    for seed, final in finals.items():
      (r,) = _records([final * epoch / 2])
      r.update(epoch=epoch, n_interactions=256 * epoch, seed=seed)
      records.append(r)
  run = _run(tmp_path / 'sweep', records)
  code, out = _plot(
    capsys, run, '--out', str(tmp_path / 'c.png'), '--iqm', '--reps', '500'
  )
  assert code == 0, out.err
  (row,) = json.loads(out.out.strip().splitlines()[-1])['iqm']
  # 4 seeds: the middle two, (200 + 300) / 2; the mean is 400.
  assert row['seeds'] == 4 and row['iqm'] == 250.0 and row['mean'] == 400.0
  groups, _ = plotting.group_runs([run], 'episode_return_mean', 'steps')
  grid, mean, std = plotting.mean_curve(groups[0])
  np.testing.assert_allclose(grid, [256, 512])
  np.testing.assert_allclose(mean, [200.0, 400.0])  # Epoch 1: finals / 2.
  np.testing.assert_allclose(std[1], np.std([100, 200, 300, 1000]))


def test_wall_time_axis_and_unequal_steps(tmp_path):
  a = _run(tmp_path / 'a_s0', _records([0, 10, 20], epoch_s=1.0))
  records = _records([0, 40], epoch_s=2.0)
  records[1]['n_interactions'] = 768
  b = _run(tmp_path / 'a_s1', records, seed=1)
  groups, metric = plotting.group_runs([a, b], None, 'time')
  assert metric == 'episode_return_mean' and len(groups) == 1
  assert groups[0].curves[a] == ([1.0, 2.0, 3.0], [0.0, 10.0, 20.0])
  assert groups[0].curves[b] == ([2.0, 4.0], [0.0, 40.0])
  # Steps differ: curves are interpolated where both have data.
  groups, _ = plotting.group_runs([a, b], None, 'steps')
  grid, mean, _ = plotting.mean_curve(groups[0])
  assert grid[0] == 256 and grid[-1] == 768
  assert mean[-1] == pytest.approx((20 + 40) / 2)


@pytest.mark.parametrize(
  'extra, message',
  [
    (['--metric', 'nope'], "has no values of 'nope'"),
    (['--out', 'x.txt'], 'must end in one of'),
    (['--reps', '0'], '--reps must be'),
  ],
)
def test_bad_plot_arguments(capsys, tmp_path, extra, message):
  run = _run(tmp_path / 'r', _records([1, 2]))
  code, out = _plot(capsys, run, '--out', str(tmp_path / 'c.png'), *extra)
  assert code == 2
  assert message in out.err and len(out.err.strip().splitlines()) == 1


def test_bad_x_axis(capsys, tmp_path):
  with pytest.raises(SystemExit) as exit_:
    cli.main(['plot', str(tmp_path), '--x', 'epochs'])
  assert exit_.value.code == 2
  assert "invalid choice: 'epochs'" in capsys.readouterr().err


def test_missing_run_directory(capsys, tmp_path):
  code, out = _plot(capsys, str(tmp_path / 'none'), '--out', 'c.png')
  assert code == 2 and 'is not a directory' in out.err


def _iqm(capsys, tmp_path, *runs):
  code, out = _plot(
    capsys, *runs, '--out', str(tmp_path / 'c.png'), '--iqm', '--reps', '200'
  )
  assert code == 0, out.err
  return json.loads(out.out.strip().splitlines()[-1]), out.err


def test_iqm_compares_seeds_at_the_shortest_budget(capsys, tmp_path):
  a = _run(tmp_path / 'a_s0', _records([0, 10, 20]), seed=0)
  b = _run(tmp_path / 'a_s1', _records([0, 40]), seed=1)
  summary, err = _iqm(capsys, tmp_path, a, b)
  (row,) = summary['iqm']
  # Seed 0 at 512 env steps (10), not at its own end (20).
  assert row['env_steps'] == summary['iqm_env_steps'] == 512
  assert row['mean'] == 25.0
  assert 'runs differ in budget (512 to 768 env steps)' in err


def test_a_seed_counts_once(capsys, tmp_path):
  a = _run(tmp_path / 'a_s0', _records([0, 10]), seed=0)
  again = _run(tmp_path / 'a_again', _records([0, 30]), seed=0)
  b = _run(tmp_path / 'a_s1', _records([0, 40]), seed=1)
  summary, err = _iqm(capsys, tmp_path, a, again, b)
  (row,) = summary['iqm']
  assert row['seeds'] == 2 and row['mean'] == 25.0
  assert f'{a} and {again} are both seed 0' in err


def test_the_default_metric_is_one_every_run_has(capsys, tmp_path):
  records = _records([0, 10])
  for r in records:
    r['eval_return_t0_s500'] = 500.0
  a = _run(tmp_path / 'a_s0', records, seed=0)
  b = _run(tmp_path / 'a_s1', _records([0, 40]), seed=1)
  summary, err = _iqm(capsys, tmp_path, a, b)
  assert summary['metric'] == 'episode_return_mean'
  assert 'runs differ in metric' in err and 'eval_return_t0_s500' in err
  # Run alone, a's own first choice is its greedy eval.
  summary, _ = _iqm(capsys, tmp_path, a)
  assert summary['metric'] == 'eval_return_t0_s500'
