"""Tests written for mutants of sql/bids/_bid_stages.sql that survived the fast tests
(tests/mutants/, issue 37). Most are boundary comparisons (`<=` made `<`, `>` made `>=`, and the
reverse) that no value of the tender fixture reaches; the others are defaults of rows that are
missing (coalesce's 0, 1 or FALSE), joins made `OR`, and orders that only a tie, a sum's last
bit or a report over budget can see. One small folder, built here, puts a value on each cut of
bid_v1 (docs/bids.md, "What `bid_v1` computes"): a hit at rank `chunk_top_k` (20) and one past it,
synonyms of another project and tenant, a longer term sharing a prefix, an impossible date, a
leap day, 28-digit amounts (steps 1-3); one degraded candidate of five (the `alert_ratio` 0.2),
one of one, none (step 4); a relevance of exactly `low_relevance` (0.3), chunks of exactly
`criterion_tokens` (6000), `max_items` (8) items summing to 6000 and a report summing to
`report_tokens` (24,000) (step 5); formula values of a project's own qualified bidders, one
missing, one under 1 (steps 6-7); weights all 0 or not summing to 1, runs scored in run_id
order, a max_score of 1 (step 8); equal run totals that overflow (step 9); cited boxes on each
edge of their chunk's box or flat (step 10); an evaluation without criteria, claims or
candidates, and inputs without their optional columns. A second run moves three policy values
(min_items 1, a deviation threshold of 0.5, a 12,000-token report) to reach the rest. Every
expected value is worked out by hand from docs/bids.md or in plain Python here, and each test
asserts that its input really sits on the cut it is about."""

from __future__ import annotations

import calendar
import math
from decimal import Decimal, localcontext
from pathlib import Path

import pandas as pd
import pytest

from duckscore.bids.pipeline import score_bids

