"""Off-policy actor-critics for Box actions (SAC, TD3) as one program.

The replay and the acting are the family's; what an update does is each
algorithm's `Rule` (`algorithms.sac`, `algorithms.td3`):

- `act`: the rule's exploring action (a tanh-squashed sample or the
  deterministic action plus noise) at temperature > 0, uniform random
  actions for the first `learning_starts` env steps, the rule's greedy
  action at 0; actions live in [-1, 1] inside and are scaled to the env's
  bounds on the way out.
- `observe`: each valid step of the `[T, N]` rollout becomes one
  transition (its action mapped back to [-1, 1]; a termination stops the
  bootstrap, a truncation bootstraps from the final observation) in a
  uniform `DeviceTable`.
- `learn`: updates of `batch_size` items while the table's rate limiter
  allows (about `updates_per_step` updates per env step once
  `learning_starts` items are in: SB3's `train_freq=1`, `gradient_steps`).

The learner is an `OffPolicyLearner` pytree (actor, twin critic and
temperature train states, replay, counters): it checkpoints as numpy
leaves and vmaps over seeds, on every source.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax

from trax_rl import types, validation
from trax_rl.algorithms import program as program_lib
from trax_rl.device import batched_loop
from trax_rl.device import rollout as rollout_lib
from trax_rl.networks import base as networks
from trax_rl.networks import continuous
from trax_rl.replay import device_table, rate_limiter, samplers
from trax_rl.supervised import train_state as train_state_lib
from trax_rl.supervised import update as update_lib


class OffPolicyLearner(NamedTuple):
  """What an off-policy actor-critic trains and carries between rollouts."""

  actor: train_state_lib.TrainState
  critic: train_state_lib.TrainState  # twin critics; target = Polyak copy
  temperature: Any  # SAC's log-alpha TrainState; () where there is none
  replay: device_table.DeviceReplay
  env_steps: Any  # [] int32, env steps of the training policy so far


Nets = tuple[Any, Any, Any]  # (actor, critic, temperature) train states


class Rule(Protocol):
  """One algorithm's networks and update, for `OffPolicyProgram`."""

  def init(self, key: jax.Array) -> Nets: ...

  def explore(self, learner: OffPolicyLearner, key, obs) -> jax.Array: ...

  def greedy(self, learner: OffPolicyLearner, obs) -> jax.Array: ...

  def update(
    self, nets: Nets, batch: types.Transition, key: jax.Array
  ) -> tuple[Nets, dict[str, Any]]: ...


