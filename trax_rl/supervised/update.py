"""The pure update: loss, gradients, optimizer, target network."""

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from trax_rl import types
from trax_rl.networks import base
from trax_rl.supervised import train_state as train_state_lib

UpdateFn = Callable[
  [train_state_lib.TrainState, Any],
  tuple[train_state_lib.TrainState, types.LossExtra],
]


# What the guard names: the loss is checked in every update, the
# parameters when the host reads the Health (once per epoch). A non-finite
# gradient shows as one of the two: the parameters it updates turn
# non-finite, and so does the next loss computed from them.
NONFINITE_NAMES = ('loss', 'parameters')


class Health(NamedTuple):
  """The first update that produced a non-finite value, if any.

  Carried in `TrainState.health` through the update, so the check costs one
  scalar test inside the compiled step and no host sync; the runner reads it
  once per epoch (`run/nonfinite.first_in_learner`), where it also checks
  the parameters.
  """

  step: jax.Array  # int32 scalar: the 1-based update number, 0 if none.
  what: jax.Array  # int32 scalar: 1 + index into NONFINITE_NAMES, 0 if none.


def healthy() -> Health:
  """A Health that has seen no non-finite value."""
  return Health(np.zeros((), np.int32), np.zeros((), np.int32))


def describe(health: Health) -> tuple[int, str] | None:
  """(update step, what) of a host copy of `health`; None if all finite."""
  what = int(health.what)
  return None if what == 0 else (int(health.step), NONFINITE_NAMES[what - 1])


def _record(health: Health, step: jax.Array, code: jax.Array) -> Health:
  first = (health.what == 0) & (code > 0)
  return Health(
    jnp.where(first, step, health.step).astype(jnp.int32),
    jnp.where(first, code, health.what).astype(jnp.int32),
  )


def make_update_fn(
  network: base.Network,
  loss_fn: types.LossFn,
  optimizer: optax.GradientTransformation,
  target_update_period: int | None = None,
  num_steps: int = 1,
  axis_name: str | None = None,
) -> UpdateFn:
  """Returns pure `update(state, batch) -> (state, LossExtra)`.

  When `state.health` is a `Health` (not `()`), every step also checks its
  loss, and the first step with a non-finite loss is recorded there (later
  ones leave it as it is); the runner checks the parameters itself. The check is
  one scalar test inside the compiled step; the update itself is the same
  either way, and what to do is the caller's choice.

  Args:
    network: the network the loss is applied to.
    loss_fn: `loss(network, params, target_params, batch, key)`.
    optimizer: an optax transformation (clipping, if any, is part of it).
    target_update_period: copy params into target_params every this many
      steps; None keeps target_params as they are.
    num_steps: updates per call; with n > 1 every leaf of `batch` has a
      leading axis [n, ...] and the updates run in one `lax.scan`.
    axis_name: when set, gradients and metrics are averaged over this mapped
      axis (data-parallel learners).

  Returns:
    The update function. Its LossExtra holds mean metrics (plus 'loss') and
    the priorities of every step (`[n, B]` when num_steps > 1).
  """
  if num_steps < 1:
    raise ValueError(f'num_steps must be >= 1, got {num_steps}')
  loss = functools.partial(loss_fn, network)

  def one_step(state: train_state_lib.TrainState, batch: Any):
    key, loss_key = jax.random.split(state.key)
    (value, extra), grads = jax.value_and_grad(loss, has_aux=True)(
      state.params, state.target_params, batch, loss_key
    )
    metrics = dict(extra.metrics, loss=value)
    if axis_name is not None:
      grads = jax.lax.pmean(grads, axis_name)
      metrics = jax.lax.pmean(metrics, axis_name)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    step = state.step + 1
    target_params = state.target_params
    if target_update_period:
      target_params = optax.periodic_update(
        params, target_params, step, target_update_period
      )
    health = state.health
    if isinstance(health, Health):  # Decided when tracing: no branch.
      code = jnp.where(jnp.isfinite(metrics['loss']), 0, 1)
      health = _record(health, step, code)
    new_state = train_state_lib.TrainState(
      params, target_params, opt_state, step, key, health
    )
    return new_state, types.LossExtra(metrics, extra.priorities)

  if num_steps == 1:
    return one_step

  def update(state, batches):
    state, extras = jax.lax.scan(one_step, state, batches)
    metrics = jax.tree.map(jnp.mean, extras.metrics)
    return state, types.LossExtra(metrics, extras.priorities)

  return update


def init_state(
  network: base.Network,
  optimizer: optax.GradientTransformation,
  key: jax.Array,
  target: bool = False,
  check_finite: bool = True,
) -> train_state_lib.TrainState:
  """A fresh TrainState: `network.init` params, optimizer state, step 0.

  Args:
    network: the network (`network.init(key) -> params`).
    optimizer: its optax transformation.
    key: raw PRNG key; split into the init key and the state's key.
    target: keep target params (a copy of the params).
    check_finite: carry a `Health` (the non-finite guard, `make_update_fn`).
  """
  init_key, state_key = jax.random.split(key)
  params = network.init(init_key)
  return train_state_lib.TrainState(
    params=params,
    target_params=jax.tree.map(jnp.array, params) if target else (),
    opt_state=optimizer.init(params),
    step=np.asarray(0, np.int32),
    key=state_key,
    health=healthy() if check_finite else (),
  )


def make_optimizer(
  learning_rate: float | optax.Schedule = 1e-3,
  optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
  max_gradient_norm: float | None = None,
) -> optax.GradientTransformation:
  """`optimizer(learning_rate)` after optional global-norm clipping.

  A schedule sees 1-based update numbers, as Trax's: optax counts from 0,
  which would give a warmup schedule a learning rate of 0 on update 1.
  """
  if callable(learning_rate):
    schedule = learning_rate
    learning_rate = lambda count: schedule(count + 1)
  opt = optimizer(learning_rate=learning_rate)
  if max_gradient_norm is not None:
    if max_gradient_norm <= 0:
      raise ValueError(
        f'max_gradient_norm must be > 0, got {max_gradient_norm}'
      )
    opt = optax.chain(optax.clip_by_global_norm(max_gradient_norm), opt)
  return opt
