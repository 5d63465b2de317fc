"""A ring of the last epochs' steps, and Trax's slices of its trajectories.

Trax's DQN, PolicyGradient and ExpertIteration train on slices of the
trajectories of the last `n_replay_epochs` epochs (`RLTask`'s per-epoch
store and `trajectory_batch_stream`). On the device those epochs are a
ring of rollouts, fields `[E, T, N, ...]`: each env's steps of an epoch
are cut into trajectories at episode ends and at its last valid step, as
the task stored them, and a slice of length L of a trajectory of n steps
starts at one of its `max(1, n + 1 + m - L)` positions (Trax's `n_slices`
with margin m): rows past the trajectory's last step are its margin (the
final observation, then zeros; mask 0, done True) and then padding.

Two ways to draw a slice, Trax's two:
- `uniform_starts`: uniformly among all (trajectory, start) pairs (an
  epoch and a trajectory in proportion to their numbers of slices): DQN;
- `uniform_trajectories`: an epoch in proportion to its number of slices,
  a trajectory uniformly in it, then a start uniformly: PolicyGradient.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import trajectory as trajectory_lib
from trax_rl.device import batches
from trax_rl.device import rollout as rollout_lib


class SliceRing(NamedTuple):
  """The last E epochs' steps, fields `[E, T, N, ...]` (ring by epoch)."""

  observation: Any  # o_t
  action: Any  # a_t
  reward: Any  # r_t, float32
  terminated: Any  # bool, the episode terminated after a_t
  next_observation: Any  # o_{t+1}, the final observation where it ended
  return_: Any  # float32, discounted rewards-to-go within the trajectory
  position: Any  # int32, t's index in its trajectory
  length: Any  # int32, steps of t's trajectory (0: not a valid step)
  agent_info: Any  # what the policy recorded (e.g. dist_inputs), or {}
  filled: Any  # [E] bool, slots holding an epoch


def empty(
  n_epochs: int,
  n_steps: int,
  n_envs: int,
  observation: np.ndarray,
  action: Any,
  agent_info: Any = None,
) -> SliceRing:
  """An empty ring (numpy) for steps like `observation` and `action`.

  `agent_info`: one step's info pytree (no batch axes), or None.
  """
  shape = (n_epochs, n_steps, n_envs)
  zeros = lambda x: np.zeros(shape + np.shape(x), np.asarray(x).dtype)  # noqa: E731
  return SliceRing(
    observation=zeros(observation),
    action=zeros(action),
    reward=np.zeros(shape, np.float32),
    terminated=np.zeros(shape, bool),
    next_observation=zeros(observation),
    return_=np.zeros(shape, np.float32),
    position=np.zeros(shape, np.int32),
    length=np.zeros(shape, np.int32),
    agent_info=jax.tree.map(zeros, agent_info or {}),
    filled=np.zeros(n_epochs, bool),
  )


