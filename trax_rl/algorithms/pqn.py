"""PQN, parallelised Q-learning, as one program.

Gallici et al., 2024, "Simplifying Deep Temporal Difference Learning"
(arXiv:2407.04811; code: github.com/mttga/purejaxql). No replay buffer and
no target network: a Q network with LayerNorm learns from the last rollout
of many envs, towards Q(lambda) returns of its own online estimates.

- `act`: epsilon-greedy on the Q network, epsilon decaying linearly with
  the env steps taken so far (read when the rollout starts); greedy at
  temperature 0.
- `observe`: the rollout's lambda-returns, computed backwards with the
  current parameters (those that acted), kept with the observations and
  actions as the learner's store (the last rollout only).
- `learn`: `n_passes` passes over the stored steps, each shuffled into
  `n_minibatches` minibatches, one update each: squared loss of Q(o, a)
  to the return; RAdam (or any optax optimizer) after global-norm
  clipping, the learning rate annealed linearly to 0 over the run.

Where trax_rl's data differ from purejaxql's, the returns follow trax_rl:
a termination stops the bootstrap, a truncation (a time limit, and each
env's last valid step of the rollout) bootstraps from the final
observation, and steps that are not `valid` take no part.
"""

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from trax_rl import envs, policies, types, validation
from trax_rl.algorithms import program as program_lib
from trax_rl.device import rollout as rollout_lib
from trax_rl.losses import value_estimates
from trax_rl.networks import base as networks
from trax_rl.networks import models
from trax_rl.supervised import train_state as train_state_lib
from trax_rl.supervised import update as update_lib


class Steps(NamedTuple):
  """The stored rollout, `[T, N, ...]` (or `[B, ...]` in a minibatch)."""

  observation: Any  # o_t
  action: Any  # int32 a_t
  target: Any  # float32, the lambda-return of (o_t, a_t)
  valid: Any  # bool, the step takes part in the loss


class PQNLearner(NamedTuple):
  """What PQN trains and carries from rollout to rollout."""

  train: train_state_lib.TrainState
  steps: Steps  # [T, N, ...] the last rollout, with its targets
  env_steps: Any  # [] int32, env steps of the training policy so far


def q_loss(
  network: networks.Network,
  params: Any,
  target_params: Any,
  batch: Steps,
  key: jax.Array,
) -> tuple[jax.Array, types.LossExtra]:
  """0.5 (Q(o, a) - G)^2, averaged over the valid steps of `batch` `[B]`."""
  del target_params, key  # No target network; deterministic.
  q = network.apply(params, batch.observation)  # [B, A]
  q_a = jnp.take_along_axis(q, batch.action[:, None], axis=-1)[:, 0]
  weight = batch.valid.astype(jnp.float32)
  count = jnp.maximum(jnp.sum(weight), 1.0)
  loss = 0.5 * jnp.sum(weight * jnp.square(q_a - batch.target)) / count
  metrics = {
    'q_mean': jnp.sum(weight * q_a) / count,
    'target_mean': jnp.sum(weight * batch.target) / count,
  }
  return loss, types.LossExtra(metrics)


