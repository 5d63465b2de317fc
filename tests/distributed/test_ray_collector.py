"""Tests of RayCollector on a local Ray instance with 2 CPUs (loopback only).

One Ray instance serves the module. Actors are few and runs tiny; waits
poll for a condition with a generous timeout, as Ray starts slowly on a
busy machine.
"""

import functools
import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import psutil
import pytest

from trax_rl import checkpoint, configurables
from trax_rl.distributed import ray_collector, ray_setup
from trax_rl.testing import jobs

PG = """
RLTask.env = 'CartPole-v1'
RLTask.initial_trajectories = 0
RLTask.n_envs = 1
RLTask.max_steps = 20
MLP.layer_widths = (8,)
Policy.body = @MLP
PolicyGradient.model_fn = @Policy
PolicyGradient.batch_size = 8
PolicyGradient.n_trajectories_per_epoch = 6
PolicyGradient.seed = 5
train_rl.agent_class = @PolicyGradient
"""

DQN = """
RLTask.env = 'CartPole-v1'
RLTask.initial_trajectories = 0
RLTask.n_envs = 2
MLP.layer_widths = (8,)
Quality.body = @MLP
ReplayValueAgent.model_fn = @Quality
ReplayValueAgent.batch_size = 4
ReplayValueAgent.n_step = 2
ReplayValueAgent.min_replay_size = 16
ReplayValueAgent.samples_per_insert = 2.0
ReplayValueAgent.n_interactions_per_epoch = 64
ReplayValueAgent.seed = 1
train_rl.agent_class = @ReplayValueAgent
RayCollector.chunk_length = 8
RayCollector.max_in_flight = 1
RayCollector.publish_every = 4
"""
TIMEOUT_S = 400


def _lines(config):
  return [line for line in config.splitlines() if line.strip()]


@pytest.fixture(scope='module')
def cluster():
  started = ray_setup.init_ray(None, num_cpus=2)
  ray = ray_setup.import_ray(None)
  yield ray.get_runtime_context().gcs_address
  if started:
    ray.shutdown()


def _assert_loopback_only() -> int:
  """Every socket of this process and its descendants is on loopback."""
  pids = {p.pid for p in psutil.Process().children(recursive=True)}
  pids.add(os.getpid())
  bound = [
    (c.pid, c.laddr)
    for c in psutil.net_connections('inet')
    if c.pid in pids and c.laddr
  ]
  outside = [(pid, a) for pid, a in bound if not jobs.is_loopback(a.ip)]
  assert bound and not outside, outside
  return len(bound)


def _epoch_data(n_actors, kill=False):
  """Epoch 1 of a fresh PolicyGradient on `n_actors` rollout actors: its
  average return and the learner's ring of steps (as lists)."""
  configurables.parse([], _lines(PG))
  agent = configurables.train_rl(build_only=True)
  # One unit in flight per actor: after the first unit is back, at least
  # four are pending, so the killed actor is always sent another and is
  # replaced. (With two in flight its units could all be done before the
  # kill landed, leaving nothing to fail.)
  agent.set_collector(
    ray_collector.RayCollector(n_actors=n_actors, max_in_flight=1),
    functools.partial(configurables.build_agent, PG),
  )
  source = agent.runner.source
  killed = []

  def kill_first_actor(unit):
    del unit
    if kill and not killed:  # Mid-epoch: after the first unit came back.
      pid = source.actor_pids()[0]
      os.kill(pid, signal.SIGKILL)
      killed.append(pid)

  source.on_work_done = kill_first_actor
  try:
    agent.run(1)
    if kill:
      _assert_loopback_only()
      assert source.restarts == 1  # The killed actor was replaced once.
      assert killed[0] not in source.actor_pids()
  finally:
    agent.close()
  ring = agent.learner.ring
  return agent.avg_returns, [
    np.asarray(x).tolist()
    for x in (ring.observation, ring.action, ring.reward, ring.length)
  ]


