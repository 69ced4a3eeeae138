"""Tests written for mutants of sql/bids/_bid_stages.sql, contract.sql and gates.sql that survived
the fast tests (tests/mutants/, issue 37). Most are boundary comparisons (`<=` made `<`, `>` made
`>=`, and the reverse) that no value of the tender fixture reaches; the others are defaults of
rows that are missing (coalesce's 0, 1, FALSE, [] or the token itself; NULLIF's 0 made 1 in a
gate), joins made `OR`, a rule reason's branch, a policy value equal to a mutant's 1.0, and
orders that only a tie, a sum's last bit or a report over budget can see. One small folder, built
here, puts a value on each cut of bid_v1 (docs/bids.md, "What `bid_v1` computes"): a hit at rank
`chunk_top_k` (20) and one past it, synonyms of another project and tenant, a longer term sharing
a prefix, an impossible date, a leap day, 28-digit amounts and one of 29 digits, past a
DECIMAL(38, 10) (steps 1-3); a candidate of the SQL branch alone (step 3); one degraded candidate
of five (the `alert_ratio` 0.2), one of one, none (step 4); a relevance of exactly
`low_relevance` (0.3), chunks of exactly `criterion_tokens` (6000), `max_items` (8) items summing
to 6000 and a report summing to `report_tokens` (24,000) (step 5); formula values of a project's
own qualified bidders, one missing, one under 1, and a bidder without chunks (steps 6-7); weights
all 0 or not summing to 1, runs scored in run_id order, a max_score of 1, nine candidates tied on
both scores around the agreement's top `max_items` (step 8); weights, weighted scores, run totals
and confidences that sum to another double in the reverse order, run totals deviating by between
1 % and 20 % (steps 7-9); cited boxes on each edge of their chunk's box or flat, a claim citing
four chunks (step 10); totals that differ and totals that tie (the rank, step 12); an evaluation
without criteria, claims or candidates, llm criteria without runs, and inputs without their
optional columns. A second run moves four policy values (min_items 1, a deviation threshold of
0.5, a 12,000-token report, an SQL branch score of 0.7) to reach the rest, and a third folder has
one citation, one claim and one candidate (each gate's denominator 1). Every expected value is
worked out by hand from docs/bids.md or in plain Python here, and each test asserts that its input
really sits on the cut it is about."""

from __future__ import annotations

import calendar
import json
import math
from decimal import Decimal, localcontext
from pathlib import Path

import pandas as pd
import pytest

from duckscore.bids.pipeline import score_bids
from duckscore.core.errors import InputError

# bid_v1's cuts (docs/bids.md, "The parameters of `bid_v1`")
CHUNK_TOP_K = 20
LOW_RELEVANCE = 0.3
CRITERION_TOKENS = 6000
MAX_ITEMS = 8
REPORT_TOKENS = 24000
ALERT_RATIO = 0.2
MIN_ITEMS_V1 = 2
MAX_DEVIATION_V1 = 20.0
SQL_BRANCH_SCORE_V1 = 1.0
WEIGHTS = {"evidence_quality": 0.4, "retrieval_agreement": 0.3, "model_stability": 0.3}
AGREEMENT_WHEN_UNAVAILABLE = 0.5
SINGLE_RUN_STABILITY = 0.5

# supplier s1's first criterion: eight chunks of 750 tokens (8 × 750 = 6000), ranks 1-7 and 20,
# relevances falling to exactly 0.3; k19, at rank 21, is past chunk_top_k
Q1_CHUNKS = {
    "k11": (1, 0.9),
    "k12": (2, 0.85),
    "k13": (3, 0.8),
    "k14": (4, 0.75),
    "k15": (5, 0.7),
    "k16": (6, 0.65),
    "k17": (20, 0.6),
    "k18": (7, LOW_RELEVANCE),
}
Q1_TOKENS = 750
# s1's three other criteria: one chunk of exactly criterion_tokens each
FULL_CHUNKS = {"q2": "k21", "q3": "k31", "q4": "k41"}
# supplier s2: five candidates of score_raw 0.5, k55 without a rerank record (degraded: missing,
# relevance 0.5); their relevances, in report order, sum to another double in the reverse order
S2_CHUNKS = ["k51", "k52", "k53", "k54", "k55"]
S2_RERANK = {"k51": 0.9, "k52": 0.8, "k53": 0.7, "k54": 0.6}
S2_SCORE_RAW = 0.5
# supplier s8 (ev4) has one candidate, k61, without a rerank record (q6, criterion CP of p4)
# evaluation -> (its project, the weights of Z1 and Z2): two llm criteria without a query, Z1
# with one run; the weights of p2 are all 0, those of p3 do not sum to 1
WEIGHTED = {"ev2": ("p2", (0.0, 0.0)), "ev3": ("p3", (1.0, 3.0))}
# evaluation ev5 (project p5): one llm criterion W1 of this weight, two runs scoring 50 each
# (1e306 × 50 is still a double: 5e307); a weight of 1e308 would overflow (both totals +inf)
LARGE_WEIGHT = 1e306
HUGE_WEIGHT = 1e308
# the bidders of the formula rule r_price (criterion CP of projects p1 and p4): bid_price; s8's
# is missing, s7 has no evaluation, s5's is 200 times the lowest (a value of 0.5); s3 has no
# evaluation and no chunk, so it lacks r_docs' `tech`: its price, p1's lowest, is not a qualified
# bidder's
BID_PRICES = {
    ("p1", "s1"): 100.0,
    ("p1", "s2"): 200.0,
    ("p1", "s3"): 50.0,
    ("p4", "s7"): 40.0,
    ("p4", "s8"): None,
    ("p4", "s5"): 8000.0,
}
# every evaluation row: ev6's project p6 has no criterion
EVALUATIONS = [
    ("ev1", "s1", "p1"),
    ("ev1", "s2", "p1"),
    ("ev2", "s9", "p2"),
    ("ev3", "s9", "p3"),
    ("ev4", "s8", "p4"),
    ("ev5", "s9", "p5"),
    ("ev6", "s6", "p6"),
    ("ev7", "s5", "p4"),
    ("ev8", "sa", "p7"),
    ("ev8", "sb", "p7"),
    ("ev9", "sc", "p8"),
    ("ev9", "sd", "p8"),
    ("ev10", "se", "p9"),
]
# evaluation ev8 (project p7): three llm criteria whose weights, weighted scores, run totals and
# weighted confidences each sum to another double in the reverse order, scored for sa in three
# runs (r1-r3) whose totals deviate by between 1 % and 20 %; sb has no runs (a total of 0)
P7_WEIGHTS = {"A1": 0.1, "A2": 0.2, "A3": 0.3}
MAX_SCORE = 100.0  # of every criterion of p7 and p8
P7_SCORES = {"A1": (1.6, 3.4, 3.9), "A2": (3.5, 3.7, 1.6), "A3": (3.2, 2.5, 3.4)}
# q7 (ev8, sa, A1): nine candidates, more than max_items, every score_raw and score_rerank tied,
# so chunk_id alone decides which of them the agreement's top max_items leave out
Q7_CHUNKS = [f"k7{i}" for i in range(1, 10)]
TIED_SCORE = 0.5
# evaluation ev9 (project p8): three llm criteria of weight 0; sc's runs (one, none, two) give
# confidences whose plain mean is another double in the reverse order; sd has no runs, and both
# total 0
P8_RUNS = {"B1": (50.0,), "B2": (), "B3": (0.0, 8.0)}
# evaluation ev10 (project p9): q8's only candidate comes from the SQL branch (se's bid fields
# name chunk k81), with no hit and no rerank record
SQL_CONDITION = "bid_price > 0"
# the LLM's runs: (evaluation, supplier, criterion, run, score); L1 of p4 has max_score 1, and
# its three scores sum to another double when added in the reverse order
SOFT_SCORES = [
    ("ev2", "s9", "Z1", "r1", 50.0),
    ("ev3", "s9", "Z1", "r1", 50.0),
    ("ev4", "s8", "L1", "r1", 0.1),
    ("ev4", "s8", "L1", "r2", 0.2),
    ("ev4", "s8", "L1", "r3", 0.3),
    ("ev5", "s9", "W1", "r1", 50.0),
    ("ev5", "s9", "W1", "r2", 50.0),
    *[
        ("ev8", "sa", criteria_id, f"r{run}", score)
        for criteria_id, scores in P7_SCORES.items()
        for run, score in enumerate(scores, start=1)
    ],
    *[
        ("ev9", "sc", criteria_id, f"r{run}", score)
        for criteria_id, scores in P8_RUNS.items()
        for run, score in enumerate(scores, start=1)
    ],
]
# an amount whose exact product has 29 digits before the point, one more than DuckDB's
# DECIMAL(38, 10) holds (q9: ev8, sb, A1)
OVERFLOW = "1234567890123456789012345万"
# query -> its text: p1's synonyms, then dates and amounts
QUERY_TEXTS = {
    "q1": "evidence file, evidence",
    "q2": "evidence 2026-2-30 1,002,003",
    "q3": "evidence 2026年2月30日 2024-2-29",
    "q4": "evidence 123456789012345678901234万",
    "q5": "evidence 12345678901234567890.5亿",
    "q6": "evidence",
    "q7": "evidence",
    "q8": "evidence",
    "q9": f"evidence {OVERFLOW}",
}
# p1's dictionary: `evidence` and a longer term that starts with it; the same term in another
# project of the tenant and in another tenant's project p1
SYNONYMS = [
    "t1,p1,evidence,proof",
    "t1,p1,evidence file,dossier",
    "t1,p2,evidence,witness",
    "t2,p1,evidence,secret",
]

