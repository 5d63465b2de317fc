"""R2D2 as one program: a recurrent policy and sequence replay.

`SequenceProgram` is the whole algorithm of the `R2D2` agent, for every
source, built on `value.ValueProgram` (the same learner calls, rate
limiter, target syncs, priority writes and evals):

- `act`: the LSTM policy; each env's core is zeroed where its episode
  starts and the core before the step is kept in the step's info; env i
  explores with its own Ape-X epsilon (training) or at the evaluation
  floor (temperature 0).
- `observe`: cuts the valid steps into segments as Acme's sequence adder
  does (`cut_segments`): `L = burn_in + trace + 1` steps starting every
  `P` steps of an episode, the final observation a step of its own (mask
  0), one zero-padded segment at the episode's end for the steps no full
  segment reached, each segment with the core state before its first step.
  Each env's last `L + 2T` writes (a ring, `History`) and its position in
  the running episode carry to the next rollout, so episodes span
  rollouts; the segments go in at `NEW_ITEM_PRIORITY`, reading from the
  ring only the rows that are segments.
- `learn`: the value program's, on `R2D2Loss` (mixed priorities
  `eta max |td| + (1 - eta) mean |td|`).
"""

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import policies, types
from trax_rl.algorithms import program as program_lib
from trax_rl.algorithms import value
from trax_rl.device import batched_loop
from trax_rl.device import rollout as rollout_lib
from trax_rl.networks import recurrent

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
  """What the R2D2 program trains and carries from rollout to rollout."""

  train: Any  # TrainState
  history: History
  replay: Any  # DeviceReplay of Segments
  env_steps: Any  # [] int32
  new_items: Any  # [2] int32, keys [first, end) the last observe inserted


def ring_length(sequence_length: int, n_steps: int) -> int:
  """R for segments of L steps and rollouts of T steps (see `History`)."""
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
  steps: rollout_lib.Rollout,
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
    # A step past an env's valid prefix writes nothing and cuts nothing.
    live = step.valid
    done = (step.terminated | step.truncated) & live
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
    ring = _write(ring, head, real, live)
    first = full(base, position)
    first = first[:2] + (first[2] & live,)
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
    head = (head + live + done) % size
    position = jnp.where(done, 0, position + live)
    return History(ring, position, head), out

  history, cuts = jax.lax.scan(body, history, (steps, core))
  return history, jax.tree.map(lambda x: x.reshape(-1), cuts)


