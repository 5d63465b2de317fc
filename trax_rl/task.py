"""RLTask: env(s), the per-epoch trajectory store and collection.

Its batch streams are in `task_streams`, its files in `trajectory_files`.
"""

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from trax_rl import (
  collection,
  envs,
  episode_stats,
  jax_envs,
  task_streams,
  trajectory_files,
  validation,
)
from trax_rl import trajectory as trajectory_lib


class RLTask(task_streams.TrajectoryStreams):
  """An RL task: the environment(s) and the trajectories collected on them.

  Trajectories are stored per epoch; only the last `n_replay_epochs` epochs
  are kept. The agent training on the task owns that number (its own
  `n_replay_epochs` knob, or 1 for agents that keep their own replay) and
  sets it with `set_n_replay_epochs`; the task has no knob of its own, so a
  gin binding of `RLTask.n_replay_epochs` is an unknown-parameter error.
  Collection steps `n_envs` copies of the env in lockstep with one
  batched policy call per step. Terminations and time-limit truncations are
  kept apart: only a termination stops bootstrapping.
  """

  def __init__(
    self,
    env: envs.EnvLike,
    initial_trajectories: int | str = 1,
    gamma: float = 0.99,
    max_steps: int | None = None,
    n_envs: int = 1,
    seed: int = 0,
  ):
    """Configures the task.

    Args:
      env: a gymnasium id, an env instance or a zero-argument env factory;
        or a JAX env (`'gymnax:CartPole-v1'`, any pure reset/step pair, see
        `jax_envs`), which selects the device data path for agents that
        have one (`jax_env`) and is stepped from the host otherwise.
      initial_trajectories: an int (that many episodes of a random policy are
        stored as epoch 0) or the output_dir of an earlier run, whose stored
        trajectories become epoch 0.
      gamma: discount factor, in [0, 1]; it also discounts `return_`.
      max_steps: optional cap on episode length; an episode reaching it is
        truncated (it bootstraps). Eval may pass a smaller cap.
      n_envs: number of env copies stepped in lockstep.
      seed: seeds env resets and random actions; part of the checkpoint.
    """
    if not 0.0 <= gamma <= 1.0:
      raise ValueError(f'gamma must be in [0, 1], got {gamma}')
    validation.check_count('max_steps', max_steps, 1)
    validation.check_count('n_envs', n_envs, 1)
    if isinstance(initial_trajectories, bool) or (
      isinstance(initial_trajectories, int) and initial_trajectories < 0
    ):
      raise ValueError(
        'initial_trajectories must be an int >= 0 or a '
        f'directory, got {initial_trajectories!r}'
      )
    self._env_spec = env
    self._initial_trajectories = initial_trajectories
    self._jax_env = (
      jax_envs.make_jax_env(env) if jax_envs.is_jax_env(env) else None
    )
    self._env = envs.make_vector_env(self._jax_env or env, n_envs)
    self._eval_env = None  # Built on first eval.
    self._gamma = float(gamma)
    self._max_steps = max_steps
    self._n_replay_epochs = 1
    self._n_envs = n_envs
    self._seed = seed
    self._rng = np.random.default_rng(seed)
    self._eval_rng = np.random.default_rng([seed, 1])
    self._collector = collection.Collector(self._env)
    self._eval_collector = None
    self._trajectories: dict[int, list[trajectory_lib.Trajectory]] = {}
    self._saved_epochs: set[int] = set()
    self._n_trajectories = 0
    self._n_interactions = 0
    self._episode_stats = episode_stats.EpisodeStats()
    self._version = 0  # Bumped whenever the stored trajectories change.
    if isinstance(initial_trajectories, int):
      if initial_trajectories:
        self.collect_trajectories(
          collection.random_policy(self.action_space, self._rng),
          n_trajectories=initial_trajectories,
          epoch_id=0,
        )
    else:
      self._trajectories[0] = trajectory_files.read_all(initial_trajectories)

  # Properties, as Trax's.
  @property
  def env(self) -> gym.vector.VectorEnv:
    return self._env

  @property
  def env_spec(self) -> envs.EnvLike:
    """The env as given: an id, an instance or a factory."""
    return self._env_spec

  @property
  def jax_env(self) -> jax_envs.JaxEnv | None:
    """The JAX env of the device data path; None for a gymnasium env."""
    return self._jax_env

  @property
  def seed(self) -> int:
    return self._seed

  @property
  def gamma(self) -> float:
    return self._gamma

  @property
  def max_steps(self) -> int | None:
    return self._max_steps

  @property
  def n_envs(self) -> int:
    return self._n_envs

  @property
  def initial_trajectories(self) -> int | str:
    """Episodes of a random policy before training, or an earlier run's
    output_dir whose stored trajectories come first."""
    return self._initial_trajectories

  @property
  def max_episode_steps(self) -> int | None:
    """The env's own time limit (its spec's), or None."""
    spec = (
      getattr(self._env.envs[0], 'spec', None)
      if hasattr(self._env, 'envs')
      else None
    )
    return getattr(spec, 'max_episode_steps', None)

  @property
  def action_space(self) -> gym.Space:
    return self._env.single_action_space

  @property
  def observation_space(self) -> gym.Space:
    return self._env.single_observation_space

  @property
  def trajectories(self) -> dict[int, list[trajectory_lib.Trajectory]]:
    return self._trajectories

  @property
  def n_replay_epochs(self) -> int:
    return self._n_replay_epochs

  def set_n_replay_epochs(self, n_replay_epochs: int) -> None:
    """Keeps the latest `n_replay_epochs` epochs (the agent's knob).

    Raises:
      ValueError: not an integer >= 1.
    """
    validation.check_count('n_replay_epochs', n_replay_epochs, 1)
    self._n_replay_epochs = n_replay_epochs

  def n_trajectories(self) -> int:
    return self._n_trajectories

  def n_interactions(self) -> int:
    return self._n_interactions

  def n_nonfinite_observations(self) -> int:
    """Collected observations (rows) holding a NaN or an inf, so far."""
    return self._collector.n_nonfinite

  def set_check_finite(self, check: bool) -> None:
    """Whether collection counts non-finite observations (float spaces)."""
    self._collector.check_finite = bool(check) and np.issubdtype(
      self.observation_space.dtype or np.uint8, np.floating
    )

  @property
  def episode_stats(self) -> episode_stats.EpisodeStats:
    """Returns and count of the episodes completed on the training env."""
    return self._episode_stats

  def example_observation(self) -> np.ndarray:
    """One observation of the observation space (for network shapes)."""
    return np.zeros(self.observation_space.shape, self.observation_space.dtype)

  def collect(
    self,
    policy: collection.BatchPolicy,
    n_trajectories: int | None = None,
    n_interactions: int | None = None,
    only_eval: bool = False,
    max_steps: int | None = None,
    epoch_id: int = 1,
  ) -> collection.CollectResult:
    """Like `collect_trajectories`, returning the whole `collection.CollectResult`."""
    if (n_trajectories is None) == (n_interactions is None):
      raise ValueError(
        'exactly one of n_trajectories and n_interactions must be given'
      )
    validation.check_count('n_trajectories', n_trajectories, 1)
    validation.check_count('n_interactions', n_interactions, 1)
    max_steps = max_steps or self._max_steps
    if only_eval:
      if self._eval_collector is None:
        self._eval_env = envs.make_vector_env(
          self._jax_env or self._env_spec, self._n_envs
        )
        self._eval_collector = collection.Collector(self._eval_env)
      collector, rng = self._eval_collector, self._eval_rng
    else:
      collector, rng = self._collector, self._rng
    result = collector.collect(
      policy,
      rng,
      n_trajectories,
      n_interactions,
      max_steps,
      continue_episodes=n_interactions is not None and not only_eval,
    )
    if only_eval:
      return result
    self.add_trajectories(
      result.trajectories,
      result.n_interactions,
      epoch_id,
      result.episode_returns,
    )
    return result

  def add_trajectories(
    self,
    trajectories: list[trajectory_lib.Trajectory],
    n_interactions: int,
    epoch_id: int,
    episode_returns: Sequence[float],
  ) -> None:
    """Stores trajectories, from the task's envs or collected elsewhere.

    Args:
      trajectories: in the order they should be stored and sampled.
      n_interactions: the env steps they took.
      epoch_id: the epoch to store them under.
      episode_returns: the returns of the episodes that ended among them
        (whole episodes, which a slice of one may not show).
    """
    self._trajectories.setdefault(epoch_id, []).extend(trajectories)
    self._saved_epochs.discard(epoch_id)
    self._version += 1
    for epoch in [
      e for e in self._trajectories if e <= epoch_id - self._n_replay_epochs
    ]:
      del self._trajectories[epoch]
    self._n_trajectories += sum(t.done for t in trajectories)
    self._n_interactions += n_interactions
    self._episode_stats.add(episode_returns)

  def collect_trajectories(
    self,
    policy: collection.BatchPolicy,
    n_trajectories: int | None = None,
    n_interactions: int | None = None,
    only_eval: bool = False,
    max_steps: int | None = None,
    epoch_id: int = 1,
  ) -> float:
    """Collects experience with `policy`; returns the average return.

    Args:
      policy: batched policy, `(obs[N, ...], first[N]) -> (action[N], info)`.
      n_trajectories: collect this many whole episodes (envs are reset).
      n_interactions: collect this many env steps; running episodes are cut
        into slices and continue in the next call.
      only_eval: play on the separate eval env and store nothing.
      max_steps: cap on episode length for this call (default: the task's).
      epoch_id: the epoch to store new trajectories under.

    Returns:
      The mean undiscounted return of the episodes that ended in this call;
      if none ended, the mean return of the collected slices (as Trax).
    """
    result = self.collect(
      policy, n_trajectories, n_interactions, only_eval, max_steps, epoch_id
    )
    if result.episode_returns:
      return float(np.mean(result.episode_returns))
    if result.trajectories:
      return float(np.mean([t.total_return for t in result.trajectories]))
    return 0.0

  def reseed(self, seed: Any) -> None:
    """Draws the training envs' next resets and random actions from `seed`.

    A process of a multi-host job calls it so that its data differ from
    the other processes'; evaluation keeps its own generator.

    Args:
      seed: anything `np.random.default_rng` takes, e.g. [seed, process].
    """
    self._rng = np.random.default_rng(seed)

  # Saving and loading.
  def state_dict(self) -> dict[str, Any]:
    return {
      'n_trajectories': self._n_trajectories,
      'n_interactions': self._n_interactions,
      'epochs': sorted(self._trajectories),
      'rng': self._rng.bit_generator.state,
      'eval_rng': self._eval_rng.bit_generator.state,
      'collector': self._collector.state_dict(),
      'episode_stats': self._episode_stats.state_dict(),
    }

  def save_to_dir(self, directory) -> dict[str, Any]:
    """Writes trajectories of changed epochs; returns the task's state dict.

    The trajectory files are immutable once their epoch is complete; the
    returned state (epochs, counters, RNG states) goes into the agent's
    checkpoint, which is the commit point of a save.
    """
    for epoch, trajs in self._trajectories.items():
      if epoch not in self._saved_epochs:
        trajectory_files.write(directory, epoch, trajs)
        self._saved_epochs.add(epoch)
    return self.state_dict()

  def load_from_dir(self, directory, state: dict[str, Any]) -> None:
    """Restores what `save_to_dir` wrote (and `state` describes)."""
    self._n_trajectories = state['n_trajectories']
    self._n_interactions = state['n_interactions']
    self._rng.bit_generator.state = state['rng']
    self._eval_rng.bit_generator.state = state['eval_rng']
    if 'episode_stats' in state:  # Absent in checkpoints of older versions.
      self._episode_stats.load_state_dict(state['episode_stats'])
    self._trajectories = {
      e: trajectory_files.read(directory, e) for e in state['epochs']
    }
    self._saved_epochs = set(state['epochs'])
    self._version += 1
    # Episodes running at the checkpoint go on where the envs' state was
    # saved (plain data); elsewhere they restart, with a one-line notice.
    self._collector.load_state_dict(state.get('collector', {}))

  def remove_stale_files(self, directory) -> None:
    """Deletes trajectory files of epochs that left the replay window."""
    trajectory_files.remove_all_but(directory, list(self._trajectories))
