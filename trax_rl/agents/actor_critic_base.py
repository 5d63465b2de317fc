"""The common base of the actor-critic agents: acting and training data.

`ActorCriticBase` acts by sampling its policy (keeping continuous actions
unclipped for training), normalizes observations by running statistics and
packs the stored trajectories into `epoch_batch.EpochData` once per epoch.
The separate-network agents (`actor_critic_agent.ActorCriticAgent`) and the
joint ones (`actor_critic_joint`) build on it.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import distributions, normalization, policies, validation
from trax_rl import task as task_lib
from trax_rl.agents import epoch_batch, policy_agents
from trax_rl.networks import base as networks

ModelFn = Callable[..., nn.Module]


def as_thresholds(thresholds) -> tuple | None:
  """Thresholds from gin (lists) as a tuple of tuples, or None."""
  if not thresholds:
    return None
  return tuple(tuple(t) for t in thresholds)


def check_positive(name: str, value: float) -> None:
  """Raises ValueError unless value > 0."""
  if not value > 0:
    raise ValueError(f'{name} must be > 0, got {value}')


class ActorCriticBase(policy_agents.PolicyAgent):
  """Acting, observation normalization and data packing of actor-critics.

  Observation statistics (Trax's `Normalize`) are updated only while
  collecting training data (`make_policy(evaluation=False)`), before each
  action, and frozen at evaluation; training normalizes the stored raw
  observations with the current statistics.
  """

  on_policy: bool | None = None

  def __init__(
    self,
    task: task_lib.RLTask,
    n_replay_epochs: int = 1,
    normalize_observations: bool = False,
    normalization_sample_limit: float = float('inf'),
    normalization_epsilon: float = 1e-5,
    normalization_clip: float | None = None,
    action_std: float = 1.0,
    learn_std: str | None = None,
    offline: bool = False,
    **kwargs,
  ):
    """Configures acting.

    Args:
      task: the RLTask.
      n_replay_epochs: train on the last this many epochs (1 for on-policy
        algorithms).
      normalize_observations: normalize observations by running statistics.
      normalization_sample_limit: stop updating them after this many
        observations (Trax's Normalize.sample_limit).
      normalization_epsilon: added to the std when normalizing.
      normalization_clip: clip normalized observations to [-clip, clip].
      action_std: for Box actions, the Gaussian's std (or the offset of a
        learned one).
      learn_std: for Box actions, None (fixed std), 'shared' or 'separate'.
      offline: use the stored actions as the behaviour policy's means
        (continuous actions with a fixed std only), as Trax's offline mode.
      **kwargs: for `Agent` (n_interactions_per_epoch, seed, ...).

    Raises:
      ValueError: bad counts, an on-policy agent with n_replay_epochs > 1,
        or offline training on discrete actions.
    """
    validation.check_count('n_replay_epochs', n_replay_epochs, 1)
    if self.on_policy and n_replay_epochs != 1:
      raise ValueError(
        f'{type(self).__name__} is on-policy: n_replay_epochs must be 1, '
        f'got {n_replay_epochs}'
      )
    super().__init__(task, **kwargs)
    task.set_n_replay_epochs(n_replay_epochs)
    space = task.action_space
    self._policy_dist = distributions.create_distribution(
      space, std=action_std, learn_std=learn_std
    )
    if offline and not (
      isinstance(space, gym.spaces.Box) and learn_std is None
    ):
      raise ValueError(
        'offline training needs continuous (Box) actions with a fixed std, '
        f'got {space} with learn_std={learn_std!r}'
      )
    self._offline = offline
    self._normalize = normalize_observations
    self._norm_epsilon = normalization_epsilon
    self._norm_clip = normalization_clip
    self._stats = normalization.init_statistics(task.observation_space.shape)
    self._update_stats = jax.jit(
      lambda stats, obs: normalization.update(
        stats, obs, normalization_sample_limit
      )
    )
    self._packed: dict[int, tuple[int, epoch_batch.EpochData]] = {}
    self._rollout_params = None  # Set on a rollout actor only.

  # Observation normalization.
  @property
  def observation_statistics(self) -> normalization.RunningStatistics:
    return self._stats

  def normalize_observations(self, stats, obs: jax.Array) -> jax.Array:
    """Normalizes [..., *obs_shape] (identity when normalization is off)."""
    if not self._normalize:
      return obs
    return normalization.normalize(
      stats, obs, self._norm_epsilon, self._norm_clip
    )

  # Acting.
  def acting_network(self) -> networks.Network:
    """The raw network whose outputs (or their first) are dist_inputs."""
    raise NotImplementedError

  def acting_params(self) -> Any:
    raise NotImplementedError

  def policy_network(self) -> networks.Network:
    net = self.acting_network()
    return networks.Network(
      init=net.init,
      apply=lambda p, obs: net.apply(
        p['net'], self.normalize_observations(p['stats'], obs)
      ),
    )

  def policy_params(self) -> Any:
    net = self._rollout_params
    return {
      'net': self.acting_params() if net is None else net,
      'stats': self._stats,
    }

  def rollout_params(self) -> Any:
    # Actors would update statistics the learner never sees.
    if self._normalize:
      raise ValueError(
        'normalize_observations=True cannot run on rollout actors yet: '
        'collect locally'
      )
    return self.acting_params()

  def load_rollout_params(self, params: Any) -> None:
    self._rollout_params = params

  def make_policy(
    self, temperature: float, evaluation: bool
  ) -> task_lib.BatchPolicy:
    space = self._task.action_space
    keep_unclipped = isinstance(space, gym.spaces.Box)
    update_stats = self._normalize and not evaluation

    def policy(obs, first):
      del first
      if update_stats:
        self._stats = self._update_stats(self._stats, obs)
      key, index = self.acting_key(evaluation)
      action, dist_inputs = self._select(
        self.policy_params(), key, index, obs, temperature
      )
      action = np.asarray(action)
      info = {'dist_inputs': np.asarray(dist_inputs)}
      if keep_unclipped:
        info[epoch_batch.UNCLIPPED_ACTION] = action
      return policies.clip_to_space(action, space), info

    return policy

  # Data.
  def normalize_data(
    self, stats: normalization.RunningStatistics, data: epoch_batch.EpochData
  ) -> epoch_batch.EpochData:
    """data with both of its observations normalized by stats."""
    return data._replace(
      observation=self.normalize_observations(stats, data.observation),
      next_observation=self.normalize_observations(
        stats, data.next_observation
      ),
    )

  def training_data(self) -> epoch_batch.EpochData:
    """The stored trajectories packed (cached per epoch) and padded."""
    n_inputs = self._policy_dist.n_inputs
    parts = []
    stored = self._task.trajectories
    for epoch in sorted(stored):
      trajs = stored[epoch]
      cached = self._packed.get(epoch)
      if cached is None or cached[0] != len(trajs):
        packed = epoch_batch.pack_trajectories(
          trajs, n_inputs, self._task.example_observation()
        )
        cached = self._packed[epoch] = (len(trajs), packed)
      parts.append(cached[1])
    for epoch in [e for e in self._packed if e not in stored]:
      del self._packed[epoch]
    if not parts:
      raise ValueError('no trajectories to train on: collect some first')
    data = epoch_batch.concatenate(parts)
    if self._offline:
      n = data.action.shape[0]
      data = data._replace(
        dist_inputs=np.asarray(data.action, np.float32).reshape(n, -1)
      )
    return epoch_batch.pad_to_bucket(data)

  def example_training_data(self) -> epoch_batch.EpochData:
    """One random-policy episode packed and padded, for `compile_update`."""
    data = epoch_batch.pack_trajectories(
      self.random_episode(),
      self._policy_dist.n_inputs,
      self._task.example_observation(),
    )
    return epoch_batch.pad_to_bucket(data)

  def minibatches(self, n_valid: int, steps: int, batch: int) -> np.ndarray:
    return epoch_batch.minibatch_indices(self._rng, n_valid, steps, batch)

  def state_dict(self) -> dict[str, Any]:
    return dict(
      super().state_dict(),
      observation_statistics=[np.asarray(x) for x in self._stats],
    )

  def load_state_dict(self, state: dict[str, Any]) -> None:
    super().load_state_dict(state)
    self._stats = normalization.RunningStatistics(
      *[jnp.asarray(x) for x in state['observation_statistics']]
    )
