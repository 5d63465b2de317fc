"""Trainer: a train state plus one jitted update step."""

from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
import optax

from trax_rl import checkpoint, types
from trax_rl.networks import base
from trax_rl.supervised import train_state as train_state_lib
from trax_rl.supervised import update as update_lib


class Trainer:
  """Owns a `TrainState` and the jitted update; pulls batches from a stream.

  The update is jitted once, here. `state_dict`/`load_state_dict` round-trip
  params, target params, optimizer state, step and PRNG key exactly.
  """

  def __init__(
    self,
    network: base.Network,
    loss_fn: update_lib.LossFn,
    optimizer: optax.GradientTransformation,
    batch_stream: Iterator[Any] | None = None,
    seed: int | jax.Array = 0,
    target_update_period: int | None = None,
    use_target_network: bool = False,
    num_steps: int = 1,
    name: str = 'trainer',
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
    )
    self._state = jax.device_put(self._state)
    self._update = jax.jit(
      update_lib.make_update_fn(
        network, loss_fn, optimizer, target_update_period, num_steps
      )
    )
    self._stream = batch_stream

  @property
  def network(self) -> base.Network:
    return self._network

  @property
  def state(self) -> train_state_lib.TrainState:
    return self._state

  @state.setter
  def state(self, state: train_state_lib.TrainState) -> None:
    self._state = state

  @property
  def params(self) -> types.Params:
    return self._state.params

  @property
  def step(self) -> int:
    return int(self._state.step)

  def set_batch_stream(self, stream: Iterator[Any]) -> None:
    self._stream = stream

  def train_step(self, batch: Any) -> types.LossExtra:
    """One jitted update on `batch`."""
    self._state, extra = self._update(self._state, batch)
    return extra

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
    sums: dict[str, Any] = {}
    for _ in range(n_steps):
      batch = next(self._stream)
      extra = self.train_step(batch)
      if on_extra is not None:
        on_extra(batch, extra)
      for k, v in extra.metrics.items():
        sums[k] = sums[k] + v if k in sums else v
    return {k: float(v) / max(n_steps, 1) for k, v in sums.items()}

  def state_dict(self) -> dict[str, Any]:
    return {'leaves': [np.asarray(x) for x in jax.tree.leaves(self._state)]}

  def load_state_dict(self, state: dict[str, Any]) -> None:
    restored = checkpoint.unflatten_like(
      self._state, state['leaves'], self._name
    )
    self._state = jax.device_put(restored)
