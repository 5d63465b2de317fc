"""Tests for the compiled device epoch (trax_rl.device) with the agents."""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

import trax_rl
from trax_rl import api, checkpoint, cli, configurables, jax_envs
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl.agents import expert_iteration, policy_agents
from trax_rl.device import batches, evaluate, rollout
from trax_rl.networks import models
from trax_rl.run import nonfinite

MLP = functools.partial(models.MLP, layer_widths=(32,), activation='tanh')


def _pg(output_dir=None, n_interactions=256, **kwargs):
  task = task_lib.RLTask(
    'gymnax:CartPole-v1', n_envs=4, max_steps=500, initial_trajectories=0
  )
  kwargs.setdefault('batch_size', 256)
  return policy_agents.PolicyGradient(
    task,
    model_fn=functools.partial(models.Policy, body=MLP),
    optimizer=optax.adam,
    lr_schedule=lambda: 0.01,
    n_interactions_per_epoch=n_interactions,
    output_dir=output_dir,
    **kwargs,
  )


def _host_trajectories(steps):
  """The rollout cut into host Trajectories, as RLTask's collector does."""
  steps = jax.device_get(steps)
  n_steps, n_envs = steps.reward.shape
  trajs = []
  for i in range(n_envs):
    traj = trajectory_lib.Trajectory(steps.observation[0, i])
    for t in range(n_steps):
      traj.extend(
        steps.action[t, i],
        steps.reward[t, i],
        steps.next_observation[t, i],
        steps.terminated[t, i],
        steps.truncated[t, i],
      )
      if traj.done and t + 1 < n_steps:
        trajs.append(traj)
        traj = trajectory_lib.Trajectory(steps.observation[t + 1, i])
    trajs.append(traj)
  return trajs


def test_rewards_to_go_equal_the_host_trajectories():
  env = jax_envs.make_jax_env('gymnax:CartPole-v1')
  carry = rollout.init_carry(env, jax.random.PRNGKey(1), 3)

  def policy(params, key, obs):
    del params
    return jax.random.bernoulli(key, 0.5, obs.shape[:1]).astype(jnp.int32), {}

  _, steps = rollout.rollout(env, policy, None, carry, 50, max_steps=30)
  # A trajectory ends at an episode's end and at the rollout's.
  ends = (steps.terminated | steps.truncated).at[-1].set(True)
  returns = batches.env_major(batches.rewards_to_go(steps.reward, ends, 0.9))
  trajs = _host_trajectories(steps)
  host = [t.to_np(margin=0, gamma=0.9) for t in trajs]
  np.testing.assert_allclose(
    returns, np.concatenate([h.return_ for h in host]), rtol=1e-5
  )
  np.testing.assert_array_equal(
    batches.env_major(steps.terminated),
    np.concatenate([h.done for h in host]),
  )
  assert len(trajs) > 3  # Episode ends inside the rollout are exercised.


def test_permutations_are_uniform_and_valid():
  # All 24 orders of 4 items, each 1/24: chi-square tests at 0.999.
  perms = np.asarray(batches.permutations(jax.random.PRNGKey(0), 48000, 4))
  codes = perms @ np.array([64, 16, 4, 1])
  counts = np.bincount(codes, minlength=256)[np.unique(codes)]
  assert len(counts) == 24
  expected = len(perms) / 24
  assert np.sum((counts - expected) ** 2 / expected) < stats.chi2.ppf(0.999, 23)
  # Every position holds each item equally often at a size that needs two
  # rounds of packed sorts, and every row is a permutation.
  perms = np.asarray(batches.permutations(jax.random.PRNGKey(1), 2000, 600))
  assert (np.sort(perms, axis=1) == np.arange(600)).all()
  first = np.bincount(perms[:, 0], minlength=600)
  chi2 = np.sum((first - 2000 / 600) ** 2 / (2000 / 600))
  assert chi2 < stats.chi2.ppf(0.999, 599)
  # Past the packed bits' reach: jax.random.permutation, still valid.
  big = np.asarray(batches.permutations(jax.random.PRNGKey(2), 1, 1 << 21))
  assert (np.sort(big[0]) == np.arange(1 << 21)).all()


