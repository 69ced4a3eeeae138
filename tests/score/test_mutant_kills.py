"""Tests written for mutants of sql/score/ that survived the fast tests (tests/mutants/, issue 37).

overall_v2's sub-scores (S_agreement, S_separation = base + (1 − base) · score_lead) were
checked against the oracle only by slow tests (tests/score/test_oracle.py on all of SciFact), so
`separation_base` made the constant 1.0 survived the fast tier. Here the same oracle judges 25
SciFact queries, with a separation base and weights that are not the defaults.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from duckscore.fuse.pipeline import fuse

from ..helpers import SCIFACT
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
