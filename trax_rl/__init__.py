"""trax_rl: Trax RL and the Acme JAX value learners on today's stack.

The Python entry points for notebooks are `train`, `evaluate` and `load`.
They import JAX and gin only when called, so `import trax_rl` stays light.
"""

import warnings
from collections.abc import Callable, Sequence
from typing import Any

# JAX warns at every fork that a fork of a multithreaded process may
# deadlock. `subprocess` forks only to exec at once (ffmpeg for videos,
# Ray's processes, a notebook's helpers), where that cannot happen: those
# warnings only are silenced; a real os.fork elsewhere still warns.
warnings.filterwarnings(
  'ignore',
  message=r'os\.fork\(\) was called',
  category=RuntimeWarning,
  module='subprocess',
)


def train(
  config: str | Sequence[str],
  output_dir: str | None = None,
  bindings: Sequence[str] = (),
  n_epochs: int | None = None,
  callbacks: Sequence[Callable[[Any, dict[str, Any]], bool | None]] = (),
) -> Any:
  """Trains the agent a gin config describes.

  Args:
    config: a gin file path, a shipped config name (`'dqn_cartpole'`; see
      `trax-rl configs`), gin text (any string with `=` or a newline), or a
      list of those; files are parsed first, then text.
    output_dir: where checkpoints, metrics and config.gin go; a run finding a
      checkpoint there continues from it. None keeps everything in memory.
    bindings: extra gin bindings, e.g. `['RLTask.seed = 1']`.
    n_epochs: total epochs (overrides `train_rl.n_epochs`).
    callbacks: each called as `callback(agent, record)` after every epoch,
      once the epoch is saved; one returning True stops training (e.g. at a
      target return).

  Returns:
    A `trax_rl.api.Run`: `.agent` and `.records` (one dict per epoch).

  Raises:
    ValueError: bad config or arguments (the message names the culprit).
  """
  from trax_rl import api  # Imports JAX and gin.

  return api.train(config, output_dir, bindings, n_epochs, callbacks)


def evaluate(
  agent: Any,
  episodes: int = 10,
  temperature: float = 0.0,
  video: str | None = None,
  seed: int | None = None,
) -> dict[str, Any]:
  """Plays whole episodes with a trained agent; stores nothing.

  Args:
    agent: an agent (`train(...).agent`, `load(...)`) or an output_dir.
    episodes: number of episodes, >= 1.
    temperature: 0.0 is greedy, 1.0 the training behaviour.
    video: optional .mp4 or .gif path for a video of one more episode.
    seed: with the output_dir of a seed batch (`train_rl.n_seeds`), the
      seed to play.

  Returns:
    `returns` and `lengths` per episode, their statistics under `return`
    and `length` (mean, std, min, max), `epoch`, `seed`, and `video` if
    asked for.

  Raises:
    ValueError: bad arguments, an env that cannot render for the video,
      or a seed batch without (or with another) seed.
  """
  from trax_rl import api

  return api.evaluate(agent, episodes, temperature, video, seed)


def load(output_dir: str, seed: int | None = None) -> Any:
  """The agent of a trained run, restored from its output_dir.

  Args:
    output_dir: a run's output directory (with config.gin and a checkpoint).
    seed: for a seed batch (`train_rl.n_seeds`), which of its seeds.

  Returns:
    The agent, at the run's last completed epoch.

  Raises:
    ValueError: output_dir holds no run, or a seed batch without (or with
      another) seed.
  """
  from trax_rl import api

  return api.load(output_dir, seed)
