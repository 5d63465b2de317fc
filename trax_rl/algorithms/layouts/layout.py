"""What a network layout (separate or joint networks) is given and gives.

A layout (`separate.Separate`, `joint.Joint`) builds the network(s) and
their optimizers (`specs`: train-state name -> (network, optimizer)) and
the pure epoch function `train_on_batch(states, data, idx, key) ->
(states, metrics)`. The agent (`agent.ActorCritic`) gives it a `Context`:
what the algorithm and the task decide. The layout decides how parameters
and optimizers are split.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from trax_rl import validation
from trax_rl.algorithms.layouts import data as data_lib
from trax_rl.supervised import update

# estimate(data, values [N], next_values [N]) -> (advantages, targets).
Estimate = Callable[
  [data_lib.EpochData, jax.Array, jax.Array], tuple[jax.Array, jax.Array]
]


@dataclasses.dataclass(frozen=True)
class Context:
  """What a layout is built from.

  Attributes:
    distribution: the policy's action distribution.
    example_observation: one observation, for the shapes at init.
    action_space: the env's action space.
    gamma: the discount.
    on_policy: advantages once per epoch with the acting network (A2C,
      PPO), or recomputed with the trained one (AWR).
    estimate: advantages and value targets of packed steps.
    make_policy_loss: `f(value_loss_coeff or None, all_discrete) -> loss`:
      the algorithm's loss on a policy (None) or a joint network;
      all_discrete says sampled actions enumerate all discrete actions.
    sampled_actions: the policy loss takes `SamplingBatch`es of actions
      sampled per state and their Q-values (Sampling AWR).
    max_slice_length: Trax's slice length: batch sizes are multiplied by it.
    max_gradient_norm: clip each network's gradients to this global norm.
  """

  distribution: Any
  example_observation: Any
  action_space: Any
  gamma: float
  on_policy: bool
  estimate: Estimate
  make_policy_loss: Callable[[float | None, bool], Any]
  sampled_actions: bool
  max_slice_length: int
  max_gradient_norm: float | None


def check_counts(counts: dict[str, int], rounds: dict[str, str]) -> None:
  """Counts >= 1 (`*_eval_steps` >= 0); each rounds knob divides its steps.

  Args:
    counts: knob name -> value.
    rounds: rounds knob -> the knob of the updates it divides, e.g.
      {'value_evals_per_epoch': 'value_train_steps_per_epoch'}.

  Raises:
    ValueError: naming the knob.
  """
  for name, value in counts.items():
    validation.check_count(name, value, 0 if name.endswith('eval_steps') else 1)
  for name, steps_name in rounds.items():
    steps, evals = counts[steps_name], counts[name]
    if steps % evals:
      raise ValueError(
        f'{steps_name} ({steps}) must be a multiple of {name} ({evals})'
      )


def init_states(specs: dict[str, Any], key: jax.Array) -> dict[str, Any]:
  """A fresh TrainState per network of `specs`, each from its own key."""
  return {
    name: update.init_state(network, optimizer, jax.random.fold_in(key, i))
    for i, (name, (network, optimizer)) in enumerate(specs.items())
  }


def evaluate(
  loss_fn: Any,
  network: Any,
  state: Any,
  make_batch: Callable[[jax.Array], Any],
  round_idx: jax.Array,
  n_batches: int,
) -> dict[str, jax.Array]:
  """Trax's supervised eval: mean loss metrics on batches, no update.

  Args:
    loss_fn: the trainer's loss, `loss(network, params, target_params,
      batch, key)`.
    network: its network.
    state: the TrainState to evaluate.
    make_batch: step indices [B] -> the loss's batch.
    round_idx: the round's minibatch indices [K, B]; the eval takes its
      first `n_batches` rows (cycling when there are fewer), so it draws
      no randomness of its own.
    n_batches: batches to evaluate (0: no eval, empty metrics).

  Returns:
    The mean of each metric and of 'loss' over the batches.
  """
  if not n_batches:
    return {}
  rows = round_idx[jnp.arange(n_batches) % round_idx.shape[0]]

  def one(i):
    value, extra = loss_fn(
      network, state.params, state.target_params, make_batch(i), state.key
    )
    return dict(extra.metrics, loss=value)

  return jax.tree.map(jnp.mean, jax.lax.map(one, rows))


def last_round(metrics: dict[str, jax.Array]) -> dict[str, jax.Array]:
  """The last round's values of per-round `[R]` metrics."""
  return jax.tree.map(lambda x: x[-1], metrics)
