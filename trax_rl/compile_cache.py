"""A persistent XLA compilation cache, so a rerun of a config skips its compiles.

Researchers rerun the same config many times (seeds, resumes, `trax-rl
eval`, a Colab cell run again). Each run compiles the same programs: on two
CPUs a device-path run spends 5-10 s there before its first epoch. JAX can
keep compiled executables on disk, keyed by the program, its compile options
and the JAX and XLA versions, and load them instead of compiling.

`train_rl` calls `enable()` before it builds anything: the cache lives in
`$TRAX_RL_COMPILATION_CACHE`, else `$XDG_CACHE_HOME/trax_rl/xla` (or
`~/.cache/trax_rl/xla`); `TRAX_RL_COMPILATION_CACHE=off` or
`train_rl.compilation_cache = None` turn it off. A cache directory that JAX
already uses (`JAX_COMPILATION_CACHE_DIR`, `jax.config`) is left as it is.
Like every JAX compilation cache, it must not be writable by anyone you do
not trust: its entries are executable code.
"""

import logging
import os

import jax

ENV_VAR = 'TRAX_RL_COMPILATION_CACHE'
DEFAULT = 'default'
_OFF = ('', '0', 'off', 'none', 'false')
# Least recently used entries go past this size; one epoch program is a few
# MB, so this holds hundreds of configs.
MAX_BYTES = 2 << 30

_LOG = logging.getLogger(__name__)


def default_dir() -> str | None:
  """$TRAX_RL_COMPILATION_CACHE, else the user's cache folder; None if off."""
  value = os.environ.get(ENV_VAR)
  if value is not None:
    return None if value.strip().lower() in _OFF else value
  base = os.environ.get('XDG_CACHE_HOME') or os.path.join(
    os.path.expanduser('~'), '.cache'
  )
  return os.path.join(base, 'trax_rl', 'xla')


def enable(directory: str | None = DEFAULT) -> str | None:
  """Turns the persistent cache on; returns the folder in use (None: off).

  Every compile is cached, also the small ones of building a network
  (JAX's default keeps only compiles over 1 s). A folder that cannot be
  created or written is a warning, never an error: the cache only saves
  time.

  Args:
    directory: the cache folder; DEFAULT: `default_dir()`; None: leave the
      cache as it is (off unless JAX was told otherwise).
  """
  current = jax.config.jax_compilation_cache_dir
  if current:
    return current
  if directory == DEFAULT:
    directory = default_dir()
  if directory is None:
    return None
  directory = os.path.expanduser(directory)
  try:
    os.makedirs(directory, exist_ok=True)
    if not os.access(directory, os.W_OK):
      raise PermissionError(f'{directory} is not writable')
  except OSError as e:
    _LOG.warning('compilation cache off: %s', e)
    return None
  jax.config.update('jax_compilation_cache_dir', directory)
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  if jax.config.jax_compilation_cache_max_size == -1:
    jax.config.update('jax_compilation_cache_max_size', MAX_BYTES)
  return directory
