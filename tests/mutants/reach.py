"""Which tests render which line of a template, so a mutant runs only the tests that can see it.

The reach pass runs a selection once against templates whose plain SQL lines each end in a
comment `/*@reach:TEMPLATE:LINE*/` (`marked`); `reach_plugin.py` records, per test, the markers
in everything it rendered. A mutant confined to marked lines changes only text that arrives in
the rendered SQL together with their markers, so a test that rendered none of them ran the same
SQL under the mutant and cannot kill it: the mutant runs only the tests that did (none: it
survives without a run). A line is marked only when its end is plain SQL (not inside a string,
a comment or a Jinja tag) and it holds no `{% %}` tag: a branch opened or closed on the line, a
loop or a `set` could change what else is rendered, so a mutant touching such a line runs the
whole selection, as do tests that failed in the reach pass or started a subprocess (their
renders are not all seen).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .scan import SQL, scan

MARKER = re.compile(r"/\*@reach:(?P<template>[^:*]+):(?P<line>\d+)\*/")
_BLOCK_TAG = re.compile(r"\{%|%\}")


def marked_lines(text: str) -> set[int]:
    """The 1-based lines of `text` that get a marker."""
    kinds = scan(text).kinds
    found: set[int] = set()
    start = 0
    for number, line in enumerate(text.split("\n"), start=1):
        end = start + len(line)
        if (
            end < len(text)
            and kinds[end] == SQL
            and not _BLOCK_TAG.search(line)
            and any(k == SQL and not c.isspace() for k, c in zip(kinds[start:end], line))
        ):
            found.add(number)
        start = end + 1
    return found


def marked(template: str, text: str) -> str:
    """`text` with a marker at the end of each marked line (line numbers unchanged)."""
    lines = text.split("\n")
    for number in marked_lines(text):
        lines[number - 1] += f"/*@reach:{template}:{number}*/"
    return "\n".join(lines)


def markers_in(rendered: str) -> set[str]:
    return {f"{m['template']}:{m['line']}" for m in MARKER.finditer(rendered)}


@dataclass
class Reach:
    """A reach pass's record: each test's markers, in the selection's order, and the tests
    whose record is incomplete (they run for every mutant)."""

    tests: dict[str, set[str]] = field(default_factory=dict)
    always: set[str] = field(default_factory=set)

    @classmethod
    def read(cls, path: Path) -> Reach:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls({t: set(m) for t, m in data["tests"].items()}, set(data["always"]))

    def write(self, path: Path) -> None:
        data = {
            "tests": {t: sorted(m) for t, m in self.tests.items()},
            "always": sorted(self.always),
        }
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")

    def tests_for(self, template: str, lines: Iterable[int]) -> list[str]:
        """The tests that rendered any of these lines of `template`, or must always run."""
        wanted = {f"{template}:{n}" for n in lines}
        return [t for t, seen in self.tests.items() if t in self.always or seen & wanted]


def edited_lines(line: int, original: str) -> range:
    """The lines a mutant's edit spans, from its first line and the text it replaces."""
    return range(line, line + original.count("\n") + 1)
