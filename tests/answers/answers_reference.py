"""Independent plain-Python reference implementation (test oracle) of the ``answer_v1`` policy.

Specification: ``docs/answers.md`` (the exact rules of ``duckscore answers``), written from
the seed ``docs/specs/001-answer-confidence.txt`` (置信度计算系统); the parameters are the
seed's, copied by hand into ``tests/answers/seed_parameters.yaml`` and frozen there (with the
English word lists of ``answer_v1_en``), never read from the packaged policies.

* §1 citation quality   = citation_count_points + citation_relevance (top-5 mean rerank score);
* §2 answer quality     = length_points + paragraph_points + conclusion_points;
* §3 retrieval recall   = retrieval_count_points + citation_rate_points;
* §4 language certainty = clamp(((base - uncertain_penalty) - vague_penalty) + assertive_bonus);
* total = w_cq*cq + w_aq*aq + w_r*r + w_c*c (left to right), percentage = 100 * total / sum(w),
  score_level by round(percentage, 6), then lowered by the streaming contradiction events.

Every rule is written out with explicit loops (no ``re``, no numpy, no pandas): the lexicon scan
is a loop over text positions and terms, the blank-line paragraph split is a loop over characters.
This module shares no code and no parameters with the production (SQL) implementation.

Points the spec leaves open, and how they are read here:

* lexicon scan: "the LONGEST term of any lexicon that matches there" — a term *matches* only when
  its word-boundary conditions hold too, so a longer term failing its boundary does not hide a
  shorter one (with the shipped word lists no text can tell the two readings apart);
* conclusion phrases with "…": the parts are the text on either side of the "…", stripped of
  the spaces beside it ("taking … into account" → ``"taking"`` and ``"into account"``, so the
  plain "taking into account" matches too, decided after the first draft of this file); the
  boundary rule is applied to both ends of every part (an end that is not an ASCII word character
  needs no check, so for the shipped phrases this equals checking the phrase's outer ends only).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

LEVEL_ORDER: dict[str, int] = {"low": 0, "medium": 1, "high": 2}
"""Levels from lowest to highest (events only ever lower a level)."""

SEVERITIES: tuple[str, ...] = ("high", "medium", "low")
"""Contradiction event severities (§ Contradiction events)."""

OUTPUT_COLUMNS: tuple[str, ...] = (
    "answer_id",
    "query_id",
    "citation_count",
    "citation_count_points",
    "relevance_chunks",
    "relevance_mean",
    "citation_relevance",
    "citation_quality",
    "answer_length",
    "length_points",
    "paragraphs",
    "paragraph_points",
    "has_conclusion",
    "conclusion_points",
    "answer_quality",
    "retrieved_count",
    "retrieval_count_points",
    "citation_rate",
    "citation_rate_points",
    "retrieval",
    "uncertain_hits",
    "uncertain_terms",
    "uncertain_penalty",
    "vague_hits",
    "vague_terms",
    "vague_penalty",
    "assertive_hits",
    "assertive_terms",
    "assertive_bonus",
    "certainty",
    "total",
    "percentage",
    "score_level",
    "contradictions_high",
    "contradictions_medium",
    "contradictions_low",
    "contradiction_warning",
    "level",
    "answer_policy_version",
)
"""The columns of ``answers.parquet`` in the spec's order."""

INT_COLUMNS: frozenset[str] = frozenset(
    {
        "citation_count",
        "relevance_chunks",
        "answer_length",
        "paragraphs",
        "retrieved_count",
        "uncertain_hits",
        "vague_hits",
        "assertive_hits",
        "contradictions_high",
        "contradictions_medium",
        "contradictions_low",
    }
)
BOOL_COLUMNS: frozenset[str] = frozenset({"has_conclusion", "contradiction_warning"})
LIST_COLUMNS: frozenset[str] = frozenset({"uncertain_terms", "vague_terms", "assertive_terms"})
STR_COLUMNS: frozenset[str] = frozenset(
    {"answer_id", "query_id", "score_level", "level", "answer_policy_version"}
)
FLOAT_COLUMNS: frozenset[str] = (
    frozenset(OUTPUT_COLUMNS) - INT_COLUMNS - BOOL_COLUMNS - (LIST_COLUMNS | STR_COLUMNS)
)
NULLABLE_COLUMNS: frozenset[str] = frozenset({"relevance_mean", "citation_rate"})

