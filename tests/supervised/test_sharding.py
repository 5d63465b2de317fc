"""Tests for trax_rl.supervised.sharding and Trainer(n_devices=...).

The two-device checks run in a subprocess started with
XLA_FLAGS=--xla_force_host_platform_device_count=2 (the flag must be set
before jax is imported), so the rest of the suite keeps one CPU device.
"""

import functools
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from trax_rl import types
from trax_rl.losses import q_learning
from trax_rl.networks import base, models
from trax_rl.supervised import sharding
from trax_rl.supervised import trainer as trainer_lib


def test_resolve_n_devices():
  assert sharding.resolve_n_devices(None) == 1
  assert sharding.resolve_n_devices(1) == 1
  assert sharding.resolve_n_devices(-1) == jax.local_device_count()
  with pytest.raises(ValueError, match='n_devices'):
    sharding.resolve_n_devices(jax.local_device_count() + 1)
  with pytest.raises(ValueError, match='n_devices'):
    sharding.resolve_n_devices(0)


def test_shard_batch_on_one_device():
  mesh = sharding.make_mesh(1)
  batch = {'x': np.arange(6.0).reshape(3, 2), 'scalar': np.float32(2.0)}
  sharded = sharding.shard_batch(batch, mesh)
  np.testing.assert_array_equal(sharded['x'], batch['x'])
  assert sharded['scalar'].shape == ()


# Run in the subprocess: one update of R2D2 and of a feed-forward prioritized
# double-Q loss on 1 and on 2 devices; prints the largest differences.
_TWO_DEVICE_SCRIPT = textwrap.dedent(
  """
  import functools, json
  import jax, jax.numpy as jnp, numpy as np, optax
  from trax_rl import types
  from trax_rl.losses import q_learning, r2d2 as r2d2_losses
  from trax_rl.networks import base, models, recurrent
  from trax_rl.supervised import trainer as trainer_lib

  assert jax.local_device_count() == 2, jax.devices()
  rng = np.random.default_rng(0)

  def run(network, loss, batch, n_devices, num_steps=1):
    trainer = trainer_lib.Trainer(
        network, loss, optax.adam(1e-2), seed=3, target_update_period=1,
        num_steps=num_steps, n_devices=n_devices)
    extras = [trainer.train_step(batch) for _ in range(2)]
    leaves = jax.tree.leaves(trainer.state.params)
    return trainer, leaves, extras

  def max_diff(a, b):
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
               for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))

  out = {}
  # R2D2: batch of 4 segments of 1 + 4 + 1 steps.
  module = recurrent.RecurrentQuality(
      n_actions=3, torso=functools.partial(models.MLP, layer_widths=(8,)),
      lstm_size=6)
  network = recurrent.make_recurrent_network(module, np.zeros(4, np.float32))
  seg = types.Segment(
      observation=rng.normal(size=(4, 6, 4)).astype(np.float32),
      action=rng.integers(0, 3, (4, 6)),
      reward=rng.normal(size=(4, 6)).astype(np.float32),
      discount=np.full((4, 6), 0.9, np.float32),
      mask=np.array([[1] * 6, [1] * 6, [1, 1, 1, 0, 0, 0], [1] * 6],
                    np.float32),
      core_state=recurrent.LSTMState(
          rng.normal(size=(4, 6)).astype(np.float32),
          rng.normal(size=(4, 6)).astype(np.float32)))
  batch = types.Batch(seg, np.array([.1, .2, .3, .4], np.float32))
  loss = r2d2_losses.R2D2Loss(burn_in_length=1, bootstrap_n=2)
  one, p1, e1 = run(network, loss, batch, None)
  two, p2, e2 = run(network, loss, batch, 2)
  out['r2d2_params'] = max_diff(p1, p2)
  out['r2d2_priorities'] = max_diff([e.priorities for e in e1],
                                    [e.priorities for e in e2])
  out['r2d2_loss'] = max_diff([e.metrics['loss'] for e in e1],
                              [e.metrics['loss'] for e in e2])
  out['r2d2_param_norm_change'] = max_diff(
      p1, jax.tree.leaves(trainer_lib.Trainer(
          network, loss, optax.adam(1e-2), seed=3).state.params))
  out['r2d2_update_devices'] = len(two.state.params['params']['lstm']['cell'][
      'hf']['kernel'].devices())
  out['r2d2_acting_devices'] = len(two.params['params']['lstm']['cell'][
      'hf']['kernel'].devices())
  out['r2d2_n_devices'] = two.n_devices

  # Feed-forward: prioritized double Q on transitions, also with 2 updates
  # scanned in one call (batch [2, B, ...], split on axis 1).
  q_net = base.from_module(
      models.Quality(n_actions=2, body=functools.partial(
          models.MLP, layer_widths=(16,))), np.zeros(3, np.float32))
  def transitions(lead):
    return types.Batch(types.Transition(
        observation=rng.normal(size=lead + (3,)).astype(np.float32),
        action=rng.integers(0, 2, lead),
        reward=rng.normal(size=lead).astype(np.float32),
        discount=np.full(lead, 0.9, np.float32),
        next_observation=rng.normal(size=lead + (3,)).astype(np.float32)),
        rng.uniform(0.1, 1.0, lead).astype(np.float32))
  ff_loss = q_learning.PrioritizedDoubleQLearning(
      importance_sampling_exponent=0.5)
  batch = transitions((8,))
  _, p1, e1 = run(q_net, ff_loss, batch, None)
  _, p2, e2 = run(q_net, ff_loss, batch, 2)
  out['ff_params'] = max_diff(p1, p2)
  out['ff_priorities'] = max_diff([e.priorities for e in e1],
                                  [e.priorities for e in e2])
  batch = transitions((2, 8))
  _, p1, e1 = run(q_net, ff_loss, batch, None, num_steps=2)
  _, p2, e2 = run(q_net, ff_loss, batch, 2, num_steps=2)
  out['ff_scan_params'] = max_diff(p1, p2)
  try:
    run(q_net, ff_loss, transitions((7,)), 2)
    out['odd_batch'] = 'accepted'
  except ValueError as e:
    out['odd_batch'] = str(e)
  print(json.dumps(out))
  """
)


