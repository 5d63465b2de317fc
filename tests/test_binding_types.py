"""binding_types: a gin value against its knob's annotation."""

from collections.abc import Callable, Sequence

import pytest

from trax_rl import binding_types


@pytest.mark.parametrize(
  'value, annotation',
  [
    (3, float),
    (3, int | None),
    (None, int | None),
    ((64, 64), Sequence[int]),
    ([1, 2], tuple[int, ...]),
    ((1, 'a'), tuple[int, str]),
    (len, Callable[[], float]),
    (0.5, float | Callable[[], float]),
    ('relu', str),
    (object(), 'unresolved'),  # Not understood: passes.
  ],
)
def test_accepted(value, annotation):
  assert binding_types.mismatch(value, annotation) is None


@pytest.mark.parametrize(
  'value, annotation, wanted',
  [
    (64, Sequence[int], 'Sequence[int]'),
    (None, float, 'float'),
    (1.5, int, 'int'),
    (True, int, 'int'),
    ('64', Sequence[int], 'Sequence[int]'),
    ((1, 2, 3), tuple[int, int], 'tuple[int, int]'),
    (0.5, Callable[[], float], 'Callable'),
    ('x', int | None, 'int | None'),
  ],
)
def test_refused(value, annotation, wanted):
  assert wanted in binding_types.mismatch(value, annotation)


def test_annotation_along_the_mro():
  class Base:
    def __init__(self, width: int = 1):
      pass

  class Child(Base):
    def __init__(self, colour: str = 'red', **kwargs):
      super().__init__(**kwargs)

  assert binding_types.annotation_of(Child, 'width') is int
  assert binding_types.annotation_of(Child, 'colour') is str
