"""What `trax-rl check` does: act once and compile one update, no training.

Agents build their sample batches for `compile_update` from
`random_episode` and `example_slice_batch`.
"""

from typing import Any

import numpy as np

from trax_rl import batching, collection
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib


def random_episode(task: task_lib.RLTask) -> list[trajectory_lib.Trajectory]:
  """One episode of uniformly random actions on the eval env, not stored.

  Gives `compile_update` real data of the right shapes; it draws from its
  own generator, so checking an agent leaves its random state as it was.
  """
  policy = collection.random_policy(task.action_space, np.random.default_rng(0))
  return task.collect(policy, n_trajectories=1, only_eval=True).trajectories


def example_slice_batch(
  task: task_lib.RLTask,
  batch_size: int,
  max_slice_length: int | None,
  margin: int,
) -> trajectory_lib.TimeStepBatch:
  """`[B, T, ...]` slices of one random episode, for `compile_update`."""
  return batching.batch_from_trajectories(
    random_episode(task),
    batch_size,
    max_slice_length,
    margin,
    task.gamma,
    np.random.default_rng(0),
  )


def check(agent: Any) -> dict[str, Any]:
  """Acts once and compiles one update of `agent` (a `base.Agent`).

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
