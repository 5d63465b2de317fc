"""The one actor-critic agent: a layout's epoch as a program.

`ActorCritic` configures the actor-critic program
(`algorithms.actor_critic.ActorCriticProgram`): the algorithm is its
objective (`losses.actor_critic`), the network layout (`separate.Separate`
or `joint.Joint`) a choice; acting, observation normalization, packing
and minibatches are the program's, the same on every source.
"""

import functools
import inspect
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from trax_rl import advantages, distributions, normalization, types, validation
from trax_rl import task as task_lib
from trax_rl.agents import program_agent
from trax_rl.agents.actor_critic import knobs
from trax_rl.algorithms import actor_critic as ac_program
from trax_rl.algorithms.layouts import data as data_lib
from trax_rl.algorithms.layouts import layout as layout_lib
from trax_rl.losses import actor_critic as ac_losses


class ActorCritic(program_agent.ProgramAgent):
  """An actor-critic: one objective on a layout of policy/value networks.

  Observation statistics (Trax's `Normalize`) are updated from each
  collected rollout and frozen at evaluation; training normalizes the
  stored raw observations with the current statistics.

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
    super().__init__(task, **kwargs)
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
    self._normalization = dict(
      normalize=normalize_observations,
      sample_limit=normalization_sample_limit,
      norm_epsilon=normalization_epsilon,
      norm_clip=normalization_clip,
    )
    self._n_replay_epochs = n_replay_epochs
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
    )
    self._layout = self.layout_class(context, **layout_kwargs)

  def make_program(self, n_envs: int):
    padded = (
      self._n_trajectories_per_epoch is not None
      or self._collector is not None
      or self._n_replay_epochs > 1
    )
    return ac_program.ActorCriticProgram(
      layout=self._layout,
      distribution=self._policy_dist,
      example_observation=self._task.example_observation(),
      n_envs=n_envs,
      n_steps=self.max_rollout_steps(),
      n_replay_epochs=self._n_replay_epochs,
      offline=self._offline,
      padded=padded,
      **self._normalization,
    ).program()

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

  layout = types.read_only('_layout')

  policy_distribution = types.read_only('_policy_dist')

  @property
  def observation_statistics(self) -> normalization.RunningStatistics:
    return self.learner.stats
