"""envpool vector envs behind the gymnasium source (`'envpool:<id>'` ids).

envpool (an optional extra: `pip install -e '.[envpool]'`) steps N envs in
C++ threads. Its own autoreset is next-step: after an episode ends, the next
`step` ignores that env's action and returns its reset observation. The
gymnasium source wants gymnasium's vector envs with autoreset disabled
(`envs.make_vector_env`): every final observation as that step's
observation, `terminated` and `truncated` apart, and only the finished envs
restarted by `reset(options={'reset_mask': done})`. `EnvpoolVectorEnv`
gives exactly that: a masked reset restarts just those envs in envpool (the
next step is then a real step with the given action; checked in
tests/test_envpool.py), and an env stepped after its episode ended without
a reset is restarted first, so no action is ever dropped.

Seeds: envpool seeds each env once, when the pool is built (env i of
`envpool.make(seed=s)` gets `s + i`; `env_seed=[...]` sets each). So a full
reset with seeds, `reset(seed=[s_0, ..., s_N-1])` (or `seed=s`: `s + i`),
builds a fresh pool with `env_seed` = those seeds: the same seeds give the
same episodes, as with gymnasium envs. The pool is built lazily at the
first reset (the spaces come from envpool's spec), so an env that only
reports its spaces (`RLTask.env`) never builds one. A rebuild costs about
0.5 ms for 8 CartPoles and 1.6 s for 8 Pongs (each loads its ROM) on a
2-core machine: paid at the first collection, at each evaluation and at
each episode-counted epoch, whose envs all restart anyway. A full reset
without seeds resets every env of the existing pool (their random streams
go on).

envpool's state lives in C++, so a checkpoint cannot carry running
episodes: on resume they restart (the runner logs it), as Atari on ALE.
"""

import dataclasses
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from trax_rl import validation

PREFIX = 'envpool:'

# Set by this adapter from the task (`RLTask.n_envs`, resets' seeds).
_RESERVED = ('num_envs', 'batch_size', 'seed', 'env_seed', 'env_type')
# envpool's config fields that are not options for users.
_INTERNAL = ('base_path', 'task', 'gym_reset_return_info', 'max_num_players')


@dataclasses.dataclass(frozen=True)
class EnvpoolSpec:
  """An envpool env id and the options passed to `envpool.make`.

  What `make_envpool` returns and `RLTask.env` accepts; plain data, so it
  pickles to rollout actors. `'envpool:<id>'` is the same with no options.
  """

  task_id: str
  options: tuple[tuple[str, Any], ...] = ()

  @property
  def name(self) -> str:
    return PREFIX + self.task_id


def is_envpool_env(env: Any) -> bool:
  """Whether `env` is an `'envpool:<id>'` id or an `EnvpoolSpec`."""
  if isinstance(env, str):
    return env.startswith(PREFIX)
  return isinstance(env, EnvpoolSpec)


def _import_envpool(what: str) -> Any:
  return validation.import_extra('envpool', what, 'envpool', 'envpool')


def _spec(task_id: str, n_envs: int, options: dict[str, Any]) -> Any:
  """envpool's spaces (observation, action), id and options checked."""
  name = PREFIX + task_id
  envpool = _import_envpool(f'env {name!r}')
  if task_id not in envpool.list_all_envs():
    raise ValueError(
      f'unknown env id {name!r}: envpool has no env {task_id!r} '
      '(envpool.list_all_envs() lists them)'
    )
  reserved = sorted(set(options) & set(_RESERVED))
  if reserved:
    raise ValueError(
      f'env {name!r}: option {reserved[0]!r} is set by trax_rl '
      '(RLTask.n_envs, RLTask.seed); remove it'
    )
  with warnings.catch_warnings():
    # envpool's float64 Box bounds: gymnasium warns about the float32 cast.
    warnings.simplefilter('ignore', UserWarning)
    try:
      spec = envpool.make_spec(task_id, num_envs=n_envs, **options)
      return spec.gymnasium_observation_space, spec.gymnasium_action_space
    except TypeError as e:
      raise ValueError(
        f'env {name!r}: bad envpool option ({e}); its options: '
        f'{", ".join(_option_names(envpool, task_id))}'
      ) from None


def _option_names(envpool: Any, task_id: str) -> list[str]:
  config = envpool.make_spec(task_id).config
  return [k for k in config._fields if k not in _RESERVED + _INTERNAL]


def make_envpool(env: str = 'CartPole-v1', **options: Any) -> EnvpoolSpec:
  """An envpool env for `RLTask.env`, its options bound in gin.

  In gin: `RLTask.env = @make_envpool()`, `make_envpool.env = 'Pong-v5'`,
  `make_envpool.repeat_action_probability = 0.25`, ... (gin/atari/common/
  env.gin). `RLTask.env = 'envpool:Pong-v5'` is the same with envpool's
  default options.

  Args:
    env: an envpool id (`'Pong-v5'`, `'CartPole-v1'`), with or without the
      `'envpool:'` prefix.
    **options: passed to `envpool.make` (Atari: `repeat_action_probability`,
      `full_action_space`, `noop_max`, `episodic_life`, `reward_clip`,
      `use_fire_reset`, `stack_num`, `frame_skip`, `img_height`,
      `img_width`, `gray_scale`, `max_episode_steps`; `num_threads`, ...).
      `num_envs` and seeds come from the RLTask.

  Returns:
    An `EnvpoolSpec`, checked: the id exists and envpool takes the options.

  Raises:
    ValueError: envpool is not installed, the id is unknown, or an option
      is not one of the env's (one line naming it).
  """
  task_id = env.removeprefix(PREFIX)
  _spec(task_id, 1, options)
  return EnvpoolSpec(task_id, tuple(sorted(options.items())))


