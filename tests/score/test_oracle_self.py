"""Self-tests of the plain-Python scoring oracle (``tests/score/overall_reference.py``).

1. The oracle reproduces every hand-computed value in ``tests/score/cases/*.yaml``
   (floats within an absolute 1e-12).
2. Its quantile matches ``numpy.quantile(method="linear")`` on random data.
3. A few structural invariants hold on random inputs.

Fixture format (one case per YAML file)::

    description: text
    params_override: {dotted.key: value, ...}    # applied to OVERALL_V1_PARAMS; may be {}
    rows: [ {query_id, parent_id, rrf_sum, max_score, coverage, total_chunks, coverage_ratio}, ... ]
    queries: [query_id, ...]                     # optional; a listed id without rows = empty result
    expected:
      parents:   # one entry per candidate parent, all of PARENT_KEYS below
        - {query_id, parent_id, log_chunks, rrf_sum_norm, max_score_norm, coverage_norm,
           log_chunks_norm, s_strength, s_coverage, s_stability, overall_score, rank,
           n_candidates, risk_flags, row_flags}
      queries:   # one entry per query, all of QUERY_KEYS below
        - {query_id, best_parent_id, best_overall_score, confidence_level, top2_ratio,
           need_hitl, web_fallback}

A case whose params_override adds ``coverage_smoothing`` expects ``coverage_ratio_smoothed`` on
each parent, one that adds ``diagnostics`` ``actions`` on each query (issue 50): exactly then.

``risk_flags`` lists the true risk flags in the order low_coverage, single_spike,
sparse_evidence, huge_doc_sparse, ambiguous_candidate; the boolean columns
``flag_<name>`` are expected to equal ``<name> in risk_flags``. YAML numbers in exponent form
must carry a dot and a signed exponent (``1.0e-09``) or PyYAML reads them as strings; the
loader below rejects string values where numbers are expected.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from .overall_reference import (
    OVERALL_V1_PARAMS,
    RISK_FLAGS,
    quantile_linear,
    score_reference,
    with_overrides,
)

CASES_DIR = Path(__file__).resolve().parent / "cases"
CASE_FILES = sorted(CASES_DIR.glob("*.yaml"))
ABS_TOL = 1e-12

FLOAT_PARENT_KEYS = (
    "log_chunks",
    "rrf_sum_norm",
    "max_score_norm",
    "coverage_norm",
    "log_chunks_norm",
    "s_strength",
    "s_coverage",
    "s_stability",
    "overall_score",
)
PARENT_KEYS = (
    "query_id",
    "parent_id",
    *FLOAT_PARENT_KEYS,
    "rank",
    "n_candidates",
    "risk_flags",
    "row_flags",
)
QUERY_KEYS = (
    "query_id",
    "best_parent_id",
    "best_overall_score",
    "confidence_level",
    "top2_ratio",
    "need_hitl",
    "web_fallback",
)
# issue 50's optional blocks, and the output key each adds
SMOOTHED_KEY, ACTIONS_KEY = "coverage_ratio_smoothed", "actions"
INPUT_NUMERIC_KEYS = ("rrf_sum", "max_score", "coverage", "total_chunks", "coverage_ratio")
OUTPUT_PARENT_KEYS = (
    *INPUT_NUMERIC_KEYS,
    *PARENT_KEYS,
    *(f"flag_{name}" for name in RISK_FLAGS),
)


def load_case(path: Path) -> dict[str, Any]:
    """Load one fixture and check its shape (so that a malformed file fails loudly)."""
    with path.open(encoding="utf-8") as fh:
        case = yaml.safe_load(fh)
    assert isinstance(case, dict), path
    assert set(case) <= {"description", "params_override", "rows", "queries", "expected"}, path
    assert isinstance(case.get("description"), str) and case["description"].strip(), path
    assert isinstance(case.get("params_override"), dict), path
    assert isinstance(case.get("rows"), list), path
    for row in case["rows"]:
        assert isinstance(row["query_id"], str) and isinstance(row["parent_id"], str), row
        for key in INPUT_NUMERIC_KEYS:
            assert _is_number(row[key]), (path.name, key, row)
    expected = case["expected"]
    assert set(expected) == {"parents", "queries"}, path
    parent_keys, query_keys = expected_keys(case["params_override"])
    for entry in expected["parents"]:
        assert set(entry) == parent_keys, (path.name, sorted(parent_keys ^ set(entry)))
        for key in FLOAT_PARENT_KEYS:
            assert _is_number(entry[key]), (path.name, key, entry)
        assert set(entry["risk_flags"]) <= set(RISK_FLAGS), entry
    for entry in expected["queries"]:
        assert set(entry) == query_keys, (path.name, sorted(query_keys ^ set(entry)))
        for key in ("best_overall_score", "top2_ratio"):
            assert entry[key] is None or _is_number(entry[key]), (path.name, key, entry)
    return case


def expected_keys(overrides: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The keys of a parent and of a query under a case's overrides."""
    parents = set(PARENT_KEYS) | ({SMOOTHED_KEY} if "coverage_smoothing" in overrides else set())
    queries = set(QUERY_KEYS) | ({ACTIONS_KEY} if "diagnostics" in overrides else set())
    return parents, queries


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _assert_value(where: str, key: str, actual: Any, expected: Any) -> None:
    """Compare one column: floats within ABS_TOL, everything else exactly (bool is not a number)."""
    if isinstance(expected, bool) or expected is None or isinstance(expected, str | list):
        assert actual == expected and type(actual) is type(expected), (
            f"{where}: {key} = {actual!r}, expected {expected!r}"
        )
    elif _is_number(expected):
        assert _is_number(actual), f"{where}: {key} = {actual!r}, expected number {expected!r}"
        assert math.isclose(actual, expected, rel_tol=0.0, abs_tol=ABS_TOL), (
            f"{where}: {key} = {actual!r}, expected {expected!r} (diff {actual - expected:.3e})"
        )
    else:  # pragma: no cover - fixture shape is validated in load_case
        raise AssertionError(f"{where}: unsupported expected value {expected!r}")