def test_policy_gradient_learns_on_gymnax_cartpole():
  agent = _pg(n_interactions=1024, batch_size=512)
  agent.run(40)
  record_mean = np.mean(agent.avg_returns[-5:])
  assert record_mean > 150, agent.avg_returns


def test_kill_and_resume_equals_uninterrupted(tmp_path):
  full = _pg(str(tmp_path / 'full'))
  full.run(4)
  first = _pg(str(tmp_path / 'cut'))
  first.run(2)
  del first  # A killed run leaves only its last checkpoint.
  resumed = _pg(str(tmp_path / 'cut'))
  resumed.run(4, n_epochs_is_total_epochs=True)
  assert _records(tmp_path / 'full') == _records(tmp_path / 'cut')
  np.testing.assert_array_equal(
    jax.tree.leaves(full.learner.train.params)[0],
    jax.tree.leaves(resumed.learner.train.params)[0],
  )


def _records(output_dir):
  """metrics.jsonl without its timings."""
  lines = (output_dir / 'metrics.jsonl').read_text().splitlines()
  out = []
  for line in lines:
    r = json.loads(line)
    out.append({k: r[k] for k in r if 'per_s' not in k and k[-2:] != '_s'})
  return out


def test_epochs_per_call_changes_no_number(tmp_path):
  one = _pg(str(tmp_path / 'one'))
  one.run(5)
  seen = []
  # 3 + 2 epochs: the short call reuses the program compiled for 3.
  looped = _pg(str(tmp_path / 'looped'))
  looped.run(5, epochs_per_call=3, callbacks=[lambda a, r: seen.append(r)])
  assert [r['epoch'] for r in seen] == [1, 2, 3, 4, 5]
  assert looped.current_epoch == 5
  # Bit-equal: the loop's body is the epoch traced once (`_looped`), so XLA
  # compiles the same computation as the single epoch's.
  assert _records(tmp_path / 'one') == _records(tmp_path / 'looped')
  np.testing.assert_array_equal(
    jax.tree.leaves(one.learner.train.params)[0],
    jax.tree.leaves(looped.learner.train.params)[0],
  )
  # Resumed from the checkpoint at the end of the first call of 3.
  cut = _pg(str(tmp_path / 'cut'))
  cut.run(3, epochs_per_call=3)
  resumed = _pg(str(tmp_path / 'cut'))
  assert resumed.current_epoch == 3
  resumed.run(5, n_epochs_is_total_epochs=True, epochs_per_call=4)
  assert _records(tmp_path / 'cut') == _records(tmp_path / 'one')


def test_epochs_per_call_on_the_gymnasium_path():
  # One runner for every source: the host path takes calls of several
  # epochs too (one evaluation per call), and refuses 0.
  task = task_lib.RLTask(
    'CartPole-v1', n_envs=2, initial_trajectories=0, max_steps=50
  )
  agent = policy_agents.PolicyGradient(
    task,
    model_fn=functools.partial(models.Policy, body=MLP),
    n_interactions_per_epoch=32,
  )
  seen = []
  agent.run(3, epochs_per_call=2, callbacks=[lambda a, r: seen.append(r)])
  assert [r['epoch'] for r in seen] == [1, 2, 3]
  with pytest.raises(ValueError, match='epochs_per_call'):
    _pg().run(2, epochs_per_call=0)


def test_trajectory_epochs_and_expert_iteration_say_what_to_do():
  with pytest.raises(ValueError, match='set n_interactions_per_epoch'):
    _pg(n_interactions=None, n_trajectories_per_epoch=4).run(1)
  task = task_lib.RLTask('gymnax:CartPole-v1', initial_trajectories=0)
  with pytest.raises(ValueError, match='whole episodes'):
    expert_iteration.ExpertIteration(task, n_interactions_per_epoch=8).run(1)


