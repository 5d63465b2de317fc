"""The DQN-family gin/gymnax configs: one per loss and env, and they train.

That every gymnax config builds on the device path is tested with the
other shipped configs (`test_gin_configs.py`).
"""

import pathlib

import gin
import jax

from trax_rl import configurables
from trax_rl.sources import device as device_source

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOSSES = ('dqn', 'dqnreg', 'mdqn', 'pdqn', 'c51', 'qrdqn')
CONFIGS = sorted(
  p
  for p in (ROOT / 'gin' / 'gymnax').glob('*.gin')
  if p.stem.rsplit('_', 1)[0] in LOSSES
)


def test_every_loss_has_a_config_per_env():
  names = {p.stem for p in CONFIGS}
  for loss in LOSSES:
    for env in ('cartpole', 'acrobot', 'breakout', 'asterix'):
      assert f'{loss}_{env}' in names


def test_one_config_trains_one_small_epoch(tmp_path):
  small = [
    'train_rl.n_epochs=1',
    'ReplayValueAgent.n_interactions_per_epoch=64',
    'ReplayValueAgent.min_replay_size=32',
    'ReplayValueAgent.batch_size=8',
    'ReplayValueAgent.num_sgd_steps_per_step=1',
    'ReplayValueAgent.n_eval_episodes=1',
    'MLP.layer_widths=(8,)',
    'RLTask.max_steps=20',
  ]
  configurables.parse([str(ROOT / 'gin/gymnax/pdqn_cartpole.gin')], small)
  agent = configurables.train_rl(output_dir=str(tmp_path))
  assert agent.current_epoch == 1
  assert int(agent.learner.train.step) > 0
  assert (tmp_path / 'checkpoint.pkl').exists()
  gin.clear_config()


def test_r2d2_masked_config_trains_on_the_device(tmp_path):
  small = [
    'train_rl.n_epochs=1',
    'R2D2.n_interactions_per_epoch=128',
    'R2D2.min_replay_size=4',
    'R2D2.batch_size=4',
    'RLTask.n_envs=4',
  ]
  config = ROOT / 'gin/gymnax/r2d2_cartpole_masked.gin'
  configurables.parse([str(config)], small)
  agent = configurables.train_rl(output_dir=str(tmp_path))
  assert isinstance(agent.runner.source, device_source.DeviceSource)
  assert agent.current_epoch == 1
  assert int(agent.learner.train.step) > 0
  # The env hides the velocities, after resets and steps alike.
  env = agent.task.jax_env
  observation, state = env.reset(jax.random.PRNGKey(0))
  out = env.step(jax.random.PRNGKey(1), state, 1)
  for obs in (observation, out.observation):
    assert obs[1] == obs[3] == 0.0
    assert obs[0] != 0.0 or obs[2] != 0.0
  gin.clear_config()
