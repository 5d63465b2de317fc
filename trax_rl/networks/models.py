"""Flax modules: bodies (MLP, Nature-DQN conv torso) and Trax-named heads.

Heads take a `body`: a zero-argument factory of a flax module (a gin
configurable class such as `MLP`), called inside the head, so every model
builds its own body. All modules take a batch of observations `[B, ...]`.
"""

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from trax_rl import types

_ACTIVATIONS = {
  'relu': nn.relu,
  'tanh': jnp.tanh,
  'elu': nn.elu,
  'gelu': nn.gelu,
  'swish': nn.swish,
  'sigmoid': nn.sigmoid,
  'leaky_relu': nn.leaky_relu,
}


def activation_fn(activation: str | Callable) -> Callable:
  """An activation by name ('relu', 'tanh', ...) or the callable itself."""
  if callable(activation):
    return activation
  if activation not in _ACTIVATIONS:
    raise ValueError(
      f'unknown activation {activation!r}; known: {sorted(_ACTIVATIONS)}'
    )
  return _ACTIVATIONS[activation]


def dense_init(name: str) -> dict[str, Any]:
  """nn.Dense initializer kwargs by name.

  'flax': flax's defaults (LeCun normal kernels, zero biases). 'glorot': Trax's
  `tl.Dense` defaults (Glorot uniform kernels, N(0, 1e-6) biases), which
  Trax gin files are written for.

  Raises:
    ValueError: an unknown name.
  """
  if name == 'flax':
    return {}
  if name == 'glorot':
    return {
      'kernel_init': nn.initializers.glorot_uniform(),
      'bias_init': nn.initializers.normal(1e-6),
    }
  raise ValueError(f"dense_init must be 'flax' or 'glorot', got {name!r}")


class MLP(nn.Module):
  """Multilayer perceptron.

  Attributes:
    layer_widths: width of each hidden Dense layer.
    activation: activation after each hidden layer (name or callable).
    out_activation: whether the last layer also gets the activation.
    flatten: flatten each observation to a vector first.
    dense_init: initializers of the Dense layers, 'flax' or 'glorot' (see
      `dense_init`).
  """

  layer_widths: Sequence[int] = (64, 64)
  activation: str | Callable = 'relu'
  out_activation: bool = True
  flatten: bool = True
  dense_init: str = 'flax'

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    x = jnp.asarray(x, jnp.float32)
    if self.flatten:
      x = x.reshape((x.shape[0], -1))
    act = activation_fn(self.activation)
    init = dense_init(self.dense_init)
    for i, width in enumerate(self.layer_widths):
      x = nn.Dense(width, **init)(x)
      if i + 1 < len(self.layer_widths) or self.out_activation:
        x = act(x)
    return x


class ConvTorso(nn.Module):
  """The Nature-DQN torso: 3 conv layers and a 512-unit Dense, on [B, H, W, C].

  Attributes:
    scale: observations are multiplied by this (1/255 for uint8 frames).
    dense_width: width of the final Dense layer (0 to skip it).
    channels_first: observations are [B, C, H, W], as gymnasium's
      FrameStackObservation stacks frames.
  """

  scale: float = 1.0 / 255.0
  dense_width: int = 512
  channels_first: bool = False

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    x = jnp.asarray(x, jnp.float32) * self.scale
    if x.ndim == 3:  # [B, H, W] frames without a channel axis.
      x = x[..., None]
    elif self.channels_first:
      x = jnp.moveaxis(x, 1, -1)
    x = nn.relu(nn.Conv(32, (8, 8), strides=(4, 4), padding='VALID')(x))
    x = nn.relu(nn.Conv(64, (4, 4), strides=(2, 2), padding='VALID')(x))
    x = nn.relu(nn.Conv(64, (3, 3), strides=(1, 1), padding='VALID')(x))
    x = x.reshape((x.shape[0], -1))
    if self.dense_width:
      x = nn.relu(nn.Dense(self.dense_width)(x))
    return x


def head_init(head_init_range: float | None) -> dict[str, Any]:
  """Dense kwargs: Trax's `head_init_range`, U(-range, range) kernels."""
  if head_init_range is None:
    return {}
  if not head_init_range > 0:
    raise ValueError(f'head_init_range must be > 0, got {head_init_range!r}')

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(
      key, shape, dtype, -head_init_range, head_init_range
    )

  return {'kernel_init': init}


