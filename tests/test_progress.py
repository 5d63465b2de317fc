"""Tests for trax_rl.progress: lines where there is no terminal, a bar whose
values fit 80 columns, and per-epoch ticks from inside a compiled call."""

import io
import re
import shutil
import time

from trax_rl import cli, configurables, progress
from trax_rl.testing import cli_args

RECORD = {
  'epoch': 3,
  'n_interactions': 123000,
  'episode_return_mean': 187.25,
  'eval_return_t0_s500': 499.0,
  'n_episodes': 1234,
}


class _Tty(io.StringIO):
  def isatty(self):
    return True


def test_no_terminal_gives_plain_lines_with_the_values():
  stream = io.StringIO()
  bar = progress.Progress(3, time.time(), stream=stream, interval=0.0)
  for epoch in (1, 2, 3):
    bar.update(dict(RECORD, epoch=epoch))
  bar.close()
  lines = stream.getvalue().splitlines()
  assert len(lines) == 3
  assert '\r' not in stream.getvalue()
  assert lines[-1].startswith('trax-rl: epoch 3/3 ')
  for field in ('steps=123000', 'return=187.2', 'eval_t0_s500=499.0'):
    assert field in lines[-1]


def test_lines_come_at_most_every_interval_and_at_the_end():
  stream = io.StringIO()
  bar = progress.Progress(50, time.time(), stream=stream, interval=3600.0)
  for epoch in range(1, 51):
    bar.update(dict(RECORD, epoch=epoch))
  lines = stream.getvalue().splitlines()
  assert [line.split()[2] for line in lines] == ['1/50', '50/50']


def test_a_terminal_without_width_gets_lines(monkeypatch):
  monkeypatch.setattr(shutil, 'get_terminal_size', lambda fallback=None: (0, 0))
  assert not progress.is_terminal(_Tty())
  monkeypatch.setattr(
    shutil,
    'get_terminal_size',
    lambda fallback=None: shutil.os.terminal_size((80, 24)),
  )
  assert progress.is_terminal(_Tty())
  assert not progress.is_terminal(io.StringIO())


def test_the_bar_shows_steps_and_evals_within_80_columns():
  stream = _Tty()
  bar = progress.Progress(100, time.time() - 5, stream=stream, bar=True)
  bar.update(dict(RECORD, epoch=37))
  bar.close()
  shown = re.split(r'[\r\n]', stream.getvalue())
  last = [s for s in shown if s.strip()][-1]
  assert len(last) <= 80, last
  for field in ('steps 123k', 'eval 499.0', 'ret 187.2', 'ep 1234'):
    assert field in last


GYMNAX_PG = (
  cli_args.TINY_GYMNAX_PG
  + """
train_rl.n_epochs = 4
train_rl.epochs_per_call = 4
"""
)


def test_the_device_source_reports_each_epoch_from_inside_its_call():
  events = []
  configurables.parse(bindings=[GYMNAX_PG])
  configurables.train_rl(
    output_dir=None,
    callbacks=[lambda _, r: events.append(('record', r['epoch']))],
    progress=lambda e: events.append(('tick', e)),
  )
  # One compiled call of four epochs: each ticks as it ends, before the
  # call returns and its records exist.
  assert events == [('tick', e) for e in (1, 2, 3, 4)] + [
    ('record', e) for e in (1, 2, 3, 4)
  ]


def test_train_logs_lines_when_stderr_is_not_a_terminal(tmp_path, capsys):
  gin_file = tmp_path / 'pg.gin'
  gin_file.write_text(GYMNAX_PG)
  code = cli.main(
    ['train', '--config_file', str(gin_file), '--output_dir', str(tmp_path)]
  )
  assert code == 0
  err = capsys.readouterr().err
  assert '\r' not in err
  assert 'trax-rl: epoch 4/4 ' in err
