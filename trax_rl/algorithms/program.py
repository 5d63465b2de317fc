"""A program: one algorithm family's whole algorithm, as pure functions.

Every family (the Acme value learners, R2D2, Trax's DQN, PolicyGradient
and ExpertIteration, the actor-critics, PQN) is one `Program` over a
learner pytree (train states, its store of experience, counters), and
every source calls the same functions, only feeding them rollouts from
elsewhere (`trax_rl.sources`):

  learner = init(key)
  action, info = act(learner, key, observation[N, ...], temperature)
  learner = observe(learner, rollout)          # a `Rollout`, [T, N, ...]
  learner, metrics = learn(learner, key)

A recurrent program (R2D2) also has `initial_core(n)`, and its `act` takes
and returns the core: `act(learner, key, obs, temperature, core, first) ->
(action, info, core)`, `first[N]` marking the envs whose episode starts
(the program zeroes their core).

`temperature` is a Python float (programs compile once per value): 1.0 is
the training behaviour, 0.0 greedy. The functions are pure and jittable,
so a source may run them inside one compiled epoch (the device source),
jit them one by one (the gymnasium source), and vmap them over a leading
seed axis of the learner (`train_rl.n_seeds`).

`observe` takes every `valid` step of the rollout into the family's store
(replay items, a ring of recent epochs, packed steps); each env's valid
steps are a prefix of the rollout (see `Rollout.valid`).
"""

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from trax_rl.device import rollout as rollout_lib
from trax_rl.supervised import train_state

Learner = Any


class Spec(NamedTuple):
  """What a family's program is built for: the task and the rollouts.

  Attributes:
    observation_space: one observation's space (gymnasium).
    action_space: one action's space (gymnasium).
    gamma: the task's discount.
    n_envs: N, envs side by side in a rollout.
    n_steps: T, the longest rollout `observe` takes.
    axis_name: across hosts, the name of the mapped axis of the processes'
      learners (gradients are averaged over it); None in one process.
  """

  observation_space: Any
  action_space: Any
  gamma: float
  n_envs: int
  n_steps: int
  axis_name: str | None = None


@dataclasses.dataclass(frozen=True)
class Program:
  """The pure functions of one algorithm family (see the module docstring).

  Attributes:
    init: `key -> learner`.
    act: the policy at a temperature (see the module docstring).
    observe: `(learner, rollout) -> learner`.
    learn: `(learner, key) -> (learner, metrics)`; metrics are scalars
      named as the epoch record's fields (`value/loss`, ...).
    initial_core: a recurrent policy's `n -> core` (leaves `[n, ...]`);
      None for feed-forward policies.
    whole_episodes: the program needs epochs of whole episodes (its filter
      or its estimates rank episodes): only a source that counts epochs
      in episodes may feed it.
    acting: `learner -> what act reads`: the learner without its store
      (replay, ring), for sources that act outside the compiled epoch
      (the gymnasium source's per-step calls, rollout actors' copies); act
      must work on it as on the learner. None: the learner itself.
    streams: the program learns from experience as it arrives (a replay
      learner): rollout actors then play chunks continuously rather than
      an epoch's units (`sources.ray`).
    can_observe: `(learner, n_steps) -> bool`, jittable: whether `observe`
      may take n_steps more env steps now (a replay's rate limiter); None:
      always.
    train_name: what the learner's `train` state is called in messages
      (the non-finite guard's 'policy/loss').
  """

  init: Callable[[jax.Array], Learner]
  act: Callable[..., tuple]
  observe: Callable[[Learner, rollout_lib.Rollout], Learner]
  learn: Callable[[Learner, jax.Array], tuple[Learner, dict[str, Any]]]
  initial_core: Callable[[int], Any] | None = None
  whole_episodes: bool = False
  acting: Callable[[Learner], Any] | None = None
  streams: bool = False
  can_observe: Callable[[Learner, int], Any] | None = None
  train_name: str = 'value'

  @classmethod
  def of(cls, functions: Any, **settings: Any) -> 'Program':
    """The program of an object with methods `init`, `act`, `observe`,
    `learn` and `acting` (a family's frozen dataclass), and `settings` for
    the other fields."""
    names = ('init', 'act', 'observe', 'learn', 'acting')
    return cls(**{n: getattr(functions, n) for n in names}, **settings)

  @property
  def recurrent(self) -> bool:
    return self.initial_core is not None

  def acting_view(self, learner: Learner) -> Any:
    """What `act` needs of `learner` (see `acting`), its train states
    without what only updates read (optimizer state, target parameters):
    fewer arguments for every acting call, less to ship to actors."""
    view = learner if self.acting is None else self.acting(learner)
    is_state = lambda x: isinstance(x, train_state.TrainState)  # noqa: E731
    return jax.tree.map(
      lambda x: x.acting() if is_state(x) else x, view, is_leaf=is_state
    )

  def act_shapes(
    self, learner: Learner, observation_space: Any, n: int
  ) -> tuple[Any, Any]:
    """The shapes and dtypes of `act`'s (action, info) for n observations
    of `observation_space` (`learner`: the learner or its shapes)."""
    obs = jax.ShapeDtypeStruct(
      (n, *observation_space.shape), observation_space.dtype
    )
    view = jax.eval_shape(self.acting_view, learner)
    key = jax.ShapeDtypeStruct((2,), np.uint32)
    if not self.recurrent:
      return jax.eval_shape(
        lambda v, k, o: self.act(v, k, o, 1.0), view, key, obs
      )
    core = jax.eval_shape(lambda: self.initial_core(n))
    first = jax.ShapeDtypeStruct((n,), bool)
    action, info, _ = jax.eval_shape(
      lambda v, k, o, c, f: self.act(v, k, o, 1.0, c, f),
      view,
      key,
      obs,
      core,
      first,
    )
    return action, info

  def train(
    self, learner: Learner, rollout: rollout_lib.Rollout, key: jax.Array
  ) -> tuple[Learner, dict[str, Any]]:
    """`learn(observe(learner, rollout), key)`: one epoch's learning."""
    return self.learn(self.observe(learner, rollout), key)

  def policy(self, temperature: float) -> Callable[..., tuple]:
    """`act` at a fixed temperature, in the device rollout's form.

    Feed-forward: `(learner, key, obs) -> (action, info)`; recurrent:
    `(learner, key, obs, core, first) -> (action, info, core)`.
    """
    if self.recurrent:

      def recurrent_policy(learner, key, obs, core, first):
        return self.act(learner, key, obs, temperature, core, first)

      return recurrent_policy

    def policy(learner, key, obs):
      return self.act(learner, key, obs, temperature)

    return policy
