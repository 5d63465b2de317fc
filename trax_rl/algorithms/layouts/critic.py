"""The critic of the separate-network actor-critics: V(s) or aggregated Q.

A `Critic` gives state values either straight from a value network or, for
Q-value critics (Trax's `q_value=True`), by aggregating Q(s, a_i) over
actions sampled from a policy distribution. `make_value_network` builds
the network of either kind; `copy_shared_layers` shares body layers between
the policy and value networks.
"""

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl.losses import value_estimates
from trax_rl.networks import base as networks


def n_discrete_actions(space: gym.Space) -> int | None:
  """The number of actions of a Discrete space, else None."""
  return int(space.n) if isinstance(space, gym.spaces.Discrete) else None


def make_value_network(
  value_model: Callable[..., nn.Module],
  example_observation: Any,
  action_space: gym.Space,
  q_value: bool,
) -> networks.Network:
  """The value network: V(obs [B, ...]) or, with q_value, Q(obs, action).

  Args:
    value_model: the module factory; with q_value it is called with
      `is_discrete` and `vocab_size` and must take (observation, action).
    example_observation: one observation, for the shapes at init.
    action_space: the env's action space (shapes of a Q network's actions).
    q_value: build a Q network.

  Returns:
    The Network.

  Raises:
    ValueError: with q_value, a value_model that does not take the action
      arguments.
  """
  if not q_value:
    return networks.from_module(value_model(), example_observation)
  n_discrete = n_discrete_actions(action_space)
  try:
    module = value_model(
      is_discrete=n_discrete is not None, vocab_size=n_discrete or 1
    )
  except TypeError as e:
    raise ValueError(
      'q_value=True needs a value_model taking actions, such as '
      f'@ActionValue: {e}'
    ) from None
  example = example_observation
  obs = jnp.zeros((1,) + np.shape(example), jnp.asarray(example).dtype)
  act = np.zeros((1,) + action_space.shape, action_space.dtype)
  return networks.Network(
    init=lambda key: module.init(key, obs, act), apply=module.apply
  )


def copy_shared_layers(src: Any, dst: Any, n_layers: int) -> Any:
  """dst with the first n Dense layers of its MLP body taken from src.

  The policy and value networks share `n_shared_layers` body layers by
  copying them from one to the other around value training (Trax's way).
  """
  if not n_layers:
    return dst
  body = dict(dst['params']['MLP_0'])
  for i in range(n_layers):
    body[f'Dense_{i}'] = src['params']['MLP_0'][f'Dense_{i}']
  return {**dst, 'params': {**dst['params'], 'MLP_0': body}}


def check_shared_layers(
  policy_params: Any, value_params: Any, n_layers: int
) -> None:
  """Raises ValueError unless both MLP bodies have the first n layers alike."""
  for i in range(n_layers):
    try:
      shapes = [
        jax.tree.map(np.shape, p['params']['MLP_0'][f'Dense_{i}'])
        for p in (policy_params, value_params)
      ]
    except (KeyError, TypeError):
      shapes = [None, ()]
    if shapes[0] != shapes[1]:
      raise ValueError(
        f'n_shared_layers={n_layers}: layer {i} of the policy and value '
        'bodies must exist in both (an MLP body) and have the same shape'
      )


@dataclasses.dataclass(frozen=True)
class Critic:
  """State values from a value network, or from Q-values of sampled actions.

  Attributes:
    network: the value network (see `make_value_network`).
    distribution: the policy's action distribution, to sample actions from.
    scale: the network predicts value / scale (scale_value_targets).
    q_value: the network is a Q network taking (observation, action).
    n_samples: actions sampled per state for Q-value aggregates.
    all_discrete: the n_samples actions enumerate all discrete actions (and
      are weighted by their probabilities) instead of being sampled.
    temperature: of the `softmax` and `logsumexp` aggregates.
    normalization: None or a Q-value scale function (see
      `value_estimates.aggregate_values`).
  """

  network: networks.Network
  distribution: Any
  scale: float = 1.0
  q_value: bool = False
  n_samples: int = 1
  all_discrete: bool = False
  temperature: float = 1.0
  normalization: value_estimates.Normalization | None = None

  def sample_actions(self, dist_inputs, key):
    """[S, N, ...] actions and their [S, N] log-probs under dist_inputs."""
    n = self.n_samples
    inputs = jnp.broadcast_to(dist_inputs, (n,) + dist_inputs.shape)
    if self.all_discrete:
      actions = jnp.broadcast_to(
        jnp.arange(n)[:, None], inputs.shape[:-1]
      ).astype(jnp.int32)
    else:
      actions = self.distribution.sample(inputs, key)
    return actions, self.distribution.log_prob(inputs, actions)

  def q_values(self, params, obs, actions):
    """[S, N] scaled Q(obs, a_i) of actions [S, N, ...]."""
    q = jax.vmap(lambda a: self.network.apply(params, obs, a))(actions)
    return q * self.scale

  def state_values(self, params, obs, dist_inputs, key, aggregate):
    """[N] V(obs): the value network, or Q aggregated over sampled actions.

    With all discrete actions enumerated, the `mean` aggregate is their
    mean weighted by the behaviour policy's probabilities.
    """
    if not self.q_value:
      return self.network.apply(params, obs) * self.scale
    actions, log_probs = self.sample_actions(dist_inputs, key)
    if self.all_discrete and aggregate is value_estimates.mean:
      aggregate = functools.partial(
        value_estimates.mean, weights=jnp.exp(log_probs)
      )
    return value_estimates.aggregate_values(
      self.q_values(params, obs, actions),
      aggregate,
      self.temperature,
      self.normalization,
    )
