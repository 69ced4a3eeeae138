"""A plain-Python reference for a bid query's §3 steps under bid_v3/bid_v4, written from
docs/bids.md (step 1 of "What bid_v1 computes", "What bid_v3 adds", "What bid_v4 adds"), not
from the SQL: normalisation, the one-pass dictionary rewrite, §3.2's constraints (the query's
and its tender's fields), the §3.3 rewrite guard, the expression compression and its guard, and
the three constraint filters on a chunk's text."""

from __future__ import annotations

import datetime
import re
from collections import Counter
from decimal import Decimal

SPACES = "\t\n\f\r "  # what RE2's \s is
WORD = re.compile(r"[A-Za-z0-9_]")
SEPARATORS = ",;!?、。"
DATE = re.compile(
    r"(\d{4})年(\d{1,2})月(\d{1,2})日|(\d{4})-(\d{1,2})-(\d{1,2})|(\d{4})/(\d{1,2})/(\d{1,2})"
    r"|(\d{4})\.(\d{1,2})\.(\d{1,2})",
    re.ASCII,
)
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?[万亿]?", re.ASCII)


def fold(text: str) -> str:
    """Full-width ASCII and the ideographic space to ASCII, lower case, single spaces."""
    out = "".join(
        chr(ord(ch) - 0xFEE0) if 0xFF01 <= ord(ch) <= 0xFF5E else " " if ch == "\u3000" else ch
        for ch in text
    ).lower()
    return re.sub(f"[{SPACES}]+", " ", out).strip(SPACES)


def _date(match: re.Match[str]) -> str:
    year, month, day = (int(g) for g in match.groups() if g is not None)
    try:
        return datetime.date(year, month, day).isoformat()
    except ValueError:
        return match.group(0)


def _number(text: str) -> str:
    """Separators gone; a 万 or 亿 multiplied out exactly; trailing decimal zeros gone (leading
    zeros stay, as written, unless multiplied)."""
    factor = {"万": Decimal(10_000), "亿": Decimal(100_000_000)}.get(text[-1])
    digits = text.rstrip("万亿").replace(",", "")
    value = format(Decimal(digits) * factor, "f") if factor else digits
    return value.rstrip("0").rstrip(".") if "." in value else value


def tokens(folded: str) -> list[tuple[str, str]]:
    """(text, kind) left to right: a date, a number, or one character."""
    found, i = [], 0
    while i < len(folded):
        if date := DATE.match(folded, i):
            found.append((_date(date), "date"))
            i = date.end()
        elif number := NUMBER.match(folded, i):
            found.append((_number(number.group(0)), "number"))
            i = number.end()
        else:
            found.append((folded[i], "text"))
            i += 1
    return found


def norm(text: str) -> str:
    return "".join(t for t, _ in tokens(fold(text)))


def hard(text: str) -> list[str]:
    """The numbers, then the dates, among a text's tokens: a query's constraints are its folded
    text's, a rewrite's are its own text's, tokenised again."""
    found = tokens(text)
    return [t for t, k in found if k == "number"] + [t for t, k in found if k == "date"]


def dictionary(pairs: list[tuple[str, str]]) -> dict[str, str]:
    return {norm(term): norm(canonical) for term, canonical in pairs if norm(term)}


def rewrite(text: str, synonyms: dict[str, str]) -> tuple[str, list[str]]:
    """One left-to-right pass, the longest term first at each position; the replacements."""
    out, applied, i = [], [], 0
    while i < len(text):
        term = max((t for t in synonyms if text.startswith(t, i)), key=len, default=None)
        if term is None:
            out.append(text[i])
            i += 1
        else:
            out.append(synonyms[term])
            applied.append(f"{term} -> {synonyms[term]}")
            i += len(term)
    return "".join(out), applied


def terms(text: str, patterns: list[str]) -> list[str]:
    return sorted({t for p in patterns for t in re.findall(p, text) if t.strip()})


def lost_numbers(before: list[str], after: list[str]) -> list[str]:
    """Each of `before` past its count in `after`, in order."""
    seen: Counter[str] = Counter()
    left = Counter(after)
    lost = []
    for x in before:
        seen[x] += 1
        if seen[x] > left[x]:
            lost.append(x)
    return lost


def scope_lost(q: dict, text: str, named: str, syn: dict[str, str], patterns: list[str]) -> list:
    own = terms(text, patterns)
    dropped = [
        t
        for t in q["must_include_terms"] + q["must_exclude_terms"]
        if t not in own and rewrite(t, syn)[0] not in own
    ]
    return dropped + [e for e in q["entity_constraints"] if e not in named]


def _at(text: str, i: int, phrase: str) -> bool:
    if not text.startswith(phrase, i):
        return False
    end = i + len(phrase)
    before = not WORD.match(phrase[0]) or i == 0 or not WORD.match(text[i - 1])
    after = not WORD.match(phrase[-1]) or end == len(text) or not WORD.match(text[end])
    return before and after


