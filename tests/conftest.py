"""Test-session setup: a persistent XLA compilation cache per worker.

Many tests build agents whose compiled programs are identical (the same
network, env and shapes, another seed or output_dir); the cache compiles
each once per test session instead of once per agent (tests/device: 222 s
-> 181 s with two workers). It lives in a fresh temporary folder, removed
at exit, so no session sees another's entries.
"""

import atexit
import os
import shutil
import tempfile

import jax

_CACHE = tempfile.mkdtemp(
  prefix=f'trax_rl_xla_{os.environ.get("PYTEST_XDIST_WORKER", "main")}_'
)
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
jax.config.update('jax_compilation_cache_dir', _CACHE)
# Subprocesses (the CLI tests) share the worker's cache, not the user's.
os.environ['TRAX_RL_COMPILATION_CACHE'] = _CACHE
