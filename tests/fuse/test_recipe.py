"""Recipes as seed 003 §8 writes them (its example verbatim), partial recipes and `extends`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.policy import load_policy
from duckscore.core.resources import policies_dir
from duckscore.fusion.recipe import FUSE_RECIPE

from ..helpers import ROOT, SCIFACT

LOG = SCIFACT / "retrieval_log.parquet"
SEED_EXAMPLE = Path(__file__).with_name("seed003_example.yaml")
# seed 003 §8's example as --set-recipe overrides of hybrid_v1, without `type` and `index_dir`
SEED_AS_OVERRIDES = [
    "sources.dense={top_k: 100, normalize: minmax, weight: 0.4}",
    "sources.sparse={top_k: 200, normalize: minmax, weight: 0.3}",
    "sources.summary={top_k: 80, normalize: sigmoid, weight: 0.3}",
    "fusion.method=weighted_sum",
    'query_analyzer.rules=[{match: "error_code", boost: {sparse: 1.2, dense: 0.9}}]',
]


def invoke(*args: str):
    return CliRunner().invoke(cli, ["-q", *args])


def record(recipe: str, *overrides: str) -> dict:
    return load_policy(FUSE_RECIPE, recipe, list(overrides)).as_record()


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_fixture_is_seed_003_section_8_verbatim() -> None:
    spec = (ROOT / "docs/specs/003-hybrid-fusion.txt").read_text(encoding="utf-8")
    section = spec.split("## 8. 配置方案", 1)[1].split("## 9.", 1)[0]
    assert "```yaml\n" + SEED_EXAMPLE.read_text(encoding="utf-8") + "```" in section


def test_the_seed_example_fuses_the_bundled_log(tmp_path: Path) -> None:
    result = invoke(
        "fuse", "--log", str(LOG), "--recipe", str(SEED_EXAMPLE), "--out", str(tmp_path / "seed")
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "seed" / "manifest.json").read_text())
    assert manifest["recipe_id"].startswith("hybrid_v1+") and manifest["recipe_id"] != "hybrid_v1"
    assert manifest["policy"]["extends"] == [
        {"version": "hybrid_v1", "source": "fuse policy hybrid_v1"}
    ]
    assert (
        manifest["target_granularity"] == "doc" and manifest["fusion"]["method"] == "weighted_sum"
    )
    assert manifest["sources"]["dense"] == {
        "type": "dense", "index_dir": "/path/to/dense_index",
        "top_k": 100, "normalize": "minmax", "weight": 0.4, "distance": False,
    }  # fmt: skip
    assert manifest["sources"]["summary"]["index_dir"] == "/path/to/summary_index"
    # the same numbers as hybrid_v1 told the same things by overrides: type and index_dir are
    # recorded, file is doc, and nothing else changes
    same = invoke("fuse", "--log", str(LOG), "--recipe", "hybrid_v1", "--out", str(tmp_path / "set"), *(
        option for item in SEED_AS_OVERRIDES for option in ("--set-recipe", item)
    ))  # fmt: skip
    assert same.exit_code == 0, same.output
    seed = pd.read_parquet(tmp_path / "seed" / "fused.parquet")
    assert len(seed) > 0
    pd.testing.assert_frame_equal(seed, pd.read_parquet(tmp_path / "set" / "fused.parquet"))
    for name in ("fused.parquet", "parent_features.parquet"):
        assert (tmp_path / "seed" / name).read_bytes() == (tmp_path / "set" / name).read_bytes()


def test_the_seed_granularities(tmp_path: Path) -> None:
    """file is doc; module and entity are levels of a code run (fusion/code_plan.py), which the
    recipe accepts and a fusion without an entities table refuses (tests/code/test_mapper.py)."""
    as_file = record("hybrid_v1", "target_granularity=file")
    assert as_file["parameters"] == record("hybrid_v1")["parameters"]  # file is doc
    for level in ("module", "entity"):
        path = write(tmp_path / f"{level}.yaml", f"target_granularity: {level}\n")
        result = invoke("policy", "show", path, "--capability", "fuse")
        assert result.exit_code == 0, result.stderr
        assert f'"target_granularity":"{level}"' in result.stdout
    path = write(tmp_path / "chunk.yaml", "target_granularity: chunk\n")
    result = invoke("policy", "show", path, "--capability", "fuse")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "target_granularity: 'chunk' is not one of doc, block, module, entity" in result.stderr


def test_fusion_type_is_the_seeds_word_for_method(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "fusion: {type: combsum}\n")
    assert record(path)["parameters"] == record("hybrid_v1", "fusion.method=combsum")["parameters"]
    both = write(tmp_path / "both.yaml", "fusion: {type: combsum, method: rrf}\n")
    result = invoke("policy", "show", both, "--capability", "fuse")
    assert result.exit_code == 2
    assert f"{both}: fusion: give `method` or seed 003's `type`, not both" in result.stderr


def test_a_partial_recipe_reads_over_hybrid_v1(tmp_path: Path) -> None:
    path = write(tmp_path / "k20.yaml", "recipe_id: k20\nfusion: {k: 20}\n")
    partial = record(path)
    assert partial["parameters"] == record("hybrid_v1", "fusion.k=20")["parameters"]
    assert (partial["recipe_id"], partial["base_version"]) == ("k20", "k20")
    assert partial["extends"] == [{"version": "hybrid_v1", "source": "fuse policy hybrid_v1"}]


def test_a_recipe_extends_a_base_by_name_or_path(tmp_path: Path) -> None:
    base = write(tmp_path / "base.yaml", "extends: canonical_rrf\nsources: {dense: {weight: 2}}\n")
    top = write(tmp_path / "top.yaml", "extends: base.yaml\nsources: {dense: {top_k: 10}}\n")
    loaded = record(top)
    assert (
        loaded["parameters"]
        == record("canonical_rrf", "sources.dense={weight: 2, top_k: 10}")["parameters"]
    )
    assert [b["source"] for b in loaded["extends"]] == [base, "fuse policy canonical_rrf"]
    assert loaded["recipe_id"].startswith("canonical_rrf+") and loaded["recipe_id"].count("+") == 2


def test_a_complete_recipe_without_extends_is_read_as_before(tmp_path: Path) -> None:
    for name in ("hybrid_v1", "canonical_rrf"):
        text = (policies_dir("fuse", "recipes") / f"{name}.yaml").read_text(encoding="utf-8")
        copy = record(write(tmp_path / f"{name}.yaml", text))
        assert "extends" not in copy and "extends" not in record(name)
        assert copy == record(name) | {"source": str(tmp_path / f"{name}.yaml")}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sources: [{name: dense, index_dir: ''}]\n", "sources.dense.index_dir: expected a non-empty string"),
        ("sources: [{name: dense, type: 7}]\n", "sources.dense.type: expected a non-empty string, got 7"),
        ("extends: hybrid_v2\n", "extends: unknown fuse policy 'hybrid_v2' (packaged: canonical_rrf, code_rrf_v1, elasticsearch_linear, elasticsearch_rrf, hybrid_v1, opensearch_hybrid, qdrant_dbsf, qdrant_rrf, seed003_sum_top_n, weaviate_relative)"),
        ("recipe_id: hybrid_v1\nfusion: {k: 20}\n", "recipe_id 'hybrid_v1' is the version of a base it extends"),
    ],
)  # fmt: skip
def test_bad_seed_shaped_recipes_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "bad.yaml", text)
    result = invoke("fuse", "--log", str(LOG), "--recipe", path, "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert f"duckscore: error: {path}: {message}" in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()
