"""LocalCollector: experience from the task's own envs, in this process."""

from trax_rl.agents import base
from trax_rl.distributed import rollout


class LocalCollector:
  """Collects as an agent always has: its RLTask's envs, in this process.

  The default `train_rl.collector`; `RayCollector` is the other one. A
  collector has `set_agent_factory`, `collect(agent) -> average return`,
  `metrics()` and `close()`.
  """

  def set_agent_factory(self, factory: rollout.AgentFactory) -> None:
    del factory  # Nothing runs elsewhere.

  def collect(self, agent: base.Agent) -> float:
    return agent.collect_locally()

  def metrics(self) -> dict[str, float]:
    return {}

  def close(self) -> None:
    pass
