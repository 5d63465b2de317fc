"""Tests for R2D2's compiled epoch: segments as the host adder's, resume."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl import types
from trax_rl.agents import r2d2
from trax_rl.device import evaluate, rollout, seeds, sequence_epoch
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import models, recurrent
from trax_rl.replay import sequence_adder
from trax_rl.testing import resume

GAMMA = 0.9


def _random_steps(rng, n_steps, n_envs):
  """Consistent `[T, N]` steps: o_{t+1} is the next step's observation unless
  the episode ended (then a final observation, and a fresh reset next)."""
  ends = rng.random((n_steps, n_envs))
  terminated = ends < 0.12
  truncated = (ends >= 0.12) & (ends < 0.2)
  counter = iter(range(1, 10**6))
  obs = np.zeros((n_steps + 1, n_envs, 1), np.float32)
  next_obs = np.zeros((n_steps, n_envs, 1), np.float32)
  for i in range(n_envs):
    obs[0, i] = next(counter)
    for t in range(n_steps):
      next_obs[t, i] = next(counter)
      done = terminated[t, i] or truncated[t, i]
      obs[t + 1, i] = next(counter) if done else next_obs[t, i]
  return rollout.Rollout(
    observation=obs[:-1],
    action=rng.integers(0, 3, (n_steps, n_envs)).astype(np.int32),
    reward=rng.normal(size=(n_steps, n_envs)).astype(np.float32),
    terminated=terminated,
    truncated=truncated,
    next_observation=next_obs,
    agent_info={
      'core_h': rng.normal(size=(n_steps, n_envs, 2)).astype(np.float32)
    },
    episode_return=np.zeros((n_steps, n_envs), np.float32),
  )


def _host_segments(steps, epochs, adder):
  """The host adder fed each epoch's slices (cut at episode ends)."""
  out = []
  n_envs = steps.reward.shape[1]
  first = np.ones(n_envs, bool)
  for lo, hi in epochs:
    for i in range(n_envs):
      t = lo
      while t < hi:
        traj = trajectory_lib.Trajectory(steps.observation[t, i])
        while t < hi:
          traj.extend(
            steps.action[t, i],
            steps.reward[t, i],
            steps.next_observation[t, i],
            terminated=bool(steps.terminated[t, i]),
            truncated=bool(steps.truncated[t, i]),
            agent_info={
              'stream': np.int32(i),
              'first': np.bool_(first[i]),
              'core_h': steps.agent_info['core_h'][t, i],
            },
          )
          first[i] = bool(steps.terminated[t, i] | steps.truncated[t, i])
          t += 1
          if first[i]:
            break
        out += adder.add_trajectories([traj])
  return out


def _canonical(segments):
  """Segments as sortable tuples of their numbers."""
  rows = []
  for s in segments:
    parts = [
      np.asarray(x, np.float64).ravel()
      for x in (s.observation, s.action, s.reward, s.discount, s.mask)
    ]
    parts.append(np.asarray(s.core_state['core_h'], np.float64).ravel())
    rows.append(tuple(np.round(np.concatenate(parts), 5)))
  return sorted(rows)


@pytest.mark.parametrize(
  'burn_in, trace, period', [(1, 2, 2), (0, 3, 4), (2, 3, 1), (1, 4, 3)]
)
def test_segments_equal_the_host_adders(burn_in, trace, period):
  rng = np.random.default_rng(burn_in * 100 + trace * 10 + period)
  n_steps, n_envs = 24, 3
  steps = _random_steps(rng, n_steps, n_envs)
  adder = sequence_adder.SequenceAdder(burn_in, trace, period, GAMMA)
  epochs = [(0, 9), (9, 17), (17, 24)]  # Episodes run across epochs.
  expected = _host_segments(steps, epochs, adder)
  length = burn_in + trace + 1
  size = sequence_epoch.ring_length(length, max(hi - lo for lo, hi in epochs))
  ring = types.Segment(
    observation=jnp.zeros((size, n_envs, 1)),
    action=jnp.zeros((size, n_envs), jnp.int32),
    reward=jnp.zeros((size, n_envs)),
    discount=jnp.zeros((size, n_envs)),
    mask=jnp.zeros((size, n_envs)),
    core_state={'core_h': jnp.zeros((size, n_envs, 2))},
  )
  zeros = jnp.zeros(n_envs, jnp.int32)
  history = sequence_epoch.History(ring, zeros, zeros)
  cut = jax.jit(sequence_epoch.cut_segments, static_argnums=(3, 4, 5))
  read = jax.jit(sequence_epoch.read_segments, static_argnums=(3, 4))
  got = []
  for lo, hi in epochs:
    part = jax.tree.map(lambda x, lo=lo, hi=hi: x[lo:hi], steps)
    core = {'core_h': part.agent_info['core_h']}
    history, cuts = cut(history, part, core, length, period, GAMMA)
    rows = np.flatnonzero(np.asarray(cuts.valid))
    segments = read(history.ring, cuts, jnp.asarray(rows), n_envs, length)
    got += [
      jax.tree.map(lambda x, j=j: np.asarray(x)[j], segments)
      for j in range(len(rows))
    ]
  assert len(expected) > 5
  assert _canonical(got) == _canonical(expected)


def _agent(output_dir=None, seed=0, **overrides):
  task = task_lib.RLTask(
    'gymnax:CartPole-v1', gamma=0.99, n_envs=4, max_steps=100, seed=seed
  )
  kwargs = dict(
    model_fn=lambda n_actions: recurrent.RecurrentQuality(
      n_actions, torso=lambda: models.MLP(layer_widths=(8,)), lstm_size=8
    ),
    loss_fn=r2d2_losses.R2D2Loss(burn_in_length=2, bootstrap_n=2),
    trace_length=4,
    sequence_period=3,
    batch_size=8,
    target_update_period=5,
    samples_per_insert=2.0,
    min_replay_size=16,
    max_replay_size=400,
    n_interactions_per_epoch=40,
    n_eval_episodes=0,
    output_dir=output_dir,
    seed=seed,
  )
  kwargs.update(overrides)
  return r2d2.R2D2(task, **kwargs)


def test_r2d2_runs_compiled_epochs_and_resumes_exactly(tmp_path):
  # Also the LSTM states of the running episodes, carried with the envs.
  straight = resume.assert_resumes_exactly(
    lambda d: _agent(output_dir=d), str(tmp_path)
  )
  assert straight.device_program() is not None
  assert straight.trainer.step > 0
  replay = straight.device_learner().replay
  table = straight.device_store.epoch.table
  # Prioritized: the mixed priorities of the sampled segments went back.
  priorities = np.asarray(replay.priorities)[: int(table.size(replay))]
  assert np.any(priorities != 1.0)


@pytest.mark.two_devices
def test_r2d2_seed_batch_reproduces_each_seed_alone():
  agents = [_agent(seed=s) for s in (3, 4)]
  seeds.SeedBatch(agents).run(3)
  alone = _agent(seed=4)
  alone.run(3)
  assert agents[1].trainer.step == alone.trainer.step > 0
  for a, b in zip(
    jax.tree.leaves(agents[1].device_learner()),
    jax.tree.leaves(alone.device_learner()),
  ):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_greedy_recurrent_evaluation_runs_compiled():
  agent = _agent()
  store = agent.device_store
  returns = evaluate.evaluate(
    agent.task.jax_env,
    store.epoch.greedy,
    agent.device_learner(),
    jax.random.PRNGKey(0),
    3,
    50,
    initial_core=agent.network.initial_state,
  )
  assert returns.shape == (3,)
  assert np.all(np.asarray(returns) >= 1.0)
