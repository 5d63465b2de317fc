"""Tests of the NaN/inf guard: in the update, in collection, in the run."""

import json
import pathlib

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from trax_rl import checkpoint, cli
from trax_rl.networks import base as networks
from trax_rl.supervised import trainer as trainer_lib
from trax_rl.supervised import update
from trax_rl.testing import fake_envs

ROOT = pathlib.Path(__file__).resolve().parents[1]
gin.external_configurable(fake_envs.NonFiniteEnv, module='trax_rl.testing')

LINEAR = networks.Network(
  init=lambda key: {'w': jnp.ones(2)}, apply=lambda p, x: x @ p['w']
)


def _squared_loss(network, params, target_params, batch, key):
  del target_params, key
  error = network.apply(params, batch['x']) - batch['y']
  return jnp.mean(error**2), update.types.LossExtra({})


def _sqrt_loss(network, params, target_params, batch, key):
  """Finite at w = 0 but with an infinite gradient there."""
  del target_params, key
  return jnp.sum(jnp.sqrt(jnp.abs(params['w'] * batch['x'][0]))), (
    update.types.LossExtra({})
  )


def _batches(nan_at_step):
  """Steps 1, 2, ...; the batch of step `nan_at_step` has a NaN target."""
  step = 0
  while True:
    step += 1
    y = np.full(4, np.nan if step == nan_at_step else 1.0, np.float32)
    yield {'x': np.ones((4, 2), np.float32), 'y': y}


def _trainer(loss=_squared_loss, lr=0.01, stream=None, **kwargs):
  return trainer_lib.Trainer(
    LINEAR,
    loss,
    optax.sgd(lr),
    batch_stream=stream if stream is not None else _batches(3),
    **kwargs,
  )


def test_first_nonfinite_loss_is_recorded_with_its_step():
  trainer = _trainer()
  trainer.train_steps(2)
  assert trainer.nonfinite() is None
  trainer.train_steps(3)  # Step 3 has a NaN loss; later ones NaN too.
  assert trainer.nonfinite() == (3, 'loss')
  trainer.clear_nonfinite()
  # The parameters stay NaN, and the read says so.
  assert trainer.nonfinite() == (5, 'parameters')
  trainer.clear_nonfinite()
  trainer.train_steps(1)  # The NaN parameters give a NaN loss at step 6.
  assert trainer.nonfinite() == (6, 'loss')


@pytest.mark.parametrize('num_steps', [1, 3])
def test_parameters_and_gradients_are_checked(num_steps):
  # A NaN learning rate: a finite loss and gradients, NaN parameters.
  def stacked(stream):
    for _ in range(1000):
      batches = [next(stream) for _ in range(num_steps)]
      yield jax.tree.map(lambda *xs: np.stack(xs), *batches)

  stream = _batches(nan_at_step=None)
  if num_steps > 1:
    stream = stacked(stream)
  trainer = _trainer(lr=float('nan'), stream=stream, num_steps=num_steps)
  trainer.train_steps(1)
  if num_steps == 1:  # The read checks the parameters update 1 left.
    assert trainer.nonfinite() == (1, 'parameters')
    trainer.clear_nonfinite()
    trainer.train_steps(1)
  # The first update after the NaN parameters has a NaN loss.
  assert trainer.nonfinite() == (2, 'loss')
  # An infinite gradient at a finite loss: the parameters it updates.
  zero_x = iter(lambda: {'x': np.zeros((1, 2), np.float32)}, None)
  grads = trainer_lib.Trainer(
    LINEAR, _sqrt_loss, optax.sgd(0.1), batch_stream=zero_x
  )
  grads.train_steps(1)
  assert grads.nonfinite() == (1, 'parameters')


def test_guard_off_changes_nothing_but_the_check():
  on, off = _trainer(), _trainer()
  off.set_check_finite(False)
  assert on.check_finite and not off.check_finite
  on.train_steps(2), off.train_steps(2)
  # The same updates; the guarded program also checks its loss, which XLA
  # may fuse with them: equal up to float rounding.
  for a, b in zip(jax.tree.leaves(on.state_dict()), off.state_dict()['leaves']):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  off.train_steps(2)  # NaN at step 3, unseen.
  assert off.nonfinite() is None
  # The checkpoint holds no Health, so either loads into the other.
  assert len(on.state_dict()['leaves']) == len(off.state_dict()['leaves'])
  on.load_state_dict(off.state_dict())
  # The loaded Health is clear, and the read still sees the NaN parameters.
  assert on.check_finite and on.nonfinite() == (4, 'parameters')


def test_collection_counts_nonfinite_observations():
  from trax_rl import task as task_lib

  t = task_lib.RLTask(
    lambda: fake_envs.NonFiniteEnv(nan_observation_from_episode=1),
    initial_trajectories=0,
  )
  policy = lambda obs, first: (np.zeros(len(obs), np.int64), {})
  t.collect_trajectories(policy, n_trajectories=1)
  assert t.n_nonfinite_observations() == 0
  t.collect_trajectories(policy, n_trajectories=1)
  assert t.n_nonfinite_observations() == 5  # Five steps of episode 1.


