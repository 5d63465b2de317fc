"""RLTask: env(s), the per-epoch trajectory store, collection and batching."""

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from etils import epath

from trax_rl import (
  batching,
  checkpoint,
  collection,
  envs,
  episode_stats,
  jax_envs,
  validation,
)
from trax_rl import trajectory as trajectory_lib

# Re-exported: they are part of RLTask's interface.
BatchPolicy = collection.BatchPolicy
CollectResult = collection.CollectResult
batch_from_trajectories = batching.batch_from_trajectories

TASK_FILE = 'task.pkl'
TRAJECTORY_DIR = 'trajectories'


def trajectory_file(directory, epoch: int) -> epath.Path:
  return epath.Path(directory) / TRAJECTORY_DIR / f'epoch_{epoch:06d}.pkl'


class RLTask:
  """An RL task: the environment(s) and the trajectories collected on them.

  Trajectories are stored per epoch; only the last `n_replay_epochs` epochs
  are kept. The agent training on the task owns that number (its own
  `n_replay_epochs` knob, or 1 for agents that keep their own replay) and
  sets it with `set_n_replay_epochs`; the task has no knob of its own, so a
  gin binding of `RLTask.n_replay_epochs` is an unknown-parameter error. Collection steps `n_envs` copies of the env in lockstep with one
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
      self._trajectories[0] = load_trajectories(initial_trajectories)

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
    policy: BatchPolicy,
    n_trajectories: int | None = None,
    n_interactions: int | None = None,
    only_eval: bool = False,
    max_steps: int | None = None,
    epoch_id: int = 1,
  ) -> CollectResult:
    """Like `collect_trajectories`, returning the whole `CollectResult`."""
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
    policy: BatchPolicy,
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

  # Batches.
  def _epoch_ids(self, epochs: list[int] | None) -> list[int]:
    present = sorted(e for e, ts in self._trajectories.items() if ts)
    if not epochs or not present:
      return present
    last = max(self._trajectories) + 1
    wanted = {e % last for e in epochs}  # -1 means the last epoch.
    return [e for e in present if e in wanted]

  def trajectory_stream(
    self,
    epochs: list[int] | None = None,
    max_slice_length: int | None = None,
    sample_trajectories_uniformly: bool = False,
    margin: int = 0,
    include_final_state: bool = False,
    rng: np.random.Generator | None = None,
  ) -> Iterator[trajectory_lib.Trajectory]:
    """Endless stream of trajectories sampled from the given epochs.

    Epochs are sampled in proportion to their number of slices; trajectories
    within an epoch uniformly or in proportion to their number of slices.
    """
    rng = rng or self._rng
    while True:
      version = self._version
      epoch_ids = self._epoch_ids(epochs)
      if not epoch_ids:
        raise ValueError('no trajectories to sample from: collect some first')
      counts = [
        np.array(
          [
            batching.n_slices(t, max_slice_length, margin, include_final_state)
            for t in self._trajectories[e]
          ],
          np.float64,
        )
        for e in epoch_ids
      ]
      totals = np.array([c.sum() for c in counts])
      # Draw epochs in chunks (cheaper than one call per draw), and start over
      # as soon as the store changes, so no draw comes from a stale epoch.
      while version == self._version:
        for k in rng.choice(len(epoch_ids), size=64, p=totals / totals.sum()):
          trajs = self._trajectories[epoch_ids[k]]
          if sample_trajectories_uniformly:
            i = rng.integers(len(trajs))
          else:
            i = rng.choice(len(trajs), p=counts[k] / totals[k])
          yield trajs[i]
          if version != self._version:
            break

  def trajectory_batch_stream(
    self,
    batch_size: int,
    epochs: list[int] | None = None,
    max_slice_length: int | None = None,
    min_slice_length: int | None = None,
    margin: int = 0,
    sample_trajectories_uniformly: bool = False,
    include_final_state: bool = False,
    trajectory_stream_preprocessing_fn: Callable | None = None,
    rng: np.random.Generator | None = None,
  ) -> Iterator[trajectory_lib.TimeStepBatch]:
    """Endless stream of padded `[B, T, ...]` batches of trajectory slices.

    Args:
      batch_size: B.
      epochs: epochs to sample from (negative counts from the last); all if
        None.
      max_slice_length: slice length; whole trajectories if None.
      min_slice_length: pad every batch to at least this length.
      margin: padding steps past each trajectory's end (mask 0, done True),
        so that estimators see the final observation.
      sample_trajectories_uniformly: sample trajectories uniformly instead of
        in proportion to their number of slices.
      include_final_state: let a slice also start one step later, so that the
        last slice of a trajectory ends on its final (padding) step.
      trajectory_stream_preprocessing_fn: maps the stream of trajectories
        before slicing (ExpertIteration filters it).
      rng: numpy Generator to sample with (default: the task's).

    Yields:
      TimeStepBatch with fields `[B, T, ...]`; T is the longest slice in the
      batch (at least `min_slice_length`), rounded up to a power of two when
      the slices differ in length, so that jitted consumers compile rarely.
    """
    validation.check_count('batch_size', batch_size, 1)
    rng = rng or self._rng
    stream = self.trajectory_stream(
      epochs,
      max_slice_length,
      sample_trajectories_uniformly,
      margin,
      include_final_state,
      rng,
    )
    if trajectory_stream_preprocessing_fn is not None:
      stream = trajectory_stream_preprocessing_fn(stream)
    while True:
      slices = []
      for traj in stream:
        slices.append(
          batching.random_slice(
            traj,
            max_slice_length,
            margin,
            self._gamma,
            include_final_state,
            rng,
          )
        )
        if len(slices) == batch_size:
          break
      yield batching.stack_padded(slices, min_slice_length)

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
        checkpoint.save(
          trajectory_file(directory, epoch), [t.state_dict() for t in trajs]
        )
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
    self._trajectories = {e: _load_epoch(directory, e) for e in state['epochs']}
    self._saved_epochs = set(state['epochs'])
    self._version += 1
    # Episodes running at the checkpoint go on where the envs' state was
    # saved (plain data); elsewhere they restart, with a one-line notice.
    self._collector.load_state_dict(state.get('collector', {}))

  def remove_stale_files(self, directory) -> None:
    """Deletes trajectory files of epochs that left the replay window."""
    folder = epath.Path(directory) / TRAJECTORY_DIR
    if not folder.exists():
      return
    keep = {trajectory_file(directory, e).name for e in self._trajectories}
    for f in folder.glob('epoch_*.pkl'):
      if f.name not in keep:
        f.unlink()


def _load_epoch(directory, epoch: int) -> list[trajectory_lib.Trajectory]:
  states = checkpoint.load(trajectory_file(directory, epoch))
  return [trajectory_lib.Trajectory.from_state_dict(s) for s in states]


def load_trajectories(directory) -> list[trajectory_lib.Trajectory]:
  """All stored trajectories of an earlier run's output_dir."""
  folder = epath.Path(directory) / TRAJECTORY_DIR
  files = sorted(folder.glob('epoch_*.pkl')) if folder.exists() else []
  if not files:
    raise ValueError(
      f'initial_trajectories: no stored trajectories in {directory}'
    )
  result = []
  for f in files:
    result.extend(
      trajectory_lib.Trajectory.from_state_dict(s) for s in checkpoint.load(f)
    )
  return result
