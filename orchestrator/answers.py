"""`duckscore answers`: seed 001's confidence of logged answers (policy answer_v1)."""

from __future__ import annotations

import dataclasses
import math
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from .contracts import ANSWERS, CHUNKS, CITATIONS, EVENTS
from .engine import EngineSettings, connect
from .errors import PolicyError
from .inputs import OpenedInput, check_references, open_input, schema_of
from .manifest import build_manifest
from .outputs import atomic_output_dir, write_json
from .policy import Bounds, Choice, ListOf, Number, Policy, PolicyKind, Words, load_policy
from .progress import SILENT, Progress
from .render import RenderedSQL, render
from .runner import copy_to, execute, settings_record, write_sql
from .sqlcheck import check_sql

UNIT = Number(0.0, 1.0)
BAND_LISTS = ("citation_count", "length", "retrieved_count", "citation_rate")
LEXICONS = ("uncertain", "vague", "assertive")
LEVEL_CHANGES = ("low", "medium", "warn")  # the level a contradiction lowers to, or a warning only
GAP = "…"  # in a conclusion phrase: any text between its parts (综合…来看)
_WORD_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_")
# RE2 (DuckDB's regex engine): a blank line ends a paragraph; \s there is [\t\n\f\r ]
PARAGRAPH_SEPARATOR = r"\n[\t\n\f\r ]*\n"
VISIBLE_CHARACTER = r"[^\t\n\f\r ]"


def _bands_descend_to_zero(p: dict[str, Any]) -> None:
    for name in BAND_LISTS:
        thresholds = [band["at_least"] for band in p[name]]
        if not thresholds:
            raise PolicyError(f"parameters.{name} needs at least one band")
        if any(a <= b for a, b in zip(thresholds, thresholds[1:])):
            raise PolicyError(f"parameters.{name}: at_least must strictly decrease from band to band")
        if thresholds[-1] != 0:
            raise PolicyError(f"parameters.{name}: the last band must start at 0 (it is the floor)")


def _factors_within_one(p: dict[str, Any]) -> None:
    def best(name: str) -> float:
        return max(band["points"] for band in p[name])

    s = p["structure"]
    sums = {
        "citation quality (citation_count + citation_relevance.max_points)":
            best("citation_count") + p["citation_relevance"]["max_points"],
        "answer quality (length + structure points)":
            best("length") + s["paragraph_points"] + s["conclusion_points"],
        "retrieval (retrieved_count + citation_rate)": best("retrieved_count") + best("citation_rate"),
    }
    for factor, total in sums.items():
        if total > 1 + 1e-12:
            raise PolicyError(f"the best points of {factor} add up to {total:g}; a factor is at most 1")


def _ranges_and_cuts(p: dict[str, Any]) -> None:
    score_range = p["citation_relevance"]["score_range"]
    if score_range is None or score_range[0] >= score_range[1]:
        raise PolicyError("parameters.citation_relevance.score_range must be [lo, hi] with lo < hi")
    if p["levels"]["medium_at_least"] > p["levels"]["high_at_least"]:
        raise PolicyError("parameters.levels.medium_at_least must not exceed high_at_least")
    if sum(p["weights"].values()) <= 0:
        raise PolicyError("parameters.weights must not all be 0")


def _lexicons_disjoint(p: dict[str, Any]) -> None:
    owner: dict[str, str] = {}
    for name in LEXICONS:
        for term in p["lexicons"][name]:
            other = owner.setdefault(term.lower(), name)
            if other != name:
                raise PolicyError(f"parameters.lexicons: {term!r} is in both {other} and {name}")
    for phrase in p["lexicons"]["conclusion"]:
        if any(not part for part in gap_parts(phrase)):
            raise PolicyError(f"parameters.lexicons.conclusion: {phrase!r} has an empty part around {GAP!r}")


