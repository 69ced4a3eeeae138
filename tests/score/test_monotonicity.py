"""Seed 000 §2.1's monotonicity, end to end: a better input signal never lowers OverallScore.

The property, as it holds and is tested here: in one query's candidate set, give one parent a
better value of one feature — a higher `rrf_sum`, `max_score`, `coverage`, `coverage_ratio`,
`parent_rrf`, `source_agreement` or `score_lead`, every other value of every parent unchanged —
and that parent's own `overall_score`, as `duckscore score` computes it through the whole SQL
(normalisation, sub-scores, floors, the weighted geometric mean), does not go down; for every
packaged policy (`overall_v1`, per-query quantile bounds; `overall_v2` and `overall_v3`, the
policy's reference bounds).

What it does not say: with per-query bounds (§4.2, `overall_v1`), the improved value can move
the query's P10 and P90, so the other parents' normalised values, scores and ranks may go down
(or up): the property is about the improved parent's own score. `total_chunks` is the
document's size, not a signal that gets better or worse (§5.3 reads it as a scale term, §7.3's
huge_doc_sparse as a risk), so it is held fixed.

The before and after tables are scored in one run, as two queries (`before`, `after`): the
score of a query reads only its own parents. Floats are compared exactly: no tolerance.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from duckscore.core.policy import available_policies
from duckscore.scoring.pipeline import score
from duckscore.scoring.policy import SCORE_POLICY

from .test_properties import (
    PROPERTY_SETTINGS,
    parent_ids,
    ratio_values,
    score_values,
    seed_features,
)

POLICIES = available_policies(SCORE_POLICY)
UNBOUNDED = ("rrf_sum", "max_score", "coverage", "parent_rrf")  # ≥ 0 for coverage, parent_rrf
UNIT = ("coverage_ratio", "source_agreement", "score_lead")  # in [0, 1]
NONNEGATIVE = ("coverage", "parent_rrf")
increments = st.one_of(
    st.sampled_from([1e-12, 5e-324, 1e-3, 0.5, 1.0, 1e6, 1e300]),
    st.floats(min_value=0.0, max_value=1e6, exclude_min=True),
)


@st.composite
def one_query(draw: st.DrawFn) -> list[dict[str, Any]]:
    parents = draw(st.lists(parent_ids, min_size=1, max_size=8, unique=True))
    pool = draw(st.lists(score_values, min_size=1, max_size=3))  # shared values: ties
    shared = st.one_of(st.sampled_from(pool), score_values)
    return [
        seed_features(draw, parent_id, shared)
        | {
            "parent_rrf": abs(draw(shared)),
            "source_agreement": draw(ratio_values),
            "score_lead": draw(ratio_values),
        }
        for parent_id in parents
    ]


@st.composite
def improvements(draw: st.DrawFn) -> tuple[list[dict[str, Any]], str, str, float]:
    """A query's parents, the parent and feature improved, and the feature's better value."""
    rows = draw(one_query())
    parent = draw(st.sampled_from([row["parent_id"] for row in rows]))
    feature = draw(st.sampled_from(UNBOUNDED + UNIT))
    old = next(row[feature] for row in rows if row["parent_id"] == parent)
    if feature in UNIT:
        better = draw(st.floats(min_value=old, max_value=1.0))
    else:
        better = old + draw(increments)
    assume(better > old and better != float("inf"))
    return rows, parent, feature, better


def scored(rows: list[dict[str, Any]], parent: str, feature: str, better: float, policy: str):
    """overall_score of `parent` before and after its `feature` becomes `better`."""
    after = [row | ({feature: better} if row["parent_id"] == parent else {}) for row in rows]
    features = pd.DataFrame(
        [{"query_id": "before", **row} for row in rows]
        + [{"query_id": "after", **row} for row in after]
    ).astype({"total_chunks": "int64"})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        score(features, out, policy=policy)
        found = dict(
            duckdb.execute(
                f"SELECT query_id, overall_score FROM '{out / 'parents.parquet'}' "
                "WHERE parent_id = ?",
                [parent],
            ).fetchall()
        )
    return found["before"], found["after"]


def test_the_check_sees_a_lowered_score() -> None:
    """The comparison can fail: a worse value (max_score 0 → -1 among parents 1 and 0) lowers
    the parent's score under overall_v1, whose strength reads max_score."""
    rows = [
        {"parent_id": "a", "rrf_sum": 1.0, "max_score": 0.0, "coverage": 1.0,
         "total_chunks": 4, "coverage_ratio": 0.5, "parent_rrf": 0.02,
         "source_agreement": 0.5, "score_lead": 0.5},
        {"parent_id": "b", "rrf_sum": 0.5, "max_score": 1.0, "coverage": 2.0,
         "total_chunks": 4, "coverage_ratio": 0.5, "parent_rrf": 0.01,
         "source_agreement": 0.5, "score_lead": 0.5},
        {"parent_id": "c", "rrf_sum": 0.2, "max_score": -0.5, "coverage": 1.0,
         "total_chunks": 4, "coverage_ratio": 0.5, "parent_rrf": 0.01,
         "source_agreement": 0.5, "score_lead": 0.5},
    ]  # fmt: skip
    before, after = scored(rows, "a", "max_score", -1.0, "overall_v1")
    assert after < before


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=40, **PROPERTY_SETTINGS)
@given(case=improvements())
def test_a_better_feature_never_lowers_the_parents_score(
    policy: str, case: tuple[list[dict[str, Any]], str, str, float]
) -> None:
    rows, parent, feature, better = case
    before, after = scored(rows, parent, feature, better, policy)
    assert after >= before, f"{policy}: {parent}.{feature} -> {better!r}: {before!r} -> {after!r}"
