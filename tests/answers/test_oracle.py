"""`duckscore answers` (SQL) against the independent plain-Python oracle of answer_v1.

`tests/answers/answers_reference.py` was written from the rules in `docs/answers.md` (and the seed
`001_8e58ca51f62a7b7d.txt`) without reading the SQL. Every case below is one answer; the cases of
a policy are scored together in one `score_answers` run (module-scoped fixtures) and each test then
compares every output column of its answer with the reference (floats with
`math.isclose(rel_tol=1e-12, abs_tol=1e-12)`, lists as lists, strings exactly). Most cases also
carry a few hand-stated expectations (`expect`), checked against both the reference and the SQL.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from benchmarks.answers_pandas import compare, run_pandas
from duckscore.answering.pipeline import score_answers

from .answers_reference import (
    BOOL_COLUMNS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    LIST_COLUMNS,
    OUTPUT_COLUMNS,
    load_params,
    score_answer,
)

POLICIES = Path(__file__).resolve().parents[2] / "sql" / "answers" / "policies"


# --------------------------------------------------------------------------------------------
# Running both sides
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One answer: its text, citations, reranked chunks, retrieved count and events."""

    name: str
    text: str
    citations: int | list[str] = 0  # a count (ids cit0, cit1, ...) or the chunk ids
    chunks: list[tuple[str, float]] = field(default_factory=list)
    retrieved: int = 10
    events: list[str] = field(default_factory=list)
    expect: dict[str, Any] = field(default_factory=dict)
    query_id: str = "q"

    def citation_ids(self) -> list[str]:
        if isinstance(self.citations, int):
            return [f"cit{i}" for i in range(self.citations)]
        return list(self.citations)


@dataclass
class Run:
    """The SQL rows and the reference rows of one `score_answers` run, by case name."""

    got: dict[str, dict[str, Any]]
    ref: dict[str, dict[str, Any]]
    cases: dict[str, Case]
    frame: pd.DataFrame
    out_dir: Path
    ids: dict[str, str]


def _frames(cases: list[Case], ids: dict[str, str]) -> tuple[pd.DataFrame, ...]:
    answers = pd.DataFrame(
        {
            "answer_id": pd.Series([ids[c.name] for c in cases], dtype=object),
            "query_id": pd.Series([c.query_id for c in cases], dtype=object),
            "answer_text": pd.Series([c.text for c in cases], dtype=object),
            "retrieved_count": pd.Series([c.retrieved for c in cases], dtype="int64"),
        }
    )
    cit_rows = [(ids[c.name], cid) for c in cases for cid in c.citation_ids()]
    citations = pd.DataFrame(
        {
            "answer_id": pd.Series([a for a, _ in cit_rows], dtype=object),
            "chunk_id": pd.Series([b for _, b in cit_rows], dtype=object),
        }
    )
    ch_rows = [(ids[c.name], cid, s) for c in cases for cid, s in c.chunks]
    chunks = pd.DataFrame(
        {
            "answer_id": pd.Series([a for a, _, _ in ch_rows], dtype=object),
            "chunk_id": pd.Series([b for _, b, _ in ch_rows], dtype=object),
            "rerank_score": pd.Series([s for _, _, s in ch_rows], dtype="float64"),
        }
    )
    ev_rows = [(ids[c.name], sev) for c in cases for sev in c.events]
    events = pd.DataFrame(
        {
            "answer_id": pd.Series([a for a, _ in ev_rows], dtype=object),
            "severity": pd.Series([s for _, s in ev_rows], dtype=object),
        }
    )
    return answers, citations, chunks, events


def run_cases(
    cases: list[Case],
    policy: str,
    out_dir: Path,
    *,
    with_events: bool = True,
    ids: dict[str, str] | None = None,
    reference: tuple[str, dict[str, Any]] | None = None,
    overrides: list[str] | None = None,
) -> Run:
    """Score ``cases`` with the SQL (one run, policy ``policy``) and with the reference:
    ``reference`` is its (answer_policy_version, parameters), by default the frozen parameters of
    the packaged policy of that name (never the policy file)."""
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    if ids is None:
        ids = {c.name: f"a{i:04d}" for i, c in enumerate(cases)}
    answers, citations, chunks, events = _frames(cases, ids)
    score_answers(
        answers,
        citations,
        chunks,
        out_dir,
        policy=policy,
        events=events if with_events else None,
        overrides=overrides,
    )
    frame = pd.read_parquet(out_dir / "answers.parquet")
    by_id = {row["answer_id"]: row for row in frame.to_dict("records")}
    version, params = reference or (policy, load_params(policy))
    got: dict[str, dict[str, Any]] = {}
    ref: dict[str, dict[str, Any]] = {}
    for c in cases:
        answer = {
            "answer_id": ids[c.name],
            "query_id": c.query_id,
            "answer_text": c.text,
            "retrieved_count": c.retrieved,
        }
        ref[c.name] = score_answer(
            answer,
            c.citation_ids(),
            c.chunks,
            c.events if with_events else [],
            params,
            version,
        )
        got[c.name] = by_id.get(ids[c.name], {})
    return Run(got, ref, {c.name: c for c in cases}, frame, out_dir, ids)


def _same(col: str, got: Any, exp: Any) -> bool:
    if exp is None:
        return got is None or (isinstance(got, float) and math.isnan(got))
    if col in FLOAT_COLUMNS:
        return (
            isinstance(got, float)
            and not math.isnan(got)
            and math.isclose(got, exp, rel_tol=1e-12, abs_tol=1e-12)
        )
    if col in INT_COLUMNS:
        return not isinstance(got, bool) and hasattr(got, "__index__") and int(got) == exp
    if col in BOOL_COLUMNS:
        return type(got).__name__ in ("bool", "bool_") and bool(got) == exp
    if col in LIST_COLUMNS:
        if got is None or isinstance(got, str):
            return False
        return [str(x) for x in list(got)] == exp and all(isinstance(x, str) for x in got)
    return isinstance(got, str) and got == exp