class MinAtarTorso(nn.Module):
  """The MinAtar torso: a 3x3 conv and a Dense layer, on [B, 10, 10, C].

  Young & Tian, 2019, "MinAtar: An Atari-Inspired Testbed for Thorough and
  Reproducible Reinforcement Learning Experiments": 16 filters, stride 1,
  then 128 units. The Nature-DQN `ConvTorso` needs frames of 36+ pixels.

  Attributes:
    channels: filters of the conv layer.
    dense_width: width of the Dense layer.
  """

  channels: int = 16
  dense_width: int = 128

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    x = jnp.asarray(x, jnp.float32)
    x = nn.relu(nn.Conv(self.channels, (3, 3), padding='VALID')(x))
    x = x.reshape((x.shape[0], -1))
    return nn.relu(nn.Dense(self.dense_width)(x))


class Policy(nn.Module):
  """Trax's `Policy`: body, then a Dense to the distribution's inputs.

  Attributes:
    n_inputs: the action distribution's number of inputs (set by the agent).
    body: body factory (gin: `@MLP` or `@ConvTorso`).
    head_init_range: if set, the head's kernel starts U(-range, range)
      (Trax's knob; None: flax's default initializer).
  """

  n_inputs: int
  body: Callable[[], nn.Module] = MLP
  head_init_range: float | None = None

  @nn.compact
  def __call__(self, x):
    head = nn.Dense(self.n_inputs, **head_init(self.head_init_range))
    return head(self.body()(x))


class Value(nn.Module):
  """Trax's `Value`: body, then a Dense to one scalar per observation [B].

  Attributes:
    body: body factory (gin: `@MLP` or `@ConvTorso`).
    head_init_range: if set, the head's kernel starts U(-range, range).
  """

  body: Callable[[], nn.Module] = MLP
  head_init_range: float | None = None

  @nn.compact
  def __call__(self, x):
    head = nn.Dense(1, **head_init(self.head_init_range))
    return head(self.body()(x))[..., 0]


class PolicyAndValue(nn.Module):
  """Trax's `PolicyAndValue`: a shared body with policy and value heads.

  Attributes:
    n_inputs: number of policy-distribution inputs.
    body: shared body factory.
    joint: share the body; if False, two bodies (one per head).

  Returns (dist_inputs [B, n_inputs], values [B]).
  """

  n_inputs: int
  body: Callable[[], nn.Module] = MLP
  joint: bool = True

  @nn.compact
  def __call__(self, x):
    h = self.body()(x)
    hv = h if self.joint else self.body()(x)
    return nn.Dense(self.n_inputs)(h), nn.Dense(1)(hv)[..., 0]


class Quality(nn.Module):
  """Trax's `Quality`: Q values for each action, optionally dueling.

  Attributes:
    n_actions: number of actions.
    body: body factory.
    dueling: split into value and advantage streams (Wang et al., 2016).
    dense_init: initializers of the head's Dense layers, 'flax' or 'glorot'
      (see `dense_init`).
  """

  n_actions: int
  body: Callable[[], nn.Module] = MLP
  dueling: bool = False
  dense_init: str = 'flax'

  @nn.compact
  def __call__(self, x) -> types.QOutput:
    init = dense_init(self.dense_init)
    h = self.body()(x)
    if not self.dueling:
      return types.QOutput(q_values=nn.Dense(self.n_actions, **init)(h))
    value = nn.Dense(1, **init)(h)
    adv = nn.Dense(self.n_actions, **init)(h)
    return types.QOutput(
      q_values=value + adv - jnp.mean(adv, axis=-1, keepdims=True)
    )


class CategoricalQuality(nn.Module):
  """C51 head: a categorical return distribution per action (Bellemare 2017).

  Attributes:
    n_actions: number of actions.
    body: body factory.
    num_atoms: support size.
    v_min: the support's lowest return.
    v_max: the support's highest return.
  """

  n_actions: int
  body: Callable[[], nn.Module] = MLP
  num_atoms: int = 51
  v_min: float = -10.0
  v_max: float = 10.0

  @nn.compact
  def __call__(self, x) -> types.QOutput:
    h = self.body()(x)
    logits = nn.Dense(self.n_actions * self.num_atoms)(h)
    logits = logits.reshape(h.shape[0], self.n_actions, self.num_atoms)
    atoms = jnp.linspace(self.v_min, self.v_max, self.num_atoms)
    return types.QOutput(
      q_values=categorical_mean(logits, atoms), dist=logits, atoms=atoms
    )


