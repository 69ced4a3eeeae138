"""The package's dbt tests: schema tests on the models' columns (models/schema.yml, which also
records each model's meta) and singular tests (tests/*.sql)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..score.stages import LEVELS
from .models import DbtModel, Versions

# the decisions' columns, on the contract and on its flat queries
DECISIONS: dict[str, list[Any]] = {
    "query_id": ["not_null", "unique"],
    "confidence_level": [
        "not_null",
        {"accepted_values": {"arguments": {"values": list(LEVELS)}}},
    ],
    "need_hitl": ["not_null"],
    "web_fallback": ["not_null"],
}
# model -> column -> its schema tests
COLUMN_TESTS: dict[str, dict[str, list[Any]]] = {
    "duckscore_fused": {
        "query_id": ["not_null"],
        "item_id": ["not_null"],
        "rank": ["not_null"],
        "fused_score": ["not_null"],
    },
    "duckscore_parent_features": {"query_id": ["not_null"], "parent_id": ["not_null"]},
    "duckscore_parents": {
        "query_id": ["not_null"],
        "parent_id": ["not_null"],
        "rank": ["not_null"],
    },
    "duckscore_contract": DECISIONS,
    "duckscore_queries": DECISIONS,
}

# a row per query (or parent) that breaks the rule: a dbt test passes when it returns none
SINGULAR_TESTS = {
    "duckscore_fused_ranks_are_1_based_and_unique": """\
-- duckscore_fused: within each query the ranks are 1, 2, … n, each once (n the query's items)
SELECT query_id, count(*) AS items, count(DISTINCT rank) AS ranks, min(rank) AS first_rank,
       max(rank) AS last_rank
FROM {{ ref('duckscore_fused') }}
GROUP BY query_id
HAVING count(rank) <> count(*) OR count(DISTINCT rank) <> count(*) OR min(rank) <> 1
    OR max(rank) <> count(*)
""",
    "duckscore_parents_are_unique_per_query": """\
-- duckscore_parents: one row per (query, parent), ranked 1, 2, … n within the query
SELECT query_id, count(*) AS parents, count(DISTINCT parent_id) AS distinct_parents,
       count(DISTINCT rank) AS ranks, max(rank) AS last_rank
FROM {{ ref('duckscore_parents') }}
GROUP BY query_id
HAVING count(DISTINCT parent_id) <> count(*) OR count(DISTINCT rank) <> count(*)
    OR min(rank) <> 1 OR max(rank) <> count(*)
""",
}


def model_properties(versions: Versions, models: Sequence[DbtModel]) -> dict[str, Any]:
    """models/schema.yml: each model's description, meta (what generated it) and tests; the
    contract's policy version checked against the one it was generated with."""
    tests = dict(COLUMN_TESTS)
    version = {"accepted_values": {"arguments": {"values": [versions.score.version]}}}
    tests["duckscore_contract"] = tests["duckscore_contract"] | {
        "score_policy_version": ["not_null", version]
    }
    return {
        "version": 2,
        "models": [
            {
                "name": m.name,
                "description": m.description,
                "config": {"meta": {"duckscore": versions.meta() | {"template": m.template}}},
                "columns": [
                    {"name": name, "data_tests": column_tests}
                    for name, column_tests in tests[m.name].items()
                ],
            }
            for m in models
        ],
    }
