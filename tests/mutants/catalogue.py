"""The mutation operators over a SQL template's text, and the mutants of a template.

Each operator yields (start, end, replacement) edits of the original text, matched only in code
(`scan.py`): SQL operators in SQL, Jinja's in Jinja. A mutant is one edit. Its id is stable
across unrelated edits of the file: template, operator, and a digest of the edited line's text,
the matched text and its place among identical matches on identical lines (not a line number).

Operators (see docs/testing.md, "Mutation testing"):
  relop     <  <=  >  >=  =  <>  (SQL), ==  != < <= > >= (Jinja): each to its neighbour
  arith     binary + - * /: + and - swapped, * and / swapped
  logic     AND / OR swapped (not BETWEEN's AND); Jinja's and / or
  isnull    IS NULL / IS NOT NULL swapped
  num       a numeric literal n (SQL or Jinja) to n + 1
  order     ASC / DESC, NULLS FIRST / NULLS LAST swapped
  tiebreak  one key after the first dropped from an ORDER BY
  coalesce  a COALESCE's last argument (its default) dropped
  case      a one-WHEN CASE's THEN and ELSE swapped; one WHEN of several dropped
  param     a bound value `{{ expr | lit }}` not bound: the constant 1.0 instead
  cond      a Jinja {% if %} / {% elif %} / `a if c else b` condition made true, or false
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import jinja2

from .scan import JINJA, SQL, Scanned, scan

Edit = tuple[int, int, str]

_RELOP = re.compile(r"->>|->|=>|:=|<<|>>|==|<=|>=|<>|!=|<|>|=")
_SQL_RELOP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "=": "<>", "<>": "=", "!=": "="}
_JINJA_RELOP = {"==": "!=", "!=": "==", "<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_ARITH = re.compile(r"[-+*/]")
_ARITH_SWAP = {"+": "-", "-": "+", "*": "/", "/": "*"}
_UNARY_AFTER = {
    "select", "then", "else", "when", "and", "or", "not", "by", "return", "case", "in", "is",
    "between", "where", "on", "if", "elif", "distinct", "as",
}  # fmt: skip
_STAR_BEFORE = re.compile(r"\s*(FROM|EXCLUDE|REPLACE|,|\))", re.IGNORECASE)
_OPERAND_END = re.compile(r"[\w)\]}'\"]")
_OPERAND_START = re.compile(r"[\w(\[{'\".]")
_LOGIC_SQL = re.compile(r"\b(AND|OR|BETWEEN)\b")
_LOGIC_JINJA = re.compile(r"\b(and|or)\b")
_ISNULL = re.compile(r"\bIS\s+(NOT\s+)?NULL\b")
_NUMBER = re.compile(r"(?<![\w.$])\d+(\.\d+)?(?![\w.])")
_ORDER = re.compile(r"\b(ASC|DESC|NULLS FIRST|NULLS LAST)\b")
_ORDER_SWAP = {
    "ASC": "DESC",
    "DESC": "ASC",
    "NULLS FIRST": "NULLS LAST",
    "NULLS LAST": "NULLS FIRST",
}
_ORDER_BY = re.compile(r"\bORDER BY\b")
_ORDER_STOP = re.compile(r"\s*\b(ROWS|RANGE|LIMIT|OFFSET|QUALIFY|FROM|WHERE|GROUP|HAVING|WINDOW)\b")
_COALESCE = re.compile(r"\bcoalesce\(", re.IGNORECASE)
_CASE_WORD = re.compile(r"\b(CASE|WHEN|THEN|ELSE|END)\b")
_LIT_OUTPUT = re.compile(r"\{\{-?\s*(?P<expr>[^{}]+?)\s*(\|\s*(float|int)\s*)?\|\s*lit\s*-?\}\}")
_LIT_SET = re.compile(r"\{%-?\s*set\s+\w+\s*=\s*(?P<expr>[^{}%]+?)\s*\|\s*lit\s*-?%\}")
_LITERAL = re.compile(r"\(?\s*(-?\d+(\.\d+)?|'[^']*'|\"[^\"]*\"|true|false|none)\s*\)?")
_IF_STATEMENT = re.compile(r"\{%[-+]?\s*(if|elif)\s+(?P<cond>.+?)\s*[-+]?%\}", re.DOTALL)
_IF_INLINE = re.compile(r"\bif\s+(?P<cond>[^{}%]+?)\s+else\b")
UNBOUND = "{{ 1.0 | lit }}"


@dataclass(frozen=True)
class Mutant:
    id: str
    template: str  # relative to sql/, e.g. fuse/fused.sql
    operator: str
    line: int  # 1-based, where the edit starts (informative: ids do not use it)
    original: str
    replacement: str
    text: str  # the whole mutated template

    @property
    def capability(self) -> str:
        return self.template.split("/", 1)[0]

    def describe(self) -> str:
        return f"{self.template}:{self.line} {self.operator}: {self.original!r} -> {self.replacement!r}"


def _relop(s: Scanned) -> Iterator[Edit]:
    for kinds, table in ((SQL, _SQL_RELOP), (JINJA, _JINJA_RELOP)):
        for m in s.matches(_RELOP, kinds):
            if m.group() in table:
                yield m.start(), m.end(), table[m.group()]


def _previous_word(text: str, end: int) -> str:
    found = re.search(r"(\w+)\s*$", text[max(0, end - 40) : end])
    return found.group(1).lower() if found else ""


def _arith(s: Scanned) -> Iterator[Edit]:
    text = s.text
    for m in s.matches(_ARITH, SQL + JINJA):
        i = m.start()
        before, after = text[:i].rstrip(), text[i + 1 :].lstrip()
        if not before or not after or text[i + 1 : i + 2] in "-*/>" or text[i - 1] in "-*/.e":
            continue
        if not _OPERAND_END.match(before[-1]) or not _OPERAND_START.match(after[0]):
            continue
        if _previous_word(text, len(before)) in _UNARY_AFTER and before[-1].isalpha():
            continue
        if m.group() == "*" and (before[-1] == "(" or _STAR_BEFORE.match(text, i + 1)):
            continue
        yield i, i + 1, _ARITH_SWAP[m.group()]


def _logic(s: Scanned) -> Iterator[Edit]:
    between = False
    for m in s.matches(_LOGIC_SQL, SQL):
        word = m.group()
        if word == "BETWEEN":
            between = True
        elif word == "AND" and between:
            between = False
        else:
            yield m.start(), m.end(), "OR" if word == "AND" else "AND"
    for m in s.matches(_LOGIC_JINJA, JINJA):
        yield m.start(), m.end(), "or" if m.group() == "and" else "and"


def _isnull(s: Scanned) -> Iterator[Edit]:
    for m in s.matches(_ISNULL, SQL):
        yield m.start(), m.end(), "IS NULL" if m.group(1) else "IS NOT NULL"


def _num(s: Scanned) -> Iterator[Edit]:
    for m in s.matches(_NUMBER, SQL + JINJA):
        digits = m.group()
        if m.group(1):
            whole, fraction = digits.split(".")
            yield m.start(), m.end(), f"{int(whole) + 1}.{fraction}"
        else:
            yield m.start(), m.end(), str(int(digits) + 1)


def _order(s: Scanned) -> Iterator[Edit]:
    for m in s.matches(_ORDER, SQL):
        yield m.start(), m.end(), _ORDER_SWAP[m.group()]


def _split_arguments(s: Scanned, start: int, stop_at_line_end: bool) -> tuple[list[int], int]:
    """From `start`, the indices of top-level commas (in SQL) and where the list ends: at a `)`
    closing it, or (an ORDER BY) at a clause keyword, a Jinja statement or the line's end."""
    commas: list[int] = []
    text, depth, i = s.text, 0, start
    while i < len(text):
        char = text[i]
        if s.kinds[i] == SQL and char in "([":
            depth += 1
        elif s.kinds[i] == SQL and char in ")]":
            if depth == 0:
                return commas, i
            depth -= 1
        elif depth == 0 and stop_at_line_end and (char in "\n;" or text.startswith("{%", i)):
            return commas, i
        elif depth == 0 and stop_at_line_end and s.kinds[i] == SQL and _ORDER_STOP.match(text, i):
            if i > start and not text[i - 1].isalnum():
                return commas, i
        elif depth == 0 and char == "," and s.kinds[i] == SQL:
            commas.append(i)
        i += 1
    return commas, i


