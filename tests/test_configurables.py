"""Every gin knob of trax_rl is documented and does something.

`test_every_parameter_has_an_args_line` walks every trax_rl configurable
gin knows (`gin_registry.registered()` and `configurables.train_rl`),
agents whose knobs pass through **kwargs by their `parameter_names()`.
`test_knob_changes_behaviour` checks a fixed sample of knobs, `KNOBS`: at
least one per agent family (the actor-critic layouts included), chosen to
cover the kinds of knob (data, loss, exploration, evaluation, replay) of
each; changing each one from the baseline of its agent must change the
trained params or the epoch record.
`test_binding_that_cannot_take_effect_is_one_line` covers the knobs an
agent owns itself.
"""

import dataclasses
import functools
import inspect
import re

import gin
import jax
import numpy as np
import pytest

from trax_rl import configurables, gin_registry, task
from trax_rl.agents import (
  expert_iteration,
  policy_agents,
  r2d2,
  replay_value,
  value_agents,
)
from trax_rl.agents.actor_critic import algorithms as actor_critic
from trax_rl.agents.actor_critic import knobs
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import models, recurrent

_SECTION = re.compile(r'^(Args|Attributes):\s*$')
_OTHER_SECTION = re.compile(r'^[A-Z][A-Za-z ]*:\s*$')
_FLAX_FIELDS = ('parent', 'name')  # flax.linen.Module's own fields.


def _documented_names(obj) -> set[str]:
  """Names with a line in the Args:/Attributes: sections of obj's docs.

  An agent whose knobs go through **kwargs (`parameter_names()`) is
  documented by every class and function those knobs reach.
  """
  docs = [inspect.getdoc(obj) or '']
  if inspect.isclass(obj) and not dataclasses.is_dataclass(obj):
    docs.append(inspect.getdoc(obj.__init__) or '')
  if hasattr(obj, 'parameter_names'):
    for owner in inspect.getmro(obj):
      docs.append(inspect.getdoc(owner.__dict__.get('__init__')) or '')
    if hasattr(obj, 'configure'):  # The actor-critic family.
      docs.append(inspect.getdoc(obj.configure) or '')
      docs.append(inspect.getdoc(obj.layout_class.__init__) or '')
  names, inside = set(), False
  for line in '\n'.join(docs).splitlines():
    if _SECTION.match(line):
      inside = True
    elif _OTHER_SECTION.match(line):
      inside = False
    elif inside:
      match = re.match(r'^  (\**\w+)( \(.*\))?:', line)
      if match:
        names.add(match.group(1))
  return names


def _parameters(obj) -> list[str]:
  if hasattr(obj, 'parameter_names'):
    return sorted(obj.parameter_names() - set(knobs.ALIASES))
  names = []
  for name, p in inspect.signature(obj).parameters.items():
    if p.kind is p.VAR_KEYWORD:
      name = '**' + name
    elif p.kind is p.VAR_POSITIONAL:
      name = '*' + name
    names.append(name)
  return names


def test_every_parameter_has_an_args_line():
  missing = []
  objects = [
    o
    for o in [*gin_registry.registered(), configurables.train_rl]
    if o.__module__.startswith('trax_rl')
  ]
  assert len(objects) > 20
  for obj in objects:
    documented = _documented_names(obj)
    for name in _parameters(obj):
      if name in _FLAX_FIELDS and hasattr(obj, 'setup'):
        continue
      if name not in documented:
        missing.append(f'{obj.__qualname__}.{name}')
  assert not missing, f'parameters without an Args: line: {missing}'


SMALL_MLP = functools.partial(models.MLP, layer_widths=(8,))


def _task(n_envs=2, initial_trajectories=0):
  return task.RLTask(
    'CartPole-v1',
    initial_trajectories=initial_trajectories,
    n_envs=n_envs,
    max_steps=30,
    seed=0,
  )


def _tiny(cls, make_task=_task, **defaults):
  """`(**overrides) -> agent` of `cls` with small knobs for one fast epoch."""
  return lambda **kw: cls(make_task(), **{**defaults, **kw})


