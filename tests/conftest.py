"""Test-session setup: one persistent XLA compilation cache for the session.

Many tests build agents whose compiled programs are identical (the same
network, env and shapes, another seed or output_dir); the cache compiles
each once per test session instead of once per agent. The controller makes
one fresh temporary folder, removed at exit, and every xdist worker (and
every CLI subprocess) shares it, so a program one worker compiled is loaded
by the other. Every compile is cached, the small ones too (JAX's default
keeps only compiles over 1 s), and the size cap turns on JAX's file lock,
which makes the shared folder safe for concurrent workers.

Compiling is most of the suite's time on two CPUs, and XLA's LLVM pass at
`xla_backend_optimization_level=1` takes a sixth to a third less of it
than the default 2. Every process of the session, CLI subprocesses
included, compiles at 1. The float bits may differ from level 2's: a
40-epoch policy-gradient run and the Trax DQN learning test give the same
returns at both, but RESULTS.md records 50k-step QR-DQN and R2D2 runs
that part at level 1. The learning tests' thresholds hold at level 1 (the
whole suite passes at it); each is a run of the algorithm, on other bits.
"""

import atexit
import os
import shutil
import tempfile

_LEVEL = '--xla_backend_optimization_level=1'
if _LEVEL not in os.environ.get('XLA_FLAGS', ''):
  # Before JAX starts its backend, which reads the flags once.
  os.environ['XLA_FLAGS'] = f'{os.environ.get("XLA_FLAGS", "")} {_LEVEL}'

import jax  # noqa: E402

from trax_rl import compile_cache  # noqa: E402

_SHARED = 'TRAX_RL_TEST_XLA_CACHE'
if not os.environ.get(_SHARED):
  # The controller (or a run without xdist): workers inherit the variable.
  os.environ[_SHARED] = tempfile.mkdtemp(prefix='trax_rl_xla_')
  atexit.register(shutil.rmtree, os.environ[_SHARED], ignore_errors=True)
_CACHE = os.environ[_SHARED]
# compile_cache.enable's settings, set here rather than through it: enable
# keeps a cache folder JAX already has (JAX_COMPILATION_CACHE_DIR), and the
# tests must never read or fill the user's.
jax.config.update('jax_compilation_cache_dir', _CACHE)
jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
jax.config.update('jax_compilation_cache_max_size', compile_cache.MAX_BYTES)
# Subprocesses (the CLI tests) share the session's cache, not the user's.
os.environ[compile_cache.ENV_VAR] = _CACHE

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
