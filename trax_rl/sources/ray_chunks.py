"""The learner's side of the Ray source's data (`sources.ray`).

Where an actor's chunk goes in the learner's rollout, the parameters'
version (the learner's update count), a stream epoch's metrics combined
over its chunks, and the checkpointable form of units waiting in the
pipeline.
"""

from typing import Any

import jax
import numpy as np

from trax_rl.device import rollout as rollout_lib


def update_count(learner: Any) -> int:
  """Updates the learner made so far: its train states' largest step."""
  from trax_rl.supervised import train_state  # noqa: PLC0415

  is_state = lambda x: isinstance(x, train_state.TrainState)  # noqa: E731
  steps = [
    int(np.max(np.asarray(s.step)))
    for s in jax.tree.leaves(learner, is_leaf=is_state)
    if is_state(s)
  ]
  return max(steps, default=0)


# Learner metrics of a stream epoch added up over its chunks; the others
# are averaged (losses) or, for counters, the last chunk's.
_SUMMED = ('n_updates', 'learner_calls', 'new_items')


def in_columns(rollout: Any, slot: int, n_actors: int) -> Any:
  """An actor's chunk `[T, n_envs]` in its columns of `[T, A * n_envs]`."""

  def place(x):
    out = np.zeros((x.shape[0], n_actors * x.shape[1], *x.shape[2:]), x.dtype)
    out[:, slot * x.shape[1] : (slot + 1) * x.shape[1]] = x
    return out

  return jax.tree.map(place, rollout)


def encode_units(data: tuple[Any, dict[str, Any]]) -> dict[str, Any]:
  """Units waiting in the pipeline, as checkpointable values."""
  return {'rollout': tuple(data[0]), 'record': data[1]}


def decode_units(state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
  return rollout_lib.Rollout(*state['rollout']), dict(state['record'])


def with_seed_axis(rollout: Any) -> Any:
  """A one-seed rollout with its seed axis of 1 (the learner's layout)."""
  return jax.tree.map(lambda x: np.asarray(x)[None], rollout)


def host_metrics(metrics: Any) -> dict[str, Any]:
  """Learner metrics as Python numbers."""
  return {k: np.asarray(v).item() for k, v in jax.device_get(metrics).items()}


def combine(chunks: list[dict[str, Any]]) -> dict[str, Any]:
  """A stream epoch's learner metrics from its chunks' (see `_SUMMED`)."""
  if not chunks:
    return {}
  out = {}
  for name in chunks[0]:
    values = [c[name] for c in chunks]
    if name.endswith(_SUMMED):
      out[name] = sum(values)
    elif isinstance(values[-1], int):
      out[name] = values[-1]
    else:
      out[name] = float(np.nanmean(values))
  return out