def test_epoch_mode_data_is_the_same_for_1_and_2_actors_and_a_kill(cluster):
  del cluster
  one = _epoch_data(1)
  two = _epoch_data(2)
  killed = _epoch_data(2, kill=True)
  assert np.sum(np.asarray(one[1][3]) > 0) > 6  # The episodes' steps.
  assert one == two == killed


def test_stream_mode_credits_lag_and_a_dead_actor(cluster):
  del cluster
  configurables.parse([], _lines(DQN))
  agent = configurables.train_rl(build_only=True)
  agent.set_collector(
    ray_collector.RayCollector(
      n_actors=2, chunk_length=8, max_in_flight=1, publish_every=4
    ),
    functools.partial(configurables.build_agent, DQN),
  )
  source = agent.runner.source
  records, pids = [], []

  def after_epoch(agent_, record):
    records.append(record)
    if agent_.current_epoch == 1:
      pids.extend(source.actor_pids())

  def kill_second_actor(chunk):
    del chunk
    if agent.current_epoch == 2 and len(pids) == 2:
      os.kill(pids.pop(), signal.SIGKILL)

  source.on_work_done = kill_second_actor
  try:
    agent.run(3, callbacks=[after_epoch])
    _assert_loopback_only()
  finally:
    agent.close()
  # Samples per insert: the learner sampled exactly as the limiter allows.
  replay, spi, per_call = agent.learner.replay, 2.0, 4
  inserts, samples = int(replay.num_inserts), int(replay.num_samples)
  owed = spi * (inserts - 16)
  assert owed <= samples <= owed + per_call
  # The dead actor lost at most its in-flight chunk; the epoch was refilled.
  assert source.restarts == 1
  assert records[1]['ray/lost_chunks'] <= 1
  assert records[-1]['n_interactions'] == 3 * 64
  assert [r['ray/chunks'] for r in records] == [4.0, 4.0, 4.0]
  assert int(agent.learner.train.step) > 0
  assert all(r['ray/policy_lag'] >= 0 for r in records)
  # Some chunks came from old params: in epoch 1, before the limiter
  # holds inserts back, both actors play at once (later epochs may take
  # one chunk at a time, each with the newest params).
  assert max(r['ray/policy_lag_max'] for r in records) > 0


def test_a_killed_learner_resumes_with_its_replay(cluster, tmp_path):
  config = tmp_path / 'dqn.gin'
  config.write_text(DQN + 'train_rl.n_epochs = 1000\n')
  out = tmp_path / 'run'
  learner = subprocess.Popen(
    [
      sys.executable,
      '-c',
      'import sys; from trax_rl import cli; sys.exit(cli.main(sys.argv[1:]))',
      'train',
      f'--config_file={config}',
      f'--output_dir={out}',
      '--n_actors=1',
      f'--ray_address={cluster}',
      '--no_progress',
    ],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
  )
  ckpt_path = out / 'checkpoint.pkl'
  deadline = time.monotonic() + TIMEOUT_S
  try:
    while not (ckpt_path.exists() and checkpoint.load(ckpt_path)['epoch'] >= 2):
      assert learner.poll() is None, learner.stderr.read().decode()[-2000:]
      assert time.monotonic() < deadline, 'the learner wrote no epoch 2'
      time.sleep(0.2)
    _assert_loopback_only()
  finally:
    learner.send_signal(signal.SIGKILL)
    learner.wait()
  saved = checkpoint.load(ckpt_path)
  epoch = saved['epoch']
  configurables.parse(
    [str(config)],
    [
      f'train_rl.n_epochs = {epoch + 1}',
      'train_rl.collector = @RayCollector',
      'RayCollector.n_actors = 1',
    ],
  )
  agent = configurables.train_rl(output_dir=str(out))
  assert agent.current_epoch == epoch + 1
  source = agent.runner.source.state_dict()
  assert source['n_interactions'] == saved['source']['n_interactions'] + 64
  # The replay came back: the epoch's chunks went in on top of it.
  inserted = int(agent.learner.replay.num_inserts)
  assert inserted >= saved['source']['n_interactions'] + 64 - 2 * 2
  records = [
    json.loads(line)
    for line in (out / 'metrics.jsonl').read_text().splitlines()
  ]
  assert [r['epoch'] for r in records] == list(range(1, epoch + 2))
  assert records[-1]['ray/chunks'] == 4.0


