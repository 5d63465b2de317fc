"""n-step transitions from rollouts, in jnp: what the value program stores.

A step's transition is complete once its n-step window is in or its
episode ended; each env's last n - 1 steps wait for the next rollout
(`ValueLearner.tail`), so every step becomes exactly one transition.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import types


class Steps(NamedTuple):
  """Env steps as the n-step builder needs them, `[T, N, ...]`."""

  observation: Any  # o_t
  action: Any  # a_t
  reward: Any  # r_t
  terminated: Any  # bool, ended naturally after a_t
  truncated: Any  # bool, cut by a time limit after a_t
  next_observation: Any  # o_{t+1}, the final observation where it ended


def transition_like(observation: np.ndarray) -> types.Transition:
  """A zero transition of `observation`'s shape (no batch axis)."""
  return types.Transition(
    observation=observation,
    action=np.zeros((), np.int32),
    reward=np.zeros((), np.float32),
    discount=np.zeros((), np.float32),
    next_observation=observation,
  )


def n_step_transitions(
  steps: Steps, valid: jax.Array, n_step: int, gamma: float, count: int
) -> tuple[types.Transition, jax.Array]:
  """The n-step transitions of the first `count` steps of `steps`.

  Args:
    steps: `[count + n_step - 1, N, ...]`, time major, consecutive per env.
    valid: `[count + n_step - 1, N]` bool, which steps are real.
    n_step: n >= 1.
    gamma: discount per step.
    count: how many steps (from the first) to emit.

  Returns:
    (Transition `[count, N, ...]`, valid `[count, N]`). For step t with
    k = min(n, steps until its episode ended): reward sum_{i<k} gamma**i
    r_{t+i}, discount gamma**k (0 if the episode terminated at t + k),
    next_observation the observation after step t + k - 1.
  """
  window = lambda x: jnp.stack([x[i : i + count] for i in range(n_step)], 1)
  done = window(steps.terminated | steps.truncated)  # [count, n, N]
  # alive[:, i]: step t + i still belongs to step t's episode.
  ended_before = jnp.cumsum(done, axis=1) - done
  alive = ended_before == 0
  k = jnp.sum(alive, axis=1)  # [count, N], in [1, n]
  powers = (gamma ** jnp.arange(n_step, dtype=jnp.float32))[None, :, None]
  rewards = window(steps.reward.astype(jnp.float32))
  reward = jnp.sum(jnp.where(alive, powers * rewards, 0.0), axis=1)
  terminated = jnp.any(alive & window(steps.terminated), axis=1)
  discount = jnp.where(terminated, 0.0, gamma ** k.astype(jnp.float32))
  last = jnp.arange(count)[:, None] + k - 1  # [count, N] index into steps
  env_index = jnp.arange(k.shape[1])[None, :]
  transition = types.Transition(
    observation=steps.observation[:count],
    action=steps.action[:count].astype(jnp.int32),
    reward=reward,
    discount=discount.astype(jnp.float32),
    next_observation=steps.next_observation[last, env_index],
  )
  return transition, valid[:count]


def complete_transitions(
  steps: Steps, valid: jax.Array, n_step: int, gamma: float
) -> tuple[types.Transition, jax.Array]:
  """The n-step transition of every step of `steps`, and which to emit.

  A step's transition is complete once its n-step window is in, or once
  its episode ended inside the steps there are: the last n - 1 steps of
  an env wait for the next rollout unless their episode is over.

  Args:
    steps: `[L, N, ...]`, time major, consecutive per env.
    valid: `[L, N]` bool, which steps are real and not yet emitted.
    n_step: n >= 1.
    gamma: discount per step.

  Returns:
    (Transition `[L, N, ...]`, emit `[L, N]` bool: valid and complete).
  """
  length = valid.shape[0]
  pad = n_step - 1
  padded = jax.tree.map(
    lambda x: jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)]),
    steps,
  )
  transitions, _ = n_step_transitions(
    padded,
    jnp.ones((length + pad,) + valid.shape[1:], bool),
    n_step,
    gamma,
    length,
  )
  done = padded.terminated | padded.truncated  # Padding: never done.
  ended = jnp.any(
    jnp.stack([done[i : i + length] for i in range(n_step)]), axis=0
  )
  in_window = (jnp.arange(length) + pad < length)[:, None]
  return transitions, valid & (in_window | ended)


def align_valid(tail: Any, tail_valid: jax.Array, new: Any, valid: jax.Array):
  """Joins each env's tail and new steps with its valid steps last.

  Each env's valid new steps are a prefix of `new` (`Rollout.valid`), so
  `tail ++ new` ends with `T - L_i` invalid steps for env i. Rolling each
  env's column right by that many puts them first: the joined sequence
  then ends with the env's latest valid steps, as a rollout of all valid
  steps would, and what is emitted and carried is the same.

  Args:
    tail: pytree of `[m, N, ...]`, the steps carried from before.
    tail_valid: `[m, N]` bool.
    new: pytree of `[T, N, ...]`.
    valid: `[T, N]` bool, a prefix per env.

  Returns:
    (joined pytree `[m + T, N, ...]`, joined valid `[m + T, N]`).
  """
  joined = jax.tree.map(
    lambda a, b: jnp.concatenate([a, b.astype(a.dtype)]), tail, new
  )
  ok = jnp.concatenate([tail_valid, valid])
  size, n_steps = ok.shape[0], valid.shape[0]
  shift = n_steps - jnp.sum(valid, axis=0)  # [N] invalid new steps
  source = (jnp.arange(size)[:, None] - shift[None, :]) % size  # [m + T, N]
  env = jnp.arange(ok.shape[1])[None, :]
  return jax.tree.map(lambda x: x[source, env], (joined, ok))