PG_GIN = """
RLTask.env = 'gymnax:CartPole-v1'
RLTask.n_envs = 4
RLTask.initial_trajectories = 0
MLP.layer_widths = (32,)
Policy.body = @MLP
PolicyGradient.model_fn = @Policy
PolicyGradient.batch_size = 128
PolicyGradient.n_interactions_per_epoch = 128
train_rl.agent_class = @PolicyGradient
train_rl.n_epochs = 3
"""


@pytest.mark.two_devices
@pytest.mark.parametrize('per_call', [1, 2])
def test_seed_batch_trains_and_evaluates_each_seed_as_it_alone(
  tmp_path, per_call
):
  # One seed batch checked twice over: its training returns and its evals
  # are each seed's alone (these were two tests that built the same batch
  # and the same single-seed runs; the evals change no update, as
  # tests/agents/test_policy_agents.py checks).
  evals = [
    'PolicyGradient.n_eval_episodes = 3',
    'RLTask.max_steps = 60',  # Short episodes: some end, some are capped.
    f'train_rl.epochs_per_call = {per_call}',
  ]
  configurables.parse(bindings=[PG_GIN, 'train_rl.n_seeds = 2', *evals])
  group = configurables.train_rl(output_dir=str(tmp_path / 'both'))
  both = _records(tmp_path / 'both')
  assert [(r['epoch'], r['seed']) for r in both] == [
    (e, s) for e in (1, 2, 3) for s in (0, 1)
  ]
  raw = (tmp_path / 'both' / 'metrics.jsonl').read_text().splitlines()
  assert json.loads(raw[0])['epoch_s'] > 0
  # The seeds are split over the devices (two under tests/test_two_devices).
  leaf = jax.tree.leaves(group.runner.learner)[0]
  assert len(leaf.sharding.device_set) == jax.local_device_count()
  name = 'eval_return_t0_s60'
  # Once per call, in the call's first epoch, for every seed.
  first_epochs = {1, 3} if per_call == 2 else {1, 2, 3}
  assert {r['epoch'] for r in both if name in r} == first_epochs
  for seed in (0, 1):
    configurables.parse(
      bindings=[PG_GIN, f'PolicyGradient.seed = {seed}', *evals]
    )
    alone_agent = configurables.train_rl(
      output_dir=str(tmp_path / f'alone{seed}')
    )
    got = [r['avg_return'] for r in both if r['seed'] == seed]
    np.testing.assert_allclose(got, alone_agent.avg_returns, rtol=1e-5)
    alone = [r[name] for r in _records(tmp_path / f'alone{seed}') if name in r]
    got = [r[name] for r in both if r['seed'] == seed and name in r]
    assert len(got) == len(first_epochs)
    np.testing.assert_allclose(got, alone, rtol=1e-6)
    assert all(0 < g <= 60 for g in got)
  assert both[0]['avg_return'] != both[1]['avg_return']
  seed0 = [r[name] for r in both if r['seed'] == 0 and name in r]
  seed1 = [r[name] for r in both if r['seed'] == 1 and name in r]
  assert seed0 != seed1


def test_seed_batch_evaluates_at_every_temperature(tmp_path):
  configurables.parse(
    bindings=[
      PG_GIN,
      'train_rl.n_seeds = 2',
      'train_rl.n_epochs = 1',
      'PolicyGradient.n_eval_episodes = 2',
      'PolicyGradient.eval_temperatures = (0.0, 1.0)',
    ]
  )
  configurables.train_rl(output_dir=str(tmp_path))
  records = _records(tmp_path)
  assert [r['seed'] for r in records] == [0, 1]
  for r in records:
    assert r['eval_return_t0'] > 0 and r['eval_return_t1'] > 0