BANDS = ListOf({"at_least": Number(0.0), "points": UNIT})
HITS = {"per_hit": Number(0.0), "cap": Number(0.0)}

ANSWER_POLICY = PolicyKind(
    capability="answers",
    version_key="answer_policy_version",
    spec={
        "weights": {f: Number(0.0) for f in ("citation_quality", "answer_quality", "retrieval", "certainty")},
        "levels": {"high_at_least": Number(0.0, 100.0), "medium_at_least": Number(0.0, 100.0)},
        "citation_count": BANDS,
        "citation_relevance": {"top_k": Number(1, 50, integer=True), "max_points": UNIT,
                               "score_range": Bounds()},
        "length": BANDS,
        "structure": {"min_paragraphs": Number(1, integer=True), "paragraph_points": UNIT,
                      "conclusion_points": UNIT},
        "retrieved_count": BANDS,
        "citation_rate": BANDS,
        "certainty": {"base": UNIT, "uncertain": HITS, "vague": HITS, "assertive": HITS},
        "contradictions": {s: Choice(LEVEL_CHANGES) for s in ("high", "medium", "low")},
        "lexicons": {name: Words() for name in (*LEXICONS, "conclusion")},
    },
    cross_checks=(_bands_descend_to_zero, _factors_within_one, _ranges_and_cuts, _lexicons_disjoint),
)


def term_regex(term: str) -> str:
    """An RE2 pattern matching `term` literally. ASCII punctuation and spaces become \\x{..}
    escapes; an end that is an ASCII letter, digit or underscore must sit at a word boundary."""
    escaped = "".join(ch if not ch.isascii() or ch.isalnum() else f"\\x{{{ord(ch):02x}}}" for ch in term)
    before = r"\b" if term[0] in _WORD_CHARACTERS else ""
    after = r"\b" if term[-1] in _WORD_CHARACTERS else ""
    return before + escaped + after


def gap_parts(phrase: str) -> list[str]:
    """The parts of a conclusion phrase around its gaps; spaces beside "…" are layout, so
    "taking … into account" also matches "taking into account"."""
    return [part.strip() for part in phrase.split(GAP)]


def lexicon_pattern(lexicons: dict[str, list[str]]) -> str | None:
    """One alternation of every lexicon term, longest first: RE2 takes the first alternative
    that matches at the leftmost position, so the scan takes the longest term there."""
    terms = sorted({t.lower() for name in LEXICONS for t in lexicons[name]}, key=lambda t: (-len(t), t))
    return "(?:" + "|".join(term_regex(t) for t in terms) + ")" if terms else None


def conclusion_pattern(phrases: list[str]) -> str | None:
    """Any conclusion phrase; the parts of a phrase with a gap match in order, anything between."""
    if not phrases:
        return None
    alternatives = [".*?".join(term_regex(part) for part in gap_parts(phrase.lower())) for phrase in phrases]
    return "(?s)(?:" + "|".join(alternatives) + ")"


def render_answers(policy: Policy, with_events: bool, final: str = "scored_answers",
                   ordered: bool = True) -> RenderedSQL:
    """The stages up to scored_answers (or the stage `final`) over answers, citations, chunks
    (and events)."""
    return render("answers/answers.sql", final=final, ordered=ordered,
                  **_context(policy, with_events))


def render_contract(policy: Policy, with_events: bool, standalone: bool,
                    ordered: bool = True) -> RenderedSQL:
    """The contract rows, from the materialised scored_answers or (standalone) from the inputs."""
    return render("answers/contract.sql", standalone=standalone, ordered=ordered,
                  **_context(policy, with_events))


