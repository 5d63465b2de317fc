"""RayCollector: the knobs of rollout actors on Ray (`train_rl.collector`).

Ray is an optional extra (`pip install -e '.[ray]'`), imported only when
the actors start. `trax_rl.sources.ray` runs them: actors hold envs, seeds
and a CPU copy of the acting parameters; the learner keeps the program's
learner (replay, train states) and every checkpoint. Epoch mode splits an
epoch into units seeded by (seed, epoch, unit), gathered in unit order, so
the data does not depend on the number of actors nor on actors dying;
stream mode (the replay value learners and R2D2, Ape-X style) inserts
chunks as they arrive, credited with their policy lag.

A multi-host learner (`train_rl.multihost`) runs one set of actors per
process; units and actor slots are numbered over all processes, so their
seeds and Ape-X epsilons differ.

Failure model: an actor that dies loses only its in-flight work; it is
replaced (at most `max_restarts` times per slot) and the replacement gets
the latest parameters with its first request. Calls are never retried by
Ray (`max_task_retries=0`): a retried call would act with stale parameters.
"""

import dataclasses

from trax_rl import validation


@dataclasses.dataclass(frozen=True)
class RayCollector:
  """Rollout actors on Ray, for `train_rl.collector = @RayCollector`.

  Attributes:
    n_actors: rollout actors.
    address: an existing Ray cluster ('host:port' of its head, or 'auto');
      None starts a local instance on 127.0.0.1 and stops it at the end.
    chunk_length: env steps per env in a stream chunk, and in an epoch
      unit of an agent with `n_interactions_per_epoch` (units of an agent
      with `n_trajectories_per_epoch` are `n_envs` episodes).
    max_in_flight: requests outstanding per actor.
    publish_every: stream mode: publish the parameters after this many
      learner updates (epoch mode publishes once per epoch).
    apex_epsilon: stream mode: Ape-X base epsilon; actor i of N acts with
      apex_epsilon ** (1 + apex_alpha * i / (N - 1)).
    apex_alpha: the Ape-X exponent spread.
    max_restarts: replacements allowed per actor slot.
    actor_cpus: CPUs Ray reserves per actor.
    local_cpus: CPUs of a local instance (None: all of the machine's).
    timeout_s: fail if no actor answers for this long.
  """

  n_actors: int = 2
  address: str | None = None
  chunk_length: int = 64
  max_in_flight: int = 2
  publish_every: int = 100
  apex_epsilon: float = 0.4
  apex_alpha: float = 7.0
  max_restarts: int = 3
  actor_cpus: float = 1.0
  local_cpus: int | None = None
  timeout_s: float = 600.0

  def __post_init__(self):
    for name, minimum in (
      ('n_actors', 1),
      ('chunk_length', 1),
      ('max_in_flight', 1),
      ('publish_every', 1),
      ('max_restarts', 0),
      ('local_cpus', 1),
    ):
      validation.check_count(name, getattr(self, name), minimum)
    if not 0.0 <= self.apex_epsilon <= 1.0:
      raise ValueError(
        f'apex_epsilon must be in [0, 1], got {self.apex_epsilon}'
      )
    if not (self.actor_cpus >= 0 and self.timeout_s > 0):
      raise ValueError(
        f'actor_cpus must be >= 0 and timeout_s > 0, got {self.actor_cpus}, '
        f'{self.timeout_s}'
      )