def test_a_device_agent_evaluates_greedily_in_one_compiled_call():
  agent = _pg(n_eval_episodes=4, eval_temperatures=(0.0, 1.0))
  learner = jax.device_get(agent.learner)
  stream = agent.runner.eval_streams[0]
  record = agent.evaluate()
  # Temperature 0: the compiled episodes of the eval stream's first key.
  want = evaluate.evaluate(
    agent.task.jax_env,
    agent.program.policy(0.0),
    learner,
    jax.random.fold_in(stream, 0),
    4,
    500,
  )
  assert record['eval_return_t0_s500'] == pytest.approx(float(np.mean(want)))
  # Temperature 1 steps the eval env from the host, as before.
  assert record['eval_return_t1_s500'] > 0
  again = agent.evaluate()  # The next key: other episodes.
  assert agent.avg_returns_temperatures[0.0][500] == [
    record['eval_return_t0_s500'],
    again['eval_return_t0_s500'],
  ]


def test_uncapped_evaluation_plays_every_episode_to_its_end():
  agent = _pg()
  greedy = agent.program.policy(0.0)
  env, learner = agent.task.jax_env, agent.learner
  key = jax.random.PRNGKey(5)
  uncapped = evaluate.evaluate(env, greedy, learner, key, 6, None)
  # gymnax's CartPole ends every episode by step 500; returns are step
  # counts (reward 1 per step), so exact.
  capped = evaluate.evaluate(env, greedy, learner, key, 6, 600)
  np.testing.assert_array_equal(uncapped, capped)
  assert (uncapped > 0).all()


def _train_seeds(output_dir, n_epochs, n_seeds=2, *bindings):
  configurables.parse(
    bindings=[
      PG_GIN,
      f'train_rl.n_seeds = {n_seeds}',
      f'train_rl.n_epochs = {n_epochs}',
      *bindings,
    ]
  )
  return configurables.train_rl(output_dir=str(output_dir))


@pytest.mark.two_devices
def test_seed_batch_killed_and_resumed_equals_uninterrupted(tmp_path):
  evals = 'PolicyGradient.n_eval_episodes = 2'  # Their keys resume too.
  full = _train_seeds(tmp_path / 'full', 4, 2, evals)
  assert 'eval_return_t0' in _records(tmp_path / 'full')[-1]  # Uncapped.
  _train_seeds(tmp_path / 'cut', 2, 2, evals)
  # Killed after the next call wrote its records, before its checkpoint.
  with open(tmp_path / 'cut' / 'metrics.jsonl', 'a') as f:
    f.write(json.dumps({'epoch': 3, 'seed': 0, 'avg_return': -1.0}) + '\n')
    f.write('{"epoch": 3, "se')  # The line the kill cut.
  resumed = _train_seeds(tmp_path / 'cut', 4, 2, evals)
  assert resumed.current_epoch == 4
  assert _records(tmp_path / 'cut') == _records(tmp_path / 'full')
  for x, y in zip(
    jax.tree.leaves(full.runner.learner),
    jax.tree.leaves(resumed.runner.learner),
  ):
    np.testing.assert_array_equal(x, y)
  assert (tmp_path / 'cut' / 'config.gin').exists()
  # Nothing left to run: the checkpoint's epoch already reaches n_epochs.
  again = _train_seeds(tmp_path / 'cut', 4, 2, evals)
  assert again.current_epoch == 4
  assert _records(tmp_path / 'cut') == _records(tmp_path / 'full')


def test_seed_batch_checkpoint_refuses_other_seeds_and_single_runs(tmp_path):
  allow = 'train_rl.allow_config_change = True'
  _train_seeds(tmp_path / 'run', 1)
  with pytest.raises(ValueError, match='n_seeds: 2 -> 3'):
    _train_seeds(tmp_path / 'run', 2, 3)
  # With the change allowed, the checkpoint's seeds still have to match.
  with pytest.raises(checkpoint.CheckpointError, match=r'seeds \[0, 1\]'):
    _train_seeds(tmp_path / 'run', 2, 3, allow)
  configurables.parse(bindings=[PG_GIN, allow])
  with pytest.raises(checkpoint.CheckpointError, match=r'seeds \[0, 1\]'):
    configurables.train_rl(output_dir=str(tmp_path / 'run'))
  single = tmp_path / 'single'
  configurables.parse(bindings=[PG_GIN, 'train_rl.n_epochs = 1'])
  configurables.train_rl(output_dir=str(single))
  with pytest.raises(checkpoint.CheckpointError, match=r'seeds \[0\]'):
    _train_seeds(single, 2, 2, allow)


