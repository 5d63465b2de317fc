"""Network wrappers: the compiled init and the C51 head's mean."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl.networks import base, models

_BODY = functools.partial(models.MLP, layer_widths=(8,), activation='relu')


def _quality():
  return models.Quality(n_actions=3, body=_BODY)


def test_the_compiled_init_gives_flax_parameters_and_is_shared():
  example = np.zeros(5, np.float32)
  key = jax.random.PRNGKey(4)
  expected = _quality().init(key, jnp.zeros((1, 5)))
  base._COMPILED_INITS.clear()
  first = base.from_module(_quality(), example).init(key)
  # A second agent's equal module reuses the first one's compile.
  second = base.from_module(_quality(), example).init(key)
  assert len(base._COMPILED_INITS) == 1
  for got in (first, second):
    assert jax.tree.structure(got) == jax.tree.structure(expected)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
      np.testing.assert_array_equal(a, b)


_WIDTH = {'value': 8}


class _GinLikeBody(nn.Module):
  """Reads its width when called, as a gin-configured body does."""

  @nn.compact
  def __call__(self, x):
    return nn.Dense(_WIDTH['value'])(x)


def test_modules_equal_by_hash_but_not_by_program_do_not_share(monkeypatch):
  # Two configs binding different widths give modules that compare equal;
  # each must still get its own parameters' shapes.
  def init_with(width):
    monkeypatch.setitem(_WIDTH, 'value', width)
    module = models.Quality(n_actions=2, body=_GinLikeBody)
    network = base.from_module(module, np.zeros(3, np.float32))
    return network.init(jax.random.PRNGKey(0))

  assert models.Quality(2, body=_GinLikeBody) == models.Quality(
    2, body=_GinLikeBody
  )
  for width in (8, 16, 8):
    kernel = init_with(width)['params']['_GinLikeBody_0']['Dense_0']['kernel']
    assert kernel.shape == (3, width)


def test_an_unhashable_module_still_inits():
  module = models.MLP(layer_widths=[4])  # A list: no hash.
  params = base.from_module(module, np.zeros(2, np.float32)).init(
    jax.random.PRNGKey(0)
  )
  assert params['params']['Dense_0']['kernel'].shape == (2, 4)


def test_categorical_mean_is_the_softmax_mean():
  rng = np.random.default_rng(0)
  logits = jnp.asarray(rng.normal(size=(6, 2, 11)) * 30, jnp.float32)
  logits = logits.at[0, 0, 3].set(500.0)  # exp would overflow unshifted.
  atoms = jnp.linspace(-5.0, 20.0, 11)

  def reference(x):
    return jnp.sum(jax.nn.softmax(x) * atoms, axis=-1)

  got = models.categorical_mean(logits, atoms)
  assert np.all(np.isfinite(got))
  np.testing.assert_allclose(got, reference(logits), rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(got[0, 0], atoms[3], rtol=1e-6)
  weights = jnp.asarray(rng.normal(size=(6, 2)), jnp.float32)
  grad, grad_ref = (
    jax.grad(lambda x, f=f: jnp.sum(weights * f(x)))(logits)
    for f in (lambda x: models.categorical_mean(x, atoms), reference)
  )
  np.testing.assert_allclose(grad, grad_ref, rtol=1e-4, atol=1e-5)
