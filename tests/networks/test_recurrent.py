"""Tests for trax_rl.networks.recurrent."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trax_rl.networks import models, recurrent


@pytest.fixture(scope='module')
def net():
  module = recurrent.RecurrentQuality(
    n_actions=3,
    torso=functools.partial(models.MLP, layer_widths=(8,)),
    lstm_size=5,
    head_widths=(4,),
  )
  network = recurrent.make_recurrent_network(module, np.zeros(2, np.float32))
  params = network.init(jax.random.PRNGKey(0))
  # Jitted, as agents use them (and far faster than op by op).
  network = dataclasses.replace(
    network, apply=jax.jit(network.apply), unroll=jax.jit(network.unroll)
  )
  return network, params


def test_reset_where_and_zero_state():
  state = recurrent.LSTMState(
    hidden=jnp.array([[1.0, 2.0], [3.0, 4.0]]),
    cell=jnp.array([[5.0, 6.0], [7.0, 8.0]]),
  )
  reset = recurrent.reset_where(np.array([True, False]), state)
  np.testing.assert_array_equal(reset.hidden, [[0, 0], [3, 4]])
  np.testing.assert_array_equal(reset.cell, [[0, 0], [7, 8]])
  zero = recurrent.zero_state(3, 4)
  assert zero.hidden.shape == (3, 4) and not np.any(zero.cell)


def test_shapes(net):
  network, params = net
  state = network.initial_state(4)
  out, new_state = network.apply(params, jnp.ones((4, 2)), state)
  assert out.q_values.shape == (4, 3)
  assert new_state.hidden.shape == (4, 5)
  out, _ = network.unroll(params, jnp.ones((6, 4, 2)), state)
  assert out.q_values.shape == (6, 4, 3)


def test_unroll_equals_stepping_with_resets(net):
  network, params = net
  obs = jax.random.normal(jax.random.PRNGKey(1), (5, 3, 2))
  first = jnp.array(
    [[1, 1, 1], [0, 0, 0], [0, 1, 0], [0, 0, 0], [1, 0, 0]], jnp.float32
  )
  start = recurrent.LSTMState(jnp.ones((3, 5)), jnp.ones((3, 5)))
  unrolled, final = network.unroll(params, obs, start, first)
  state, steps = start, []
  for t in range(5):
    state = recurrent.reset_where(first[t], state)
    out, state = network.apply(params, obs[t], state)
    steps.append(out.q_values)
  np.testing.assert_allclose(np.stack(steps), unrolled.q_values, atol=1e-6)
  np.testing.assert_allclose(state.hidden, final.hidden, atol=1e-6)
  # Row 1 restarted at t=2: its outputs from then on equal an unroll of
  # obs[2:] from the zero state.
  fresh, _ = network.unroll(params, obs[2:, 1:2], network.initial_state(1))
  np.testing.assert_allclose(
    fresh.q_values[:, 0], unrolled.q_values[2:, 1], atol=1e-6
  )


def test_memory_changes_outputs(net):
  network, params = net
  obs = jnp.ones((1, 2))
  q0, state = network.apply(params, obs, network.initial_state(1))
  q1, _ = network.apply(params, obs, state)
  assert not np.allclose(q0.q_values, q1.q_values)


def test_conv_torso_and_dueling_head():
  module = recurrent.RecurrentQuality(
    n_actions=4,
    torso=functools.partial(models.ConvTorso, dense_width=16),
    lstm_size=8,
    dueling=True,
  )
  network = recurrent.make_recurrent_network(
    module, np.zeros((36, 36, 1), np.uint8)
  )
  # Zero parameters of the right shapes: initializing a conv torso compiles
  # slowly on CPU, and only the shapes are checked here.
  shapes = jax.eval_shape(network.init, jax.random.PRNGKey(0))
  params = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)
  out, _ = jax.jit(network.unroll)(
    params, jnp.zeros((2, 3, 36, 36, 1), jnp.uint8), network.initial_state(3)
  )
  assert out.q_values.shape == (2, 3, 4)
