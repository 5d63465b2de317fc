"""Everything a gin file may name, registered with gin.

Each function and class under its short name (`PolicyGradient`, `MLP`) and
under `trax_rl.<name>` (optax's optimizers under `optax.<name>`, Trax's
under their Trax names). `configurables.train_rl` is the entry point.
"""

from typing import Any

import gin
import gymnasium.wrappers
import optax

from trax_rl import (
  advantages,
  envpool_env,
  envs,
  lr_schedules,
  task,
  tracking,
  trax_optimizers,
)
from trax_rl.agents import (
  expert_iteration,
  family_agent,
  policy_agents,
  r2d2,
  replay_value,
  value_agents,
)
from trax_rl.agents.actor_critic import algorithms as actor_critic
from trax_rl.algorithms import pqn, sac, td3
from trax_rl.distributed import ray_collector
from trax_rl.losses import distributional, q_learning
from trax_rl.losses import r2d2 as r2d2_losses
from trax_rl.networks import models, recurrent

# What each gin name stands for.
_REGISTERED: dict[str, Any] = {'RLTask': task.RLTask}


def _register(*objects: Any, module: str = 'trax_rl') -> None:
  for obj in objects:
    gin.external_configurable(obj, module=module)
    _REGISTERED[obj.__name__] = obj


def registered() -> list[Any]:
  """The functions and classes registered here, each once."""
  return list({id(o): o for o in _REGISTERED.values()}.values())


def lookup(name: str) -> Any:
  """What the gin name `name` stands for (None if not registered)."""
  return _REGISTERED.get(name)


# Task and environments. `configurables.train_rl` calls the gin-bound
# RLTask.
RLTask = gin.external_configurable(task.RLTask, module='trax_rl')
_register(
  envs.MaskVelocity, envs.masked_cartpole, envs.mask_velocity, envs.make_env
)
# Networks.
_register(
  models.MLP,
  models.ConvTorso,
  models.MinAtarTorso,
  models.Policy,
  models.Value,
  models.PolicyAndValue,
  models.Quality,
  models.CategoricalQuality,
  models.QuantileQuality,
)
# Schedules, estimators, optimizers.
_register(
  lr_schedules.multifactor, lr_schedules.constant_lr, lr_schedules.linear_lr
)
_register(
  advantages.monte_carlo, advantages.td_k, advantages.td_lambda, advantages.gae
)
for _name in ('adam', 'adamw', 'sgd', 'rmsprop', 'lamb', 'lion', 'adabelief'):
  gin.external_configurable(getattr(optax, _name), name=_name, module='optax')
# Trax's optimizers under their Trax gin names (see trax_compat).
for _name, _fn in (
  ('Adam', trax_optimizers.trax_adam),
  ('RMSProp', trax_optimizers.trax_rmsprop),
  ('Momentum', trax_optimizers.trax_momentum),
  ('SGD', trax_optimizers.trax_sgd),
):
  gin.external_configurable(_fn, name=_name, module='trax_rl')
  _REGISTERED[_name] = _fn
# Policy agents.
_register(
  policy_agents.PolicyGradient,
  expert_iteration.ExpertIteration,
  expert_iteration.sharpened_network_policy,
)

# Value agents (Trax's DQN, the Acme learners on a replay table).
_register(
  value_agents.DQN,
  value_agents.trax_exploration_rate,
  replay_value.ReplayValueAgent,
  value_agents.linear_epsilon,
  q_learning.QLearning,
  q_learning.RegularizedQLearning,
  q_learning.MunchausenQLearning,
  q_learning.PrioritizedDoubleQLearning,
  distributional.PrioritizedCategoricalDoubleQLearning,
  distributional.QrDqn,
)
# Atari: `ALE/Pong-v5` (made with frameskip=1) under gymnasium's wrappers.
_register(
  gymnasium.wrappers.AtariPreprocessing,
  gymnasium.wrappers.FrameStackObservation,
)
# envpool envs: `RLTask.env = @make_envpool()`, its options bound in gin.
_register(envpool_env.make_envpool)
# R2D2: recurrent Q network, its loss and agent.
_register(
  recurrent.RecurrentQuality,
  r2d2_losses.R2D2Loss,
  r2d2_losses.signed_hyperbolic_pair,
  r2d2_losses.identity_pair,
  r2d2.R2D2,
)
# Actor-critic agents, separate and joint networks.
_register(
  actor_critic.A2C,
  actor_critic.PPO,
  actor_critic.AWR,
  actor_critic.SamplingAWR,
  models.ActionValue,
  actor_critic.PPOJoint,
  actor_critic.A2CJoint,
  actor_critic.AWRJoint,
)
# PQN: parallelised Q-learning, one program module.
_register(family_agent.agent_class(pqn.PQN))
# Off-policy actor-critics for Box actions, one program.
_register(family_agent.agent_class(sac.SAC), family_agent.agent_class(td3.TD3))

# Where experience comes from. Ray itself is imported only when a
# RayCollector starts.
_register(ray_collector.RayCollector)
# Where records go besides metrics.jsonl and TensorBoard.
_register(tracking.WandbTracker)
