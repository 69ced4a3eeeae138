"""Test helpers: fixture paths, a tolerant, null-safe value comparison, the one rule for a
component a test needs (missing, it skips — but in CI, where .ci/run installs it, it fails), and
the check that user text shows in an HTML report as text, never as markup."""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SCIFACT = FIXTURES / "scifact"
# the integrations' tools, each in its own environment (`make integrations`)
DBT = ROOT / ".venv-dbt" / "bin" / "dbt"
PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"


def in_ci() -> bool:
    """Any truthy CI variable (.ci/run sets CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def need(available: bool, what: str) -> None:
    """Skip without `what` — but in CI, where .ci/run installs it, fail."""
    if not available:
        if in_ci():
            pytest.fail(f"{what} is missing in CI (.ci/run installs it)")
        pytest.skip(f"{what} is not installed")


def need_module(name: str) -> ModuleType:
    """The module `name` (pyspark, psycopg, ranx: the test extra's), imported — or a skip (a
    failure in CI). Never pytest.importorskip, which skips in CI too."""
    need(importlib.util.find_spec(name) is not None, f"the Python package {name}")
    return importlib.import_module(name)


def need_tool(tool: Path) -> Path:
    """`tool`, one of the integrations' (DBT, PHOENIX), or a skip (a failure in CI)."""
    need(tool.is_file(), f"{tool.relative_to(ROOT)} (`make integrations`)")
    return tool


def same_value(actual: Any, expected: Any, tol: float = 1e-12) -> bool:
    """Null-safe equality with a relative/absolute tolerance for floats."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, float) or isinstance(actual, float):
        return math.isclose(float(actual), float(expected), rel_tol=tol, abs_tol=tol)
    return actual == expected


# the markup of duckscore's HTML reports: anything else in a page came from the data
REPORT_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "b", "code",
               "div", "table", "thead", "tbody", "tr", "th", "td", "img"}  # fmt: skip
REPORT_ATTRIBUTES = {"lang", "charset", "class", "alt", "src"}


def hostile(where: str) -> str:
    """Text that is markup unless escaped, naming where it was put."""
    return f'<script>alert("{where}")</script>"><img src=x onerror=alert(1)> {where}'


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def assert_shown_as_text(page: str, texts: list[str], images: int) -> None:
    """Each of `texts` is in the page's text (escaped: shown, not parsed), the page's markup is
    the reports' own, and its only images are its `images` embedded PNGs."""
    parsed = _Page()
    parsed.feed(page)
    parsed.close()
    assert {tag for tag, _ in parsed.tags} <= REPORT_TAGS, parsed.tags
    assert {name for _, attrs in parsed.tags for name in attrs} <= REPORT_ATTRIBUTES
    sources = [attrs["src"] or "" for tag, attrs in parsed.tags if tag == "img"]
    assert len(sources) == images and all(
        s.startswith("data:image/png;base64,") for s in sources
    ), sources
    shown = "".join(parsed.text)
    assert [t for t in texts if t not in shown] == []


def documented_keys(page: str, opening: str) -> list[str]:
    """The keys a report's page documents, in its order: the `names` of the paragraph or list
    item of `page` (under ROOT) that starts with `opening`, after its first colon, outside any
    parentheses (which describe a key's contents)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    start = text.index(opening)
    ends = [i for i in (text.find("\n\n", start), text.find("\n- ", start)) if i != -1]
    listing = text[start : min(ends, default=len(text))].split(":", 1)[1]
    depth, outside = 0, []
    for char in listing:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char != ")":
            outside.append(char)
    return "".join(outside).split("`")[1::2]
