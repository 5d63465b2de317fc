"""The host sources' pipeline: acting ahead of (and beside) learning."""

import threading

import jax
import numpy as np
import pytest

import trax_rl
from trax_rl import checkpoint
from trax_rl.sources import pipeline

DQN = 'gin/acme_dqn_cartpole.gin'
SMALL_DQN = [
  'ReplayValueAgent.n_eval_episodes = 1',
  'ReplayValueAgent.min_replay_size = 100',
  'ReplayValueAgent.n_interactions_per_epoch = 200',
  'train_rl.final_eval = False',
]
PPO = 'gin/ppo_cartpole.gin'
SMALL_PPO = ['PPO.n_eval_episodes = 1', 'train_rl.final_eval = False']
TIMES = ('collect_s', 'train_s', 'epoch_s', 'env_steps_per_s')


def _untimed(records):
  return [{k: v for k, v in r.items() if k not in TIMES} for r in records]


def _train(config, bindings, n_epochs, output_dir=None):
  return trax_rl.train(config, output_dir, bindings, n_epochs)


def _learner(run):
  return jax.tree.leaves(run.agent.learner)


def _assert_same(a, b):
  np.testing.assert_equal(_untimed(a.records), _untimed(b.records))
  for x, y in zip(_learner(a), _learner(b), strict=True):
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
  'config,bindings',
  [
    (DQN, SMALL_DQN),
    (PPO, SMALL_PPO),
    (DQN, SMALL_DQN + ['train_rl.n_seeds = 2']),
  ],
  ids=['dqn', 'ppo', 'dqn-2-seeds'],
)
def test_overlap_gives_the_records_of_the_same_depth_without_it(
  config, bindings
):
  depth = ['train_rl.pipeline_depth = 1']
  plain = _train(config, bindings, 5)
  sequential = _train(config, bindings + depth, 5)
  overlapped = _train(config, bindings + ['train_rl.overlap = True'], 5)
  _assert_same(sequential, overlapped)
  # (A seed batch's records are its seeds' means.)
  assert [r['policy_lag'] for r in overlapped.records] == [0, 1, 1, 1, 1]
  assert [r['policy_lag'] for r in plain.records] == [0] * 5
  # Epoch 1 acts with the initial learner either way; from epoch 2 on the
  # data of the pipelined run is one learner older.
  assert plain.records[0]['avg_return'] == sequential.records[0]['avg_return']
  np.testing.assert_raises(AssertionError, _assert_same, plain, sequential)


def test_deeper_pipelines_lag_more_and_collect_nothing_past_the_end():
  run = _train(DQN, SMALL_DQN + ['train_rl.pipeline_depth = 3'], 6)
  assert [r['policy_lag'] for r in run.records] == [0, 1, 2, 3, 3, 3]
  state = run.agent.runner.source.state_dict()
  assert state['pipeline']['pending'] == []
  # Every env step collected was learned from: 6 epochs of 200.
  assert run.records[-1]['n_interactions'] == 1200
  envs = state['envs']['seeds'][0]
  assert envs['n_interactions'] == 1200


@pytest.mark.parametrize(
  'overlap', [False, True], ids=['sequential', 'overlap']
)
def test_a_pipelined_run_killed_and_resumed_ends_as_one_straight_run(
  tmp_path, overlap
):
  bindings = SMALL_DQN + [
    'train_rl.pipeline_depth = 2',
    f'train_rl.overlap = {overlap}',
  ]
  straight = _train(DQN, bindings, 6)
  done = _train(DQN, bindings, 6, str(tmp_path / 'done'))
  _assert_same(straight, done)
  ckpt = checkpoint.load(tmp_path / 'done' / 'checkpoint.pkl')
  assert ckpt['source']['pipeline']['pending'] == []  # Nothing past the end.
  partial = tmp_path / 'partial'
  cut = _CutAfter(3)
  with pytest.raises(_Cut):  # The process ends after epoch 3 is saved.
    trax_rl.train(DQN, str(partial), bindings, 6, callbacks=[cut])
  ckpt = checkpoint.load(partial / 'checkpoint.pkl')
  assert ckpt['epoch'] == 3
  assert len(ckpt['source']['pipeline']['pending']) == 2  # Epochs 4, 5.
  resumed = _train(DQN, bindings, 6, str(partial))
  _assert_same(straight, resumed)


class _Cut(Exception):
  pass


class _CutAfter:
  """A callback that "kills" the run after its n-th epoch was saved."""

  def __init__(self, n):
    self.n = n

  def __call__(self, agent, record):
    if record['epoch'] >= self.n:
      raise _Cut()


def test_the_pipeline_learns_while_it_collects_ahead():
  collecting, learning = threading.Event(), threading.Event()
  calls = []

  def collect(view):
    calls.append(view)
    if len(calls) > 1:  # After the first: collected ahead, beside learn.
      collecting.set()
      assert learning.wait(10), 'learn did not run beside collect'
    return view

  def learn(data):
    learning.set()
    if ahead:
      assert collecting.wait(10), 'collect did not run beside learn'
    return data

  pipe = pipeline.Pipeline(collect, depth=1, overlap=True)
  pipe.set_epochs_left(4)
  seen = []
  for version in range(4):
    collecting.clear()
    learning.clear()
    ahead = version < 3  # The last epoch collects nothing ahead.
    item, out, lag = pipe.epoch(lambda v=version: v, learn)
    seen.append((item.data, item.version, out, lag))
  pipe.close()
  # Epoch e learns the data collected with the learner of epoch e - 2.
  assert seen == [(0, 0, 0, 0), (0, 0, 0, 1), (1, 1, 1, 1), (2, 2, 2, 1)]
  assert calls == [0, 0, 1, 2]
  assert pipe.n_pending == 0


def test_bad_pipelines_are_refused_in_one_line():
  with pytest.raises(ValueError, match='needs train_rl.pipeline_depth >= 1'):
    pipeline.Pipeline(lambda v: v, depth=0, overlap=True)
  with pytest.raises(ValueError, match='pipeline_depth'):
    pipeline.Pipeline(lambda v: v, depth=-1)
  with pytest.raises(ValueError, match='gymnasium source.*DeviceSource'):
    _train(
      'gin/gymnax/dqn_cartpole.gin',
      ['train_rl.overlap = True', 'train_rl.final_eval = False'],
      1,
    )
