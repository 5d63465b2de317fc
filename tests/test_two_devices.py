"""The `two_devices` tests again, on two forced host devices.

Users split seed batches over the 8 cores of a Colab TPU; CI machines have
one device. XLA takes the device count when it starts, so the marked tests
run in a pytest of their own with
`XLA_FLAGS=--xla_force_host_platform_device_count=2` (`conftest.py`
checks that it took).
"""

import os
import pathlib
import re
import subprocess
import sys

import conftest

TESTS = pathlib.Path(__file__).resolve().parent


def test_marked_tests_pass_on_two_devices():
  env = dict(
    os.environ,
    XLA_FLAGS='--xla_force_host_platform_device_count=2',
    JAX_PLATFORMS='cpu',
  )
  env[conftest.TWO_DEVICES_ENV] = '1'
  result = subprocess.run(
    [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider']
    + ['-p', 'no:xdist', '-m', 'two_devices', str(TESTS)],
    env=env,
    capture_output=True,
    text=True,
    timeout=1800,
    cwd=TESTS.parent,
  )
  tail = result.stdout[-4000:] + result.stderr[-2000:]
  assert result.returncode == 0, tail
  passed = re.search(r'(\d+) passed', result.stdout)
  # Every family's seed batch: value learners, R2D2, Trax's DQN, PPO, PG.
  assert passed and int(passed.group(1)) >= 9, tail
