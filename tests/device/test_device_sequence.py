"""R2D2 on the device source: compiled epochs, resume, seed batches."""

import jax
import numpy as np
import pytest

from trax_rl import task as task_lib
from trax_rl.agents import r2d2
from trax_rl.device import evaluate
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import models, recurrent
from trax_rl.sources import device as device_source
from trax_rl.testing import resume


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
  assert isinstance(straight.runner.source, device_source.DeviceSource)
  assert int(straight.learner.train.step) > 0
  replay = straight.learner.replay
  size = int(straight.table.size(replay))
  # Prioritized: the mixed priorities of the sampled segments went back.
  assert np.any(np.asarray(replay.priorities)[:size] != 1.0)


@pytest.mark.two_devices
def test_r2d2_seed_batch_reproduces_each_seed_alone():
  batch = _agent(seed=3)
  batch.use_seeds(2)
  batch.run(3)
  alone = _agent(seed=4)
  alone.run(3)
  batched = batch.runner.learner_of(1)
  assert int(batched.train.step) == int(alone.learner.train.step) > 0
  for a, b in zip(jax.tree.leaves(batched), jax.tree.leaves(alone.learner)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_greedy_recurrent_evaluation_runs_compiled():
  agent = _agent()
  returns = evaluate.evaluate(
    agent.task.jax_env,
    agent.program.policy(0.0),
    agent.learner,
    jax.random.PRNGKey(0),
    3,
    50,
    initial_core=agent.program.initial_core,
  )
  assert returns.shape == (3,)
  assert np.all(np.asarray(returns) >= 1.0)
