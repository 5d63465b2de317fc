"""RLTask: the environment an agent trains on, and how it is stepped.

Trax's `RLTask` held the env and the per-epoch trajectory store; here the
store is the program's own (its replay or ring, in the learner), so the
task is what every source needs to step the env: the env, how many copies,
the discount, the episode cap, the seed and the initial data.
"""

import os

import gymnasium as gym
import numpy as np

from trax_rl import envs, jax_envs, types, validation


class RLTask:
  """An RL task: the environment(s) and the way they are stepped.

  The agent's sources step `n_envs` copies of the env in lockstep (the
  gymnasium source, rollout actors) or compile its JAX version (the device
  source). Terminations and time-limit truncations are kept apart: only a
  termination stops bootstrapping.
  """

  def __init__(
    self,
    env: envs.EnvLike,
    initial_trajectories: int | str = 1,
    gamma: float = 0.99,
    max_steps: int | None = None,
    n_envs: int = 1,
    seed: int = 0,
    n_replay_epochs: int = 1,
  ):
    """Configures the task.

    Args:
      env: a gymnasium id, an env instance or a zero-argument env factory;
        or a JAX env (`'gymnax:CartPole-v1'`, any pure reset/step pair, see
        `jax_envs`), which selects the device source.
      initial_trajectories: an int (that many episodes of a random policy
        go into the agent's store before the first epoch, Trax's epoch 0)
        or a directory of stored trajectories (`trajectory_files`), which
        go there instead.
      gamma: discount factor, in [0, 1].
      max_steps: optional cap on episode length; an episode reaching it is
        truncated (it bootstraps). Eval may pass a smaller cap.
      n_envs: number of env copies stepped in lockstep.
      seed: seeds env resets and random actions.
      n_replay_epochs: epochs of trajectories the task keeps besides the
        current one, as Trax's RLTask: a `DQN` learns from at most this
        + 1 epochs whatever its own `n_replay_epochs` (Trax's DQN never
        widens the task's window; the policy and actor-critic agents do,
        so it does not limit them).
    """
    if not 0.0 <= gamma <= 1.0:
      raise ValueError(f'gamma must be in [0, 1], got {gamma}')
    validation.check_count('max_steps', max_steps, 1)
    validation.check_count('n_envs', n_envs, 1)
    validation.check_count('n_replay_epochs', n_replay_epochs, 1)
    if isinstance(initial_trajectories, bool) or (
      isinstance(initial_trajectories, int) and initial_trajectories < 0
    ):
      raise ValueError(
        'initial_trajectories must be an int >= 0 or a '
        f'directory, got {initial_trajectories!r}'
      )
    if isinstance(initial_trajectories, str) and not os.path.isdir(
      initial_trajectories
    ):
      raise ValueError(
        f'initial_trajectories {initial_trajectories!r}: no stored '
        'trajectories there (not a directory)'
      )
    self._env_spec = env
    self._initial_trajectories = initial_trajectories
    self._jax_env = (
      jax_envs.make_jax_env(env) if jax_envs.is_jax_env(env) else None
    )
    self._env = envs.make_vector_env(self._jax_env or env, n_envs)
    self._gamma = float(gamma)
    self._max_steps = max_steps
    self._n_envs = n_envs
    self._seed = seed
    self._n_replay_epochs = n_replay_epochs

  @property
  def env(self) -> gym.vector.VectorEnv:
    """The task's `n_envs` envs (for checks; sources build their own)."""
    return self._env

  @property
  def env_spec(self) -> envs.EnvLike:
    """The env as given: an id, an instance or a factory."""
    return self._env_spec

  @property
  def jax_env(self) -> jax_envs.JaxEnv | None:
    """The JAX env of the device source; None for a gymnasium env."""
    return self._jax_env

  seed = types.read_only('_seed')

  gamma = types.read_only('_gamma')

  max_steps = types.read_only('_max_steps')

  n_replay_epochs = types.read_only('_n_replay_epochs')

  n_envs = types.read_only('_n_envs')

  @property
  def initial_trajectories(self) -> int | str:
    """Episodes of a random policy before training, or a directory of
    stored trajectories that come first."""
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

  def example_observation(self) -> np.ndarray:
    """One observation of the observation space (for network shapes)."""
    return np.zeros(self.observation_space.shape, self.observation_space.dtype)