# the cited chunk's box, (x0, y0, x1, y1) on page 3, and one cited box per claim
CHUNK_BOX = (10.0, 20.0, 110.0, 220.0)
CITED_BOXES = {
    "cl_inside": (30.0, 50.0, 60.0, 100.0),
    "cl_left": (10.0, 50.0, 60.0, 100.0),
    "cl_top": (30.0, 20.0, 60.0, 100.0),
    "cl_right": (30.0, 50.0, 110.0, 100.0),
    "cl_bottom": (30.0, 50.0, 60.0, 220.0),
    "cl_flat_x": (30.0, 50.0, 30.0, 100.0),
    "cl_flat_y": (30.0, 50.0, 60.0, 50.0),
}
# claim -> the coordinate (0-3: x0, y0, x1, y1) it shares with the chunk's box
ON_AN_EDGE = {"cl_left": 0, "cl_top": 1, "cl_right": 2, "cl_bottom": 3}
# claim -> the two coordinates of its box that are equal
FLAT = {"cl_flat_x": (0, 2), "cl_flat_y": (1, 3)}
# claim cl_many cites four chunks with the box of cl_inside on page 3, listed neither in chunk_id
# order nor in its reverse: kbox (resolvable) and three whose page is 1 (not resolvable, yet the
# claim is supported)
MANY_CITATIONS = ["k21", "kbox", "k11", "k31"]


HEADERS = {
    "evaluations.csv": "evaluation_id,supplier_id,tenant_id,project_id",
    "criteria.csv": "tenant_id,project_id,criteria_id,name,weight,max_score,method",
    "chunks.csv": "tenant_id,chunk_id,project_id,supplier_id,doc_id,doc_type,page,"
    "bbox_x0,bbox_y0,bbox_x1,bbox_y1,tokens,text",
    "hits.csv": "query_id,chunk_id,score_raw,rank",
    "bid_fields.csv": "tenant_id,project_id,supplier_id,chunk_id,supplier_code,qualification_level,"
    "registered_capital,bid_price,delivery_period,warranty_period",
    "claims.csv": "claim_id,evaluation_id,supplier_id,criteria_id,claim_text",
    "claim_citations.csv": "claim_id,chunk_id,page,bbox_x0,bbox_y0,bbox_x1,bbox_y1",
}


def csv(header: str, lines: list[str]) -> str:
    return "\n".join([header, *lines]) + "\n"


def chunk_line(chunk_id: str, project: str, supplier: str, tokens: int, page: int = 1) -> str:
    box = ",".join(str(v) for v in CHUNK_BOX)
    return f"t1,{chunk_id},{project},{supplier},d_{chunk_id},tech,{page},{box},{tokens},text"


def chunk_lines() -> list[str]:
    chunks = [chunk_line(c, "p1", "s1", Q1_TOKENS) for c in [*Q1_CHUNKS, "k19"]]
    chunks += [chunk_line(c, "p1", "s1", CRITERION_TOKENS) for c in FULL_CHUNKS.values()]
    chunks += [chunk_line(c, "p1", "s2", 100) for c in S2_CHUNKS]
    chunks.append(chunk_line("k61", "p4", "s8", 100))
    chunks += [chunk_line(c, "p7", "sa", 100) for c in Q7_CHUNKS]
    chunks.append(chunk_line("k81", "p9", "se", 100))
    return [*chunks, chunk_line("kbox", "p1", "s1", 10, page=3)]


def hit_lines() -> list[str]:
    hits = [f"q1,{c},0.5,{rank}" for c, (rank, _) in Q1_CHUNKS.items()] + ["q1,k19,0.5,21"]
    hits += [f"{q},{c},0.5,1" for q, c in FULL_CHUNKS.items()]
    hits += [f"q5,{c},{S2_SCORE_RAW},{i}" for i, c in enumerate(S2_CHUNKS, start=1)]
    hits += [f"q7,{c},{TIED_SCORE},{i}" for i, c in enumerate(Q7_CHUNKS, start=1)]
    return [*hits, "q6,k61,0.5,1"]


