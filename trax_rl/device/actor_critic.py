"""The device program of the actor-critics (A2C, PPO, AWR, SamplingAWR).

The epoch math is the agent's own pure function,
`train_fn(states, stats, data, idx, key) -> (states, metrics)`, the one its
gymnasium path jits: the rollout only replaces the host's packed
trajectories (`batches.packed_steps`) and the host's minibatch indices
(drawn here on the device with the same shapes and the same passes over
shuffled steps).
"""

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from trax_rl import policies
from trax_rl.device import batches
from trax_rl.device import epoch as device_epoch
from trax_rl.networks import base as networks


def device_indices(
  key: jax.Array, shapes: dict[str, tuple[int, ...]], n_valid: int
) -> dict[str, jax.Array]:
  """Minibatch indices of the given shapes `[..., B]` over n_valid steps."""
  out = {}
  for i, (name, shape) in enumerate(sorted(shapes.items())):
    n_steps = int(np.prod(shape[:-1]))
    idx = batches.minibatch_indices(
      jax.random.fold_in(key, i), n_valid, n_steps, shape[-1]
    )
    out[name] = idx.reshape(shape)
  return out


def make_program(
  policy_network: networks.Network,
  distribution: Any,
  acting_name: str,
  stats: Any,
  make_data: Callable[..., Any],
  host_indices: Callable[[np.random.Generator, int], dict[str, Any]],
  train_fn: Callable[..., tuple[Any, dict[str, Any]]],
  unused_key: Any = None,
) -> device_epoch.DeviceProgram:
  """A DeviceProgram whose learner state is `{trainer name: TrainState}`.

  Args:
    policy_network: the acting network on `{'net': params, 'stats': stats}`
      (its apply returns dist_inputs, or a tuple with them first).
    distribution: the policy's action distribution.
    acting_name: the name of the TrainState whose params act.
    stats: the (frozen) observation statistics.
    make_data: builds the agent's packed-step data from
      `batches.packed_steps` fields (keyword arguments).
    host_indices: the layout's host `minibatch_indices(rng, n_valid)`, only
      called (at trace time) for the shapes of the indices.
    train_fn: the agent's pure epoch function.
    unused_key: passed as train_fn's key when the layout draws no
      randomness (as the host path does); None: a fresh key.

  Returns:
    The program.
  """

  def act(states, key, obs, temperature):
    params = {'net': states[acting_name].params, 'stats': stats}
    out = policy_network.apply(params, obs)
    dist_inputs = out[0] if isinstance(out, tuple) else out
    action = policies.sample_action(distribution, dist_inputs, key, temperature)
    return action, {'dist_inputs': dist_inputs}

  def train(states, steps, key):
    data = make_data(**batches.packed_steps(steps))
    n = data.mask.shape[0]
    shapes = {
      k: np.shape(v)
      for k, v in host_indices(np.random.default_rng(0), n).items()
    }
    idx_key, train_key = jax.random.split(key)
    idx = device_indices(idx_key, shapes, n)
    if unused_key is not None:
      train_key = unused_key
    return train_fn(states, stats, data, idx, train_key)

  return device_epoch.DeviceProgram(
    functools.partial(act, temperature=1.0),
    train,
    greedy=functools.partial(act, temperature=0.0),
  )
