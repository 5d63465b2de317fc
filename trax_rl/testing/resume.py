"""A kill-and-resume check for agents on the device path (tests only)."""

from collections.abc import Callable
from typing import Any

import jax
import numpy as np


def assert_resumes_exactly(
  make_agent: Callable[[str | None], Any],
  output_dir: str,
  n_epochs: int = 4,
  killed_after: int = 2,
  epochs_per_call: int = 2,
) -> Any:
  """Asserts that a run killed and resumed ends as an uninterrupted one.

  `make_agent(output_dir)` builds the agent. One agent runs `n_epochs`
  straight; another runs `killed_after` epochs into `output_dir` and is
  dropped; a third resumes from there to `n_epochs`, `epochs_per_call` at
  a time (so the resume is also checked against epoch-by-epoch calls). The
  two must agree bit for bit on the trainers' states, the device learner
  (replay, tails, counters), the envs in flight (and any recurrent state
  carried with them) and the returns.

  Returns:
    The uninterrupted agent, for the caller's own checks.
  """
  straight = make_agent(None)
  straight.run(n_epochs)
  first = make_agent(output_dir)
  first.run(killed_after)
  first.close()
  del first  # "Killed": a new process picks up from output_dir.
  resumed = make_agent(output_dir)
  resumed.run(
    n_epochs, n_epochs_is_total_epochs=True, epochs_per_call=epochs_per_call
  )

  def state(agent):
    source = agent.runner.source.state_dict()
    return jax.tree.leaves(agent.learner) + jax.tree.leaves(source)

  for a, b in zip(state(straight), state(resumed), strict=True):
    np.testing.assert_array_equal(a, b)
  assert straight.avg_returns == resumed.avg_returns
  return straight
