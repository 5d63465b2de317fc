"""Pure action selection: sampling with temperature, epsilon-greedy."""

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import types, validation


def sample_action(
  distribution: Any,
  dist_inputs: jax.Array,
  key: jax.Array,
  temperature: float | jax.Array,
) -> jax.Array:
  """Samples actions `[N, ...]` from `[N, n_inputs]` at `temperature`.

  Temperature 0 returns the mode exactly; 1 is the training behaviour.
  """
  return distribution.sample(dist_inputs, key, temperature)


def epsilon_greedy(
  q_values: jax.Array, key: jax.Array, epsilon: float | jax.Array
) -> jax.Array:
  """Greedy actions `[N]`, replaced by uniform ones with prob. epsilon.

  Ties among the greedy actions go to the first maximal index
  (`jnp.argmax`), as Trax's DQN acts, for every agent of trax_rl. Acme's DQN
  actor differs there: `rlax.epsilon_greedy(epsilon).sample` draws its
  greedy action uniformly among the tied maxima. The two agree whenever the
  maximum is unique.

  Args:
    q_values: `[N, A]`.
    key: PRNG key.
    epsilon: scalar or per-row `[N]` exploration rate.

  Returns:
    `[N]` int32 actions.
  """
  n, n_actions = q_values.shape
  explore_key, action_key = jax.random.split(key)
  explore = jax.random.uniform(explore_key, (n,)) < epsilon
  random_actions = jax.random.randint(action_key, (n,), 0, n_actions)
  return jnp.where(explore, random_actions, jnp.argmax(q_values, axis=-1))


def apex_epsilons(
  n_envs: int, base: float = 0.4, alpha: float = 7.0
) -> np.ndarray:
  """Per-env exploration rates of Ape-X (Horgan et al., 2018).

  Env i of N explores with `base ** (1 + alpha * i / (N - 1))`; with one
  env, `base`.

  Args:
    n_envs: N, >= 1.
    base: the largest rate, in [0, 1].
    alpha: how far the rates spread below `base`, >= 0.

  Returns:
    [N] float32 rates, from `base` down to `base ** (1 + alpha)`.

  Raises:
    ValueError: naming a bad argument.
  """
  validation.check_count('n_envs', n_envs, 1)
  validation.check_unit('base', base)
  if not alpha >= 0:
    raise ValueError(f'alpha must be >= 0, got {alpha!r}')
  if n_envs == 1:
    return np.array([base], np.float32)
  exponent = 1.0 + alpha * np.arange(n_envs) / (n_envs - 1)
  return (np.float64(base) ** exponent).astype(np.float32)


def network_policy(
  apply_fn: Callable[..., Any],
  params: types.Params,
  distribution: Any,
  observation: jax.Array,
  key: jax.Array,
  temperature: float | jax.Array = 1.0,
  head_index: int = 0,
) -> tuple[jax.Array, jax.Array]:
  """Samples actions from a policy network, as Trax's `network_policy`.

  Args:
    apply_fn: `apply(params, obs[N, ...])`; returns the distribution inputs
      `[N, n_inputs]`, or a tuple of heads (a multi-head network).
    params: the network's parameters.
    distribution: the action distribution (`distributions`).
    observation: `[N, ...]`.
    key: PRNG key.
    temperature: 1.0 samples, 0.0 takes the mode.
    head_index: which head of a multi-head network is the policy.

  Returns:
    (actions `[N, ...]`, distribution inputs `[N, n_inputs]`).
  """
  output = apply_fn(params, observation)
  if isinstance(output, tuple | list):
    output = output[head_index]
  return sample_action(distribution, output, key, temperature), output


def clip_to_space(action: np.ndarray, space: gym.Space) -> np.ndarray:
  """Clips continuous actions into a Box's bounds (other spaces unchanged)."""
  if isinstance(space, gym.spaces.Box):
    return np.clip(action, space.low, space.high).astype(space.dtype)
  return action


def host_policy(
  program: Any, learner: Any, key: types.PRNGKey, temperature: float
) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, Any]]:
  """A host policy `(obs[N, ...], first[N]) -> (action[N], info)`.

  The program's act at `temperature` on `learner`, keyed by `key` folded
  with its own call counter; a recurrent policy keeps its core between
  calls.
  """
  state = {'count': 0, 'core': None}
  act = jax.jit(program.act, static_argnums=3)

  def policy(obs, first):
    step_key = jax.random.fold_in(key, state['count'])
    state['count'] += 1
    if program.recurrent:
      if state['core'] is None:
        state['core'] = program.initial_core(len(obs))
      action, info, state['core'] = act(
        learner, step_key, obs, float(temperature), state['core'], first
      )
    else:
      action, info = act(learner, step_key, obs, float(temperature))
    return np.asarray(action), jax.device_get(info)

  return policy


class Actor:
  """Acting outside the runner, as Stable-Baselines3's `predict`.

  Args:
    make_policy: `make_policy(temperature)`, a host policy of the current
      learner (`host_policy`).
    observation_space: the task's observation space (after its wrappers).
    env: the env's name, for errors.
  """

  def __init__(
    self, make_policy: Callable[[float], Any], observation_space: Any, env: Any
  ):
    self._make_policy = make_policy
    self._shape = tuple(observation_space.shape)
    self._dtype = observation_space.dtype
    self._env = env
    self._policies: dict[tuple, Any] = {}

  def __call__(
    self,
    observation: Any,
    deterministic: bool,
    episode_start: Any,
    version: int,
  ) -> np.ndarray:
    """Actions for one observation or a batch.

    Args:
      observation: one observation (the task's observation shape, after
        its wrappers) or a batch `[N, ...]` of them.
      deterministic: the greedy action (temperature 0, as evaluation
        plays); False samples as training does (temperature 1).
      episode_start: for a recurrent agent, whether each observation starts
        an episode (its core is reset); None: True on the first call for
        this batch size, then False. Feed-forward agents ignore it.
      version: changes when the learner does (its epoch).

    Returns:
      One action, or `[N, ...]` actions for a batch.

    Raises:
      ValueError: an observation of another shape than the task's.
    """
    obs = np.asarray(observation)
    single = obs.shape == self._shape
    batch = obs[None] if single else obs
    if batch.shape[1:] != self._shape:
      raise ValueError(
        f'act: an observation of shape {obs.shape}, but {self._env!r} '
        f'observations have shape {self._shape} (or a batch '
        f'[N, *{self._shape}])'
      )
    n = batch.shape[0]
    key = (bool(deterministic), n, version)
    first = episode_start
    if key not in self._policies:
      self._policies.clear()  # One policy: this batch size, this learner.
      self._policies[key] = self._make_policy(0.0 if deterministic else 1.0)
      first = np.ones(n, bool) if first is None else first
    first = np.zeros(n, bool) if first is None else first
    first = np.broadcast_to(np.asarray(first, bool), (n,))
    action, _ = self._policies[key](batch.astype(self._dtype), first)
    return action[0] if single else action
