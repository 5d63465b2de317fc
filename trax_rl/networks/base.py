"""Networks as pairs of pure functions."""

import dataclasses
import functools
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
    The Network whose `init(key)` builds parameters for that observation
    shape (`jitted_init`).
  """
  return Network(
    init=jitted_init(_init_batch, module, example_observation),
    apply=module.apply,
  )


def _init_batch(module: nn.Module, shape, dtype, key) -> types.Params:
  return module.init(key, jnp.zeros((1, *shape), dtype))


def jitted_init(
  init: Callable[..., types.Params],
  module: nn.Module,
  example_observation: np.ndarray,
) -> Callable[[types.PRNGKey], types.Params]:
  """`key -> init(module, shape, dtype, key)` as one compiled program.

  Flax's init op by op compiles every op of a new shape on its own: about
  1.5 s of a cold start on two CPUs, against one compile of the whole init.
  Equal hashable modules over the same observation shape (the agents of a
  seed batch, a rebuilt agent) share that compile; a module with
  unhashable attributes compiles its own. The parameters are the same as
  op by op.

  Args:
    init: a module-level function `(module, shape, dtype, key) -> params`.
    module: the flax module.
    example_observation: one observation (no batch axis).
  """
  example = np.asarray(example_observation)
  static = (init, module, example.shape, example.dtype)
  try:
    hash(static)
  except TypeError:  # Unhashable module attributes (a list).
    return jax.jit(functools.partial(init, *static[1:]))
  return functools.partial(_shared_init, *static)


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _shared_init(init, module, shape, dtype, key) -> types.Params:
  return init(module, shape, dtype, key)


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
