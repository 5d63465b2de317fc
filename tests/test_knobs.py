"""A gin knob an agent does not take is named with what to bind instead."""

import pytest

from trax_rl import cli, knobs


@pytest.mark.parametrize(
  'config, binding, hint',
  [
    (
      'ppo_cartpole',
      'PPO.learning_rate=1e-3',
      'PPO.policy_lr_schedule = @policy/constant_lr and '
      'policy/constant_lr.value = 3e-4',
    ),
    ('pg_cartpole', 'PolicyGradient.lr=0.1', 'PolicyGradient.lr_schedule'),
    ('gymnax/pqn_cartpole', 'PQN.lr=0.1', 'did you mean PQN.learning_rate?'),
    (
      'sac_pendulum',
      'SAC.learning_rate=1e-3',
      'per network: SAC.actor_lr, SAC.critic_lr, SAC.temperature_lr',
    ),
    ('td3_pendulum', 'TD3.buffer_size=10', 'TD3.max_replay_size'),
    (
      'ppo_cartpole',
      'PPO.ent_coef=0.0',
      'the knob for that here is PPO.entropy_coeff',
    ),
    ('ppo_cartpole', 'PPO.entropy_coef=0.0', 'did you mean PPO.entropy_coeff?'),
    ('ppo_cartpole', 'PPO.gamma=0.9', 'the knob for that here is RLTask.gamma'),
    (
      'acme_dqn_cartpole',
      'ReplayValueAgent.buffer_size=10',
      'ReplayValueAgent.max_replay_size',
    ),
  ],
)
def test_a_close_miss_names_the_right_knob(capsys, config, binding, hint):
  code = cli.main(['check', f'--config={config}', f'--config={binding}'])
  assert code == cli.EXIT_BAD_INPUT
  (line,) = capsys.readouterr().err.strip().splitlines()
  name = binding.split('=')[0]
  assert line.startswith(f'trax-rl: error: unknown gin binding {name}: ')
  assert hint in line


def test_no_hint_for_a_name_like_nothing():
  assert knobs.suggest('PPO', 'zzz_qqq', {'epsilon', 'seed'}) is None