def rerank_lines() -> list[str]:
    rerank = [f"q1,{c},ok,{relevance}" for c, (_, relevance) in Q1_CHUNKS.items()]
    rerank += [f"{q},{c},ok,0.9" for q, c in FULL_CHUNKS.items()]
    rerank += [f"q7,{c},ok,{TIED_SCORE}" for c in Q7_CHUNKS]
    return rerank + [f"q5,{c},ok,{score}" for c, score in S2_RERANK.items()]


def criteria_lines() -> list[str]:
    lines = [f"t1,p1,C{i},c{i},0.25,100,llm" for i in range(1, 5)]
    lines += ["t1,p1,CR,documents,0,100,required", "t1,p1,CP,price,0,100,formula"]
    lines += ["t1,p4,CP,price,1,100,formula", "t1,p4,L1,l1,0,1,llm"]
    lines.append(f"t1,p5,W1,w1,{LARGE_WEIGHT!r},100,llm")
    lines += [f"t1,p7,{c},{c},{weight!r},100,llm" for c, weight in P7_WEIGHTS.items()]
    lines += [f"t1,p8,{c},{c},0,100,llm" for c in P8_RUNS]
    lines.append("t1,p9,D1,d1,0,100,llm")
    return lines + [
        f"t1,{project},{z},{z},{weight},100,llm"
        for project, weights in WEIGHTED.values()
        for z, weight in zip(["Z1", "Z2"], weights, strict=True)
    ]


# a required rule every supplier of p1 passes; the formula scores p1 and p4
RULES = """\
rules:
  - {id: r_docs, criteria_id: CR, kind: required, documents: [tech]}
  - {id: r_price, criteria_id: CP, kind: formula, score: "100 * min(bid_price) / bid_price"}
"""


def citation_lines() -> list[str]:
    lines = [f"{c},kbox,3,{','.join(str(v) for v in b)}" for c, b in CITED_BOXES.items()]
    box = ",".join(str(v) for v in CITED_BOXES["cl_inside"])
    return lines + [f"cl_many,{chunk},3,{box}" for chunk in MANY_CITATIONS]


def folder_files() -> dict[str, str]:
    # the texts quoted: 1,002,003 has commas
    owners = {f"q{i}": ("s1", f"C{i}") for i in range(1, 5)} | {"q5": ("s2", "C1")}
    queries = [f'{q},t1,p1,ev1,{s},{c},"{QUERY_TEXTS[q]}",' for q, (s, c) in owners.items()]
    queries.append(f'q6,t1,p4,ev4,s8,CP,"{QUERY_TEXTS["q6"]}",')
    queries.append(f'q7,t1,p7,ev8,sa,A1,"{QUERY_TEXTS["q7"]}",')
    queries.append(f'q9,t1,p7,ev8,sb,A1,"{QUERY_TEXTS["q9"]}",')
    queries.append(f'q8,t1,p9,ev10,se,D1,"{QUERY_TEXTS["q8"]}","{SQL_CONDITION}"')
    evaluations = [f"{ev},{supplier},t1,{project}" for ev, supplier, project in EVALUATIONS]
    soft_scores = [",".join(str(v) for v in run) for run in SOFT_SCORES]
    bidders = [(p, s, "" if price is None else price) for (p, s), price in BID_PRICES.items()]
    fields = [f"t1,{p},{s},k11,X,A,1000,{price},10,12" for p, s, price in bidders]
    return {
        "evaluations.csv": csv(HEADERS["evaluations.csv"], evaluations),
        "criteria.csv": csv(HEADERS["criteria.csv"], criteria_lines()),
        "rules.yaml": RULES,
        "queries.csv": csv(
            "query_id,tenant_id,project_id,evaluation_id,supplier_id,criteria_id,query_text,"
            "sql_condition",
            queries,
        ),
        "chunks.csv": csv(HEADERS["chunks.csv"], chunk_lines()),
        "hits.csv": csv(HEADERS["hits.csv"], hit_lines()),
        "bid_fields.csv": csv(
            HEADERS["bid_fields.csv"], [*fields, "t1,p9,se,k81,X,A,1000,1,10,12"]
        ),
        "rerank.csv": csv("query_id,chunk_id,status,score_rerank", rerank_lines()),
        "soft_scores.csv": csv("evaluation_id,supplier_id,criteria_id,run_id,score", soft_scores),
        "claims.csv": csv(
            HEADERS["claims.csv"],
            [f"{claim},ev1,s1,C1,a claim" for claim in [*CITED_BOXES, "cl_many"]],
        ),
        "claim_citations.csv": csv(HEADERS["claim_citations.csv"], citation_lines()),
        "synonyms.csv": csv("tenant_id,project_id,term,canonical", SYNONYMS),
    }


