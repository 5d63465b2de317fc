"""Action distributions parametrized by network outputs, as pure jnp objects.

A distribution holds only its static description (number of categories,
shape, std settings) and is a frozen, hashable dataclass, so it can be closed
over or passed as a static argument under `jax.jit`. The parameters come in as
`inputs[..., n_inputs]` from the policy network; the leading dimensions are
batch dimensions.

Temperature keeps Trax's meaning: 1.0 samples from the distribution the
policy is trained on, 0.0 returns the mode exactly (argmax / mean), other
values divide the logits (categorical) or scale the std (Gaussian). It may be
a Python float or a traced scalar.
"""

import dataclasses
import enum
import math

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from trax_rl import types


class LearnStd(enum.Enum):
  """How a Gaussian's std is learned (None, the third choice: a fixed std).

  Gin files name the choices by their values: `learn_std = 'separate'`.
  """

  SHARED = 'shared'  # One learned std for all dimensions.
  SEPARATE = 'separate'  # One learned std per dimension.


_LEARN_STD_OPTIONS = (None,) + tuple(m.value for m in LearnStd)


def _safe_temperature(temperature):
  """Returns (temperature == 0, a temperature safe to divide by)."""
  temperature = jnp.asarray(temperature, dtype=float)
  is_zero = temperature == 0.0
  return is_zero, jnp.where(is_zero, 1.0, temperature)


def _categorical_sample(logits, key, temperature):
  """Samples indices from logits [..., C]; argmax at temperature 0."""
  is_zero, safe = _safe_temperature(temperature)
  sampled = jax.random.categorical(key, logits / safe, axis=-1)
  return jnp.where(is_zero, jnp.argmax(logits, axis=-1), sampled)


def _categorical_log_prob(logits, point):
  """Log-probabilities [...] of integer points [...] under logits [..., C]."""
  log_probs = jax.nn.log_softmax(logits, axis=-1)
  point = jnp.asarray(point).astype(jnp.int32)[..., None]
  return jnp.take_along_axis(log_probs, point, axis=-1)[..., 0]


def _categorical_entropy(logits):
  """Entropy [...] of the whole distribution given by logits [..., C]."""
  log_probs = jax.nn.log_softmax(logits, axis=-1)
  probs = jnp.exp(log_probs)
  # Categories with -inf logits contribute 0 (not 0 * -inf), in value and
  # gradient.
  log_probs = jnp.where(probs > 0.0, log_probs, 0.0)
  return -jnp.sum(probs * log_probs, axis=-1)


def _check_n_inputs(inputs, n_inputs, name):
  if inputs.shape[-1] != n_inputs:
    raise ValueError(
      f'{name} expects inputs [..., {n_inputs}], got shape {inputs.shape}.'
    )


@dataclasses.dataclass(frozen=True)
class Categorical:
  """Categorical distribution(s) over `n_categories` values, from logits.

  With `shape` non-empty it is a product of independent categoricals with the
  same number of categories, one per element of a sample of that shape.

  Attributes:
    n_categories: number of values each sample element takes, 0..n-1.
    shape: shape of one sample; () for a single integer.
  """

  n_categories: int
  shape: tuple[int, ...] = ()

  def __post_init__(self):
    object.__setattr__(self, 'shape', tuple(int(d) for d in self.shape))
    if self.n_categories < 1:
      raise ValueError(f'n_categories must be >= 1, got {self.n_categories}.')

  @property
  def n_inputs(self) -> int:
    return math.prod(self.shape) * self.n_categories

  def _logits(self, inputs):
    inputs = jnp.asarray(inputs)
    _check_n_inputs(inputs, self.n_inputs, 'Categorical')
    return inputs.reshape(inputs.shape[:-1] + self.shape + (self.n_categories,))

  def _sum_over_sample(self, x):
    """Sums [..., *shape] over the sample dimensions."""
    return jnp.sum(x, axis=tuple(range(x.ndim - len(self.shape), x.ndim)))

  def sample(
    self, inputs: types.Array, key: types.PRNGKey, temperature: float = 1.0
  ) -> jax.Array:
    """Samples int32 values [..., *shape] from logits [..., n_inputs]."""
    return _categorical_sample(self._logits(inputs), key, temperature)

  def mode(self, inputs: types.Array) -> jax.Array:
    """Most probable values [..., *shape]."""
    return jnp.argmax(self._logits(inputs), axis=-1)

  def log_prob(self, inputs: types.Array, point: types.Array) -> jax.Array:
    """Log-probability [...] of integer `point` [..., *shape]."""
    return self._sum_over_sample(
      _categorical_log_prob(self._logits(inputs), point)
    )

  def entropy(self, inputs: types.Array) -> jax.Array:
    """Entropy [...] of the full distribution, summed over the sample."""
    return self._sum_over_sample(_categorical_entropy(self._logits(inputs)))