@dataclasses.dataclass(frozen=True)
class PQNProgram:
  """PQN's pure functions for one spec (see the module docstring).

  Attributes:
    knobs: the family's knobs.
    spec: what the program is built for.
    network: the Q network.
    optimizer: clipping, then the optimizer on the annealed schedule.
    schedule: 1-based update number -> learning rate.
  """

  knobs: 'PQN'
  spec: program_lib.Spec
  network: networks.Network
  optimizer: optax.GradientTransformation
  schedule: Callable[[Any], Any]

  def epsilon(self, env_steps: jax.Array) -> jax.Array:
    """Linear from epsilon_start to epsilon_finish, then constant."""
    k = self.knobs
    decay = max(1, int(k.epsilon_decay_fraction * k.total_env_steps))
    left = jnp.clip(1.0 - env_steps / decay, 0.0, 1.0)
    return k.epsilon_finish + (k.epsilon_start - k.epsilon_finish) * left

  def init(self, key: jax.Array) -> PQNLearner:
    """Fresh parameters and an empty (all invalid) store."""
    spec = self.spec
    space = spec.observation_space
    shape = (spec.n_steps, spec.n_envs)
    steps = Steps(
      observation=np.zeros(shape + space.shape, space.dtype),
      action=np.zeros(shape, np.int32),
      target=np.zeros(shape, np.float32),
      valid=np.zeros(shape, bool),
    )
    return PQNLearner(
      train=update_lib.init_state(self.network, self.optimizer, key),
      steps=steps,
      env_steps=np.zeros((), np.int32),
    )

  def act(self, learner: PQNLearner, key, obs, temperature: float):
    """Epsilon-greedy at temperature > 0, greedy at 0."""
    q = self.network.apply(learner.train.params, obs)
    if temperature == 0:
      return jnp.argmax(q, axis=-1), {}
    epsilon = self.epsilon(learner.env_steps)
    return policies.epsilon_greedy(q, key, epsilon), {}

  def observe(
    self, learner: PQNLearner, rollout: rollout_lib.Rollout
  ) -> PQNLearner:
    """Stores the rollout with its lambda-returns (the module docstring)."""
    n_steps = rollout.reward.shape[0]
    if n_steps > self.spec.n_steps:
      raise ValueError(
        f"a rollout of {n_steps} steps, longer than the spec's "
        f'n_steps={self.spec.n_steps}'
      )
    pad = lambda x: jnp.pad(
      x, [(0, self.spec.n_steps - n_steps)] + [(0, 0)] * (x.ndim - 1)
    )
    r = jax.tree.map(pad, rollout)
    next_obs = r.next_observation
    flat = next_obs.reshape((-1,) + next_obs.shape[2:])
    q_next = self.network.apply(learner.train.params, flat)
    q_next = jnp.max(q_next, axis=-1).reshape(r.reward.shape)
    targets = value_estimates.q_lambda_returns(
      r.reward * self.knobs.reward_scale,
      r.terminated,
      value_estimates.cut_steps(r.truncated, r.valid),
      q_next,
      self.spec.gamma,
      self.knobs.lambda_,
    )
    store = learner.steps
    steps = Steps(
      observation=r.observation.astype(store.observation.dtype),
      action=r.action.astype(jnp.int32),
      target=targets,
      valid=r.valid.astype(bool),
    )
    return learner._replace(
      steps=steps,
      env_steps=learner.env_steps + jnp.sum(r.valid, dtype=jnp.int32),
    )

  def minibatch_size(self) -> int:
    """B: the stored steps, T * N, over n_minibatches (rounded up)."""
    size = self.spec.n_steps * self.spec.n_envs
    return -(-size // self.knobs.n_minibatches)

  def learn(self, learner: PQNLearner, key: jax.Array):
    """n_passes shuffled passes of minibatch updates over the store."""
    n_batches, batch_size = self.knobs.n_minibatches, self.minibatch_size()
    size = n_batches * batch_size
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), learner.steps)
    # Padding up to n_minibatches * B: steps that are not valid.
    flat = jax.tree.map(
      lambda x: jnp.pad(x, [(0, size - len(x))] + [(0, 0)] * (x.ndim - 1)),
      flat,
    )
    update = update_lib.make_update_fn(
      self.network, q_loss, self.optimizer, axis_name=self.spec.axis_name
    )

    def minibatch(train, batch):
      new, extra = update(train, batch)
      # A minibatch of padding alone updates nothing, not even Adam's
      # moments or the schedule's count. Across hosts all or none update.
      used = jnp.any(batch.valid)
      if self.spec.axis_name is not None:
        used = jax.lax.pmax(used.astype(jnp.int32), self.spec.axis_name) > 0
      train = jax.tree.map(lambda n, o: jnp.where(used, n, o), new, train)
      return train, (extra.metrics, used)

    def one_pass(train, key):
      # Valid steps first, in a random order: only the last minibatches
      # hold padding.
      noise = jax.random.uniform(key, (size,))
      order = jnp.argsort(jnp.where(flat.valid, noise, 2.0))
      batches = jax.tree.map(
        lambda x: x[order].reshape((n_batches, batch_size) + x.shape[1:]),
        flat,
      )
      return jax.lax.scan(minibatch, train, batches)

    keys = jax.random.split(key, self.knobs.n_passes)
    train, (metrics, used) = jax.lax.scan(one_pass, learner.train, keys)
    n_updates = jnp.sum(used, dtype=jnp.int32)
    means = {
      k: jnp.sum(jnp.where(used, v, 0.0)) / jnp.maximum(n_updates, 1)
      for k, v in metrics.items()
    }
    learner = learner._replace(train=train)
    record = dict(
      means,
      n_updates=n_updates,
      sgd_steps=train.step,
      env_steps=learner.env_steps,
      epsilon=self.epsilon(learner.env_steps),
      learning_rate=self.schedule(jnp.maximum(train.step, 1)),
    )
    return learner, {f'pqn/{k}': v for k, v in record.items()}

  def acting(self, learner: PQNLearner) -> PQNLearner:
    """The learner without its store (what `act` reads)."""
    return learner._replace(steps=())

  def program(self) -> program_lib.Program:
    return program_lib.Program.of(self)


