"""The actor-critics (A2C, PPO, AWR, SamplingAWR, separate or joint) as one
program.

`ActorCriticProgram` is the whole algorithm of the actor-critic agents,
for every source; the algorithm itself is the layout's pure epoch
function, `layout.train_on_batch(states, data, idx, key)` (see
`agents.actor_critic`), which the program feeds:

- `act`: samples the policy at `temperature` on observations normalized by
  the learner's running statistics (frozen while acting), keeping the
  distribution inputs in the info (the behaviour policy).
- `observe`: merges the rollout's valid observations into the statistics
  (with `normalize_observations`), packs its steps env by env end to end
  (`EpochData`: a termination is `terminal`, any other end of a
  trajectory, a time limit or the rollout's last valid step, a `boundary`
  that bootstraps) and writes them into the ring of the last
  `n_replay_epochs` epochs.
- `learn`: the ring's steps, observations normalized, in minibatches of
  passes over the shuffled valid steps (the layout's shapes), through
  `train_on_batch`.

Trax normalized observations with statistics updated before each action
of a collection; here they are updated once per rollout with all of its
observations, so acting within a rollout uses the statistics of its
start (as on the device).
"""

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import normalization, policies
from trax_rl.algorithms import program as program_lib
from trax_rl.algorithms.layouts import data as data_lib
from trax_rl.algorithms.layouts import layout as layout_lib
from trax_rl.device import batches
from trax_rl.device import rollout as rollout_lib


class ActorCriticLearner(NamedTuple):
  """What the actor-critic program trains and carries between rollouts."""

  states: dict[str, Any]  # {train-state name: TrainState}
  stats: normalization.RunningStatistics
  ring: data_lib.EpochData  # fields [E, M, ...]: the last E rollouts
  filled: Any  # [E] bool, slots holding a rollout
  epochs: Any  # [] int32, rollouts observed (the next slot: epochs % E)


def pack(rollout: rollout_lib.Rollout, offline: bool) -> data_lib.EpochData:
  """A rollout's steps env by env end to end, `[N * T, ...]`.

  A step is `terminal` where its episode terminated, `boundary` where its
  trajectory ends otherwise: a time limit, or the env's last valid step
  (each env's valid steps are a prefix). Invalid steps have mask 0.
  """
  valid = rollout.valid
  n_steps = valid.shape[0]
  last_valid = jnp.sum(valid, axis=0) - 1  # [N]
  is_last = jnp.arange(n_steps)[:, None] == last_valid[None, :]
  ends = rollout.terminated | rollout.truncated | is_last
  boundary = ends & ~rollout.terminated & valid
  flat = batches.env_major
  n = valid.size
  action = flat(rollout.action)
  if offline:  # The stored actions are the behaviour policy's means.
    dist_inputs = action.reshape(n, -1).astype(jnp.float32)
  else:
    dist_inputs = flat(rollout.agent_info['dist_inputs']).reshape(n, -1)
  mask = flat(valid).astype(jnp.float32)
  return data_lib.EpochData(
    observation=flat(rollout.observation),
    action=action,
    reward=flat(rollout.reward) * mask,
    terminal=flat(rollout.terminated & valid).astype(jnp.float32),
    boundary=flat(boundary).astype(jnp.float32),
    next_observation=flat(rollout.next_observation),
    dist_inputs=dist_inputs.astype(jnp.float32),
    mask=mask,
  )


