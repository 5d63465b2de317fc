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
     step. Each env's last `L + 2T` writes (a ring, `History`) and its
     position in the running episode carry to the next epoch, so episodes
     span epochs as on the host;
  3. insert the segments at `adders.NEW_ITEM_PRIORITY`, reading from the
     ring only the rows that are segments;
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
from trax_rl.device import batched_loop, rollout, value_epoch
from trax_rl.device import epoch as device_epoch
from trax_rl.networks import recurrent
from trax_rl.replay import adders

SLOTS = 3  # Segments one env can end per step: full, full at the end, padded.


class History(NamedTuple):
  """Each env's last R writes (a ring) and its place in its running episode.

  Every env step writes one entry, and an episode's end a second one (its
  final observation); entry w of an env lives in slot `w % R`. An epoch
  of T steps writes at most 2T entries per env, so with R >= L + 2T every
  segment the epoch completes is still in the ring when the epoch ends.
  """

  ring: types.Segment  # fields [R, N, ...]; core_state leaves [R, N, H]
  position: Any  # [N] int32, positions of the running episode so far
  head: Any  # [N] int32, the slot of each env's next write


class Cuts(NamedTuple):
  """Where an epoch's segments lie in the ring, `[T * SLOTS * N]` rows in
  time, slot, env order (`cut_segments`)."""

  start: Any  # int32, the ring slot of the segment's first step
  count: Any  # int32, its real steps (the rest is zero padding)
  valid: Any  # bool, whether this row is a segment


class SequenceLearner(NamedTuple):
  """What the R2D2 program trains and carries from epoch to epoch."""

  train: Any  # TrainState
  history: History
  replay: Any  # DeviceReplay of Segments
  env_steps: Any  # [] int32


def ring_length(sequence_length: int, n_steps: int) -> int:
  """R for segments of L steps and epochs of T steps (see `History`)."""
  return sequence_length + 2 * n_steps


def _write(ring, head, entry, where):
  """Writes `entry` (fields [N, ...]) at each env's `head` where `where`."""
  slot = jnp.where(where, head, ring.mask.shape[0])  # Out of range: kept.
  env = jnp.arange(head.shape[0])
  return jax.tree.map(
    lambda r, e: r.at[slot, env].set(e.astype(r.dtype), mode='drop'),
    ring,
    entry,
  )


def read_segments(
  ring: types.Segment, cuts: Cuts, rows: jax.Array, n_envs: int, length: int
) -> types.Segment:
  """Segments `rows` [C] of `cuts`, read from the ring: fields `[C, L, ...]`.

  Steps past a segment's `count` are zeros; its core state is the one
  before its first step.
  """
  size = ring.mask.shape[0]
  start, count = cuts.start[rows], cuts.count[rows]
  env = (rows % n_envs)[:, None]
  offsets = jnp.arange(length)[None, :]
  slots = (start[:, None] + offsets) % size  # [C, L]
  real = offsets < count[:, None]

  def gather(r):
    x = r[slots, env]  # [C, L, ...]
    keep = real.reshape(real.shape + (1,) * (x.ndim - 2))
    return jnp.where(keep, x, jnp.zeros_like(x))

  fields = {
    name: gather(getattr(ring, name))
    for name in ('observation', 'action', 'reward', 'discount', 'mask')
  }
  core = jax.tree.map(lambda c: c[start, env[:, 0]], ring.core_state)
  return types.Segment(**fields, core_state=core)