@dataclasses.dataclass(frozen=True)
class OffPolicy:
  """The knobs SAC and TD3 share: replay, updates, networks, optimizers.

  Attributes:
    batch_size: transitions per update. Papers and SB3: 256 (TD3's paper
      100).
    max_replay_size: replay capacity in transitions. SB3: 1,000,000.
    learning_starts: uniform random actions, and no updates, for this
      many env steps (per seed). SB3: 100; CleanRL: 5,000 (SAC), 25,000
      (TD3).
    updates_per_step: updates per env step once learning starts (SB3's
      `gradient_steps / train_freq`). Papers: 1.
    tau: Polyak rate of the target networks. Papers: 0.005.
    actor_lr: the actor's Adam learning rate. Papers: 3e-4 (TD3's 1e-3).
    critic_lr: the critics' Adam learning rate. Papers: 3e-4 (TD3's 1e-3).
    layer_widths: hidden widths of the actor and each critic. Papers:
      (256, 256) (TD3's (400, 300)).
    n_critics: critics whose minimum is the target. Papers: 2.
  """

  batch_size: int = 256
  max_replay_size: int = 1_000_000
  learning_starts: int = 100
  updates_per_step: float = 1.0
  tau: float = 0.005
  actor_lr: float = 3e-4
  critic_lr: float = 3e-4
  layer_widths: Sequence[int] = (256, 256)
  n_critics: int = 2

  def __post_init__(self):
    validation.check_count('batch_size', self.batch_size, 1)
    validation.check_count('max_replay_size', self.max_replay_size, 1)
    validation.check_count('learning_starts', self.learning_starts, 0)
    validation.check_positive('updates_per_step', self.updates_per_step)
    validation.check_unit('tau', self.tau)
    validation.check_positive('actor_lr', self.actor_lr)
    validation.check_positive('critic_lr', self.critic_lr)
    if not (isinstance(self.layer_widths, Sequence) and self.layer_widths):
      raise ValueError(
        f'layer_widths must be a non-empty tuple of widths, '
        f'got {self.layer_widths!r}'
      )
    for width in self.layer_widths:
      validation.check_count('layer_widths', width, 1)
    validation.check_count('n_critics', self.n_critics, 1)

  def actor_module(self, action_dims: int) -> Any:
    """The flax module of the actor (the algorithm's)."""
    raise NotImplementedError

  def make_rule(
    self,
    actor: networks.Network,
    critic: networks.Network,
    action_dims: int,
    axis_name: str | None,
  ) -> Rule:
    """The algorithm's update rule on these networks."""
    raise NotImplementedError

  def program(self, spec: program_lib.Spec) -> program_lib.Program:
    """The algorithm's program for `spec`.

    Raises:
      ValueError: the action space is not a Box with finite bounds, or
        one rollout holds more steps than the replay.
    """
    name = type(self).__name__
    space = spec.action_space
    if not isinstance(space, gym.spaces.Box) or not (
      np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))
    ):
      raise ValueError(
        f'{name} needs a Box action space with finite bounds, got {space}'
      )
    per_rollout = spec.n_steps * spec.n_envs
    if per_rollout > self.max_replay_size:
      raise ValueError(
        f'one rollout ({spec.n_steps} steps of {spec.n_envs} envs) is more '
        f'than max_replay_size={self.max_replay_size} transitions'
      )
    samples_per_insert = self.batch_size * self.updates_per_step
    min_size = max(self.learning_starts, self.batch_size)
    table = device_table.DeviceTable(
      self.max_replay_size,
      samplers.Uniform(),
      min_size_to_sample=min(min_size, self.max_replay_size),
      samples_per_insert=samples_per_insert,
      error_buffer=rate_limiter.limiter_bounds(
        samples_per_insert, min_size, 0.0, self.batch_size, per_rollout
      ),
    )
    action_dims = int(np.prod(space.shape))
    example = np.zeros(
      spec.observation_space.shape, spec.observation_space.dtype
    )
    critic = continuous.critic_network(
      continuous.TwinCritic(tuple(self.layer_widths), self.n_critics),
      example,
      action_dims,
    )
    actor = networks.from_module(self.actor_module(action_dims), example)
    rule = self.make_rule(actor, critic, action_dims, spec.axis_name)
    return OffPolicyProgram(
      knobs=self, spec=spec, rule=rule, table=table
    ).program()


def adam(learning_rate: float) -> optax.GradientTransformation:
  return optax.adam(learning_rate)


def make_update(
  network: networks.Network,
  loss: types.LossFn,
  learning_rate: float,
  axis_name: str | None,
) -> update_lib.UpdateFn:
  """One Adam step of `loss` on a train state of `network`."""
  return update_lib.make_update_fn(
    network, loss, adam(learning_rate), axis_name=axis_name
  )


def twin_critic_loss(network, params, target_params, batch, key):
  """`0.5 sum_i mean (Q_i(s, a) - y)^2` for batch `(items, y[B])`."""
  del target_params, key
  items, target = batch
  q = network.apply(params, items.observation, items.action)  # [B, n]
  loss = 0.5 * jnp.sum(jnp.mean(jnp.square(q - target[:, None]), axis=0))
  return loss, types.LossExtra({'q_mean': jnp.mean(q)})


def polyak(state: train_state_lib.TrainState, tau: float):
  """`state` with its target parameters moved tau of the way to params."""
  target = optax.incremental_update(state.params, state.target_params, tau)
  return state._replace(target_params=target)


