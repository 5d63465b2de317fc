"""TD3, twin delayed DDPG, as one rule of the off-policy program.

Fujimoto et al., 2018, "Addressing Function Approximation Error in
Actor-Critic Methods" (arXiv:1802.09477). Each update, on one batch:

1. critics: `0.5 sum_i mean (Q_i(s, a) - y)^2`, `y = r + discount min_i
   Qtarget_i(s', a')`, where `a' = clip(mu_target(s') + clip(N(0,
   policy_noise), -noise_clip, noise_clip), -1, 1)` (target policy
   smoothing);
2. every `policy_delay`-th update: the actor ascends `Q_1(s, mu(s))` with
   the critics just updated, then the target actor and target critics move
   `tau` of the way to theirs (delayed policy updates).

Acting adds `N(0, exploration_noise)` to mu(s) and clips to [-1, 1]; all
noise scales are in units of half the action range (SB3's and the paper's
normalized actions). Greedy acting takes mu(s).
"""

import dataclasses

import jax
import jax.numpy as jnp

from trax_rl import types, validation
from trax_rl.algorithms import off_policy
from trax_rl.networks import base as networks
from trax_rl.networks import continuous
from trax_rl.supervised import update as update_lib


@dataclasses.dataclass(frozen=True)
class TD3Rule:
  """TD3's networks and update (see the module docstring)."""

  knobs: 'TD3'
  actor: networks.Network
  critic: networks.Network
  axis_name: str | None

  def init(self, key: jax.Array) -> off_policy.Nets:
    k = self.knobs
    actor_key, critic_key = jax.random.split(key)
    actor = update_lib.init_state(
      self.actor, off_policy.adam(k.actor_lr), actor_key, target=True
    )
    critic = update_lib.init_state(
      self.critic, off_policy.adam(k.critic_lr), critic_key, target=True
    )
    return actor, critic, ()

  def explore(self, learner, key, obs):
    action = self.actor.apply(learner.actor.params, obs)
    noise = self.knobs.exploration_noise * jax.random.normal(key, action.shape)
    return jnp.clip(action + noise, -1.0, 1.0)

  def greedy(self, learner, obs):
    return self.actor.apply(learner.actor.params, obs)

  def actor_loss(self, network, params, target_params, batch, key):
    del target_params, key
    obs, critic_params = batch
    action = network.apply(params, obs)
    q = self.critic.apply(critic_params, obs, action)[:, 0]
    return -jnp.mean(q), types.LossExtra({})

  def target(self, actor, critic, batch: types.Transition, key: jax.Array):
    """`r + discount min_i Qtarget_i(s', a')` with the smoothed a' `[B]`."""
    k = self.knobs
    next_action = self.actor.apply(actor.target_params, batch.next_observation)
    noise = jnp.clip(
      k.policy_noise * jax.random.normal(key, next_action.shape),
      -k.noise_clip,
      k.noise_clip,
    )
    next_action = jnp.clip(next_action + noise, -1.0, 1.0)
    next_q = self.critic.apply(
      critic.target_params, batch.next_observation, next_action
    )
    return batch.reward + batch.discount * jnp.min(next_q, axis=-1)

  def update(self, nets, batch: types.Transition, key: jax.Array):
    k = self.knobs
    actor, critic, temperature = nets
    target = self.target(actor, critic, batch, key)
    critic, critic_extra = off_policy.make_update(
      self.critic, off_policy.twin_critic_loss, k.critic_lr, self.axis_name
    )(critic, (batch, jax.lax.stop_gradient(target)))
    update_actor = off_policy.make_update(
      self.actor, self.actor_loss, k.actor_lr, self.axis_name
    )

    def delayed(states):
      actor, critic = states
      actor, extra = update_actor(actor, (batch.observation, critic.params))
      moved = (
        off_policy.polyak(actor, k.tau),
        off_policy.polyak(critic, k.tau),
      )
      return moved, extra.metrics['loss']

    def skipped(states):
      return states, jnp.zeros((), jnp.float32)

    (actor, critic), actor_loss = jax.lax.cond(
      critic.step % k.policy_delay == 0, delayed, skipped, (actor, critic)
    )
    metrics = {
      'critic_loss': critic_extra.metrics['loss'],
      'q_mean': critic_extra.metrics['q_mean'],
      'actor_loss': actor_loss,
      'actor_updates': (critic.step % k.policy_delay == 0).astype(jnp.int32),
    }
    return (actor, critic, temperature), metrics


@dataclasses.dataclass(frozen=True)
class TD3(off_policy.OffPolicy):
  """TD3 (Fujimoto et al., 2018) for Box actions.

  A deterministic actor with Gaussian exploration noise, twin critics,
  target policy smoothing and delayed actor and target updates; one
  update per env step from a uniform replay (`algorithms.td3` states the
  losses; defaults are the paper's and SB3's). Besides the replay and
  network knobs of `OffPolicy` (batch_size, max_replay_size, learning_starts,
  updates_per_step, tau, actor_lr, critic_lr, layer_widths, n_critics):

  Attributes:
    policy_delay: critic updates per actor (and target) update. Paper: 2.
    exploration_noise: std of the Gaussian added to actions when
      exploring, in units of half the action range. Paper: 0.1.
    policy_noise: std of the target policy smoothing noise. Paper: 0.2.
    noise_clip: the smoothing noise is clipped to +-this. Paper: 0.5.
  """

  policy_delay: int = 2
  exploration_noise: float = 0.1
  policy_noise: float = 0.2
  noise_clip: float = 0.5

  def __post_init__(self):
    super().__post_init__()
    validation.check_count('policy_delay', self.policy_delay, 1)
    validation.check_non_negative('exploration_noise', self.exploration_noise)
    validation.check_non_negative('policy_noise', self.policy_noise)
    validation.check_non_negative('noise_clip', self.noise_clip)

  def actor_module(self, action_dims: int) -> continuous.DeterministicActor:
    return continuous.DeterministicActor(action_dims, tuple(self.layer_widths))

  def make_rule(self, actor, critic, action_dims, axis_name) -> TD3Rule:
    del action_dims
    return TD3Rule(self, actor, critic, axis_name)
