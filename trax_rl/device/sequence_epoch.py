"""R2D2's compiled epoch: a recurrent policy and sequence replay on the device.

The device twin of `R2D2`'s host epoch, built on `value_epoch.ValueEpoch`
(the same learner calls, rate limiter, target syncs and priority writes):

  1. collect `T` vmapped env steps with the LSTM policy: the core state
     rides in the env carry (`device.rollout`), is zeroed where an episode
     starts, and the state before each step is kept; env i explores with
     its own Ape-X epsilon, as on the host;
  2. cut the steps into segments exactly as `replay.SequenceAdder` does
     (`cut_segments`): `L = burn_in + trace + 1` steps starting every `P`
     steps of an episode, the final observation a step of its own (mask
     0), one zero-padded segment at the episode's end for the steps no full
     segment reached, each segment with the core state before its first
     step. Each env's last `L` positions and its position in the running
     episode carry to the next epoch, so episodes span epochs as on the
     host;
  3. insert the segments at `adders.NEW_ITEM_PRIORITY`;
  4. learn while the rate limiter allows, writing back `R2D2Loss`'s mixed
     priorities (`eta max |td| + (1 - eta) mean |td|`).

The segments are those of the host adder on the same steps; only their
insertion order differs (time, then env, here; trajectory by trajectory on
the host).
"""

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import policies, types
from trax_rl.device import epoch as device_epoch
from trax_rl.device import rollout, value_epoch
from trax_rl.networks import recurrent
from trax_rl.replay import adders

SLOTS = 3  # Segments one env can end per step: full, full at the end, padded.


class History(NamedTuple):
  """Each env's last L positions of its running episode (a ring)."""

  ring: types.Segment  # fields [L, N, ...]; core_state leaves [L, N, H]
  position: Any  # [N] int32, positions of the running episode so far


class SequenceLearner(NamedTuple):
  """What the R2D2 program trains and carries from epoch to epoch."""

  train: Any  # TrainState
  history: History
  replay: Any  # DeviceReplay of Segments
  env_steps: Any  # [] int32


def _write(ring, position, entry, where):
  """Writes `entry` (fields [N, ...]) at each env's `position` where `where`."""
  length = ring.mask.shape[0]
  n = position.shape[0]
  slot = jnp.where(where, position % length, length)  # Out of range: kept.
  env = jnp.arange(n)
  return jax.tree.map(
    lambda r, e: r.at[slot, env].set(e.astype(r.dtype), mode='drop'),
    ring,
    entry,
  )


def _read(ring, start, count):
  """The segment of each env from position `start` [N], its first `count`
  [N] steps real and the rest zero padding: fields `[N, L, ...]`."""
  length = ring.mask.shape[0]
  n = start.shape[0]
  offsets = jnp.arange(length)[:, None]
  index = (start[None, :] + offsets) % length  # [L, N]
  real = offsets < count[None, :]
  env = jnp.arange(n)[None, :]

  def gather(r):
    x = r[index, env]  # [L, N, ...]
    keep = real.reshape(real.shape + (1,) * (x.ndim - 2))
    return jnp.swapaxes(jnp.where(keep, x, jnp.zeros_like(x)), 0, 1)

  fields = {
    name: gather(getattr(ring, name))
    for name in ('observation', 'action', 'reward', 'discount', 'mask')
  }
  core = jax.tree.map(
    lambda c: c[start % length, jnp.arange(n)], ring.core_state
  )
  return types.Segment(**fields, core_state=core)