# Two learner processes of one multi-host job on loopback, each driving
# its own rollout actor on the module's Ray cluster: epoch mode
# (PolicyGradient), then stream mode (ReplayValueAgent).
_MULTIHOST = """
import json, sys
import jax, numpy as np
from trax_rl import configurables

port, process_id, address = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = {}
for name, config in json.loads(sys.argv[4]).items():
  configurables.parse([], config + [
      'train_rl.collector = @RayCollector', 'RayCollector.n_actors = 1',
      f'RayCollector.address = {address!r}', 'RayCollector.actor_cpus = 0'])
  agent = configurables.train_rl(
      n_epochs=2, multihost=True, coordinator_address=f'127.0.0.1:{port}',
      num_processes=2, process_id=process_id)
  learner = agent.learner
  data = agent.runner.source._local.collect(agent.runner.learner).rollout
  out[name] = {
      'step': int(learner.train.step),
      'devices': jax.process_count(),
      'params': [np.asarray(x).ravel().tolist()
                 for x in jax.tree.leaves(learner.train.params)],
      'observations': np.asarray(data.observation).tolist(),
  }
print(json.dumps(out))
"""


def test_a_multihost_learner_with_rollout_actors(cluster):
  configs = json.dumps({'pg': _lines(PG), 'dqn': _lines(DQN)})
  first, second = jobs.run_job(
    _MULTIHOST, [[cluster, configs]] * 2, timeout_s=TIMEOUT_S
  )
  for name in ('pg', 'dqn'):
    # Each process's actors played their own units and streams.
    jobs.assert_learn_in_step(first[name], second[name])


def _pipelined_run(overlap, n_epochs=3):
  """A PolicyGradient on 2 rollout actors, units one epoch ahead of
  learning: its records (timings aside) and learner leaves."""
  configurables.parse([], _lines(PG))
  agent = configurables.train_rl(build_only=True)
  agent.set_collector(
    ray_collector.RayCollector(n_actors=2),
    functools.partial(configurables.build_agent, PG),
  )
  records = []
  try:
    agent.run(
      n_epochs,
      callbacks=[lambda a, r: records.append(dict(r))],
      pipeline_depth=1,
      overlap=overlap,
    )
  finally:
    agent.close()
  untimed = [
    {k: v for k, v in r.items() if not k.endswith('_s')} for r in records
  ]
  return untimed, [np.asarray(x) for x in jax.tree.leaves(agent.learner)]


def test_epoch_mode_units_play_beside_learning_with_the_same_records(cluster):
  del cluster
  sequential = _pipelined_run(overlap=False)
  overlapped = _pipelined_run(overlap=True)
  assert [r['policy_lag'] for r in overlapped[0]] == [0, 1, 1]
  assert sequential[0] == overlapped[0]
  for a, b in zip(sequential[1], overlapped[1], strict=True):
    np.testing.assert_array_equal(a, b)


def test_stream_mode_refuses_a_pipeline_in_one_line(cluster):
  del cluster
  configurables.parse([], _lines(DQN))
  agent = configurables.train_rl(build_only=True)
  agent.set_collector(
    ray_collector.RayCollector(n_actors=1),
    functools.partial(configurables.build_agent, DQN),
  )
  try:
    with pytest.raises(ValueError, match='already play while the learner'):
      agent.run(1, overlap=True, pipeline_depth=1)
  finally:
    agent.close()
