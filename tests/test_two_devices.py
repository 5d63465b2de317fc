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
import pytest

TESTS = pathlib.Path(__file__).resolve().parent


# One pytest per file, so that xdist spreads them over its workers.
FILES = [
  'device/test_device_value.py',  # The Acme losses.
  'device/test_device_sequence.py',  # R2D2.
  'device/test_device_slices.py',  # Trax's DQN.
  'device/test_device_actor_critic.py',  # PPO.
  'device/test_device_epoch.py',  # PolicyGradient: evals, resume, NaN.
]


@pytest.mark.parametrize('path', FILES)
def test_marked_tests_pass_on_two_devices(path):
  env = dict(
    os.environ,
    XLA_FLAGS='--xla_force_host_platform_device_count=2',
    JAX_PLATFORMS='cpu',
  )
  env[conftest.TWO_DEVICES_ENV] = '1'
  result = subprocess.run(
    [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider']
    + ['-p', 'no:xdist', '-m', 'two_devices', str(TESTS / path)],
    env=env,
    capture_output=True,
    text=True,
    timeout=1800,
    cwd=TESTS.parent,
  )
  tail = result.stdout[-4000:] + result.stderr[-2000:]
  assert result.returncode == 0, tail
  passed = re.search(r'(\d+) passed', result.stdout)
  assert passed and int(passed.group(1)) >= 1, tail


def test_every_marked_file_is_run():
  marked = sorted(
    str(p.relative_to(TESTS))
    for p in TESTS.rglob('test_*.py')
    if p.name != 'test_two_devices.py'
    and '@pytest.mark.two_devices' in p.read_text()
  )
  assert marked == sorted(FILES)
