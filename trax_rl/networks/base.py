"""Networks as pairs of pure functions."""

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import compile_options, types


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
  Inits that lower to the same program (the agents of a seed batch, a
  rebuilt agent) share that compile: the key is the lowered program's
  text, so that gin bindings read inside the module (a body's widths),
  which its hash does not see, still give their own program. The
  parameters are the same as op by op.

  Args:
    init: a function `(module, shape, dtype, key) -> params`.
    module: the flax module.
    example_observation: one observation (no batch axis).
  """
  example = np.asarray(example_observation)
  # float64 observations (MuJoCo's) are float32 on the device, as JAX runs.
  dtype = jax.dtypes.canonicalize_dtype(example.dtype)
  options = compile_options.current()
  traced = compile_options.jit(
    functools.partial(init, module, example.shape, dtype)
  )

  def run(key: types.PRNGKey) -> types.Params:
    if isinstance(key, jax.core.Tracer):  # Inside a transformation.
      return traced(key)
    lowered = traced.lower(key)
    # The same program under other compile options is another executable.
    program = (lowered.as_text(), repr(sorted(options.items())))
    compiled = _COMPILED_INITS.pop(program, None) or lowered.compile()
    _COMPILED_INITS[program] = compiled  # Most recently used last.
    while len(_COMPILED_INITS) > _MAX_COMPILED_INITS:
      del _COMPILED_INITS[next(iter(_COMPILED_INITS))]
    return compiled(key)

  return run


# Compiled inits by program text and compile options, least recently used
# first.
_COMPILED_INITS: dict[tuple[str, str], Any] = {}
_MAX_COMPILED_INITS = 16


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
