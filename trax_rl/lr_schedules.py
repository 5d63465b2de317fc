"""Trax's `multifactor` schedule as an optax-compatible `step -> value`.

Trax configs use `multifactor` for learning rates and also for exploration
rates (`'constant * decay_every'` with a `minimum`), so the factor names and
argument names are Trax's, and gin files written for Trax read the same.

The schedule is built from jnp operations only, so it works on Python ints,
numpy scalars and traced jnp scalars: `optax.adam(learning_rate=schedule)`
calls it inside jit with the optimizer's step count (which starts at 0).
"""

from collections import abc

import jax
import jax.numpy as jnp
import optax

from trax_rl import types

Schedule = abc.Callable[[int | types.Array], jax.Array]

FACTORS = (
  'constant',
  'two_constants',
  'linear_warmup',
  'rsqrt_decay',
  'rsqrt_normalized_decay',
  'decay_every',
  'cosine_decay',
)


def _parse(factors: str) -> list[str]:
  names = [name.strip() for name in factors.split('*')]
  for name in names:
    if name not in FACTORS:
      raise ValueError(
        f'Unknown factor {name!r} in multifactor({factors!r}); known '
        f'factors: {", ".join(FACTORS)}.'
      )
  return names


def _check_positive(names, needs, value, arg):
  if set(names) & set(needs) and not value > 0:
    raise ValueError(
      f'{arg} must be > 0 for factors {sorted(set(names) & set(needs))}, '
      f'got {value}.'
    )


def multifactor(
  factors: str = 'constant * linear_warmup * rsqrt_decay',
  constant: float = 0.1,
  warmup_steps: int = 400,
  decay_factor: float = 0.5,
  steps_per_decay: int = 20000,
  steps_per_cycle: int = 100000,
  second_constant: float = 0.01,
  second_constant_step: int = 10000,
  minimum: float = 0.0,
) -> Schedule:
  """Returns a schedule that multiplies the factors named in `factors`.

  Factors (the value starts at 1.0 and each one multiplies it):
    constant: `constant`.
    two_constants: `constant` before `second_constant_step`, then
      `second_constant`.
    linear_warmup: min(1, step / warmup_steps).
    rsqrt_decay: 1 / sqrt(max(step, warmup_steps)).
    rsqrt_normalized_decay: sqrt(warmup_steps) / sqrt(max(step, warmup_steps)),
      i.e. rsqrt_decay scaled to 1 at the end of the warmup.
    decay_every: decay_factor ** (step // steps_per_decay).
    cosine_decay: 0.5 * (1 + cos(pi * (p % 1))) with
      p = max(0, (step - warmup_steps) / steps_per_cycle): cosine cycles with
      warm restarts, starting after the warmup.
  The result is never below `minimum`.

  Args:
    factors: factor names separated by '*', for example
      'constant * linear_warmup * rsqrt_decay'.
    constant: the base value (learning rate or exploration rate).
    warmup_steps: steps of linear warmup; also where the rsqrt decays start
      and where cosine cycles begin.
    decay_factor: multiplier applied every `steps_per_decay` steps.
    steps_per_decay: period of `decay_every`.
    steps_per_cycle: length of one cosine cycle.
    second_constant: the value `two_constants` switches to.
    second_constant_step: the step from which `two_constants` uses
      `second_constant`.
    minimum: lower bound of the returned value.

  Returns:
    schedule(step) -> float32 scalar (or array, for an array of steps).

  Raises:
    ValueError: for an unknown factor name, or a non-positive period that a
      chosen factor divides by.
  """
  names = _parse(factors)
  _check_positive(
    names,
    ('linear_warmup', 'rsqrt_decay', 'rsqrt_normalized_decay'),
    warmup_steps,
    'warmup_steps',
  )
  _check_positive(names, ('decay_every',), steps_per_decay, 'steps_per_decay')
  _check_positive(names, ('cosine_decay',), steps_per_cycle, 'steps_per_cycle')

  def schedule(step: int | types.Array) -> jax.Array:
    step = jnp.asarray(step, jnp.float32)
    value = jnp.ones_like(step)
    for name in names:
      if name == 'constant':
        value *= constant
      elif name == 'two_constants':
        value *= jnp.where(
          step < second_constant_step, constant, second_constant
        )
      elif name == 'linear_warmup':
        value *= jnp.minimum(1.0, step / warmup_steps)
      elif name == 'rsqrt_decay':
        value /= jnp.sqrt(jnp.maximum(step, warmup_steps))
      elif name == 'rsqrt_normalized_decay':
        value *= jnp.sqrt(warmup_steps / jnp.maximum(step, warmup_steps))
      elif name == 'decay_every':
        value *= decay_factor ** jnp.floor_divide(step, steps_per_decay)
      elif name == 'cosine_decay':
        progress = jnp.maximum(0.0, (step - warmup_steps) / steps_per_cycle)
        value *= 0.5 * (1.0 + jnp.cos(jnp.pi * (progress % 1.0)))
    return jnp.maximum(value, minimum)

  return schedule


def constant_lr(value: float = 1e-3) -> optax.Schedule:
  """A constant learning rate (the default `lr_schedule` factory).

  Args:
    value: the learning rate.
  """
  return optax.constant_schedule(value)


def linear_lr(
  initial: float = 1e-3, final: float = 0.0, steps: int = 10000
) -> optax.Schedule:
  """A rate going linearly from `initial` to `final` over `steps` updates,
  then staying at `final` (PureJaxRL's and CleanRL's annealed PPO rate,
  with steps = all the run's updates).

  Args:
    initial: the rate at update 0.
    final: the rate from update `steps` on.
    steps: updates the decay lasts, > 0.

  Raises:
    ValueError: steps <= 0.
  """
  if steps <= 0:
    raise ValueError(f'linear_lr steps must be > 0, got {steps}')
  return optax.linear_schedule(initial, final, steps)
