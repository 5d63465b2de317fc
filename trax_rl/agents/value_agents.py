"""Trax's DQN, and the exploration schedules of the value agents."""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from trax_rl import advantages, envs, lr_schedules, types, validation
from trax_rl import task as task_lib
from trax_rl.agents import program_agent
from trax_rl.algorithms import trax_dqn
from trax_rl.losses import n_step_value
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import update

Schedule = Callable[[Any], jax.Array]
# A float, or a zero-argument factory of a schedule (gin: `@multifactor`).
ExplorationRate = float | Callable[[], Schedule | float]


def trax_exploration_rate() -> Schedule:
  """Trax's default exploration rate of the epoch: max(0.1, 0.99**epoch)."""
  return lr_schedules.multifactor(
    factors='constant * decay_every',
    constant=1.0,
    decay_factor=0.99,
    steps_per_decay=1,
    minimum=0.1,
  )


def as_schedule(rate: ExplorationRate, name: str) -> Schedule:
  """A jnp-traceable `step -> rate` from a float or a schedule factory.

  Raises:
    ValueError: a constant rate outside [0, 1].
  """
  value = rate() if callable(rate) else rate
  if callable(value):
    return value
  if isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
    raise ValueError(f'{name} must be in [0, 1], got {value!r}')
  return lambda step: jnp.full((), value, jnp.float32)


def linear_epsilon(
  initial: float = 1.0, final: float = 0.05, decay_steps: int = 10_000
) -> Schedule:
  """Epsilon falling linearly from `initial` to `final` over env steps.

  Args:
    initial: epsilon at env step 0, in [0, 1].
    final: epsilon from `decay_steps` on, in [0, 1].
    decay_steps: env steps of the linear decay, >= 1.
  """
  for name, value in (('initial', initial), ('final', final)):
    if not 0.0 <= value <= 1.0:
      raise ValueError(f'linear_epsilon {name} must be in [0, 1], got {value}')
  validation.check_count('decay_steps', decay_steps, 1)
  return optax.linear_schedule(initial, final, decay_steps)


