"""Tests for trax_rl.distributed without Ray: workers, collectors, wiring."""

import functools
import subprocess
import sys

import jax
import numpy as np
import pytest

from trax_rl import cli, configurables
from trax_rl.distributed import local_collector, ray_collector, rollout
from trax_rl.replay import adders

PG = """
RLTask.env = 'CartPole-v1'
RLTask.initial_trajectories = 0
RLTask.n_envs = 2
RLTask.max_steps = 30
MLP.layer_widths = (8,)
Policy.body = @MLP
PolicyGradient.model_fn = @Policy
PolicyGradient.batch_size = 8
PolicyGradient.n_trajectories_per_epoch = 5
PolicyGradient.seed = 3
train_rl.agent_class = @PolicyGradient
train_rl.n_epochs = 1
"""

DQN = """
RLTask.env = 'CartPole-v1'
RLTask.initial_trajectories = 0
RLTask.n_envs = 2
MLP.layer_widths = (8,)
Quality.body = @MLP
ReplayValueAgent.model_fn = @Quality
ReplayValueAgent.batch_size = 4
ReplayValueAgent.min_replay_size = 10
ReplayValueAgent.samples_per_insert = 2.0
ReplayValueAgent.n_interactions_per_epoch = 40
train_rl.agent_class = @ReplayValueAgent
"""


def _lines(config):
  return [line for line in config.splitlines() if line.strip()]


def _worker(config, slot=0, epsilon=None, incarnation=0):
  return rollout.RolloutWorker(
    functools.partial(configurables.build_agent, config),
    slot,
    slot + 1,
    epsilon,
    incarnation,
  )


def _steps(work):
  return [
    (t.total_return, np.asarray(t.to_np().observation).tolist())
    for t in work.trajectories
  ]


def test_a_unit_depends_only_on_seed_epoch_and_unit():
  configurables.parse([], _lines(PG))
  params = configurables.train_rl(build_only=True).rollout_params()
  a, b = _worker(PG), _worker(PG, slot=1)
  first = a.play_unit(0, [params], 4, 2, 2, None)
  a.play_unit(0, [params], 4, 0, 2, None)  # Another unit in between.
  again = a.play_unit(0, [params], 4, 2, 2, None)
  elsewhere = b.play_unit(0, [params], 4, 2, 2, None)
  other = b.play_unit(0, [params], 4, 3, 2, None)
  assert len(first.trajectories) == 2 and first.version == 0
  assert _steps(first) == _steps(again) == _steps(elsewhere)
  assert _steps(first) != _steps(other)


def test_units_act_with_the_params_they_are_given():
  configurables.parse([], _lines(PG))
  learner = configurables.train_rl(build_only=True)
  params = learner.rollout_params()
  zeroed = jax.tree.map(np.zeros_like, params)
  worker = _worker(PG)
  with_params = worker.play_unit(0, [params], 1, 0, 2, None)
  with_zeros = worker.play_unit(1, [zeroed], 1, 0, 2, None)
  # Zero weights give uniform logits: dist_inputs equal across actions.
  logits = with_zeros.trajectories[0].to_np().dist_inputs
  np.testing.assert_allclose(logits, logits[..., :1] * np.ones_like(logits))
  assert with_params.version == 0 and with_zeros.version == 1


def test_chunks_continue_episodes_and_offset_streams():
  configurables.parse([], _lines(DQN))
  params = configurables.train_rl(build_only=True).rollout_params()
  worker = _worker(DQN, slot=3, epsilon=0.1)
  chunk = worker.play_chunk(5, [params], 16)
  later = worker.play_chunk(5, [params], 16)
  assert chunk.n_interactions == 16 and chunk.slot == 3 and chunk.version == 5
  streams = {
    adders.origin(t)[0] for t in chunk.trajectories + later.trajectories
  }
  assert streams == {6, 7}  # slot 3 x 2 envs
  # The second chunk continues episodes the first one cut.
  assert any(not adders.origin(t)[1] for t in later.trajectories)


def test_apex_epsilons():
  assert rollout.apex_epsilon(0, 1, 0.4, 7.0) == pytest.approx(0.4)
  eps = [rollout.apex_epsilon(i, 3, 0.4, 7.0) for i in range(3)]
  np.testing.assert_allclose(eps, [0.4, 0.4**4.5, 0.4**8], rtol=1e-5)


def test_local_collector_is_todays_collection():
  returns = []
  for collector in (None, local_collector.LocalCollector):
    bindings = _lines(PG)
    if collector is not None:
      bindings.append('train_rl.collector = @LocalCollector')
    configurables.parse([], bindings)
    agent = configurables.train_rl()
    returns.append([t.total_return for t in agent.task.trajectories[1]])
  assert returns[0] == returns[1]


@pytest.mark.parametrize(
  'kwargs, message',
  [
    ({'n_actors': 0}, 'n_actors'),
    ({'chunk_length': 0}, 'chunk_length'),
    ({'apex_epsilon': 1.5}, 'apex_epsilon'),
    ({'max_restarts': -1}, 'max_restarts'),
  ],
)
def test_ray_collector_validates_its_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    ray_collector.RayCollector(**kwargs)