def _layout(ends: jax.Array, valid: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(position in trajectory, trajectory length), `[T, N]` int32; 0 and 0
  where not valid. `ends[T, N]`: a trajectory ends at t."""

  def forward(count, x):
    end, ok = x
    return jnp.where(end | ~ok, 0, count + 1), count

  _, position = jax.lax.scan(
    forward, jnp.zeros(ends.shape[1], jnp.int32), (ends, valid)
  )

  def backward(after, x):
    position, end = x
    left = jnp.where(end, 0, after + 1)  # Steps left after t.
    return left, position + left + 1

  _, length = jax.lax.scan(
    backward,
    jnp.zeros(ends.shape[1], jnp.int32),
    (position, ends),
    reverse=True,
  )
  return position * valid, length * valid


def store(
  ring: SliceRing, rollout: rollout_lib.Rollout, slot: Any, gamma: float
) -> SliceRing:
  """Writes a rollout's `[T', N]` steps (T' <= T) into ring slot `slot`.

  Each env's trajectories end at episode ends and at its last valid step
  (a prefix of the rollout); the slot's rows past T' are not valid.
  """
  valid = rollout.valid
  n_steps = valid.shape[0]
  last = jnp.arange(n_steps)[:, None] == (jnp.sum(valid, axis=0) - 1)[None]
  ends = (rollout.terminated | rollout.truncated | last) & valid
  position, length = _layout(ends, valid)
  returns = batches.rewards_to_go(rollout.reward * valid, ends, gamma)
  epoch = SliceRing(
    observation=rollout.observation,
    action=rollout.action,
    reward=rollout.reward.astype(jnp.float32),
    terminated=rollout.terminated & valid,
    next_observation=rollout.next_observation,
    return_=returns,
    position=position,
    length=length,
    agent_info={k: rollout.agent_info[k] for k in ring.agent_info},
    filled=(),
  )

  def write(dst, x):
    row = jnp.zeros(dst.shape[1:], dst.dtype)
    row = row.at[:n_steps].set(x.astype(dst.dtype))
    return dst.at[slot].set(row)

  fields = jax.tree.map(write, ring._replace(filled=()), epoch)
  return fields._replace(filled=ring.filled.at[slot].set(True))


def n_starts(ring: SliceRing, length: int | None, margin: int) -> jax.Array:
  """`[E, T, N]` int32: the slices of each step's trajectory (0: not valid).

  `length` None: whole trajectories, one slice each.
  """
  if length is None:
    count = jnp.ones_like(ring.length)
  else:
    count = jnp.maximum(1, ring.length + 1 + margin - length)
  return jnp.where(
    ring.filled[:, None, None] & (ring.length > 0), count, 0
  ).astype(jnp.int32)


def start_weights(
  ring: SliceRing, length: int | None, margin: int, uniform_trajectories: bool
) -> jax.Array:
  """`[E * T * N]` probabilities of a slice starting at each step."""
  count = n_starts(ring, length, margin)
  is_start = (ring.position < count) & (count > 0)
  if not uniform_trajectories:  # Every (trajectory, start) pair alike.
    weight = is_start.astype(jnp.float32)
    return (weight / jnp.maximum(jnp.sum(weight), 1)).reshape(-1)
  # An epoch in proportion to its slices, then a trajectory uniformly in
  # it, then one of its starts.
  first = ring.position == 0
  slices_of_epoch = jnp.sum(jnp.where(first, count, 0), axis=(1, 2))
  trajs_of_epoch = jnp.sum(first & (count > 0), axis=(1, 2))
  p_epoch = slices_of_epoch / jnp.maximum(jnp.sum(slices_of_epoch), 1)
  per_traj = p_epoch / jnp.maximum(trajs_of_epoch, 1)
  weight = jnp.where(
    is_start, per_traj[:, None, None] / jnp.maximum(count, 1), 0.0
  )
  return weight.reshape(-1)


def draw(cdf: jax.Array, key: jax.Array, n: int) -> jax.Array:
  """n flat indices drawn from a cumulative distribution (`jnp.cumsum`)."""
  u = jax.random.uniform(key, (n,), dtype=cdf.dtype)
  return jnp.searchsorted(cdf, cdf[-1] * (1 - u)).astype(jnp.int32)


def gather(
  ring: SliceRing,
  index: jax.Array,
  length: int,
  margin: int,
) -> trajectory_lib.TimeStepBatch:
  """The `[B, L, ...]` slices starting at flat indices `index[B]` of
  `[E, T, N]` (see the module docstring for the rows past the end)."""
  n_epochs, n_steps, n_envs = ring.position.shape
  e, rest = jnp.divmod(index, n_steps * n_envs)
  t, i = jnp.divmod(rest, n_envs)
  at = lambda x, time: x[e[:, None], time, i[:, None]]  # noqa: E731
  j = ring.position[e, t, i][:, None]  # [B, 1]
  n = ring.length[e, t, i][:, None]
  k = jnp.arange(length)[None, :]  # [1, L]
  time = jnp.minimum(t[:, None] + k, n_steps - 1)
  last = t[:, None] + n - 1 - j  # The trajectory's last step.
  rows = jnp.minimum(length, n + margin - j)  # The slice's own rows.
  real = k < n - j
  final = (k == n - j) & (k < rows)

  def where(cond, x, other):
    cond = cond.reshape(cond.shape + (1,) * (x.ndim - 2))
    return jnp.where(cond, x, other)

  obs = at(ring.observation, time)
  final_obs = at(ring.next_observation, jnp.broadcast_to(last, time.shape))
  observation = where(real, obs, where(final, final_obs, jnp.zeros_like(obs)))
  own = (k < rows).astype(jnp.float32) * jnp.ones(k.shape, jnp.float32)

  def zero(x):
    return where(real, x, jnp.zeros_like(x))

  dist_inputs = ring.agent_info.get('dist_inputs')
  return trajectory_lib.TimeStepBatch(
    observation=observation,
    action=zero(at(ring.action, time)),
    reward=zero(at(ring.reward, time)),
    done=jnp.where(real, at(ring.terminated, time), True),
    mask=real.astype(jnp.float32),
    dist_inputs=None if dist_inputs is None else zero(at(dist_inputs, time)),
    env_info=trajectory_lib.EnvInfo(control_mask=own, discount_mask=own),
    return_=zero(at(ring.return_, time)),
    agent_info={},
  )


def trajectory_starts(ring: SliceRing) -> jax.Array:
  """`[E * T * N]` bool: the steps that begin a stored trajectory."""
  ok = ring.filled[:, None, None] & (ring.length > 0) & (ring.position == 0)
  return ok.reshape(-1)
