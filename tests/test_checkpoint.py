"""Tests for trax_rl.checkpoint."""

import collections
import os
import pickle

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from trax_rl import checkpoint


def test_round_trip(tmp_path):
  tree = {
    'a': jnp.arange(3.0),
    'b': (1, [np.int32(4), None]),
    'c': 'x',
    'd': np.zeros((2, 0)),
    'e': np.ones(2, ml_dtypes.bfloat16),
    'big': 2**100,
  }
  checkpoint.save(tmp_path / 'c.pkl', tree)
  out = checkpoint.load(tmp_path / 'c.pkl')
  np.testing.assert_array_equal(out['a'], [0.0, 1.0, 2.0])
  assert out['a'].dtype == np.float32
  assert out['b'][0] == 1 and out['b'][1][0] == 4 and out['b'][1][1] is None
  assert out['c'] == 'x' and out['d'].shape == (2, 0)
  assert out['e'].dtype == ml_dtypes.bfloat16 and out['big'] == 2**100


def test_save_replaces_atomically_and_leaves_no_temp_files(tmp_path):
  path = tmp_path / 'c.pkl'
  checkpoint.save(path, {'v': 1})
  checkpoint.save(path, {'v': 2})
  assert checkpoint.load(path) == {'v': 2}
  assert os.listdir(tmp_path) == ['c.pkl']


def test_object_values_are_rejected(tmp_path):
  with pytest.raises(TypeError):
    checkpoint.save(tmp_path / 'c.pkl', {'f': lambda: 0})
  assert not (tmp_path / 'c.pkl').exists()


@pytest.mark.parametrize(
  'content, message',
  [
    (b'', 'empty'),
    (b'garbage bytes', 'corrupt'),
    (pickle.dumps({'format': 'other', 'data': 1}), 'not a trax_rl'),
    (
      pickle.dumps({'format': checkpoint.FORMAT, 'version': 99, 'data': 1}),
      'version 99',
    ),
  ],
)
def test_bad_files(tmp_path, content, message):
  path = tmp_path / 'c.pkl'
  path.write_bytes(content)
  with pytest.raises(checkpoint.CheckpointError, match=message):
    checkpoint.load(path)


def test_truncated_file(tmp_path):
  path = tmp_path / 'c.pkl'
  checkpoint.save(path, {'a': np.arange(1000)})
  raw = path.read_bytes()
  path.write_bytes(raw[: len(raw) // 2])
  with pytest.raises(checkpoint.CheckpointError, match='corrupt or truncated'):
    checkpoint.load(path)


def test_missing_file(tmp_path):
  with pytest.raises(checkpoint.CheckpointError, match='does not exist'):
    checkpoint.load(tmp_path / 'none.pkl')


class _Exploit:
  def __reduce__(self):
    return (os.system, ('touch /tmp/trax_rl_pwned',))


def test_pickle_that_runs_code_is_refused(tmp_path):
  path = tmp_path / 'c.pkl'
  path.write_bytes(
    pickle.dumps(
      {'format': checkpoint.FORMAT, 'version': 1, 'data': _Exploit()}
    )
  )
  with pytest.raises(checkpoint.CheckpointError, match='refusing'):
    checkpoint.load(path)
  # Even a plain numpy pickle is refused: only plain values are admitted.
  path.write_bytes(pickle.dumps(np.arange(3)))
  with pytest.raises(checkpoint.CheckpointError):
    checkpoint.load(path)


def test_unflatten_like_checks_structure():
  Pair = collections.namedtuple('Pair', 'x y')
  template = Pair(np.zeros(2), {'w': np.zeros((2, 3))})
  out = checkpoint.unflatten_like(
    template, [np.ones(2), np.ones((2, 3))], 'net'
  )
  assert isinstance(out, Pair)
  with pytest.raises(checkpoint.CheckpointError, match='has 1 arrays'):
    checkpoint.unflatten_like(template, [np.ones(2)], 'net')
  with pytest.raises(checkpoint.CheckpointError, match='shape'):
    checkpoint.unflatten_like(template, [np.ones(2), np.ones((3, 3))], 'net')