@dataclasses.dataclass(frozen=True)
class SequenceProgram(value.ValueProgram):
  """R2D2's pure functions (see the module docstring).

  Extra attributes (the base's `n_step` is 1: the loss has bootstrap_n):
    sequence_length: L = burn_in + trace_length + 1.
    sequence_period: P.
    max_rollout_steps: the longest rollout T `observe` takes (the ring
      holds L + 2T writes per env).
    epsilons: each env's exploration rate `[N]` (a tuple).
    evaluation_epsilon: the greedy policy's exploration floor.
  """

  sequence_length: int = 1
  sequence_period: int = 1
  max_rollout_steps: int = 1
  epsilons: tuple[float, ...] = ()
  evaluation_epsilon: float = 0.0

  def example_item(self) -> types.Segment:
    obs = self.example_observation
    length = self.sequence_length
    core = jax.tree.map(
      lambda c: np.zeros(c.shape[1:], c.dtype),
      jax.eval_shape(lambda: self.network.initial_state(1)),
    )
    return types.Segment(
      observation=np.zeros((length,) + obs.shape, obs.dtype),
      action=np.zeros(length, np.int32),
      reward=np.zeros(length, np.float32),
      discount=np.zeros(length, np.float32),
      mask=np.zeros(length, np.float32),
      core_state=core,
    )

  def init(self, key: jax.Array) -> SequenceLearner:
    """Empty ring and replay."""
    train = value.update_lib.init_state(
      self.network, self.optimizer, key, target=True
    )
    obs = self.example_observation
    n = self.n_envs
    size = ring_length(self.sequence_length, self.max_rollout_steps)
    core = jax.tree.map(
      lambda c: np.zeros(c.shape, c.dtype),
      jax.eval_shape(lambda: self.network.initial_state(n)),
    )
    ring = types.Segment(
      observation=np.zeros((size, n) + obs.shape, obs.dtype),
      action=np.zeros((size, n), np.int32),
      reward=np.zeros((size, n), np.float32),
      discount=np.zeros((size, n), np.float32),
      mask=np.zeros((size, n), np.float32),
      core_state=jax.tree.map(lambda c: np.stack([c] * size), core),
    )
    zeros = np.zeros(n, np.int32)
    return SequenceLearner(
      train=train,
      history=History(ring, zeros, zeros),
      replay=self.table.empty(self.example_item()),
      env_steps=np.zeros((), np.int32),
      new_items=np.zeros(2, np.int32),
    )

  def initial_core(self, n: int) -> Any:
    return self.network.initial_state(n)

  def act(self, learner, key, obs, temperature, core, first):
    """Epsilon-greedy with each env's rate at temperature 1 (training),
    `max(temperature * rate, evaluation_epsilon)` otherwise; the info
    holds the core before the step."""
    core = recurrent.reset_where(first, core)
    out, next_core = self.network.apply(learner.train.params, obs, core)
    rates = jnp.asarray(self.epsilons, jnp.float32)
    if rates.shape[0] != obs.shape[0]:  # Another batch (evaluation).
      rates = jnp.resize(rates, obs.shape[:1])
    if temperature == 1:  # The training behaviour.
      epsilon = rates
    else:  # Evaluation: at least the floor (0: greedy at temperature 0).
      epsilon = jnp.maximum(temperature * rates, self.evaluation_epsilon)
    action = policies.epsilon_greedy(out.q_values, key, epsilon)
    return action, {'core': core}, next_core

  def observe(
    self, learner: SequenceLearner, rollout: rollout_lib.Rollout
  ) -> SequenceLearner:
    """Cuts the rollout's segments and inserts the valid ones, in order.

    The valid rows are read and inserted `chunk` at a time, in a loop of
    as many chunks as there are segments (most rows are not segments:
    reading and inserting every row cost about as much as the rollout).
    """
    n_steps = rollout.reward.shape[0]
    if n_steps > self.max_rollout_steps:
      raise ValueError(
        f'a rollout of {n_steps} steps is longer than the {self.max_rollout_steps} '
        'this R2D2 program was built for'
      )
    history, cuts = cut_segments(
      learner.history,
      rollout,
      rollout.agent_info['core'],
      self.sequence_length,
      self.sequence_period,
      self.gamma,
    )
    rows = cuts.valid.shape[0]
    # About a rollout's full segments: usually one or two chunks.
    chunk = min(rows, self.n_envs * (n_steps // self.sequence_period + 1))
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
        replay, segments, value.NEW_ITEM_PRIORITY, valid
      )
      return replay, i + 1

    start = learner.replay.num_inserts
    replay, _ = batched_loop.while_any(
      cond, body, (learner.replay, jnp.zeros((), jnp.int32))
    )
    return learner._replace(
      history=history,
      replay=replay,
      env_steps=learner.env_steps + jnp.sum(rollout.valid, dtype=jnp.int32),
      new_items=jnp.stack([start, replay.num_inserts]),
    )

  def program(self) -> program_lib.Program:
    return program_lib.Program(
      init=self.init,
      act=self.act,
      observe=self.observe,
      learn=self.learn,
      initial_core=self.initial_core,
      acting=lambda learner: learner._replace(history=(), replay=()),
      streams=True,
      # Segments go in one at a time between updates: a chunk of any
      # length goes in once one segment can.
      can_observe=lambda learner, n: self.table.can_insert(learner.replay, 1),
    )