def as_spec(env: str | EnvpoolSpec) -> EnvpoolSpec:
  """The `EnvpoolSpec` of an `'envpool:<id>'` id or of a spec."""
  if isinstance(env, EnvpoolSpec):
    return env
  return EnvpoolSpec(env.removeprefix(PREFIX))


class EnvpoolVectorEnv(gym.vector.VectorEnv):
  """An envpool pool with gymnasium's autoreset-disabled semantics.

  `step` returns each env's own step, its final observation included;
  `reset(options={'reset_mask': m})` restarts the envs in `m` only and
  returns every env's latest observation with theirs replaced;
  `reset(seed=...)` rebuilds the pool with those seeds (module docstring).

  Args:
    env: an `'envpool:<id>'` id or an `EnvpoolSpec`.
    n_envs: number of envs, >= 1.
  """

  metadata = {'autoreset_mode': gym.vector.AutoresetMode.DISABLED}

  def __init__(self, env: str | EnvpoolSpec, n_envs: int):
    spec = as_spec(env)
    self._name = spec.name
    self._task_id = spec.task_id
    self._options = dict(spec.options)
    self.num_envs = n_envs
    self.single_observation_space, self.single_action_space = _spec(
      spec.task_id, n_envs, self._options
    )
    self.observation_space = gym.vector.utils.batch_space(
      self.single_observation_space, n_envs
    )
    self.action_space = gym.vector.utils.batch_space(
      self.single_action_space, n_envs
    )
    self._pool = None  # Built at the first reset.
    self._obs = None  # [N, ...]: each env's latest observation.
    self._ended = np.zeros(n_envs, bool)  # Done, not reset since.

  def _build(self, seeds: list[int]) -> None:
    envpool = _import_envpool(f'env {self._name!r}')
    if self._pool is not None:
      self._pool.close()
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', UserWarning)
      self._pool = envpool.make(
        self._task_id,
        env_type='gymnasium',
        num_envs=self.num_envs,
        env_seed=seeds,
        **self._options,
      )
      # Built (and warned about) once, here, not at the first reset.
      _ = self._pool.observation_space, self._pool.action_space

  def reset(
    self,
    *,
    seed: int | list[int] | None = None,
    options: dict[str, Any] | None = None,
  ) -> tuple[np.ndarray, dict[str, Any]]:
    """Resets every env, or those in `options['reset_mask']` ([N] bool).

    Returns:
      (observation [N, ...], info): a masked reset's info is envpool's for
      the restarted envs (`info['env_id']` names them).
    """
    mask = (options or {}).get('reset_mask')
    if mask is not None and self._pool is not None:
      if seed is not None:
        raise ValueError('reset: pass seed or a reset_mask, not both')
      ids = np.flatnonzero(np.asarray(mask, bool)).astype(np.int32)
      if not len(ids):
        return self._obs.copy(), {}
      part, info = self._pool.reset(ids)
      obs = self._obs.copy()
      obs[ids] = part
      self._obs = obs
      self._ended[ids] = False
      return obs, info
    if seed is None and self._pool is not None:
      obs, info = self._pool.reset()
    else:
      self._build(self._seeds(seed))
      obs, info = self._pool.reset()
    self._obs = obs
    self._ended[:] = False
    return obs, info

  def _seeds(self, seed: int | list[int] | None) -> list[int]:
    if seed is None:  # Unseeded, as a fresh gymnasium env.
      seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
    if isinstance(seed, (int, np.integer)):
      seed = [int(seed) + i for i in range(self.num_envs)]
    if len(seed) != self.num_envs:
      raise ValueError(
        f'reset: {len(seed)} seeds for {self.num_envs} envs of {self._name}'
      )
    return [int(s) % 2**31 for s in seed]  # envpool's seeds are int32.

  def step(
    self, actions: Any
  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
    """Steps every env with its action; nothing restarts by itself.

    Returns:
      (observation [N, ...], reward [N], terminated [N], truncated [N],
      info): where an episode ended, its final observation.
    """
    if self._pool is None:
      raise ValueError(f'env {self._name}: step before the first reset')
    if self._ended.any():
      # envpool would spend this step on the reset and drop the action.
      self.reset(options={'reset_mask': self._ended})
    obs, reward, terminated, truncated, info = self._pool.step(
      np.asarray(actions)
    )
    self._obs = obs
    self._ended = np.logical_or(terminated, truncated)
    return obs, reward, terminated, truncated, info

  def close_extras(self, **kwargs: Any) -> None:
    del kwargs
    if self._pool is not None:
      self._pool.close()
      self._pool = None


class EnvpoolEnv(gym.Env):
  """One envpool env as a gymnasium Env (for `trax-rl check`, videos).

  Args:
    env: an `'envpool:<id>'` id or an `EnvpoolSpec`.
  """

  def __init__(self, env: str | EnvpoolSpec):
    self._vector = EnvpoolVectorEnv(env, 1)
    self.observation_space = self._vector.single_observation_space
    self.action_space = self._vector.single_action_space

  def reset(
    self, *, seed: int | None = None, options: dict[str, Any] | None = None
  ) -> tuple[np.ndarray, dict[str, Any]]:
    del options
    obs, _ = self._vector.reset(seed=seed)
    return obs[0], {}

  def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
    obs, reward, terminated, truncated, _ = self._vector.step(
      np.asarray(action)[None]
    )
    return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

  def close(self) -> None:
    self._vector.close()
