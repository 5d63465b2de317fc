"""Gin registration and the gin entry point `train_rl`.

This is the only library module that imports gin. Everything a gin file may
name is registered here, under its short name (`PolicyGradient`, `MLP`) and
under `trax_rl.<name>`.
"""

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import gin
import gymnasium.wrappers
import optax
from etils import epath

from trax_rl import advantages, checkpoint, envs, lr_schedules, task
from trax_rl.agents import (
  actor_critic,
  actor_critic_joint,
  base,
  policy_agents,
  r2d2,
  replay_value,
  value_agents,
)
from trax_rl.losses import q_learning
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import models, recurrent

CONFIG_FILE = 'config.gin'


def _register(*objects: Any, module: str = 'trax_rl') -> None:
  for obj in objects:
    gin.external_configurable(obj, module=module)


# Task and environments. train_rl calls the gin-bound RLTask.
RLTask = gin.external_configurable(task.RLTask, module='trax_rl')
_register(envs.MaskVelocity, envs.masked_cartpole, envs.make_env)
# Networks.
_register(
  models.MLP,
  models.ConvTorso,
  models.Policy,
  models.Value,
  models.PolicyAndValue,
  models.Quality,
  models.CategoricalQuality,
  models.QuantileQuality,
)
# Schedules, estimators, optimizers.
_register(lr_schedules.multifactor, lr_schedules.constant_lr)
_register(
  advantages.monte_carlo, advantages.td_k, advantages.td_lambda, advantages.gae
)
for _name in ('adam', 'adamw', 'sgd', 'rmsprop', 'lamb', 'lion', 'adabelief'):
  gin.external_configurable(getattr(optax, _name), name=_name, module='optax')
# Policy agents.
_register(
  policy_agents.PolicyGradient,
  policy_agents.ExpertIteration,
  policy_agents.sharpened_network_policy,
)

# Value agents (Trax's DQN, the Acme learners on a replay Table).
_register(
  value_agents.DQN,
  value_agents.trax_exploration_rate,
  replay_value.ReplayValueAgent,
  replay_value.linear_epsilon,
  q_learning.QLearning,
  q_learning.RegularizedQLearning,
  q_learning.MunchausenQLearning,
  q_learning.PrioritizedDoubleQLearning,
  q_learning.PrioritizedCategoricalDoubleQLearning,
  q_learning.QrDqn,
)
# Atari: `ALE/Pong-v5` (made with frameskip=1) under gymnasium's wrappers.
_register(
  gymnasium.wrappers.AtariPreprocessing,
  gymnasium.wrappers.FrameStackObservation,
)
# R2D2: recurrent Q network, its loss and agent.
_register(recurrent.RecurrentQuality, r2d2_losses.R2D2Loss, r2d2.R2D2)
# Actor-critic agents, separate and joint networks.
_register(
  actor_critic.A2C,
  actor_critic.PPO,
  actor_critic.AWR,
  actor_critic.SamplingAWR,
  models.ActionValue,
  actor_critic_joint.PPOJoint,
  actor_critic_joint.A2CJoint,
  actor_critic_joint.AWRJoint,
)


def write_operative_config(output_dir: str) -> None:
  """Writes the operative gin config to output_dir/config.gin atomically."""
  checkpoint.write_atomic(
    epath.Path(output_dir) / CONFIG_FILE, gin.operative_config_str()
  )


def parse(
  config_files: Sequence[str] = (),
  bindings: Sequence[str] = (),
) -> None:
  """Parses gin files and bindings; one-line ValueErrors on bad input.

  Raises:
    ValueError: a missing file, an unknown configurable or parameter, or a
      syntax error (the message names it).
  """
  for f in config_files:
    if not epath.Path(f).exists():
      raise ValueError(f'config file {f} does not exist')
  gin.clear_config()
  try:
    gin.parse_config_files_and_bindings(list(config_files), list(bindings))
  except (ValueError, KeyError, SyntaxError, TypeError, NameError) as e:
    raise ValueError(f'bad gin config: {first_line(e)}') from None


def first_line(error: BaseException) -> str:
  """The first line of an exception's message (gin appends context lines)."""
  text = str(error).strip() or type(error).__name__
  if isinstance(error, KeyError) and text.startswith(("'", '"')):
    text = text[1:-1]
  return text.splitlines()[0]


@gin.configurable
def train_rl(
  output_dir: str | None = None,
  agent_class: Callable[..., base.Agent] = gin.REQUIRED,
  n_epochs: int = 10,
  callbacks: Sequence[base.EpochCallback] = (),
  build_only: bool = False,
  on_nonfinite: str = 'stop',
) -> base.Agent:
  """Trains `agent_class` on the gin-bound RLTask for n_epochs in total.

  A run finding a checkpoint in output_dir continues from it: n_epochs counts
  the epochs already done, so rerunning the same command finishes the job.

  Args:
    output_dir: where checkpoints, trajectories, metrics and config.gin go.
    agent_class: the agent, e.g. `@PolicyGradient`, its knobs bound in gin.
    n_epochs: total epochs.
    callbacks: called as `callback(agent, record)` after every epoch.
    build_only: only build the task and agent (for `check` and `eval`).
    on_nonfinite: 'stop' (default): a NaN or inf in a loss, gradient,
      parameter or observation ends the run with NonFiniteError and the
      last finite checkpoint kept; 'warn': log it and train on; 'off': no
      checks (see `Agent.run`).

  Returns:
    The agent (closed, after training, unless build_only).
  """
  if (
    isinstance(n_epochs, bool)
    or not isinstance(n_epochs, int)
    or (n_epochs < 0)
  ):
    raise ValueError(f'n_epochs must be an integer >= 0, got {n_epochs!r}')
  try:
    agent = agent_class(task=RLTask(), output_dir=output_dir)
  except TypeError as e:
    # An agent's **kwargs lets gin accept any parameter name; say which
    # binding has none.
    unknown = re.search(r"unexpected keyword argument '(\w+)'", str(e))
    where = re.search(r"In call to configurable '([\w.]+)'", str(e))
    if unknown is None:
      raise
    owner = where.group(1) if where else 'the agent'
    raise ValueError(
      f'unknown gin binding {owner}.{unknown.group(1)}: '
      f'{owner} has no parameter {unknown.group(1)!r}'
    ) from None
  if build_only:
    return agent
  try:
    agent.restore()

    def save_config(agent_: base.Agent, record: dict[str, Any]) -> None:
      del record
      # After the first epoch, as Trax; also if a crash lost it.
      if (
        output_dir is not None
        and not (epath.Path(output_dir) / CONFIG_FILE).exists()
      ):
        write_operative_config(output_dir)

    agent.run(
      n_epochs,
      n_epochs_is_total_epochs=True,
      callbacks=[save_config, *callbacks],
      on_nonfinite=on_nonfinite,
    )
  finally:
    agent.close()
  return agent


def query(binding: str, default: Any = None) -> Any:
  """The value bound to `binding` ('train_rl.n_epochs'), or default."""
  try:
    return gin.query_parameter(binding)
  except ValueError:
    return default


logging.getLogger('absl').setLevel(logging.WARNING)