def test_two_devices_equal_one_device():
  env = dict(
    os.environ,
    XLA_FLAGS='--xla_force_host_platform_device_count=2',
    JAX_PLATFORMS='cpu',
  )
  result = subprocess.run(
    [sys.executable, '-c', _TWO_DEVICE_SCRIPT],
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert out['r2d2_n_devices'] == 2
  assert out['r2d2_update_devices'] == 2  # Replicated train state.
  assert out['r2d2_acting_devices'] == 1  # Acting copy on one device.
  assert out['r2d2_param_norm_change'] > 1e-3  # The updates did something.
  for name in ('r2d2', 'ff', 'ff_scan'):
    assert out[f'{name}_params'] < 1e-5, out
  assert out['r2d2_priorities'] < 1e-5 and out['ff_priorities'] < 1e-5, out
  assert out['r2d2_loss'] < 1e-5, out
  assert 'multiple of 2' in out['odd_batch']


def test_trainer_with_one_device_is_the_default_path():
  network = base.from_module(
    models.Quality(n_actions=2), np.zeros(3, np.float32)
  )
  batch = types.Batch(
    types.Transition(
      observation=np.ones((4, 3), np.float32),
      action=np.array([0, 1, 0, 1]),
      reward=np.ones(4, np.float32),
      discount=np.full(4, 0.5, np.float32),
      next_observation=np.zeros((4, 3), np.float32),
    ),
    np.full(4, 0.25, np.float32),
  )
  loss = q_learning.PrioritizedDoubleQLearning()
  make = functools.partial(
    trainer_lib.Trainer,
    network,
    loss,
    optax.sgd(0.1),
    seed=1,
    use_target_network=True,
  )
  a, b = make(), make(n_devices=1)
  assert a.n_devices == b.n_devices == 1
  a.train_step(batch)
  b.train_step(batch)
  for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
    np.testing.assert_array_equal(x, y)
  assert isinstance(a.params['params']['Dense_0']['kernel'], jnp.ndarray)
