"""What `trax-rl check` does: act once and compile one update, no training."""

from typing import Any

import numpy as np


def check(agent: Any) -> dict[str, Any]:
  """Acts once and compiles one update of `agent` (a `ProgramAgent`).

  Returns:
    What `trax-rl check` reports: the spaces, the env count, 'ok' for
    acting and 'compiled' for the update.

  Raises:
    ValueError: the policy's actions do not fit the env's action space.
  """
  env = agent.task.env
  obs, _ = env.reset(seed=0)
  action, _ = agent.make_policy(1.0, evaluation=True)(
    np.asarray(obs), np.ones(env.num_envs, bool)
  )
  space = env.single_action_space
  for a in np.asarray(action):
    if not space.contains(np.asarray(a, space.dtype)):
      raise ValueError(
        f'{type(agent).__name__} chose action {a}, outside the action '
        f'space {space}'
      )
  agent.compile_update()
  return {
    'observation_space': str(env.single_observation_space),
    'action_space': str(space),
    'n_envs': env.num_envs,
    'acting': 'ok',
    'update': 'compiled',
  }