# bid_v1's cuts (docs/bids.md, "The parameters of `bid_v1`")
CHUNK_TOP_K = 20
LOW_RELEVANCE = 0.3
CRITERION_TOKENS = 6000
MAX_ITEMS = 8
REPORT_TOKENS = 24000
ALERT_RATIO = 0.2
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
# evaluation ev5 (project p5): one llm criterion W1 of this weight, two runs scoring 50 each;
# 1e308 × 50 overflows, so both run totals are +inf
HUGE_WEIGHT = 1e308
# the bidders of the formula rule r_price (criterion CP of projects p1 and p4): bid_price; s8's
# is missing, s7 has no evaluation, s5's is 200 times the lowest (a value of 0.5)
BID_PRICES = {
    ("p1", "s1"): 100.0,
    ("p1", "s2"): 200.0,
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
]
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
]
# query -> its text: p1's synonyms, then dates and amounts
QUERY_TEXTS = {
    "q1": "evidence file, evidence",
    "q2": "evidence 2026-2-30 1,002,003",
    "q3": "evidence 2026年2月30日 2024-2-29",
    "q4": "evidence 123456789012345678901234万",
    "q5": "evidence 12345678901234567890.5亿",
    "q6": "evidence",
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
    return [*chunks, chunk_line("kbox", "p1", "s1", 10, page=3)]


def hit_lines() -> list[str]:
    hits = [f"q1,{c},0.5,{rank}" for c, (rank, _) in Q1_CHUNKS.items()] + ["q1,k19,0.5,21"]
    hits += [f"{q},{c},0.5,1" for q, c in FULL_CHUNKS.items()]
    hits += [f"q5,{c},{S2_SCORE_RAW},{i}" for i, c in enumerate(S2_CHUNKS, start=1)]
    return [*hits, "q6,k61,0.5,1"]


def rerank_lines() -> list[str]:
    rerank = [f"q1,{c},ok,{relevance}" for c, (_, relevance) in Q1_CHUNKS.items()]
    rerank += [f"{q},{c},ok,0.9" for q, c in FULL_CHUNKS.items()]
    return rerank + [f"q5,{c},ok,{score}" for c, score in S2_RERANK.items()]


def criteria_lines() -> list[str]:
    lines = [f"t1,p1,C{i},c{i},0.25,100,llm" for i in range(1, 5)]
    lines += ["t1,p1,CR,documents,0,100,required", "t1,p1,CP,price,0,100,formula"]
    lines += ["t1,p4,CP,price,1,100,formula", "t1,p4,L1,l1,0,1,llm"]
    lines.append(f"t1,p5,W1,w1,{HUGE_WEIGHT!r},100,llm")
    return lines + [
        f"t1,{project},{z},{z},{weight},100,llm"
        for project, weights in WEIGHTED.values()
        for z, weight in zip(["Z1", "Z2"], weights, strict=True)
    ]


# a required rule every supplier of p1 passes (and without a redline or required rule the stages
# do not compile: gate_rules' empty tail names no column); the formula scores p1 and p4
RULES = """\
rules:
  - {id: r_docs, criteria_id: CR, kind: required, documents: [tech]}
  - {id: r_price, criteria_id: CP, kind: formula, score: "100 * min(bid_price) / bid_price"}
"""


def folder_files() -> dict[str, str]:
    # the texts quoted: 1,002,003 has commas
    owners = {f"q{i}": ("s1", f"C{i}") for i in range(1, 5)} | {"q5": ("s2", "C1")}
    queries = [f'{q},t1,p1,ev1,{s},{c},"{QUERY_TEXTS[q]}"' for q, (s, c) in owners.items()]
    queries.append(f'q6,t1,p4,ev4,s8,CP,"{QUERY_TEXTS["q6"]}"')
    evaluations = [f"{ev},{supplier},t1,{project}" for ev, supplier, project in EVALUATIONS]
    soft_scores = [",".join(str(v) for v in run) for run in SOFT_SCORES]
    bidders = [(p, s, "" if price is None else price) for (p, s), price in BID_PRICES.items()]
    return {
        "evaluations.csv": csv("evaluation_id,supplier_id,tenant_id,project_id", evaluations),
        "criteria.csv": csv(
            "tenant_id,project_id,criteria_id,name,weight,max_score,method", criteria_lines()
        ),
        "rules.yaml": RULES,
        "queries.csv": csv(
            "query_id,tenant_id,project_id,evaluation_id,supplier_id,criteria_id,query_text",
            queries,
        ),
        "chunks.csv": csv(
            "tenant_id,chunk_id,project_id,supplier_id,doc_id,doc_type,page,"
            "bbox_x0,bbox_y0,bbox_x1,bbox_y1,tokens,text",
            chunk_lines(),
        ),
        "hits.csv": csv("query_id,chunk_id,score_raw,rank", hit_lines()),
        "bid_fields.csv": csv(
            "tenant_id,project_id,supplier_id,chunk_id,supplier_code,qualification_level,"
            "registered_capital,bid_price,delivery_period,warranty_period",
            [f"t1,{p},{s},k11,X,A,1000,{price},10,12" for p, s, price in bidders],
        ),
        "rerank.csv": csv("query_id,chunk_id,status,score_rerank", rerank_lines()),
        "soft_scores.csv": csv("evaluation_id,supplier_id,criteria_id,run_id,score", soft_scores),
        "claims.csv": csv(
            "claim_id,evaluation_id,supplier_id,criteria_id,claim_text",
            [f"{claim},ev1,s1,C1,a claim" for claim in CITED_BOXES],
        ),
        "claim_citations.csv": csv(
            "claim_id,chunk_id,page,bbox_x0,bbox_y0,bbox_x1,bbox_y1",
            [f"{c},kbox,3,{','.join(str(v) for v in b)}" for c, b in CITED_BOXES.items()],
        ),
        "synonyms.csv": csv("tenant_id,project_id,term,canonical", SYNONYMS),
    }


def scored(factory: pytest.TempPathFactory, overrides: list[str] | None = None) -> Path:
    folder = factory.mktemp("boundaries") / "in"
    folder.mkdir()
    for name, text in folder_files().items():
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


def test_equal_run_totals_deviate_by_zero_even_when_they_overflow(out: Path) -> None:
    consistency = table(out, "consistency")
    totals = list(consistency[consistency["evaluation_id"] == "ev5"]["run_total"])
    # Σ weight × score per run: 1e308 × 50 overflows to +inf in both runs, equal totals whose
    # difference inf − inf would be NaN
    assert totals == [HUGE_WEIGHT * 50.0] * 2 == [math.inf] * 2
    ev5 = table(out, "evaluations").set_index("evaluation_id").loc["ev5"]
    assert ev5["runs"] == 2
    assert ev5["score_deviation_pct"] == 0.0
    assert not ev5["calibration_needed"]
    assert "score_deviation" not in list(ev5["hitl_reasons"])


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
}


# by hand from docs/bids.md step 1 (one pass, the longest term first at each position); every
# other query of p1 has `evidence` alone made `proof`
REWRITTEN = {
    "q1": "dossier, proof",
    "q6": "evidence",  # p4 has no synonym
}