def test_ray_collector_without_factory_says_how_to_use_it():
  configurables.parse([], _lines(PG))
  agent = configurables.train_rl(build_only=True)
  agent.set_collector(ray_collector.RayCollector(n_actors=1))
  with pytest.raises(ValueError, match='no agent factory'):
    agent.run(1)


def test_streaming_needs_interactions_per_epoch():
  lines = [
    line for line in _lines(DQN) if 'n_interactions_per_epoch' not in line
  ] + ['ReplayValueAgent.n_trajectories_per_epoch = 2']
  configurables.parse([], lines)
  agent = configurables.train_rl(build_only=True)
  collector = ray_collector.RayCollector(n_actors=1)
  collector.set_agent_factory(lambda: None)
  agent.set_collector(collector)
  with pytest.raises(ValueError, match='set n_interactions_per_epoch'):
    agent.run(1)


def test_cli_shorthands_bind_the_ray_collector(tmp_path):
  config = tmp_path / 'pg.gin'
  config.write_text(PG)
  status = cli.main(
    [
      'train',
      f'--config_file={config}',
      f'--output_dir={tmp_path / "o"}',
      '--config=train_rl.n_epochs=0',
      '--no_progress',
      '--n_actors=3',
      '--ray_address=127.0.0.1:6379',
    ]
  )
  assert status == 0
  assert configurables.query('train_rl.collector') is not None
  assert configurables.query('RayCollector.n_actors') == 3
  assert configurables.query('RayCollector.address') == '127.0.0.1:6379'


def test_cli_refuses_zero_actors(tmp_path, capsys):
  config = tmp_path / 'pg.gin'
  config.write_text(PG)
  status = cli.main(
    [
      'train',
      f'--config_file={config}',
      f'--output_dir={tmp_path / "o"}',
      '--n_actors=0',
    ]
  )
  assert status == 2
  assert capsys.readouterr().err.startswith(
    'trax-rl: error: --n_actors must be >= 1'
  )


def test_configurables_do_not_import_ray():
  code = "import sys; import trax_rl.configurables; print('ray' in sys.modules)"
  out = subprocess.run(
    [sys.executable, '-c', code], capture_output=True, text=True, check=True
  )
  assert out.stdout.strip() == 'False'


R2D2 = """
RLTask.env = @masked_cartpole
RLTask.initial_trajectories = 0
RLTask.n_envs = 2
RLTask.max_steps = 30
MLP.layer_widths = (8,)
RecurrentQuality.torso = @MLP
RecurrentQuality.lstm_size = 8
RecurrentQuality.head_widths = (8,)
R2D2Loss.burn_in_length = 2
R2D2Loss.bootstrap_n = 2
R2D2.model_fn = @RecurrentQuality
R2D2.loss_fn = @R2D2Loss()
R2D2.trace_length = 4
R2D2.sequence_period = 3
R2D2.batch_size = 4
R2D2.min_replay_size = 8
R2D2.max_replay_size = 1000
R2D2.samples_per_insert = 2.0
R2D2.epsilon_min = 0.01
R2D2.epsilon_max = 0.5
R2D2.n_interactions_per_epoch = 64
train_rl.agent_class = @R2D2
"""


def test_r2d2_learns_from_chunks_of_two_actors():
  # What a streaming RayCollector does, in one process: chunks of two
  # workers go into the learner's task and are absorbed as they come.
  configurables.parse([], _lines(R2D2))
  learner = configurables.train_rl(build_only=True)
  params = learner.rollout_params()
  workers = [
    rollout.RolloutWorker(
      functools.partial(configurables.build_agent, R2D2), slot, 2, 0.4
    )
    for slot in (0, 1)
  ]
  envs = set()
  for _ in range(2):
    for worker in workers:
      work = worker.play_chunk(0, [params], 16)
      envs |= {int(t.agent_infos[0][adders.STREAM]) for t in work.trajectories}
      learner.task.add_trajectories(
        work.trajectories, 16, 0, work.episode_returns
      )
      assert learner.can_take(16)
      learner.absorb()
  metrics = learner.train_epoch()
  assert envs == {0, 1, 2, 3}  # Two actors x two envs, never shared.
  assert metrics['value/new_items'] > 0 and learner.n_updates() > 0
  assert learner.table.num_inserts == metrics['value/new_items']
  # Actor 1 of 2 takes the last two of the four rates (from epsilon_max
  # down to epsilon_min) that one process with four envs would use.
  four = learner.epsilons(4, 1.0, evaluation=False)
  np.testing.assert_allclose(four[[0, -1]], [0.5, 0.01], rtol=1e-5)
  learner.act_as_rollout_actor(1, 2, 0.4)
  np.testing.assert_allclose(
    learner.epsilons(2, 1.0, evaluation=False), four[2:]
  )
