"""Two JAX processes on 127.0.0.1: the global-mesh update equals one process's.

Each process runs the Trainer's data-parallel update on the global mesh
(`sharding.DataParallelUpdate` over `multihost.global_mesh()`) on its half
of a batch; the test compares the parameters both end with to a one-device update on the
whole batch (computed in each process, outside the mesh). Importance weights are max-normalized over the global
batch, so a per-process normalization would show.
"""

import functools
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from trax_rl import checkpoint, configurables
from trax_rl.distributed import multihost
from trax_rl.networks import base, models
from trax_rl.testing import jobs

ROOT = pathlib.Path(__file__).resolve().parents[2]
_CLI = 'import json, sys; from trax_rl import cli; sys.exit(cli.main(json.loads(sys.argv[1])))'

_SCRIPT = textwrap.dedent(
  """
  import functools, json, sys
  import jax, numpy as np, optax
  from trax_rl.distributed import multihost

  port, process_id = sys.argv[1], int(sys.argv[2])
  multihost.initialize(f'127.0.0.1:{port}', 2, process_id)
  from trax_rl import types
  from trax_rl.losses import q_learning
  from trax_rl.networks import base, models
  from trax_rl.supervised import sharding, train_state, update

  def batch(rows):
    rng = np.random.default_rng(0)
    full = types.Batch(types.Transition(
        observation=rng.normal(size=(8, 3)).astype(np.float32),
        action=rng.integers(0, 2, 8).astype(np.int32),
        reward=rng.normal(size=8).astype(np.float32),
        discount=np.full(8, 0.9, np.float32),
        next_observation=rng.normal(size=(8, 3)).astype(np.float32)),
        rng.uniform(0.1, 1.0, 8).astype(np.float32))
    return jax.tree.map(lambda x: x[rows], full)

  network = base.from_module(models.Quality(n_actions=2, body=functools.partial(
      models.MLP, layer_widths=(16,))), np.zeros(3, np.float32))
  loss = q_learning.PrioritizedDoubleQLearning(importance_sampling_exponent=0.5)
  optimizer = optax.adam(1e-2)
  params = network.init(jax.random.PRNGKey(1))
  state = train_state.TrainState(
      params, params, optimizer.init(params), np.asarray(0, np.int32),
      jax.random.PRNGKey(2))
  update_fn = update.make_update_fn(network, loss, optimizer, 1)
  step = sharding.DataParallelUpdate(update_fn, multihost.global_mesh())
  rows = slice(4 * process_id, 4 * process_id + 4)
  new, extra = step(sharding.replicate(state, step.mesh), batch(rows))
  params = multihost.local_copy(new.params)
  mine = sharding.to_local(extra, step.mesh).priorities
  # The reference: this process alone, the whole batch, one device.
  local = jax.local_devices()[0]
  ref, ref_extra = jax.jit(update_fn)(
      jax.device_put(state, local), jax.device_put(batch(slice(0, 8)), local))
  assert np.allclose(mine, ref_extra.priorities[rows], rtol=1e-5), (
      mine, ref_extra.priorities)
  # Batches of other shapes on each process are refused, not mis-reduced.
  try:
    sharding.shard_batch(np.zeros((2, 1 + process_id), np.float32), step.mesh)
    mismatch = ''
  except ValueError as e:
    mismatch = str(e)
  print(json.dumps({
      'mismatch': mismatch,
      'chief': multihost.is_chief(),
      'devices': jax.device_count(),
      'params': [np.asarray(x).ravel().tolist() for x in jax.tree.leaves(params)],
      'reference': [
          np.asarray(x).ravel().tolist() for x in jax.tree.leaves(ref.params)],
  }))
  """
)


def test_two_processes_update_like_one():
  first, second = jobs.run_job(_SCRIPT, [[], []])
  assert first['devices'] == second['devices'] == 2
  assert first['chief'] and not second['chief']
  for got in (first, second):
    assert 'must pass the same batch shapes' in got['mismatch']
  reference = first['reference']
  assert second['reference'] == reference
  for got in (first, second):
    for a, b in zip(got['params'], reference, strict=True):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  # The update moved the parameters (so the comparison means something).
  assert _initial_params() != reference


def _initial_params():
  network = base.from_module(
    models.Quality(
      n_actions=2, body=functools.partial(models.MLP, layer_widths=(16,))
    ),
    np.zeros(3, np.float32),
  )
  params = network.init(jax.random.PRNGKey(1))
  return [np.asarray(x).ravel().tolist() for x in jax.tree.leaves(params)]


