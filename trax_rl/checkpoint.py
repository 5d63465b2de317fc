"""Atomic, code-free checkpoints of numpy pytrees.

A checkpoint file is a pickle of plain Python values only: dicts, lists,
tuples, str, bytes, int, float, bool and None. Arrays are encoded as
`{'__ndarray__': (dtype name, shape, raw bytes)}` before pickling, so loading
never needs to import anything: the unpickler refuses every global, and a
crafted pickle cannot run code.

Every file starts with a format marker and version. Writes go to a temporary
file in the same directory and are renamed over the target, so a run killed
at any moment leaves either the old or the new file, never half of one; a
write that fails (disk full, permission lost, a remote error) removes its
temporary file and leaves the old file as it was.
"""

import io
import os
import pickle
import uuid
from typing import Any

import jax
import numpy as np
from etils import epath

FORMAT = 'trax_rl-checkpoint'
VERSION = 1
# A run's checkpoint in its output_dir.
CHECKPOINT_FILE = 'checkpoint.pkl'
_ND = '__ndarray__'
_TUPLE = '__tuple__'


class CheckpointError(ValueError):
  """A checkpoint file is missing, truncated, corrupt or of another format."""


def _encode(x: Any) -> Any:
  if isinstance(x, (jax.Array, np.ndarray, np.generic)):
    arr = np.asarray(x)
    if arr.dtype == object:
      raise TypeError('object arrays cannot be checkpointed')
    return {_ND: (arr.dtype.name, arr.shape, arr.tobytes())}
  if isinstance(x, dict):
    return {k: _encode(v) for k, v in x.items()}
  if isinstance(x, tuple):  # NamedTuples become plain tuples.
    return {_TUPLE: [_encode(v) for v in x]}
  if isinstance(x, list):
    return [_encode(v) for v in x]
  if x is None or isinstance(x, (bool, int, float, str, bytes)):
    return x
  raise TypeError(f'cannot checkpoint a value of type {type(x).__name__}')


def _decode(x: Any) -> Any:
  if isinstance(x, dict):
    if _ND in x and len(x) == 1:
      name, shape, raw = x[_ND]
      return np.frombuffer(raw, dtype=np.dtype(name)).reshape(shape).copy()
    if _TUPLE in x and len(x) == 1:
      return tuple(_decode(v) for v in x[_TUPLE])
    return {k: _decode(v) for k, v in x.items()}
  if isinstance(x, list):
    return [_decode(v) for v in x]
  return x


class _PlainUnpickler(pickle.Unpickler):
  """Admits plain Python values only: any global (class, function) is refused."""

  def find_class(self, module, name):
    raise pickle.UnpicklingError(
      f'refusing to load {module}.{name}: checkpoints hold plain values only'
    )


def dumps(tree: Any) -> bytes:
  """Serializes a pytree of arrays and plain values."""
  payload = {'format': FORMAT, 'version': VERSION, 'data': _encode(tree)}
  return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def loads(raw: bytes, name: str = '<bytes>') -> Any:
  """Inverse of `dumps`. Raises CheckpointError naming `name` on bad input."""
  if not raw:
    raise CheckpointError(f'checkpoint {name} is empty')
  try:
    payload = _PlainUnpickler(io.BytesIO(raw)).load()
  except Exception as e:  # noqa: BLE001 - any failure means a bad file.
    raise CheckpointError(
      f'checkpoint {name} is corrupt or truncated ({e})'
    ) from None
  if (
    not isinstance(payload, dict)
    or payload.get('format') != FORMAT
    or 'data' not in payload
  ):
    raise CheckpointError(f'checkpoint {name} is not a trax_rl checkpoint')
  if payload.get('version') != VERSION:
    raise CheckpointError(
      f'checkpoint {name} has format version {payload.get("version")}, '
      f'this trax_rl reads version {VERSION}'
    )
  try:
    return _decode(payload['data'])
  except Exception as e:  # noqa: BLE001
    raise CheckpointError(f'checkpoint {name} is corrupt ({e})') from None


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
  """Writes `data` to `path` through a temporary file and a rename.

  Args:
    path: the file to write (local or `gs://`); its folder is created.
    data: bytes, or text written as UTF-8.

  Raises:
    OSError: the write or the rename failed. The temporary file is removed
      first, and `path` keeps its earlier content.
  """
  path = epath.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  raw = data.encode() if isinstance(data, str) else data
  tmp = path.parent / f'.{path.name}.tmp-{uuid.uuid4().hex}'
  try:
    tmp.write_bytes(raw)
    tmp.replace(path)  # Atomic on POSIX file systems; replaces the old file.
  except BaseException:
    _remove_quietly(tmp)
    raise


def _remove_quietly(path: epath.Path) -> None:
  """Deletes a temporary file; a failure here must not hide the first one."""
  try:
    path.unlink(missing_ok=True)
  except OSError:
    pass


def save(path: str | os.PathLike, tree: Any) -> None:
  """Writes `tree` to `path` atomically (see `write_atomic`)."""
  write_atomic(path, dumps(tree))


def load(path: str | os.PathLike) -> Any:
  """Reads a checkpoint written by `save`; CheckpointError if unusable."""
  path = epath.Path(path)
  try:
    raw = path.read_bytes()
  except FileNotFoundError:
    raise CheckpointError(f'checkpoint {path} does not exist') from None
  return loads(raw, str(path))


def exists(path: str | os.PathLike) -> bool:
  return epath.Path(path).exists()


def unflatten_like(template: Any, leaves: list[Any], name: str) -> Any:
  """Rebuilds a pytree with `template`'s structure from saved leaves.

  Raises:
    CheckpointError: the number or shapes of the leaves do not match, e.g. a
      checkpoint of another network architecture.
  """
  t_leaves, treedef = jax.tree.flatten(template)
  if len(t_leaves) != len(leaves):
    raise CheckpointError(
      f'{name}: checkpoint has {len(leaves)} arrays, the model has '
      f'{len(t_leaves)} (was it written with another config?)'
    )
  # The template's leaves may be arrays or `jax.ShapeDtypeStruct`s.
  shape = lambda t: tuple(t.shape) if hasattr(t, 'shape') else np.shape(t)
  dtype = lambda t: t.dtype if hasattr(t, 'dtype') else np.asarray(t).dtype
  for i, (t, leaf) in enumerate(zip(t_leaves, leaves)):
    if shape(t) != np.shape(leaf):
      raise CheckpointError(
        f'{name}: array {i} has shape {np.shape(leaf)} in the checkpoint, '
        f'{shape(t)} in the model (was it written with another config?)'
      )
  return jax.tree.unflatten(
    treedef, [np.asarray(x, dtype(t)) for t, x in zip(t_leaves, leaves)]
  )
