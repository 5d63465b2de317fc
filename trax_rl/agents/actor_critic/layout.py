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
  next_key: Callable[[], jax.Array]