def _tiebreak(s: Scanned) -> Iterator[Edit]:
    for m in s.matches(_ORDER_BY, SQL):
        commas, end = _split_arguments(s, m.end(), stop_at_line_end=True)
        bounds = [*commas, end]
        for comma, next_bound in itertools.pairwise(bounds):
            yield comma, len(s.text[:next_bound].rstrip()), ""


def _coalesce(s: Scanned) -> Iterator[Edit]:
    for m in s.matches(_COALESCE, SQL):
        commas, end = _split_arguments(s, m.end(), stop_at_line_end=False)
        if commas and "{%" not in s.text[m.end() : end]:
            yield commas[-1], end, ""


def _case_parts(s: Scanned, start: int) -> tuple[list[tuple[str, int, int]], int] | None:
    """The top-level WHEN/THEN/ELSE words of the CASE at `start` and the index of its END."""
    words: list[tuple[str, int, int]] = []
    nesting, depth = 0, 0
    for m in _CASE_WORD.finditer(s.text, start + 4):
        if not s.is_code(m.start(), m.end(), SQL):
            continue
        segment = s.text[start : m.start()]
        depth = sum(
            (c == "(") - (c == ")")
            for c, k in zip(segment, s.kinds[start : m.start()])
            if k == SQL
        )  # fmt: skip
        word = m.group()
        if word == "CASE":
            nesting += 1
        elif word == "END" and nesting:
            nesting -= 1
        elif word == "END":
            return (words, m.start()) if "{%" not in s.text[start : m.start()] else None
        elif nesting == 0 and depth == 0:
            words.append((word, m.start(), m.end()))
    return None