@dataclasses.dataclass(frozen=True)
class OffPolicyProgram:
  """The family's pure functions for one spec (see the module docstring)."""

  knobs: OffPolicy
  spec: program_lib.Spec
  rule: Rule
  table: device_table.DeviceTable

  def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
    space = self.spec.action_space
    return (
      np.asarray(space.low, np.float32).reshape(-1),
      np.asarray(space.high, np.float32).reshape(-1),
    )

  def to_env(self, action: jax.Array) -> jax.Array:
    """[-1, 1] actions `[N, D]` to the env's bounds and shape."""
    low, high = self._bounds()
    scaled = low + 0.5 * (action + 1.0) * (high - low)
    return scaled.reshape(action.shape[:1] + self.spec.action_space.shape)

  def from_env(self, action: jax.Array) -> jax.Array:
    """The env's actions `[..., *shape]` back to [-1, 1] `[..., D]`."""
    low, high = self._bounds()
    shape = self.spec.action_space.shape
    flat = action.reshape(action.shape[: action.ndim - len(shape)] + (-1,))
    return jnp.clip(2.0 * (flat - low) / (high - low) - 1.0, -1.0, 1.0)

  def init(self, key: jax.Array) -> OffPolicyLearner:
    actor, critic, temperature = self.rule.init(key)
    obs = np.zeros(
      self.spec.observation_space.shape, self.spec.observation_space.dtype
    )
    item = types.Transition(
      observation=obs,
      action=np.zeros(len(self._bounds()[0]), np.float32),
      reward=np.zeros((), np.float32),
      discount=np.zeros((), np.float32),
      next_observation=obs,
    )
    return OffPolicyLearner(
      actor=actor,
      critic=critic,
      temperature=temperature,
      replay=self.table.empty(item),
      env_steps=np.zeros((), np.int32),
    )

  def act(self, learner: OffPolicyLearner, key, obs, temperature: float):
    """Explores at temperature > 0 (random before learning_starts)."""
    if temperature == 0:
      return self.to_env(self.rule.greedy(learner, obs)), {}
    explore_key, random_key = jax.random.split(key)
    action = self.rule.explore(learner, explore_key, obs)
    random = jax.random.uniform(random_key, action.shape, minval=-1, maxval=1)
    warming = learner.env_steps < self.knobs.learning_starts
    return self.to_env(jnp.where(warming, random, action)), {}

  def observe(
    self, learner: OffPolicyLearner, rollout: rollout_lib.Rollout
  ) -> OffPolicyLearner:
    """Inserts every valid step as a one-step transition."""
    discount = self.spec.gamma * (1.0 - rollout.terminated.astype(jnp.float32))
    items = types.Transition(
      observation=rollout.observation,
      action=self.from_env(rollout.action.astype(jnp.float32)),
      reward=rollout.reward.astype(jnp.float32),
      discount=discount,
      next_observation=rollout.next_observation,
    )
    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # Time major.
    replay, _ = self.table.insert(
      learner.replay,
      jax.tree.map(flat, items),
      1.0,
      flat(rollout.valid.astype(bool)),
    )
    return learner._replace(
      replay=replay,
      env_steps=learner.env_steps + jnp.sum(rollout.valid, dtype=jnp.int32),
    )

  def _can_sample(self, replay: device_table.DeviceReplay):
    can = self.table.can_sample(replay, self.knobs.batch_size)
    if self.spec.axis_name is None:
      return can
    return jax.lax.pmin(can.astype(jnp.int32), self.spec.axis_name) > 0

  def learn(self, learner: OffPolicyLearner, key: jax.Array):
    """Updates while the rate limiter allows sampling a batch."""
    nets = (learner.actor, learner.critic, learner.temperature)
    example = jax.tree.map(
      lambda x: x[: self.knobs.batch_size], learner.replay.storage
    )
    _, metrics = jax.eval_shape(self.rule.update, nets, example, key)
    zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), metrics)

    def body(state, active):
      c, sums, calls = state
      step_key = jax.random.fold_in(key, calls)
      sample_key, update_key = jax.random.split(step_key)
      replay, sample = self.table.sample(
        c.replay, sample_key, self.knobs.batch_size
      )
      old = (c.actor, c.critic, c.temperature)
      new, metrics = self.rule.update(old, sample.data, update_key)
      (actor, critic, temperature), sums, calls, num_samples = (
        batched_loop.keep_where(
          active,
          (
            new,
            jax.tree.map(jnp.add, sums, metrics),
            calls + 1,
            replay.num_samples,
          ),
          (old, sums, calls, c.replay.num_samples),
        )
      )
      learner = c._replace(
        actor=actor,
        critic=critic,
        temperature=temperature,
        replay=c.replay._replace(num_samples=num_samples),
      )
      return learner, sums, calls

    learner, sums, calls = batched_loop.while_any(
      lambda state: self._can_sample(state[0].replay),
      body,
      (learner, zeros, jnp.zeros((), jnp.int32)),
    )
    means = jax.tree.map(lambda s: s / jnp.maximum(calls, 1), sums)
    record = dict(
      means,
      n_updates=calls,
      replay_size=self.table.size(learner.replay),
      env_steps=learner.env_steps,
      sgd_steps=learner.critic.step,
    )
    return learner, {f'{self.train_name()}/{k}': v for k, v in record.items()}

  def train_name(self) -> str:
    return type(self.knobs).__name__.lower()

  def acting(self, learner: OffPolicyLearner) -> OffPolicyLearner:
    """What `act` reads: the learner without its replay."""
    return learner._replace(replay=())

  def can_observe(self, learner: OffPolicyLearner, n_steps: int):
    """Whether the table's rate limiter admits n_steps more items."""
    return self.table.can_insert(learner.replay, max(n_steps, 1))

  def program(self) -> program_lib.Program:
    return program_lib.Program.of(
      self,
      streams=True,
      can_observe=self.can_observe,
      train_name=self.train_name(),
    )