def categorical_mean(logits: jax.Array, atoms: jax.Array) -> jax.Array:
  """`sum(softmax(logits) * atoms, -1)`: the mean of each distribution.

  The numerator and the normalizer come out of one matrix product with
  `[atoms, 1]`. XLA's CPU backend runs the softmax, multiply and sum form
  as small reductions over the atom axis, which made a C51 update on
  CartPole about 1.25x slower (181 against 143 us with 21 atoms,
  `benchmarks/q_losses.py`).
  """
  shift = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
  weights = jnp.exp(logits - shift)
  sums = weights @ jnp.stack([atoms, jnp.ones_like(atoms)], axis=-1)
  return sums[..., 0] / sums[..., 1]


class QuantileQuality(nn.Module):
  """QR-DQN head: `num_atoms` return quantiles per action (Dabney 2018).

  Attributes:
    n_actions: number of actions.
    body: body factory.
    num_atoms: number of quantiles.
  """

  n_actions: int
  body: Callable[[], nn.Module] = MLP
  num_atoms: int = 200

  @nn.compact
  def __call__(self, x) -> types.QOutput:
    h = self.body()(x)
    q = nn.Dense(self.n_actions * self.num_atoms)(h)
    q = q.reshape(h.shape[0], self.n_actions, self.num_atoms)
    return types.QOutput(q_values=jnp.mean(q, axis=-1), dist=q)


def apply_over_time(
  apply: Callable, params: Any, obs: jnp.ndarray, obs_ndim: int
) -> Any:
  """Applies a `[N, ...]` network to `[B, T, ...]` observations."""
  lead = obs.shape[: obs.ndim - obs_ndim]
  flat = obs.reshape((-1,) + obs.shape[obs.ndim - obs_ndim :])
  out = apply(params, flat)
  n = flat.shape[0]

  def unflatten(y):  # Leaves without the batch axis (C51 atoms) stay as is.
    return y.reshape(lead + y.shape[1:]) if y.ndim and y.shape[0] == n else y

  return jax.tree.map(unflatten, out)


class ActionValue(nn.Module):
  """Trax's `Value(inject_actions=True)`: Q(s, a) for Q-value baselines.

  Attributes:
    body: observation body factory.
    is_discrete: embed integer actions (else a Dense over float actions).
    vocab_size: number of discrete actions.
    inject_actions_dim: width of the action injection.
    inject_actions_n_layers: Dense layers after the injection.
    multiplicative_action_injection: h * tanh(a) then LayerNorm (else h + a).

  Returns Q [B] for observations [B, ...] and actions [B, ...].
  """

  body: Callable[[], nn.Module] = MLP
  is_discrete: bool = True
  vocab_size: int = 2
  inject_actions_dim: int = 64
  inject_actions_n_layers: int = 1
  multiplicative_action_injection: bool = False

  @nn.compact
  def __call__(self, x, action):
    h = nn.Dense(self.inject_actions_dim)(self.body()(x))
    if self.is_discrete:
      embed = nn.Embed(self.vocab_size, self.inject_actions_dim)
      a = embed(jnp.asarray(action).astype(jnp.int32))
    else:
      flat = jnp.asarray(action, jnp.float32).reshape(h.shape[0], -1)
      a = nn.Dense(self.inject_actions_dim)(flat)
    if self.multiplicative_action_injection:
      h = nn.LayerNorm()(h * jnp.tanh(a))
    else:
      h = h + a
    for _ in range(self.inject_actions_n_layers):
      h = nn.relu(nn.Dense(self.inject_actions_dim)(h))
    return nn.Dense(1)(h)[..., 0]


class LayerNormQNetwork(nn.Module):
  """PQN's Q network: LayerNorm and ReLU after every hidden layer.

  With LayerNorm right after each layer, the scale of a layer's initial
  kernel does not matter, so flax's default initializers stand in for
  purejaxql's He-normal ones.

  Attributes:
    n_actions: A, one Q value per action.
    layer_widths: widths of the hidden Dense layers.
    conv_channels: if > 0, a 3x3 VALID conv of this many filters first
      (MinAtar's torso, on `[B, H, W, C]` frames).
    layer_norm: normalize after each hidden layer (the paper's point).
  """

  n_actions: int
  layer_widths: Sequence[int] = (128, 128)
  conv_channels: int = 0
  layer_norm: bool = True

  def _normalize(self, x: jax.Array) -> jax.Array:
    return nn.LayerNorm()(x) if self.layer_norm else x

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = jnp.asarray(x, jnp.float32)
    if self.conv_channels:
      x = nn.Conv(self.conv_channels, (3, 3), padding='VALID')(x)
      x = nn.relu(self._normalize(x))
    x = x.reshape((x.shape[0], -1))
    for width in self.layer_widths:
      x = nn.relu(self._normalize(nn.Dense(width)(x)))
    return nn.Dense(self.n_actions)(x)  # [B, A]
