"""The policy-only agents (PolicyGradient, ExpertIteration) as one program.

`PolicyProgram` is the whole algorithm of Trax's `LoopPolicyAgent`s, for
every source:

- `act`: samples the policy network at `temperature` (times the expert's
  `temperature_multiplier`: ExpertIteration's sharpened expert) on
  observations normalized by the learner's running statistics.
- `observe`: merges the rollout's valid observations into the statistics
  (with `normalize_observations`) and stores the rollout in a ring of the
  last `n_replay_epochs` epochs (`replay.slices`), cut into trajectories
  as `RLTask` stores them.
- `learn`: `n_train_steps` updates of the weighted log-likelihood loss;
  after each update whose global step `eval_at` accepts (Trax's Loop
  default: step 1 and every 100th), the loss metrics on `eval_batches`
  batches drawn with keys of their own (so evaluating changes no update),
  kept in the learner until the next evaluation. A batch is `batch_size` slices of
  `slice_length` steps (whole trajectories if None), each drawn as Trax's
  `trajectory_batch_stream(sample_trajectories_uniformly=True)` draws it:
  an epoch in proportion to its slices, a trajectory uniformly in it, a
  start uniformly. ExpertIteration's filter draws trajectories in buffers
  of `filter_buffer_size` that way, keeps the best (1 - quantile) of each
  by discounted return from their first step, and takes one slice of
  each kept trajectory, buffer after buffer, as Trax's filtered stream.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import normalization, policies
from trax_rl.algorithms import program as program_lib
from trax_rl.device import rollout as rollout_lib
from trax_rl.networks import base as networks
from trax_rl.replay import slices
from trax_rl.supervised import update as update_lib


class PolicyLearner(NamedTuple):
  """What the policy program trains and carries from epoch to epoch."""

  train: Any  # TrainState of the policy network
  stats: normalization.RunningStatistics
  ring: slices.SliceRing
  observed: Any  # [] int32, rollouts stored (the next slot: observed % E)
  evaluation: Any  # the latest evaluation's metrics, and its 'step' (0: none)


def trax_eval_at(step: jax.Array) -> jax.Array:
  """Trax's `Loop` default: evaluate after update 1 and every 100th."""
  return (step == 1) | (step % 100 == 0)


