"""The state of one training engine, as a pytree."""

from typing import Any, NamedTuple

import jax


class TrainState(NamedTuple):
  """Everything a jitted update reads and writes.

  `key` is a raw uint32 PRNG key (`jax.random.PRNGKey`), so the state is a
  pytree of plain arrays and can be checkpointed as is. `health` is an
  `update.Health` where the update checks for non-finite values, `()` where
  it does not; it is run-time bookkeeping, not part of a checkpoint.
  """

  params: Any
  target_params: Any  # () where the loss has no target network.
  opt_state: Any
  step: jax.Array  # int32 scalar: updates applied so far.
  key: jax.Array  # [2] uint32.
  health: Any = ()  # update.Health, or () when not checked.

  def acting(self) -> 'TrainState':
    """What acting reads: the state without optimizer state, target
    parameters and health (they stay `()`)."""
    return self._replace(target_params=(), opt_state=(), health=())
