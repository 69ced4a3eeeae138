"""`duckscore bids` against the plain-Python reference (tests/bids/bid_reference.py) on
random two-tenant folders: colliding chunk ids across tenants, ranks past chunk_top_k, every
rerank status, 0-3 LLM runs, LLM red-line votes, oversize chunks, tied relevance, claims with
boxes in and out, suppliers without bid fields."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pandas as pd
import pytest

from duckscore.bids.pipeline import score_bids

from .bid_reference import Rule, evaluate

RULES_YAML = """\
rules:
  - {id: R1, criteria_id: C_R, kind: redline, when: "qualification_level IN ('A', 'B') AND registered_capital >= 5000000"}
  - {id: R2, criteria_id: C_D, kind: required, documents: [license, iso]}
  - {id: F1, criteria_id: C_P, kind: formula, score: "100 * min(bid_price) / bid_price"}
"""


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def redline(f: dict) -> bool | None:
    level, capital = f.get("qualification_level"), f.get("registered_capital")
    return _and(
        None if level is None else level in ("A", "B"), None if capital is None else capital >= 5e6
    )


def price_score(f: dict, agg: dict) -> float | None:
    low, price = agg["min__bid_price"], f.get("bid_price")
    return None if low is None or price is None or price == 0 else 100 * low / price


RULES = [
    Rule("R1", "C_R", "redline", when=redline),
    Rule("R2", "C_D", "required", documents=("license", "iso")),
    Rule("F1", "C_P", "formula", score=price_score),
]


def sql_match(query: dict, fields: dict) -> bool:  # the only condition the generator writes
    return fields["bid_price"] is not None and fields["bid_price"] <= 5_000_000


def random_folder(seed: int, rich: bool = False) -> dict[str, list[dict]]:
    """`rich`: chunks every filter lets through and mostly successful reranks, so queries have more
    reranked candidates than max_items (8) and the agreement's top-k sets differ."""
    rng = random.Random(seed)
    t: dict[str, list[dict]] = {
        k: []
        for k in (
            "evaluations",
            "criteria",
            "queries",
            "chunks",
            "hits",
            "bid_fields",
            "rerank",
            "soft_scores",
            "claims",
            "claim_citations",
        )
    }
    for tenant in ("t1", "t2"):
        projects = (f"{tenant}p1", f"{tenant}p2")[: rng.randint(1, 2)]
        for number in range(14):  # the same chunk ids in both tenants
            project = rng.choice(projects)
            t["chunks"].append(
                dict(
                    tenant_id=tenant,
                    chunk_id=f"k{number}",
                    project_id=projects[0]
                    if rich
                    else rng.choice([project, project, project + "x"]),
                    supplier_id=None if rich else rng.choice(["s0", "s1", "s2", None]),
                    doc_id=f"d{rng.randint(0, 3)}",
                    doc_type=rng.choice(["license", "iso", "tech", "price"]),
                    page=rng.randint(1, 3),
                    bbox_x0=0.0,
                    bbox_y0=0.0,
                    bbox_x1=100.0,
                    bbox_y1=100.0,
                    tokens=rng.choice([300, 1200, 2500, 4000, 7000]),
                    text="x",
                    confidence=rng.choice([1.0, 0.9, 0.5]),
                    rule_scope=None if rich else rng.choice([None, None, "C_T", "C_P, C_T"]),
                )
            )
        for project in projects:
            for criteria_id, weight, max_score, method in (
                ("C_R", 0.0, 100.0, "redline"),
                ("C_D", 0.0, 100.0, "required"),
                ("C_P", 0.5, 100.0, "formula"),
                ("C_T", 0.5, 10.0, "llm"),
            ):
                t["criteria"].append(
                    dict(
                        tenant_id=tenant,
                        project_id=project,
                        criteria_id=criteria_id,
                        name=criteria_id,
                        weight=weight,
                        max_score=max_score,
                        method=method,
                    )
                )
            suppliers = [f"s{i}" for i in range(rng.randint(1, 4))]
            for supplier in suppliers + ["s_extra"]:
                if rng.random() < 0.85:
                    t["bid_fields"].append(
                        dict(
                            tenant_id=tenant,
                            project_id=project,
                            supplier_id=supplier,
                            chunk_id=f"k{rng.randint(0, 13)}",
                            supplier_code=f"{supplier}-code",
                            qualification_level=rng.choice(["A", "B", "C", None]),
                            registered_capital=rng.choice([3e6, 5e6, 8e6, None]),
                            bid_price=rng.choice([4e6, 4.5e6, 5e6, 6e6, None]),
                            delivery_period=30.0,
                            warranty_period=12.0,
                        )
                    )
            for evaluation in (f"{project}e1", f"{project}e2")[: rng.randint(1, 2)]:
                for supplier in suppliers:
                    t["evaluations"].append(
                        dict(
                            evaluation_id=evaluation,
                            supplier_id=supplier,
                            tenant_id=tenant,
                            project_id=project,
                            trace_id=None,
                            force_review=int(rng.random() < 0.2),
                        )
                    )
                    for criteria_id in ("C_R", "C_P", "C_T"):
                        if rng.random() < 0.2:
                            continue
                        query_id = f"{evaluation}-{supplier}-{criteria_id}"
                        t["queries"].append(
                            dict(
                                query_id=query_id,
                                tenant_id=tenant,
                                project_id=project,
                                evaluation_id=evaluation,
                                supplier_id=supplier,
                                criteria_id=criteria_id,
                                query_text="q",
                                doc_scope=None
                                if rich
                                else rng.choice([None, None, "tech, price", "license"]),
                                sql_condition=rng.choice([None, "bid_price <= 5000000"]),
                            )
                        )
                        for chunk in rng.sample(range(14), rng.randint(0, 12)):
                            raw = (
                                rng.choice([0.2, 0.5, 0.5, 0.8, 0.95]) if not rich else rng.random()
                            )
                            t["hits"].append(
                                dict(
                                    query_id=query_id,
                                    chunk_id=f"k{chunk}",
                                    score_raw=raw,
                                    rank=rng.choice([1, 2, 3, 5] if rich else [1, 2, 3, 5, 21, 25]),
                                )
                            )
                            status = (
                                "ok"
                                if rich
                                else rng.choice(["ok", "ok", "ok", "timeout", "error", None])
                            )
                            if status:
                                t["rerank"].append(
                                    dict(
                                        query_id=query_id,
                                        chunk_id=f"k{chunk}",
                                        status=status,
                                        score_rerank=(
                                            rng.random()
                                            if rich
                                            else rng.choice([0.1, 0.4, 0.7, 0.7, None])
                                        )
                                        if status == "ok"
                                        else None,
                                    )
                                )
                    for run in range(rng.randint(0, 3)):
                        t["soft_scores"].append(
                            dict(
                                evaluation_id=evaluation,
                                supplier_id=supplier,
                                criteria_id="C_T",
                                run_id=f"r{run}",
                                score=float(rng.randint(0, 10)),
                                redline_pass=None,
                            )
                        )
                        if rng.random() < 0.5:
                            t["soft_scores"].append(
                                dict(
                                    evaluation_id=evaluation,
                                    supplier_id=supplier,
                                    criteria_id="C_R",
                                    run_id=f"r{run}",
                                    score=0.0,
                                    redline_pass=rng.choice([0, 1]),
                                )
                            )
                    for number in range(rng.randint(0, 3)):
                        claim_id = f"{evaluation}-{supplier}-c{number}"
                        t["claims"].append(
                            dict(
                                claim_id=claim_id,
                                evaluation_id=evaluation,
                                supplier_id=supplier,
                                criteria_id="C_T",
                                claim_text="c",
                            )
                        )
                        for _ in range(rng.randint(0, 2)):
                            x0 = rng.choice([10.0, -5.0])
                            t["claim_citations"].append(
                                dict(
                                    claim_id=claim_id,
                                    chunk_id=f"k{rng.randint(0, 13)}",
                                    page=rng.choice([1, 2, None]),
                                    bbox_x0=x0,
                                    bbox_y0=10.0,
                                    bbox_x1=50.0,
                                    bbox_y1=rng.choice([50.0, 150.0]),
                                )
                            )
    return t


