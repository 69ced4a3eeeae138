"""The package's dbt tests: schema tests on the models' columns (models/schema.yml, which also
records each model's meta) and singular tests (tests/*.sql)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.render import lit
from ..fusion.recipe import FusePlan
from ..scoring.stages import LEVELS
from .models import SOURCE, DbtModel, Versions, jinja_literal

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


SOURCES_TEST = "duckscore_log_sources_known"


def sources_test(fuse_plan: FusePlan, declared: Sequence[str]) -> str:
    """tests/duckscore_log_sources_known.sql: a row for each source of the log the models do
    not fuse where `duckscore run` would fuse it (any source, when the recipe discovers them),
    for hits without a source, and for a source the recipe declares (`declared`, before the
    plan) that the log lacks, which run refuses; each row names the source, the problem and
    its hits. A test of the source: when it fails, `dbt build` skips the models."""
    recipe = fuse_plan.recipe
    fused = ", ".join(fuse_plan.sources)
    if recipe.discover_sources:
        rule = (
            f"-- recipe {recipe.version} fuses every source of a log, as `duckscore run` does; "
            f"the models fuse {fused}."
        )
        unknown = f"source IS NULL OR source NOT IN ({', '.join(map(lit, fuse_plan.sources))})"
    else:
        rule = (
            f"-- recipe {recipe.version} fuses the sources it declares ({fused}) and leaves "
            "the log's others out,\n-- as `duckscore run` does."
        )
        unknown = "source IS NULL"
    not_fused = (
        f"not fused: the package fuses {fused}; generate it again with "
        "`duckscore dbt package --log` on this log"
    )
    head = (
        f"-- {SOURCES_TEST}: a row for each source of the log the models do not fuse, each "
        "source the recipe\n-- declares that the log lacks, and the hits without a source "
        "(`dbt show --select "
        f"{SOURCES_TEST}`).\n{rule}\n"
        "WITH log_sources AS (\n"
        "    SELECT CAST(source AS VARCHAR) AS source, count(*) AS hits\n"
        "    FROM "
    )
    body = (
        "\n    GROUP BY ALL\n)\n"
        "SELECT source,\n"
        "    CASE WHEN source IS NULL THEN 'no source: duckscore run refuses such hits'\n"
        f"        ELSE {lit(not_fused)} END AS problem,\n"
        f"    hits\nFROM log_sources\nWHERE {unknown}\n"
    )
    if declared:
        missing = (
            f"not in the log: recipe {recipe.version} declares it (duckscore run refuses the log)"
        )
        values = ", ".join(f"({lit(name)})" for name in sorted(declared))
        body += (
            f"UNION ALL\nSELECT name, {lit(missing)}, CAST(0 AS BIGINT)\n"
            f"FROM (VALUES {values}) AS declared(name)\n"
            "WHERE NOT EXISTS (SELECT 1 FROM log_sources AS l WHERE l.source = declared.name)\n"
        )
    body += "ORDER BY source NULLS FIRST\n"
    return jinja_literal(head) + "{{ " + SOURCE + " }}" + jinja_literal(body)


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