@dataclasses.dataclass(frozen=True)
class MultiCategorical:
  """Independent categoricals with their own category counts (MultiDiscrete).

  The logits of all components are concatenated along the last axis, first
  nvec[0] of them for component 0, and so on.

  Attributes:
    nvec: number of categories of each component.
  """

  nvec: tuple[int, ...]

  def __post_init__(self):
    object.__setattr__(self, 'nvec', tuple(int(n) for n in self.nvec))
    if not self.nvec or min(self.nvec) < 1:
      raise ValueError(f'nvec must be non-empty and >= 1, got {self.nvec}.')

  @property
  def n_inputs(self) -> int:
    return sum(self.nvec)

  def _logits(self, inputs):
    """Splits inputs [..., n_inputs] into one logits array per component."""
    inputs = jnp.asarray(inputs)
    _check_n_inputs(inputs, self.n_inputs, 'MultiCategorical')
    offsets = np.cumsum(self.nvec)[:-1].tolist()
    return jnp.split(inputs, offsets, axis=-1)

  def sample(
    self, inputs: types.Array, key: types.PRNGKey, temperature: float = 1.0
  ) -> jax.Array:
    """Samples int32 values [..., len(nvec)] from logits [..., n_inputs]."""
    logits = self._logits(inputs)
    keys = jax.random.split(key, len(logits))
    return jnp.stack(
      [
        _categorical_sample(component, k, temperature)
        for component, k in zip(logits, keys)
      ],
      axis=-1,
    )

  def mode(self, inputs: types.Array) -> jax.Array:
    """Most probable values [..., len(nvec)]."""
    return jnp.stack(
      [jnp.argmax(component, axis=-1) for component in self._logits(inputs)],
      axis=-1,
    )

  def log_prob(self, inputs: types.Array, point: types.Array) -> jax.Array:
    """Log-probability [...] of integer `point` [..., len(nvec)]."""
    point = jnp.asarray(point)
    return sum(
      _categorical_log_prob(component, point[..., i])
      for i, component in enumerate(self._logits(inputs))
    )

  def entropy(self, inputs: types.Array) -> jax.Array:
    """Entropy [...] of the joint distribution (sum over components)."""
    return sum(_categorical_entropy(c) for c in self._logits(inputs))


