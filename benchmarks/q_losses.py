"""Cost of one compiled update of each Q loss, and of rlax's per-example form.

  python benchmarks/q_losses.py [--widths 64 64] [--atoms 51] [--batch 64]

On 2 CPUs the updates are most of a value learner's run on both paths, so
this is where a loss's cost shows. Each measure jits a `lax.scan` of
--updates updates (loss, gradient and Adam step) over batches of CartPole
shapes that differ at every step, and reports the fastest of --repeats
calls, in microseconds per update. C51 and QR-DQN are also timed in the
form `trax_rl` used before it batched them: rlax's
`categorical_double_q_learning` and `quantile_q_learning` vmapped over the
batch (the same numbers; `tests/losses/test_q_learning.py` holds ours to
rlax's). Ours and rlax's alternate within each repeat, so a ratio is from
one sitting. One JSON line per loss.
"""

import argparse
import functools
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax

from trax_rl import types
from trax_rl.losses import distributional, q_learning, q_parts
from trax_rl.networks import base, models

OBS, ACTIONS = 4, 2


def rlax_c51(network, params, target_params, batch, key):
  """C51 as rlax computes it, one example at a time (vmapped)."""
  del key
  t = batch.data
  online = network.apply(params, t.observation)
  target = network.apply(target_params, t.next_observation)
  selector = network.apply(params, t.next_observation).q_values
  action, reward, discount = q_parts.transition_inputs(t, online.q_values, 1.0)
  per_example = jax.vmap(
    rlax.categorical_double_q_learning, in_axes=(None, 0, 0, 0, 0, None, 0, 0)
  )(
    online.atoms,
    online.dist,
    action,
    reward,
    discount,
    target.atoms,
    target.dist,
    selector,
  )
  weights = q_parts.importance_weights(batch.probability, 0.4)
  return jnp.mean(weights * per_example), None


def rlax_qr(network, params, target_params, batch, key):
  """QR-DQN as rlax computes it, one example at a time (vmapped)."""
  del key
  t = batch.data
  online = network.apply(params, t.observation)
  target = network.apply(target_params, t.next_observation)
  k = online.dist.shape[-1]
  taus = (jnp.arange(k, dtype=online.dist.dtype) + 0.5) / k
  action, reward, discount = q_parts.transition_inputs(t, online.dist, None)
  dist_t = jnp.swapaxes(target.dist, 1, 2)
  per_example = jax.vmap(
    functools.partial(rlax.quantile_q_learning, huber_param=1.0),
    in_axes=(0, None, 0, 0, 0, 0, 0),
  )(
    jnp.swapaxes(online.dist, 1, 2),
    taus,
    action,
    reward,
    discount,
    dist_t,
    dist_t,
  )
  return jnp.mean(per_example), None


def _network(head: str, widths: tuple[int, ...], atoms: int) -> base.Network:
  body = functools.partial(models.MLP, layer_widths=widths, activation='relu')
  module = {
    'q': lambda: models.Quality(n_actions=ACTIONS, body=body),
    'c51': lambda: models.CategoricalQuality(
      n_actions=ACTIONS, body=body, num_atoms=atoms, v_min=0.0, v_max=100.0
    ),
    'quantile': lambda: models.QuantileQuality(
      n_actions=ACTIONS, body=body, num_atoms=atoms
    ),
  }[head]()
  return base.from_module(module, np.zeros(OBS, np.float32))


def _batches(n: int, batch: int) -> types.Batch:
  rng = np.random.default_rng(0)

  def f32(*shape):
    return jnp.asarray(rng.normal(size=shape), jnp.float32)

  transition = types.Transition(
    observation=f32(n, batch, OBS),
    action=jnp.asarray(rng.integers(0, ACTIONS, (n, batch)), jnp.int32),
    reward=f32(n, batch),
    discount=jnp.full((n, batch), 0.97, jnp.float32),
    next_observation=f32(n, batch, OBS),
  )
  probability = rng.uniform(1e-4, 1e-3, (n, batch)).astype(np.float32)
  return types.Batch(transition, jnp.asarray(probability))


def _updates(network, loss_fn, batches):
  """A jitted call running one update per batch of `batches`."""
  optimizer = optax.adam(1e-3)

  def update(carry, batch, target_params):
    params, opt_state = carry

    def loss(p):
      return loss_fn(network, p, target_params, batch, None)[0]

    value, grads = jax.value_and_grad(loss)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), value

  @jax.jit
  def run(params, opt_state, target_params, batches):
    step = functools.partial(update, target_params=target_params)
    return jax.lax.scan(step, (params, opt_state), batches)

  params = network.init(jax.random.PRNGKey(0))
  args = (params, optimizer.init(params), params, batches)
  jax.block_until_ready(run(*args))  # Compile.
  return lambda: jax.block_until_ready(run(*args))


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--widths', type=int, nargs='+', default=[64, 64])
  p.add_argument('--atoms', type=int, default=51)
  p.add_argument('--batch', type=int, default=64)
  p.add_argument('--updates', type=int, default=200)
  p.add_argument('--repeats', type=int, default=15)
  args = p.parse_args()
  widths = tuple(args.widths)
  batches = _batches(args.updates, args.batch)
  cases = [
    ('QLearning', 'q', q_learning.QLearning(), None),
    ('RegularizedQLearning', 'q', q_learning.RegularizedQLearning(), None),
    ('MunchausenQLearning', 'q', q_learning.MunchausenQLearning(), None),
    (
      'PrioritizedDoubleQLearning',
      'q',
      q_learning.PrioritizedDoubleQLearning(),
      None,
    ),
    (
      'PrioritizedCategoricalDoubleQLearning',
      'c51',
      distributional.PrioritizedCategoricalDoubleQLearning(0.4),
      rlax_c51,
    ),
    ('QrDqn', 'quantile', distributional.QrDqn(), rlax_qr),
  ]
  for name, head, loss, reference in cases:
    network = _network(head, widths, args.atoms)
    runs = {'ours': _updates(network, loss, batches)}
    if reference is not None:
      runs['rlax'] = _updates(network, reference, batches)
    best = {k: float('inf') for k in runs}
    for _ in range(args.repeats):
      for k, run in runs.items():
        start = time.perf_counter()
        run()
        best[k] = min(best[k], time.perf_counter() - start)
    us = {k: round(v / args.updates * 1e6, 1) for k, v in best.items()}
    line = {
      'loss': name,
      'widths': list(widths),
      'atoms': args.atoms if head != 'q' else None,
      'batch': args.batch,
      'us_per_update': us['ours'],
    }
    if 'rlax' in us:
      line['rlax_vmapped_us_per_update'] = us['rlax']
      line['rlax_over_ours'] = round(us['rlax'] / us['ours'], 2)
    print(json.dumps(line), flush=True)


if __name__ == '__main__':
  main()
