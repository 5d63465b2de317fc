"""Tests for trax_rl.tracking: TensorBoard against env steps, a folder per
seed, nothing for a resume that trains nothing, and W&B in offline mode."""

import json
import pathlib
import re
import struct

import pytest
from tensorboardX.proto import event_pb2

from trax_rl import cli, configurables, metrics, tracking
from trax_rl.testing import cli_args

PG_GIN = cli_args.TINY_GYMNAX_PG


class Recorder:
  """A tracker that keeps what it is given."""

  def __init__(self):
    self.logged: list[tuple[int, dict]] = []
    self.closed = False

  def log(self, seed, record):
    self.logged.append((seed, dict(record)))

  def close(self):
    self.closed = True


def _events(folder: pathlib.Path) -> dict[str, list[int]]:
  """{tag: steps} of the TensorBoard event files in folder (not below)."""
  steps: dict[str, list[int]] = {}
  for path in sorted(folder.glob('events.out.tfevents.*')):
    data = path.read_bytes()
    at = 0
    while at < len(data):  # TFRecord: length, its crc, the event, its crc.
      (n,) = struct.unpack('<Q', data[at : at + 8])
      event = event_pb2.Event.FromString(data[at + 12 : at + 12 + n])
      at += 12 + n + 4
      for value in event.summary.value:
        steps.setdefault(value.tag, []).append(event.step)
  return steps


def _train(output_dir, n_epochs, *bindings, tracker=None):
  configurables.parse(
    bindings=[PG_GIN, f'train_rl.n_epochs = {n_epochs}', *bindings]
  )
  return configurables.train_rl(output_dir=str(output_dir), tracker=tracker)


def test_trackers_get_each_record_against_env_steps(tmp_path):
  recorder = Recorder()
  _train(tmp_path, 3, 'PolicyGradient.seed = 7', tracker=recorder)
  records = metrics.read(tmp_path)
  assert [s for s, _ in recorder.logged] == [7, 7, 7]
  assert [r for _, r in recorder.logged] == records
  assert recorder.closed
  # TensorBoard's x axis is env steps, not the epoch.
  steps = _events(tmp_path / 'tb')
  assert steps['avg_return'] == [64, 128, 192]
  assert [r['n_interactions'] for r in records] == [64, 128, 192]


def test_a_seed_batch_gets_a_folder_per_seed(tmp_path):
  recorder = Recorder()
  _train(tmp_path, 2, 'train_rl.n_seeds = 2', tracker=recorder)
  assert sorted({s for s, _ in recorder.logged}) == [0, 1]
  assert sorted(p.name for p in (tmp_path / 'tb').iterdir()) == [
    'seed_0',
    'seed_1',
  ]
  for seed in (0, 1):
    steps = _events(tmp_path / 'tb' / f'seed_{seed}')
    assert steps['avg_return'] == [64, 128]  # One curve per seed.
    assert 'seed' not in steps


def test_a_resume_that_trains_nothing_writes_no_event_file(tmp_path):
  _train(tmp_path, 2)
  before = sorted((tmp_path / 'tb').iterdir())
  recorder = Recorder()
  _train(tmp_path, 2, tracker=recorder)  # Done already.
  assert sorted((tmp_path / 'tb').iterdir()) == before
  assert recorder.logged == []


@pytest.mark.parametrize(
  'tracker, culprit',
  [
    ('tensorboard', "train_rl.tracker must be None, 'wandb' or a tracker"),
    (object(), 'must have log(seed, record) and close()'),
  ],
)
def test_a_bad_tracker_is_named_before_training(tmp_path, tracker, culprit):
  with pytest.raises(ValueError, match=re.escape(culprit)):
    _train(tmp_path, 2, tracker=tracker)
  assert not (tmp_path / metrics.METRICS_FILE).exists()


def _wandb_file(run_dir: pathlib.Path, run_id: str) -> bytes:
  (path,) = run_dir.glob(f'wandb/offline-run-*-{run_id}/run-{run_id}.wandb')
  return path.read_bytes()


def test_track_logs_to_wandb_offline_and_a_resume_continues_the_run(
  tmp_path, capsys, monkeypatch
):
  pytest.importorskip('wandb')  # The [wandb] extra; the test extra has it.
  monkeypatch.setenv('WANDB_SILENT', 'true')
  gin_file = tmp_path / 'pg.gin'
  gin_file.write_text(PG_GIN)
  args = [
    'train',
    '--config_file',
    str(gin_file),
    '--output_dir',
    str(tmp_path / 'run'),
    '--no_progress',
    '--track',
    '--wandb_mode=offline',
    '--wandb_project=trax_rl_tests',
  ]
  assert cli.main([*args, '--config=train_rl.n_epochs=2']) == 0
  capsys.readouterr()
  ids = json.loads((tmp_path / 'run' / 'wandb_runs.json').read_text())
  run_id = ids['0']
  logged = _wandb_file(tmp_path / 'run', run_id)
  # The records against env steps, and the operative gin config.
  for key in (b'n_interactions', b'avg_return', b'RLTask.env', b'gymnax'):
    assert key in logged
  assert b'trax_rl_tests' in logged
  # A resume continues the same W&B run.
  assert cli.main([*args, '--config=train_rl.n_epochs=3']) == 0
  capsys.readouterr()
  assert json.loads((tmp_path / 'run' / 'wandb_runs.json').read_text()) == ids
  assert len(list((tmp_path / 'run' / 'wandb').glob(f'*-{run_id}'))) == 2


def test_wandb_flags_need_track(tmp_path, capsys):
  code = cli.main(
    [
      'train',
      '--config=dqn_cartpole',
      '--output_dir',
      str(tmp_path / 'o'),
      '--wandb_project=x',
    ]
  )
  assert code == cli.EXIT_BAD_INPUT
  err = capsys.readouterr().err.strip().splitlines()
  assert err == ['trax-rl: error: --wandb_project needs --track']


def test_wandb_mode_is_checked(tmp_path):
  pytest.importorskip('wandb')
  with pytest.raises(ValueError, match="WandbTracker.mode must be 'online'"):
    tracking.WandbTracker(mode='offlne')


def test_tracking_may_be_turned_on_when_resuming(tmp_path):
  _train(tmp_path, 1)
  recorder = Recorder()
  _train(
    tmp_path,
    2,
    "WandbTracker.project = 'p'",  # Not a change of the run's config.
    tracker=recorder,
  )
  assert [r['epoch'] for _, r in recorder.logged] == [2]


def test_wandb_missing_names_the_extra(monkeypatch):
  import sys

  monkeypatch.setitem(sys.modules, 'wandb', None)
  with pytest.raises(
    ValueError, match=r"WandbTracker needs wandb: pip install -e '\.\[wandb\]'$"
  ):
    tracking.WandbTracker()
