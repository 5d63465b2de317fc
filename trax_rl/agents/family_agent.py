"""The agent of a family that is one module: its knobs dataclass, as gin's."""

import dataclasses
import inspect

from trax_rl import task as task_lib
from trax_rl.agents import program_agent
from trax_rl.algorithms import program as program_lib

ProgramAgent = program_agent.ProgramAgent


def agent_class(family: type) -> type:
  """The agent (gin name, knobs, lifecycle) of a family's knobs dataclass.

  A family module (e.g. `algorithms.pqn`) defines a frozen dataclass of its
  knobs with `program(spec: program.Spec) -> Program`, and nothing else;
  this returns the `ProgramAgent` subclass of the same name that takes the
  family's knobs and the lifecycle's (`n_interactions_per_epoch`,
  `n_eval_episodes`, `seed`, `output_dir`, ...), as gin binds them. Bad
  knob values are the family's to refuse (its `__post_init__`).

  Args:
    family: the knobs dataclass.

  Returns:
    The agent class, for the gin registry.
  """
  fields = {f.name for f in dataclasses.fields(family)}

  def __init__(self, task: task_lib.RLTask, **kwargs):
    knobs = {k: kwargs.pop(k) for k in list(kwargs) if k in fields}
    self._family = family(**knobs)
    ProgramAgent.__init__(self, task, **kwargs)

  def make_program(self, n_envs: int) -> program_lib.Program:
    task = self._task
    spec = program_lib.Spec(
      observation_space=task.observation_space,
      action_space=task.action_space,
      gamma=task.gamma,
      n_envs=n_envs,
      n_steps=self.max_rollout_steps(),
      axis_name=self._axis_name,
    )
    return self._family.program(spec)

  @classmethod
  def parameter_names(cls) -> set[str]:
    lifecycle = set(inspect.signature(ProgramAgent.__init__).parameters)
    return (fields | lifecycle) - {'self', 'task'}

  # A family's knobs may extend shared ones (SAC and TD3 extend
  # `OffPolicy`): the agent's docs hold every knob dataclass's.
  docs = [
    inspect.getdoc(owner)
    for owner in family.__mro__
    if dataclasses.is_dataclass(owner) and '__doc__' in vars(owner)
  ]
  namespace = {
    '__init__': __init__,
    'make_program': make_program,
    'parameter_names': parameter_names,
    '__doc__': '\n\n'.join(d for d in docs if d),
    '__module__': family.__module__,
  }
  return type(family.__name__, (ProgramAgent,), namespace)
