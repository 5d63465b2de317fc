"""Fidelity, item 9: `Agent.run` writes config.gin, as Trax's.

Source: google/trax, trax/rl/training.py, `Agent.run`: after training
epoch 1, `if self._output_dir is not None and self._epoch == 1:
self.save_gin()`, which writes `gin.operative_config_str()` to
`output_dir/config.gin`. An agent built in Python and run without
`train_rl` writes it too.
"""

import gin

from trax_rl import task
from trax_rl.agents import policy_agents


@gin.configurable('fidelity_width')
def _width(width=3):
  return width


def _agent(output_dir):
  t = task.RLTask('CartPole-v1', initial_trajectories=0, n_envs=2, seed=0)
  return policy_agents.PolicyGradient(
    t, n_trajectories_per_epoch=2, output_dir=str(output_dir)
  )


def test_run_writes_the_operative_config_after_epoch_one(tmp_path):
  gin.clear_config()
  gin.parse_config('fidelity_width.width = 7')
  assert _width() == 7  # Now in gin's operative config.
  agent = _agent(tmp_path)
  config = tmp_path / 'config.gin'
  assert not config.exists()
  agent.run(1)
  assert 'fidelity_width.width = 7' in config.read_text()
  # Only after epoch 1 (Trax's `self._epoch == 1`): later epochs keep it.
  config.write_text('# kept\n')
  agent.run(1)
  assert config.read_text() == '# kept\n'
  gin.clear_config()
