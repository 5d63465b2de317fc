"""Trax's optimizers as optax transformations, with Trax's semantics.

Registered in gin as `Adam`, `RMSProp`, `Momentum` and `SGD`, so Trax gin
files (`Adam.clip_grad_norm = 0.5`) read unchanged. They differ from optax's
`adam` and friends in their defaults (Adam's eps is 1e-5 and it decays
weights by 1e-5 per step) and in how weight decay works: Trax multiplies the
weights by `1 - weight_decay_rate` every step, independent of the learning
rate. `clip_grad_norm` clips the gradients to that global norm first.
"""

import optax

from trax_rl import validation


def _finish(
  direction: optax.GradientTransformation,
  learning_rate: optax.ScalarOrSchedule,
  weight_decay_rate: float,
  clip_grad_norm: float | None,
) -> optax.GradientTransformation:
  """clip -> direction -> -lr * direction -> -weight_decay_rate * w."""
  validation.check_unit('weight_decay_rate', weight_decay_rate)
  parts = []
  if clip_grad_norm is not None:
    validation.check_positive('clip_grad_norm', clip_grad_norm)
    parts.append(optax.clip_by_global_norm(clip_grad_norm))
  parts += [direction, optax.scale_by_learning_rate(learning_rate)]
  if weight_decay_rate:
    # Added after the learning rate: w <- (1 - rate) * w - lr * direction.
    parts.append(optax.add_decayed_weights(-weight_decay_rate))
  return optax.chain(*parts)


def trax_adam(
  learning_rate: optax.ScalarOrSchedule = 1e-4,
  weight_decay_rate: float = 1e-5,
  b1: float = 0.9,
  b2: float = 0.999,
  eps: float = 1e-5,
  clip_grad_norm: float | None = None,
) -> optax.GradientTransformation:
  """Trax's `Adam` (Kingma and Ba, 2015), gin name `Adam`.

  Args:
    learning_rate: the step size or an optax schedule (the agents pass it).
    weight_decay_rate: fraction of each weight subtracted every step.
    b1: decay rate of the first-moment estimate.
    b2: decay rate of the second-moment estimate.
    eps: added to the square root of the second moment.
    clip_grad_norm: clip gradients to this global L2 norm (None: off).

  Returns:
    The optax transformation.
  """
  return _finish(
    optax.scale_by_adam(b1=b1, b2=b2, eps=eps),
    learning_rate,
    weight_decay_rate,
    clip_grad_norm,
  )


def trax_rmsprop(
  learning_rate: optax.ScalarOrSchedule = 1e-3,
  gamma: float = 0.9,
  eps: float = 1e-8,
  clip_grad_norm: float | None = None,
) -> optax.GradientTransformation:
  """Trax's `RMSProp`, gin name `RMSProp`: squared averages start at 1.

  Args:
    learning_rate: the step size or an optax schedule.
    gamma: decay rate of the average of squared gradients.
    eps: added to its square root.
    clip_grad_norm: clip gradients to this global L2 norm (None: off).

  Returns:
    The optax transformation.
  """
  rms = optax.scale_by_rms(
    decay=gamma, eps=eps, initial_scale=1.0, eps_in_sqrt=False
  )
  return _finish(rms, learning_rate, 0.0, clip_grad_norm)


def trax_momentum(
  learning_rate: optax.ScalarOrSchedule = 1e-2,
  mass: float = 0.9,
  weight_decay_rate: float = 1e-5,
  nesterov: bool = True,
) -> optax.GradientTransformation:
  """Trax's `Momentum` (Sutskever et al., 2013), gin name `Momentum`.

  Args:
    learning_rate: the step size or an optax schedule.
    mass: decay of the velocity.
    weight_decay_rate: fraction of each weight subtracted every step.
    nesterov: use Nesterov's correction.

  Returns:
    The optax transformation.
  """
  trace = optax.trace(decay=mass, nesterov=nesterov)
  return _finish(trace, learning_rate, weight_decay_rate, None)


def trax_sgd(
  learning_rate: optax.ScalarOrSchedule = 1e-2,
  clip_grad_norm: float | None = None,
) -> optax.GradientTransformation:
  """Trax's `SGD`, gin name `SGD`.

  Args:
    learning_rate: the step size or an optax schedule.
    clip_grad_norm: clip gradients to this global L2 norm (None: off).

  Returns:
    The optax transformation.
  """
  return _finish(optax.identity(), learning_rate, 0.0, clip_grad_norm)
