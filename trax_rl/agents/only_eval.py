"""Trax's evaluation mode (`only_eval`): collect and evaluate, learn nothing.

Each epoch plays the agent's evaluation episodes and, on the gymnasium
source, collects one epoch with the training policy without learning; the
agent's state, `current_epoch` and checkpoint stay as they were. Records
go to metrics.jsonl under 'only_eval'.
"""

from collections.abc import Callable, Sequence
from typing import Any

from trax_rl import metrics
from trax_rl.sources import gymnasium as gym_source
from trax_rl.sources import processes


def run(
  agent: Any, n_epochs: int, callbacks: Sequence[Callable[..., Any]]
) -> None:
  """n_epochs of evaluation; `callback(agent, record)` -> stop?"""
  agent.restore()
  writer = None
  if agent.output_dir is not None and processes.writes_outputs():
    writer = metrics.MetricsWriter(agent.output_dir)
  runner = agent.runner
  for _ in range(n_epochs):
    record = dict(runner.evaluate()[0])
    if isinstance(runner.source, gym_source.GymnasiumSource):
      record.update(runner.source.collect(runner.learner).records[0])
    record['epoch'] = agent.current_epoch
    if writer is not None:
      writer.write('only_eval', agent.current_epoch, record)
    if any([cb(agent, record) for cb in callbacks]):
      break
