"""Property tests (hypothesis) of `duckscore score` and of its combination macro.

* Bounds: every normalised input, sub-score and overall_score lies in [0, 1]; rank is a
  permutation 1..n per query; contract.jsonl has exactly one line per query.
* The oracle: the same drawn inputs (ties, zeros, subnormals, magnitudes up to 1e308) give
  every column of parents.parquet and queries.parquet that `tests/score/overall_reference.py`
  gives (floats to 1e-12, flags and levels exactly).
* Monotonicity (seed 000 §2.1/§6): the rendered `weighted_geomean` never decreases when one
  sub-score increases, and maps [0, 1]^3 into [0, 1].
* Invariance: shuffling the input rows, or scoring with 1 or 2 threads, changes nothing.
* Determinism: two runs give byte-identical contract.jsonl.

Data is small (1-3 queries, 1-8 parents) and example counts are modest so the file runs in well
under a minute. Hypothesis' example database is off: nothing is written outside tmp folders.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duckscore.core.connection import EngineSettings
from duckscore.core.render import render_expression
from duckscore.scoring.pipeline import score

from ..helpers import same_value
from .overall_reference import OVERALL_V1_PARAMS, score_reference

PROPERTY_SETTINGS = dict(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

UNIT_COLUMNS_EXACT = ("overall_score", "s_strength", "s_coverage", "s_stability")

# ---------------------------------------------------------------------------------------------
# strategies: small parent_features tables with ties, zeros, equal values and large magnitudes

# A few shared values make ties and equal columns common; the rest spans many magnitudes.
SPECIAL_SCORES = [
    0.0,
    0.0,
    1.0,
    0.5,
    0.016,
    1e-12,
    5e-324,
    -1.0,
    1e6,
    1e15,
    -1e15,
    1e300,
    -1e300,
    1e308,
]
score_values = st.one_of(
    st.sampled_from(SPECIAL_SCORES),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.floats(min_value=0.0, max_value=1.0),
)
coverage_values = st.one_of(
    st.sampled_from([0.0, 0.0, 1.0, 3.0, 1e-300, 1e12, 1e300, 1e308]),
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=50).map(float),
)
ratio_values = st.one_of(
    st.sampled_from([0.0, 0.0, 1.0, 0.5, 0.1, 1e-300]), st.floats(min_value=0.0, max_value=1.0)
)
chunk_values = st.one_of(
    st.sampled_from([0, 0, 1, 50, 10**9, 2**53]), st.integers(min_value=0, max_value=1000)
)
# (built from sampled characters: st.text would make hypothesis write a charmap cache to .hypothesis/)
parent_ids = st.lists(st.sampled_from(list("abpP0_é")), min_size=1, max_size=3).map("".join)


@st.composite
def parent_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    query_ids = draw(
        st.lists(
            st.sampled_from(["q1", "q2", "q10", "Q", "é"]), min_size=1, max_size=3, unique=True
        )
    )
    rows: list[dict[str, Any]] = []
    for query_id in query_ids:
        parents = draw(st.lists(parent_ids, min_size=1, max_size=8, unique=True))
        # per query, a small pool of values some rows share exactly (ties), plus free values
        pool = draw(st.lists(score_values, min_size=1, max_size=3))
        shared = st.one_of(st.sampled_from(pool), score_values)
        for parent_id in parents:
            rows.append({"query_id": query_id, **seed_features(draw, parent_id, shared)})
    return rows


def seed_features(draw: st.DrawFn, parent_id: str, shared: st.SearchStrategy) -> dict[str, Any]:
    """One parent's seed 000 §1.2 features; `shared` draws rrf_sum and max_score (ties)."""
    return {
        "parent_id": parent_id,
        "rrf_sum": draw(shared),
        "max_score": draw(shared),
        "coverage": draw(coverage_values),
        "total_chunks": draw(chunk_values),
        "coverage_ratio": draw(ratio_values),
    }


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(
        rows,
        columns=[
            "query_id",
            "parent_id",
            "rrf_sum",
            "max_score",
            "coverage",
            "total_chunks",
            "coverage_ratio",
        ],
    )
    return df.astype(
        {
            "rrf_sum": "float64",
            "max_score": "float64",
            "coverage": "float64",
            "total_chunks": "int64",
            "coverage_ratio": "float64",
        }
    )


def run(features: pd.DataFrame, out_dir: Path, threads: int | None = None) -> Path:
    score(features, out_dir, policy="overall_v1", settings=EngineSettings(threads=threads))
    return out_dir


