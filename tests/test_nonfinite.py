"""Tests of the NaN/inf guard: in the update, in collection, in the run."""

import json
import pathlib

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax

from trax_rl import checkpoint, cli
from trax_rl.networks import base as networks
from trax_rl.run import nonfinite
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


def _batch(y=1.0):
  return {'x': np.ones((4, 2), np.float32), 'y': np.full(4, y, np.float32)}


def _update(loss=_squared_loss, lr=0.01):
  opt = optax.sgd(lr)
  state = update.init_state(LINEAR, opt, jax.random.PRNGKey(0))
  return jax.jit(update.make_update_fn(LINEAR, loss, opt)), state


def _read(state):
  """The runner's check of a train state: (step, what) or None."""
  bad = nonfinite.first_in_learner(state, [0], 'train')
  return None if bad is None else (bad[2], bad[1].removeprefix('train/'))


def test_first_nonfinite_loss_is_recorded_with_its_step():
  fn, state = _update()
  for _ in range(2):
    state, _ = fn(state, _batch())
  assert _read(state) is None
  for y in (np.nan, 1.0, 1.0):  # Step 3 has a NaN loss; later ones NaN too.
    state, _ = fn(state, _batch(y))
  assert _read(state) == (3, 'loss')


def test_parameters_and_gradients_are_checked():
  # A NaN learning rate: a finite loss and gradients, NaN parameters.
  fn, state = _update(lr=float('nan'))
  state, _ = fn(state, _batch())
  assert _read(state) == (1, 'parameters')
  state, _ = fn(state, _batch())  # The NaN parameters: a NaN loss.
  assert update.describe(state.health) == (2, 'loss')
  # An infinite gradient at a finite loss: the parameters it updates.
  fn, state = _update(loss=_sqrt_loss, lr=0.1)
  state, _ = fn(state, {'x': np.zeros((1, 2), np.float32)})
  assert _read(state) == (1, 'parameters')


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
  floats = [x for x in state['learner'] if np.issubdtype(x.dtype, np.floating)]
  assert floats and all(np.isfinite(x).all() for x in floats)
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