def _context(policy: Policy, with_events: bool) -> dict[str, Any]:
    p = policy.parameters
    return dict(
        policy=p, policy_version=policy.version, with_events=with_events,
        inputs={"answers": "answers", "citations": "citations", "chunks": "chunks",
                "events": "events" if with_events else None},
        lexicons={name: [t.lower() for t in p["lexicons"][name]] for name in LEXICONS},
        lexicon_pattern=lexicon_pattern(p["lexicons"]),
        conclusion_pattern=conclusion_pattern(p["lexicons"]["conclusion"]),
        paragraph_separator=PARAGRAPH_SEPARATOR, visible_character=VISIBLE_CHARACTER,
        max_total=math.fsum(p["weights"][f] for f in ("citation_quality", "answer_quality", "retrieval", "certainty")),
        max_points={name: max(band["points"] for band in p[name]) for name in BAND_LISTS},
    )


@dataclass(frozen=True)
class AnswersResult:
    out_dir: Path
    policy: Policy
    answers: int
    manifest: dict[str, Any]


Table = str | Path | pd.DataFrame


def score_answers(answers: Table, citations: Table, chunks: Table, out_dir: str | Path,
                  policy: str = "answer_v1", events: Table | None = None,
                  overrides: list[str] | None = None, settings: EngineSettings | None = None,
                  progress: Progress = SILENT) -> AnswersResult:
    """Score logged answers into `out_dir`: answers.parquet, contract.jsonl, manifest.json and the
    rendered SQL. Nothing is written unless everything succeeds."""
    loaded = load_policy(ANSWER_POLICY, policy, overrides)
    con = connect(settings)
    progress.step(f"checking inputs (policy {loaded.version})")
    opened = open_answer_inputs(con, loaded, answers, citations, chunks, events)
    progress.step(f"scoring {opened['answers'].rows:,} answers")
    with_events = events is not None
    answers_sql = render_answers(loaded, with_events, ordered=False)
    check_sql(answers_sql, {name: schema_of(con, name) for name in opened})
    execute(con, f"CREATE OR REPLACE TEMP TABLE scored_answers AS {answers_sql.text}", answers_sql)
    contract_sql = render_contract(loaded, with_events, standalone=False)
    check_sql(contract_sql, {"scored_answers": schema_of(con, "scored_answers")})
    progress.step("writing outputs")
    with atomic_output_dir(Path(out_dir)) as stage:
        counts = {
            "answers.parquet": copy_to(con, "SELECT * FROM scored_answers ORDER BY answer_id",
                                       stage / "answers.parquet", "parquet", answers_sql),
            "contract.jsonl": copy_to(con, contract_sql.text, stage / "contract.jsonl", "json", contract_sql),
        }
        write_sql(stage, [answers_sql, contract_sql])
        manifest = build_manifest("answers", loaded.as_record(), [answers_sql, contract_sql], opened,
                                  counts, settings_record(settings))
        write_json(stage / "manifest.json", manifest)
    return AnswersResult(Path(out_dir), loaded, counts["answers.parquet"], manifest)


def open_answer_inputs(con: duckdb.DuckDBPyConnection, policy: Policy, answers: Table,
                       citations: Table, chunks: Table, events: Table | None) -> dict[str, OpenedInput]:
    """The typed views answers, citations, chunks (and events), checked: contracts, the policy's
    rerank score range, and every answer_id known to --answers."""
    lo, hi = policy.parameters["citation_relevance"]["score_range"]
    ranged = dataclasses.replace(CHUNKS.column("rerank_score"), min=lo, max=hi)
    chunks_contract = dataclasses.replace(
        CHUNKS, columns=tuple(ranged if c.name == "rerank_score" else c for c in CHUNKS.columns))
    opened = {"answers": open_input(con, ANSWERS, answers, "--answers"),
              "citations": open_input(con, CITATIONS, citations, "--citations"),
              "chunks": open_input(con, chunks_contract, chunks, "--chunks")}
    if events is not None:
        opened["events"] = open_input(con, EVENTS, events, "--events")
    for name in ("citations", "chunks", "events"):
        if name in opened:
            check_references(con, opened[name], "answer_id", opened["answers"], "answer_id")
    return opened

