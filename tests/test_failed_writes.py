"""A write that fails mid-run (disk full) leaves no litter and a loadable run."""

import errno
import json
import os
import pathlib

import pytest
from etils import epath

from trax_rl import checkpoint, cli
from trax_rl.testing import cli_args

ROOT = pathlib.Path(__file__).resolve().parents[1]


class TinyDisk:
  """A fake file system of `capacity` bytes behind `epath` writes.

  Each write stores what still fits, then fails as a full disk does, so the
  temporary file is left half written, as a real `ENOSPC` would leave it.
  """

  def __init__(self, monkeypatch, capacity: int):
    self.free = capacity
    cls = type(epath.Path('/'))
    real = cls.write_bytes

    def write_bytes(path, data):
      if len(data) <= self.free:
        self.free -= len(data)
        return real(path, data)
      real(path, data[: self.free])
      self.free = 0
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(cls, 'write_bytes', write_bytes)


def test_failed_write_removes_its_temp_file_and_keeps_the_old(
  tmp_path, monkeypatch
):
  path = tmp_path / 'c.pkl'
  checkpoint.save(path, {'v': 1})
  TinyDisk(monkeypatch, capacity=10)
  with pytest.raises(OSError, match='No space left'):
    checkpoint.save(path, {'v': 2, 'pad': b'x' * 100})
  assert os.listdir(tmp_path) == ['c.pkl']
  assert checkpoint.load(path) == {'v': 1}
  with pytest.raises(OSError):
    checkpoint.write_atomic(tmp_path / 'new.txt', 'y' * 100)
  assert os.listdir(tmp_path) == ['c.pkl']


def _train(output_dir, n_epochs):
  return cli.main(
    cli_args.tiny_pg_train(
      ROOT / 'gin' / 'pg_cartpole.gin', output_dir, n_epochs
    )
  )


def test_disk_full_mid_run_then_resume(capsys, tmp_path, monkeypatch):
  ref, run = tmp_path / 'ref', tmp_path / 'run'
  assert _train(ref, 4) == 0
  assert _train(run, 2) == 0
  saved = (run / 'checkpoint.pkl').read_bytes()
  capsys.readouterr()
  with monkeypatch.context() as patch:
    # Room for epoch 3's trajectories but not for its checkpoint.
    TinyDisk(patch, capacity=len(saved) // 2)
    code = _train(run, 4)
  err = capsys.readouterr().err.strip().splitlines()
  assert code == 2
  assert len(err) == 1 and 'No space left on device' in err[0], err
  assert not [p for p in run.rglob('*') if '.tmp' in p.name]
  assert (run / 'checkpoint.pkl').read_bytes() == saved
  # Room again: the same command resumes from epoch 2 and ends as the run
  # that was never interrupted.
  assert _train(run, 4) == 0
  assert capsys.readouterr().err == ''
  ours, theirs = (checkpoint.load(d / 'checkpoint.pkl') for d in (run, ref))
  assert ours['epoch'] == theirs['epoch'] == 4
  assert ours['avg_returns'] == theirs['avg_returns']
  epochs = [
    json.loads(line)['epoch']
    for line in (run / 'metrics.jsonl').read_text().splitlines()
  ]
  assert epochs == [1, 2, 3, 4]