def valid_minibatches(
  key: jax.Array, mask: jax.Array, shape: tuple[int, ...], max_passes: int
) -> jax.Array:
  """Indices `shape` (`[..., B]`): passes over shuffled valid steps.

  Pass p is a random order of the steps where `mask` (valid first, so its
  first `n_valid` entries are a permutation of the valid steps); the
  indices are passes 0, 1, ... end to end, so every valid step comes once
  per pass. At most `max_passes`
  distinct orders are drawn; more passes reuse them in turn.
  """
  n = mask.shape[0]
  needed = int(np.prod(shape))
  keys = jax.random.split(key, max_passes)
  noise = jax.vmap(lambda k: jax.random.uniform(k, (n,)))(keys)
  orders = jnp.argsort(jnp.where(mask[None, :] > 0, noise, 2.0), axis=1)
  n_valid = jnp.maximum(jnp.sum(mask > 0), 1).astype(jnp.int32)
  j = jnp.arange(needed)
  index = orders[(j // n_valid) % max_passes, j % n_valid]
  return index.reshape(shape)


@dataclasses.dataclass(frozen=True)
class ActorCriticProgram:
  """The actor-critics' pure functions (see the module docstring).

  Attributes:
    layout: the network layout (`separate.Separate` or `joint.Joint`).
    distribution: the policy's action distribution.
    example_observation: one observation (shapes of the store).
    n_envs: N, envs per rollout.
    n_steps: T, the longest rollout a ring slot holds.
    n_replay_epochs: E, rollouts the ring keeps (1 on-policy).
    normalize: normalize observations by running statistics.
    sample_limit: stop updating the statistics after this many.
    norm_epsilon: added to the std when normalizing.
    norm_clip: clip normalized observations to [-clip, clip] (or None).
    offline: the stored actions are the behaviour policy's means.
    padded: rollouts may hold invalid steps, or the ring several rollouts:
      minibatches then pass over the valid steps only (`valid_minibatches`).
  """

  layout: Any
  distribution: Any
  example_observation: np.ndarray
  n_envs: int
  n_steps: int
  n_replay_epochs: int = 1
  normalize: bool = False
  sample_limit: float = float('inf')
  norm_epsilon: float = 1e-5
  norm_clip: float | None = None
  offline: bool = False
  padded: bool = False

  def _normalized(self, stats, obs):
    if not self.normalize:
      return obs
    return normalization.normalize(
      stats, obs, self.norm_epsilon, self.norm_clip
    )

  def init(self, key: jax.Array) -> ActorCriticLearner:
    obs = self.example_observation
    size = self.n_envs * self.n_steps
    n_inputs = self.distribution.n_inputs
    action = jax.eval_shape(
      lambda: self.distribution.sample(
        jnp.zeros((1, n_inputs)), jax.random.PRNGKey(0), 1.0
      )
    )
    ring = data_lib.EpochData(
      observation=np.zeros((size, *obs.shape), obs.dtype),
      action=np.zeros((size, *action.shape[1:]), action.dtype),
      reward=np.zeros(size, np.float32),
      terminal=np.zeros(size, np.float32),
      boundary=np.zeros(size, np.float32),
      next_observation=np.zeros((size, *obs.shape), obs.dtype),
      dist_inputs=np.zeros((size, n_inputs), np.float32),
      mask=np.zeros(size, np.float32),
    )
    e = self.n_replay_epochs
    return ActorCriticLearner(
      states=layout_lib.init_states(self.layout.specs, key),
      stats=jax.tree.map(np.asarray, normalization.init_statistics(obs.shape)),
      ring=jax.tree.map(lambda x: np.stack([x] * e), ring),
      filled=np.zeros(e, bool),
      epochs=np.zeros((), np.int32),
    )

  def acting(self, learner: ActorCriticLearner) -> ActorCriticLearner:
    """What `act` reads: the acting network's state and the statistics."""
    name = self.layout.acting_name
    return learner._replace(
      states={name: learner.states[name]}, ring=(), filled=()
    )

  def act(self, learner: ActorCriticLearner, key, obs, temperature: float):
    params = learner.states[self.layout.acting_name].params
    out = self.layout.acting_network.apply(
      params, self._normalized(learner.stats, obs)
    )
    dist_inputs = out[0] if isinstance(out, tuple) else out
    action = policies.sample_action(
      self.distribution, dist_inputs, key, temperature
    )
    return action, {'dist_inputs': dist_inputs}

  def observe(
    self, learner: ActorCriticLearner, rollout: rollout_lib.Rollout
  ) -> ActorCriticLearner:
    stats = learner.stats
    if self.normalize:
      obs = batches.env_major(rollout.observation)
      valid = batches.env_major(rollout.valid)
      stats = normalization.update(stats, obs, self.sample_limit, valid)
    data = pack(rollout, self.offline)
    slot = learner.epochs % self.n_replay_epochs
    size = data.mask.shape[0]
    if size > learner.ring.mask.shape[1]:
      raise ValueError(
        f'a rollout of {size} steps exceeds the {learner.ring.mask.shape[1]} '
        'this actor-critic program was built for'
      )

    def write(ring, x):
      row = jnp.zeros(ring.shape[1:], ring.dtype).at[:size].set(x)
      return ring.at[slot].set(row)

    return learner._replace(
      stats=stats,
      ring=jax.tree.map(write, learner.ring, data),
      filled=learner.filled.at[slot].set(True),
      epochs=learner.epochs + 1,
    )

  def learn(self, learner: ActorCriticLearner, key: jax.Array):
    ring = learner.ring._replace(
      mask=learner.ring.mask * learner.filled[:, None]
    )
    data = jax.tree.map(lambda x: x.reshape((-1, *x.shape[2:])), ring)
    data = data._replace(
      observation=self._normalized(learner.stats, data.observation),
      next_observation=self._normalized(learner.stats, data.next_observation),
    )
    n = data.mask.shape[0]
    shapes = self.layout.minibatch_shapes()
    idx_key, train_key = jax.random.split(key)
    if self.padded:
      idx = {}
      for i, (name, shape) in enumerate(sorted(shapes.items())):
        needed = int(np.prod(shape))
        n_orders = -(-needed // max(n // 4, 1)) + 1
        idx[name] = valid_minibatches(
          jax.random.fold_in(idx_key, i), data.mask, shape, n_orders
        )
    else:
      idx = passes(idx_key, shapes, n)
    if not self.layout.uses_key:
      train_key = jnp.zeros(2, jnp.uint32)  # Drawn from by nobody.
    states, metrics = self.layout.train_on_batch(
      learner.states, data, idx, train_key
    )
    return learner._replace(states=states), metrics

  def program(self) -> program_lib.Program:
    return program_lib.Program.of(self)


def passes(
  key: jax.Array, shapes: dict[str, tuple[int, ...]], n: int
) -> dict[str, jax.Array]:
  """Indices of `shapes` (`[..., B]`): passes over shuffled 0..n-1.

  Every step valid: the device's fast shuffles (`batches.permutations`).
  """
  out = {}
  for i, (name, shape) in enumerate(sorted(shapes.items())):
    n_steps = int(np.prod(shape[:-1]))
    idx = batches.minibatch_indices(
      jax.random.fold_in(key, i), n, n_steps, shape[-1]
    )
    out[name] = idx.reshape(shape)
  return out