def _case(s: Scanned) -> Iterator[Edit]:
    for m in re.finditer(r"\bCASE\b", s.text):
        if not s.is_code(m.start(), m.end(), SQL):
            continue
        parts = _case_parts(s, m.start())
        if parts is None:
            continue
        words, end = parts
        names = [w for w, _, _ in words]
        if names == ["WHEN", "THEN", "ELSE"]:
            (_, _, then_end), (_, else_start, else_end) = words[1], words[2]
            then_value = s.text[then_end:else_start].strip()
            else_value = s.text[else_end:end].strip()
            swapped = f" {else_value} ELSE {then_value} "
            yield then_end, end, swapped
        elif names.count("WHEN") >= 2:
            starts = [i for i, w in enumerate(names) if w == "WHEN"]
            for index in starts:
                after = [p for p in words[index + 1 :] if p[0] in ("WHEN", "ELSE")]
                branch_end = after[0][1] if after else end
                yield words[index][1], branch_end, ""


def _param(s: Scanned) -> Iterator[Edit]:
    for pattern in (_LIT_OUTPUT, _LIT_SET):
        for m in pattern.finditer(s.text):
            if s.kinds[m.start("expr")] != JINJA or _LITERAL.fullmatch(m.group("expr")):
                continue
            if pattern is _LIT_OUTPUT:
                yield m.start(), m.end(), UNBOUND
            else:
                yield m.start("expr"), m.end("expr"), "1.0"


def _cond(s: Scanned) -> Iterator[Edit]:
    for pattern in (_IF_STATEMENT, _IF_INLINE):
        for m in pattern.finditer(s.text):
            start, end = m.start("cond"), m.end("cond")
            if s.kinds[start] != JINJA:
                continue
            for value in ("true", "false"):
                yield start, end, value


OPERATORS: dict[str, Callable[[Scanned], Iterator[Edit]]] = {
    "relop": _relop,
    "arith": _arith,
    "logic": _logic,
    "isnull": _isnull,
    "num": _num,
    "order": _order,
    "tiebreak": _tiebreak,
    "coalesce": _coalesce,
    "case": _case,
    "param": _param,
    "cond": _cond,
}

_PARSER = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)


def parses(text: str) -> bool:
    """Whether a mutated template is still a Jinja template (else the mutant is stillborn)."""
    try:
        _PARSER.parse(text)
    except jinja2.TemplateSyntaxError:
        return False
    return True


def mutants(template: str, text: str) -> list[Mutant]:
    """Every mutant of `template` (its path under sql/) whose text parses, each text once."""
    scanned = scan(text)
    found: list[Mutant] = []
    seen_texts = {text}
    seen_keys: dict[str, int] = {}
    for name, operator in OPERATORS.items():
        for start, end, replacement in sorted(set(operator(scanned))):
            mutated = text[:start] + replacement + text[end:]
            touches_jinja = JINJA in scanned.kinds[start:end] or name in ("param", "cond")
            if mutated in seen_texts or (touches_jinja and not parses(mutated)):
                continue
            seen_texts.add(mutated)
            line_start = text.rfind("\n", 0, start) + 1
            line_end = text.find("\n", end)
            line_text = text[line_start : line_end if line_end >= 0 else len(text)].strip()
            key = f"{name}\0{line_text}\0{text[start:end]}\0{replacement}"
            seen_keys[key] = seen_keys.get(key, 0) + 1
            digest = hashlib.sha1(f"{key}\0{seen_keys[key]}".encode()).hexdigest()[:8]
            found.append(
                Mutant(
                    id=f"{template}:{name}:{digest}",
                    template=template,
                    operator=name,
                    line=text.count("\n", 0, start) + 1,
                    original=text[start:end],
                    replacement=replacement,
                    text=mutated,
                )
            )
    return found