@dataclasses.dataclass(frozen=True)
class Gaussian:
  """Independent (diagonal) Gaussian over samples of `shape`, from means.

  The inputs hold the means of all dimensions, flattened, followed (if the std
  is learned) by std parameters. A learned std is softplus(input + std), as in
  Trax, so an input of 0 gives softplus(std).

  Attributes:
    shape: shape of one sample.
    std: the fixed standard deviation, or the offset of a learned one.
    learn_std: None for a fixed `std`; `LearnStd.SHARED` ('shared') for
      one learned std for all dimensions (one extra input);
      `LearnStd.SEPARATE` ('separate') for one learned std per dimension
      (as many extra inputs as dimensions). Strings become `LearnStd`.
  """

  shape: tuple[int, ...] = ()
  std: float = 1.0
  learn_std: LearnStd | str | None = None

  def __post_init__(self):
    object.__setattr__(self, 'shape', tuple(int(d) for d in self.shape))
    if self.learn_std is not None:
      try:
        object.__setattr__(self, 'learn_std', LearnStd(self.learn_std))
      except ValueError:
        raise ValueError(
          f'learn_std must be one of {_LEARN_STD_OPTIONS}, '
          f'got {self.learn_std!r}.'
        ) from None
    if self.learn_std is None and not self.std > 0:
      raise ValueError(f'A fixed std must be > 0, got {self.std}.')

  @property
  def _n_dims(self) -> int:
    return math.prod(self.shape)

  @property
  def n_inputs(self) -> int:
    n = self._n_dims
    extra = {None: 0, LearnStd.SHARED: 1, LearnStd.SEPARATE: n}
    return n + extra[self.learn_std]

  def _params(self, inputs):
    """Returns (mean, std), both [..., n_dims], from inputs [..., n_inputs]."""
    inputs = jnp.asarray(inputs)
    _check_n_inputs(inputs, self.n_inputs, 'Gaussian')
    n = self._n_dims
    mean = inputs[..., :n]
    if self.learn_std is None:
      std = jnp.asarray(self.std, mean.dtype)
    else:
      std = jax.nn.softplus(inputs[..., n:] + self.std)
    return mean, jnp.broadcast_to(std, mean.shape)

  def _unflatten(self, x):
    return x.reshape(x.shape[:-1] + self.shape)

  def sample(
    self, inputs: types.Array, key: types.PRNGKey, temperature: float = 1.0
  ) -> jax.Array:
    """Samples [..., *shape]: mean + temperature * std * N(0, 1)."""
    mean, std = self._params(inputs)
    noise = jax.random.normal(key, mean.shape, mean.dtype)
    # At temperature 0 this adds exact zeros: the sample is the mean.
    return self._unflatten(mean + temperature * std * noise)

  def mode(self, inputs: types.Array) -> jax.Array:
    """The mean [..., *shape]."""
    mean, _ = self._params(inputs)
    return self._unflatten(mean)

  def log_prob(self, inputs: types.Array, point: types.Array) -> jax.Array:
    """Log-density [...] of `point` [..., *shape]."""
    mean, std = self._params(inputs)
    point = jnp.asarray(point).reshape(mean.shape)
    return -jnp.sum(
      (point - mean) ** 2 / (2.0 * std**2)
      + jnp.log(std)
      + 0.5 * jnp.log(2.0 * jnp.pi),
      axis=-1,
    )

  def entropy(self, inputs: types.Array) -> jax.Array:
    """Entropy [...]: the sum over dims of 0.5 * log(2 * pi * e * std^2)."""
    _, std = self._params(inputs)
    return jnp.sum(0.5 * jnp.log(2.0 * jnp.pi * jnp.e) + jnp.log(std), axis=-1)


Distribution = Categorical | MultiCategorical | Gaussian


def create_distribution(
  space: gym.Space, std: float = 1.0, learn_std: LearnStd | str | None = None
) -> Distribution:
  """Returns the distribution of actions in a gymnasium space.

  Args:
    space: `Discrete` (-> Categorical), `MultiDiscrete` (-> MultiCategorical)
      or `Box` (-> Gaussian over the box's shape, unbounded: clip actions to
      the box in the environment wrapper if needed).
    std: for a Box, the Gaussian's fixed std or the offset of a learned one.
    learn_std: for a Box, None, 'shared' or 'separate' (see `Gaussian`).

  Returns:
    A Categorical, MultiCategorical or Gaussian.

  Raises:
    ValueError: for other spaces, and for discrete spaces whose values do not
      start at 0 or whose nvec is not one-dimensional.
  """
  if isinstance(space, gym.spaces.Discrete):
    if int(space.start) != 0:
      raise ValueError(f'Unsupported action space {space}: start must be 0.')
    return Categorical(n_categories=int(space.n))
  if isinstance(space, gym.spaces.MultiDiscrete):
    if space.nvec.ndim != 1 or np.any(space.start != 0):
      raise ValueError(
        f'Unsupported action space {space}: need 1-D nvec and start 0.'
      )
    return MultiCategorical(nvec=tuple(space.nvec.tolist()))
  if isinstance(space, gym.spaces.Box):
    return Gaussian(shape=space.shape, std=std, learn_std=learn_std)
  raise ValueError(
    f'Unsupported action space {space}: expected Discrete, MultiDiscrete or '
    'Box.'
  )
