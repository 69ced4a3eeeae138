"""Per query (orchestrator/runner/per_query.py, issue 52 §2): the property read off a policy and
its recipe, checked on the log for every packaged recipe × policy — two disjoint sets of SciFact
queries scored apart and together give the same contract lines, fused items and scored parents
exactly when the job is per query. Set A has no hit of the `summary` source, set B has: the
only packaged recipe that is not per query (opensearch_hybrid counts the empty list of every
source the log names) then fuses A's queries differently in company."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from duckscore.api.scorer import Live, Scorer
from duckscore.core.policy import available_policies
from duckscore.fusion.recipe import FUSE_RECIPE
from duckscore.runner.job import Job
from duckscore.scoring.policy import SCORE_POLICY

from ..helpers import SCIFACT

pytestmark = [pytest.mark.slow]

LOG = SCIFACT / "retrieval_log.parquet"
PLUGIN_RECIPE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "tanh_dismax.yaml"
RECIPES = available_policies(FUSE_RECIPE)
POLICIES = available_policies(SCORE_POLICY)


@pytest.fixture(scope="module")
def query_sets() -> tuple[pa.Table, pa.Table]:
    hits = duckdb.sql(f"FROM read_parquet('{LOG}')").to_arrow_table()
    ids = sorted(set(hits["query_id"].to_pylist()))[:32]
    a = hits.filter(pc.is_in(hits["query_id"], pa.array(ids[::2])))
    b = hits.filter(pc.is_in(hits["query_id"], pa.array(ids[1::2])))
    return a.filter(pc.not_equal(a["source"], "summary")), b


def rows(*lives: Live) -> dict[str, list[str]]:
    """Every number of the calls, as the JSON of each row (floats to the last bit), in a
    canonical order: the contract lines, the fused items, the scored parents."""

    def canonical(table: list[dict[str, Any]]) -> list[str]:
        return sorted(json.dumps(row, sort_keys=True, default=str) for row in table)

    return {
        "contract": canonical([line for live in lives for line in live.contract]),
        "fused": canonical([row for live in lives for row in live.fused.to_pylist()]),
        "parents": canonical([row for live in lives for row in live.parents.to_pylist()]),
    }


def test_the_packaged_recipes_and_policies_are_all_there() -> None:
    assert len(RECIPES) >= 10 and "opensearch_hybrid" in RECIPES
    assert POLICIES == ["overall_v1", "overall_v2", "overall_v3"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("recipe", RECIPES)
def test_per_query_is_what_scoring_apart_and_together_shows(
    query_sets: tuple[pa.Table, pa.Table], recipe: str, policy: str
) -> None:
    a, b = query_sets
    with Scorer(Job(recipe=recipe, policy=policy, allow_recipe_mismatch=True)) as scorer:
        apart = rows(scorer.score(a, tables=True), scorer.score(b, tables=True))
        together = rows(scorer.score(pa.concat_tables([a, b]), tables=True))
    differ = [name for name in apart if apart[name] != together[name]]
    assert scorer.per_query == (recipe != "opensearch_hybrid")
    # per query: nothing differs; not per query: the fused items do (the contract does not:
    # the parent features read the hits, not the fused scores)
    assert differ == ([] if scorer.per_query else ["fused"])
    assert len(apart["contract"]) == 32


def test_the_reasons_name_the_parameters() -> None:
    loaded = Job(recipe="opensearch_hybrid", allow_recipe_mismatch=True).load()
    assert loaded.cross_query == (
        "opensearch_hybrid: fusion.count_empty_sources counts the empty list of every source "
        "the log names (discover_sources)",
    )
    declared = Job(
        recipe="opensearch_hybrid",
        recipe_overrides=(
            "discover_sources=false",
            "sources={sparse: {}, dense: {}, summary: {}}",
        ),
        allow_recipe_mismatch=True,
    ).load()
    assert declared.per_query  # the sources fused are the recipe's, not the log's
    plugins = Job(recipe=str(PLUGIN_RECIPE), allow_recipe_mismatch=True).load()
    assert not plugins.per_query
    assert "plugin components" in plugins.cross_query[0]
    assert Job().load().per_query and Job().load().cross_query == ()