def without_fillers(text: str, fillers: list[str]) -> tuple[str, list[str]]:
    phrases = sorted({fold(f) for f in fillers}, key=lambda f: (-len(f), f))
    out, removed, i = [], [], 0
    while i < len(text):
        phrase = next((f for f in phrases if _at(text, i, f)), None)
        if phrase is None:
            out.append(text[i])
            i += 1
        else:
            removed.append(phrase)
            i += len(phrase)
    return "".join(out), removed


def compress(text: str, fillers: list[str]) -> tuple[str, list[str], list[str]]:
    """(compressed text, fillers removed, duplicate terms dropped)."""
    text, removed = without_fillers(text, fillers)
    gap = set(SPACES + SEPARATORS)
    runs = [
        m.group(0)
        for m in re.finditer(
            f"[{re.escape(SPACES + SEPARATORS)}]+|[^{re.escape(SPACES + SEPARATORS)}]+", text
        )
    ]
    kept: list[str] = []
    seen: set[str] = set()
    duplicates = []
    for run in runs:
        if run[0] in gap:
            kept.append(run)
        elif run in seen:
            duplicates.append(run)
            kept.pop()  # the gap before it
        else:
            seen.add(run)
            kept.append(run)
    squeezed = "".join(_squeezed(run) if run[0] in gap else run for run in kept)
    return squeezed.strip(SPACES + SEPARATORS), removed, duplicates


def _squeezed(gap: str) -> str:
    """A run of spaces and separators: its first separator, and a space if it held one; else
    one space."""
    marks = [ch for ch in gap if ch in SEPARATORS]
    if not marks:
        return " "
    return marks[0] + (" " if any(ch in SPACES for ch in gap) else "")


def query(
    text: str,
    syn: dict[str, str],
    include: list[str],
    exclude: list[str],
    fields: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    fillers: list[str] | None = None,
) -> dict:
    """What queries.parquet holds for one query under bid_v3 (fillers None) or bid_v4;
    `fields`: (field, value, kind) of the tender rows that apply to it."""
    q_norm = norm(text)
    rewritten, applied = rewrite(q_norm, syn)
    q = {
        "query_norm": q_norm,
        "entity_constraints": sorted({c for t, c in syn.items() if t in q_norm or c in q_norm}),
        "must_include_terms": terms(q_norm, include),
        "must_exclude_terms": terms(q_norm, exclude),
    }
    patterns = include + exclude
    constraints = hard(fold(text))
    numbers = lost_numbers(constraints, hard(rewritten))
    scope = scope_lost(q, rewritten, rewritten, syn, patterns)
    if numbers:
        q["rewrite_reason"] = f"refused: changes hard constraints ({', '.join(numbers)})"
    elif scope:
        q["rewrite_reason"] = f"refused: widens the authorised scope (drops {', '.join(scope)})"
    else:
        q["rewrite_reason"] = "synonyms: " + "; ".join(applied) if applied else "no rewrite"
    if numbers or scope:
        rewritten = q_norm
    q["rewritten_query"] = rewritten
    if fillers is not None:
        compressed, removed, duplicates = compress(rewritten, fillers)
        lost = lost_numbers(constraints, hard(compressed)) + scope_lost(
            q, compressed, rewrite(compressed, syn)[0], syn, patterns
        )
        parts = [
            f"{name} ({', '.join(sorted(set(found)))})"
            for name, found in (("fillers", removed), ("duplicate terms", duplicates))
            if found
        ]
        q["uncompressed_query"] = rewritten
        if lost:
            q["compression_reason"] = f"refused: drops a constraint ({', '.join(lost)})"
        elif compressed == rewritten:
            q["compression_reason"] = "no compression"
        else:
            q["compression_reason"] = "compressed: " + (
                "; ".join(parts) or "spaces and punctuation"
            )
        q["rewritten_query"] = rewritten if lost else compressed
        q["uncompressed_length"] = len(rewritten)
        q["rewritten_length"] = len(q["rewritten_query"])
    canon = {"entity": [], "must_include": [], "must_exclude": []}
    for _, value, kind in fields:
        v = norm(value)
        canon[kind].append(rewrite(v, syn)[0])
        if kind != "entity":
            q[f"{kind}_terms"] = sorted(set(q[f"{kind}_terms"]) | {v})
    q["entity_constraints"] = sorted(set(q["entity_constraints"]) | set(canon["entity"]))
    q["tender_constraints"] = [
        f"{f}: {v} ({k})" for f, v, k in sorted((f, norm(v), k) for f, v, k in fields)
    ]
    q["_include"] = [rewrite(t, syn)[0] for t in terms(q_norm, include)] + canon["must_include"]
    q["_exclude"] = [rewrite(t, syn)[0] for t in terms(q_norm, exclude)] + canon["must_exclude"]
    return q


def dropped_by(q: dict, chunk_text: str, syn: dict[str, str]) -> str | None:
    """The first §3.2 filter a chunk of the query's tenant fails (docs/bids.md, bid_v3)."""
    chunk = rewrite(norm(chunk_text), syn)[0]
    if any(e not in chunk for e in q["entity_constraints"]):
        return "entity_constraints"
    if any(t not in chunk for t in q["_include"]):
        return "must_include_terms"
    if any(t in chunk for t in q["_exclude"]):
        return "must_exclude_terms"
    return None