# One agent trained by two processes through train_rl.multihost: first
# each on its own output_dir, then both resuming from the chief's.
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
    trainer = agent.loop.trainer
    last = agent.task.trajectories[max(agent.task.trajectories)]
    return {
        'process': jax.process_index(),
        'devices': trainer.n_devices,
        'epoch': agent.current_epoch,
        'step': trainer.step,
        'params': [np.asarray(x).ravel().tolist()
                   for x in jax.tree.leaves(trainer.params)],
        'observations': [t.to_np().observation.tolist() for t in last],
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
# the tables limited as one (`learner_table.insert_and_learn`).
_STREAM_SCRIPT = textwrap.dedent(
  """
  import json, sys
  import jax, numpy as np
  from trax_rl import configurables

  port, process_id = sys.argv[1], int(sys.argv[2])
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
          'ReplayValueAgent.n_interactions_per_epoch = 64',
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
  out = {}
  for name, config in CONFIGS.items():
    configurables.parse([], COMMON + config)
    agent = configurables.train_rl(
        n_epochs=3, multihost=True, coordinator_address=f'127.0.0.1:{port}',
        num_processes=2, process_id=process_id)
    last = agent.task.trajectories[max(agent.task.trajectories)]
    out[name] = {
        'step': agent.trainer.step,
        'devices': agent.trainer.n_devices,
        'counts': list(agent.table.counts),
        'params': [np.asarray(x).ravel().tolist()
                   for x in jax.tree.leaves(agent.trainer.params)],
        'observations': [t.to_np().observation.tolist() for t in last],
    }
  print(json.dumps(out))
  """
)


# Killed after epoch 2 and resumed: every process gets its own state back
# (envs in flight, replay table, random streams), not the chief's.
_RESUME_SCRIPT = textwrap.dedent(
  """
  import hashlib, json, os, sys
  import jax, numpy as np
  from trax_rl import configurables

  port, process_id, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
  CONFIG = [
      "RLTask.env = 'CartPole-v1'", 'RLTask.initial_trajectories = 0',
      'RLTask.n_envs = 2', 'RLTask.max_steps = 30', 'MLP.layer_widths = (8,)',
      'Quality.body = @MLP', 'ReplayValueAgent.model_fn = @Quality',
      'ReplayValueAgent.batch_size = 8',
      'ReplayValueAgent.min_replay_size = 16',
      'ReplayValueAgent.samples_per_insert = 2.0',
      'ReplayValueAgent.n_interactions_per_epoch = 40',
      'ReplayValueAgent.n_eval_episodes = 0',
      'train_rl.agent_class = @ReplayValueAgent',
  ]

  def train(output_dir, n_epochs):
    configurables.parse([], CONFIG)
    agent = configurables.train_rl(
        output_dir=output_dir, n_epochs=n_epochs, multihost=True,
        coordinator_address=f'127.0.0.1:{port}', num_processes=2,
        process_id=process_id)
    table = hashlib.sha256()
    for leaf in jax.tree.leaves(agent.table.state_dict()):
      array = np.asarray(leaf)  # Big ints (RNG states) as their digits.
      table.update(repr(leaf).encode() if array.dtype == object else
                   array.tobytes())
    return {
        'epoch': agent.current_epoch,
        'step': agent.trainer.step,
        'table': table.hexdigest(),
        'counts': list(agent.table.counts),
        'params': [np.asarray(x).ravel().tolist()
                   for x in jax.tree.leaves(agent.trainer.params)],
    }

  full = train(os.path.join(out, 'full'), 4)
  train(os.path.join(out, 'cut'), 2)
  resumed = train(os.path.join(out, 'cut'), 4)
  print(json.dumps({'full': full, 'resumed': resumed}))
  """
)


def test_a_resumed_job_gives_each_process_its_own_state(tmp_path):
  first, second = jobs.run_job(_RESUME_SCRIPT, [[tmp_path], [tmp_path]])
  for got in (first, second):
    assert got['resumed'] == got['full']
  # Each process kept its own table: the two tables differ.
  assert first['full']['table'] != second['full']['table']
  own = tmp_path / 'cut' / 'processes' / '1'
  assert sorted(p.name for p in own.glob('*.pkl')) == ['checkpoint-4.pkl']
  assert not (tmp_path / 'cut' / 'processes' / '0').exists()


def test_replay_learners_train_across_two_processes():
  first, second = jobs.run_job(_STREAM_SCRIPT, [[], []])
  for name in ('ReplayValueAgent', 'R2D2'):
    a, b = first[name], second[name]
    # The same learner calls on both, so the same replicated parameters;
    # each process fed its own table from its own envs.
    jobs.assert_learn_in_step(a, b)
    # Every table is sampled at each update, none past the job's ratio.
    samples = a['counts'][2]
    assert b['counts'][2] == samples
    assert 0 < samples <= 2.0 * min(a['counts'][1], b['counts'][1])


def test_a_device_epoch_is_refused():
  # A compiled device epoch runs its own number of updates.
  configurables.parse(
    [], [*_REPLAY.strip().splitlines(), "RLTask.env = 'gymnax:CartPole-v1'"]
  )
  agent = configurables.train_rl(build_only=True)
  with pytest.raises(ValueError, match='trains on the host path'):
    multihost.join_agent(agent)


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
  assert not list((tmp_path / 'run').iterdir())
