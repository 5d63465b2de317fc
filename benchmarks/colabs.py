"""Runs each notebook in colabs/ and prints its run time as JSON lines.

  python benchmarks/colabs.py [--notebooks quickstart value_learners ...]

Prints {"notebook", "wall_s", "kernel_cpu_s"} per notebook: wall seconds
from kernel start to the last cell, and the CPU seconds the kernel used (on
a shared machine the second is the steadier number).
"""

import argparse
import json
import pathlib
import resource
import tempfile
import time

import nbclient
import nbformat

COLABS = pathlib.Path(__file__).resolve().parents[1] / 'colabs'


def _children_cpu_s() -> float:
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--notebooks', nargs='*', default=None)
  args = parser.parse_args()
  paths = sorted(COLABS.glob('*.ipynb'))
  if args.notebooks:
    paths = [p for p in paths if p.stem in args.notebooks]
  for path in paths:
    book = nbformat.read(path, as_version=4)
    cpu, start = _children_cpu_s(), time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
      nbclient.NotebookClient(
        book, timeout=900, resources={'metadata': {'path': work}}
      ).execute()
    print(
      json.dumps(
        {
          'notebook': path.name,
          'wall_s': round(time.perf_counter() - start, 1),
          'kernel_cpu_s': round(_children_cpu_s() - cpu, 1),
        }
      ),
      flush=True,
    )


if __name__ == '__main__':
  main()
