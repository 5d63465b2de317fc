"""SAC, soft actor-critic, as one rule of the off-policy program.

Haarnoja et al., 2018, "Soft Actor-Critic Algorithms and Applications"
(arXiv:1812.05905): the version with twin critics and the temperature
tuned to a target entropy. Each update, on one batch:

1. critics: `0.5 sum_i mean (Q_i(s, a) - y)^2`, `y = r + discount (min_i
   Qtarget_i(s', a') - alpha log pi(a'|s'))`, `a' ~ pi(s')`;
2. actor: `mean (alpha log pi(a|s) - min_i Q_i(s, a))`, `a ~ pi(s)`
   reparameterized, with the critics just updated;
3. temperature: `-log alpha mean (log pi(a|s) + target_entropy)` with the
   actor's samples of step 2 (SB3's loss);
4. the target critics move `tau` of the way to the critics.

The policy is a tanh-squashed Gaussian (its log-density corrected by the
tanh's Jacobian, `networks.continuous.squashed_sample`); greedy acting
takes tanh of its mean.
"""

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import types, validation
from trax_rl.algorithms import off_policy
from trax_rl.networks import base as networks
from trax_rl.networks import continuous
from trax_rl.supervised import update as update_lib


@dataclasses.dataclass(frozen=True)
class SACRule:
  """SAC's networks and update (see the module docstring)."""

  knobs: 'SAC'
  actor: networks.Network
  critic: networks.Network
  target_entropy: float
  axis_name: str | None

  def _temperature_network(self) -> networks.Network:
    log_alpha = np.log(self.knobs.initial_temperature).astype(np.float32)
    return networks.Network(init=lambda key: jnp.asarray(log_alpha), apply=None)

  def init(self, key: jax.Array) -> off_policy.Nets:
    k = self.knobs
    actor_key, critic_key, temperature_key = jax.random.split(key, 3)
    actor = update_lib.init_state(
      self.actor, off_policy.adam(k.actor_lr), actor_key
    )
    critic = update_lib.init_state(
      self.critic, off_policy.adam(k.critic_lr), critic_key, target=True
    )
    temperature = ()
    if k.learn_temperature:
      temperature = update_lib.init_state(
        self._temperature_network(),
        off_policy.adam(k.temperature_lr),
        temperature_key,
      )
    return actor, critic, temperature

  def alpha(self, temperature: Any) -> jax.Array:
    if self.knobs.learn_temperature:
      return jnp.exp(temperature.params)
    return jnp.asarray(self.knobs.initial_temperature, jnp.float32)

  def sample(self, params, obs, key):
    mean, log_std = self.actor.apply(params, obs)
    return continuous.squashed_sample(mean, log_std, key)

  def explore(self, learner, key, obs):
    return self.sample(learner.actor.params, obs, key)[0]

  def greedy(self, learner, obs):
    return jnp.tanh(self.actor.apply(learner.actor.params, obs)[0])

  def actor_loss(self, network, params, target_params, batch, key):
    del network, target_params
    obs, critic_params, alpha = batch
    action, log_prob = self.sample(params, obs, key)
    q = jnp.min(self.critic.apply(critic_params, obs, action), axis=-1)
    loss = jnp.mean(alpha * log_prob - q)
    return loss, types.LossExtra({'log_prob': jnp.mean(log_prob)})

  def temperature_loss(self, network, params, target_params, batch, key):
    del network, target_params, key
    log_prob = batch
    loss = -params * jax.lax.stop_gradient(log_prob + self.target_entropy)
    return loss, types.LossExtra({})

  def target(self, actor, critic, alpha, batch: types.Transition, key):
    """`r + discount (min_i Qtarget_i(s', a') - alpha log pi(a'|s'))`."""
    next_action, next_log_prob = self.sample(
      actor.params, batch.next_observation, key
    )
    next_q = self.critic.apply(
      critic.target_params, batch.next_observation, next_action
    )
    soft_value = jnp.min(next_q, axis=-1) - alpha * next_log_prob
    return jax.lax.stop_gradient(batch.reward + batch.discount * soft_value)

  def update(self, nets, batch: types.Transition, key: jax.Array):
    k = self.knobs
    actor, critic, temperature = nets
    alpha = self.alpha(temperature)
    target = self.target(actor, critic, alpha, batch, key)
    update = lambda network, loss, learning_rate: off_policy.make_update(
      network, loss, learning_rate, self.axis_name
    )
    critic, critic_extra = update(
      self.critic, off_policy.twin_critic_loss, k.critic_lr
    )(critic, (batch, target))
    actor, actor_extra = update(self.actor, self.actor_loss, k.actor_lr)(
      actor, (batch.observation, critic.params, alpha)
    )
    log_prob = actor_extra.metrics['log_prob']
    metrics = {
      'critic_loss': critic_extra.metrics['loss'],
      'q_mean': critic_extra.metrics['q_mean'],
      'actor_loss': actor_extra.metrics['loss'],
      'entropy': -log_prob,
      'alpha': alpha,
    }
    if k.learn_temperature:
      temperature, _ = update(
        self._temperature_network(), self.temperature_loss, k.temperature_lr
      )(temperature, log_prob)
    critic = off_policy.polyak(critic, k.tau)
    return (actor, critic, temperature), metrics


@dataclasses.dataclass(frozen=True)
class SAC(off_policy.OffPolicy):
  """Soft actor-critic (Haarnoja et al., 2018) for Box actions.

  Twin critics with Polyak-averaged targets, a tanh-squashed Gaussian
  policy and the temperature tuned towards a target entropy; one update
  per env step from a uniform replay (the defaults are the paper's and
  SB3's; `algorithms.sac` states the losses). Besides the replay and
  network knobs of `OffPolicy` (batch_size, max_replay_size, learning_starts,
  updates_per_step, tau, actor_lr, critic_lr, layer_widths, n_critics):

  Attributes:
    learn_temperature: tune alpha towards target_entropy (SB3's
      `ent_coef='auto'`); False keeps alpha at initial_temperature.
      Paper: True.
    initial_temperature: alpha at the start. SB3: 1.0.
    temperature_lr: Adam learning rate of log alpha. Paper: 3e-4.
    target_entropy: the entropy alpha is tuned towards; None: minus the
      number of action dimensions (the paper's).
  """

  learn_temperature: bool = True
  initial_temperature: float = 1.0
  temperature_lr: float = 3e-4
  target_entropy: float | None = None

  def __post_init__(self):
    super().__post_init__()
    validation.check_positive('initial_temperature', self.initial_temperature)
    validation.check_positive('temperature_lr', self.temperature_lr)

  def actor_module(self, action_dims: int) -> continuous.GaussianActor:
    return continuous.GaussianActor(action_dims, tuple(self.layer_widths))

  def make_rule(self, actor, critic, action_dims, axis_name) -> SACRule:
    entropy = self.target_entropy
    return SACRule(
      knobs=self,
      actor=actor,
      critic=critic,
      target_entropy=-float(action_dims) if entropy is None else entropy,
      axis_name=axis_name,
    )