def mismatches(got: dict[str, Any], exp: dict[str, Any]) -> list[str]:
    if not got:
        return ["row missing from answers.parquet"]
    out = []
    for col in OUTPUT_COLUMNS:
        if col not in got:
            out.append(f"{col}: column missing")
        elif not _same(col, got[col], exp[col]):
            g = got[col].tolist() if hasattr(got[col], "tolist") else got[col]
            out.append(f"{col}: expected {exp[col]!r}, got {g!r} ({type(got[col]).__name__})")
    return out


def check(run: Run, name: str) -> None:
    """Every column of case ``name`` equals the reference; hand expectations hold on both."""
    case = run.cases[name]
    got, ref = run.got[name], run.ref[name]
    problems = [f"reference vs SQL: {m}" for m in mismatches(got, ref)]
    for col, value in case.expect.items():
        if not _same(col, ref[col], value):
            problems.append(f"hand value vs reference: {col}: stated {value!r}, ref {ref[col]!r}")
        if got and not _same(col, got.get(col), value):
            problems.append(f"hand value vs SQL: {col}: stated {value!r}, got {got.get(col)!r}")
    assert not problems, (
        f"case {name} (text={case.text[:200]!r}, citations={case.citation_ids()}, "
        f"chunks={case.chunks}, retrieved={case.retrieved}, events={case.events}):\n  "
        + "\n  ".join(problems)
    )


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

CN_FILLER = "天台山斗剑张九张霞小七原因层次"  # no lexicon word, no conclusion phrase, no blank
ASCII_FILLER = "lorem ipsum dolor sit amet "


