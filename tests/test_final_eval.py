"""Tests for train_rl's eval_every and its evaluation after the last epoch."""

import json

from trax_rl import cli, configurables, metrics
from trax_rl.run import evaluations
from trax_rl.testing import cli_args

GYMNAX_PG = (
  cli_args.TINY_GYMNAX_PG
  + """
PolicyGradient.n_eval_episodes = 2
"""
)


def _train(output_dir, *bindings):
  configurables.parse(bindings=[GYMNAX_PG, *bindings])
  return configurables.train_rl(output_dir=str(output_dir))


def _evaluated(output_dir):
  return [
    r['epoch']
    for r in metrics.read(output_dir)
    if any(k.startswith('eval_return') for k in r)
  ]


def test_eval_every_evaluates_before_every_kth_epoch(tmp_path):
  _train(tmp_path / 'a', 'train_rl.n_epochs = 7', 'train_rl.eval_every = 3')
  assert _evaluated(tmp_path / 'a') == [1, 4, 7]
  # With calls of two epochs: before each call that holds such an epoch.
  _train(
    tmp_path / 'b',
    'train_rl.n_epochs = 7',
    'train_rl.eval_every = 3',
    'train_rl.epochs_per_call = 2',
  )
  assert _evaluated(tmp_path / 'b') == [1, 3, 7]


def test_the_final_evaluation_leaves_a_resume_exact(tmp_path):
  full = _train(tmp_path / 'full', 'train_rl.n_epochs = 4')
  _train(tmp_path / 'cut', 'train_rl.n_epochs = 2')
  cut = json.loads((tmp_path / 'cut' / evaluations.FINAL_EVAL_FILE).read_text())
  assert cut['epoch'] == 2 and len(cut['eval_return_t0']) == 1
  _train(tmp_path / 'cut', 'train_rl.n_epochs = 4')
  drop = lambda rs: [  # noqa: E731
    {k: v for k, v in r.items() if not k.endswith('_s')} for r in rs
  ]
  assert drop(metrics.read(tmp_path / 'cut')) == drop(
    metrics.read(tmp_path / 'full')
  )
  final = json.loads(
    (tmp_path / 'full' / evaluations.FINAL_EVAL_FILE).read_text()
  )
  assert final == full.final_eval and final['epoch'] == 4
  # The same trained policy evaluated the same way: the same returns.
  resumed = json.loads(
    (tmp_path / 'cut' / evaluations.FINAL_EVAL_FILE).read_text()
  )
  assert resumed == final


def test_train_shows_the_final_evaluation(tmp_path, capsys):
  gin_file = tmp_path / 'pg.gin'
  gin_file.write_text(GYMNAX_PG)
  args = ['train', '--config_file', str(gin_file), '--no_progress']
  code = cli.main(
    [*args, '--output_dir', str(tmp_path / 'o'), '--config=train_rl.n_epochs=2']
  )
  assert code == 0
  summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  final = json.loads((tmp_path / 'o' / evaluations.FINAL_EVAL_FILE).read_text())
  assert summary['final_eval_return_t0'] == final['eval_return_t0'][0]
