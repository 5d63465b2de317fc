"""Knobs across configurables: which a configurable takes, what to bind
instead of one it does not take, and what `trax-rl train --seed --steps`
bind.

A binding of an unknown parameter names the configurable's close misses
(`PPO.entropy_coef` -> `entropy_coeff`), and the knobs users bring from
Stable-Baselines3 and CleanRL point to ours (`PPO.learning_rate` -> the
learning-rate schedules, `PPO.n_steps` -> `n_interactions_per_epoch`).
"""

import difflib
import inspect
from typing import Any

import gin

from trax_rl import binding_types, gin_registry, validation

# Knobs of other libraries -> ours: a parameter of the same configurable,
# or (with a '.') a binding elsewhere.
_FOREIGN = {
  'n_steps': 'n_interactions_per_epoch',
  'ent_coef': 'entropy_coeff',
  'vf_coef': 'value_loss_coeff',
  'clip_range': 'epsilon',
  'clip_coef': 'epsilon',
  'max_grad_norm': 'max_gradient_norm',
  'buffer_size': 'max_replay_size',
  'gamma': 'RLTask.gamma',
  'n_envs': 'RLTask.n_envs',
  'num_envs': 'RLTask.n_envs',
  'gae_lambda': 'gae.lambda_',
  'total_timesteps': 'train_rl.n_epochs (or trax-rl train --steps=N)',
  'n_epochs': 'train_rl.n_epochs',
}
_LEARNING_RATE = {
  'learning_rate',
  'lr',
  'learning_rate_schedule',
  'lr_schedule',
}


def parameter_names(fn: Any) -> set[str]:
  """Every keyword a configurable takes: a class's along its MRO (the
  agents pass **kwargs up to their bases), or its `parameter_names()`."""
  if hasattr(fn, 'parameter_names'):
    return set(fn.parameter_names())
  names = set()
  targets = inspect.getmro(fn) if inspect.isclass(fn) else (fn,)
  for target in targets:
    init = target.__init__ if inspect.isclass(fn) else target
    try:
      params = inspect.signature(init).parameters.values()
    except (TypeError, ValueError):
      continue
    names.update(
      p.name
      for p in params
      if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != 'self'
    )
  return names


def accepts(fn: Any, param: str) -> bool:
  """Whether configurable `fn` takes `param`."""
  if hasattr(fn, 'parameter_names'):
    return param in fn.parameter_names()
  return binding_types.parameter_of(fn, param) is not None


def _learning_rates(owner: str, names: set[str]) -> str | None:
  schedules = sorted(n for n in names if n.endswith('lr_schedule'))
  if 'learning_rate' in names:
    return f'did you mean {owner}.learning_rate?'
  per_network = sorted(n for n in names if n.endswith('_lr'))
  if per_network:
    listed = ', '.join(f'{owner}.{n}' for n in per_network)
    return f'its learning rates are per network: {listed}'
  if not schedules:
    return None
  first = schedules[0]
  scope = first.removesuffix('lr_schedule').rstrip('_')
  ref = f'{scope}/constant_lr' if scope else 'constant_lr'
  return (
    f'its learning rates are schedules ({", ".join(schedules)}): e.g. '
    f'{owner}.{first} = @{ref} and {ref}.value = 3e-4'
  )


def suggest(owner: str, param: str, names: set[str]) -> str | None:
  """A hint for `owner.param`, which `owner` (taking `names`) lacks."""
  if param in _LEARNING_RATE:
    found = _learning_rates(owner, names)
    if found:
      return found
  ours = _FOREIGN.get(param)
  if ours is not None and ('.' in ours or ours in names):
    where = ours if '.' in ours else f'{owner}.{ours}'
    return f'the knob for that here is {where}'
  close = difflib.get_close_matches(param, sorted(names), n=2, cutoff=0.75)
  if close:
    return 'did you mean ' + ' or '.join(f'{owner}.{c}' for c in close) + '?'
  return None


def run_bindings(seed: int | None, steps: int | None) -> list[str]:
  """The bindings `trax-rl train --seed --steps` add to the parsed config.

  --seed S binds every seed of the run: `RLTask.seed` (env resets, random
  actions) and the agent's `seed` (parameters, acting, learning and
  evaluation keys); with `train_rl.n_seeds = k` the run trains S .. S+k-1.
  --steps N is the budget in env steps (per seed): `train_rl.n_epochs` =
  ceil(N / the agent's `n_interactions_per_epoch`).

  Raises:
    ValueError: a negative seed or budget, or --steps with epochs counted
      in episodes.
  """
  agent = _query('train_rl.agent_class')
  name = agent.selector if agent is not None else None
  extra = []
  if seed is not None:
    validation.check_count('--seed', seed, 0)
    extra += [f'RLTask.seed = {seed}']
    extra += [f'{name}.seed = {seed}'] if name else []
  if steps is not None:
    validation.check_count('--steps', steps, 1)
    per_epoch = _query(f'{name}.n_interactions_per_epoch') if name else None
    if per_epoch is None:
      fn = gin_registry.lookup(name) if name else None
      per_epoch = default(fn, 'n_interactions_per_epoch')
    if not per_epoch:
      raise ValueError(
        f'--steps needs epochs counted in env steps ({name}.'
        'n_interactions_per_epoch); this config counts episodes '
        f'({name}.n_trajectories_per_epoch): use train_rl.n_epochs'
      )
    extra += [f'train_rl.n_epochs = {-(-steps // per_epoch)}']
  return extra


def default(fn: Any, param: str) -> Any:
  """A configurable's default for `param`, or None."""
  found = binding_types.parameter_of(fn, param) if fn is not None else None
  if found is None or found[1].default is inspect.Parameter.empty:
    return None
  return found[1].default


def _query(binding: str) -> Any:
  try:
    return gin.query_parameter(binding)
  except ValueError:
    return None
