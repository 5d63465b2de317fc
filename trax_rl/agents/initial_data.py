"""`RLTask.initial_trajectories`: data in the program's store before epoch 1.

Trax's epoch 0: random episodes (or stored trajectories) go into the
learner's store (replay, ring) and nothing is learned from them yet.
"""

import copy
from typing import Any

import jax
import numpy as np

from trax_rl import task as task_lib
from trax_rl import trajectory_files
from trax_rl.algorithms import program as program_lib
from trax_rl.run import runner as runner_lib
from trax_rl.sources import host_envs, seed_axis


def observe(
  runner: runner_lib.Runner, task: task_lib.RLTask, n_steps: int
) -> None:
  """Observes `RLTask.initial_trajectories` before the first epoch.

  An int: that many episodes of uniformly random actions per seed (on
  envs of their own, reset from `[RLTask.seed + i, 9]`); a directory: the
  trajectories an earlier run stored there (every seed the same). They
  go into the learner's store (replay, ring) as a rollout of whole
  episodes, one per env, and nothing is learned from them yet (Trax's
  epoch 0).

  Args:
    runner: the agent's runner (its learner gets the data).
    task: the task (env, seed, cap and `initial_trajectories`).
    n_steps: the longest rollout the program observes (its spec's T).
  """
  spec = task.initial_trajectories
  program = runner.source.program
  n = runner.n_seeds
  one_seed = (
    lambda x: jax.ShapeDtypeStruct(  # noqa: E731
      np.shape(x)[1:] if n > 1 else np.shape(x), x.dtype
    )
  )
  learner = jax.tree.map(one_seed, runner.local_learner())
  info = _zero_info(program, task, learner)
  if isinstance(spec, int):
    seeds = [[task.seed + i, 9] for i in range(n)]
    envs = host_envs.HostEnvs(task.env_spec, spec, seeds, task.max_steps)
    # Each seed's actions from a space of its own, seeded as its envs.
    spaces = [copy.deepcopy(task.action_space) for _ in range(n)]
    for i, space in enumerate(spaces):
      space.seed(int(task.seed) + i)

    def random_act(obs, first, core):
      del first
      width = obs.shape[1]
      action = np.stack(
        [
          np.stack([np.asarray(space.sample()) for _ in range(width)])
          for space in spaces
        ]
      )
      return action, _tile(info, (n, width)), core

    try:
      rollout = envs.collect(random_act, n_episodes=spec).rollout
    finally:
      envs.close()
  else:
    one = trajectory_files.as_rollout(trajectory_files.read_all(spec), info)
    rollout = jax.tree.map(lambda x: np.stack([x] * n), one)
  rollout = _fit_columns(rollout, runner.source.n_envs)
  observe = jax.jit(seed_axis.over_seeds(program.observe, n))
  learner = runner.local_learner()
  # In rollouts of the program's length (the last padded: not valid).
  length = n_steps
  total = rollout.valid.shape[1]
  for start in range(0, total, length):
    part = jax.tree.map(
      lambda x, start=start: host_envs.pad_axis(
        x[:, start : start + length], length, 1
      ),
      rollout,
    )
    if n == 1:
      part = jax.tree.map(lambda x: x[0], part)
    learner = observe(learner, part)
  runner.set_learner(learner)


def _zero_info(
  program: program_lib.Program, task: task_lib.RLTask, learner: Any
) -> Any:
  """A zero info pytree of one step (no batch axes), as `act` records
  (`learner`: one seed's learner, or its shapes)."""
  _, info = program.act_shapes(learner, task.observation_space, 1)
  return jax.tree.map(lambda x: np.zeros(x.shape[1:], x.dtype), info)


def _tile(tree: Any, shape: tuple[int, ...]) -> Any:
  return jax.tree.map(lambda x: np.zeros(shape + x.shape, x.dtype), tree)


def _fit_columns(rollout: Any, n_envs: int) -> Any:
  """A rollout `[k, T, M, ...]` as `[k, T', n_envs, ...]` for the store.

  Its M env columns (one per initial episode) are laid out in n_envs
  columns: column c gets columns c, c + n_envs, ... one after another
  (each a whole episode, so they join as consecutive episodes).
  """
  valid = np.asarray(rollout.valid)
  k, _, m = valid.shape
  per_column = [list(range(c, m, n_envs)) for c in range(n_envs)]
  lengths = valid.sum(axis=1)  # [k, M]
  total = max(
    int(sum(lengths[s, j] for j in cols))
    for s in range(k)
    for cols in per_column
  )
  total = max(total, 1)

  def one(x):
    out = np.zeros((k, total, n_envs, *x.shape[3:]), x.dtype)
    for s in range(k):
      for c, cols in enumerate(per_column):
        t = 0
        for j in cols:
          n = int(lengths[s, j])
          out[s, t : t + n, c] = x[s, :n, j]
          t += n
    return out

  return jax.tree.map(one, rollout)