@dataclasses.dataclass(frozen=True)
class PQN:
  """Parallelised Q-learning (PQN; Gallici et al., 2024, arXiv:2407.04811).

  Many envs side by side, a Q network with LayerNorm, Q(lambda) returns
  of the online network (no target network), no replay buffer: each
  epoch's rollout is learned from in `n_passes` passes of `n_minibatches`
  updates, then dropped. Defaults are purejaxql's MinAtar config
  (`config/alg/pqn_minatar.yaml`, adapted from its Atari config), but
  for the network: `pqn_gymnax.py`'s MLP, which takes any observation;
  the gin configs say where theirs come from. The rollout is
  `n_interactions_per_epoch / RLTask.n_envs` steps of `RLTask.n_envs` envs
  (purejaxql's NUM_STEPS x NUM_ENVS: 32 x 128 on MinAtar and Atari).
  Discrete actions only.

  Attributes:
    layer_widths: widths of the Q network's hidden Dense layers, each
      followed by LayerNorm and ReLU. Paper: (128, 128) on gymnax, (256,
      256) on CartPole, (128,) after MinAtar's conv.
    conv_channels: if > 0, a 3x3 conv of this many filters first (then
      LayerNorm, ReLU): MinAtar's torso, for `[H, W, C]` frames. Paper:
      16 on MinAtar, 0 (no conv) on gymnax's vector observations.
    layer_norm: LayerNorm after each hidden layer. Paper: True (its
      ablations drop it).
    lambda_: the Q(lambda) trace decay. Paper: 0.65 (Atari, MinAtar), 0.95
      (CartPole).
    n_passes: passes over each rollout per epoch (purejaxql's NUM_EPOCHS).
      Paper: 2 (Atari, MinAtar), 4 (CartPole).
    n_minibatches: minibatches per pass, each of T * N / n_minibatches
      steps (rounded up; padding takes no part). Paper: 32 (Atari,
      MinAtar), 16 (CartPole).
    learning_rate: the initial learning rate. Paper: 5e-4 (MinAtar),
      2.5e-4 (Atari), 1e-4 (CartPole).
    optimizer: the optax optimizer, called as `optimizer(learning_rate=)`.
      Default RAdam, as every purejaxql PQN config (`@adam` for Adam).
    max_gradient_norm: gradients are clipped to this global norm first.
      Paper: 10.
    anneal_lr: the learning rate falls linearly to 0 over the updates of
      `total_env_steps` (purejaxql's LR_LINEAR_DECAY; after them it stays
      0). Paper: True (MinAtar, CartPole), False (Atari).
    total_env_steps: the run's env steps per seed (`train_rl.n_epochs *
      n_interactions_per_epoch`), the horizon of the epsilon decay and the
      learning-rate anneal (purejaxql's TOTAL_TIMESTEPS_DECAY). Paper: 1e7
      (MinAtar, Atari), 5e5 (CartPole).
    epsilon_start: exploration rate at the first env step. Paper: 1.
    epsilon_finish: exploration rate after the decay. Paper: 0.05
      (MinAtar), 0.001 (Atari), 0.2 (CartPole).
    epsilon_decay_fraction: the fraction of `total_env_steps` over which
      epsilon decays linearly. Paper: 0.1 (MinAtar, Atari), 0.2
      (CartPole).
    reward_scale: rewards are multiplied by this in the returns
      (purejaxql's REW_SCALE). Paper: 1, 0.1 on CartPole.
  """

  layer_widths: tuple[int, ...] = (128, 128)
  conv_channels: int = 0
  layer_norm: bool = True
  lambda_: float = 0.65
  n_passes: int = 2
  n_minibatches: int = 32
  learning_rate: float = 5e-4
  optimizer: Callable[..., optax.GradientTransformation] = optax.radam
  max_gradient_norm: float = 10.0
  anneal_lr: bool = True
  total_env_steps: int = 10_000_000
  epsilon_start: float = 1.0
  epsilon_finish: float = 0.05
  epsilon_decay_fraction: float = 0.1
  reward_scale: float = 1.0

  def __post_init__(self):
    widths = self.layer_widths
    if not (isinstance(widths, Sequence) and widths):
      raise ValueError(
        f'layer_widths must be a non-empty tuple of widths, got {widths!r}'
      )
    for width in widths:
      validation.check_count('layer_widths', width, 1)
    validation.check_count('conv_channels', self.conv_channels, 0)
    validation.check_unit('lambda_', self.lambda_)
    validation.check_count('n_passes', self.n_passes, 1)
    validation.check_count('n_minibatches', self.n_minibatches, 1)
    validation.check_positive('learning_rate', self.learning_rate)
    if not callable(self.optimizer):
      raise ValueError(
        f'optimizer must be an optax optimizer (@adam), got {self.optimizer!r}'
      )
    validation.check_positive('max_gradient_norm', self.max_gradient_norm)
    validation.check_count('total_env_steps', self.total_env_steps, 1)
    validation.check_unit('epsilon_start', self.epsilon_start)
    validation.check_unit('epsilon_finish', self.epsilon_finish)
    validation.check_unit('epsilon_decay_fraction', self.epsilon_decay_fraction)
    validation.check_positive('reward_scale', self.reward_scale)

  def program(self, spec: program_lib.Spec) -> program_lib.Program:
    """PQN's program for `spec`.

    Raises:
      ValueError: a non-Discrete action space, a conv torso on
        observations that are not `[H, W, C]`, or more minibatches than
        steps in a rollout.
    """
    n_actions = envs.require_discrete(spec.action_space, 'PQN')
    shape = spec.observation_space.shape
    if self.conv_channels and len(shape) != 3:
      raise ValueError(
        f'conv_channels={self.conv_channels} needs [H, W, C] observations, '
        f'got shape {shape}: set PQN.conv_channels = 0'
      )
    per_rollout = spec.n_steps * spec.n_envs
    if self.n_minibatches > per_rollout:
      raise ValueError(
        f'n_minibatches must be <= the steps of a rollout ({per_rollout}), '
        f'got {self.n_minibatches}'
      )
    module = models.LayerNormQNetwork(
      n_actions, tuple(self.layer_widths), self.conv_channels, self.layer_norm
    )
    example = np.zeros(shape, spec.observation_space.dtype)
    n_updates = (
      max(1, self.total_env_steps // per_rollout)
      * self.n_passes
      * self.n_minibatches
    )
    schedule = (
      # Update k (1-based) gets lr * (1 - (k - 1) / n_updates).
      optax.linear_schedule(self.learning_rate, 0.0, n_updates, 1)
      if self.anneal_lr
      else optax.constant_schedule(self.learning_rate)
    )
    return PQNProgram(
      knobs=self,
      spec=spec,
      network=networks.from_module(module, example),
      optimizer=update_lib.make_optimizer(
        schedule, self.optimizer, self.max_gradient_norm
      ),
      schedule=schedule,
    ).program()
