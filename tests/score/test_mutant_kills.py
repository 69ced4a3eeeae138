"""Tests written for mutants of sql/score/ that survived the fast tests (tests/mutants/, issue 37).

overall_v2's sub-scores (S_agreement, S_separation = base + (1 − base) · score_lead) were
checked against the oracle only by slow tests (tests/score/test_oracle.py on all of SciFact), so
`separation_base` made the constant 1.0 survived the fast tier. Here the same oracle judges 25
SciFact queries, with a separation base and weights that are not the defaults.

The full run of score's 218 mutants left more, each killed here from docs/score.md:
- parents.parquet's columns under overall_v1, as documented: extra sub-scores of weight 0 joined
  the stages (`selectattr(1, 'ne', 0)` made `'ne', 1`);
- `flag_ambiguous_candidate` false, not NULL, on the rank-2 parent of a query whose best score is
  0 (its `coalesce(…, FALSE)` dropped);
- `floored:<name>` only strictly below the floor: a sub-score of exactly 0.01 (`<` made `<=`);
- the printed stage `scored_parents` sorted by query_id, rank (its ORDER BY, or its `rank` key,
  dropped);
- levels by p_good at p_good = p_low (medium) and = p_high (high) (`<` made `<=`);
- Platt's p_good to the last bit at a logit of 0.15, and 1.0 at a logit of 1000, where e^logit
  overflows (the logistic's two forms swapped, or switched at 1 instead of 0).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.fusion.pipeline import fuse
from duckscore.scoring.pipeline import score

from ..helpers import SCIFACT
from .overall_reference import INPUT_KEYS
from .test_oracle import v2_subscores_match_the_oracle

SUBSCORES = {
    "strength_evidence": "parent_rrf",
    "w1": 0.4,
    "w2": 0.1,
    "w3": 0.1,
    "w_agreement": 0.1,
    "w_separation": 0.3,
    "separation_base": 0.3,
}


@pytest.fixture(scope="module")
def features(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    log = pd.read_parquet(SCIFACT / "retrieval_log.parquet")
    log = log[log["query_id"].isin(sorted(log["query_id"].unique())[:25])]
    out = tmp_path_factory.mktemp("slice") / "fused"
    fuse(log, out, "canonical_rrf")
    return pd.read_parquet(out / "parent_features.parquet")


@pytest.mark.parametrize(
    "overrides",
    [SUBSCORES, {**SUBSCORES, "w1": 0.5, "w_agreement": 0.0, "separation_base": 0.8}],
    ids=["agreement_and_separation", "separation_only"],
)
def test_v2_subscores_match_the_oracle_on_a_scifact_slice(
    features: pd.DataFrame, overrides: dict, tmp_path: Path
) -> None:
    parents = v2_subscores_match_the_oracle(features, overrides, tmp_path / "out")
    lead = features.set_index(["query_id", "parent_id"])["score_lead"]
    base = overrides["separation_base"]
    for row in parents.itertuples():
        assert row.s_separation == pytest.approx(
            base + (1 - base) * lead[(row.query_id, row.parent_id)], abs=1e-12
        )


def test_the_printed_parent_stage_is_sorted_by_query_and_rank(features: pd.DataFrame) -> None:
    """`duckscore sql score --stage scored_parents` (parents.sql) over SciFact's features: one
    row per parent, sorted as parents.parquet is (docs/score.md: by query_id, rank)."""
    printed = CliRunner().invoke(cli, ["sql", "score", "--stage", "scored_parents"])
    assert printed.exit_code == 0, printed.output
    con = duckdb.connect()
    con.register("features_frame", features)
    con.execute("CREATE VIEW parent_features AS SELECT * FROM features_frame")
    rows = con.execute(f"SELECT query_id, rank FROM ({printed.stdout})").fetchall()
    assert len(rows) == len(features)
    assert rows == sorted(rows)
    per_query = pd.DataFrame(rows, columns=["query_id", "rank"]).groupby("query_id")["rank"]
    assert all(list(ranks) == list(range(1, len(ranks) + 1)) for _, ranks in per_query)


# Three queries scored with overall_v1 (docs/score.md, "What the policy computes").
EDGE_ROWS = [
    # the worked example's q1: P123 best at 0.7539, P456 second (top-2 ratio 0.625)
    ("q1", "P123", 0.05, 0.9, 3, 9, 0.5),
    ("q1", "P456", 0.03, 0.7, 2, 4, 0.5),
    ("q1", "P789", 0.01, 0.2, 1, 19, 0.05),
    # equal features: zero spread, every norm 0, so S_strength = 0 and both score 0 (score1 = 0)
    ("tied", "A", 0.02, 0.5, 1, 3, 1 / 3),
    ("tied", "B", 0.02, 0.5, 1, 3, 1 / 3),
    # X and Z have the query's lowest coverage (P10 = 1: coverage_norm 0), so S_coverage =
    # 0.5 · coverage_ratio: 0.01 for X, exactly the floor (0.02 / 2 is exact), 0.005 for Z
    ("floor", "X", 0.04, 0.8, 1, 50, 0.02),
    ("floor", "Y", 0.01, 0.3, 3, 6, 0.5),
    ("floor", "Z", 0.02, 0.6, 1, 100, 0.01),
]
SUBSCORE_NAMES = ("strength", "coverage", "stability")
FLOOR = 0.01  # overall_v1's subscore_floor
# parents.parquet's columns under overall_v1, in order: the line docs/score.md prints
V1_PARENT_COLUMNS = (
    "query_id parent_id rank overall_score s_strength s_coverage s_stability rrf_sum max_score "
    "coverage total_chunks coverage_ratio log_chunks rrf_sum_norm max_score_norm coverage_norm "
    "log_chunks_norm rrf_sum_p_lo rrf_sum_p_hi max_score_p_lo max_score_p_hi coverage_p_lo "
    "coverage_p_hi log_chunks_p_lo log_chunks_p_hi n_candidates top2_ratio flag_low_coverage "
    "flag_single_spike flag_sparse_evidence flag_huge_doc_sparse flag_ambiguous_candidate "
    "risk_flags row_flags"
)


def _edge_features() -> pd.DataFrame:
    return pd.DataFrame(EDGE_ROWS, columns=list(INPUT_KEYS))


@pytest.fixture(scope="module")
def edge_parents(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("edges") / "out"
    score(_edge_features(), out, "overall_v1")
    return pd.read_parquet(out / "parents.parquet")


def test_overall_v1_writes_the_documented_parent_columns(edge_parents: pd.DataFrame) -> None:
    """w_agreement and w_separation are 0: neither sub-score nor its input is a column."""
    assert " ".join(edge_parents.columns) == V1_PARENT_COLUMNS


def test_ambiguous_candidate_is_false_when_score1_is_0(edge_parents: pd.DataFrame) -> None:
    """The flag is set on the rank-2 parent when score2/score1 ≥ 0.92; with score1 = 0 the ratio
    is NULL, and the flag false, not NULL."""
    ratio = edge_parents["top2_ratio"]
    expected = [
        rank == 2 and not pd.isna(r) and r >= 0.92 for rank, r in zip(edge_parents["rank"], ratio)
    ]
    assert edge_parents["flag_ambiguous_candidate"].tolist() == expected
    assert ((edge_parents["rank"] == 2) & ratio.isna()).any()  # the case is there


def test_floored_and_zero_subscores_are_flagged_at_their_edges(
    edge_parents: pd.DataFrame,
) -> None:
    """row_flags: zero_subscore:<name> for a sub-score of 0, floored:<name> for one in (0, 0.01):
    a sub-score of exactly 0.01 is neither."""
    for row in edge_parents.to_dict("records"):
        values = {name: row[f"s_{name}"] for name in SUBSCORE_NAMES}
        zero = [f"zero_subscore:{n}" for n, s in values.items() if s == 0]
        floored = [f"floored:{n}" for n, s in values.items() if 0 < s < FLOOR]
        flags = [f for f in row["row_flags"] if f.startswith(("zero_subscore:", "floored:"))]
        assert flags == zero + floored, row
    at_floor = edge_parents.set_index(["query_id", "parent_id"]).loc[("floor", "X"), "s_coverage"]
    assert at_floor == FLOOR  # exactly the floor: the edge is exercised
    assert (edge_parents["s_coverage"].between(0, FLOOR, inclusive="neither")).any()


def _mapped_score(folder: Path, probability: dict[str, Any]) -> pd.DataFrame:
    """queries.parquet of the edge features scored by overall_v1 with `probability`."""
    document = {
        "score_policy_version": "mapped",
        "extends": "overall_v1",
        "parameters": {"probability": probability},
    }
    policy = folder / "mapped.yaml"
    policy.write_text(yaml.safe_dump(document), encoding="utf-8")
    score(_edge_features(), folder / "out", str(policy))
    return pd.read_parquet(folder / "out" / "queries.parquet")


def test_levels_by_probability_at_p_low_and_p_high(tmp_path: Path) -> None:
    """An isotonic map gives y[0] at and below x[0] and y[-1] at and above x[-1]; with p_low and
    p_high those two values, a query at p_low is medium and one at p_high is high."""
    p_low, p_high = 0.25, 0.75
    xs, ys = [0.25, 0.5], [p_low, p_high]
    probability = {
        "method": "isotonic",
        "isotonic": {"x": xs, "y": ys},
        "levels_by": "probability",
        "p_low": p_low,
        "p_high": p_high,
    }
    queries = _mapped_score(tmp_path, probability).set_index("query_id")
    # best scores: q1 0.7539 (docs/score.md), tied 0; floor's below 0.25 too
    assert queries["best_overall_score"].map(lambda s: s <= xs[0] or s >= xs[-1]).all()
    for row in queries.itertuples():
        p_good = ys[0] if row.best_overall_score <= xs[0] else ys[-1]
        level = "low" if p_good < p_low else "medium" if p_good < p_high else "high"
        assert (row.p_good, row.confidence_level) == (p_good, level), row
    assert set(queries["p_good"]) == {p_low, p_high}  # both edges are exercised


@pytest.mark.parametrize("logit", [0.15, 1000.0], ids=["last_bit", "overflow"])
def test_platt_p_good_is_the_logistic_of_the_logit(tmp_path: Path, logit: float) -> None:
    """Platt with both slopes 0: every query's logit is the intercept, and p_good is
    1 / (1 + e^−logit) (docs/score.md), to the last bit."""
    if logit < 1:
        # the other form of the logistic rounds differently here: the last bit is exercised;
        # the oracle needs DuckDB's exp to be Python's (both the C library's) to the bit
        assert math.exp(logit) / (1 + math.exp(logit)) != 1 / (1 + math.exp(-logit))
        [(duckdb_exp,)] = duckdb.execute(f"SELECT exp(CAST({-logit!r} AS DOUBLE))").fetchall()
        assert duckdb_exp == math.exp(-logit)
    else:
        assert logit > math.log(sys.float_info.max)  # e^logit overflows a double
    probability = {
        "method": "platt",
        "platt": {"intercept": logit, "best_overall_score": 0.0, "top2_ratio": 0.0},
        "levels_by": "score",
        "p_low": 0.3,
        "p_high": 0.8,
    }
    queries = _mapped_score(tmp_path, probability)
    expected = 1.0 / (1.0 + math.exp(-logit))
    assert queries["p_good"].tolist() == [expected] * len(queries)
