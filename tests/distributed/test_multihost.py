"""Two JAX processes on 127.0.0.1 train one agent as one learner.

Each process steps its own envs and brings its own rows of each batch;
the program runs over the processes' mapped axis (`sources.processes`).
The tests compare the processes' learners, the chief's checkpoint and a
resume that gives each process its own state.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import pytest

from trax_rl import checkpoint, configurables
from trax_rl.testing import jobs

ROOT = pathlib.Path(__file__).resolve().parents[2]
_CLI = 'import json, sys; from trax_rl import cli; sys.exit(cli.main(json.loads(sys.argv[1])))'

_AGENT_SCRIPT = textwrap.dedent(
  """
  import json, sys
  import jax, numpy as np, psutil
  from jax.experimental import multihost_utils
  from trax_rl import configurables

  port, process_id, chief_dir, own_dir = sys.argv[1:5]
  CONFIG = [
      "RLTask.env = 'CartPole-v1'",
      'RLTask.initial_trajectories = 0',
      'RLTask.max_steps = 20',
      'MLP.layer_widths = (8,)',
      'Policy.body = @MLP',
      'PolicyGradient.model_fn = @Policy',
      'PolicyGradient.batch_size = 4',
      'PolicyGradient.n_trajectories_per_epoch = 3',
      'PolicyGradient.seed = 5',
      'train_rl.agent_class = @PolicyGradient',
      # Checking compile options compiles a program; the job must be
      # joined before that (it used to fail with a RuntimeError).
      "train_rl.compiler_options = {'cpu': {'xla_backend_optimization_level': 1}}",
  ]

  def train(output_dir, n_epochs):
    configurables.parse([], CONFIG)
    agent = configurables.train_rl(
        output_dir=output_dir, n_epochs=n_epochs, multihost=True,
        coordinator_address=f'127.0.0.1:{port}', num_processes=2,
        process_id=int(process_id))
    learner = agent.learner
    data = agent.runner.source.collect(agent.runner.learner).rollout
    return {
        'process': jax.process_index(),
        'devices': jax.process_count(),
        'epoch': agent.current_epoch,
        'step': int(learner.train.step),
        'params': [np.asarray(x).ravel().tolist()
                   for x in jax.tree.leaves(learner.train.params)],
        # What this process's envs play next.
        'observations': np.asarray(data.observation).tolist(),
    }

  fresh = train(own_dir, 2)
  multihost_utils.sync_global_devices('chief saved')
  resumed = train(chief_dir, 3)
  sockets = [c.laddr.ip for c in psutil.Process().net_connections('inet')
             if c.laddr]
  print(json.dumps({'fresh': fresh, 'resumed': resumed, 'sockets': sockets}))
  """
)


def _assert_same_learner(first, second, n_epochs):
  assert first['process'] == 0 and second['process'] == 1
  assert first['epoch'] == second['epoch'] == n_epochs
  assert first['step'] == n_epochs
  jobs.assert_learn_in_step(first, second)


def test_two_processes_train_one_agent(tmp_path):
  chief_dir, other_dir = tmp_path / 'chief', tmp_path / 'other'
  first, second = jobs.run_job(
    _AGENT_SCRIPT, [[chief_dir, chief_dir], [chief_dir, other_dir]]
  )
  _assert_same_learner(first['fresh'], second['fresh'], 2)
  # Resumed from the chief's checkpoint, both went on in step.
  _assert_same_learner(first['resumed'], second['resumed'], 3)
  assert first['fresh']['params'] != first['resumed']['params']
  # Only the chief writes the checkpoint, metrics and config; the other
  # process only its own state.
  assert [p.name for p in other_dir.iterdir()] == ['processes']
  assert [p.name for p in (other_dir / 'processes').iterdir()] == ['1']
  assert (chief_dir / 'config.gin').exists()
  assert checkpoint.load(chief_dir / 'checkpoint.pkl')['epoch'] == 3
  records = (chief_dir / 'metrics.jsonl').read_text().splitlines()
  assert [json.loads(r)['epoch'] for r in records] == [1, 2, 3]
  for got in (first, second):
    assert got['sockets']
    assert all(jobs.is_loopback(ip) for ip in got['sockets']), got['sockets']


_REPLAY = """
RLTask.env = 'CartPole-v1'
RLTask.initial_trajectories = 0
MLP.layer_widths = (8,)
Quality.body = @MLP
ReplayValueAgent.model_fn = @Quality
ReplayValueAgent.n_interactions_per_epoch = 16
train_rl.agent_class = @ReplayValueAgent
"""

# The replay learners across two processes: each its own envs and table,
# the tables limited as one (`learner_table.insert_and_learn`). The
# ReplayValueAgent is also killed after epoch 2 and resumed: every process
# gets its own state back (envs in flight, replay table, random streams),
# not the chief's. (One job for both, once two tests: each job starts two
# JAX processes, and both built the same replay agent.)
_STREAM_SCRIPT = textwrap.dedent(
  """
  import hashlib, json, os, sys
  import jax, numpy as np
  from trax_rl import configurables

  port, process_id, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
  COMMON = [
      "RLTask.env = 'CartPole-v1'", 'RLTask.initial_trajectories = 0',
      'RLTask.n_envs = 2', 'RLTask.max_steps = 30', 'MLP.layer_widths = (8,)',
  ]
  CONFIGS = {
      'ReplayValueAgent': [
          'Quality.body = @MLP', 'ReplayValueAgent.model_fn = @Quality',
          'ReplayValueAgent.batch_size = 8',
          'ReplayValueAgent.min_replay_size = 16',
          'ReplayValueAgent.samples_per_insert = 2.0',
          'ReplayValueAgent.n_interactions_per_epoch = 40',
          'ReplayValueAgent.n_eval_episodes = 0',
          'train_rl.agent_class = @ReplayValueAgent',
      ],
      'R2D2': [
          'RecurrentQuality.torso = @MLP', 'RecurrentQuality.lstm_size = 8',
          'RecurrentQuality.head_widths = (8,)',
          'R2D2Loss.burn_in_length = 2', 'R2D2Loss.bootstrap_n = 2',
          'R2D2.model_fn = @RecurrentQuality', 'R2D2.loss_fn = @R2D2Loss()',
          'R2D2.trace_length = 4', 'R2D2.sequence_period = 3',
          'R2D2.batch_size = 4', 'R2D2.min_replay_size = 8',
          'R2D2.samples_per_insert = 2.0',
          'R2D2.n_interactions_per_epoch = 64', 'R2D2.n_eval_episodes = 0',
          'train_rl.agent_class = @R2D2',
      ],
  }

  def train(name, n_epochs, output_dir=None):
    configurables.parse([], COMMON + CONFIGS[name])
    agent = configurables.train_rl(
        output_dir=output_dir, n_epochs=n_epochs, multihost=True,
        coordinator_address=f'127.0.0.1:{port}', num_processes=2,
        process_id=process_id)
    learner = agent.learner
    table = hashlib.sha256()
    for leaf in jax.tree.leaves(learner.replay):
      table.update(np.asarray(leaf).tobytes())
    return agent, {
        'epoch': agent.current_epoch,
        'step': int(learner.train.step),
        'devices': jax.process_count(),
        'table': table.hexdigest(),
        'counts': [int(learner.replay.num_inserts),
                   int(learner.replay.num_samples)],
        'params': [np.asarray(x).ravel().tolist()
                   for x in jax.tree.leaves(learner.train.params)],
    }

  def observations(agent):
    # What this process's envs play next (read after the state above).
    data = agent.runner.source.collect(agent.runner.learner).rollout
    return np.asarray(data.observation).tolist()

  agent, full = train('ReplayValueAgent', 4, os.path.join(out_dir, 'full'))
  train('ReplayValueAgent', 2, os.path.join(out_dir, 'cut'))
  _, resumed = train('ReplayValueAgent', 4, os.path.join(out_dir, 'cut'))
  out = {'full': full, 'resumed': resumed}
  out['ReplayValueAgent'] = dict(full, observations=observations(agent))
  agent, r2d2 = train('R2D2', 3)
  out['R2D2'] = dict(r2d2, observations=observations(agent))
  print(json.dumps(out))
  """
)


def test_replay_learners_train_and_resume_across_two_processes(tmp_path):
  first, second = jobs.run_job(_STREAM_SCRIPT, [[tmp_path], [tmp_path]])
  for name in ('ReplayValueAgent', 'R2D2'):
    a, b = first[name], second[name]
    # The same learner calls on both, so the same replicated parameters;
    # each process fed its own table from its own envs.
    jobs.assert_learn_in_step(a, b)
    # Every table is sampled at each update, none past the job's ratio.
    samples = a['counts'][1]
    assert b['counts'][1] == samples
    assert 0 < samples <= 2.0 * min(a['counts'][0], b['counts'][0])
  # Killed after epoch 2 and resumed: each process as if never killed.
  for got in (first, second):
    assert got['full']['epoch'] == 4
    assert got['resumed'] == got['full']
  # Each process kept its own table: the two tables differ.
  assert first['full']['table'] != second['full']['table']
  own = tmp_path / 'cut' / 'processes' / '1'
  assert sorted(p.name for p in own.glob('*.pkl')) == ['checkpoint-4.pkl']
  assert not (tmp_path / 'cut' / 'processes' / '0').exists()


def test_a_device_epoch_is_refused():
  # A compiled device epoch runs its own number of updates.
  configurables.parse(
    [], [*_REPLAY.strip().splitlines(), "RLTask.env = 'gymnax:CartPole-v1'"]
  )
  agent = configurables.train_rl(build_only=True)
  with pytest.raises(ValueError, match='trains on the host path'):
    agent.join_job()


def test_a_process_that_cannot_write_its_state_folder_is_named(
  tmp_path, monkeypatch
):
  # Process 1 writes only processes/1 under the shared output_dir; a file
  # in the way is a one-line error at build time, not an OSError at the
  # first checkpoint, and the file stays as it was.
  blocker = tmp_path / 'processes'
  blocker.write_text('precious')
  monkeypatch.setattr(jax, 'process_index', lambda: 1)
  configurables.parse([], _REPLAY.strip().splitlines())
  with pytest.raises(ValueError, match=r'processes/1 is not writable'):
    configurables.train_rl(output_dir=str(tmp_path), build_only=True)
  assert blocker.read_text() == 'precious'


def test_multihost_refuses_the_device_path_in_one_line(tmp_path):
  # Refused before joining a job or compiling anything: the gymnax PPO
  # config also sets compiler options, whose check compiles a program
  # (which used to end in JAX's RuntimeError about initialize's order).
  env = {k: v for k, v in os.environ.items() if not k.startswith('JAX_')}
  args = [
    'train',
    '--config_file',
    str(ROOT / 'gin/gymnax/ppo_cartpole.gin'),
    '--output_dir',
    str(tmp_path / 'run'),
    '--multihost',
  ]
  result = subprocess.run(
    [sys.executable, '-c', _CLI, json.dumps(args)],
    env=dict(env, JAX_PLATFORMS='cpu'),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 2, result.stderr[-2000:]
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, lines
  assert 'multihost trains on the host path' in lines[0]
  assert 'gymnax:CartPole-v1' in lines[0]
  assert not (tmp_path / 'run').exists()  # The failed run left no folder.