def parents_frame(out_dir: Path) -> pd.DataFrame:
    """parents.parquet with list columns as tuples, so frames compare exactly."""
    df = pq.read_table(out_dir / "parents.parquet").to_pandas()
    for column in df.columns:
        if df[column].dtype == object and len(df) and not isinstance(df[column].iloc[0], str):
            df[column] = df[column].map(lambda v: tuple(v) if v is not None else None)
    return df


# ---------------------------------------------------------------------------------------------
# bounds, and the oracle


def plain(value: Any) -> Any:
    """A parquet cell as the oracle writes it: lists as lists, NaN as None, numpy as Python."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def assert_equals_the_oracle(
    rows: list[dict[str, Any]], frames: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    """Every column the oracle gives, on every parent and query, equals the SQL's."""
    want_parents, want_queries = score_reference(rows, OVERALL_V1_PARAMS)
    for got, want, key in (
        (frames[0], want_parents, ("query_id", "parent_id")),
        (frames[1], want_queries, ("query_id",)),
    ):
        indexed = {tuple(r[k] for k in key): r for r in got.to_dict("records")}
        assert len(indexed) == len(want)
        for expected in want:
            actual = indexed[tuple(expected[k] for k in key)]
            bad = {
                column: (plain(actual[column]), value)
                for column, value in expected.items()
                if not same_value(plain(actual[column]), value, 1e-12)
            }
            assert not bad, f"{[expected[k] for k in key]}: column: (SQL, oracle) {bad}"


@settings(max_examples=20, **PROPERTY_SETTINGS)
@given(rows=parent_rows())
def test_scores_bounded_ranks_permuted_one_contract_line_per_query(
    rows: list[dict[str, Any]],
) -> None:
    features = frame(rows)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = run(features, Path(tmp) / "out")
        parents = pq.read_table(out_dir / "parents.parquet").to_pandas()
        out_dir_frames = (parents, pq.read_table(out_dir / "queries.parquet").to_pandas())
        contract = [
            json.loads(line)
            for line in (out_dir / "contract.jsonl").read_text(encoding="utf-8").splitlines()
        ]

    assert len(parents) == len(features)
    bounded = [c for c in parents.columns if c.endswith("_norm")] + list(UNIT_COLUMNS_EXACT)
    assert {"rrf_sum_norm", "max_score_norm", "coverage_norm", "log_chunks_norm"} <= set(bounded)
    for column in bounded:
        values = parents[column]
        assert values.notna().all(), f"{column} has NULL/NaN:\n{parents[values.isna()]}"
        outside = parents[(values < 0) | (values > 1)]
        assert outside.empty, (
            f"{column} outside [0, 1]:\n{outside[['query_id', 'parent_id', column]]}"
        )

    for query_id, group in parents.groupby("query_id"):
        n = len(features[features.query_id == query_id])
        assert sorted(group["rank"]) == list(range(1, n + 1)), (
            f"ranks of {query_id}: {list(group['rank'])}"
        )
        # rank follows overall_score (descending) within the query
        ordered = group.sort_values("rank")["overall_score"].tolist()
        assert ordered == sorted(ordered, reverse=True)

    assert_equals_the_oracle(rows, out_dir_frames)

    query_ids = sorted(features["query_id"].unique())
    assert sorted(line["query_id"] for line in contract) == query_ids
    assert len(contract) == len(query_ids)
    for line in contract:
        assert line["best_overall_score"] is not None and 0 <= line["best_overall_score"] <= 1
        for parent in line["top_parents"]:
            for key in ("overall_score", "strength", "coverage", "stability"):
                assert 0 <= parent[key] <= 1, (key, parent)


# ---------------------------------------------------------------------------------------------
# monotonicity of the combination (weighted geometric mean, seed 000 §6)

_CON = duckdb.connect()
GEOMEAN = "{{ weighted_geomean([('a', w1), ('b', w2), ('c', w3)], floor) }}"

unit = st.one_of(
    st.sampled_from([0.0, 1.0, 0.01, 0.0099999, 1e-300, 5e-324, 0.5]),
    st.floats(min_value=0.0, max_value=1.0),
)
weights = st.one_of(
    st.sampled_from([0.5, 0.3, 0.2, 1.0, 1e-6]), st.floats(min_value=1e-6, max_value=10.0)
)
floors = st.one_of(st.just(0.01), st.floats(min_value=1e-9, max_value=1.0))