WHITESPACE: frozenset[str] = frozenset("\t\n\f\r ")
"""The characters of the paragraph rule's class ``[\\t\\n\\f\\r ]`` (nothing else is blank)."""

GAP: str = "\u2026"
"""The "…" of a conclusion phrase: any text (possibly empty, newlines included) in between."""


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------


SEED_PARAMETERS = Path(__file__).resolve().parent / "seed_parameters.yaml"


def load_params(policy: str = "answer_v1") -> dict[str, Any]:
    """The frozen parameters of ``policy`` (``answer_v1`` or ``answer_v1_en``)."""
    import yaml  # PyYAML, only to read the file

    with open(SEED_PARAMETERS, encoding="utf-8") as fh:
        return yaml.safe_load(fh)[policy]


def band_points(value: float, bands: Sequence[Mapping[str, Any]]) -> float:
    """Spec § Bands: the points of the first band (highest ``at_least`` first) with value >= t."""
    for band in bands:
        if value >= band["at_least"]:
            return float(band["points"])
    raise ValueError(f"value {value!r} below every band")


def clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return min(max(x, lo), hi)


# --------------------------------------------------------------------------------------------
# §1 citation quality
# --------------------------------------------------------------------------------------------


def top_chunks(chunks: Iterable[tuple[str, float]], top_k: int) -> list[tuple[str, float]]:
    """Chunks by rerank_score descending, ties by chunk_id ascending (string order); first top_k."""
    ordered = sorted(((str(c), float(s)) for c, s in chunks), key=lambda cs: (-cs[1], cs[0]))
    return ordered[:top_k]


def relevance(
    chunks: Iterable[tuple[str, float]], params: Mapping[str, Any]
) -> tuple[int, float | None, float]:
    """``(relevance_chunks, relevance_mean, citation_relevance)`` of one answer's chunks."""
    cfg = params["citation_relevance"]
    top = top_chunks(chunks, int(cfg["top_k"]))
    if not top:
        return 0, None, 0.0
    acc = 0.0
    for _, score in top:
        acc += score
    mean = acc / len(top)
    lo, hi = float(cfg["score_range"][0]), float(cfg["score_range"][1])
    points = float(cfg["max_points"]) * clamp((mean - lo) / (hi - lo), 0.0, 1.0)
    return len(top), mean, points


# --------------------------------------------------------------------------------------------
# §2 answer quality
# --------------------------------------------------------------------------------------------


def count_paragraphs(text: str) -> int:
    """Segments between blank-line separators ``\\n[\\t\\n\\f\\r ]*\\n`` holding a non-blank char.

    Written without ``re``: two consecutive non-blank characters are in different segments exactly
    when the (all-blank) run between them holds at least two ``\\n`` (the separator then runs
    from the first to the last of them); blank runs before the first / after the last non-blank
    character only produce segments without content.
    """
    paragraphs = 0
    newlines_since_content = 0
    seen_content = False
    for ch in text:
        if ch in WHITESPACE:
            if ch == "\n":
                newlines_since_content += 1
            continue
        if not seen_content:
            paragraphs = 1
            seen_content = True
        elif newlines_since_content >= 2:
            paragraphs += 1
        newlines_since_content = 0
    return paragraphs


def is_word_char(ch: str) -> bool:
    """ASCII letter, digit or underscore (the word-boundary rule's word characters)."""
    return ch == "_" or ("a" <= ch <= "z") or ("A" <= ch <= "Z") or ("0" <= ch <= "9")


def matches_at(text: str, pos: int, term: str) -> bool:
    """``term`` occurs at ``pos`` of ``text`` and satisfies the word-boundary rule at both ends."""
    end = pos + len(term)
    if not term or end > len(text):
        return False
    for i, ch in enumerate(term):
        if text[pos + i] != ch:
            return False
    if is_word_char(term[0]) and pos > 0 and is_word_char(text[pos - 1]):
        return False
    # the character after the term must not continue an ASCII word the term ends in
    return not (is_word_char(term[-1]) and end < len(text) and is_word_char(text[end]))


def find_from(text: str, start: int, term: str) -> int:
    """First position >= start where ``term`` matches (boundary rule included); -1 if none."""
    for pos in range(start, len(text) - len(term) + 1):
        if matches_at(text, pos, term):
            return pos
    return -1


