"""Policy bid_v3 on the bundled tender: seed 002 §3.2's constraints produced by rules and
enforced as retrieval filters, §3.3's rewrite guard (issue 50). Every expected value is read by
hand from the fixture's texts (fixtures/bids/tender/queries.csv, chunks.csv, synonyms.csv) and
docs/bids.md, in the comments."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from duckscore.bids.pipeline import score_bids
from duckscore.core.errors import PolicyError

from ..helpers import FIXTURES

TENDER = FIXTURES / "bids" / "tender"
# q_b_tech's candidates under bid_v1 (test_tender.py): ck11 ck13 ck14 ck15 ck16 ck17 ck18 ck19
# ck30 ck33; of their texts only ck13, ck14, ck30 hold 技术方案, and ck13 also 内存
B_TECH = '"技术方案" 不含内存'


def tender(tmp_path: Path, b_tech: str | None = None, synonyms: str = "") -> Path:
    folder = tmp_path / "tender"
    shutil.copytree(TENDER, folder)
    if b_tech is not None:
        queries = pd.read_csv(folder / "queries.csv", dtype=str, keep_default_na=False)
        queries.loc[queries["query_id"] == "q_b_tech", "query_text"] = b_tech
        queries.to_csv(folder / "queries.csv", index=False)
    with (folder / "synonyms.csv").open("a", encoding="utf-8") as extra:
        extra.write(synonyms)
    return folder


def run(folder: Path, out: Path) -> dict[str, Any]:
    score_bids(folder, out, policy="bid_v3")
    queries = pd.read_parquet(out / "queries.parquet").set_index("query_id")
    dropped = pd.read_parquet(out / "filter_log.parquet")
    candidates = pd.read_parquet(out / "candidates.parquet")
    return {
        "queries": queries,
        "dropped": {(r.query_id, r.chunk_id): r.dropped_by for r in dropped.itertuples()},
        "kept": {q: sorted(g["chunk_id"]) for q, g in candidates.groupby("query_id")},
    }


@pytest.fixture(scope="module")
def v3(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp_path = tmp_path_factory.mktemp("bid_v3")
    return run(tender(tmp_path, B_TECH), tmp_path / "out")


def test_constraints_are_produced_by_rules(v3: dict[str, Any]) -> None:
    queries = v3["queries"]
    # the quoted term must be there, the one after 不含 must not
    assert list(queries.at["q_b_tech", "must_include_terms"]) == ["技术方案"]
    assert list(queries.at["q_b_tech", "must_exclude_terms"]) == ["内存"]
    # entities: the dictionary's standard names the query names, by a term or by the name itself
    expected = {
        "q_a_tech": ["laptop"],  # 笔记本电脑 -> laptop
        "q_a_qual": ["注册资本"],  # the standard name itself (注册资金 -> 注册资本)
        "q_a_docs": ["iso_certificate"],  # ISO 9001 -> iso_certificate
        "q_x_tech": ["notebook pc"],  # t_other's own dictionary
        "q_a_price": [],
    }
    for query, entities in expected.items():
        assert list(queries.at[query, "entity_constraints"]) == entities, query


def test_the_constraints_filter_the_candidates(v3: dict[str, Any]) -> None:
    dropped, kept = v3["dropped"], v3["kept"]
    # q_b_tech: without 技术方案 -> must_include_terms; ck13 has it and 内存 -> must_exclude_terms
    for chunk in ("ck11", "ck15", "ck16", "ck17", "ck18", "ck19", "ck33"):
        assert dropped[("q_b_tech", chunk)] == "must_include_terms", chunk
    assert dropped[("q_b_tech", "ck13")] == "must_exclude_terms"
    assert kept["q_b_tech"] == ["ck14", "ck30"]
    # q_a_tech names laptop: none of ck01 ck04 ck05 ck30 says 笔记本电脑 or laptop
    for chunk in ("ck01", "ck04", "ck05", "ck30"):
        assert dropped[("q_a_tech", chunk)] == "entity_constraints", chunk
    assert "q_a_tech" not in kept
    # q_a_qual names 注册资本: ck01 (注册资本 2000万元) stays, ck03 (开标一览表) goes
    assert dropped[("q_a_qual", "ck03")] == "entity_constraints"
    assert "ck01" in kept["q_a_qual"]


def test_the_packed_evidence_holds_only_constrained_chunks(tmp_path: Path) -> None:
    out = tmp_path / "out"
    score_bids(tender(tmp_path, B_TECH), out, policy="bid_v3")
    evidence = pd.read_parquet(out / "evidence.parquet")
    assert sorted(evidence[evidence["query_id"] == "q_b_tech"]["chunk_id"]) == ["ck14", "ck30"]
    criteria = pd.read_parquet(out / "criteria.parquet").set_index(["supplier_id", "criteria_id"])
    assert criteria.at[("sp_a", "c5_tech"), "evidence_count"] == 0  # every candidate filtered


def test_a_rewrite_that_loses_a_number_is_refused(v3: dict[str, Any]) -> None:
    docs = v3["queries"].loc["q_a_docs"]
    # the synonym ISO 9001 -> iso_certificate would lose 9001 (bid_v1 reports it, keeps it)
    assert docs["rewrite_reason"] == "refused: changes hard constraints (9001)"
    assert docs["rewritten_query"] == docs["query_norm"]
    assert (bool(docs["constraints_preserved"]), list(docs["constraint_diff"])) == (True, [])
    tech = v3["queries"].loc["q_a_tech"]
    assert tech["rewrite_reason"] == "synonyms: 笔记本电脑 -> laptop"
    assert tech["rewritten_query"] == "technical proposal overview:laptop 配置"
    assert v3["queries"].at["q_a_price", "rewrite_reason"] == "no rewrite"


def test_a_rewrite_that_widens_the_scope_is_refused(tmp_path: Path) -> None:
    # 不含 -> 含 would turn "not containing 内存" into "containing 内存": the exclusion is dropped
    found = run(tender(tmp_path, B_TECH, "t_acme,p_laptops,不含,含\n"), tmp_path / "out")
    query = found["queries"].loc["q_b_tech"]
    assert query["rewrite_reason"] == "refused: widens the authorised scope (drops 内存)"
    assert query["rewritten_query"] == query["query_norm"] == B_TECH
    # the exclusion stays in force (here the dictionary's new entity 含 drops ck13 first)
    assert "ck13" not in found["kept"].get("q_b_tech", [])


def test_a_synonym_of_a_term_is_allowed_and_still_enforced(tmp_path: Path) -> None:
    # 技术方案 -> technical proposal: the term survives as its standard name; chunks compare alike
    synonym = "t_acme,p_laptops,技术方案,technical proposal\n"
    found = run(tender(tmp_path, B_TECH, synonym), tmp_path / "out")
    query = found["queries"].loc["q_b_tech"]
    assert query["rewrite_reason"] == "synonyms: 技术方案 -> technical proposal"
    assert query["rewritten_query"] == '"technical proposal" 不含内存'
    assert found["kept"]["q_b_tech"] == ["ck14", "ck30"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ('constraints.must_include=[\'"[^"]+"\']', "needs exactly one capturing group"),
        ("constraints.must_exclude=['(unclosed']", "constraints.must_exclude: '(unclosed'"),
    ],
)
def test_a_term_pattern_must_compile_with_one_group(
    tmp_path: Path, override: str, message: str
) -> None:
    with pytest.raises(PolicyError, match=message.replace("(", r"\(")):
        score_bids(TENDER, tmp_path / "out", policy="bid_v3", overrides=[override])
    assert not (tmp_path / "out").exists()
