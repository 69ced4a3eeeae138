"""The entities of one file's text (code/entities.py), checked against rows written by hand from
the sources below: which definitions are rows, their kinds, ids and spans, what a file that
does not decode or parse leaves."""

from __future__ import annotations

import logging

import pytest

from duckscore.code.entities import Entity, file_entities, line_count, source_entities

# line numbers matter: each expected span below was counted on this text
SHAPES = '''\
"""A module."""
import functools


@functools.total_ordering
class Shape:
    """A shape."""

    sides = 0

    def __init__(self, name):
        def helper():
            return name

        self.name = helper()

    @property
    def area(self):
        return 0

    async def draw(self):
        class Pen:
            pass

        return Pen

    if True:
        def maybe(self):
            return 1

    class Inner:
        def hidden(self):
            return 2


def outer(x):
    def inner():
        return x

    return inner


async def fetch():
    return None


try:
    import fast
except ImportError:
    def fast():
        return 0

if True:
    class Late: pass

lam = lambda: 0
def twice():
    return 1


def twice():
    return 2
'''
PATH = "pkg/shapes.py"
# (kind, qualified_name, module_id, entity_id, start_line, end_line), by hand
SHAPES_ROWS = [
    ("file", "", None, "pkg/shapes.py", 1, 62),
    ("class", "Shape", "pkg/shapes.py:Shape", "pkg/shapes.py:Shape", 6, 33),  # decorator: 5
    ("method", "Shape.__init__", "pkg/shapes.py:Shape", "pkg/shapes.py:Shape.__init__", 11, 15),
    ("method", "Shape.area", "pkg/shapes.py:Shape", "pkg/shapes.py:Shape.area", 18, 19),
    ("method", "Shape.draw", "pkg/shapes.py:Shape", "pkg/shapes.py:Shape.draw", 21, 25),
    ("method", "Shape.maybe", "pkg/shapes.py:Shape", "pkg/shapes.py:Shape.maybe", 28, 29),
    ("function", "outer", "pkg/shapes.py:outer", "pkg/shapes.py:outer", 36, 40),
    ("function", "fetch", "pkg/shapes.py:fetch", "pkg/shapes.py:fetch", 43, 44),
    ("function", "fast", "pkg/shapes.py:fast", "pkg/shapes.py:fast", 50, 51),
    ("class", "Late", "pkg/shapes.py:Late", "pkg/shapes.py:Late", 54, 54),
    ("function", "twice", "pkg/shapes.py:twice", "pkg/shapes.py:twice", 57, 58),
    ("function", "twice", "pkg/shapes.py:twice", "pkg/shapes.py:twice", 61, 62),
]


def shown(rows: list[Entity]) -> list[tuple[object, ...]]:
    return [
        (r.kind, r.qualified_name, r.module_id, r.entity_id, r.start_line, r.end_line) for r in rows
    ]


def test_classes_methods_and_functions_of_the_module_scope_with_their_spans() -> None:
    rows = file_entities(SHAPES, PATH)
    assert shown(rows) == SHAPES_ROWS
    assert {r.revision for r in rows} == {None} and {r.file_path for r in rows} == {PATH}


def test_nested_definitions_are_not_rows_their_lines_are_their_encloser() -> None:
    names = {r.qualified_name for r in file_entities(SHAPES, PATH)}
    for nested in ("helper", "Pen", "Inner", "Inner.hidden", "Shape.Inner", "inner", "lam"):
        assert nested not in names and f"Shape.{nested}" not in names


def test_the_revision_is_every_rows_and_the_bytes_decode_as_python_reads_them() -> None:
    rows = source_entities(SHAPES.encode(), PATH, "abc123")
    assert shown(rows) == SHAPES_ROWS and {r.revision for r in rows} == {"abc123"}
    latin = "# -*- coding: latin-1 -*-\nclass Caf\xe9:\n    def r\xf4le(self):\n        pass\n"
    rows = source_entities(latin.encode("latin-1"), "caf\xe9.py")
    assert shown(rows) == [
        ("file", "", None, "caf\xe9.py", 1, 4),
        ("class", "Caf\xe9", "caf\xe9.py:Caf\xe9", "caf\xe9.py:Caf\xe9", 2, 4),
        ("method", "Caf\xe9.r\xf4le", "caf\xe9.py:Caf\xe9", "caf\xe9.py:Caf\xe9.r\xf4le", 3, 4),
    ]


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", 1),
        ("x = 1", 1),
        ("x = 1\n", 1),
        ("x = 1\ny = 2", 2),
        ("a\r\nb\r\n", 2),
        ("a\rb\r", 2),
        ("a\n\n", 2),
        ("a\x0cb\n", 1),
    ],
)
def test_the_file_row_spans_every_line_as_python_counts_them(text: str, lines: int) -> None:
    assert line_count(text) == lines
    assert shown(file_entities(text, "a.py")) == [("file", "", None, "a.py", 1, lines)]


def test_crlf_sources_keep_their_spans() -> None:
    rows = file_entities(SHAPES.replace("\n", "\r\n"), PATH)
    assert shown(rows) == SHAPES_ROWS


@pytest.mark.parametrize(
    ("data", "revision", "where"),
    [
        (b"x = 1\n\ndef f(:\n    pass\n", None, "broken.py:3: does not parse"),
        (b"x = 1\n\ndef f(:\n    pass\n", "v1", "v1:broken.py:3: does not parse"),
        (b"x = 1\ny = 2\nz = '\xff'\n", None, "broken.py:3: does not decode"),
        (b"x = 1\0\n", None, "broken.py:1: does not parse"),
    ],
)
def test_a_file_that_does_not_parse_is_a_file_row_and_a_warning_naming_it(
    data: bytes, revision: str | None, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="duckscore"):
        rows = source_entities(data, "broken.py", revision)
    assert [(r.kind, r.entity_id, r.start_line, r.end_line, r.revision) for r in rows] == [
        ("file", "broken.py", 1, data.count(b"\n"), revision)
    ]
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith(where) and warning.endswith(
        "kept as a file row, its entities unknown"
    )
    assert "\n" not in warning
