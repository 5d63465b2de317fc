"""Two JAX processes on 127.0.0.1: the global-mesh update equals one process's.

Each process runs `multihost.MultiHostUpdate` on its half of a batch; the
test compares the parameters both end with to a one-device update on the
whole batch (computed in each process, outside the mesh). Importance weights are max-normalized over the global
batch, so a per-process normalization would show.
"""

import functools
import json
import os
import socket
import subprocess
import sys
import textwrap

import jax
import numpy as np

from trax_rl.networks import base, models

_SCRIPT = textwrap.dedent(
  """
  import functools, json, sys
  import jax, numpy as np, optax
  from trax_rl.distributed import multihost

  port, process_id = sys.argv[1], int(sys.argv[2])
  multihost.initialize(f'127.0.0.1:{port}', 2, process_id)
  from trax_rl import types
  from trax_rl.losses import q_learning
  from trax_rl.networks import base, models
  from trax_rl.supervised import train_state, update

  def batch(rows):
    rng = np.random.default_rng(0)
    full = types.Batch(types.Transition(
        observation=rng.normal(size=(8, 3)).astype(np.float32),
        action=rng.integers(0, 2, 8).astype(np.int32),
        reward=rng.normal(size=8).astype(np.float32),
        discount=np.full(8, 0.9, np.float32),
        next_observation=rng.normal(size=(8, 3)).astype(np.float32)),
        rng.uniform(0.1, 1.0, 8).astype(np.float32))
    return jax.tree.map(lambda x: x[rows], full)

  network = base.from_module(models.Quality(n_actions=2, body=functools.partial(
      models.MLP, layer_widths=(16,))), np.zeros(3, np.float32))
  loss = q_learning.PrioritizedDoubleQLearning(importance_sampling_exponent=0.5)
  optimizer = optax.adam(1e-2)
  params = network.init(jax.random.PRNGKey(1))
  state = train_state.TrainState(
      params, params, optimizer.init(params), np.asarray(0, np.int32),
      jax.random.PRNGKey(2))
  update_fn = update.make_update_fn(network, loss, optimizer, 1)
  step = multihost.MultiHostUpdate(update_fn)
  rows = slice(4 * process_id, 4 * process_id + 4)
  new, _ = step(multihost.replicate(state, step.mesh), batch(rows))
  params = multihost.local_copy(new.params)
  # The reference: this process alone, the whole batch, one device.
  local = jax.local_devices()[0]
  ref, _ = jax.jit(update_fn)(
      jax.device_put(state, local), jax.device_put(batch(slice(0, 8)), local))
  print(json.dumps({
      'chief': multihost.is_chief(),
      'devices': jax.device_count(),
      'params': [np.asarray(x).ravel().tolist() for x in jax.tree.leaves(params)],
      'reference': [
          np.asarray(x).ravel().tolist() for x in jax.tree.leaves(ref.params)],
  }))
  """
)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _run(port, process_id):
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  return subprocess.Popen(
    [sys.executable, '-c', _SCRIPT, str(port), str(process_id)],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    env=env,
  )


def _result(process):
  out, err = process.communicate(timeout=600)
  assert process.returncode == 0, err[-3000:]
  return json.loads(out.strip().splitlines()[-1])


def test_two_processes_update_like_one():
  port = _free_port()
  processes = [_run(port, i) for i in (0, 1)]
  first, second = [_result(p) for p in processes]
  assert first['devices'] == second['devices'] == 2
  assert first['chief'] and not second['chief']
  reference = first['reference']
  assert second['reference'] == reference
  for got in (first, second):
    for a, b in zip(got['params'], reference, strict=True):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  # The update moved the parameters (so the comparison means something).
  assert _initial_params() != reference


def _initial_params():
  network = base.from_module(
    models.Quality(
      n_actions=2, body=functools.partial(models.MLP, layer_widths=(16,))
    ),
    np.zeros(3, np.float32),
  )
  params = network.init(jax.random.PRNGKey(1))
  return [np.asarray(x).ravel().tolist() for x in jax.tree.leaves(params)]