def cut_segments(
  history: History,
  steps: rollout.Rollout,
  core: Any,
  period: int,
  gamma: float,
) -> tuple[History, types.Segment, jax.Array]:
  """The segments `steps` complete, as `replay.SequenceAdder` cuts them.

  Args:
    history: the envs' ring of their last L positions (L = the ring's
      length) and their positions in the running episodes.
    steps: the rollout, fields `[T, N, ...]`.
    core: the core state before each step, leaves `[T, N, ...]`.
    period: a segment starts every this many positions of an episode.
    gamma: discount per step.

  Returns:
    (history after the steps, segments `[T * SLOTS * N, L, ...]` in time,
    slot, env order, valid `[T * SLOTS * N]` bool).
  """
  length = history.ring.mask.shape[0]
  zero_core = jax.tree.map(lambda c: jnp.zeros_like(c[0]), core)

  def full(ring, position):
    """The segment that `position` completes, and whether one does."""
    start = position - length + 1
    ok = (start >= 0) & (start % period == 0)
    return _read(ring, start, jnp.full_like(start, length)), ok

  def body(history, step):
    ring, position = history
    step, core_t = step
    done = step.terminated | step.truncated
    ones = jnp.ones_like(step.reward)
    real = types.Segment(
      observation=step.observation,
      action=step.action,
      reward=step.reward,
      discount=gamma * (1.0 - step.terminated.astype(jnp.float32)),
      mask=ones,
      core_state=core_t,
    )
    ring = _write(ring, position, real, jnp.ones_like(done))
    first, first_ok = full(ring, position)
    final = types.Segment(
      observation=step.next_observation,
      action=jnp.zeros_like(step.action),
      reward=0.0 * ones,
      discount=0.0 * ones,
      mask=0.0 * ones,
      core_state=zero_core,
    )
    last = position + 1  # The final observation's position, if done.
    ring = _write(ring, last, final, done)
    second, second_ok = full(ring, last)
    # The padded segment from the first start no full segment took.
    start = jnp.where(
      last >= length - 1, ((last - length + 1) // period + 1) * period, 0
    )
    padded = _read(ring, start, last - start + 1)
    out = jax.tree.map(lambda *x: jnp.stack(x), first, second, padded)
    ok = jnp.stack([first_ok, second_ok & done, done & (start < last)])
    position = jnp.where(done, 0, position + 1)
    return History(ring, position), (out, ok)

  history, (segments, ok) = jax.lax.scan(body, history, (steps, core))
  flat = lambda x: x.reshape((-1,) + x.shape[3:])  # [T, SLOTS, N] -> rows.
  return history, jax.tree.map(flat, segments), ok.reshape(-1)


@dataclasses.dataclass(frozen=True)
class SequenceEpoch(value_epoch.ValueEpoch):
  """R2D2's compiled epoch (see the module docstring).

  Extra attributes (the base's `n_step` is 1: the loss has bootstrap_n):
    sequence_length: L = burn_in + trace_length + 1.
    sequence_period: P.
    epsilons: each env's exploration rate `[N]` (a tuple).
    evaluation_epsilon: the greedy policy's exploration floor.
  """

  sequence_length: int = 1
  sequence_period: int = 1
  epsilons: tuple[float, ...] = ()
  evaluation_epsilon: float = 0.0

  def init(self, train) -> SequenceLearner:
    """Empty ring and replay (through numpy: no weak types)."""
    obs = self.env.observation_space
    length, n = self.sequence_length, self.n_envs
    core = jax.tree.map(np.asarray, self.network.initial_state(n))
    ring = types.Segment(
      observation=np.zeros((length, n) + obs.shape, obs.dtype),
      action=np.zeros((length, n), np.int32),
      reward=np.zeros((length, n), np.float32),
      discount=np.zeros((length, n), np.float32),
      mask=np.zeros((length, n), np.float32),
      core_state=jax.tree.map(lambda c: np.stack([c] * length), core),
    )
    example = jax.tree.map(lambda x: x[:, 0], ring)._replace(
      core_state=jax.tree.map(lambda c: c[0], core)
    )
    learner = SequenceLearner(
      train=train,
      history=History(ring, np.zeros(n, np.int32)),
      replay=self.table.init(example),
      env_steps=np.zeros((), np.int32),
    )
    return jax.tree.map(np.asarray, learner)

  def _act(self, learner, key, obs, core, first, epsilon):
    core = recurrent.reset_where(first, core)
    out, next_core = self.network.apply(learner.train.params, obs, core)
    action = policies.epsilon_greedy(out.q_values, key, epsilon)
    return action, {'core': core}, next_core

  def policy(self, learner, key, obs, core, first):
    """Epsilon-greedy with each env's own rate; keeps the core before."""
    epsilon = jnp.asarray(self.epsilons, jnp.float32)
    return self._act(learner, key, obs, core, first, epsilon)

  def greedy(self, learner, key, obs, core, first):
    """Epsilon-greedy at the evaluation floor (0: greedy)."""
    return self._act(learner, key, obs, core, first, self.evaluation_epsilon)

  def _insert(self, learner: SequenceLearner, steps: rollout.Rollout):
    history, segments, ok = cut_segments(
      learner.history,
      steps,
      steps.agent_info['core'],
      self.sequence_period,
      self.gamma,
    )
    replay, _ = self.table.insert(
      learner.replay, segments, adders.NEW_ITEM_PRIORITY, ok
    )
    return learner._replace(
      history=history,
      replay=replay,
      env_steps=learner.env_steps + self.n_steps * self.n_envs,
    )

  def program(self) -> device_epoch.DeviceProgram:
    return dataclasses.replace(
      super().program(), initial_core=self.network.initial_state
    )