def test_one_seed_of_a_seed_batch_is_evaluated_from_its_output_dir(
  tmp_path, capsys
):
  run = tmp_path / 'run'
  group = _train_seeds(run, 2)
  with pytest.raises(ValueError, match=r'seed batch \(seeds \[0, 1\]\)'):
    api.evaluate(str(run), episodes=2)
  with pytest.raises(ValueError, match='not seed 7'):
    api.evaluate(str(run), episodes=2, seed=7)
  report = api.evaluate(str(run), episodes=3, seed=1)
  assert (report['epoch'], report['seed']) == (2, 1)
  # The same parameters as the trained agent of seed 1 holds.
  for a, b in zip(
    jax.tree.leaves(api.load(str(run), seed=1).learner.train.params),
    jax.tree.leaves(group.runner.learner_of(1).train.params),
  ):
    np.testing.assert_array_equal(a, b)
  assert cli.main(['eval', '--output_dir', str(run), '--seed', '0']) == 0
  line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert (line['seed'], line['epoch']) == (0, 2)


@pytest.mark.two_devices
def test_seed_batch_nonfinite_guard(tmp_path, caplog):
  blow_up = [
    'constant_lr.value = 1e30',
    'PolicyGradient.lr_schedule = @constant_lr',
  ]
  stop = tmp_path / 'stop'
  with pytest.raises(nonfinite.NonFiniteError) as error:
    _train_seeds(stop, 3, 2, *blow_up)
  # As a single agent's guard: the first bad epoch is neither recorded nor
  # saved, and the message says what the output_dir keeps.
  assert str(error.value).splitlines()[0] == (
    'non-finite policy/loss of seed 0 at epoch 2, update step 2; '
    "checkpoint.pkl keeps epoch 1 (on_nonfinite='warn' trains on anyway)"
  )
  assert checkpoint.load(stop / 'checkpoint.pkl')['epoch'] == 1
  assert {r['epoch'] for r in _records(stop)} == {1}
  warn = _train_seeds(
    tmp_path / 'warn', 3, 2, *blow_up, "train_rl.on_nonfinite = 'warn'"
  )
  assert warn.current_epoch == 3
  told = [r.message for r in caplog.records if 'non-finite' in r.message]
  assert len(told) == 2 and 'at epoch 3' in told[1]  # Once per call.
  off = _train_seeds(
    tmp_path / 'off', 3, 2, *blow_up, "train_rl.on_nonfinite = 'off'"
  )
  assert off.current_epoch == 3
  # Nothing is read or told: the two warnings above are all there are.
  told = [r.message for r in caplog.records if 'non-finite' in r.message]
  assert len(told) == 2


def test_records_and_the_progress_bar_name_each_epoch_of_a_call(
  tmp_path, capsys
):
  # 3 epochs in calls of 2 + 1: the records reach the callbacks after each
  # call, and each still names its own epoch.
  per_call = 'train_rl.epochs_per_call = 2'
  run = trax_rl.train([PG_GIN, per_call])
  assert [r['epoch'] for r in run.records] == [1, 2, 3]
  run = trax_rl.train([PG_GIN, per_call, 'train_rl.n_seeds = 2'])
  assert [r['epoch'] for r in run.records] == [1, 2, 3]
  config = tmp_path / 'pg.gin'
  config.write_text(PG_GIN)
  args = ['train', '--config_file', str(config), '--config', per_call]
  assert cli.main([*args, '--output_dir', str(tmp_path / 'cli')]) == 0
  err = capsys.readouterr().err
  # No terminal here: progress lines, each naming the epoch it reached.
  states = [s for s in err.splitlines() if s.startswith('trax-rl: epoch ')]
  shown = [int(s.split()[2].split('/')[0]) for s in states]
  assert shown == sorted(shown) and shown[-1] == 3, states