def filler(n: int, alphabet: str) -> str:
    src = CN_FILLER if alphabet == "cn" else ASCII_FILLER
    return (src * (n // len(src) + 1))[:n]


LENGTH_POINTS = {
    0: 0.2, 1: 0.2, 49: 0.2, 50: 0.4, 99: 0.4, 100: 0.6, 101: 0.6, 999: 0.6, 1000: 0.6,
    1001: 0.5, 1999: 0.5, 2000: 0.5, 2001: 0.3, 5000: 0.3,
}  # fmt: skip
LENGTH_CASES = [
    Case(
        f"length_{alphabet}_{n}",
        filler(n, alphabet),
        expect={"answer_length": n, "length_points": p, "paragraphs": 1 if n else 0},
    )
    for alphabet in ("cn", "ascii")
    for n, p in LENGTH_POINTS.items()
]

CITATION_COUNT_POINTS = {0: 0.0, 1: 0.3, 2: 0.3, 3: 0.4, 4: 0.4, 5: 0.5, 6: 0.5}
CITATION_COUNT_CASES = [
    Case(
        f"citations_{n}",
        "张九",
        citations=n,
        retrieved=20,
        expect={"citation_count": n, "citation_count_points": p},
    )
    for n, p in CITATION_COUNT_POINTS.items()
]

RETRIEVED_POINTS = {0: 0.3, 4: 0.3, 5: 0.4, 9: 0.4, 10: 0.5, 19: 0.5, 20: 0.6, 21: 0.6}
RETRIEVED_CASES = [
    Case(
        f"retrieved_{n}",
        "张九",
        citations=1,
        retrieved=n,
        expect={
            "retrieved_count": n,
            "retrieval_count_points": p,
            "citation_rate": None if n == 0 else 1 / n,
        },
    )
    for n, p in RETRIEVED_POINTS.items()
]

# (citations, retrieved, citation_rate_points)
RATE_TABLE = [
    (1, 10, 0.2),  # 0.1 exactly
    (2, 10, 0.3),  # 0.2 exactly
    (3, 10, 0.4),  # 0.3 exactly
    (6, 20, 0.4),  # 0.3
    (9, 30, 0.4),  # 0.3
    (2, 20, 0.2),  # 0.1
    (29, 100, 0.3),  # just below 0.3
    (19, 100, 0.2),  # just below 0.2
    (9, 100, 0.1),  # just below 0.1
    (0, 10, 0.1),  # 0 citations
    (1, 11, 0.1),  # 0.0909
    (3, 1, 0.4),  # rate 3.0 > 1, kept
    (2, 0, 0.1),  # retrieved 0: rate NULL, last band
]
RATE_CASES = [
    Case(
        f"rate_{c}_of_{r}",
        "张九",
        citations=c,
        retrieved=r,
        expect={"citation_rate": None if r == 0 else c / r, "citation_rate_points": p},
    )
    for c, r, p in RATE_TABLE
]


def _chunks(scores: list[float], ids: list[str] | None = None) -> list[tuple[str, float]]:
    ids = ids or [f"c{i}" for i in range(len(scores))]
    return list(zip(ids, scores, strict=True))


RELEVANCE_CASES = [
    Case("relevance_0_chunks", "张九", citations=2, chunks=[],
         expect={"relevance_chunks": 0, "relevance_mean": None, "citation_relevance": 0.0}),
    Case("relevance_1_chunk", "张九", chunks=_chunks([0.7]),
         expect={"relevance_chunks": 1, "relevance_mean": 0.7, "citation_relevance": 0.35}),
    Case("relevance_5_chunks", "张九", chunks=_chunks([0.5, 0.9, 0.6, 0.8, 0.7]),
         expect={"relevance_chunks": 5, "relevance_mean": 0.7, "citation_relevance": 0.35}),
    # top 5 of 7: 0.9, 0.8, 0.7, 0.6, 0.3 -> 3.3 / 5 = 0.66
    Case("relevance_7_chunks_top5", "张九", chunks=_chunks([0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6]),
         expect={"relevance_chunks": 5, "relevance_mean": 0.66, "citation_relevance": 0.33}),
    Case("relevance_7_chunks_all_tied", "张九",
         chunks=_chunks([0.5] * 7, ["c10", "c2", "c1", "b9", "c3", "a", "c20"]),
         expect={"relevance_chunks": 5, "relevance_mean": 0.5, "citation_relevance": 0.25}),
    # tie at the cut (the 5th and 6th both 0.4): 1 + 0.8 + 0.6 + 0.4 + 0.4 = 3.2 -> 0.64
    Case("relevance_7_chunks_tie_at_cut", "张九",
         chunks=_chunks([0.4, 1.0, 0.4, 0.6, 0.8, 0.4, 0.0], ["z", "y", "b", "x", "w", "a", "v"]),
         expect={"relevance_chunks": 5, "relevance_mean": 0.64, "citation_relevance": 0.32}),
    Case("relevance_score_0_single", "张九", chunks=_chunks([0.0]),
         expect={"relevance_chunks": 1, "relevance_mean": 0.0, "citation_relevance": 0.0}),
    Case("relevance_score_1_single", "张九", chunks=_chunks([1.0]),
         expect={"relevance_chunks": 1, "relevance_mean": 1.0, "citation_relevance": 0.5}),
    Case("relevance_7_chunks_all_0", "张九", chunks=_chunks([0.0] * 7),
         expect={"relevance_chunks": 5, "relevance_mean": 0.0, "citation_relevance": 0.0}),
    Case("relevance_7_chunks_all_1", "张九", chunks=_chunks([1.0] * 7),
         expect={"relevance_chunks": 5, "relevance_mean": 1.0, "citation_relevance": 0.5}),
    Case("relevance_five_1_two_0", "张九", chunks=_chunks([0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]),
         expect={"relevance_chunks": 5, "relevance_mean": 1.0, "citation_relevance": 0.5}),
    Case("relevance_one_1_six_0", "张九", chunks=_chunks([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]),
         expect={"relevance_chunks": 5, "relevance_mean": 0.2, "citation_relevance": 0.1}),
    # chunks need not be cited: relevance is over all chunks, citations over their own table
    Case("relevance_uncited_chunks", "张九", citations=["x1"], chunks=_chunks([0.9, 0.7]),
         expect={"relevance_chunks": 2, "relevance_mean": 0.8, "citation_count": 1}),
]  # fmt: skip


def _totals_text(length: int, paragraphs: bool, conclusion: bool, words: str) -> str:
    text = "张九" + words + ("\n\n" if paragraphs else "") + ("总之" if conclusion else "")
    return text + "天" * (length - len(text))


# Totals landing exactly on the level cuts (found by an exact-fraction search over the bands):
TOTAL_CASES = [
    # cq = 0 + 0.5*0.9 = 0.45; aq = 0.6+0.2+0.2 = 1.0; r = 0.6 + 0.1 (0/20) = 0.7; c = 0.9
    # total = 1.35 + 2.5 + 1.4 + 2.25 = 7.5 -> 75.0 (exactly in floating point too) -> high
    Case("total_75_exact", _totals_text(200, True, True, "可能"), citations=0,
         chunks=_chunks([0.9] * 5), retrieved=20,
         expect={"total": 7.5, "percentage": 75.0, "score_level": "high", "level": "high"}),
    # cq = 0.3 + 0.5*0.7 = 0.65; aq = 1.0; r = 0.3 + 0.1 (retrieved 0) = 0.4; c = 0.9
    # total = 1.95 + 2.5 + 0.8 + 2.25 = 7.5; in floating point 74.99999999999999: round(., 6) -> high
    Case("total_75_float_below", _totals_text(200, True, True, "可能"), citations=1,
         chunks=_chunks([0.7] * 5), retrieved=0,
         expect={"percentage": 75.0, "score_level": "high", "level": "high"}),
    # cq = 0; aq = 0.2+0.2+0.2 = 0.6; r = 0.4 + 0.1 (0/5) = 0.5; c = min(1, 1 + 0.1) = 1.0
    # total = 0 + 1.5 + 1.0 + 2.5 = 5.0 -> 50.0 -> medium
    Case("total_50_exact", _totals_text(10, True, True, "确实"), citations=0,
         chunks=_chunks([0.0] * 5), retrieved=5,
         expect={"total": 5.0, "percentage": 50.0, "score_level": "medium", "level": "medium"}),
    # cq = 0.3 + 0.5*0.3 = 0.45; aq = 0.4 (60 chars); r = 0.4 + 0.3 (1/5 = 0.2) = 0.7;
    # c = 1 - 0.3 (3 uncertain) - 0.2 (4 vague) = 0.5
    # total = 1.35 + 1.0 + 1.4 + 1.25 = 5.0; in floating point 49.999999999999986 -> medium
    Case("total_50_float_below", _totals_text(60, False, False, "可能也许大概一些某些若干多个"),
         citations=1, chunks=_chunks([0.3] * 5), retrieved=5,
         expect={"percentage": 50.0, "score_level": "medium", "level": "medium"}),
    # one step under each cut: 72.5 -> medium, 47.5 -> low
    Case("total_72_5", _totals_text(200, True, True, ""), citations=0,
         chunks=_chunks([0.7] * 5), retrieved=10,
         expect={"percentage": 72.5, "score_level": "medium"}),
    Case("total_47_5", _totals_text(10, False, True, ""), citations=0,
         chunks=_chunks([0.3] * 5), retrieved=0,
         expect={"percentage": 47.5, "score_level": "low"}),
]  # fmt: skip


def _lex(up: list[str], vague: list[str], asr: list[str], **more: Any) -> dict[str, Any]:
    return {
        "uncertain_terms": up, "uncertain_hits": len(up),
        "vague_terms": vague, "vague_hits": len(vague),
        "assertive_terms": asr, "assertive_hits": len(asr), **more,
    }  # fmt: skip


LEXICON_ZH_CASES = [
    Case("lex_zh_buqingchu_uncertain_only", "他不清楚。", expect=_lex(["不清楚"], [], [])),
    Case("lex_zh_buqingchu_twice_and_qingchu", "不清楚不清楚，清楚",
         expect=_lex(["不清楚", "不清楚"], [], ["清楚"])),
    Case("lex_zh_butaiqingchu_is_assertive_qingchu", "不太清楚", expect=_lex([], [], ["清楚"])),
    Case("lex_zh_haowuyiwen", "毫无疑问，就是他。", expect=_lex([], [], ["毫无疑问"])),
    Case("lex_zh_repeated_twice", "可能是他，可能不是", expect=_lex(["可能", "可能"], [], [],
         uncertain_penalty=0.2, certainty=0.8)),
    Case("lex_zh_buqueding", "不确定", expect=_lex(["不确定"], [], [])),
    Case("lex_zh_bumingque", "不明确", expect=_lex([], [], ["明确"])),
    Case("lex_zh_adjacent_mixed", "大概大量实际上事实上具体来说一些",
         expect=_lex(["大概"], ["大量", "一些"], ["实际上", "事实上", "具体来说"])),
    Case("lex_zh_uncertain_cap_6", "可能也许大概似乎好像应该",
         expect=_lex(["可能", "也许", "大概", "似乎", "好像", "应该"], [], [],
                     uncertain_penalty=0.5, certainty=0.5)),
    Case("lex_zh_uncertain_5", "或许估计猜测未知可能",
         expect=_lex(["或许", "估计", "猜测", "未知", "可能"], [], [],
                     uncertain_penalty=0.5, certainty=0.5)),
    Case("lex_zh_vague_cap_7", "一些某些若干多个少量大量很多",
         expect=_lex([], ["一些", "某些", "若干", "多个", "少量", "大量", "很多"], [],
                     vague_penalty=0.3, certainty=0.7)),
    Case("lex_zh_vague_3", "不少较多较少", expect=_lex([], ["不少", "较多", "较少"], [],
         vague_penalty=0.15)),
    Case("lex_zh_assertive_cap_3", "确实明确清楚",
         expect=_lex([], [], ["确实", "明确", "清楚"], assertive_bonus=0.1, certainty=1.0)),
    Case("lex_zh_assertive_offsets_penalty", "可能，确实",
         expect=_lex(["可能"], [], ["确实"], certainty=1.0)),
    Case("lex_zh_all_caps_hit", "可能也许大概似乎好像应该一些某些若干多个少量大量很多显然",
         expect={"uncertain_penalty": 0.5, "vague_penalty": 0.3, "assertive_bonus": 0.1,
                 "certainty": 0.30000000000000004}),
    Case("lex_zh_english_words_ignored", "Maybe some CLEARLY 可能maybe",
         expect=_lex(["可能"], [], [])),
    Case("lex_zh_across_newline_no_match", "可\n能 一 些", expect=_lex([], [], [])),
    Case("lex_zh_no_words", "张九带张霞去天台山。", expect=_lex([], [], [], certainty=1.0)),
]  # fmt: skip

LEXICON_EN_CASES = [
    Case("lex_en_maybe", "Maybe he went.", expect=_lex(["maybe"], [], [])),
    Case("lex_en_mayor_no_may", "The Mayor said so.", expect=_lex([], [], [])),
    Case("lex_en_MAYBE_upper", "MAYBE.", expect=_lex(["maybe"], [], [])),
    Case("lex_en_may", "It May rain", expect=_lex(["may"], [], [])),
    Case("lex_en_maybe_may_mayor_maybes", "maybe may mayor maybes mays", expect=_lex(
         ["maybe", "may"], [], [])),
    Case("lex_en_adjacent_chinese", "答案maybe是可能may对some数据",
         expect=_lex(["maybe", "may"], ["some"], [])),
    Case("lex_en_word_chars_block", "may_be may2 2may _may", expect=_lex([], [], [])),
    Case("lex_en_punctuation_adjacent", "perhaps,maybe;might.(likely)",
         expect=_lex(["perhaps", "maybe", "might", "likely"], [], [])),
    Case("lex_en_a_few_longest", "a few reasons", expect=_lex([], ["a few"], [])),
    Case("lex_en_few", "few reasons", expect=_lex([], ["few"], [])),
    Case("lex_en_A_Few_case", "A Few reasons, FEW others", expect=_lex([], ["a few", "few"], [])),
    Case("lex_en_a_fewer_no_match", "a fewer", expect=_lex([], [], [])),
    Case("lex_en_a_two_spaces_few", "a  few", expect=_lex([], ["few"], [])),
    Case("lex_en_a_newline_few", "a\nfew", expect=_lex([], ["few"], [])),
    Case("lex_en_uncertain_not_certain", "It is uncertain.", expect=_lex(["uncertain"], [], [])),
    Case("lex_en_certainly_not_certain", "Certainly, a certain man",
         expect=_lex([], ["certain"], ["certainly"])),
    Case("lex_en_unlikely_not_likely", "unlikely", expect=_lex(["unlikely"], [], [])),
    Case("lex_en_seems_vs_seem_to", "it seems to work; they seem to work",
         expect=_lex(["seems", "seem to"], [], [])),
    Case("lex_en_could_be", "could be, could become", expect=_lex(["could be"], [], [])),
    Case("lex_en_not_clear_vs_clearly", "not clear; not clearly; unclear",
         expect=_lex(["not clear", "unclear"], [], ["clearly"])),
    Case("lex_en_i_think", "I think I guess I'm not sure",
         expect=_lex(["i think", "i guess", "not sure"], [], [])),
    Case("lex_en_multiword_vague", "a lot of, lots of, a number of, a little, several, many",
         expect=_lex([], ["a lot of", "lots of", "a number of", "a little", "several", "many"],
                     [], vague_penalty=0.3)),
    Case("lex_en_in_fact_vs_factual", "in fact; in factual terms; without doubt",
         expect=_lex([], [], ["in fact", "without doubt"])),
    Case("lex_en_repeat_twice", "maybe, maybe", expect=_lex(["maybe", "maybe"], [], [])),
    Case("lex_en_uncertain_cap", "maybe perhaps possibly probably might may",
         expect={"uncertain_hits": 6, "uncertain_penalty": 0.5, "certainty": 0.5}),
    Case("lex_en_chinese_words_ignored", "可能一些确实", expect=_lex([], [], [])),
]  # fmt: skip

CONCLUSION_ZH = [
    ("zongzhi", "总之，他去了。", True),
    ("zongshangsuoshu", "综上所述", True),
    ("yinci", "因此他去了", True),
    ("suoyi", "所以", True),
    ("gap_phrase", "综合以上分析来看，他去了", True),
    ("gap_phrase_across_newline", "综合以上\n\n分析，\n来看", True),
    ("gap_phrase_empty_gap", "综合来看", True),
    ("gap_phrase_reversed", "来看，综合", False),
    ("gap_phrase_only_first", "综合分析", False),
    ("gap_phrase_only_second", "回头来看", False),
    ("gap_phrase_second_after_later_first", "来看综合以上来看", True),
    ("none_yinwei", "因为他想去", False),
    ("english_phrase_in_zh_policy", "In conclusion, therefore", False),
]
CONCLUSION_EN = [
    ("in_conclusion_case", "In Conclusion, yes", True),
    ("THEREFORE_upper", "THEREFORE.", True),
    ("overalls_no", "He wore overalls", False),
    ("thusly_no", "thusly", False),
    ("hence", "Hence, x", True),
    ("in_shortage_no", "in shortage", False),
    ("all_in_all", "All in all", True),
    ("taken_together", "taken together", True),
    ("taking_gap", "Taking all of this into account, yes", True),
    ("taking_gap_newline", "taking the\nevidence into account", True),
    ("taking_reversed", "into account taking", False),
    # the parts are "taking" and "into account" (spaces beside "…" are layout): the plain
    # phrase matches, and so does any gap
    ("taking_empty_gap_two_spaces", "taking  into account", True),
    ("taking_into_account_plain", "taking into account", True),
    ("taking_intoaccount_glued", "takinginto account", False),
    ("taking_word_boundary", "takingx all into account", False),
    ("adjacent_chinese", "结论therefore是", True),
    ("chinese_phrase_in_en_policy", "总之所以", False),
]
CONCLUSION_ZH_CASES = [
    Case(
        f"conclusion_zh_{n}",
        t,
        expect={"has_conclusion": v, "conclusion_points": 0.2 if v else 0.0},
    )
    for n, t, v in CONCLUSION_ZH
]
CONCLUSION_EN_CASES = [
    Case(
        f"conclusion_en_{n}",
        t,
        expect={"has_conclusion": v, "conclusion_points": 0.2 if v else 0.0},
    )
    for n, t, v in CONCLUSION_EN
]

PARAGRAPH_TABLE = [
    ("two", "张九\n\n张霞", 2),
    ("space_between_blank_lines", "张九\n \n\n张霞", 2),
    ("single_newline", "张九\n张霞", 1),
    ("leading_trailing_blank", "\n\n\n张九\n\n张霞\n\n \n", 2),
    ("leading_blank_only", "\n \n张九", 1),
    ("crlf", "张九\r\n\r\n张霞", 2),
    ("crlf_trailing", "张九\r\n\r\n", 1),
    ("three", "a\n\n\n\nb\n\nc", 3),
    ("tab_line", "a\n\t\nb", 2),
    ("formfeed_line", "a\n\f\nb", 2),
    ("cr_only", "a\r\rb", 1),
    ("empty", "", 0),
    ("blank_only", "  \n\n \t ", 0),
    ("ideographic_space_is_content", "a\n\u3000\nb", 1),
    ("ideographic_space_paragraph", "a\n\n\u3000\n\nb", 3),
    ("vertical_tab_is_content", "a\n\x0b\nb", 1),
    ("nbsp_paragraph", "a\n\n\u00a0\n\nb", 3),
]
PARAGRAPH_CASES = [
    Case(f"paragraphs_{n}", t,
         expect={"paragraphs": k, "paragraph_points": 0.2 if k >= 2 else 0.0})
    for n, t, k in PARAGRAPH_TABLE
]  # fmt: skip

UNICODE_CASES = [
    Case("length_combining_mark", "e\u0301", expect={"answer_length": 2}),
    Case("length_emoji_modifier", "\U0001f44d\U0001f3fd", expect={"answer_length": 2}),
    Case("length_zwj_family", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
         expect={"answer_length": 5}),
    Case("length_50_emoji", "\U0001f600" * 50, expect={"answer_length": 50, "length_points": 0.4}),
    Case("length_counts_whitespace", " \n\t\r\n  ", expect={"answer_length": 7}),
]  # fmt: skip

# Events: three base answers whose score levels are high, medium and low.
HIGH_TEXT = _totals_text(200, True, True, "")  # cq 1.0, aq 1.0, r 0.9, c 1.0 -> 98.0
MEDIUM_TEXT = filler(200, "cn")  # cq 0.55, aq 0.6, r 0.7, c 1.0 -> 70.5
LOW_TEXT = "天"  # cq 0, aq 0.2, r 0.4, c 1.0 -> 38.0
BASES = {
    "high": {"text": HIGH_TEXT, "citations": 5, "chunks": _chunks([1.0] * 5), "retrieved": 10},
    "medium": {"text": MEDIUM_TEXT, "citations": 1, "chunks": _chunks([0.5]), "retrieved": 10},
    "low": {"text": LOW_TEXT, "citations": 0, "chunks": [], "retrieved": 0},
}
# (name, base score level, events, level, (high, medium, low), warning)
EVENT_TABLE = [
    ("high_on_high", "high", ["high"], "low", (1, 0, 0), False),
    ("high_on_low", "low", ["high"], "low", (1, 0, 0), False),
    ("medium_on_high", "high", ["medium"], "medium", (0, 1, 0), False),
    ("medium_on_medium", "medium", ["medium"], "medium", (0, 1, 0), False),
    ("medium_on_low", "low", ["medium"], "low", (0, 1, 0), False),
    ("low_on_high", "high", ["low"], "high", (0, 0, 1), True),
    ("low_on_low", "low", ["low"], "low", (0, 0, 1), True),
    ("medium_low_low_on_high", "high", ["low", "medium", "low"], "medium", (0, 1, 2), True),
    ("all_severities_on_high", "high", ["low", "high", "medium", "high"], "low", (2, 1, 1), True),
    ("two_medium_on_high", "high", ["medium", "medium"], "medium", (0, 2, 0), False),
    ("no_events_high", "high", [], "high", (0, 0, 0), False),
    ("no_events_medium", "medium", [], "medium", (0, 0, 0), False),
]
EVENT_CASES = [
    Case(
        f"events_{name}",
        BASES[base]["text"],
        citations=BASES[base]["citations"],
        chunks=BASES[base]["chunks"],
        retrieved=BASES[base]["retrieved"],
        events=events,
        expect={
            "score_level": base,
            "level": level,
            "contradictions_high": counts[0],
            "contradictions_medium": counts[1],
            "contradictions_low": counts[2],
            "contradiction_warning": warn,
        },
    )
    for name, base, events, level, counts, warn in EVENT_TABLE
]

ZH_CASES = (
    LENGTH_CASES + CITATION_COUNT_CASES + RETRIEVED_CASES + RATE_CASES + RELEVANCE_CASES
    + TOTAL_CASES + LEXICON_ZH_CASES + CONCLUSION_ZH_CASES + PARAGRAPH_CASES + UNICODE_CASES
    + EVENT_CASES
)  # fmt: skip
EN_CASES = LEXICON_EN_CASES + CONCLUSION_EN_CASES


def _names(cases: list[Case]) -> list[str]:
    return [c.name for c in cases]


@pytest.fixture(scope="module")
def zh_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_cases(ZH_CASES, "answer_v1", tmp_path_factory.mktemp("answers_zh"))


@pytest.fixture(scope="module")
def en_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_cases(EN_CASES, "answer_v1_en", tmp_path_factory.mktemp("answers_en"))


# --------------------------------------------------------------------------------------------
# Tests: one per case
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", _names(LENGTH_CASES + UNICODE_CASES))
def test_length_band(zh_run: Run, name: str) -> None:
    check(zh_run, name)


@pytest.mark.parametrize("name", _names(CITATION_COUNT_CASES))
def test_citation_count_band(zh_run: Run, name: str) -> None:
    check(zh_run, name)


@pytest.mark.parametrize("name", _names(RETRIEVED_CASES))
def test_retrieved_count_band(zh_run: Run, name: str) -> None:
    check(zh_run, name)


@pytest.mark.parametrize("name", _names(RATE_CASES))
def test_citation_rate_band(zh_run: Run, name: str) -> None:
    check(zh_run, name)


@pytest.mark.parametrize("name", _names(RELEVANCE_CASES))
def test_citation_relevance(zh_run: Run, name: str) -> None:
    check(zh_run, name)


@pytest.mark.parametrize("name", _names(TOTAL_CASES))
def test_total_on_level_cut(zh_run: Run, name: str) -> None:
    check(zh_run, name)


@pytest.mark.parametrize("name", _names(LEXICON_ZH_CASES))
def test_lexicon_zh(zh_run: Run, name: str) -> None:
    check(zh_run, name)


@pytest.mark.parametrize("name", _names(LEXICON_EN_CASES))
def test_lexicon_en(en_run: Run, name: str) -> None:
    check(en_run, name)


@pytest.mark.parametrize("name", _names(CONCLUSION_ZH_CASES))
def test_conclusion_zh(zh_run: Run, name: str) -> None:
    check(zh_run, name)


@pytest.mark.parametrize("name", _names(CONCLUSION_EN_CASES))
def test_conclusion_en(en_run: Run, name: str) -> None:
    check(en_run, name)


@pytest.mark.parametrize("name", _names(PARAGRAPH_CASES))
def test_paragraphs(zh_run: Run, name: str) -> None:
    check(zh_run, name)


@pytest.mark.parametrize("name", _names(EVENT_CASES))
def test_contradiction_events(zh_run: Run, name: str) -> None:
    check(zh_run, name)


def test_a_policy_mapping_medium_to_warn(tmp_path: Path) -> None:
    """The warning follows the policy's mapping, not the severity's name: with medium -> warn, a
    medium event warns and lowers nothing (SQL and reference alike, and by hand below)."""
    text = (POLICIES / "answer_v1.yaml").read_text(encoding="utf-8")
    assert "    medium: medium\n" in text
    policy = tmp_path / "answer_warn_medium.yaml"
    policy.write_text(
        text.replace("    medium: medium\n", "    medium: warn\n").replace(
            "answer_policy_version: answer_v1", "answer_policy_version: answer_warn_medium"
        ),
        encoding="utf-8",
    )
    cases = [dataclasses.replace(c, expect={}) for c in EVENT_CASES]
    params = load_params("answer_v1")
    params["contradictions"]["medium"] = "warn"
    run = run_cases(cases, str(policy), tmp_path / "out", reference=("answer_warn_medium", params))
    for name in run.cases:
        check(run, name)
    by_hand = {  # case: (level, warning)
        "events_two_medium_on_high": ("high", True),
        "events_medium_on_low": ("low", True),
        "events_all_severities_on_high": ("low", True),
        "events_high_on_high": ("low", False),
    }
    for name, (level, warning) in by_hand.items():
        assert (run.got[name]["level"], bool(run.got[name]["contradiction_warning"])) == (
            level,
            warning,
        )


# --------------------------------------------------------------------------------------------
# Tests: whole runs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run_name", ["zh_run", "en_run"])
def test_output_columns_order_and_types(request: pytest.FixtureRequest, run_name: str) -> None:
    run: Run = request.getfixturevalue(run_name)
    frame = run.frame
    assert list(frame.columns) == list(OUTPUT_COLUMNS)
    assert len(frame) == len(run.cases)
    # ordered by answer_id
    assert list(frame["answer_id"]) == sorted(run.ids.values())
    for col in INT_COLUMNS:
        assert pd.api.types.is_integer_dtype(frame[col]), col
    for col in BOOL_COLUMNS:
        assert pd.api.types.is_bool_dtype(frame[col]), col
    for col in FLOAT_COLUMNS:
        assert pd.api.types.is_float_dtype(frame[col]), col
    # NULL (not NaN) where the spec says NULL
    table = pq.read_table(run.out_dir / "answers.parquet")
    for col in ("relevance_mean", "citation_rate"):
        expected = sum(1 for r in run.ref.values() if r[col] is None)
        assert table.column(col).null_count == expected, col


@pytest.mark.parametrize("events", ["none", "empty_frame"])
def test_without_events(tmp_path: Path, events: str) -> None:
    """No events file (events=None) or an events table with no rows: counts 0, level unchanged."""
    # keep only the hand-stated score level (the events' expectations no longer apply)
    cases = [
        Case(c.name, c.text, c.citations, c.chunks, c.retrieved,
             c.events if events == "none" else [],
             {k: v for k, v in c.expect.items() if k == "score_level"})
        for c in EVENT_CASES + TOTAL_CASES
    ]  # fmt: skip
    run = run_cases(cases, "answer_v1", tmp_path, with_events=events != "none")
    for c in cases:
        check(run, c.name)
        got = run.got[c.name]
        assert got["level"] == got["score_level"]
        assert (got["contradictions_high"], got["contradictions_medium"]) == (0, 0)
        assert got["contradictions_low"] == 0 and not got["contradiction_warning"]


# --------------------------------------------------------------------------------------------
# Randomized
# --------------------------------------------------------------------------------------------

ZH_WORDS = ["可能", "也许", "大概", "似乎", "好像", "应该", "或许", "估计", "猜测", "不确定",
            "不清楚", "未知", "一些", "某些", "若干", "多个", "少量", "大量", "很多", "不少",
            "较多", "较少", "确实", "明确", "清楚", "显然", "毫无疑问", "事实上", "实际上",
            "具体来说", "总之", "综上", "因此", "所以", "综合", "来看", "不", "太", "确定"]  # fmt: skip
EN_WORDS = ["maybe", "perhaps", "possibly", "probably", "might", "may", "could be", "seems",
            "seem to", "appears to", "apparently", "likely", "unlikely", "presumably", "i think",
            "i guess", "not sure", "unsure", "uncertain", "unclear", "unknown", "not clear",
            "some", "several", "a few", "few", "a number of", "many", "much", "a lot of",
            "lots of", "numerous", "various", "a little", "certain", "clearly", "definitely",
            "certainly", "indeed", "in fact", "actually", "specifically", "undoubtedly",
            "without doubt", "obviously", "evidently", "in conclusion", "in summary",
            "to summarize", "to sum up", "overall", "therefore", "thus", "hence", "in short",
            "all in all", "taken together", "taking", "into account"]  # fmt: skip
NEUTRAL = ["张九", "张霞", "天台山", "斗剑", "原因", "，", "。", "？", "the", "mayor", "cert",
           "a", "fewer", "ma", "y", "be", "un", "_", "2", "x", "(", ")", ",", ".", "…", "'"]  # fmt: skip
BLANKS = [" ", " ", "\n", "\n\n", "\n \n", "\r\n", "\r\n\r\n", "\t", "\n\t\n", "\n\n\n"]
SEPARATORS = ["", "", " ", " ", "，", "\n"]


def _case_variant(rng: random.Random, word: str) -> str:
    roll = rng.random()
    if roll < 0.15:
        return word.upper()
    if roll < 0.3:
        return word.title()
    return word


def random_text(rng: random.Random) -> str:
    parts: list[str] = []
    for _ in range(rng.choice([0, 1, 3, 8, 15, 30, 60])):
        roll = rng.random()
        if roll < 0.3:
            piece = rng.choice(ZH_WORDS)
        elif roll < 0.55:
            piece = _case_variant(rng, rng.choice(EN_WORDS))
        elif roll < 0.8:
            piece = rng.choice(NEUTRAL)
        else:
            piece = rng.choice(BLANKS)
        parts.append(piece)
        parts.append(rng.choice(SEPARATORS))
    text = "".join(parts)
    roll = rng.random()
    if roll < 0.1:  # long answers around the 1000 / 2000 cuts
        target = rng.choice([995, 1000, 1001, 1500, 1999, 2000, 2001, 2500])
        cut = rng.randrange(0, len(text) + 1)
        pad = filler(max(target - len(text), 0), rng.choice(["cn", "ascii"]))
        text = (text[:cut] + pad + text[cut:])[: max(target, len(text))]
    elif roll < 0.2:  # short answers around the 50 / 100 cuts
        target = rng.choice([49, 50, 99, 100, 101])
        text = (text + filler(target, "cn"))[:target]
    return text


def random_cases(seed: int, n: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        n_chunks = rng.choice([0, 0, 1, 2, 4, 5, 6, 9])
        ids = rng.sample([f"c{k}" for k in range(30)], n_chunks)
        scores = [
            rng.choice([0.0, 1.0, 0.5, 0.25, round(rng.random(), 2), rng.random(), rng.random()])
            for _ in ids
        ]
        n_cit = rng.choice([0, 1, 2, 3, 4, 5, 6, 8])
        citations = rng.sample([f"c{k}" for k in range(30)], n_cit)
        retrieved = rng.choice([0, 1, 3, 4, 5, 9, 10, 15, 19, 20, 21, 30, 100])
        events = [
            rng.choice(["high", "medium", "low", "low"])
            for _ in range(rng.choice([0, 0, 0, 1, 2, 3]))
        ]
        cases.append(
            Case(
                f"random_{i}",
                random_text(rng),
                citations=citations,
                chunks=list(zip(ids, scores, strict=True)),
                retrieved=retrieved,
                events=events,
                query_id=f"q{rng.randrange(40)}",
            )
        )
    return cases


@pytest.mark.parametrize(("policy", "seed"), [("answer_v1", 20261122), ("answer_v1_en", 1234567)])
def test_randomized_against_reference(tmp_path: Path, policy: str, seed: int) -> None:
    cases = random_cases(seed, 300)
    # unpadded ids: "r10" sorts before "r2" (string order)
    ids = {c.name: f"r{i}" for i, c in enumerate(cases)}
    run = run_cases(cases, policy, tmp_path, ids=ids)
    assert list(run.frame["answer_id"]) == sorted(ids.values())
    failures = []
    for c in cases:
        problems = mismatches(run.got[c.name], run.ref[c.name])
        if problems:
            failures.append(f"{c.name} text={c.text[:300]!r}: " + "; ".join(problems))
    assert not failures, f"{len(failures)} of {len(cases)} differ:\n" + "\n".join(failures[:15])


# --------------------------------------------------------------------------------------------
# The oracle shares no parameter with the code
# --------------------------------------------------------------------------------------------


def _without_first(policy: str, lexicon: str) -> str:
    """An override dropping the first term of one of the policy's lexicons."""
    return f"lexicons.{lexicon}=[{', '.join(load_params(policy)['lexicons'][lexicon][1:])}]"


ONE_CHANGE: dict[str, tuple[str, str]] = {
    "weight": ("answer_v1", "weights.certainty=2.0"),
    "band": (
        "answer_v1",
        "length=[{at_least: 2001, points: 0.3}, {at_least: 1001, points: 0.5}, "
        "{at_least: 100, points: 0.55}, {at_least: 50, points: 0.4}, {at_least: 0, points: 0.2}]",
    ),
    "level cut": ("answer_v1", "levels.high_at_least=70"),
    "lexicon zh": ("answer_v1", _without_first("answer_v1", "uncertain")),
    "lexicon en": ("answer_v1_en", _without_first("answer_v1_en", "vague")),
}
"""One number or word of a packaged policy changed (``--set``), the reference left as it is."""


@pytest.mark.parametrize("change", sorted(ONE_CHANGE))
def test_the_oracles_disagree_with_a_changed_policy(tmp_path: Path, change: str) -> None:
    """The reference and the pandas pipeline (``benchmarks/answers_pandas.py``) read their own
    frozen parameters: the code with one packaged weight, band, level cut or lexicon entry
    changed must disagree with both on random answers (the same answers agree under the
    packaged policies: ``test_randomized_against_reference`` here, and
    ``tests/benchmarks/test_answers_bench.py``). The version column differs by construction and
    is left out."""
    policy, override = ONE_CHANGE[change]
    cases = random_cases(37, 150)
    run = run_cases(cases, policy, tmp_path / "duckscore", overrides=[override])
    differing = [
        name
        for name in run.cases
        if any(
            not m.startswith("answer_policy_version")
            for m in mismatches(run.got[name], run.ref[name])
        )
    ]
    assert differing, f"{override}: the code still equals the reference"
    data = tmp_path / "data"
    data.mkdir()
    frames = _frames(cases, run.ids)
    for name, frame in zip(("answers", "citations", "chunks", "events"), frames, strict=True):
        frame.to_parquet(data / f"{name}.parquet", index=False)
    run_pandas(data, tmp_path / "pandas", policy)
    problems = compare(run.out_dir / "answers.parquet", tmp_path / "pandas" / "answers.parquet")
    assert [p for p in problems if "answer_policy_version" not in p], (
        f"{override}: the code still equals the pandas pipeline"
    )