# The command line, on one env that turns NaN at a known episode. Each epoch
# plays one episode and resets the env once more as it ends, so epoch e
# plays episode 2 (e - 1); with one update per epoch, epoch e's update is
# update step e.
PG_BINDINGS = (
  'PolicyGradient.n_trajectories_per_epoch = 1',
  'PolicyGradient.batch_size = 4',
  'PolicyGradient.n_eval_episodes = 0',
)
PPO_BINDINGS = (
  'PPO.n_interactions_per_epoch = 5',
  'PPO.policy_batch_size = 4',
  'PPO.value_batch_size = 4',
  'PPO.policy_train_steps_per_epoch = 2',
  'PPO.value_train_steps_per_epoch = 2',
  'PPO.n_eval_episodes = 0',
)


def _pg_args(output_dir, n_epochs, *bindings, config='pg_cartpole.gin'):
  args = [
    'train',
    '--config_file',
    str(ROOT / 'gin' / config),
    '--output_dir',
    str(output_dir),
    '--no_progress',
  ]
  agent = PPO_BINDINGS if config.startswith('ppo') else PG_BINDINGS
  for b in (
    'RLTask.env = @NonFiniteEnv',
    'RLTask.n_envs = 1',
    'MLP.layer_widths = (8,)',
    *agent,
    f'train_rl.n_epochs = {n_epochs}',
    *bindings,
  ):
    args += ['--config', b]
  return args


def _run(capsys, args):
  code = cli.main(args)
  return code, capsys.readouterr()


def test_nan_loss_stops_with_exit_3_and_keeps_the_last_finite_epoch(
  capsys, tmp_path
):
  nan = 'NonFiniteEnv.nan_reward_from_episode = 4'
  ref, run, warn = tmp_path / 'ref', tmp_path / 'run', tmp_path / 'warn'
  code, _ = _run(capsys, _pg_args(ref, 2, nan))
  assert code == 0
  code, out = _run(capsys, _pg_args(run, 5, nan))
  assert code == cli.EXIT_NONFINITE == 3
  assert out.err.splitlines() == [
    'trax-rl: error: non-finite policy/loss at epoch 3, update step 3; '
    "checkpoint.pkl keeps epoch 2 (on_nonfinite='warn' trains on anyway)"
  ]
  # The checkpoint on disk is the one of a run that stopped after epoch 2.
  assert (run / 'checkpoint.pkl').read_bytes() == (
    ref / 'checkpoint.pkl'
  ).read_bytes()
  state = checkpoint.load(run / 'checkpoint.pkl')
  assert state['epoch'] == 2
  assert all(np.isfinite(x).all() for x in state['state']['policy']['leaves'])
  assert len((run / 'metrics.jsonl').read_text().splitlines()) == 2
  assert not list(run.rglob('*.tmp*'))
  # On purpose: warn once per epoch and train on.
  code, out = _run(
    capsys, _pg_args(warn, 4, nan, "train_rl.on_nonfinite = 'warn'")
  )
  assert code == 0
  warnings = out.err.splitlines()
  assert warnings[0] == (
    'trax-rl: warning: non-finite policy/loss at epoch 3, update step 3; '
    'training on (on_nonfinite=warn)'
  )
  assert len(warnings) == 2 and 'at epoch 4, update step 4' in warnings[1]
  assert json.loads(out.out)['epochs'] == 4


def test_nan_observation_stops_before_training(capsys, tmp_path):
  code, out = _run(
    capsys,
    _pg_args(tmp_path, 5, 'NonFiniteEnv.nan_observation_from_episode = 2'),
  )
  assert code == 3
  assert out.err.startswith(
    'trax-rl: error: non-finite observation at epoch 2, update step 1; '
    'checkpoint.pkl keeps epoch 1'
  )
  assert checkpoint.load(tmp_path / 'checkpoint.pkl')['epoch'] == 1


def test_actor_critic_updates_are_guarded(capsys, tmp_path):
  # PPO runs its updates inside its own jitted epoch: the Health travels in
  # the train state through it. Episodes of 5 steps, 5 steps per epoch: epoch
  # 2 plays episode 1, whose NaN rewards make both losses NaN at their third
  # update (two per epoch); the policy trainer is reported first.
  args = _pg_args(
    tmp_path,
    3,
    'NonFiniteEnv.nan_reward_from_episode = 1',
    config='ppo_cartpole.gin',
  )
  code, out = _run(capsys, args)
  assert code == 3
  assert 'non-finite policy/loss at epoch 2, update step 3' in out.err


def test_bad_policy_is_refused(capsys, tmp_path):
  code, out = _run(
    capsys, _pg_args(tmp_path, 1, "train_rl.on_nonfinite = 'ignore'")
  )
  assert code == 2 and 'on_nonfinite must be one of' in out.err