def run_case(case: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    params = with_overrides(OVERALL_V1_PARAMS, case["params_override"])
    return score_reference(case["rows"], params, case.get("queries"))


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_fixture_case(path: Path) -> None:
    case = load_case(path)
    rows_before = copy.deepcopy(case["rows"])
    parents, queries = run_case(case)
    assert case["rows"] == rows_before, "the oracle must not modify its input rows"

    by_parent = {(r["query_id"], r["parent_id"]): r for r in parents}
    expected_parents = {(e["query_id"], e["parent_id"]): e for e in case["expected"]["parents"]}
    assert len(by_parent) == len(parents)
    assert set(by_parent) == set(expected_parents)
    for key, exp in expected_parents.items():
        got = by_parent[key]
        where = f"{path.name} parent {key}"
        missing = set(OUTPUT_PARENT_KEYS) - set(got)
        assert not missing, f"{where}: missing output columns {missing}"
        for column, value in exp.items():
            _assert_value(where, column, got[column], value)
        for name in RISK_FLAGS:
            _assert_value(where, f"flag_{name}", got[f"flag_{name}"], name in exp["risk_flags"])

    by_query = {q["query_id"]: q for q in queries}
    expected_queries = {e["query_id"]: e for e in case["expected"]["queries"]}
    assert len(by_query) == len(queries)
    assert set(by_query) == set(expected_queries)
    for query_id, exp in expected_queries.items():
        got = by_query[query_id]
        assert set(got) == expected_keys(case["params_override"])[1]
        for column, value in exp.items():
            _assert_value(f"{path.name} query {query_id!r}", column, got[column], value)


def test_fixture_cases_present() -> None:
    """The hand-made cases listed in the brief (a-k) exist."""
    stems = {p.stem.split("_", 1)[0] for p in CASE_FILES}
    wanted = ("a", "b1", "b2", "c1", "c2", "d1", "d2", "e", "f1", "f2", "g", "h", "i1", "j", "k")
    for prefix in wanted:
        assert prefix in stems, prefix


# --------------------------------------------------------------------------------------------
# Quantile vs numpy
# --------------------------------------------------------------------------------------------

_floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=500, deadline=None)
@given(
    values=st.lists(_floats, min_size=1, max_size=60),
    p=st.one_of(
        st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]), st.floats(min_value=0.0, max_value=1.0)
    ),
)
def test_quantile_matches_numpy_linear(values: list[float], p: float) -> None:
    ours = quantile_linear(values, p)
    theirs = float(np.quantile(np.asarray(values, dtype=np.float64), p, method="linear"))
    scale = max(1.0, *(abs(v) for v in values))
    assert math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=1e-12 * scale), (ours, theirs)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(min_value=-1000, max_value=1000), min_size=1, max_size=40))