def cut_segments(
  history: History,
  steps: rollout.Rollout,
  core: Any,
  length: int,
  period: int,
  gamma: float,
) -> tuple[History, Cuts]:
  """The segments `steps` complete, as `replay.SequenceAdder` cuts them.

  Only where they lie is computed here; `read_segments` reads the valid
  ones from the returned ring (most rows are not segments: an epoch of
  32 steps of 16 envs has 1536 rows and about 50 segments).

  Args:
    history: the envs' ring (`History`) before the steps.
    steps: the rollout, fields `[T, N, ...]`.
    core: the core state before each step, leaves `[T, N, ...]`.
    length: L, the steps of a segment.
    period: a segment starts every this many positions of an episode.
    gamma: discount per step.

  Returns:
    (history after the steps, Cuts `[T * SLOTS * N]`).
  """
  size = history.ring.mask.shape[0]
  zero_core = jax.tree.map(lambda c: jnp.zeros_like(c[0]), core)

  def full(base, position):
    """The segment that `position` completes, and whether one does."""
    start = position - length + 1
    ok = (start >= 0) & (start % period == 0)
    return (base + start) % size, jnp.full_like(start, length), ok

  def body(history, step):
    ring, position, head = history
    step, core_t = step
    done = step.terminated | step.truncated
    ones = jnp.ones_like(step.reward)
    base = head - position  # The slot of the episode's first step, mod R.
    real = types.Segment(
      observation=step.observation,
      action=step.action,
      reward=step.reward,
      discount=gamma * (1.0 - step.terminated.astype(jnp.float32)),
      mask=ones,
      core_state=core_t,
    )
    ring = _write(ring, head, real, jnp.ones_like(done))
    first = full(base, position)
    final = types.Segment(
      observation=step.next_observation,
      action=jnp.zeros_like(step.action),
      reward=0.0 * ones,
      discount=0.0 * ones,
      mask=0.0 * ones,
      core_state=zero_core,
    )
    last = position + 1  # The final observation's position, if done.
    ring = _write(ring, (head + 1) % size, final, done)
    second = full(base, last)
    # The padded segment from the first start no full segment took.
    start = jnp.where(
      last >= length - 1, ((last - length + 1) // period + 1) * period, 0
    )
    padded = ((base + start) % size, last - start + 1, done & (start < last))
    out = Cuts(
      *(
        jnp.stack(x)
        for x in zip(first, second[:2] + (second[2] & done,), padded)
      )
    )
    head = (head + 1 + done) % size
    position = jnp.where(done, 0, position + 1)
    return History(ring, position, head), out

  history, cuts = jax.lax.scan(body, history, (steps, core))
  return history, jax.tree.map(lambda x: x.reshape(-1), cuts)


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
    size = ring_length(length, self.n_steps)
    core = jax.tree.map(np.asarray, self.network.initial_state(n))
    ring = types.Segment(
      observation=np.zeros((size, n) + obs.shape, obs.dtype),
      action=np.zeros((size, n), np.int32),
      reward=np.zeros((size, n), np.float32),
      discount=np.zeros((size, n), np.float32),
      mask=np.zeros((size, n), np.float32),
      core_state=jax.tree.map(lambda c: np.stack([c] * size), core),
    )
    example = jax.tree.map(lambda x: x[:length, 0], ring)._replace(
      core_state=jax.tree.map(lambda c: c[0], core)
    )
    zeros = np.zeros(n, np.int32)
    learner = SequenceLearner(
      train=train,
      history=History(ring, zeros, zeros),
      replay=self.table.empty(example),
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
    """Cuts the epoch's segments and inserts the valid ones, in order.

    The valid rows are read and inserted `chunk` at a time, in a loop of
    as many chunks as there are segments. Reading and inserting every row
    (1536 in R2D2's CartPole config, for about 50 segments) cost about as
    much as the rollout for one seed, and about twice the rollout with 3
    seeds vmapped.
    """
    history, cuts = cut_segments(
      learner.history,
      steps,
      steps.agent_info['core'],
      self.sequence_length,
      self.sequence_period,
      self.gamma,
    )
    rows = cuts.valid.shape[0]
    # About an epoch's full segments: usually one or two chunks.
    chunk = min(rows, self.n_envs * (self.n_steps // self.sequence_period + 1))
    n_valid = jnp.sum(cuts.valid, dtype=jnp.int32)
    order = jnp.flatnonzero(cuts.valid, size=rows + chunk, fill_value=0)

    def cond(state):
      return state[1] * chunk < n_valid

    def body(state, active):
      # A seed with no chunk left (`active` False under a seed vmap) has
      # no valid row in it, so its insert writes nothing.
      del active
      replay, i = state
      first = i * chunk
      index = jax.lax.dynamic_slice(order, (first,), (chunk,))
      segments = read_segments(
        history.ring, cuts, index, self.n_envs, self.sequence_length
      )
      valid = first + jnp.arange(chunk) < n_valid
      replay, _ = self.table.insert(
        replay, segments, adders.NEW_ITEM_PRIORITY, valid
      )
      return replay, i + 1

    replay, _ = batched_loop.while_any(
      cond, body, (learner.replay, jnp.zeros((), jnp.int32))
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
