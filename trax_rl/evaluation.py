"""Evaluating a trained agent: return and length statistics, and video."""

import copy
import os
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import jax
import numpy as np

from trax_rl import envs, validation
from trax_rl.agents import program_agent
from trax_rl.sources import host_envs

VIDEO_SUFFIXES = ('.mp4', '.gif')


def statistics(values: Sequence[float]) -> dict[str, float]:
  """Mean, (population) standard deviation, min and max of `values`."""
  v = np.asarray(values, np.float64)
  return {
    'mean': float(v.mean()),
    'std': float(v.std()),
    'min': float(v.min()),
    'max': float(v.max()),
  }


def check_temperature(temperature: Any) -> float:
  """A temperature >= 0 as a float; 0 is greedy, 1 the training behaviour.

  Raises:
    ValueError: `temperature` is not a finite number >= 0.
  """
  if (
    isinstance(temperature, bool)
    or not isinstance(temperature, (int, float))
    or not np.isfinite(temperature)
    or temperature < 0
  ):
    raise ValueError(f'temperature must be a number >= 0, got {temperature!r}')
  return float(temperature)


def evaluate(
  agent: program_agent.ProgramAgent,
  n_episodes: int = 10,
  temperature: float = 0.0,
) -> dict[str, Any]:
  """Plays `n_episodes` whole episodes on the agent's eval env; stores none.

  Args:
    agent: a built (and usually restored) agent.
    n_episodes: episodes to play, >= 1.
    temperature: 0.0 is greedy, 1.0 the training behaviour.

  Returns:
    `{'episodes', 'temperature', 'returns', 'lengths', 'return',
    'length'}`: the per-episode lists and their statistics
    (`statistics`).

  Raises:
    ValueError: a bad n_episodes or temperature.
  """
  validation.check_count('n_episodes', n_episodes, 1)
  temperature = check_temperature(temperature)
  task = agent.task
  policy = agent.make_policy(temperature, evaluation=True)

  def act(obs, first, core):
    action, info = policy(obs[0], first[0])
    return np.asarray(action)[None], jax.tree.map(lambda x: x[None], info), core

  # Eval envs of their own, reset from (seed, 1) as the runner's.
  eval_envs = host_envs.HostEnvs(
    task.env_spec, task.n_envs, [[task.seed, 1]], task.max_steps
  )
  try:
    result = eval_envs.collect(act, n_episodes=n_episodes)
  finally:
    eval_envs.close()
  returns = result.episode_returns[0][:n_episodes]
  lengths = result.episode_lengths[0][:n_episodes]
  return {
    'episodes': n_episodes,
    'temperature': temperature,
    'returns': returns,
    'lengths': lengths,
    'return': statistics(returns),
    'length': statistics(lengths),
  }


def check_video_path(path: str) -> None:
  """Raises a one-line ValueError unless `path` is a writable .mp4 or .gif."""
  suffix = os.path.splitext(path)[1].lower()
  if suffix not in VIDEO_SUFFIXES:
    raise ValueError(
      f'video {path} must end in one of {", ".join(VIDEO_SUFFIXES)}'
    )
  parent = os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
    raise ValueError(f'video {path}: {parent} is not a writable directory')


def make_render_env(env: envs.EnvLike) -> gym.Env:
  """One copy of `env` that renders `rgb_array` frames.

  Raises:
    ValueError: the env cannot render rgb_array frames.
  """
  # Rendering starts pygame (SDL), which would look for a sound card and a
  # display; frames are drawn off screen.
  os.environ.setdefault('SDL_AUDIODRIVER', 'dummy')
  os.environ.setdefault('SDL_VIDEODRIVER', 'dummy')
  if isinstance(env, str):
    made = envs.make_env(env, render_mode='rgb_array')
  else:
    made = envs.make_env(
      copy.deepcopy(env) if isinstance(env, gym.Env) else env
    )
  if made.render_mode != 'rgb_array':
    modes = made.unwrapped.metadata.get('render_modes', [])
    if 'rgb_array' not in modes:
      raise ValueError(
        f'env {made.unwrapped.spec.id if made.unwrapped.spec else made} '
        f'cannot render rgb_array frames (render modes: {modes})'
      )
    # Wrappers read the render mode of the env they wrap, which renders
    # lazily: choosing the mode after construction is enough.
    made.unwrapped.render_mode = 'rgb_array'
  return made


def play_frames(
  agent: program_agent.ProgramAgent,
  env: gym.Env,
  temperature: float = 0.0,
  seed: int = 0,
  max_steps: int | None = None,
) -> tuple[list[np.ndarray], float]:
  """Plays one episode on `env`; returns its frames and its return.

  The frames are the reset frame and one per step, so an episode of n steps
  gives n + 1 frames.
  """
  policy = agent.make_policy(check_temperature(temperature), evaluation=True)
  max_steps = max_steps or agent.task.max_steps
  obs, _ = env.reset(seed=seed)
  frames, total, first, steps = [env.render()], 0.0, True, 0
  while True:
    action, _ = policy(np.asarray(obs)[None], np.array([first]))
    obs, reward, terminated, truncated, _ = env.step(np.asarray(action)[0])
    frames.append(env.render())
    total += float(reward)
    first, steps = False, steps + 1
    if terminated or truncated or (max_steps and steps >= max_steps):
      return frames, total


def write_video(path: str, frames: Sequence[np.ndarray], fps: int = 30) -> None:
  """Writes frames `[H, W, 3]` uint8 to an .mp4 (ffmpeg) or .gif file."""
  import imageio.v2 as imageio  # Heavy import, only when writing video.

  check_video_path(path)
  if path.lower().endswith('.gif'):
    imageio.mimsave(path, list(frames), duration=1000 / fps, loop=0)
  else:
    imageio.mimsave(path, list(frames), fps=fps, macro_block_size=2)


def record_video(
  agent: program_agent.ProgramAgent,
  path: str,
  temperature: float = 0.0,
  seed: int = 0,
  fps: int = 30,
) -> dict[str, Any]:
  """Writes a video of one episode of `agent` to `path` (.mp4 or .gif).

  Args:
    agent: a built (and usually restored) agent of a gymnasium env.
    path: the video file; its suffix chooses the format.
    temperature: 0.0 is greedy, 1.0 the training behaviour.
    seed: seed of the episode's reset.
    fps: frames per second.

  Returns:
    `{'video': path, 'frames': n, 'return': r}`.

  Raises:
    ValueError: a bad path, or an env that cannot render rgb_array frames.
  """
  check_video_path(path)
  env = make_render_env(agent.task.env_spec)
  try:
    frames, total = play_frames(agent, env, temperature, seed)
  finally:
    env.close()
  write_video(path, frames, fps)
  return {'video': path, 'frames': len(frames), 'return': total}