class DQN(program_agent.ProgramAgent):
  """Trax's DQN: n-step Q-learning on slices of the last epochs' trajectories.

  Mnih et al., 2015, "Human-level control through deep reinforcement
  learning", as Trax runs it: collection and learning alternate by epoch;
  each epoch trains `value_train_steps_per_epoch` updates on batches of
  `max_slice_length` slices drawn from the last `n_replay_epochs` epochs;
  targets come from `advantage_estimator` (td_k: n-step with n = margin =
  max_slice_length - 1) over target-network values, inside the jitted loss.
  As in Trax, the target network takes the params at the start of every
  epoch's training, and after it if the update count is a multiple of
  `sync_freq` (`sync_within_epoch` syncs every `sync_freq` updates as they
  run instead); it explores only at temperature 1; as Trax's, slices lie
  inside their trajectory, so a trajectory's last `margin` steps get no
  target (`train_final_steps` trains them). The whole epoch is
  `algorithms.trax_dqn.TraxDQNProgram`, on every source.
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    advantage_estimator: Callable[..., advantages.Estimator] = (
      advantages.td_k
    ),
    max_slice_length: int = 2,
    margin: int | None = None,
    smoothl1loss: bool = True,
    double_dqn: bool = False,
    value_batch_size: int = 64,
    value_train_steps_per_epoch: int = 500,
    n_replay_epochs: int = 1,
    scale_value_targets: bool = True,
    value_evals_per_epoch: int = 1,
    value_eval_steps: int = 1,
    sync_each_epoch: bool = True,
    value_model: Callable[..., nn.Module] = models.Quality,
    value_body: Callable[[], nn.Module] | None = None,
    value_optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    value_lr_schedule: Callable[[], Schedule | float] = (
      lr_schedules.constant_lr
    ),
    max_gradient_norm: float | None = None,
    exploration_rate: ExplorationRate = trax_exploration_rate,
    sync_freq: int = 1000,
    sync_within_epoch: bool = False,
    train_final_steps: bool = False,
    **kwargs,
  ):
    """Configures DQN.

    Args:
      task: the RLTask (Discrete actions).
      advantage_estimator: estimator factory called as `(gamma=, margin=)`,
        e.g. `@td_k`; the margin is max_slice_length - 1. Default `td_k`,
        not Trax's `monte_carlo` (see max_slice_length).
      max_slice_length: length of the trajectory slices; the first
        max_slice_length - margin steps of each get a target. Default 2,
        not Trax's 1: with Trax's defaults (monte_carlo, 1, margin 0) its
        DQN builds its targets as `values[:, :-0]`, empty, so its loss is
        NaN with a zero gradient and it never learns; here they would
        train on each step's Monte Carlo return. Trax's regression config
        binds td_k and 2, the defaults here.
      margin: steps at the end of each slice that only serve the targets
        (td_k's n); None: max_slice_length - 1, Trax's, one target per
        slice. A smaller margin gives several targets per slice, so fewer
        slices (the costly part of a batch) are needed per update.
      smoothl1loss: Huber loss if True, else squared (Trax's L2Loss).
      double_dqn: double Q-learning targets (van Hasselt et al., 2016).
      value_batch_size: slices per update.
      value_train_steps_per_epoch: updates per epoch.
      n_replay_epochs: replay = trajectories of the last this many epochs,
        at most `RLTask.n_replay_epochs + 1` (Trax's: the task keeps no
        more).
      scale_value_targets: the network predicts Q * (1 - gamma), so that its
        outputs stay near [-1, 1] whatever the reward scale (Trax's).
      value_evals_per_epoch: the epoch's updates run in this many equal
        rounds, each followed by an evaluation of the loss metrics on
        `value_eval_steps` fresh batches (Trax's; only affects the
        `value_eval/` metrics of the epoch record).
      value_eval_steps: batches per evaluation; 0 turns evaluation off.
      sync_each_epoch: copy the params into the target network before each
        epoch's updates (Trax's DQN does, so that the target lags at most
        one epoch whatever `sync_freq` says); False: every `sync_freq`
        updates only.
      value_model: builds the Q module as `value_model(n_actions=...)`
        (plus `body=value_body` if given); its apply returns a QOutput.
        `models.Quality`, `CategoricalQuality` or `QuantileQuality`.
      value_body: optional body factory for value_model (gin: `@MLP`).
      value_optimizer: optax factory called as `(learning_rate=...)`.
      value_lr_schedule: zero-argument factory of a learning rate or a
        schedule of the update number (gin: `@constant_lr`, `@multifactor`).
      max_gradient_norm: clip gradients to this global norm (None: off).
      exploration_rate: epsilon of the epsilon-greedy policy at temperature
        1 (Trax's: other temperatures act greedily): a float, or a
        zero-argument factory of a schedule of the epoch.
      sync_freq: with `sync_within_epoch`, copy the params into the target
        network every this many updates; without (Trax's), after an epoch
        whose updates so far are a multiple of it.
      sync_within_epoch: sync during the epoch's updates, not only at its
        boundaries (not Trax's; `gin/dqn_cartpole.gin` was measured with
        it).
      train_final_steps: also draw slices that start in a trajectory's
        last `margin` steps, padded past its end (the final observation,
        then zeros; mask 0, done True), so that every step, the terminal
        one included, gets a target. False (Trax's, whose slices lie inside
        their trajectory): those steps never get one, so a terminal
        reward never reaches the Q-values (`gin/dqn_cartpole.gin` sets it).
        Either way a trajectory shorter than a slice is padded to it (mask
        0) and its first step trains; Trax pads such batches to a power of
        two rows with mask 1, which trains more rows or none
        (docs/trax_migration.md).
      **kwargs: for `ProgramAgent` (n_interactions_per_epoch,
        n_eval_episodes, seed, output_dir...).

    Raises:
      ValueError: on a bad argument or a non-Discrete action space.
    """
    self._n_actions = envs.require_discrete(
      task.action_space, type(self).__name__
    )
    validation.check_count('sync_freq', sync_freq, 1)
    validation.check_count('max_slice_length', max_slice_length, 1)
    margin = max_slice_length - 1 if margin is None else margin
    validation.check_count('margin', margin, 0)
    if margin >= max_slice_length:
      raise ValueError(
        f'margin ({margin}) must be < max_slice_length ({max_slice_length})'
      )
    validation.check_count('value_batch_size', value_batch_size, 1)
    validation.check_count(
      'value_train_steps_per_epoch', value_train_steps_per_epoch, 1
    )
    validation.check_count('n_replay_epochs', n_replay_epochs, 1)
    validation.check_evals(
      'value',
      value_train_steps_per_epoch,
      value_evals_per_epoch,
      value_eval_steps,
    )
    super().__init__(task, **kwargs)
    module_kwargs = {'n_actions': self._n_actions}
    if value_body is not None:
      module_kwargs['body'] = value_body
    self._network = networks.from_module(
      value_model(**module_kwargs), task.example_observation()
    )
    self._optimizer = update.make_optimizer(
      value_lr_schedule(), value_optimizer, max_gradient_norm
    )
    self._exploration = as_schedule(exploration_rate, 'exploration_rate')
    gamma = task.gamma
    scale = 1.0 / (1.0 - gamma) if scale_value_targets and gamma < 1 else 1.0
    self._loss = n_step_value.NStepValueLoss(
      advantage_estimator=advantage_estimator(gamma=gamma, margin=margin),
      margin=margin,
      obs_ndim=len(task.observation_space.shape),
      double_dqn=double_dqn,
      smoothl1loss=smoothl1loss,
      value_scale=scale,
    )
    self._knobs = dict(
      # Trax's task keeps n + 1 epochs, and the DQN samples among those.
      n_replay_epochs=min(n_replay_epochs, task.n_replay_epochs + 1),
      batch_size=value_batch_size,
      slice_length=max_slice_length,
      margin=margin,
      train_steps=value_train_steps_per_epoch,
      evals_per_epoch=value_evals_per_epoch,
      eval_steps=value_eval_steps,
      sync_freq=sync_freq,
      sync_each_epoch=bool(sync_each_epoch),
      sync_within_epoch=bool(sync_within_epoch),
      train_final_steps=bool(train_final_steps),
    )

  def make_program(self, n_envs: int):
    return trax_dqn.TraxDQNProgram(
      network=self._network,
      loss_fn=self._loss,
      optimizer=self._optimizer,
      exploration=self._exploration,
      n_steps=self.max_rollout_steps(),
      **self._program_context(n_envs),
      **self._knobs,
    ).program()

  network = types.read_only('_network')

  n_actions = types.read_only('_n_actions')

  def exploration_rate(self) -> float:
    """Trax's `schedule(epoch)`: the epsilon the last epoch collected with
    (temperature > 0); the next epoch collects with `schedule(epoch + 1)`."""
    return float(self._exploration(int(self.learner.epoch)))
