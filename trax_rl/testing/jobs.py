"""Processes of one multi-host job on 127.0.0.1, and checks of them (tests only)."""

import ipaddress
import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np


def free_port() -> int:
  """A TCP port on 127.0.0.1 that nothing listens on now."""
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def run_job(
  script: str, args: Sequence[Sequence[str]], timeout_s: float = 600
) -> list[Any]:
  """Runs one `python -c script PORT i *args[i]` per process, all at once.

  Each process gets the same free coordinator PORT and its index i, and
  runs JAX on the CPU; its last line of stdout is read as JSON.

  Returns:
    Each process's JSON, in process order.

  Raises:
    AssertionError: a process failed (with the end of its stderr).
  """
  port = str(free_port())
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  processes = [
    subprocess.Popen(
      [sys.executable, '-c', script, port, str(i), *map(str, more)],
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
      env=env,
    )
    for i, more in enumerate(args)
  ]
  results = []
  for process in processes:
    out, err = process.communicate(timeout=timeout_s)
    assert process.returncode == 0, err[-3000:]
    results.append(json.loads(out.strip().splitlines()[-1]))
  return results


def assert_learn_in_step(first: dict, second: dict) -> None:
  """Two processes' learners: the same updates, different data.

  Each of `first` and `second` holds `devices`, `step`, `params` (leaves as
  lists) and `observations` (of the data the process collected).
  """
  assert first['devices'] == second['devices'] == 2
  assert first['step'] == second['step'] > 0
  for a, b in zip(first['params'], second['params'], strict=True):
    np.testing.assert_array_equal(a, b)
  # Each process collected its own data.
  assert first['observations'] != second['observations']


def is_loopback(ip: str) -> bool:
  """Whether `ip` (v4, v6 or v4-mapped v6) is a loopback address."""
  address = ipaddress.ip_address(ip)
  mapped = getattr(address, 'ipv4_mapped', None)
  return address.is_loopback or (mapped is not None and mapped.is_loopback)
