"""ReplayValueAgent: the Acme value learners, any loss, on a replay table.

The agent is a constructor: it checks its knobs and configures the value
program (`algorithms.value`), which every source runs the same way.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import optax

from trax_rl import envs, types, validation
from trax_rl import task as task_lib
from trax_rl.agents import program_agent, value_agents
from trax_rl.algorithms import n_step
from trax_rl.algorithms import value as value_lib
from trax_rl.losses import q_learning
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.replay import device_table, rate_limiter, samplers
from trax_rl.supervised import update

LearningRate = float | Callable[[], Any]
_DQN_LOSS = q_learning.QLearning()


class ReplayValueAgent(program_agent.ProgramAgent):
  """A value learner on a Reverb-like replay table, any Acme-family loss.

  Each epoch: collect `n_interactions_per_epoch` env steps epsilon-greedily,
  turn them into n-step transitions, insert them into the table and learn
  while its rate limiter lets `batch_size * num_sgd_steps_per_step` items
  be sampled (about `samples_per_insert` samples per inserted item once
  `min_replay_size` items are in). Each learner call runs
  `num_sgd_steps_per_step` updates in one `lax.scan`. Losses that return
  priorities (the prioritized ones) get a prioritized table and have their
  priorities written back. A new item's priority is 1.0, as Acme's adders
  insert it, whether or not the table is prioritized. The whole epoch is
  `algorithms.value.ValueProgram`, on every source.
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    model_fn: Callable[..., nn.Module] = models.Quality,
    loss_fn: types.LossFn = _DQN_LOSS,
    batch_size: int = 256,
    n_step: int = 5,
    min_replay_size: int = 1_000,
    max_replay_size: int = 1_000_000,
    samples_per_insert: float = 32.0,
    samples_per_insert_tolerance_rate: float = 0.0,
    priority_exponent: float = 0.6,
    target_update_period: int = 100,
    epsilon: value_agents.ExplorationRate = 0.05,
    num_sgd_steps_per_step: int = 1,
    max_gradient_norm: float | None = None,
    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    learning_rate: LearningRate = 5e-4,
    value_eval_steps: int = 1,
    **kwargs,
  ):
    """Configures the learner (defaults: Acme's DQNConfig).

    Args:
      task: the RLTask (Discrete actions); its gamma discounts the items.
      model_fn: builds the Q module as `model_fn(n_actions=...)`: Quality
        (optionally dueling), CategoricalQuality (num_atoms, v_min, v_max)
        or QuantileQuality, with `body` bound in gin (MLP or ConvTorso).
      loss_fn: a `q_learning` or `distributional` loss, e.g.
        `@PrioritizedDoubleQLearning()`.
      batch_size: items per update.
      n_step: n of the n-step transitions.
      min_replay_size: no learning before the table holds this many items.
      max_replay_size: table capacity (oldest items leave first).
      samples_per_insert: items sampled per item inserted (> 0), Reverb's
        SampleToInsertRatio; updates per env step = this / batch_size.
      samples_per_insert_tolerance_rate: allowed relative deviation of the
        sample-to-insert ratio (Acme's), as a fraction of
        samples_per_insert * min_replay_size; the limiter's window always
        holds at least one insert chunk and one learner call.
      priority_exponent: alpha of prioritized sampling (prioritized losses).
      target_update_period: sync the target network every this many updates.
      epsilon: exploration rate at temperature > 0: a float or a
        zero-argument factory of a schedule of env steps (gin:
        `@linear_epsilon`).
      num_sgd_steps_per_step: updates fused into one jitted call.
      max_gradient_norm: clip gradients to this global norm (None: off).
      optimizer: optax factory called as `optimizer(learning_rate=...)`.
      learning_rate: a float or a zero-argument factory of a schedule of the
        update number.
      value_eval_steps: after each epoch's learning, the loss metrics of this
        many uniform batches of the epoch's new items (not trained on, the
        table untouched) go into the epoch record as `value_eval/`; 0 turns
        it off. Updates per epoch follow the rate limiter, so Trax's
        `value_evals_per_epoch` has no meaning here.
      **kwargs: for `ProgramAgent`: n_interactions_per_epoch (or
        n_trajectories_per_epoch), n_eval_episodes, seed, output_dir...

    Raises:
      ValueError: on a bad argument or a non-Discrete action space.
    """
    self._n_actions = envs.require_discrete(
      task.action_space, type(self).__name__
    )
    for name, value, minimum in (
      ('batch_size', batch_size, 1),
      ('n_step', n_step, 1),
      ('min_replay_size', min_replay_size, 1),
      ('max_replay_size', max_replay_size, 1),
      ('num_sgd_steps_per_step', num_sgd_steps_per_step, 1),
      ('value_eval_steps', value_eval_steps, 0),
      ('target_update_period', target_update_period, 1),
    ):
      validation.check_count(name, value, minimum)
    if min_replay_size > max_replay_size:
      raise ValueError(
        f'min_replay_size ({min_replay_size}) must not exceed '
        f'max_replay_size ({max_replay_size})'
      )
    validation.check_positive('samples_per_insert', samples_per_insert)
    validation.check_non_negative(
      'samples_per_insert_tolerance_rate', samples_per_insert_tolerance_rate
    )
    super().__init__(task, **kwargs)
    lr = learning_rate() if callable(learning_rate) else learning_rate
    self._optimizer = update.make_optimizer(lr, optimizer, max_gradient_norm)
    self._network = self._make_network(model_fn(n_actions=self._n_actions))
    self._loss_fn = loss_fn
    self._exploration = value_agents.as_schedule(epsilon, 'epsilon')
    self._n_step = n_step
    self._batch_size = batch_size
    self._num_sgd = num_sgd_steps_per_step
    self._target_update_period = target_update_period
    self._value_eval_steps = value_eval_steps
    self._prioritized = self._returns_priorities()
    per_call = batch_size * num_sgd_steps_per_step
    self._table = device_table.DeviceTable(
      max_replay_size,
      samplers.Prioritized(priority_exponent)
      if self._prioritized
      else samplers.Uniform(),
      min_size_to_sample=min_replay_size,
      samples_per_insert=samples_per_insert,
      error_buffer=rate_limiter.limiter_bounds(
        samples_per_insert,
        min_replay_size,
        samples_per_insert_tolerance_rate,
        per_call,
        self._insert_chunk_size(),
      ),
    )
    self._check_fits()

  # What a replay learner specializes.
  def _make_network(self, module: nn.Module) -> networks.Network:
    return networks.from_module(module, self._task.example_observation())

  def _insert_rows(self, n_steps: int, n_envs: int) -> int:
    """The rows one insert of a rollout of `[n_steps, n_envs]` writes."""
    return (n_steps + self._n_step - 1) * n_envs

  def _insert_chunk_size(self) -> int:
    """Items inserted between two learning phases (an epoch's worth)."""
    task = self._task
    if self._n_interactions_per_epoch is None:
      return 1024 + task.n_envs * self._n_step
    per_epoch = -(-self._n_interactions_per_epoch // task.n_envs) * task.n_envs
    return per_epoch + task.n_envs * self._n_step

  def _check_fits(self) -> None:
    """Raises ValueError if one epoch's insert exceeds the replay."""
    if self._n_interactions_per_epoch is None:
      return
    task = self._task
    n_steps = -(-self._n_interactions_per_epoch // task.n_envs)
    rows = self._insert_rows(n_steps, task.n_envs)
    if rows > self._table.max_size:
      raise ValueError(
        f'one epoch of n_interactions_per_epoch={self._n_interactions_per_epoch} '
        f'({n_steps} steps of {task.n_envs} envs) inserts up to {rows} items '
        f'at once, more than max_replay_size ({self._table.max_size})'
      )

  def _example_item(self) -> Any:
    """One replay item, for shapes (no batch axis)."""
    return n_step.transition_like(self._task.example_observation())

  def _returns_priorities(self) -> bool:
    """Whether the loss returns priorities (traced once, nothing run)."""
    state = jax.eval_shape(
      lambda key: update.init_state(
        self._network, self._optimizer, key, target=True
      ),
      jax.random.PRNGKey(0),
    )
    batch = types.Batch(
      jax.tree.map(
        lambda x: jax.ShapeDtypeStruct((self._batch_size, *x.shape), x.dtype),
        self._example_item(),
      ),
      jax.ShapeDtypeStruct((self._batch_size,), 'float32'),
    )
    _, extra = jax.eval_shape(
      lambda t, b: self._loss_fn(
        self._network, t.params, t.target_params, b, t.key
      ),
      state,
      batch,
    )
    return extra.priorities is not None

  def act_as_rollout_actor(
    self, slot: int, n_slots: int, epsilon: float
  ) -> None:
    """A stream actor explores at its own Ape-X rate (`epsilon`)."""
    del slot, n_slots
    self._exploration = value_agents.as_schedule(float(epsilon), 'epsilon')
    self._program = None

  def make_program(self, n_envs: int):
    return value_lib.ValueProgram(
      network=self._network,
      loss_fn=self._loss_fn,
      optimizer=self._optimizer,
      table=self._table,
      exploration=self._exploration,
      n_step=self._n_step,
      batch_size=self._batch_size,
      num_sgd_steps_per_step=self._num_sgd,
      target_update_period=self._target_update_period,
      prioritized=self._prioritized,
      value_eval_steps=self._value_eval_steps,
      **self._program_context(n_envs),
    ).program()

  # Views.
  network = types.read_only('_network')

  loss_fn = types.read_only('_loss_fn')

  table = types.read_only('_table')

  n_actions = types.read_only('_n_actions')

  prioritized = types.read_only('_prioritized')

  @property
  def env_steps(self) -> int:
    """Env steps taken by the training policy (the epsilon schedule's step)."""
    return int(self.learner.env_steps)

  @property
  def train_state(self) -> Any:
    return self.learner.train
