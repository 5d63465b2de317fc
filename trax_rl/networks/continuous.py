"""Networks of the off-policy actor-critics (SAC, TD3) for Box actions.

Actions inside these networks are in [-1, 1] per dimension (the tanh's
range); the program scales them to the env's bounds.
"""

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl.networks import base

# SAC's log-std range (the SAC authors' and SB3's clip).
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def _torso(x: jax.Array, widths: Sequence[int]) -> jax.Array:
  x = jnp.asarray(x, jnp.float32).reshape((x.shape[0], -1))
  for width in widths:
    x = nn.relu(nn.Dense(width)(x))
  return x


class GaussianActor(nn.Module):
  """SAC's actor: the mean and log-std of a Gaussian before the tanh.

  Returns `(mean, log_std)`, each `[B, action_dims]`, the log-std clipped
  to `[LOG_STD_MIN, LOG_STD_MAX]`.
  """

  action_dims: int
  layer_widths: Sequence[int] = (256, 256)

  @nn.compact
  def __call__(self, obs):
    h = _torso(obs, self.layer_widths)
    mean = nn.Dense(self.action_dims)(h)
    log_std = nn.Dense(self.action_dims)(h)
    return mean, jnp.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)


class DeterministicActor(nn.Module):
  """TD3's actor: `tanh` of a Dense head, `[B, action_dims]` in [-1, 1]."""

  action_dims: int
  layer_widths: Sequence[int] = (256, 256)

  @nn.compact
  def __call__(self, obs):
    return jnp.tanh(nn.Dense(self.action_dims)(_torso(obs, self.layer_widths)))


class _Critic(nn.Module):
  layer_widths: Sequence[int]

  @nn.compact
  def __call__(self, obs, action):
    obs = jnp.asarray(obs, jnp.float32).reshape((obs.shape[0], -1))
    h = _torso(jnp.concatenate([obs, action], axis=-1), self.layer_widths)
    return nn.Dense(1)(h)[:, 0]


class TwinCritic(nn.Module):
  """`n_critics` independent Q(s, a) MLPs on concat(s, a): `[B, n_critics]`.

  The critics are one module vmapped over their parameters, so they run as
  batched matmuls rather than one after another.
  """

  layer_widths: Sequence[int] = (256, 256)
  n_critics: int = 2

  @nn.compact
  def __call__(self, obs, action):
    critics = nn.vmap(
      _Critic,
      variable_axes={'params': 0},
      split_rngs={'params': True},
      in_axes=None,
      out_axes=-1,
      axis_size=self.n_critics,
    )
    return critics(self.layer_widths)(obs, action)


def critic_network(
  module: nn.Module, example_observation: np.ndarray, action_dims: int
) -> base.Network:
  """A `Network` of a critic `module(obs[B, ...], action[B, D])`, its init
  compiled once and shared as `base.jitted_init`'s."""

  def init(module, shape, dtype, key):
    obs = jnp.zeros((1, *shape), dtype)
    return module.init(key, obs, jnp.zeros((1, action_dims), jnp.float32))

  return base.Network(
    init=base.jitted_init(init, module, example_observation),
    apply=module.apply,
  )


def squashed_sample(
  mean: jax.Array, log_std: jax.Array, key: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """A reparameterized `tanh(u)`, `u ~ N(mean, std)`, and its log-density.

  The log-density of the squashed action is the Gaussian's at u minus the
  tanh's log-Jacobian, `sum_i log(1 - tanh(u_i)^2)`, written as `2 (log 2 -
  u - softplus(-2 u))` so it stays finite where tanh(u) rounds to +-1.

  Returns:
    (action `[B, D]` in (-1, 1), log_prob `[B]`).
  """
  std = jnp.exp(log_std)
  u = mean + std * jax.random.normal(key, mean.shape, mean.dtype)
  gaussian = -0.5 * jnp.square((u - mean) / std) - log_std
  gaussian = gaussian - 0.5 * jnp.log(2 * jnp.pi)
  log_jacobian = 2.0 * (jnp.log(2.0) - u - jax.nn.softplus(-2.0 * u))
  return jnp.tanh(u), jnp.sum(gaussian - log_jacobian, axis=-1)


def action_dims(space: Any) -> int:
  """The number of scalars in one action of a Box space."""
  return int(np.prod(space.shape))
