"""Networks as pairs of pure functions."""

import dataclasses
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import types


@dataclasses.dataclass(frozen=True)
class Network:
  """A pair of pure functions. Holds no parameters and no state."""

  init: Callable[[types.PRNGKey], types.Params]
  apply: Callable[..., Any]  # apply(params, obs[B, ...]) -> output


def from_module(module: nn.Module, example_observation: np.ndarray) -> Network:
  """Wraps a flax module taking `[B, ...]` observations as a `Network`.

  Args:
    module: the flax module; its `__call__` takes a batch of observations.
    example_observation: one observation (no batch axis), for shapes at init.

  Returns:
    The Network whose `init(key)` builds parameters for that observation shape.
  """
  dummy = jnp.zeros(
    (1,) + np.shape(example_observation), jnp.asarray(example_observation).dtype
  )
  return Network(init=lambda key: module.init(key, dummy), apply=module.apply)


@dataclasses.dataclass(frozen=True)
class RecurrentNetwork:
  """Pure functions of a recurrent network.

  init(key) -> params
  apply(params, obs[B, ...], state) -> (output, new_state)   one step
  unroll(params, obs[T, B, ...], state, first[T, B]) -> (output[T, B, ...], state)
  initial_state(batch_size) -> state (zeros)
  """

  init: Callable[[types.PRNGKey], types.Params]
  apply: Callable[..., Any]
  unroll: Callable[..., Any]
  initial_state: Callable[[int], Any]


def count_params(params: types.Params) -> int:
  """Number of scalars in a parameter pytree."""
  return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
