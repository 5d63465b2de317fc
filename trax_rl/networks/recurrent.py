"""Recurrent Q networks: a torso, a flax LSTM core and a Q head (R2D2).

The module `RecurrentQuality` works on time-major sequences
`[T, B, ...]`: the torso and the head see all T * B observations at once and
only the LSTM steps through time (in a `flax.linen.scan`), so one step of
acting is the same computation as an unroll of length 1.
`make_recurrent_network` wraps it as a `base.RecurrentNetwork` of pure
functions.

The core state is an `LSTMState(hidden, cell)` of `[B, H]` arrays; the
program keeps it per env between acting steps and stores it with each
sequence (R2D2's stored state).
"""

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import types
from trax_rl.networks import base, models


class LSTMState(NamedTuple):
  """The recurrent state of an LSTM core."""

  hidden: types.Array  # [B, H]
  cell: types.Array  # [B, H]


def zero_state(batch_size: int, size: int) -> LSTMState:
  """An all-zero state `[batch_size, size]` (the state at episode starts)."""
  zeros = jnp.zeros((batch_size, size), jnp.float32)
  return LSTMState(zeros, zeros)


def reset_where(first: types.Array, state: LSTMState) -> LSTMState:
  """Zeroes the state of the rows where `first[B]` (an episode starts)."""
  keep = 1.0 - jnp.asarray(first, jnp.float32)[:, None]
  return jax.tree.map(lambda x: x * keep, state)


class _LSTMStep(nn.Module):
  """One LSTM step that zeroes the carry where an episode starts."""

  size: int

  @nn.compact
  def __call__(self, state: LSTMState, inputs):
    x, first = inputs  # [B, D], [B]
    state = reset_where(first, state)
    (cell, hidden), out = nn.OptimizedLSTMCell(self.size, name='cell')(
      (state.cell, state.hidden), x
    )
    return LSTMState(hidden, cell), out


class RecurrentQuality(nn.Module):
  """Torso, LSTM and Q head, as R2D2's (Kapturowski et al., 2019).

  Called as `module(obs[T, B, ...], state, first[T, B] or None)` and returns
  `(QOutput(q_values[T, B, A]), final state)`; where `first` is True the
  state is zeroed before that step (None: no episode starts inside).

  Attributes:
    n_actions: number of actions.
    torso: zero-argument factory of the torso module (e.g. `MLP`,
      `ConvTorso`), applied to `[N, ...]` observations.
    lstm_size: width H of the LSTM.
    head_widths: hidden layer widths of the Q head's MLP (() for a single
      Dense layer).
    dueling: split the head into value and advantage streams.
  """

  n_actions: int
  torso: Callable[[], nn.Module] = models.MLP
  lstm_size: int = 128
  head_widths: Sequence[int] = ()
  dueling: bool = False

  def initial_state(self, batch_size: int) -> LSTMState:
    return zero_state(batch_size, self.lstm_size)

  @nn.compact
  def __call__(self, obs, state: LSTMState, first=None):
    n_time, n_batch = obs.shape[:2]
    flat = obs.reshape((n_time * n_batch,) + obs.shape[2:])
    embedding = self.torso()(flat)
    embedding = embedding.reshape((n_time, n_batch, -1))
    if first is None:
      first = jnp.zeros((n_time, n_batch), jnp.float32)
    scan = nn.scan(
      _LSTMStep,
      variable_broadcast='params',
      split_rngs={'params': False},
    )
    state, outputs = scan(self.lstm_size, name='lstm')(
      state, (embedding, first)
    )
    head = models.Quality(
      self.n_actions,
      body=functools.partial(models.MLP, layer_widths=tuple(self.head_widths)),
      dueling=self.dueling,
    )
    q = head(outputs.reshape((n_time * n_batch, -1)))
    return jax.tree.map(
      lambda x: x.reshape((n_time, n_batch) + x.shape[1:]), q
    ), state


def _init(module: nn.Module, shape: tuple[int, ...], dtype: np.dtype, key):
  dummy = jnp.zeros((1, 1) + shape, dtype)
  return module.init(key, dummy, module.initial_state(1))


def make_recurrent_network(
  module: RecurrentQuality, example_observation: np.ndarray
) -> base.RecurrentNetwork:
  """Wraps a `RecurrentQuality`-like module as pure functions.

  Args:
    module: a flax module called as `module(obs[T, B, ...], state, first)`
      with an `initial_state(batch_size)` method.
    example_observation: one observation (no batch axis), for init shapes.

  Returns:
    RecurrentNetwork with `init(key)` (`base.jitted_init`),
    `apply(params, obs[B, ...], state) -> (QOutput[B], state)` (one step)
    and `unroll(params, obs[T, B, ...], state, first[T, B] = None) ->
    (QOutput[T, B], state)`.
  """
  init = base.jitted_init(_init, module, example_observation)

  def apply(params, obs, state):
    out, state = module.apply(params, jnp.asarray(obs)[None], state)
    return jax.tree.map(lambda x: x[0], out), state

  def unroll(params, obs, state, first=None):
    return module.apply(params, obs, state, first)

  return base.RecurrentNetwork(
    init=init, apply=apply, unroll=unroll, initial_state=module.initial_state
  )
