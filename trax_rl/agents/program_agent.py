"""An agent as Trax names it: a program, a source and the runner.

`ProgramAgent` keeps Trax's lifecycle and names (`run`, `current_epoch`,
`avg_returns`, restore on construction, `output_dir`) but holds no
algorithm of its own: a subclass (`DQN`, `PPO`, `ReplayValueAgent`, ...)
configures its family's `Program` from its gin knobs, and the runner
(`trax_rl.run.runner`) trains it on the source the task's env picks: a
JAX env runs compiled epochs on the device (`sources.device`), any other
env is stepped from Python (`sources.gymnasium`). The same program runs
on both; `train_rl.n_seeds = k` builds one runner for k seeds.
"""

import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from trax_rl import config_checks, policies, types, validation
from trax_rl import task as task_lib
from trax_rl import trajectory as trajectory_lib
from trax_rl.agents import initial_data, only_eval, restoring, sources_for
from trax_rl.algorithms import program as program_lib
from trax_rl.run import runner as runner_lib
from trax_rl.sources import processes, seed_axis

EpochCallback = Callable[[Any, dict[str, Any]], Any]
# policy(observation [N, ...], first [N]) -> (action [N, ...], info).
BatchPolicy = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, Any]]


class ProgramAgent(metaclass=restoring.RestoresOnConstruction):
  """An RL agent: a family's program trained by the runner.

  As in Trax, an agent built on an `output_dir` holding a checkpoint is
  restored by its constructor.

  Subclasses configure themselves, then call `super().__init__` last... or
  first, and implement `make_program()`.
  """

  def __init__(
    self,
    task: task_lib.RLTask,
    n_trajectories_per_epoch: int | None = None,
    n_interactions_per_epoch: int | None = None,
    n_eval_episodes: int = 0,
    eval_steps: Sequence[int] | None = None,
    eval_temperatures: Sequence[float] = (0.0,),
    only_eval: bool = False,
    output_dir: str | None = None,
    seed: int = 0,
  ):
    """Configures the lifecycle.

    Args:
      task: the RLTask (env, gamma, max_steps, n_envs, seed).
      n_trajectories_per_epoch: episodes collected per epoch (epochs then
        end at episode boundaries: the gymnasium source only).
      n_interactions_per_epoch: env steps collected per epoch (episodes run
        on across epochs). Exactly one of the two must be given.
      n_eval_episodes: episodes played per eval temperature and eval step cap
        before each call's epochs, on separate envs, not stored.
      eval_steps: episode-length caps for evaluation; default the task's.
      eval_temperatures: temperatures to evaluate at (0.0 is greedy).
      only_eval: Trax's evaluation mode: each epoch of `run` collects with
        the training policy without learning and plays the
        `n_eval_episodes`, but trains nothing, keeps `current_epoch` and
        writes no checkpoint. Its records go to metrics.jsonl as
        'only_eval'.
      output_dir: where checkpoints and metrics go; a run finding a
        checkpoint there continues from it.
      seed: seeds the learner, the acting and learning keys and the
        evaluations.
    """
    sources_for.check_epochs(
      task, n_trajectories_per_epoch, n_interactions_per_epoch
    )
    validation.check_count('n_eval_episodes', n_eval_episodes, 0)
    eval_steps = list(eval_steps) if eval_steps else [task.max_steps]
    for s in eval_steps:
      validation.check_count('eval_steps', s, 1)
    for t in eval_temperatures:
      if not (isinstance(t, (int, float)) and t >= 0):
        raise ValueError(f'eval_temperatures must be >= 0, got {t!r}')
    if output_dir is not None:
      validation.check_output_dir(
        processes.process_dir(output_dir) or output_dir
      )
    self._task = task
    self._n_trajectories_per_epoch = n_trajectories_per_epoch
    self._n_interactions_per_epoch = n_interactions_per_epoch
    self._n_eval_episodes = n_eval_episodes
    self._eval_steps = eval_steps
    self._eval_temperatures = tuple(float(t) for t in eval_temperatures)
    self._only_eval = only_eval
    self._output_dir = os.fspath(output_dir) if output_dir is not None else None
    self._seed = seed
    self._program: program_lib.Program | None = None
    self._runner: runner_lib.Runner | None = None
    self._collector = None  # (RayCollector, agent factory) when set.
    # Across hosts (`join_job`), the programs' mapped axis of processes.
    self._axis_name: str | None = None
    self._initial_done = False  # RLTask.initial_trajectories observed.
    # `train_rl`'s evaluation after the last epoch (`Runner.final_evaluation`).
    self.final_eval: dict[str, Any] | None = None
    self._actor: policies.Actor | None = None  # `act`'s policies.

  # To implement.
  def make_program(self, n_envs: int) -> program_lib.Program:
    """The family's program for rollouts of `n_envs` envs (its knobs)."""
    raise NotImplementedError

  def _program_context(self, n_envs: int) -> dict[str, Any]:
    """The knobs every family's program takes from the task and the job."""
    return dict(
      example_observation=self._task.example_observation(),
      n_envs=n_envs,
      gamma=self._task.gamma,
      axis_name=self._axis_name,
    )

  def act_as_rollout_actor(
    self, slot: int, n_slots: int, epsilon: float
  ) -> None:
    """On rollout actor `slot` of `n_slots`: act as that actor.

    `epsilon` is the actor's Ape-X rate (stream mode); programs that
    explore with one set it here, the others ignore it.
    """
    del slot, n_slots, epsilon

  # Read-only views, as Trax's.
  task = types.read_only('_task')

  @property
  def program(self) -> program_lib.Program:
    """The program for the task's `n_envs` (built once)."""
    if self._program is None:
      self._program = self.make_program(self._task.n_envs)
    return self._program

  def join_job(self) -> None:
    """Trains as this process of a multi-host job (`train_rl.multihost`).

    Every process runs the program on its own envs; the updates average
    their gradients over all processes (`sources.processes`).

    Raises:
      ValueError: on the device path, where processes could not keep step.
    """
    if self._task.jax_env is not None:
      raise ValueError(
        'train_rl.multihost trains on the host path: use a gymnasium env '
        f'id, not the JAX env {self._task.env_spec!r}'
      )
    self._drop_runner()
    self._axis_name = processes.AXIS
    self._program = None

  def set_collector(self, collector: Any, agent_factory: Callable) -> None:
    """Collects on rollout actors (`collector`: a `RayCollector`'s knobs).

    `agent_factory` builds this agent on each actor (from the run's gin
    config).
    """
    self._drop_runner()
    self._collector = (collector, agent_factory)

  def _drop_runner(self) -> None:
    """Rebuilds the runner on next use (after a change of its source)."""
    if self._runner is not None:
      self._runner.close()
      self._runner = None

  seed = types.read_only('_seed')

  output_dir = types.read_only('_output_dir')

  only_eval = types.read_only('_only_eval')

  n_eval_episodes = types.read_only('_n_eval_episodes')

  @property
  def eval_steps(self) -> list[int | None]:
    return list(self._eval_steps)

  eval_temperatures = types.read_only('_eval_temperatures')

  n_trajectories_per_epoch = types.read_only('_n_trajectories_per_epoch')

  n_interactions_per_epoch = types.read_only('_n_interactions_per_epoch')

  @property
  def runner(self) -> runner_lib.Runner:
    """The runner of this agent's one seed (built on first use)."""
    if self._runner is None:
      self._runner = self.build_runner(1, self._output_dir)
    return self._runner

  @property
  def current_epoch(self) -> int:
    return self.runner.epoch

  @property
  def avg_returns(self) -> list[float]:
    return self.runner.avg_returns[0]

  @property
  def avg_returns_temperatures(self) -> dict[float, dict[Any, list[float]]]:
    out: dict[float, dict[Any, list[float]]] = {}
    for (t, s), values in self.runner.eval_returns.items():
      out.setdefault(t, {})[s] = values[0]
    return out

  def use_seeds(self, n_seeds: int) -> None:
    """Trains `n_seeds` seeds (seed, seed + 1, ...) in one runner.

    Every view of the agent (`current_epoch`, `avg_returns`, `learner`)
    is then seed 0's; `runner` holds them all.
    """
    validation.check_count('n_seeds', n_seeds, 1)
    if self._runner is not None:
      self._runner.close()
    self._runner = self.build_runner(n_seeds, self._output_dir)

  @property
  def learner(self) -> Any:
    """The learner pytree (train states, store, counters) of seed 0."""
    return self.runner.learner_of(0)

  def set_learner(self, learner: Any) -> None:
    self.runner.set_learner(learner)

  # Building.
  def _epochs(self, n_seeds: int = 1) -> sources_for.Epochs:
    return sources_for.Epochs(
      type(self).__name__,
      self._seed,
      self._task,
      n_seeds,
      self._n_interactions_per_epoch,
      self._n_trajectories_per_epoch,
      self._axis_name is not None,
    )

  def max_rollout_steps(self) -> int:
    """The longest rollout `[T, N]` a source gives the program (its T)."""
    collector = None if self._collector is None else self._collector[0]
    return sources_for.max_rollout_steps(self._epochs(), collector)

  def seeds(self, n_seeds: int) -> list[int]:
    return [self._seed + i for i in range(n_seeds)]

  def build_runner(
    self, n_seeds: int, output_dir: str | None
  ) -> runner_lib.Runner:
    """A runner of `n_seeds` seeds (this agent's seed, seed + 1, ...).

    Seed i acts, learns and evaluates with keys of `seed + i` alone and
    resets its envs from `RLTask.seed + i`, so it trains as that seed's
    agent alone would.
    """
    seeds = self.seeds(n_seeds)
    keys = [sources_for.seed_keys(s) for s in seeds]
    stacked = lambda name: np.stack([k[name] for k in keys])  # noqa: E731
    source, program = sources_for.source(
      self._epochs(n_seeds),
      self.program,
      self.make_program,
      stacked('source'),
      self._collector,
    )
    # Built seed by seed on the host, then stacked: a jitted init would
    # hold an empty replay as a constant of its program.
    learners = [program.init(k['init']) for k in keys]
    learner = learners[0] if n_seeds == 1 else seed_axis.stack(learners)
    return runner_lib.Runner(
      type(self).__name__,
      source,
      learner,
      seeds,
      stacked('eval'),
      output_dir=output_dir,
      n_eval_episodes=self._n_eval_episodes,
      eval_steps=self._eval_steps,
      eval_temperatures=self._eval_temperatures,
      writes_outputs=processes.writes_outputs(),
    )

  # Lifecycle.
  def restore(self) -> bool:
    """Loads the checkpoint in output_dir, once; True if one was loaded."""
    return self.runner.restore()

  def run(
    self,
    n_epochs: int = 1,
    callbacks: Sequence[EpochCallback] = (),
    **options: Any,
  ) -> None:
    """Runs n epochs; callbacks get `(agent, record)`; `options` are
    `Runner.run`'s (`epochs_per_call`, `on_nonfinite`, `tracker`, ...)."""
    if self._only_eval:
      only_eval.run(self, n_epochs, callbacks)
      return
    runner = self.runner
    if not runner.restore() and runner.epoch == 0 and not self._initial_done:
      self._observe_initial_data()
    runner.run(
      n_epochs,
      callbacks=[
        self._save_gin,
        *(lambda r, cb=cb: cb(self, r) for cb in callbacks),
      ],
      **options,
    )

  def _save_gin(self, record: dict[str, Any]) -> None:
    """As Trax's `Agent.run`: the operative config after epoch 1."""
    del record
    if (
      self._output_dir is not None
      and self.current_epoch == 1
      and processes.writes_outputs()
    ):
      config_checks.write_operative_config(self._output_dir)

  def _observe_initial_data(self) -> None:
    """Observes `RLTask.initial_trajectories` before the first epoch
    (`initial_data.observe`)."""
    self._initial_done = True
    if self._task.initial_trajectories:
      initial_data.observe(self.runner, self._task, self.max_rollout_steps())

  def evaluate(self) -> dict[str, float]:
    """Plays n_eval_episodes per temperature and step cap; returns means."""
    return self.runner.evaluate()[0]

  def make_policy(
    self, temperature: float, evaluation: bool = True
  ) -> BatchPolicy:
    """A host policy `(obs[N, ...], first[N]) -> (action[N], info)`.

    For acting outside the runner (evaluation episodes, videos): the
    program's act at `temperature` on the current learner, keyed by its own
    counter; a recurrent policy keeps its core between calls.
    """
    del evaluation
    key = jax.random.fold_in(jax.random.PRNGKey(self._seed), 5)
    return policies.host_policy(self.program, self.learner, key, temperature)

  def act(
    self,
    observation: Any,
    deterministic: bool = True,
    episode_start: Any = None,
  ) -> np.ndarray:
    """One observation's action, or a batch's: Stable-Baselines3's
    `predict` (`trax_rl.load(dir).act(obs)`); see `policies.Actor`."""
    if self._actor is None:
      self._actor = policies.Actor(
        self.make_policy, self._task.observation_space, self._task.env_spec
      )
    return self._actor(
      observation, deterministic, episode_start, self.current_epoch
    )

  def policy(
    self, trajectory: trajectory_lib.Trajectory, temperature: float = 1.0
  ) -> tuple[Any, dict[str, Any]]:
    """Trax's single-trajectory form: the action after `trajectory`."""
    obs = np.asarray(trajectory.last_observation)[None]
    first = np.array([len(trajectory) == 1])
    action, info = self.make_policy(temperature, evaluation=True)(obs, first)
    return np.asarray(action)[0], {k: np.asarray(v)[0] for k, v in info.items()}

  def compile_update(self) -> None:
    """Compiles one epoch's learning (`trax-rl check`), runs nothing."""
    self.runner.source.compile(self.runner.learner)

  def save(self) -> None:
    self.runner.save()

  def close(self) -> None:
    if self._runner is not None:
      self._runner.close()
