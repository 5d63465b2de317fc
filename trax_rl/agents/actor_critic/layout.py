"""What a network layout (separate or joint networks) is given and gives.

A layout (`separate.Separate`, `joint.Joint`) builds the network(s), their
optimizers and `Trainer`s, and the pure epoch function
`train_on_batch(states, data, idx, key) -> (states, metrics)`. The agent
(`agent.ActorCritic`) gives it a `Context`: what the algorithm and the task
decide. The layout decides how parameters and optimizers are split.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from trax_rl import validation
from trax_rl.agents.actor_critic import data as data_lib

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
    next_key: draws the next PRNG key of the agent (trainers' seeds).
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
  next_key: Callable[[], jax.Array]


def check_counts(counts: dict[str, int], steps_name: str) -> None:
  """Every count >= 1; counts[steps_name] a multiple of the value evals.

  Args:
    counts: knob name -> value; must hold 'value_evals_per_epoch'.
    steps_name: the knob of the updates the value evals divide.

  Raises:
    ValueError: naming the knob.
  """
  for name, value in counts.items():
    validation.check_count(name, value, 1)
  steps, evals = counts[steps_name], counts['value_evals_per_epoch']
  if steps % evals:
    raise ValueError(
      f'{steps_name} ({steps}) must be a multiple of value_evals_per_epoch '
      f'({evals})'
    )