COLUMNS = {  # the contract of each table, so empty lists still write a header
    "rerank": ["query_id", "chunk_id", "status", "score_rerank"],
    "soft_scores": [
        "evaluation_id",
        "supplier_id",
        "criteria_id",
        "run_id",
        "score",
        "redline_pass",
    ],
    "claims": ["claim_id", "evaluation_id", "supplier_id", "criteria_id", "claim_text"],
    "claim_citations": ["claim_id", "chunk_id", "page", "bbox_x0", "bbox_y0", "bbox_x1", "bbox_y1"],
    "hits": ["query_id", "chunk_id", "score_raw", "rank"],
}


def write_folder(t: dict[str, list[dict]], folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, rows in t.items():
        frame = pd.DataFrame(rows, columns=COLUMNS.get(name)) if not rows else pd.DataFrame(rows)
        for column in ("page", "rank", "force_review", "redline_pass", "tokens"):
            if column in frame:
                frame[column] = frame[column].astype("Int64")
        frame.to_parquet(folder / f"{name}.parquet")
    (folder / "rules.yaml").write_text(RULES_YAML)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("seed, rich", [(seed, seed >= 6) for seed in range(9)])
def test_random_folders_match_the_reference(tmp_path: Path, seed: int, rich: bool) -> None:
    t = random_folder(seed, rich)
    write_folder(t, tmp_path / "in")
    score_bids(tmp_path / "in", tmp_path / "out")
    expected = evaluate(t, RULES, sql_match)
    out = tmp_path / "out"

    log = pd.read_parquet(out / "filter_log.parquet")
    assert (
        sorted(map(tuple, log[["query_id", "chunk_id", "dropped_by"]].values))
        == expected["filter_log"]
    )

    candidates = pd.read_parquet(out / "candidates.parquet").set_index(["query_id", "chunk_id"])
    assert sorted(candidates.index) == sorted(
        (c["query_id"], c["chunk_id"]) for c in expected["candidates"]
    )
    for c in expected["candidates"]:
        row = candidates.loc[(c["query_id"], c["chunk_id"])]
        assert (
            close(row["score_rerank"], c["score_rerank"]) and bool(row["degraded"]) == c["degraded"]
        )
        assert (row["degraded_cause"] if c["degraded"] else None) == c["cause"]
        assert list(row["sources"]) == c["sources"]

    evidence = pd.read_parquet(out / "evidence.parquet").set_index(["query_id", "chunk_id"])
    assert sorted(evidence.index) == sorted(expected["packing"])  # one row per candidate
    for key, want in expected["packing"].items():
        row = evidence.loc[key]
        got = (
            int(row["keep_order"]),
            bool(row["in_criterion_pack"]),
            int(row["trim_class"]),
            None if pd.isna(row["report_order"]) else int(row["report_order"]),
            bool(row["packed"]),
        )
        assert got == (
            want["keep_order"],
            want["in_criterion_pack"],
            want["trim_class"],
            want["report_order"],
            want["packed"],
        ), key

    criteria = pd.read_parquet(out / "criteria.parquet").set_index(
        ["evaluation_id", "supplier_id", "criteria_id"]
    )
    assert len(criteria) == len(expected["criteria"])
    for key, want in expected["criteria"].items():
        row = criteria.loc[key]
        for column in (
            "score",
            "evidence_quality",
            "retrieval_agreement",
            "model_stability",
            "confidence",
        ):
            assert close(row[column], want[column]), (key, column, row[column], want[column])
        assert (
            bool(row["hard_pass"]) == want["hard_pass"]
            and bool(row["redline_conflict"]) == want["redline_conflict"]
        )
        assert int(row["evidence_count"]) == want["evidence_count"], key

    evaluations = pd.read_parquet(out / "evaluations.parquet").set_index(
        ["evaluation_id", "supplier_id"]
    )
    assert len(evaluations) == len(expected["evaluations"])
    for key, want in expected["evaluations"].items():
        row = evaluations.loc[key]
        for column in (
            "total_score",
            "confidence",
            "score_deviation_pct",
            "citation_coverage",
            "rerank_degraded_ratio",
        ):
            assert close(row[column], want[column]), (key, column, row[column], want[column])
        assert list(row["hitl_reasons"]) == want["hitl_reasons"], key
        for column in ("vetoed", "needs_human_review"):
            assert bool(row[column]) == want[column], (key, column)
        for column in (
            "unsupported_claims",
            "recommendation",
            "recommendation_status",
            "risk_level",
        ):
            got = None if column == "recommendation" and pd.isna(row[column]) else row[column]
            assert got == want[column], (key, column, got, want[column])
