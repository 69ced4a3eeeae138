"""The SQL of seed 000 against hand-computed cases and the independent plain-Python oracle.

`tests/score/cases/*.yaml` hold values computed by hand (arithmetic in their comments);
`tests/score/overall_reference.py` was written from the seed without reading the SQL.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from duckscore.fusion.pipeline import fuse
from duckscore.scoring.pipeline import score

from ..helpers import SCIFACT, same_value
from .overall_reference import INPUT_KEYS, OVERALL_V1_PARAMS, score_reference, with_overrides

CASES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))
FLAGS = (
    "low_coverage",
    "single_spike",
    "sparse_evidence",
    "huge_doc_sparse",
    "ambiguous_candidate",
)


def run_sql(
    rows: list[dict], overrides: dict[str, Any], queries: list[str] | None, out: Path
) -> tuple[pd.DataFrame, pd.DataFrame]:
    frame = pd.DataFrame(rows)
    sets = [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    ids = pd.DataFrame({"query_id": queries}) if queries is not None else None
    score(frame, out, policy="overall_v1", overrides=sets, queries=ids)
    return pd.read_parquet(out / "parents.parquet"), pd.read_parquet(out / "queries.parquet")


def as_python(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def assert_rows_match(
    actual: pd.DataFrame, expected: list[dict], key: list[str], tol: float
) -> None:
    indexed = {tuple(r[k] for k in key): r for r in actual.to_dict("records")}
    assert len(indexed) == len(expected), f"{len(indexed)} rows, expected {len(expected)}"
    for want in expected:
        got = indexed[tuple(want[k] for k in key)]
        for column, value in want.items():
            assert same_value(as_python(got[column]), value, tol), (
                f"{ {k: want[k] for k in key} } {column}: SQL {got[column]!r}, expected {value!r}"
            )
        if "risk_flags" in want:
            for flag in FLAGS:
                assert bool(got[f"flag_{flag}"]) == (flag in want["risk_flags"])


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_sql_matches_hand_computed_case(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    parents, queries = run_sql(
        case["rows"], case.get("params_override") or {}, case.get("queries"), tmp_path / "out"
    )
    assert_rows_match(parents, case["expected"]["parents"], ["query_id", "parent_id"], 1e-12)
    assert_rows_match(queries, case["expected"]["queries"], ["query_id"], 1e-12)


@pytest.fixture(scope="module")
def scifact_features(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    path = tmp_path_factory.mktemp("scifact") / "parent_features.parquet"
    fuse(SCIFACT / "retrieval_log.parquet", path.parent / "fused", "canonical_rrf")
    (path.parent / "fused" / "parent_features.parquet").rename(path)
    return pd.read_parquet(path)


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "normalization.coverage": "divide_by_max",
            "normalization.coverage_max": 3.0,
            "alpha": 0.3,
        },
        {
            "normalization.mode": "reference",
            "normalization.reference": {
                "rrf_sum": [0.0, 0.05],
                "max_score": [0.2, 1.0],
                "coverage": [1.0, 3.0],
                "log_chunks": [0.5, 2.0],
            },
        },
        {  # issue 50: §13's diagnostics (every flag, one asking a human) and §4.4's smoothing
            "diagnostics": {
                "single_spike": {"actions": ["raise_threshold", "clarify"], "need_hitl": False},
                "low_coverage": {"actions": ["re_retrieve", "clarify"], "need_hitl": False},
                "sparse_evidence": {"actions": ["re_retrieve"], "need_hitl": False},
                "huge_doc_sparse": {"actions": ["lock_parent", "re_retrieve"], "need_hitl": True},
                "ambiguous_candidate": {"actions": ["clarify"], "need_hitl": False},
            },
            "coverage_smoothing": {"pseudo_chunks": 3.0, "prior": 0.2},
            # thresholds that make SciFact's queries take every path: rules that ask a human
            # and rules that do not, low queries sent to a human or to the web
            "T_low": 0.8,
            "T_high": 0.9,
            "R_hitl": 0.99,
            "risk_flags.ambiguous_candidate.ratio_at_least": 0.99,
            "risk_flags.huge_doc_sparse.total_chunks_at_least": 4,
            "risk_flags.huge_doc_sparse.coverage_ratio_below": 0.5,
            "risk_flags.low_coverage.coverage_below": 0.6,
        },
    ],
    ids=["overall_v1", "divide_by_max", "reference", "diagnostics_smoothing"],
)
def test_sql_matches_oracle_on_scifact(
    scifact_features: pd.DataFrame, overrides: dict, tmp_path: Path
) -> None:
    rows = scifact_features[list(INPUT_KEYS)].to_dict("records")
    params = with_overrides(OVERALL_V1_PARAMS, overrides)
    expected_parents, expected_queries = score_reference(rows, params)
    parents, queries = run_sql(rows, overrides, None, tmp_path / "out")
    assert_rows_match(parents, expected_parents, ["query_id", "parent_id"], 1e-12)
    assert_rows_match(queries, expected_queries, ["query_id"], 1e-12)


V2_SHAPED = {
    "strength_evidence": "parent_rrf",
    "w1": 0.4,
    "w2": 0.1,
    "w3": 0.1,
    "w_agreement": 0.1,
    "w_separation": 0.3,
    "separation_base": 0.4,
    "normalization.mode": "reference",
    "normalization.reference": {
        "rrf_sum": None,
        "parent_rrf": [0.02, 0.049],
        "max_score": [0.2, 1.0],
        "coverage": [1.0, 3.0],
        "log_chunks": [0.5, 2.0],
    },
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        V2_SHAPED,
        {**V2_SHAPED, "normalization.mode": "per_query", "w_agreement": 0.0, "w3": 0.2},
    ],
    ids=["reference", "per_query_no_agreement"],
)
def test_sql_matches_oracle_with_v2_subscores(
    scifact_features: pd.DataFrame, overrides: dict, tmp_path: Path
) -> None:
    v2_subscores_match_the_oracle(scifact_features, overrides, tmp_path / "out")


def v2_subscores_match_the_oracle(
    features: pd.DataFrame, overrides: dict, out: Path
) -> pd.DataFrame:
    """The SQL's parents and queries on `features` scored with overall_v2's sub-scores
    (`overrides` over overall_v1) equal the oracle's, to 1e-12; the SQL's parents."""
    used = ["parent_rrf", "score_lead"] + (["source_agreement"] if overrides["w_agreement"] else [])
    rows = features[list(INPUT_KEYS) + used].to_dict("records")
    params = with_overrides(OVERALL_V1_PARAMS, overrides)
    expected_parents, expected_queries = score_reference(rows, params)
    parents, queries = run_sql(rows, overrides, None, out)
    assert_rows_match(parents, expected_parents, ["query_id", "parent_id"], 1e-12)
    assert_rows_match(queries, expected_queries, ["query_id"], 1e-12)
    return parents
