"""The one actor-critic agent: acting, data and the jitted epoch.

`ActorCritic` acts by sampling its policy (keeping continuous actions
unclipped for training), normalizes observations by running statistics,
packs the stored trajectories into `data.EpochData` once per epoch and
trains them with its network layout's pure `train_on_batch` (one jitted
call per epoch). The algorithm is its objective (`losses.actor_critic`);
the network layout (`separate.Separate` or `joint.Joint`) is a choice.
"""

import functools
import inspect
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import (
  advantages,
  collection,
  compile_options,
  distributions,
  normalization,
  policies,
  validation,
)
from trax_rl import task as task_lib
from trax_rl.agents import checks, policy_agents
from trax_rl.agents.actor_critic import data as data_lib
from trax_rl.agents.actor_critic import device_path, knobs
from trax_rl.agents.actor_critic import layout as layout_lib
from trax_rl.losses import actor_critic as ac_losses
from trax_rl.networks import base as networks


class ActorCritic(device_path.DevicePath, policy_agents.PolicyAgent):
  """An actor-critic: one objective on a layout of policy/value networks.

  Observation statistics (Trax's `Normalize`) are updated only while
  collecting training data (`make_policy(evaluation=False)`), before each
  action, and frozen at evaluation; training normalizes the stored raw
  observations with the current statistics.

  Subclasses (the gin names in `algorithms`) set `on_policy` and
  `layout_class` and pass their objective.
  """

  on_policy: bool | None = None
  # The network layout (`separate.Separate` or `joint.Joint`); the knobs
  # its constructor names go to it.
  layout_class: Callable[..., Any] | None = None
  # entropy_coeff when none is given (A2C and PPO: 0.01; AWR: 0, Trax's).
  default_entropy_coeff: float = 0.0
  # The policy loss takes SamplingBatches (see `layout.Context`).
  sampled_actions: bool = False

  def __init__(
    self,
    task: task_lib.RLTask,
    objective: Any,
    **kwargs,
  ):
    """Resolves old knob names and splits the layout's knobs from the rest.

    Args:
      task: the RLTask.
      objective: the algorithm's objective (`losses.actor_critic`).
      **kwargs: the layout's knobs and `configure`'s (old names in
        `knobs.ALIASES` accepted).
    """
    kwargs = knobs.resolve_aliases(kwargs)
    names = inspect.signature(self.layout_class).parameters
    layout_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
    self.configure(task, objective, layout_kwargs, **kwargs)

  @classmethod
  def parameter_names(cls) -> set[str]:
    """Every keyword the agent takes: its layout's, `configure`'s, its bases'.

    `__init__` takes them as **kwargs, which its signature does not show
    (`configurables.accepts` asks here); old names in `knobs.ALIASES` too.
    """
    names = set(knobs.ALIASES)
    inits = [k.__init__ for k in inspect.getmro(cls) if '__init__' in vars(k)]
    for fn in [cls.layout_class, cls.configure, *inits]:
      names.update(inspect.signature(fn).parameters)
    return names - {'self', 'args', 'kwargs', 'objective', 'layout_kwargs'}

  def configure(
    self,
    task: task_lib.RLTask,
    objective: Any,
    layout_kwargs: dict[str, Any],
    entropy_coeff: float | None = None,
    advantage_estimator: Callable[..., advantages.Estimator] = (
      advantages.td_lambda
    ),
    advantage_normalization: bool = True,
    advantage_normalization_epsilon: float = 1e-5,
    advantage_normalization_factor: float = 1.0,
    added_policy_slice_length: int = 0,
    n_replay_epochs: int = 1,
    max_slice_length: int = 1,
    max_gradient_norm: float | None = None,
    normalize_observations: bool = False,
    normalization_sample_limit: float = float('inf'),
    normalization_epsilon: float = 1e-5,
    normalization_clip: float | None = None,
    action_std: float = 1.0,
    learn_std: distributions.LearnStd | str | None = None,
    offline: bool = False,
    **kwargs,
  ) -> None:
    """Configures the agent (called by the constructor).

    Args:
      task: the RLTask.
      objective: the algorithm's objective.
      layout_kwargs: its knobs.
      entropy_coeff: weight of the entropy bonus (None: the class's
        `default_entropy_coeff`, 0.01 for A2C and PPO, 0 for AWR).
      advantage_estimator: a factory from trax_rl.advantages (monte_carlo,
        td_k, td_lambda, gae), called as `f(gamma=, margin=)`; for the
        value targets (values + advantages) and the policy's advantages.
      advantage_normalization: normalize advantages per minibatch (Trax's
        joint name: normalize_advantages).
      advantage_normalization_epsilon: added to their std.
      advantage_normalization_factor: multiplies normalized advantages.
      added_policy_slice_length: the advantage estimator's margin (k of
        td_k); padding steps appended to the packed trajectories.
      n_replay_epochs: train on the last this many epochs (1 for on-policy
        algorithms).
      max_slice_length: Trax's slice length; with feed-forward networks a
        batch of B slices of length L is B * L steps.
      max_gradient_norm: clip each network's gradients to this global norm.
      normalize_observations: normalize observations by running statistics.
      normalization_sample_limit: stop updating them after this many
        observations (Trax's Normalize.sample_limit).
      normalization_epsilon: added to the std when normalizing.
      normalization_clip: clip normalized observations to [-clip, clip].
      action_std: for Box actions, the Gaussian's std (or the offset of a
        learned one).
      learn_std: for Box actions, None (fixed std) or a
        `distributions.LearnStd` (or its value, 'shared' or 'separate').
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
    estimator = advantage_estimator(
      gamma=task.gamma, margin=added_policy_slice_length
    )
    self._margin = added_policy_slice_length
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
    self._update_stats = compile_options.jit(
      lambda stats, obs: normalization.update(
        stats, obs, normalization_sample_limit
      )
    )
    self._packed: dict[int, tuple[int, data_lib.EpochData]] = {}
    self._rollout_params = None  # Set on a rollout actor only.
    self._objective = objective
    if entropy_coeff is None:
      entropy_coeff = self.default_entropy_coeff
    self._entropy_coeff = entropy_coeff
    validation.check_count('max_slice_length', max_slice_length, 1)
    self._adv_norm = ac_losses.AdvantageNormalization(
      advantage_normalization,
      advantage_normalization_epsilon,
      advantage_normalization_factor,
    )
    context = layout_lib.Context(
      distribution=self._policy_dist,
      example_observation=task.example_observation(),
      action_space=space,
      gamma=task.gamma,
      on_policy=bool(self.on_policy),
      estimate=functools.partial(
        data_lib.advantages_and_targets,
        estimator,
        added_policy_slice_length,
        task.gamma,
      ),
      make_policy_loss=self.make_policy_loss,
      sampled_actions=self.sampled_actions,
      max_slice_length=max_slice_length,
      max_gradient_norm=max_gradient_norm,
      next_key=self.next_key,
    )
    self._layout = self.layout_class(context, **layout_kwargs)
    self._train = compile_options.jit(self._train_fn)

  def make_policy_loss(
    self, value_loss_coeff: float | None, all_discrete: bool
  ) -> Any:
    """The algorithm's loss on a policy (None) or a joint network."""
    del all_discrete
    return ac_losses.PolicyLoss(
      self._policy_dist,
      self._objective,
      self._entropy_coeff,
      self._adv_norm,
      value_loss_coeff,
    )

  @property
  def layout(self) -> Any:
    return self._layout

  def trainers(self) -> dict[str, Any]:
    """The layout's Trainers by name ('policy' and 'value', or 'joint')."""
    return self._layout.trainers

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
    return self._layout.acting_network

  def acting_params(self) -> Any:
    return self._layout.acting_trainer.params

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

  # Rollout actors (`trax_rl.distributed`).
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
  ) -> collection.BatchPolicy:
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
        info[data_lib.UNCLIPPED_ACTION] = action
      return policies.clip_to_space(action, space), info

    return policy

  # Data.
  def normalize_data(
    self, stats: normalization.RunningStatistics, data: data_lib.EpochData
  ) -> data_lib.EpochData:
    """data with both of its observations normalized by stats."""
    return data._replace(
      observation=self.normalize_observations(stats, data.observation),
      next_observation=self.normalize_observations(
        stats, data.next_observation
      ),
    )

  def training_data(self) -> data_lib.EpochData:
    """The stored trajectories packed (cached per epoch) and padded."""
    n_inputs = self._policy_dist.n_inputs
    parts = []
    stored = self._task.trajectories
    for epoch in sorted(stored):
      trajs = stored[epoch]
      cached = self._packed.get(epoch)
      if cached is None or cached[0] != len(trajs):
        packed = data_lib.pack_trajectories(
          trajs, n_inputs, self._task.example_observation()
        )
        cached = self._packed[epoch] = (len(trajs), packed)
      parts.append(cached[1])
    for epoch in [e for e in self._packed if e not in stored]:
      del self._packed[epoch]
    if not parts:
      raise ValueError('no trajectories to train on: collect some first')
    data = data_lib.concatenate(parts)
    if self._offline:
      n = data.action.shape[0]
      data = data._replace(
        dist_inputs=np.asarray(data.action, np.float32).reshape(n, -1)
      )
    return data_lib.pad_to_bucket(data)

  def example_training_data(self) -> data_lib.EpochData:
    """One random-policy episode packed and padded, for `compile_update`."""
    data = data_lib.pack_trajectories(
      checks.random_episode(self._task),
      self._policy_dist.n_inputs,
      self._task.example_observation(),
    )
    return data_lib.pad_to_bucket(data)

  # Training.
  def _train_fn(self, states, stats, data, idx, key):
    data = self.normalize_data(stats, data)
    return self._layout.train_on_batch(states, data, idx, key)

  def _train_args(self, data: data_lib.EpochData):
    idx = self._layout.minibatch_indices(self._rng, int(data.mask.sum()))
    key = self.next_key() if self._layout.uses_key else device_path.UNUSED_KEY
    states = {name: t.state for name, t in self.trainers().items()}
    return states, self._stats, data, idx, key

  def train_epoch(self) -> dict[str, float]:
    states, metrics = self._train(*self._train_args(self.training_data()))
    for name, state in states.items():
      self.trainers()[name].state = state
    return {k: float(v) for k, v in metrics.items()}

  def compile_update(self) -> None:
    data = self.example_training_data()
    self._train.lower(*self._train_args(data)).compile()

  def state_dict(self) -> dict[str, Any]:
    state = dict(
      super().state_dict(),
      observation_statistics=[np.asarray(x) for x in self._stats],
    )
    for name, trainer in self.trainers().items():
      state[name] = trainer.state_dict()
    return state

  def load_state_dict(self, state: dict[str, Any]) -> None:
    super().load_state_dict(state)
    self._stats = normalization.RunningStatistics(
      *[jnp.asarray(x) for x in state['observation_statistics']]
    )
    for name, trainer in self.trainers().items():
      trainer.load_state_dict(state[name])