POLICY = functools.partial(models.Policy, body=SMALL_MLP)
SEPARATE = dict(
  policy_model=POLICY,
  value_model=functools.partial(models.Value, body=SMALL_MLP),
  policy_batch_size=4,
  value_batch_size=4,
  policy_train_steps_per_epoch=2,
  value_train_steps_per_epoch=2,
  n_interactions_per_epoch=16,
)
BASELINES = {
  'PPO': _tiny(actor_critic.PPO, **SEPARATE),
  'A2C': _tiny(actor_critic.A2C, **SEPARATE),
  'AWR': _tiny(actor_critic.AWR, **SEPARATE),
  'SamplingAWR': _tiny(
    actor_critic.SamplingAWR,
    **dict(
      SEPARATE,
      value_model=functools.partial(models.ActionValue, body=SMALL_MLP),
    ),
  ),
  'PPOJoint': _tiny(
    actor_critic.PPOJoint,
    joint_model=functools.partial(models.PolicyAndValue, body=SMALL_MLP),
    batch_size=4,
    train_steps_per_epoch=2,
    n_interactions_per_epoch=16,
  ),
  'PolicyGradient': _tiny(
    policy_agents.PolicyGradient,
    model_fn=POLICY,
    n_trajectories_per_epoch=2,
    batch_size=4,
  ),
  'ExpertIteration': _tiny(
    expert_iteration.ExpertIteration,
    model_fn=POLICY,
    n_trajectories_per_epoch=4,
    filter_buffer_size=4,
    n_train_steps_per_epoch=2,
    batch_size=4,
  ),
  'DQN': _tiny(
    value_agents.DQN,
    make_task=functools.partial(_task, initial_trajectories=2),
    value_body=SMALL_MLP,
    n_trajectories_per_epoch=2,
    value_batch_size=4,
    value_train_steps_per_epoch=2,
  ),
  'ReplayValueAgent': _tiny(
    replay_value.ReplayValueAgent,
    model_fn=functools.partial(models.Quality, body=SMALL_MLP),
    batch_size=4,
    min_replay_size=8,
    max_replay_size=100,
    samples_per_insert=1.0,
    n_interactions_per_epoch=40,
  ),
  'R2D2': _tiny(
    r2d2.R2D2,
    model_fn=functools.partial(
      recurrent.RecurrentQuality, torso=SMALL_MLP, lstm_size=4
    ),
    loss_fn=r2d2_losses.R2D2Loss(burn_in_length=1, bootstrap_n=2),
    trace_length=3,
    sequence_period=2,
    batch_size=4,
    min_replay_size=4,
    max_replay_size=100,
    samples_per_insert=1.0,
    n_interactions_per_epoch=40,
  ),
}

# (agent, knob, changed value): the fixed sample.
KNOBS = [
  ('PPO', 'epsilon', 1e-4),
  ('PPO', 'policy_eval_steps', 0),
  ('A2C', 'entropy_coeff', 0.5),
  ('AWR', 'beta', 0.05),
  ('AWR', 'value_evals_per_epoch', 2),
  ('SamplingAWR', 'q_value_n_samples', 3),
  ('PPOJoint', 'value_loss_coeff', 2.0),
  ('PPOJoint', 'advantage_normalization', False),
  ('PolicyGradient', 'batch_size', 8),
  ('PolicyGradient', 'n_eval_batches', 2),
  ('ExpertIteration', 'quantile', 0.0),
  ('DQN', 'smoothl1loss', False),
  ('DQN', 'value_evals_per_epoch', 2),
  ('ReplayValueAgent', 'n_step', 2),
  ('ReplayValueAgent', 'value_eval_steps', 0),
  ('R2D2', 'epsilon_max', 0.5),
  (
    'R2D2',
    'loss_fn',
    r2d2_losses.R2D2Loss(
      burn_in_length=1,
      bootstrap_n=2,
      value_transform=r2d2_losses.identity_pair(),
    ),
  ),
]


def _outcome(agent_name, **overrides):
  """(params leaves, epoch record) after one epoch of a tiny agent."""
  agent = BASELINES[agent_name](seed=0, **overrides)
  records = []
  agent.run(1, callbacks=[lambda _, record: records.append(record)])
  if hasattr(agent, 'program'):  # A program agent: its whole learner.
    params = agent.learner
  else:
    params = {name: t.params for name, t in agent.trainers().items()}
  record = {
    k: v for k, v in records[0].items() if not k.endswith('_s')
  }  # Timings always differ.
  return [np.asarray(x) for x in jax.tree.leaves(params)], record


@functools.cache
def _baseline(agent_name):
  return _outcome(agent_name)


@pytest.mark.parametrize('agent_name, knob, value', KNOBS)
def test_knob_changes_behaviour(agent_name, knob, value):
  params, record = _outcome(agent_name, **{knob: value})
  base_params, base_record = _baseline(agent_name)
  same_params = all(
    np.array_equal(a, b) for a, b in zip(params, base_params, strict=True)
  )
  assert not (same_params and record == base_record), (
    f'{agent_name}.{knob}={value!r} changed nothing'
  )


@pytest.mark.parametrize(
  'binding, message',
  [
    ('PolicyGradient.n_replay_epochs = 3', 'PolicyGradient sets'),
    ('R2D2.n_step = 3', 'R2D2 sets n_step itself'),
    ('RLTask.replay_epochs = 3', "parameter named 'replay_epochs'"),
    ('ReplayValueAgent.value_evals_per_epoch = 2', 'value_evals_per_epoch'),
  ],
)
def test_binding_that_cannot_take_effect_is_one_line(binding, message):
  agent = {'P': 'PolicyGradient', 'R': 'ReplayValueAgent'}.get(binding[0])
  agent = 'R2D2' if binding.startswith('R2D2') else agent or 'PolicyGradient'
  bindings = [
    "RLTask.env = 'CartPole-v1'",
    'RLTask.initial_trajectories = 0',
    f'train_rl.agent_class = @{agent}',
    f'{agent}.n_interactions_per_epoch = 8',
    binding,
  ]
  with pytest.raises(ValueError, match=message) as error:
    configurables.parse([], bindings)
    configurables.train_rl(output_dir=None, build_only=True)
  # The command line prints the first line (gin appends its context).
  assert re.search(message, configurables.first_line(error.value))
  gin.clear_config()
