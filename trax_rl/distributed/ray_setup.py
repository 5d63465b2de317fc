"""Starting or joining Ray, with every socket on loopback when local.

Ray is an optional extra (`pip install -e '.[ray]'`), imported only here
and only when a RayCollector starts.
"""

import os
from typing import Any

# Ray servers bind to the node IP unless told this is a single-node setup.
_LOOPBACK_ENV = 'RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'
_LOOPBACK_PREFIXES = ('127.', 'localhost', '[::1]')


def import_ray(address: str | None) -> Any:
  """Imports Ray; a local or loopback cluster keeps all sockets on 127.0.0.1.

  Raises:
    ImportError: Ray is not installed (says which extra to install).
  """
  if address is None or address.startswith(_LOOPBACK_PREFIXES):
    os.environ.setdefault(_LOOPBACK_ENV, '0')
  try:
    import ray  # noqa: PLC0415 (optional extra, imported when asked for)
  except ImportError:
    raise ImportError(
      "RayCollector needs Ray: pip install -e '.[ray]'"
    ) from None
  return ray


def init_ray(address: str | None = None, num_cpus: int | None = None) -> bool:
  """Connects to `address`, or starts a local loopback-only Ray instance.

  Args:
    address: 'host:port' of an existing cluster's head (or 'auto'); None
      starts a local instance bound to 127.0.0.1.
    num_cpus: CPUs of a local instance (None: all).

  Returns:
    Whether this call started (and so should stop) Ray.
  """
  ray = import_ray(address)
  if ray.is_initialized():
    return False
  if address is None:
    ray.init(
      num_cpus=num_cpus,
      include_dashboard=False,
      _node_ip_address='127.0.0.1',
      log_to_driver=False,
    )
  else:
    ray.init(address=address, log_to_driver=False)
  return True
