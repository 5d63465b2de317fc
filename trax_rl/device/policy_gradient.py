"""The device program of the policy-only agents (PolicyGradient).

The loss, optimizer and update are the agent's own (`LoopPolicyAgent`
builds them); only the data comes from the rollout: every step as a slice
of length 1, drawn as `RLTask.trajectory_batch_stream` draws them with
`sample_trajectories_uniformly` (a trajectory uniformly, then one of its
steps).
"""

import functools
from typing import Any

import jax
import jax.numpy as jnp
import optax

from trax_rl import policies
from trax_rl.device import batches
from trax_rl.device import epoch as device_epoch
from trax_rl.networks import base as networks
from trax_rl.supervised import update


def make_program(
  network: networks.Network,
  loss: Any,
  optimizer: optax.GradientTransformation,
  distribution: Any,
  gamma: float,
  n_train_steps: int,
  batch_size: int,
) -> device_epoch.DeviceProgram:
  """A DeviceProgram whose learner state is the policy's TrainState.

  Args:
    network: the policy network.
    loss: the agent's loss (`WeightedLogLikelihood`).
    optimizer: the agent's optimizer (its Trainer's).
    distribution: the policy's action distribution.
    gamma: the task's discount (for the rewards-to-go).
    n_train_steps: updates per epoch.
    batch_size: slices per update.

  Returns:
    The program (policy at temperature 1, training, greedy policy).
  """
  update_fn = update.make_update_fn(network, loss, optimizer)

  def act(state, key, obs, temperature):
    dist_inputs = network.apply(state.params, obs)
    action = policies.sample_action(distribution, dist_inputs, key, temperature)
    return action, {'dist_inputs': dist_inputs}

  def train(state, steps, key):
    data = batches.single_steps(steps, gamma)
    p = batches.uniform_trajectory_probabilities(batches.trajectory_ends(steps))
    idx = jax.random.choice(key, p.shape[0], (n_train_steps, batch_size), p=p)

    def one(state, i):
      return update_fn(state, jax.tree.map(lambda x: x[i], data))

    state, extras = jax.lax.scan(one, state, idx)
    metrics = jax.tree.map(jnp.mean, extras.metrics)
    return state, {f'policy/{k}': v for k, v in metrics.items()}

  return device_epoch.DeviceProgram(
    functools.partial(act, temperature=1.0),
    train,
    greedy=functools.partial(act, temperature=0.0),
  )
