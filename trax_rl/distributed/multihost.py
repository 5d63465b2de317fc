"""A learner across hosts: `jax.distributed`, one process per host.

`train_rl.multihost = True` calls `initialize` (through `join_job`)
before any JAX use; the program agent then joins with
`ProgramAgent.join_job` (`trax_rl.sources.processes`): every process
steps its own envs and brings its own rows of each batch, the learner is
one program over the processes' mapped axis (gradients and the replay's
rate limiter agree across it), and the train state is replicated. Process
0 is the chief: it writes output_dir's checkpoint, metrics and config.gin;
every other process writes its own state (envs, replay, random streams)
under output_dir/processes/<index>/ before the chief commits, and gets it
back on resume (`run.runner`).
"""

import os
from typing import Any

import jax

from trax_rl import jax_envs, validation

# Where `initialize` looks for what it is not given (JAX itself reads only
# the coordinator's address from the environment).
ENV_COORDINATOR = 'JAX_COORDINATOR_ADDRESS'
ENV_NUM_PROCESSES = 'JAX_NUM_PROCESSES'
ENV_PROCESS_ID = 'JAX_PROCESS_ID'


def initialize(
  coordinator_address: str | None = None,
  num_processes: int | None = None,
  process_id: int | None = None,
  bind_address: str | None = None,
) -> None:
  """Joins the job: one call per process, before any other JAX use.

  A process already in a job stays in it (a second `train_rl` in the same
  process trains on the same job).

  Args:
    coordinator_address: 'host:port' of process 0 (e.g. '127.0.0.1:12345');
      None: $JAX_COORDINATOR_ADDRESS, else JAX's cluster detection (SLURM,
      Cloud TPU, ...).
    num_processes: processes in the job (one per host); None:
      $JAX_NUM_PROCESSES, else JAX's cluster detection.
    process_id: this process's index, in [0, num_processes); None:
      $JAX_PROCESS_ID, else JAX's cluster detection.
    bind_address: where process 0's coordinator listens; None: the
      coordinator address itself when it is on loopback (JAX would listen
      on every interface), else JAX's default.

  Raises:
    ValueError: on a bad count or index.
  """
  if jax.distributed.is_initialized():
    return
  coordinator_address = coordinator_address or os.environ.get(ENV_COORDINATOR)
  if num_processes is None:
    num_processes = _env_int(ENV_NUM_PROCESSES)
  if process_id is None:
    process_id = _env_int(ENV_PROCESS_ID)
  validation.check_count('num_processes', num_processes, 1)
  if num_processes is not None and process_id is not None:
    if not 0 <= process_id < num_processes:
      raise ValueError(
        f'process_id must be in [0, {num_processes}), got {process_id}'
      )
  if (
    bind_address is None
    and coordinator_address is not None
    and coordinator_address.startswith(('127.', 'localhost:'))
  ):
    bind_address = coordinator_address
  jax.distributed.initialize(
    coordinator_address=coordinator_address,
    num_processes=num_processes,
    process_id=process_id,
    coordinator_bind_address=bind_address,
  )


def join_job(
  coordinator_address: str | None,
  num_processes: int | None,
  process_id: int | None,
  n_seeds: int,
  env: Any = None,
) -> None:
  """`train_rl.multihost`: checks what it cannot combine with, `initialize`s.

  Each process collects with train_rl's collector: its own envs, or its
  own rollout actors (`RayCollector`). Called before anything else uses
  JAX, so that the refusals come before any attempt to join.

  Args:
    coordinator_address: as `initialize`.
    num_processes: as `initialize`.
    process_id: as `initialize`.
    n_seeds: train_rl's n_seeds (1: one agent).
    env: the RLTask's env (id or object), if known: a JAX env is refused.

  Raises:
    ValueError: several seeds, a JAX env, or a bad job description.
  """
  if n_seeds > 1:
    raise ValueError('train_rl.multihost trains one seed: unbind n_seeds')
  if jax_envs.is_jax_env(env):
    raise device_path_refusal(env)
  initialize(coordinator_address, num_processes, process_id)


def device_path_refusal(env: Any) -> ValueError:
  """The one-line error of `train_rl.multihost` on the device path."""
  return ValueError(
    'train_rl.multihost trains on the host path: use a gymnasium env id, '
    f'not the JAX env {env!r}'
  )


def _env_int(name: str) -> int | None:
  value = os.environ.get(name)
  if value is None:
    return None
  try:
    return int(value)
  except ValueError:
    raise ValueError(f'${name} must be an integer, got {value!r}') from None
