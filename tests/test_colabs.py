"""Every notebook in colabs/ runs from top to bottom (on CPU here)."""

import pathlib
import time

import nbclient
import nbformat
import pytest

COLABS = pathlib.Path(__file__).resolve().parents[1] / 'colabs'
NOTEBOOKS = sorted(COLABS.glob('*.ipynb'))


def test_the_four_notebooks_are_there():
  names = {p.stem for p in NOTEBOOKS}
  assert {'quickstart', 'value_learners', 'custom_agent', 'accelerators'} <= (
    names
  )


@pytest.mark.parametrize('path', NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
  book = nbformat.read(path, as_version=4)
  first_code = next(c for c in book.cells if c.cell_type == 'code')
  # The Colab install cell, harmless elsewhere.
  assert "'google.colab' in sys.modules" in first_code.source
  start = time.perf_counter()
  nbclient.NotebookClient(
    book,
    timeout=600,
    kernel_name='python3',
    resources={'metadata': {'path': str(tmp_path)}},
  ).execute()
  elapsed = time.perf_counter() - start
  print(f'{path.name}: {elapsed:.1f} s')
  errors = [
    o
    for c in book.cells
    if c.cell_type == 'code'
    for o in c.get('outputs', [])
    if o.get('output_type') == 'error'
  ]
  assert not errors
