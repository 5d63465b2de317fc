"""XLA compile options for every program a run compiles, per platform.

XLA's defaults buy run time with compile time. On CPU a short device-path
run is mostly compile: `gin/gymnax/ppo_cartpole_fast.gin` (3 seeds, 30k
steps each) trains in about 0.4 s and compiles for 4-5 s, most of it in
XLA's LLVM pipeline. `xla_backend_optimization_level=1` cuts that compile
by about a third at the same epoch speed there; a long conv run (MinAtar
Breakout) runs a few percent slower with it. So it is a per-config choice,
and a per-platform one (a config that runs on CPU, GPU and TPU should not
tune one for another):

  train_rl.compiler_options = {'cpu': {'xla_backend_optimization_level': 1}}

The options of the platform that JAX computes on (`jax.default_backend()`:
'cpu', 'gpu' or 'tpu') apply; the other platforms' are kept for their
runs. `train_rl` applies them (`applied`) while it builds and trains, and
every program trax_rl compiles goes through `jit`, which is `jax.jit` with
the options in force when it is called. The names and values are XLA's
own (`DebugOptions`); an unknown platform, option name or value is refused
before anything is built. The options are part of every compile's key,
also in the persistent cache (`trax_rl.compile_cache`). Results can differ
from the default's in the last bits of a float, as between two XLA
versions.
"""

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp

PLATFORMS = ('cpu', 'gpu', 'tpu')

_current: dict[str, Any] = {}


def check(
  options: Mapping[str, Mapping[str, Any]] | None,
) -> dict[str, Any]:
  """This platform's options, if XLA accepts all; else a one-line ValueError.

  Each platform's options are compiled once into a trivial program (about
  10 ms each; the names and values are common to XLA's backends), so a
  typo is found before a run builds its agents, also one in another
  platform's options.
  """
  if options is None:
    return {}
  if not isinstance(options, Mapping) or not all(
    platform in PLATFORMS and _is_options(value)
    for platform, value in options.items()
  ):
    raise ValueError(
      'compiler_options must map a platform (cpu, gpu, tpu) to XLA option '
      "names and values, e.g. {'cpu': {'xla_backend_optimization_level': "
      f'1}}}}; got {options!r}'
    )
  for platform, value in options.items():
    if not value:
      continue
    try:
      jax.jit(jnp.negative, compiler_options=dict(value)).lower(
        jnp.zeros((), jnp.float32)
      ).compile()
    except Exception as e:  # XLA raises its own runtime error type.
      reason = str(e).strip().splitlines()[0]
      reason = reason.removeprefix('INVALID_ARGUMENT: ')
      raise ValueError(f'compiler_options[{platform!r}]: {reason}') from None
  return dict(options.get(jax.default_backend(), {}))


def _is_options(value: Any) -> bool:
  return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)


def current() -> dict[str, Any]:
  """The options in force (empty: XLA's defaults)."""
  return dict(_current)


@contextlib.contextmanager
def applied(options: Mapping[str, Any] | None) -> Iterator[dict[str, Any]]:
  """Programs jitted inside get `options` (checked first); then the old."""
  global _current
  checked = check(options)
  previous, _current = _current, checked
  try:
    yield checked
  finally:
    _current = previous


def jit(fun: Callable[..., Any], **kwargs: Any) -> Any:
  """`jax.jit(fun, **kwargs)` compiled with the options in force now.

  JAX takes compile options on a top-level program only: called inside
  another transformation (its arguments are tracers), `fun` is a plain
  `jax.jit`, and the outer program's options apply.
  """
  options = current()
  if not options:
    return jax.jit(fun, **kwargs)
  return _WithOptions(
    jax.jit(fun, **kwargs), jax.jit(fun, compiler_options=options, **kwargs)
  )


class _WithOptions:
  """A jitted function that compiles with options where JAX allows them."""

  def __init__(self, plain: Any, tuned: Any):
    self._plain = plain
    self._tuned = tuned
    functools.update_wrapper(self, tuned)

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    nested = any(
      isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs))
    )
    return (self._plain if nested else self._tuned)(*args, **kwargs)

  def __getattr__(self, name: str) -> Any:  # lower, trace, eval_shape ...
    return getattr(self._tuned, name)
