"""What a run does when a value turns NaN or inf: stop, warn or not check.

The checks themselves run where the values are: the loss in every compiled
update and the parameters once per epoch (`supervised.update`), the
observations in collection (`collection`). `Agent.run` reads them once per
epoch and acts on them here.
"""

import logging
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from trax_rl import checkpoint
from trax_rl.supervised import train_state as train_state_lib
from trax_rl.supervised import update

POLICIES = ('stop', 'warn', 'off')
_LOG = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
  """A run stopped on a NaN or inf; the checkpoint on disk is the last finite."""


def check_policy(policy: str) -> None:
  """Raises: ValueError, for a policy not in `POLICIES`."""
  if policy not in POLICIES:
    raise ValueError(f'on_nonfinite must be one of {POLICIES}, got {policy!r}')


def report(policy: str, what: str, epoch: int, step: int, saved: int) -> None:
  """Stops (raises) or warns about a non-finite `what`.

  Args:
    policy: 'stop' or 'warn' (see `POLICIES`).
    what: the value, e.g. 'value/loss' or 'observation'.
    epoch: the epoch it turned up in.
    step: the update step it turned up at.
    saved: the epoch the checkpoint on disk holds (0: none saved).

  Raises:
    NonFiniteError: with policy 'stop'.
  """
  message = f'non-finite {what} at epoch {epoch}, update step {step}'
  if policy == 'warn':
    _LOG.warning('%s; training on (on_nonfinite=warn)', message)
    return
  kept = 'no epoch saved'
  if saved:
    kept = f'{checkpoint.CHECKPOINT_FILE} keeps epoch {saved}'
  raise NonFiniteError(
    f"{message}; {kept} (on_nonfinite='warn' trains on anyway)"
  )


def observation_count(source: Any) -> int:
  """Non-finite observations the source has seen (0 where it checks none)."""
  count = getattr(source, 'n_nonfinite', None)
  return 0 if count is None else count()


def _train_states(learner: Any, train_name: str) -> list[tuple[str, Any]]:
  """The learner's checked train states, named ('value', 'policy', ...)."""
  is_state = lambda x: isinstance(x, train_state_lib.TrainState)  # noqa: E731
  found = []
  flat, _ = jax.tree_util.tree_flatten_with_path(learner, is_leaf=is_state)
  for path, state in flat:
    if is_state(state) and isinstance(state.health, update.Health):
      found.append((_state_name(path, train_name), state))
  return found


def steps_done(learner: Any) -> int:
  """The learner's updates so far (its train states' largest step)."""
  steps = [np.max(np.asarray(s.step)) for _, s in _train_states(learner, '')]
  return int(max(steps, default=0))


def first_in_learner(
  learner: Any, seeds: Sequence[int], train_name: str
) -> tuple[int, str, int] | None:
  """(seed, 'name/what', step) of the first non-finite train state.

  `learner` has a leading seed axis when there are several `seeds`.
  """
  states = _train_states(learner, train_name)
  host = jax.device_get([s for _, s in states])
  for (name, _), state in zip(states, host):
    for s, seed in enumerate(seeds):
      one = (
        state if len(seeds) == 1 else jax.tree.map(lambda x, s=s: x[s], state)
      )
      bad = update.describe(one.health)
      if bad is None and not _finite(one.params):
        bad = (int(one.step), 'parameters')
      if bad is not None:
        return seed, f'{name}/{bad[1]}', bad[0]
  return None


def cleared(learner: Any, n_seeds: int) -> Any:
  """`learner` with its recorded non-finite updates forgotten."""
  zero = np.zeros(() if n_seeds == 1 else (n_seeds,), np.int32)
  is_health = lambda x: isinstance(x, update.Health)  # noqa: E731
  return jax.tree.map(
    lambda x: update.Health(zero, zero) if is_health(x) else x,
    learner,
    is_leaf=is_health,
  )


def _finite(params: Any) -> bool:
  return all(
    np.isfinite(x).all()
    for x in jax.tree.leaves(params)
    if np.issubdtype(np.asarray(x).dtype, np.inexact)
  )


def _state_name(path: Any, train_name: str) -> str:
  """A train state's name from its path in the learner: 'value', 'policy'
  (`train_name` for a top-level `train`)."""
  keys = [getattr(k, 'key', getattr(k, 'name', None)) for k in path]
  names = [str(k) for k in keys if k is not None]
  if not names or names[-1] == 'train':
    return train_name if len(names) <= 1 else names[-2]
  return names[-1]
