"""What a run does when a value turns NaN or inf: stop, warn or not check.

The checks themselves run where the values are: the loss in every compiled
update and the parameters once per epoch (`supervised.update`), the
observations in collection (`collection`). `Agent.run` reads them once per
epoch and acts on them here.
"""

import logging

POLICIES = ('stop', 'warn', 'off')
_LOG = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
  """A run stopped on a NaN or inf; the checkpoint on disk is the last finite."""


def check_policy(policy: str) -> None:
  """Raises: ValueError, for a policy not in `POLICIES`."""
  if policy not in POLICIES:
    raise ValueError(f'on_nonfinite must be one of {POLICIES}, got {policy!r}')


def report(policy: str, what: str, epoch: int, step: int, kept: str) -> None:
  """Stops (raises) or warns about a non-finite `what`.

  Args:
    policy: 'stop' or 'warn' (see `POLICIES`).
    what: the value, e.g. 'value/loss' or 'observation'.
    epoch: the epoch it turned up in.
    step: the update step it turned up at.
    kept: what the output holds, e.g. 'checkpoint.pkl keeps epoch 6'.

  Raises:
    NonFiniteError: with policy 'stop'.
  """
  message = f'non-finite {what} at epoch {epoch}, update step {step}'
  if policy == 'warn':
    _LOG.warning('%s; training on (on_nonfinite=warn)', message)
    return
  raise NonFiniteError(
    f"{message}; {kept} (on_nonfinite='warn' trains on anyway)"
  )
