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

# Tests marked `two_devices` run twice: in the suite, on one device, and
# again by tests/test_two_devices.py in a pytest of their own on two forced
# host devices (XLA_FLAGS), with this variable set.
TWO_DEVICES_ENV = 'TRAX_RL_TEST_TWO_DEVICES'


def pytest_configure(config):
  config.addinivalue_line(
    'markers',
    'two_devices: also run on two forced host devices '
    '(tests/test_two_devices.py)',
  )
  if os.environ.get(TWO_DEVICES_ENV):
    # The flag only works if XLA reads it before it starts: say so at once.
    assert jax.local_device_count() == 2, jax.devices()