@dataclasses.dataclass(frozen=True)
class PolicyProgram:
  """The policy agents' pure functions (see the module docstring).

  Attributes:
    network: the policy network (apply returns the distribution inputs).
    loss_fn: `WeightedLogLikelihood`.
    optimizer: the optax transformation.
    distribution: the action distribution.
    example_observation: one observation (shapes of the ring).
    n_envs: N, envs per rollout.
    n_steps: T, the longest rollout.
    n_replay_epochs: E, epochs the slices come from.
    gamma: the task's discount (rewards-to-go).
    batch_size: slices per update.
    slice_length: L, or None for whole trajectories.
    train_steps: updates per epoch.
    eval_at: `step -> bool`, evaluate after the update that makes the
      global step count `step` (a Python function of an int; None: Trax's
      default, `trax_eval_at`).
    eval_batches: batches per evaluation.
    temperature_multiplier: the expert acts at temperature times this.
    quantile: ExpertIteration's filter: keep trajectories above it (None:
      no filter).
    filter_buffer_size: trajectories ranked together by the filter.
    normalize: normalize observations by running statistics.
    sample_limit: stop updating the statistics after this many.
    norm_epsilon: added to the std when normalizing.
    axis_name: across hosts, the processes' mapped axis.
  """

  network: networks.Network
  loss_fn: Any
  optimizer: Any
  distribution: Any
  example_observation: np.ndarray
  n_envs: int
  n_steps: int
  n_replay_epochs: int
  gamma: float
  batch_size: int
  slice_length: int | None
  train_steps: int
  eval_at: Callable[[int], bool] | None = None
  eval_batches: int = 1
  temperature_multiplier: float = 1.0
  quantile: float | None = None
  filter_buffer_size: int = 256
  normalize: bool = False
  sample_limit: float = float('inf')
  norm_epsilon: float = 1e-5
  axis_name: str | None = None

  def _normalized(self, stats, obs):
    if not self.normalize:
      return obs
    return normalization.normalize(stats, obs, self.norm_epsilon)

  def init(self, key: jax.Array) -> PolicyLearner:
    obs = self.example_observation
    action = jax.eval_shape(
      lambda: self.distribution.sample(
        jnp.zeros((1, self.distribution.n_inputs)), jax.random.PRNGKey(0), 1.0
      )
    )
    ring = slices.empty(
      self.n_replay_epochs,
      self.n_steps,
      self.n_envs,
      obs,
      np.zeros(action.shape[1:], action.dtype),
    )
    learner = PolicyLearner(
      train=update_lib.init_state(self.network, self.optimizer, key),
      stats=jax.tree.map(np.asarray, normalization.init_statistics(obs.shape)),
      ring=ring,
      observed=np.zeros((), np.int32),
      evaluation={},
    )

    def evaluate(learner):
      weights = slices.start_weights(learner.ring, self.slice_length, 0, True)
      return self._evaluate(learner, learner.train, jnp.cumsum(weights), key)

    shapes = jax.eval_shape(evaluate, learner)
    evaluation = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), shapes)
    return learner._replace(evaluation=evaluation)

  def acting(self, learner: PolicyLearner) -> PolicyLearner:
    return learner._replace(ring=())

  def act(self, learner: PolicyLearner, key, obs, temperature: float):
    dist_inputs = self.network.apply(
      learner.train.params, self._normalized(learner.stats, obs)
    )
    action = policies.sample_action(
      self.distribution,
      dist_inputs,
      key,
      temperature * self.temperature_multiplier,
    )
    return action, {'dist_inputs': dist_inputs}

  def observe(
    self, learner: PolicyLearner, rollout: rollout_lib.Rollout
  ) -> PolicyLearner:
    stats = learner.stats
    if self.normalize:
      flat = lambda x: x.reshape((-1, *x.shape[2:]))  # noqa: E731
      stats = normalization.update(
        stats, flat(rollout.observation), self.sample_limit, flat(rollout.valid)
      )
    slot = learner.observed % self.n_replay_epochs
    ring = slices.store(learner.ring, rollout, slot, self.gamma)
    return learner._replace(
      stats=stats, ring=ring, observed=learner.observed + 1
    )

  def _length(self) -> int:
    return self.slice_length or self.n_steps

  def _starts(self, ring: slices.SliceRing, cdf, key) -> jax.Array:
    """`batch_size` flat start indices (filtered for ExpertIteration)."""
    if self.quantile is None:
      return slices.draw(cdf, key, self.batch_size)
    n_best = max(int((1 - self.quantile) * self.filter_buffer_size), 1)
    n_buffers = -(-self.batch_size // n_best)
    n_envs = ring.position.shape[2]
    starts = slices.trajectory_starts(ring)
    # A trajectory as its epoch and uniformly in it: the start weights of
    # its first step summed over its starts.
    count = slices.n_starts(ring, self.slice_length, 0).reshape(-1)
    weights = jnp.where(starts, cdf_weights(cdf) * count, 0.0)
    traj_cdf = jnp.cumsum(weights)
    draw_key, start_key = jax.random.split(key)
    first = slices.draw(traj_cdf, draw_key, n_buffers * self.filter_buffer_size)
    first = first.reshape(n_buffers, self.filter_buffer_size)
    returns = ring.return_.reshape(-1)[first]
    _, best = jax.lax.top_k(returns, n_best)  # [n_buffers, n_best]
    chosen = jnp.take_along_axis(first, best, axis=1).reshape(-1)
    chosen = chosen[: self.batch_size]
    n = count[chosen]
    offset = jnp.floor(jax.random.uniform(start_key, chosen.shape) * n).astype(
      jnp.int32
    )
    return chosen + jnp.minimum(offset, n - 1) * n_envs

  def _batch(self, learner: PolicyLearner, cdf, key):
    index = self._starts(learner.ring, cdf, key)
    batch = slices.gather(learner.ring, index, self._length(), 0)
    return batch._replace(
      observation=self._normalized(learner.stats, batch.observation)
    )

  def _evaluate(self, learner, state, cdf, key) -> dict[str, jax.Array]:
    """Mean loss metrics of `state` over `eval_batches` fresh batches."""

    def one(key):
      loss, extra = self.loss_fn(
        self.network, state.params, (), self._batch(learner, cdf, key), key
      )
      return dict(extra.metrics, loss=loss)

    keys = jax.random.split(key, self.eval_batches)
    metrics = jax.tree.map(jnp.mean, jax.vmap(one)(keys))
    return dict(metrics, step=jnp.asarray(state.step, jnp.int32))

  def _eval_mask(self, first_step: jax.Array) -> jax.Array:
    """`[train_steps]` bool: evaluate after each of the epoch's updates."""
    steps = first_step + jnp.arange(1, self.train_steps + 1)
    if self.eval_at is None:
      return trax_eval_at(steps)
    at = self.eval_at  # A Python predicate: asked on the host, once an epoch.
    return jax.pure_callback(
      lambda s: np.array([bool(at(int(x))) for x in s], bool),
      jax.ShapeDtypeStruct(steps.shape, jnp.bool_),
      steps,
      vmap_method='sequential',
    )

  def learn(self, learner: PolicyLearner, key: jax.Array):
    update = update_lib.make_update_fn(
      self.network, self.loss_fn, self.optimizer, axis_name=self.axis_name
    )
    weights = slices.start_weights(learner.ring, self.slice_length, 0, True)
    cdf = jnp.cumsum(weights)
    train_key, eval_key = jax.random.split(key)

    def one_update(carry, xs):
      state, evaluation = carry
      key, evaluate_now, eval_key = xs
      state, extra = update(state, self._batch(learner, cdf, key))
      evaluation = jax.lax.cond(
        evaluate_now,
        lambda: self._evaluate(learner, state, cdf, eval_key),
        lambda: evaluation,
      )
      return (state, evaluation), extra.metrics

    xs = (
      jax.random.split(train_key, self.train_steps),
      self._eval_mask(learner.train.step),
      jax.random.split(eval_key, self.train_steps),
    )
    (state, evaluation), metrics = jax.lax.scan(
      one_update, (learner.train, learner.evaluation), xs
    )
    record = {f'policy/{k}': jnp.mean(v) for k, v in metrics.items()}
    record.update({f'policy_eval/{k}': v for k, v in evaluation.items()})
    return learner._replace(train=state, evaluation=evaluation), record

  def program(self) -> program_lib.Program:
    return program_lib.Program.of(
      self,
      whole_episodes=self.quantile is not None,
      train_name='policy',
    )


def cdf_weights(cdf: jax.Array) -> jax.Array:
  """The probabilities a cumulative distribution was summed from."""
  return jnp.diff(cdf, prepend=0.0)
