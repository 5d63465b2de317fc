"""Agents restored by their constructor, as Trax's.

An agent built on an `output_dir` holding a checkpoint comes back restored:
`RestoresOnConstruction` calls `restore()` once the outermost `__init__`
has finished, unless the agent is built inside `restore_deferred()`.
"""

import contextlib
import contextvars
import inspect
from collections.abc import Iterator


class RestoresOnConstruction(type):
  """Calls `restore()` once the outermost `__init__` has finished."""

  def __init__(cls, name, bases, namespace, **kwargs):
    super().__init__(name, bases, namespace, **kwargs)
    # Constructing the class has the signature of its __init__, for
    # `inspect.signature` and gin, not this metaclass's (*args, **kwargs).
    init = inspect.signature(cls.__init__)
    cls.__signature__ = init.replace(
      parameters=list(init.parameters.values())[1:]
    )

  def __call__(cls, *args, **kwargs):
    agent = super().__call__(*args, **kwargs)
    if _RESTORE_ON_CONSTRUCTION.get():
      agent.restore()
    return agent


_RESTORE_ON_CONSTRUCTION = contextvars.ContextVar(
  'restore_on_construction', default=True
)


@contextlib.contextmanager
def restore_deferred() -> Iterator[None]:
  """Agents built inside restore only when `restore()` is called.

  `train_rl` builds the agent this way to compare the config with the
  checkpoint's before loading the checkpoint.
  """
  token = _RESTORE_ON_CONSTRUCTION.set(False)
  try:
    yield
  finally:
    _RESTORE_ON_CONSTRUCTION.reset(token)
