"""Trainer: a train state plus one jitted update step."""

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from trax_rl import checkpoint, compile_options, types
from trax_rl.networks import base
from trax_rl.supervised import sharding
from trax_rl.supervised import train_state as train_state_lib
from trax_rl.supervised import update as update_lib


class Trainer:
  """Owns a `TrainState` and the jitted update; pulls batches from a stream.

  The update is jitted once, here. `state_dict`/`load_state_dict` round-trip
  params, target params, optimizer state, step and PRNG key exactly.

  The state carries an `update.Health` (unless `set_check_finite(False)`):
  every update checks its loss inside the compiled step and the first
  non-finite one stays recorded on the device; `nonfinite()` adds a check
  of the parameters and reads both with one transfer.
  """

  def __init__(
    self,
    network: base.Network,
    loss_fn: types.LossFn,
    optimizer: optax.GradientTransformation,
    batch_stream: Iterator[Any] | None = None,
    seed: int | jax.Array = 0,
    target_update_period: int | None = None,
    use_target_network: bool = False,
    num_steps: int = 1,
    name: str = 'trainer',
    n_devices: int | None = None,
  ):
    """Builds parameters and compiles nothing yet (jit compiles on first use).

    Args:
      network: the network to train.
      loss_fn: `loss(network, params, target_params, batch, key)`.
      optimizer: optax transformation.
      batch_stream: iterator of batches for `train_steps`.
      seed: int seed or raw PRNG key for init and the update's keys.
      target_update_period: sync period of the target network.
      use_target_network: keep target params (always on if a period is set).
      num_steps: updates per jitted call (see `make_update_fn`).
      name: used in error messages.
      n_devices: None or 1 trains on one device (the default path); k > 1
        (or -1: all local devices) keeps the state replicated on k devices
        and splits each batch across them (`sharding`), so the batch size
        must be a multiple of k. `params` then returns a copy on the first
        device, so that acting stays on one device. In a multi-host job
        (`jax.distributed`, more than one process) the update always runs
        on the global mesh of the first k local devices of every process:
        each process passes its own rows of every batch (the same shapes
        and the same number of updates on every process) and the global
        batch is their concatenation.
    """
    key = seed if isinstance(seed, jax.Array) else jax.random.PRNGKey(seed)
    init_key, state_key = jax.random.split(key)
    params = network.init(init_key)
    use_target = use_target_network or bool(target_update_period)
    self._name = name
    self._network = network
    self._state = train_state_lib.TrainState(
      params=params,
      target_params=jax.tree.map(np.array, params) if use_target else (),
      opt_state=optimizer.init(params),
      step=np.asarray(0, np.int32),
      key=state_key,
      health=update_lib.healthy(),
    )
    update = update_lib.make_update_fn(
      network, loss_fn, optimizer, target_update_period, num_steps
    )
    n_devices = sharding.resolve_n_devices(n_devices)
    self._mesh = (
      sharding.make_mesh(n_devices)
      if n_devices > 1 or jax.process_count() > 1
      else None
    )
    self._one_device_params = None  # Cached acting copy (multi-device).
    if self._mesh is None:
      self._update = compile_options.jit(update)
    else:
      self._update = sharding.DataParallelUpdate(
        update, self._mesh, batch_axis=0 if num_steps == 1 else 1
      )
    self._place(self._state)
    self._stream = batch_stream
    self._evaluate = compile_options.jit(
      lambda state, batch: _loss_metrics(network, loss_fn, state, batch)
    )

  @property
  def network(self) -> base.Network:
    return self._network

  @property
  def name(self) -> str:
    return self._name

  @property
  def check_finite(self) -> bool:
    """Whether updates record non-finite values (see `nonfinite`)."""
    return isinstance(self._state.health, update_lib.Health)

  def set_check_finite(self, check: bool) -> None:
    """Turns the non-finite guard on (the default) or off.

    Off, the state carries no Health and the compiled update has no checks
    (the next update compiles again, once).
    """
    if check != self.check_finite:
      health = update_lib.healthy() if check else ()
      self._place(self._state._replace(health=health))

  def nonfinite(self) -> tuple[int, str] | None:
    """The first update with a non-finite value since the last clear.

    One reduction over the parameters and one device-to-host read of two
    scalars: call it once per epoch. A non-finite loss is named with the
    update that produced it; non-finite parameters with a finite loss
    (a non-finite gradient or learning rate in the last update) with the
    current step.

    Returns:
      None if every checked update was finite (or the guard is off), else
      (update step, what), with what one of `update.NONFINITE_NAMES`.
    """
    if not self.check_finite:
      return None
    health = update_lib.read_health(
      self._state.health, self._state.params, self._state.step
    )
    return update_lib.describe(jax.device_get(health))

  def clear_nonfinite(self) -> None:
    """Forgets a recorded non-finite update (to train on anyway)."""
    if self.check_finite:
      self._place(self._state._replace(health=update_lib.healthy()))

  @property
  def n_devices(self) -> int:
    """Devices the update runs on."""
    return 1 if self._mesh is None else self._mesh.devices.size

  @property
  def state(self) -> train_state_lib.TrainState:
    return self._state

  @state.setter
  def state(self, state: train_state_lib.TrainState) -> None:
    if self._mesh is None:
      self._state = state
    else:
      self._place(state)

  def _place(self, state: train_state_lib.TrainState) -> None:
    """Puts the state on the device(s) the update runs on."""
    self._one_device_params = None
    if self._mesh is None:
      self._state = jax.device_put(state)
    else:
      self._state = sharding.replicate(state, self._mesh)

  @property
  def params(self) -> types.Params:
    """The online parameters (on one device, also when training on more)."""
    if self._mesh is None:
      return self._state.params
    if self._one_device_params is None:
      self._one_device_params = sharding.to_device(self._state.params)
    return self._one_device_params

  @property
  def step(self) -> int:
    return int(self._state.step)

  def sync_target(self) -> None:
    """Copies the online params into the target params now.

    Raises:
      ValueError: the trainer keeps no target network.
    """
    if not jax.tree.leaves(self._state.target_params):
      raise ValueError(f'{self._name} trainer has no target network to sync')
    target = jax.tree.map(jnp.array, self._state.params)
    self._place(self._state._replace(target_params=target))

  def set_batch_stream(self, stream: Iterator[Any]) -> None:
    self._stream = stream

  def train_step(self, batch: Any) -> types.LossExtra:
    """One jitted update on `batch`."""
    self._state, extra = self._update(self._state, batch)
    self._one_device_params = None
    if self._mesh is not None and sharding.is_multi_process(self._mesh):
      extra = sharding.to_local(extra, self._mesh)  # This process's rows.
    return extra

  def evaluate(self, batch: Any) -> dict[str, jax.Array]:
    """The loss and its metrics on `batch`, without updating anything.

    Args:
      batch: one batch, as `train_step` takes it with `num_steps=1`.

    Returns:
      The loss's metrics plus 'loss' (device scalars).
    """
    if self._mesh is not None and sharding.is_multi_process(self._mesh):
      # The loss of the global batch: every process passes its rows.
      batch = sharding.shard_batch(batch, self._mesh)
      return sharding.to_local(self._evaluate(self._state, batch), self._mesh)
    return self._evaluate(self._state, batch)

  def compile(self, batch: Any) -> None:
    """Compiles the update for `batch`'s shapes without running it."""
    self._update.lower(self._state, batch).compile()

  def train_steps(
    self,
    n_steps: int,
    on_extra: Callable[[Any, types.LossExtra], None] | None = None,
  ) -> dict[str, float]:
    """Runs n updates on batches from the stream; returns mean metrics."""
    if self._stream is None:
      raise ValueError(f'{self._name}: no batch stream to train on')
    history = []
    for _ in range(n_steps):
      batch = next(self._stream)
      extra = self.train_step(batch)
      if on_extra is not None:
        on_extra(batch, extra)
      history.append(extra.metrics)
    if not history:
      return {}
    # One device-to-host transfer for the whole call, not one add per step.
    means = jax.tree.map(lambda *xs: np.mean(xs), *jax.device_get(history))
    return {k: float(v) for k, v in means.items()}

  def state_dict(self) -> dict[str, Any]:
    """The state's arrays; the Health is run-time bookkeeping, left out."""
    saved = sharding.to_device(self._state._replace(health=()))
    return {'leaves': [np.asarray(x) for x in jax.tree.leaves(saved)]}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    restored = checkpoint.unflatten_like(
      self._state._replace(health=()), state['leaves'], self._name
    )
    health = update_lib.healthy() if self.check_finite else ()
    self._place(restored._replace(health=health))


def _loss_metrics(network, loss_fn, state, batch) -> dict[str, jax.Array]:
  loss, extra = loss_fn(
    network, state.params, state.target_params, batch, state.key
  )
  return dict(extra.metrics, loss=loss)
