"""The source an agent's task and knobs pick, and the program it feeds.

A JAX env runs compiled epochs on the device (`sources.device`); a bound
`RayCollector` plays on rollout actors (`sources.ray`); any other env is
stepped from Python (`sources.gymnasium`). What only whole episodes allow
is checked here, once for every family.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from trax_rl import task as task_lib
from trax_rl import validation
from trax_rl.sources import device as device_source
from trax_rl.sources import gymnasium as gym_source
from trax_rl.sources import host_envs


def seed_keys(seed: int) -> dict[str, np.ndarray]:
  """The raw keys a seed's learner, source and evaluations start from."""
  base = jax.random.PRNGKey(seed)
  return {
    'init': np.asarray(jax.random.fold_in(base, 0)),
    'eval': np.asarray(jax.random.fold_in(base, 2)),
    'source': np.asarray(jax.random.fold_in(base, 3)),
  }


@dataclasses.dataclass(frozen=True)
class Epochs:
  """What an agent's epochs are made of.

  Attributes:
    name: the agent's class name (for errors).
    seed: the agent's seed (the Ray units' seeds and keys derive from it).
    task: its RLTask.
    n_seeds: seeds trained side by side.
    n_interactions: env steps per epoch, or None;
    n_trajectories: episodes per epoch, or None.
    multihost: whether the learner is one of several processes.
  """

  name: str
  seed: int
  task: task_lib.RLTask
  n_seeds: int
  n_interactions: int | None
  n_trajectories: int | None
  multihost: bool

  @property
  def cap(self) -> int | None:
    """The episode-length cap: RLTask.max_steps, else the env's own."""
    return self.task.max_steps or self.task.max_episode_steps

  @property
  def per_env(self) -> int | None:
    """Env steps per env of an epoch counted in steps."""
    if self.n_interactions is None:
      return None
    return -(-self.n_interactions // self.task.n_envs)


def check_epochs(
  task: task_lib.RLTask, n_trajectories: int | None, n_interactions: int | None
) -> None:
  """Raises ValueError unless exactly one epoch size is set, and one the
  task's source can collect."""
  if (n_trajectories is None) == (n_interactions is None):
    raise ValueError(
      'exactly one of n_trajectories_per_epoch and '
      'n_interactions_per_epoch must be set, got '
      f'n_trajectories_per_epoch={n_trajectories}, '
      f'n_interactions_per_epoch={n_interactions}'
    )
  validation.check_count('n_trajectories_per_epoch', n_trajectories, 1)
  validation.check_count('n_interactions_per_epoch', n_interactions, 1)
  if task.jax_env is not None and n_interactions is None:
    raise ValueError(
      f'the device path (env {task.jax_env.name!r}) collects fixed-length '
      'rollouts: set n_interactions_per_epoch instead of '
      f'n_trajectories_per_epoch={n_trajectories}'
    )


def max_rollout_steps(epochs: Epochs, collector: Any) -> int:
  """The longest rollout `[T, N]` a source gives the program (its T).

  Epochs of env steps: `ceil(n_interactions / n_envs)` (or the rollout
  actors' chunk length, if longer). Epochs of n episodes on N envs: an env
  plays at most n - N + 1 of them, each at most the episode-length cap
  long; the rollout is padded to a power of two.

  Args:
    epochs: the agent's epochs.
    collector: the `RayCollector`'s knobs, or None.

  Raises:
    ValueError: epochs of episodes without an episode-length cap.
  """
  chunk = 0 if collector is None else collector.chunk_length
  if epochs.n_interactions is not None:
    return max(epochs.per_env, chunk)
  if epochs.cap is None:
    raise ValueError(
      f'{epochs.name} stores whole episodes of epochs counted in episodes: '
      'give them a length cap (RLTask.max_steps)'
    )
  n = epochs.n_trajectories
  n_envs = epochs.task.n_envs
  per_env = 1 if collector is not None else n - min(n, n_envs) + 1
  return host_envs.pad_steps(per_env * epochs.cap)


def source(
  epochs: Epochs,
  program: Any,
  make_program: Callable[[int], Any],
  keys: np.ndarray,
  collector: tuple[Any, Callable] | None,
) -> tuple[Any, Any]:
  """The source of `epochs` and the program it feeds.

  Args:
    epochs: the agent's epochs.
    program: its program, built for `task.n_envs` envs.
    make_program: builds it for another number of env columns.
    keys: the seeds' source keys `[n_seeds, 2]`.
    collector: (RayCollector, agent factory), or None.
  """
  task = epochs.task
  if program.whole_episodes and epochs.n_interactions is not None:
    raise ValueError(
      f'{epochs.name} needs epochs of whole episodes (its filter ranks '
      'whole trajectories): set n_trajectories_per_epoch instead of '
      'n_interactions_per_epoch, on a gymnasium env'
    )
  one = keys[0] if epochs.n_seeds == 1 else keys
  if collector is not None:
    return _ray(epochs, program, make_program, keys[0], collector)
  if task.jax_env is not None:
    return device_source.DeviceSource(
      task.jax_env, program, task.n_envs, epochs.per_env, task.max_steps, one
    ), program
  return _gymnasium(epochs, program, one), program


def _gymnasium(epochs: Epochs, program: Any, keys: Any, collector=None):
  task = epochs.task
  # Epochs of episodes fill rollouts of one length (one compile) where
  # episodes have a cap; without one (a program that stores no rollout)
  # each epoch's is its own power of two.
  rollout_steps = None
  if epochs.n_trajectories is not None and epochs.cap:
    rollout_steps = max_rollout_steps(epochs, collector)
  return gym_source.GymnasiumSource(
    task.env_spec,
    program,
    task.n_envs,
    [task.seed + i for i in range(epochs.n_seeds)],
    keys,
    task.max_steps,
    n_steps=epochs.per_env,
    n_episodes=epochs.n_trajectories,
    rollout_steps=rollout_steps,
    multihost=epochs.multihost,
  )


def _ray(epochs: Epochs, program: Any, make_program, key, collector):
  """The Ray source, whose program sees every actor's (or unit's) envs."""
  from trax_rl.sources import ray as ray_source  # noqa: PLC0415

  if epochs.n_seeds > 1:
    raise ValueError(
      'train_rl.n_seeds > 1 runs on one process: unbind the collector'
    )
  settings, factory = collector
  n_envs = epochs.task.n_envs
  if program.streams:
    columns = settings.n_actors * n_envs
  elif epochs.n_trajectories is not None:
    columns = -(-epochs.n_trajectories // n_envs) * n_envs
  else:
    columns = -(-epochs.per_env // settings.chunk_length) * n_envs
  program = make_program(columns)
  source = ray_source.RaySource(
    settings,
    factory,
    program,
    _gymnasium(epochs, program, key, settings),
    epochs.seed,
    n_envs,
    epochs.n_interactions,
    epochs.n_trajectories,
    program.streams,
    columns,
  )
  return source, program