def geomean(
    terms: list[tuple[float, float, float]], w: tuple[float, float, float], floor: float
) -> list[float | None]:
    expression = render_expression(GEOMEAN, w1=w[0], w2=w[1], w3=w[2], floor=floor)
    values = ", ".join(
        "(?, CAST(? AS DOUBLE), CAST(? AS DOUBLE), CAST(? AS DOUBLE))" for _ in terms
    )
    sql = f"SELECT {expression} AS r FROM (VALUES {values}) AS t(i, a, b, c) ORDER BY i"
    params = [x for i, term in enumerate(terms) for x in (i, *term)]
    return [row[0] for row in _CON.execute(sql, params).fetchall()]


def test_geomean_renders_with_the_documented_signature() -> None:
    sql = render_expression(GEOMEAN, w1=0.5, w2=0.3, w3=0.2, floor=0.01)
    assert "exp(" in sql and "ln(" in sql
    # the seed's example: all three sub-scores equal s gives s
    assert geomean([(0.3, 0.3, 0.3)], (0.5, 0.3, 0.2), 0.01)[0] == pytest.approx(0.3, rel=1e-12)


@settings(max_examples=60, **PROPERTY_SETTINGS)
@given(
    scores=st.tuples(unit, unit, unit),
    w=st.tuples(weights, weights, weights),
    floor=floors,
    which=st.integers(min_value=0, max_value=2),
    raised=unit,
)
def test_geomean_monotone_and_bounded(
    scores: tuple[float, float, float],
    w: tuple[float, float, float],
    floor: float,
    which: int,
    raised: float,
) -> None:
    low = list(scores)
    high = list(scores)
    high[which] = max(scores[which], raised)  # one sub-score increased (or unchanged)
    before, after = geomean([tuple(low), tuple(high)], w, floor)
    for value in (before, after):
        assert value is not None and not math.isnan(value)
        assert 0.0 <= value <= 1.0, (value, scores, w, floor)
    assert after >= before, (
        f"raising term {which} {scores[which]} -> {high[which]} lowered {before} -> {after}"
    )


@settings(max_examples=40, **PROPERTY_SETTINGS)
@given(
    scores=st.tuples(*[st.floats(min_value=-1.0, max_value=2.0)] * 3),
    w=st.tuples(weights, weights, weights),
    floor=floors,
    which=st.integers(min_value=0, max_value=2),
    delta=st.floats(min_value=0.0, max_value=3.0),
)
def test_geomean_monotone_beyond_the_unit_interval(
    scores: tuple[float, float, float],
    w: tuple[float, float, float],
    floor: float,
    which: int,
    delta: float,
) -> None:
    high = list(scores)
    high[which] = scores[which] + delta
    before, after = geomean([scores, tuple(high)], w, floor)
    assert after >= before


# ---------------------------------------------------------------------------------------------
# invariance and determinism


def contract_lines(out_dir: Path) -> list[str]:
    return (out_dir / "contract.jsonl").read_text(encoding="utf-8").splitlines()


@settings(max_examples=20, **PROPERTY_SETTINGS)
@given(data=st.data(), rows=parent_rows())
def test_row_order_and_thread_count_do_not_matter(
    data: st.DataObject, rows: list[dict[str, Any]]
) -> None:
    features = frame(rows)
    order = data.draw(st.permutations(range(len(features))), label="row order")
    shuffled = features.iloc[list(order)]
    with tempfile.TemporaryDirectory() as tmp:
        base = run(features, Path(tmp) / "base", threads=1)
        moved = run(shuffled, Path(tmp) / "shuffled", threads=1)
        two = run(features, Path(tmp) / "two_threads", threads=2)
        reference = parents_frame(base)
        for other in (moved, two):
            pd.testing.assert_frame_equal(parents_frame(other), reference, check_exact=True)
            assert contract_lines(other) == contract_lines(base)


@settings(max_examples=20, **PROPERTY_SETTINGS)
@given(rows=parent_rows())
def test_two_runs_give_byte_identical_contract(rows: list[dict[str, Any]]) -> None:
    features = frame(rows)
    with tempfile.TemporaryDirectory() as tmp:
        first = run(features, Path(tmp) / "first")
        second = run(features.copy(), Path(tmp) / "second")
        assert (first / "contract.jsonl").read_bytes() == (second / "contract.jsonl").read_bytes()
