"""`Recipe` (fusion/recipe_view.py): a loaded recipe's typed, frozen attributes are what its YAML
says. The expectations are written by hand from the files (sql/fuse/recipes/opensearch_hybrid.yaml,
and one written here over hybrid_v1), not read back from the code."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from duckscore.fusion.recipe import load_recipe, plan
from duckscore.fusion.recipe_view import (
    Aligner,
    Bound,
    Fusion,
    ParentFeatures,
    QueryAnalyzer,
    QueryRule,
    Recipe,
    RecipeSource,
    Rerank,
)

# over hybrid_v1 (source_defaults {top_k: null, normalize: rank, weight: 1.0, distance: false},
# aligner {method: max_decay, top_n: null, decay: 0.5}, fusion.rank_base 1, max_score minmax)
OVER_HYBRID = """\
recipe_id: views_v1
extends: hybrid_v1
discover_sources: false
sources:
  dense: {normalize: minmax, weight: 0.7, top_k: 50, lower_bound: {mode: clip, score: 0.25}}
  bm25: {weight: 0.3, distance: true}
fusion: {method: weighted_sum, k: 20, missing: zero}
aligner: {order: after_fusion}
parent_features: {rrf_sum: fixed64}
query_analyzer:
  enabled: true
  rules:
    - {match: '^how ', boost: {bm25: 2.0}}
rerank: {top_n: 5, mode: weight, weight: 0.4}
"""


def test_a_packaged_recipe_reads_as_its_file_says() -> None:
    recipe = load_recipe("opensearch_hybrid")
    assert (recipe.version, recipe.source) == ("opensearch_hybrid", "fuse policy opensearch_hybrid")
    assert recipe.policy.version == "opensearch_hybrid"
    assert recipe.target_granularity == "doc"
    assert recipe.discover_sources is True
    assert recipe.source_defaults == RecipeSource(None, "minmax", 1.0, False, None, None)
    assert dict(recipe.sources) == {}
    assert recipe.aligner == Aligner("max", None, 0.5, "before_fusion")
    assert recipe.fusion == Fusion("arithmetic_mean", 60.0, 1, "zero")
    assert recipe.parent_features == ParentFeatures("minmax", "decimal")
    assert recipe.query_analyzer == QueryAnalyzer(False, ())
    assert (recipe.rerank, recipe.ltr, recipe.plugins) == (None, None, ())
    assert dict(recipe.component_params) == {}


def test_a_recipe_file_over_a_base_reads_as_written(tmp_path: Path) -> None:
    path = tmp_path / "views.yaml"
    path.write_text(OVER_HYBRID, encoding="utf-8")
    recipe = load_recipe(str(path))
    assert (recipe.version, recipe.source) == ("views_v1", str(path))
    assert recipe.discover_sources is False
    assert dict(recipe.sources) == {
        "dense": RecipeSource(50, "minmax", 0.7, False, Bound("clip", 0.25), None),
        # weighted_sum in a file that names no normaliser: seed 003 §6.3's sigmoid
        "bm25": RecipeSource(None, "sigmoid", 0.3, True, None, None),
    }
    assert recipe.aligner == Aligner("max_decay", None, 0.5, "after_fusion")
    assert recipe.fusion == Fusion("weighted_sum", 20.0, 1, "zero")
    assert recipe.parent_features == ParentFeatures("minmax", "fixed64")
    [rule] = recipe.query_analyzer.rules
    assert rule == QueryRule("^how ", None, None, {"bm25": 2.0})
    assert recipe.query_analyzer.enabled is True
    assert recipe.rerank == Rerank(5, "weight", 0.4)


def test_a_plan_resolves_the_discovered_sources_into_its_recipe() -> None:
    recipe = load_recipe("hybrid_v1", ["source_defaults.weight=0.5"])
    planned = plan(recipe, ["sparse", "dense"], has_rank=True).recipe
    defaults = RecipeSource(None, "rank", 0.5, False, None, None)
    assert dict(planned.sources) == {"sparse": defaults, "dense": defaults}
    assert list(planned.policy.parameters["sources"]) == ["sparse", "dense"]  # the log's order
    assert dict(recipe.sources) == {}  # the loaded recipe is not changed


def test_a_recipe_cannot_be_changed() -> None:
    recipe: Recipe = load_recipe("hybrid_v1", ["sources={a: {weight: 2.0}}"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.fusion.k = 20  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.sources["a"].weight = 3.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        recipe.sources["b"] = recipe.source_defaults  # type: ignore[index]
    assert recipe.sources["a"].weight == 2.0