def test_each_project_rewrites_with_its_own_synonyms(out: Path) -> None:
    queries = table(out, "queries")
    assert sorted(queries["query_id"]) == sorted(QUERY_TEXTS)
    for _, row in queries.iterrows():
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


def test_without_a_high_risk_column_no_query_is_high_risk(out: Path) -> None:
    assert "high_risk" not in folder_files()["queries.csv"].splitlines()[0]
    queries = table(out, "queries")
    assert list(queries["high_risk"]) == [0] * len(QUERY_TEXTS)
    # no type keyword in `proof …`: unclassified, so the fallback mode, not high_risk_mode (mix)
    assert queries["query_type"].isna().all()
    assert list(queries["mode"]) == ["hybrid"] * len(QUERY_TEXTS)


def test_formula_aggregates_stay_inside_their_project(out: Path) -> None:
    rules = table(out, "rules")
    price = rules[rules["rule_id"] == "r_price"]
    assert len(price) == len(BID_PRICES)
    # every bidder passes r_docs (p1) or has no gate rule (p4): all qualified; min per project,
    # a missing price ignored
    lowest = {
        project: min(v for (p, _), v in BID_PRICES.items() if p == project and v is not None)
        for project, _ in BID_PRICES
    }
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
    got = {(r.evaluation_id, r.criteria_id): r.runs for r in criteria.itertuples()}
    expected = dict.fromkeys(got, 0)
    for evaluation_id, _, criteria_id, _, _ in SOFT_SCORES:
        expected[(evaluation_id, criteria_id)] += 1
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
    # s1: every claim, the flat boxes unsupported; q1's candidates (k19 dropped) and q2-q4's
    counts[("ev1", "s1")] = (len(CITED_BOXES), len(FLAT), len(Q1_CHUNKS) + len(FULL_CHUNKS), 0)
    counts[("ev1", "s2")] = (0, 0, len(S2_CHUNKS), 1)
    counts[("ev4", "s8")] = (0, 0, 1, 1)
    return counts


def test_claims_and_candidates_are_counted_zero_where_there_are_none(out: Path) -> None:
    evaluations = table(out, "evaluations")
    assert len(evaluations) == len(EVALUATIONS)
    for (ev, supplier), counts in expected_counts().items():
        row = only_row(evaluations, evaluation_id=ev, supplier_id=supplier)
        assert tuple(row[COUNTS]) == counts, (ev, supplier)


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


def test_absent_optional_columns_take_their_defaults(out: Path) -> None:
    files = folder_files()
    assert "force_review" not in files["evaluations.csv"].splitlines()[0]
    assert "confidence" not in files["chunks.csv"].splitlines()[0]
    evaluations = table(out, "evaluations")
    assert not evaluations["forced_review"].any()
    assert not any("forced_review" in list(r) for r in evaluations["hitl_reasons"])
    # a chunk's confidence is 1 when absent, so priority = relevance
    evidence = table(out, "evidence")
    assert (evidence["chunk_confidence"] == 1.0).all()
    assert (evidence["priority"] == evidence["relevance"]).all()


# policy values that bring a default of a missing row to its cut: a criterion without evidence
# (evidence_count 0) against a min_items of 1, an evaluation without runs (deviation 0) against
# a deviation threshold under 1; and a report budget that s1's 24,000 tokens overflow
MIN_ITEMS = 1
MAX_DEVIATION = 0.5
SMALL_REPORT = 12000


@pytest.fixture(scope="module")
def overridden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    overrides = {
        "packing.min_items": MIN_ITEMS,
        "hitl.max_score_deviation_pct": MAX_DEVIATION,
        "packing.report_tokens": SMALL_REPORT,
    }
    return scored(tmp_path_factory, [f"{key}={value}" for key, value in overrides.items()])


def test_no_evidence_is_short_of_a_single_item(overridden: Path) -> None:
    criteria = table(overridden, "criteria")
    assert (criteria["evidence_count"] == 0).any() and (criteria["evidence_count"] > 0).any()
    assert list(criteria["evidence_short"]) == list(criteria["evidence_count"] < MIN_ITEMS)


def test_no_runs_deviate_by_zero_under_any_threshold(overridden: Path) -> None:
    evaluations = table(overridden, "evaluations")
    assert (evaluations["runs"] == 0).any()
    # no evaluation here has run totals that differ (one run, equal totals or none)
    assert (evaluations["score_deviation_pct"] == 0.0).all()
    assert not evaluations["calibration_needed"].any()
    assert not any("score_deviation" in list(r) for r in evaluations["hitl_reasons"])


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