def scored(
    factory: pytest.TempPathFactory,
    overrides: list[str] | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    folder = factory.mktemp("boundaries") / "in"
    folder.mkdir()
    for name, text in (files or folder_files()).items():
        (folder / name).write_text(text, encoding="utf-8")
    score_bids(folder, folder.parent / "out", overrides=overrides)
    return folder.parent / "out"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scored(tmp_path_factory)


def table(out: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(out / f"{name}.parquet")


def only_row(frame: pd.DataFrame, **keys: str) -> pd.Series:
    """The one row of `frame` with these column values."""
    rows = frame[(frame[list(keys)] == pd.Series(keys)).all(axis=1)]
    assert len(rows) == 1, keys
    return rows.iloc[0]


def evidence_of(out: Path, query_id: str) -> pd.DataFrame:
    evidence = table(out, "evidence")
    return evidence[evidence["query_id"] == query_id].set_index("chunk_id")


def test_a_hit_at_rank_chunk_top_k_is_a_candidate_and_one_past_it_is_dropped(out: Path) -> None:
    assert Q1_CHUNKS["k17"][0] == CHUNK_TOP_K
    candidates = table(out, "candidates")
    q1 = candidates[candidates["query_id"] == "q1"].set_index("chunk_id")
    assert sorted(q1.index) == sorted(Q1_CHUNKS)
    assert q1.loc["k17", "rank"] == CHUNK_TOP_K
    log = table(out, "filter_log")
    assert list(log.itertuples(index=False, name=None)) == [("q1", "k19", "chunk_top_k")]


def test_a_relevance_of_exactly_low_relevance_is_not_low(out: Path) -> None:
    q1 = evidence_of(out, "q1")
    assert q1.loc["k18", "relevance"] == LOW_RELEVANCE
    # relevance 0.3 is not < 0.3, and k18 is the only chunk of its document: class 0
    assert q1.loc["k18", "doc_rank"] == 1
    assert q1.loc["k18", "trim_class"] == 0
    assert (q1["trim_class"] == 0).all()


def test_a_chunk_of_exactly_criterion_tokens_is_not_oversize_and_fits(out: Path) -> None:
    evidence = table(out, "evidence").set_index("chunk_id")
    for query_id, chunk_id in FULL_CHUNKS.items():
        row = evidence.loc[chunk_id]
        assert (row["query_id"], row["tokens"]) == (query_id, CRITERION_TOKENS)
        assert not row["oversize"]
        assert row["keep_order"] == 1
        assert row["in_criterion_pack"]


def test_max_items_summing_to_criterion_tokens_all_fit(out: Path) -> None:
    q1 = evidence_of(out, "q1").sort_values("keep_order")
    # every class 0, priority = relevance (confidence 1): keep order by relevance descending
    by_relevance = sorted(Q1_CHUNKS, key=lambda c: -Q1_CHUNKS[c][1])
    assert list(q1.index) == by_relevance
    assert list(q1["keep_order"]) == list(range(1, MAX_ITEMS + 1))
    assert int(q1["tokens"].sum()) == CRITERION_TOKENS == MAX_ITEMS * Q1_TOKENS
    assert q1["in_criterion_pack"].all()


def test_a_report_of_exactly_report_tokens_is_packed_whole(out: Path) -> None:
    evidence = table(out, "evidence")
    s1 = evidence[evidence["supplier_id"] == "s1"]
    assert s1["in_criterion_pack"].all()
    # 8 × 750 + 3 × 6000: the last item of the report brings the running sum to the cut
    assert int(s1["tokens"].sum()) == REPORT_TOKENS
    assert sorted(s1["report_order"]) == list(range(1, len(s1) + 1))
    assert s1["packed"].all()


def test_a_degraded_ratio_of_exactly_alert_ratio_raises_no_alert(out: Path) -> None:
    evaluations = table(out, "evaluations").set_index("supplier_id")
    s2 = evaluations.loc["s2"]
    assert (s2["candidates"], s2["degraded_candidates"]) == (len(S2_CHUNKS), 1)
    assert s2["rerank_degraded_ratio"] == 1 / len(S2_CHUNKS) == ALERT_RATIO
    assert not s2["rerank_alert"]


@pytest.mark.parametrize("evaluation_id", list(WEIGHTED))
def test_confidence_is_weighted_by_the_weights_or_their_plain_mean_when_all_zero(
    out: Path, evaluation_id: str
) -> None:
    criteria = table(out, "criteria")
    z = criteria[criteria["evaluation_id"] == evaluation_id].set_index("criteria_id")
    weights = WEIGHTED[evaluation_id][1]
    assert list(z.sort_index()["weight"]) == list(weights)
    # no query: evidence quality 0, agreement 0.5; Z1 one run (stability 0.5), Z2 none (0)
    z2 = WEIGHTS["retrieval_agreement"] * AGREEMENT_WHEN_UNAVAILABLE
    z1 = z2 + WEIGHTS["model_stability"] * SINGLE_RUN_STABILITY
    assert z.loc["Z1", "confidence"] == pytest.approx(z1, abs=1e-12)
    assert z.loc["Z2", "confidence"] == pytest.approx(z2, abs=1e-12)
    total = sum(weights)
    # both cuts in sight: Σ weight is 0 (the plain mean) or not 1 (a division that counts)
    assert total in (0.0, 4.0)
    expected = (z1 + z2) / 2 if total == 0 else (weights[0] * z1 + weights[1] * z2) / total
    evaluations = table(out, "evaluations").set_index("evaluation_id")
    assert evaluations.loc[evaluation_id, "confidence"] == pytest.approx(expected, abs=1e-12)


def resolvable(box: tuple[float, float, float, float]) -> bool:
    """docs/bids.md step 10: x0 < x1, y0 < y1, inside the chunk's box with its edges."""
    x0, y0, x1, y1 = box
    cx0, cy0, cx1, cy1 = CHUNK_BOX
    return x0 < x1 and y0 < y1 and cx0 <= x0 and cy0 <= y0 and x1 <= cx1 and y1 <= cy1


@pytest.mark.parametrize("claim", list(CITED_BOXES))
def test_a_cited_box_on_an_edge_resolves_and_a_flat_one_does_not(out: Path, claim: str) -> None:
    box = CITED_BOXES[claim]
    if claim in ON_AN_EDGE:
        assert box[ON_AN_EDGE[claim]] == CHUNK_BOX[ON_AN_EDGE[claim]]
    if claim in FLAT:
        low, high = FLAT[claim]
        assert box[low] == box[high]
    expected = resolvable(box)
    assert expected == (claim not in FLAT)
    claims = table(out, "claims").set_index("claim_id")
    assert claims.loc[claim, "citations"] == 1
    assert claims.loc[claim, "resolvable"] == int(expected)
    assert claims.loc[claim, "status"] == ("supported" if expected else "unsupported_claim")


def test_equal_run_totals_deviate_by_zero(out: Path) -> None:
    consistency = table(out, "consistency")
    totals = list(consistency[consistency["evaluation_id"] == "ev5"]["run_total"])
    assert totals == [LARGE_WEIGHT * 50.0] * 2 == [5e307] * 2
    ev5 = table(out, "evaluations").set_index("evaluation_id").loc["ev5"]
    assert ev5["runs"] == 2
    assert ev5["score_deviation_pct"] == 0.0
    assert not ev5["calibration_needed"]
    assert "score_deviation" not in list(ev5["hitl_reasons"])


def test_run_totals_that_overflow_stop_the_run_and_write_nothing(tmp_path: Path) -> None:
    """1e308 × 50 is +inf in both of ev5's runs (their difference inf − inf would be NaN, and
    contract.jsonl held `"total_score":Infinity`): the run stops at the first such row."""
    assert math.isinf(HUGE_WEIGHT * 50.0)
    files = folder_files()
    large, huge = (f"t1,p5,W1,w1,{weight!r},100,llm" for weight in (LARGE_WEIGHT, HUGE_WEIGHT))
    assert large in files["criteria.csv"].splitlines()
    files["criteria.csv"] = files["criteria.csv"].replace(large, huge)
    folder = tmp_path / "in"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as refused:
        score_bids(folder, tmp_path / "out")
    assert str(refused.value) == (
        "consistency.parquet (evaluation_id='ev5', supplier_id='s9', run_id='r1'): run_total is "
        "inf: the inputs' numbers overflow a double (criteria weights, max_score, scores or a "
        "formula's fields too large)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


# query -> (query_norm, numeric_constraints, time_constraints), by hand from docs/bids.md step 1:
# a date that is not a real date (February 30th) stays as written and is no time constraint, a
# real one (February 29th of a leap year) is; 1,002,003 is a number, whatever date its three
# parts would spell (0001-02-03); an amount in 万 or 亿 is multiplied exactly, here to 28 digits
NORMALISED = {
    "q1": ("evidence file, evidence", [], []),
    "q2": ("evidence 2026-2-30 1002003", ["1002003"], []),
    "q3": ("evidence 2026年2月30日 2024-02-29", [], ["2024-02-29"]),
    "q4": ("evidence 1234567890123456789012340000", ["1234567890123456789012340000"], []),
    "q5": ("evidence 1234567890123456789050000000", ["1234567890123456789050000000"], []),
    "q6": ("evidence", [], []),
    "q7": ("evidence", [], []),
    "q8": ("evidence", [], []),
}


# by hand from docs/bids.md step 1 (one pass, the longest term first at each position); every
# other query of p1 has `evidence` alone made `proof`
REWRITTEN = {
    "q1": "dossier, proof",
    "q6": "evidence",  # p4 has no synonym
    "q7": "evidence",  # nor has p7
    "q8": "evidence",  # nor has p9
}


def test_each_project_rewrites_with_its_own_synonyms(out: Path) -> None:
    queries = table(out, "queries")
    assert sorted(queries["query_id"]) == sorted(QUERY_TEXTS)
    for _, row in queries[queries["query_id"].isin(list(NORMALISED))].iterrows():
        norm = NORMALISED[row["query_id"]][0]
        expected = (norm, REWRITTEN.get(row["query_id"], norm.replace("evidence", "proof")))
        assert (row["query_norm"], row["rewritten_query"]) == expected


def exact_amount(token: str) -> str:
    """An amount in 万 or 亿 multiplied in exact decimal arithmetic, trailing zeros dropped."""
    with localcontext() as context:
        context.prec = 80
        value = Decimal(token[:-1].replace(",", "")) * {"万": 10**4, "亿": 10**8}[token[-1]]
        return format(value.normalize(), "f")


@pytest.mark.parametrize("query_id", list(NORMALISED))
def test_dates_and_amounts_are_normalised(out: Path, query_id: str) -> None:
    norm, numbers, times = NORMALISED[query_id]
    if query_id in ("q4", "q5"):
        # the hand-written amount is the exact product, 28 digits before the point
        assert numbers == [exact_amount(QUERY_TEXTS[query_id].split()[1])]
        assert len(numbers[0]) == 28
    if query_id == "q3":
        assert calendar.isleap(2024) and not calendar.isleap(2026)
    row = table(out, "queries").set_index("query_id").loc[query_id]
    got = (row["query_norm"], list(row["numeric_constraints"]), list(row["time_constraints"]))
    assert got == (norm, numbers, times)


def test_an_amount_too_large_for_a_decimal_is_not_lost(out: Path) -> None:
    digits = OVERFLOW[:-1]
    assert len(exact_amount(OVERFLOW)) == 29
    # docs/bids.md step 1: every token is part of query_norm, every number a numeric constraint;
    # whatever the text of this one, it starts with the digits written
    row = only_row(table(out, "queries"), query_id="q9")
    assert row["query_norm"].startswith(f"evidence {digits}")
    numbers = list(row["numeric_constraints"])
    assert len(numbers) == 1 and numbers[0] is not None and numbers[0].startswith(digits)


def test_without_a_high_risk_column_no_query_is_high_risk(out: Path) -> None:
    assert "high_risk" not in folder_files()["queries.csv"].splitlines()[0]
    queries = table(out, "queries")
    assert list(queries["high_risk"]) == [0] * len(QUERY_TEXTS)
    # no type keyword in `proof …`: unclassified, so the fallback mode, not high_risk_mode (mix)
    assert queries["query_type"].isna().all()
    assert list(queries["mode"]) == ["hybrid"] * len(QUERY_TEXTS)


# the bidders without a chunk of r_docs' `tech` (p4 has no gate rule)
UNQUALIFIED = {("p1", "s3")}


def test_a_bidder_without_chunks_misses_every_required_document(out: Path) -> None:
    assert "s3" not in "".join(chunk_lines())
    r_docs = only_row(table(out, "rules"), rule_id="r_docs", supplier_id="s3")
    # docs/bids.md step 6: no chunk, no doc type; the reason by step 7 (the rule's id)
    assert not r_docs["passed"] and r_docs["missing_material"]
    assert list(r_docs["missing"]) == ["tech"]
    assert r_docs["reason"] == "r_docs — missing: tech"


def test_formula_aggregates_stay_inside_their_project(out: Path) -> None:
    rules = table(out, "rules")
    price = rules[rules["rule_id"] == "r_price"]
    assert len(price) == len(BID_PRICES)
    # the qualified bidders pass r_docs (p1) or have no gate rule (p4); min per project, a missing
    # price ignored, and s3's lowest price of p1 too (s3 fails r_docs)
    qualified = {k: v for k, v in BID_PRICES.items() if k not in UNQUALIFIED and v is not None}
    lowest = {
        project: min(v for (p, _), v in qualified.items() if p == project)
        for project, _ in qualified
    }
    assert all(BID_PRICES[k] < lowest[k[0]] for k in UNQUALIFIED)
    for (project, supplier), bid_price in BID_PRICES.items():
        row = only_row(price, project_id=project, supplier_id=supplier)
        assert row["missing_material"] == (bid_price is None)
        if bid_price is not None:
            assert row["value"] == pytest.approx(100 * lowest[project] / bid_price, abs=1e-12)


def criterion(out: Path, evaluation_id: str, supplier_id: str, criteria_id: str) -> pd.Series:
    keys = {"evaluation_id": evaluation_id, "supplier_id": supplier_id, "criteria_id": criteria_id}
    return only_row(table(out, "criteria"), **keys)


def test_a_formula_missing_material_scores_zero(out: Path) -> None:
    assert BID_PRICES[("p4", "s8")] is None
    cp = criterion(out, "ev4", "s8", "CP")
    assert cp["missing_material"] and not cp["hard_pass"]
    assert cp["score"] == 0.0
    # docs/bids.md step 7: the rule's reason (its id, r_price has none) with the suffix
    assert cp["reason"] == "r_price — missing material"
    # CP (weight 1) scores 0, L1 has weight 0
    assert table(out, "evaluations").set_index("evaluation_id").loc["ev4", "total_score"] == 0.0


def test_a_formula_value_under_one_is_its_own_score(out: Path) -> None:
    lowest, price = BID_PRICES[("p4", "s7")], BID_PRICES[("p4", "s5")]
    assert lowest is not None and price is not None
    value = 100 * lowest / price
    assert 0 < value < 1
    # clamped to [0, max_score 100]: the value itself
    assert criterion(out, "ev7", "s5", "CP")["score"] == pytest.approx(value, abs=1e-12)


def test_stability_over_a_max_score_of_one(out: Path) -> None:
    scores = [run[4] for run in SOFT_SCORES if run[:3] == ("ev4", "s8", "L1")]
    l1 = criterion(out, "ev4", "s8", "L1")
    assert l1["max_score"] == 1.0 and len(scores) >= 2
    stability = 1 - (max(scores) - min(scores)) / 1.0
    assert l1["model_stability"] == pytest.approx(stability, abs=1e-12)
    expected = WEIGHTS["retrieval_agreement"] * AGREEMENT_WHEN_UNAVAILABLE
    expected += WEIGHTS["model_stability"] * stability
    assert l1["confidence"] == pytest.approx(expected, abs=1e-12)


def test_the_mean_of_the_runs_is_summed_in_run_id_order(out: Path) -> None:
    runs = sorted((run[3], run[4]) for run in SOFT_SCORES if run[:3] == ("ev4", "s8", "L1"))
    scores = [score for _, score in runs]
    mean = sum(scores) / len(scores)
    # the last bit of the sum depends on the order: (0.1 + 0.2) + 0.3 = 0.6000000000000001
    assert mean != sum(reversed(scores)) / len(scores)
    assert criterion(out, "ev4", "s8", "L1")["score"] == mean


def test_the_mean_relevance_is_summed_in_report_order(out: Path) -> None:
    relevance = {c: S2_RERANK.get(c, S2_SCORE_RAW) for c in S2_CHUNKS}
    evidence = table(out, "evidence")
    q5 = evidence[evidence["query_id"] == "q5"].sort_values("report_order")
    # every item is packed; class 0 (distinct documents, relevance >= 0.3): report order is
    # relevance descending (min_items first, then priority)
    assert q5["packed"].all()
    order = sorted(relevance, key=lambda c: -relevance[c])
    assert list(q5["chunk_id"]) == order
    values = [relevance[c] for c in order]
    mean = sum(values) / len(values)
    assert mean != sum(reversed(values)) / len(values)
    # evidence quality = mean relevance × min(1, 5 items / min_items 2)
    assert criterion(out, "ev1", "s2", "C1")["evidence_quality"] == mean


def test_runs_are_counted_per_criterion(out: Path) -> None:
    criteria = table(out, "criteria")
    got = {(r.evaluation_id, r.supplier_id, r.criteria_id): r.runs for r in criteria.itertuples()}
    expected = dict.fromkeys(got, 0)
    for evaluation_id, supplier_id, criteria_id, _, _ in SOFT_SCORES:
        expected[(evaluation_id, supplier_id, criteria_id)] += 1
    assert 0 in expected.values()
    assert got == expected
    # an evaluation's runs: its distinct run ids (docs/bids.md step 9), 0 without soft scores
    evaluations = table(out, "evaluations")
    got = {(r.evaluation_id, r.supplier_id): r.runs for r in evaluations.itertuples()}
    runs = {
        (ev, supplier): {r[3] for r in SOFT_SCORES if r[:2] == (ev, supplier)}
        for ev, supplier in got
    }
    assert got == {key: len(ids) for key, ids in runs.items()}


COUNTS = ["claims", "unsupported_claims", "candidates", "degraded_candidates"]


def expected_counts() -> dict[tuple[str, str], tuple[int, int, int, int]]:
    """Per evaluation row, by hand: (claims, unsupported claims, candidates, degraded ones)."""
    counts = {(ev, supplier): (0, 0, 0, 0) for ev, supplier, _ in EVALUATIONS}
    # s1: every claim (cl_many too), the flat boxes unsupported; q1's candidates (k19 dropped) and
    # q2-q4's
    claims = len(CITED_BOXES) + 1
    counts[("ev1", "s1")] = (claims, len(FLAT), len(Q1_CHUNKS) + len(FULL_CHUNKS), 0)
    counts[("ev1", "s2")] = (0, 0, len(S2_CHUNKS), 1)
    counts[("ev4", "s8")] = (0, 0, 1, 1)
    counts[("ev8", "sa")] = (0, 0, len(Q7_CHUNKS), 0)
    counts[("ev10", "se")] = (0, 0, 1, 1)
    return counts


def test_claims_and_candidates_are_counted_zero_where_there_are_none(out: Path) -> None:
    evaluations = table(out, "evaluations")
    assert len(evaluations) == len(EVALUATIONS)
    for (ev, supplier), counts in expected_counts().items():
        row = only_row(evaluations, evaluation_id=ev, supplier_id=supplier)
        assert tuple(row[COUNTS]) == counts, (ev, supplier)
        # docs/bids.md step 10: supported / claims, 1 with no claims
        claims, unsupported = counts[:2]
        coverage = (claims - unsupported) / claims if claims else 1.0
        assert row["citation_coverage"] == coverage, (ev, supplier)


def test_rerank_alert_above_the_ratio_only(out: Path) -> None:
    ratios = {
        key: degraded / candidates if candidates else 0.0
        for key, (_, _, candidates, degraded) in expected_counts().items()
    }
    # a single degraded candidate (ratio 1), one of five (the cut), none at all (ratio 0)
    assert {1.0, ALERT_RATIO, 0.0} <= set(ratios.values())
    evaluations = table(out, "evaluations")
    for (ev, supplier), ratio in ratios.items():
        row = only_row(evaluations, evaluation_id=ev, supplier_id=supplier)
        assert row["rerank_degraded_ratio"] == ratio, (ev, supplier)
        assert row["rerank_alert"] == (ratio > ALERT_RATIO), (ev, supplier)


def test_an_evaluation_without_criteria_scores_zero(out: Path) -> None:
    assert "p6" not in folder_files()["criteria.csv"]
    ev6 = table(out, "evaluations").set_index("evaluation_id").loc["ev6"]
    assert (ev6["criteria"], ev6["total_score"], ev6["confidence"]) == (0, 0.0, 0.0)
    # no criterion to veto it or to conflict: ev6's only supplier ranks first
    assert (ev6["vetoed"], ev6["redline_conflict"], ev6["rank"]) == (False, False, 1)


def test_absent_optional_columns_take_their_defaults(out: Path) -> None:
    files = folder_files()
    assert "force_review" not in files["evaluations.csv"].splitlines()[0]
    assert "confidence" not in files["chunks.csv"].splitlines()[0]
    evaluations = table(out, "evaluations")
    assert list(evaluations["forced_review"]) == [False] * len(evaluations)
    assert not any("forced_review" in list(r) for r in evaluations["hitl_reasons"])
    # a chunk's confidence is 1 when absent, so priority = relevance
    evidence = table(out, "evidence")
    assert (evidence["chunk_confidence"] == 1.0).all()
    assert (evidence["priority"] == evidence["relevance"]).all()


# policy values that bring a default of a missing row to its cut: a criterion without evidence
# (evidence_count 0) against a min_items of 1, an evaluation without runs (deviation 0) against
# a deviation threshold under 1; a report budget that s1's 24,000 tokens overflow; and an SQL
# branch score other than bid_v1's 1.0
MIN_ITEMS = 1
MAX_DEVIATION = 0.5
SMALL_REPORT = 12000
SQL_BRANCH_SCORE = 0.7


@pytest.fixture(scope="module")
def overridden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    overrides = {
        "packing.min_items": MIN_ITEMS,
        "hitl.max_score_deviation_pct": MAX_DEVIATION,
        "packing.report_tokens": SMALL_REPORT,
        "retrieval.sql_branch_score": SQL_BRANCH_SCORE,
    }
    return scored(tmp_path_factory, [f"{key}={value}" for key, value in overrides.items()])


def test_no_evidence_is_short_of_a_single_item(overridden: Path) -> None:
    criteria = table(overridden, "criteria")
    assert (criteria["evidence_count"] == 0).any() and (criteria["evidence_count"] > 0).any()
    assert list(criteria["evidence_short"]) == list(criteria["evidence_count"] < MIN_ITEMS)


def test_no_runs_deviate_by_zero_under_any_threshold(overridden: Path) -> None:
    evaluations = table(overridden, "evaluations")
    none = evaluations[evaluations["runs"] == 0]
    assert len(none) > 0
    assert list(none["score_deviation_pct"]) == [0.0] * len(none)
    assert list(none["calibration_needed"]) == [False] * len(none)
    assert not any("score_deviation" in list(r) for r in none["hitl_reasons"])


def test_the_report_packs_its_first_items_within_its_budget(overridden: Path) -> None:
    evidence = table(overridden, "evidence")
    s1 = evidence[evidence["supplier_id"] == "s1"].sort_values("report_order")
    # docs/bids.md step 5, min_items 1: every criterion's first item first (k11, k21, k31, k41:
    # class 0, priority 0.9 each, then by query_id), then q1's others by priority
    order = ["k11", "k21", "k31", "k41", *sorted(Q1_CHUNKS, key=lambda c: -Q1_CHUNKS[c][1])[1:]]
    assert list(s1["chunk_id"]) == order
    tokens = [CRITERION_TOKENS if c in FULL_CHUNKS.values() else Q1_TOKENS for c in order]
    running = [sum(tokens[: i + 1]) for i in range(len(tokens))]
    packed = [total <= SMALL_REPORT for total in running]
    assert True in packed and False in packed
    assert list(s1["packed"]) == packed


def test_missing_runs_evidence_and_votes_take_their_defaults(out: Path) -> None:
    criteria = table(out, "criteria")
    # docs/bids.md step 7: an llm criterion without runs scores 0
    no_runs = criteria[(criteria["method"] == "llm") & (criteria["runs"] == 0)]
    assert len(no_runs) > 0
    assert list(no_runs["score"]) == [0.0] * len(no_runs)
    # no soft score has a redline_pass: nothing conflicts, the rule-scored criteria (no runs) too
    assert "redline_pass" not in folder_files()["soft_scores.csv"].splitlines()[0]
    assert (criteria["method"] == "required").any()
    assert list(criteria["redline_conflict"]) == [False] * len(criteria)
    # no packed evidence: no citation, an empty list
    bare = criteria[criteria["evidence_count"] == 0]
    assert len(bare) > 0
    assert [None if c is None else list(c) for c in bare["citations"]] == [[]] * len(bare)


def top(scores: dict[str, float], k: int) -> set[str]:
    """The k best by score, ties by chunk_id (docs/bids.md step 8)."""
    return set(sorted(scores, key=lambda chunk: (-scores[chunk], chunk))[:k])


def test_agreement_ties_are_broken_by_chunk_id(out: Path) -> None:
    scores = dict.fromkeys(Q7_CHUNKS, TIED_SCORE)
    k = min(MAX_ITEMS, len(Q7_CHUNKS))
    assert k < len(Q7_CHUNKS)
    # the same tie-break in both rankings keeps the same k; a reversed one, the other end
    assert top(scores, k) == set(Q7_CHUNKS[:k])
    assert len(set(Q7_CHUNKS[:k]) & set(Q7_CHUNKS[-k:])) == k - 1
    expected = len(top(scores, k) & top(scores, k)) / k
    assert criterion(out, "ev8", "sa", "A1")["retrieval_agreement"] == expected == 1.0


def in_order(values: list[float]) -> float:
    """A sum in the order given (the template's list_sum over an ordered list)."""
    total = 0.0
    for value in values:
        total += value
    return total


def confidence(evidence_quality: float, agreement: float, stability: float) -> float:
    return (
        WEIGHTS["evidence_quality"] * evidence_quality
        + WEIGHTS["retrieval_agreement"] * agreement
        + WEIGHTS["model_stability"] * stability
    )


def stability(scores: tuple[float, ...]) -> float:
    """docs/bids.md step 8, over a max_score of 100."""
    if not scores:
        return 0.0
    if len(scores) == 1:
        return SINGLE_RUN_STABILITY
    return 1.0 - (max(scores) - min(scores)) / MAX_SCORE


def p7_confidences() -> list[float]:
    """ev8's criteria in criteria_id order; A1 has q7's eight packed items of relevance 0.5 (its
    evidence quality 0.5 × min(1, 8 / min_items)) and an agreement of 1, the others no query."""
    quality = TIED_SCORE * min(1.0, MAX_ITEMS / MIN_ITEMS_V1)
    first = confidence(quality, 1.0, stability(P7_SCORES["A1"]))
    others = [
        confidence(0.0, AGREEMENT_WHEN_UNAVAILABLE, stability(P7_SCORES[c])) for c in ["A2", "A3"]
    ]
    return [first, *others]


def p7_products() -> list[float]:
    """sa's weight × score (the mean of its runs) of ev8's criteria, in criteria_id order."""
    means = [sum(P7_SCORES[c]) / len(P7_SCORES[c]) for c in sorted(P7_SCORES)]
    return [P7_WEIGHTS[c] * m for c, m in zip(sorted(P7_WEIGHTS), means, strict=True)]


def test_weighted_sums_are_added_in_criteria_id_order(out: Path) -> None:
    weights = [P7_WEIGHTS[c] for c in sorted(P7_WEIGHTS)]
    products = p7_products()
    total = in_order(products)
    assert total != in_order(products[::-1])
    confidences = p7_confidences()
    criteria = table(out, "criteria")
    sa = criteria[(criteria["evaluation_id"] == "ev8") & (criteria["supplier_id"] == "sa")]
    got = list(sa.sort_values("criteria_id")["confidence"])
    assert got == confidences
    weighted = [w * c for w, c in zip(weights, confidences, strict=True)]
    expected = in_order(weighted) / in_order(weights)
    # each of the two sums, added in the reverse order, changes the quotient
    assert expected != in_order(weighted[::-1]) / in_order(weights)
    assert expected != in_order(weighted) / in_order(weights[::-1])
    sa = only_row(table(out, "evaluations"), evaluation_id="ev8", supplier_id="sa")
    assert (sa["total_score"], sa["confidence"]) == (total, expected)


def test_run_totals_and_their_mean_are_added_in_order(out: Path) -> None:
    runs = range(len(P7_SCORES["A1"]))
    terms = [[P7_WEIGHTS[c] * P7_SCORES[c][r] for c in sorted(P7_SCORES)] for r in runs]
    totals = [in_order(t) for t in terms]
    assert totals != [in_order(t[::-1]) for t in terms]
    consistency = table(out, "consistency")
    ev8 = consistency[consistency["evaluation_id"] == "ev8"].sort_values("run_id")
    assert list(ev8["run_id"]) == ["r1", "r2", "r3"]
    assert list(ev8["run_total"]) == totals
    spread = max(totals) - min(totals)
    deviation = 100.0 * spread / (in_order(totals) / len(totals))
    assert deviation != 100.0 * spread / (in_order(totals[::-1]) / len(totals))
    # between 1 and the threshold: no calibration, no review for it
    assert 1.0 < deviation < MAX_DEVIATION_V1
    row = only_row(table(out, "evaluations"), evaluation_id="ev8", supplier_id="sa")
    assert row["score_deviation_pct"] == deviation
    assert not row["calibration_needed"]
    assert "score_deviation" not in list(row["hitl_reasons"])


def test_the_plain_mean_confidence_is_added_in_criteria_id_order(out: Path) -> None:
    confidences = [
        confidence(0.0, AGREEMENT_WHEN_UNAVAILABLE, stability(P8_RUNS[c])) for c in sorted(P8_RUNS)
    ]
    mean = in_order(confidences) / len(confidences)
    assert mean != in_order(confidences[::-1]) / len(confidences)
    assert only_row(table(out, "evaluations"), supplier_id="sc")["confidence"] == mean


def test_suppliers_rank_by_total_score_then_supplier_id(out: Path) -> None:
    # only llm criteria: nobody is vetoed; ev8's totals differ, ev9's tie at 0 (p8's weights)
    totals = {
        ("ev8", "sa"): in_order(p7_products()),
        ("ev8", "sb"): 0.0,
        ("ev9", "sc"): 0.0,
        ("ev9", "sd"): 0.0,
    }
    assert totals[("ev8", "sa")] > totals[("ev8", "sb")]
    assert totals[("ev9", "sc")] == totals[("ev9", "sd")]
    evaluations = table(out, "evaluations")
    for evaluation_id in ("ev8", "ev9"):
        keys = sorted(
            (k for k in totals if k[0] == evaluation_id), key=lambda k: (-totals[k], k[1])
        )
        for rank, key in enumerate(keys, start=1):
            row = only_row(evaluations, evaluation_id=evaluation_id, supplier_id=key[1])
            assert (row["total_score"], row["vetoed"], row["rank"]) == (totals[key], False, rank)


@pytest.mark.parametrize(
    ("fixture", "score"), [("out", SQL_BRANCH_SCORE_V1), ("overridden", SQL_BRANCH_SCORE)]
)
def test_an_sql_branch_candidate_scores_the_policy_s_sql_branch_score(
    request: pytest.FixtureRequest, fixture: str, score: float
) -> None:
    assert SQL_BRANCH_SCORE != SQL_BRANCH_SCORE_V1
    candidates = table(request.getfixturevalue(fixture), "candidates")
    row = only_row(candidates, query_id="q8")
    # docs/bids.md step 3: no hit, se's bid fields satisfy the condition (bid_price 1 > 0)
    assert (row["chunk_id"], list(row["sources"])) == ("k81", ["sql"])
    # step 4: no rerank record, so the retrieval score is kept as the relevance
    assert (row["score_raw"], row["degraded_cause"], row["relevance"]) == (score, "missing", score)


def test_the_contract_orders_its_rows_and_citations_and_keeps_empty_lists(out: Path) -> None:
    lines = (out / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    objects = [json.loads(line) for line in lines]
    # docs/bids.md, outputs: one object per evaluation row, by evaluation_id, supplier_id
    keys = [(o["evaluation_id"], o["supplier_id"]) for o in objects]
    assert keys == sorted((ev, supplier) for ev, supplier, _ in EVALUATIONS)
    contract = dict(zip(keys, objects, strict=True))
    # citations by claim_id, then chunk_id: cl_many's four, listed otherwise in the input
    assert sorted(MANY_CITATIONS) not in (MANY_CITATIONS, MANY_CITATIONS[::-1])
    pairs = [(c, "kbox") for c in CITED_BOXES] + [("cl_many", chunk) for chunk in MANY_CITATIONS]
    citations = contract[("ev1", "s1")]["citations"]
    assert [(c["claim_id"], c["chunk_id"]) for c in citations] == sorted(pairs)
    many = {c["chunk_id"]: c["resolvable"] for c in citations if c["claim_id"] == "cl_many"}
    assert many == {chunk: chunk == "kbox" for chunk in MANY_CITATIONS}
    # ev6 has no criterion and no claim: empty arrays (the contract's schema), not null
    ev6 = contract[("ev6", "s6")]
    assert (ev6["criteria_results"], ev6["citations"]) == ([], [])


def single_files() -> dict[str, str]:
    """A run with one claim citing one chunk (cl_inside's box, on the chunk's page 1) and one
    candidate without a rerank record: every gate's denominator is 1. C1 is scored by the LLM;
    CR and its rule are there because the stages need a gate rule (see RULES)."""
    box = ",".join(str(v) for v in CITED_BOXES["cl_inside"])
    rows = {
        "evaluations.csv": ["ev1,s1,t1,p1"],
        "criteria.csv": ["t1,p1,C1,c1,1,100,llm", "t1,p1,CR,documents,0,100,required"],
        "chunks.csv": [chunk_line("k1", "p1", "s1", 10)],
        "hits.csv": ["q1,k1,0.5,1"],
        "bid_fields.csv": [],
        "claims.csv": ["cl1,ev1,s1,C1,a claim"],
        "claim_citations.csv": [f"cl1,k1,1,{box}"],
    }
    files = {name: csv(HEADERS[name], lines) for name, lines in rows.items()}
    files["queries.csv"] = csv(
        "query_id,tenant_id,project_id,evaluation_id,supplier_id,criteria_id,query_text",
        ["q1,t1,p1,ev1,s1,C1,evidence"],
    )
    files["rules.yaml"] = (
        "rules:\n  - {id: r_docs, criteria_id: CR, kind: required, documents: [tech]}\n"
    )
    return files


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scored(tmp_path_factory, files=single_files())


# docs/bids.md, gates.json: the value and status of each gate over one citation (resolvable), one
# claim (supported) and one candidate (degraded: no rerank record), against bid_v1's thresholds
SINGLE_GATES = {
    "citation_resolution_rate": (1.0, "pass"),
    "unsupported_claim_rate": (0.0, "pass"),
    "rerank_degradation_ratio": (1.0, "fail"),
}


def test_gates_over_a_single_citation_claim_and_candidate(single: Path) -> None:
    files = single_files()
    for name in ("claims.csv", "claim_citations.csv", "hits.csv"):
        assert len(files[name].splitlines()) == 2  # the header and one row
    assert resolvable(CITED_BOXES["cl_inside"])
    gates = {g["name"]: g for g in json.loads((single / "gates.json").read_text())["gates"]}
    for name, (value, status) in SINGLE_GATES.items():
        assert (gates[name]["value"], gates[name]["status"]) == (value, status), name