def phrase_occurs(text: str, phrase: str) -> bool:
    """A conclusion phrase occurs in (already lower-cased) ``text``.

    A phrase with "…" matches its parts in order with any text between; for each part the earliest
    match after the previous part's end is the best choice (it leaves the most room for the rest).
    """
    parts = [part.strip() for part in phrase.split(GAP)]
    start = 0
    for part in parts:
        if part == "":
            continue
        pos = find_from(text, start, part)
        if pos < 0:
            return False
        start = pos + len(part)
    return True


def has_conclusion(text: str, phrases: Sequence[str]) -> bool:
    low = text.lower()
    return any(phrase_occurs(low, phrase.lower()) for phrase in phrases)


# --------------------------------------------------------------------------------------------
# §4 language certainty
# --------------------------------------------------------------------------------------------


LEXICONS: tuple[str, ...] = ("uncertain", "vague", "assertive")


def lexicon_terms(params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(term, lexicon)`` pairs, lower-cased; a term in two lexicons is a policy error."""
    owner: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    for lexicon in LEXICONS:
        for raw in params["lexicons"][lexicon]:
            term = str(raw).lower()
            if term in owner:
                if owner[term] != lexicon:
                    raise ValueError(f"term {term!r} in lexicons {owner[term]} and {lexicon}")
                continue
            owner[term] = lexicon
            pairs.append((term, lexicon))
    return pairs


def scan_lexicons(text: str, params: Mapping[str, Any]) -> dict[str, list[str]]:
    """Left-to-right longest-match scan of the lower-cased text over the three lexicons together.

    Returns ``{lexicon: [matched terms in text order]}``.
    """
    low = text.lower()
    terms = lexicon_terms(params)
    found: dict[str, list[str]] = {lexicon: [] for lexicon in LEXICONS}
    pos = 0
    n = len(low)
    while pos < n:
        best_term = ""
        best_lexicon = ""
        for term, lexicon in terms:
            if len(term) > len(best_term) and matches_at(low, pos, term):
                best_term, best_lexicon = term, lexicon
        if best_term:
            found[best_lexicon].append(best_term)
            pos += len(best_term)
        else:
            pos += 1
    return found


def capped(hits: int, rule: Mapping[str, Any]) -> float:
    return min(hits * float(rule["per_hit"]), float(rule["cap"]))


# --------------------------------------------------------------------------------------------
# One answer
# --------------------------------------------------------------------------------------------


def lower_level(level: str, target: str) -> str:
    return target if LEVEL_ORDER[target] < LEVEL_ORDER[level] else level


def score_answer(
    answer: Mapping[str, Any],
    citations: Sequence[str],
    chunks: Sequence[tuple[str, float]],
    events: Sequence[str],
    params: Mapping[str, Any],
    version: str,
) -> dict[str, Any]:
    """Every output column of one answer.

    ``answer``: answer_id, query_id, answer_text, retrieved_count; ``citations``: its chunk ids;
    ``chunks``: its ``(chunk_id, rerank_score)``; ``events``: the severities of its events.
    """
    text = str(answer["answer_text"])
    row: dict[str, Any] = {"answer_id": answer["answer_id"], "query_id": answer["query_id"]}

    # §1 citation quality
    citation_count = len(citations)
    count_points = band_points(citation_count, params["citation_count"])
    rel_chunks, rel_mean, rel_points = relevance(chunks, params)
    row.update(
        citation_count=citation_count,
        citation_count_points=count_points,
        relevance_chunks=rel_chunks,
        relevance_mean=rel_mean,
        citation_relevance=rel_points,
        citation_quality=count_points + rel_points,
    )

    # §2 answer quality
    structure = params["structure"]
    length = len(text)
    length_points = band_points(length, params["length"])
    paragraphs = count_paragraphs(text)
    paragraph_points = (
        float(structure["paragraph_points"])
        if paragraphs >= int(structure["min_paragraphs"])
        else 0.0
    )
    conclusion = has_conclusion(text, params["lexicons"]["conclusion"])
    conclusion_points = float(structure["conclusion_points"]) if conclusion else 0.0
    row.update(
        answer_length=length,
        length_points=length_points,
        paragraphs=paragraphs,
        paragraph_points=paragraph_points,
        has_conclusion=conclusion,
        conclusion_points=conclusion_points,
        answer_quality=length_points + paragraph_points + conclusion_points,
    )

    # §3 retrieval recall
    retrieved = int(answer["retrieved_count"])
    retrieved_points = band_points(retrieved, params["retrieved_count"])
    if retrieved == 0:
        rate = None
        rate_points = float(params["citation_rate"][-1]["points"])
    else:
        rate = float(citation_count) / float(retrieved)
        rate_points = band_points(rate, params["citation_rate"])
    row.update(
        retrieved_count=retrieved,
        retrieval_count_points=retrieved_points,
        citation_rate=rate,
        citation_rate_points=rate_points,
        retrieval=retrieved_points + rate_points,
    )

    # §4 language certainty
    cert = params["certainty"]
    found = scan_lexicons(text, params)
    up = capped(len(found["uncertain"]), cert["uncertain"])
    vp = capped(len(found["vague"]), cert["vague"])
    ab = capped(len(found["assertive"]), cert["assertive"])
    certainty = clamp(((float(cert["base"]) - up) - vp) + ab, 0.0, 1.0)
    row.update(
        uncertain_hits=len(found["uncertain"]),
        uncertain_terms=list(found["uncertain"]),
        uncertain_penalty=up,
        vague_hits=len(found["vague"]),
        vague_terms=list(found["vague"]),
        vague_penalty=vp,
        assertive_hits=len(found["assertive"]),
        assertive_terms=list(found["assertive"]),
        assertive_bonus=ab,
        certainty=certainty,
    )

    # total, percentage, score level
    w = params["weights"]
    w_cq, w_aq = float(w["citation_quality"]), float(w["answer_quality"])
    w_r, w_c = float(w["retrieval"]), float(w["certainty"])
    total = w_cq * row["citation_quality"] + w_aq * row["answer_quality"]
    total = total + w_r * row["retrieval"]
    total = total + w_c * certainty
    max_total = ((w_cq + w_aq) + w_r) + w_c
    percentage = 100.0 * total / max_total
    rounded = round(percentage, 6)
    levels = params["levels"]
    if rounded >= float(levels["high_at_least"]):
        score_level = "high"
    elif rounded >= float(levels["medium_at_least"]):
        score_level = "medium"
    else:
        score_level = "low"
    row.update(total=total, percentage=percentage, score_level=score_level)

    # contradiction events
    counts = dict.fromkeys(SEVERITIES, 0)
    for sev in events:
        if sev not in counts:
            raise ValueError(f"unknown severity {sev!r}")
        counts[sev] += 1
    level = score_level
    rules = params["contradictions"]
    for sev in SEVERITIES:
        target = str(rules[sev])
        if counts[sev] > 0 and target != "warn":
            level = lower_level(level, target)
    row.update(
        contradictions_high=counts["high"],
        contradictions_medium=counts["medium"],
        contradictions_low=counts["low"],
        # a warning for each severity the policy maps to "warn" rather than to a level
        contradiction_warning=any(counts[sev] > 0 and rules[sev] == "warn" for sev in counts),
        level=level,
        answer_policy_version=version,
    )
    assert tuple(row) == OUTPUT_COLUMNS
    return row


def score_reference(
    answers: Iterable[Mapping[str, Any]],
    citations: Iterable[Mapping[str, Any]],
    chunks: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]] | None,
    params: Mapping[str, Any],
    version: str,
) -> list[dict[str, Any]]:
    """All answers (rows as mappings), one output row each, ordered by answer_id."""
    cits: dict[Any, list[str]] = {}
    for r in citations:
        cits.setdefault(r["answer_id"], []).append(str(r["chunk_id"]))
    chs: dict[Any, list[tuple[str, float]]] = {}
    for r in chunks:
        chs.setdefault(r["answer_id"], []).append((str(r["chunk_id"]), float(r["rerank_score"])))
    evs: dict[Any, list[str]] = {}
    for r in events or ():
        evs.setdefault(r["answer_id"], []).append(str(r["severity"]))
    rows = [
        score_answer(
            a,
            cits.get(a["answer_id"], []),
            chs.get(a["answer_id"], []),
            evs.get(a["answer_id"], []),
            params,
            version,
        )
        for a in answers
    ]
    rows.sort(key=lambda r: r["answer_id"])
    return rows


def isclose(a: float, b: float) -> bool:
    """The comparison the oracle tests use for floats."""
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