def test_quantile_p10_p90_small_integers(values: list[int]) -> None:
    for p in (0.1, 0.9):
        ours = quantile_linear(values, p)
        theirs = float(np.quantile(np.asarray(values, dtype=np.float64), p, method="linear"))
        assert math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=1e-9), (p, ours, theirs)


def test_quantile_hand_values() -> None:
    assert quantile_linear([0.035, 0.010, 0.020], 0.1) == pytest.approx(0.012, abs=1e-15)
    assert quantile_linear([0.035, 0.010, 0.020], 0.9) == pytest.approx(0.032, abs=1e-15)
    assert quantile_linear([5.0], 0.1) == 5.0
    assert quantile_linear([0.0] + [2.0] * 9 + [5.0], 0.1) == 2.0
    assert quantile_linear([0.0] + [2.0] * 9 + [5.0], 0.9) == 2.0
    with pytest.raises(ValueError):
        quantile_linear([], 0.5)


# --------------------------------------------------------------------------------------------
# Structural invariants on random inputs
# --------------------------------------------------------------------------------------------

_candidate = st.fixed_dictionaries(
    {
        "rrf_sum": st.floats(min_value=0.0, max_value=0.1, allow_nan=False),
        "max_score": st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
        "coverage": st.integers(min_value=0, max_value=4),
        "total_chunks": st.integers(min_value=1, max_value=200),
        "coverage_ratio": st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
    }
)


@settings(max_examples=200, deadline=None)
@given(
    groups=st.lists(st.lists(_candidate, min_size=1, max_size=8), min_size=1, max_size=4),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_invariants(groups: list[list[dict[str, Any]]], seed: int) -> None:
    rows = [
        {"query_id": f"q{qi}", "parent_id": f"p{pi}", **cand}
        for qi, group in enumerate(groups)
        for pi, cand in enumerate(group)
    ]
    params = with_overrides(OVERALL_V1_PARAMS, {})
    parents, queries = score_reference(rows, params, queries=["q_empty"])
    shuffled = rows[:]
    random.Random(seed).shuffle(shuffled)
    parents2, queries2 = score_reference(shuffled, params, queries=["q_empty"])
    assert parents == parents2 and queries == queries2, "result depends on input order"

    assert len(parents) == len(rows)
    for row in parents:
        for key in ("rrf_sum_norm", "max_score_norm", "coverage_norm", "log_chunks_norm"):
            assert 0.0 <= row[key] <= 1.0
        assert 0.0 <= row["overall_score"] <= 1.0
        assert row["risk_flags"] == [n for n in RISK_FLAGS if row[f"flag_{n}"]]
    for qi, group in enumerate(groups):
        mine = [r for r in parents if r["query_id"] == f"q{qi}"]
        assert sorted(r["rank"] for r in mine) == list(range(1, len(group) + 1))
        ordered = sorted(mine, key=lambda r: r["rank"])
        assert all(a["overall_score"] >= b["overall_score"] for a, b in itertools.pairwise(ordered))
        assert all(r["n_candidates"] == len(group) for r in mine)
        query = next(q for q in queries if q["query_id"] == f"q{qi}")
        assert query["best_parent_id"] == ordered[0]["parent_id"]
        assert sum(r["flag_ambiguous_candidate"] for r in mine) <= 1
    empty = next(q for q in queries if q["query_id"] == "q_empty")
    assert empty["web_fallback"] is True and empty["best_parent_id"] is None
