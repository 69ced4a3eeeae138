"""What each character of a Jinja-templated SQL file is: SQL code, Jinja code, or text no
mutation may touch (comments, string literals, quoted identifiers, Jinja delimiters).

The mutation operators of `catalogue.py` match only inside code, so a mutant never edits a
comment, a regular expression in a string or the `-` of `{%-`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

SQL, JINJA, SKIP = "s", "j", "-"
_OPEN = re.compile(r"\{\{[-+]?|\{%[-+]?")
_CLOSE = {"{{": re.compile(r"[-+]?\}\}"), "{%": re.compile(r"[-+]?%\}")}


@dataclass(frozen=True)
class Scanned:
    text: str
    kinds: str  # one of SQL, JINJA, SKIP per character of text

    def is_code(self, start: int, end: int, kinds: str) -> bool:
        """Whether text[start:end] is all of the given kinds (e.g. SQL, or SQL + JINJA)."""
        return start < end and all(k in kinds for k in self.kinds[start:end])

    def matches(self, pattern: re.Pattern[str], kinds: str) -> Iterator[re.Match[str]]:
        """The matches of `pattern` lying wholly inside code of the given kinds."""
        for match in pattern.finditer(self.text):
            if self.is_code(match.start(), match.end(), kinds):
                yield match


def _quoted_end(text: str, start: int, quote: str, doubled: bool) -> int:
    """The index after a string opened at text[start] (SQL doubles a quote; Jinja escapes it)."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\" and not doubled:
            i += 2
            continue
        if text[i] == quote:
            if doubled and text[i + 1 : i + 2] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return len(text)


def _jinja_end(text: str, start: int, kinds: list[str], opener: str) -> int:
    """Mark Jinja code from `start` to its closing delimiter; return the index after it."""
    close = _CLOSE[opener]
    i = start
    while i < len(text):
        if text[i] in "'\"":
            end = _quoted_end(text, i, text[i], doubled=False)
            kinds[i:end] = SKIP * (end - i)
            i = end
            continue
        found = close.match(text, i)
        if found:
            kinds[i : found.end()] = SKIP * (found.end() - i)
            return found.end()
        kinds[i] = JINJA
        i += 1
    return i


def scan(text: str) -> Scanned:
    kinds = [SQL] * len(text)
    i = 0
    while i < len(text):
        if text.startswith("{#", i):
            end = text.find("#}", i)
            end = len(text) if end < 0 else end + 2
        elif opened := _OPEN.match(text, i):
            kinds[i : opened.end()] = SKIP * (opened.end() - i)
            i = _jinja_end(text, opened.end(), kinds, opened.group()[:2])
            continue
        elif text.startswith("--", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i)
            end = len(text) if end < 0 else end + 2
        elif text[i] in "'\"":
            end = _quoted_end(text, i, text[i], doubled=True)
        else:
            i += 1
            continue
        kinds[i:end] = SKIP * (end - i)
        i = end
    return Scanned(text, "".join(kinds))
