"""`fusion.method: ltr` (seed 003 §6.4): the recipe's ltr block as fused.sql computes it, against
arithmetic done by hand and against the features recomputed in pandas from the log (no SQL).
LightGBM's own predictions are the oracle of the trees in tests/calibrate/test_learn.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot

from duckscore.core.errors import PolicyError
from duckscore.core.policy import dump_yaml, load_policy
from duckscore.core.render import RenderedSQL
from duckscore.core.session import Session
from duckscore.engines.dialects import to_dialect
from duckscore.fusion.log import open_log
from duckscore.fusion.ltr import DEFAULT_FEATURES, FEATURES, feature_names
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import FUSE_RECIPE, load_recipe, plan
from duckscore.fusion.stages import render_fused

from ..helpers import SCIFACT

LOG = SCIFACT / "retrieval_log.parquet"
# 2 queries, 3 documents, 2 sources (document-level hits, so the aligner keeps each score)
TINY_LOG = """query_id,source,item_id,parent_id,score,rank
q1,a,A,A,3.0,1
q1,a,B,B,2.0,2
q1,b,B,B,0.9,1
q1,b,C,C,0.5,2
q2,a,C,C,2.0,1
q2,b,A,A,0.7,1
q2,b,C,C,0.6,2
q2,b,B,B,0.4,3
"""
TINY_RECIPE = """extends: canonical_rrf
recipe_id: tiny_ltr
discover_sources: false
sources: {a: {}, b: {}}
fusion: {method: ltr}
ltr:
  features: [present@a, rrf@b, minmax@a, n_sources]
  model: {kind: linear, intercept: 0.25, weights: [1.0, 62.0, 0.5, 0.125]}
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_linear_model_by_hand(tmp_path: Path) -> None:
    """score = 0.25 + 1·present@a + 62·rrf@b + 0.5·minmax@a + 0.125·n_sources, a NULL (the
    source did not return the item) counting 0; rrf@b = 1/(60 + rank) (k = 60, rank_base 1)."""
    log = write(tmp_path / "log.csv", TINY_LOG)
    recipe = write(tmp_path / "tiny.yaml", TINY_RECIPE)
    fuse(str(log), tmp_path / "out", str(recipe))
    fused = pd.read_parquet(tmp_path / "out" / "fused.parquet")
    expected = {
        # q1: a holds A (3.0) and B (2.0): minmax A 1, B 0 (a spread of 1); b holds B (rank 1) and C (rank 2)
        ("q1", "A"): 0.25 + 1.0 + 0.0 + 0.5 * 1.0 + 0.125 * 1,  # 1.875
        ("q1", "B"): 0.25 + 1.0 + 62.0 / 61 + 0.5 * 0.0 + 0.125 * 2,  # 2.516393…
        ("q1", "C"): 0.25 + 0.0 + 62.0 / 62 + 0.0 + 0.125 * 1,  # 1.375
        # q2: a holds C alone (a flat list: minmax 1); b holds A, C, B at ranks 1, 2, 3
        ("q2", "A"): 0.25 + 0.0 + 62.0 / 61 + 0.0 + 0.125 * 1,  # 1.391393…
        ("q2", "B"): 0.25 + 0.0 + 62.0 / 63 + 0.0 + 0.125 * 1,  # 1.359126…
        ("q2", "C"): 0.25 + 1.0 + 62.0 / 62 + 0.5 * 1.0 + 0.125 * 2,  # 3.0
    }
    got = {(q, d): s for q, d, s in fused[["query_id", "item_id", "fused_score"]].itertuples(False)}
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert math.isclose(got[key], value, rel_tol=1e-15), (key, got[key], value)
    ranks = fused.sort_values(["query_id", "rank"]).groupby("query_id")["item_id"].apply(list)
    assert ranks.to_dict() == {"q1": ["B", "A", "C"], "q2": ["C", "A", "B"]}
    # the contributions are the sources' normalised scores, as for the other score methods
    first = fused[(fused["query_id"] == "q1") & (fused["item_id"] == "B")].iloc[0]
    assert [c["source"] for c in first["contributions"]] == ["a", "b"]


def tree(**arrays: Any) -> dict[str, Any]:
    return {"kind": "trees", "trees": [arrays]}


# one split on feature 0 (minmax@a) at 0.5 and one on feature 1 (rrf@b) at 0.0162, NULL going
# left at the first (default_left) and right at the second (missing type nan)
TWO_SPLITS = tree(
    split_feature=[0, 1],
    threshold=[0.5, 0.0162],
    default_left=[True, False],
    missing=["nan", "nan"],
    left_child=[-1, -2],
    right_child=[1, -3],
    leaf_value=[10.0, 20.0, 30.0],
)
# and a tree that learnt nothing: one leaf, no split (what LightGBM writes when no split gains)
ONE_LEAF = {name: [] for name in TWO_SPLITS["trees"][0]} | {"leaf_value": [0.5]}


def test_a_tree_by_hand(tmp_path: Path) -> None:
    """minmax@a <= 0.5 or NULL: 10; else rrf@b <= 0.0162 (rank 2 and below: 1/62 = 0.01613):
    20; else (rank 1, 1/61 = 0.01639, or NULL: not returned by b) 30. Plus 0.5, the tree of one
    leaf."""
    log = write(tmp_path / "log.csv", TINY_LOG)
    trees = {"kind": "trees", "trees": [*TWO_SPLITS["trees"], ONE_LEAF]}
    model = dump_yaml(trees, flow=True, width=10_000)
    text = TINY_RECIPE.replace(
        "features: [present@a, rrf@b, minmax@a, n_sources]", "features: [minmax@a, rrf@b]"
    ).replace(
        "model: {kind: linear, intercept: 0.25, weights: [1.0, 62.0, 0.5, 0.125]}",
        f"model: {model.strip()}",
    )
    recipe = write(tmp_path / "tree.yaml", text)
    fuse(str(log), tmp_path / "out", str(recipe))
    fused = pd.read_parquet(tmp_path / "out" / "fused.parquet")
    got = {(q, d): s for q, d, s in fused[["query_id", "item_id", "fused_score"]].itertuples(False)}
    assert got == {
        ("q1", "A"): 30.5,  # minmax 1 > 0.5; not in b: NULL goes right
        ("q1", "B"): 10.5,  # minmax 0
        ("q1", "C"): 10.5,  # not in a: NULL goes left
        ("q2", "A"): 10.5,
        ("q2", "B"): 10.5,
        ("q2", "C"): 20.5,  # minmax 1 (one item); b's rank 2: 1/62 <= 0.0162
    }


def independent_features(recipe: str) -> pd.DataFrame:
    """Every default feature of the log's three sources for the recipes whose aligner is `max`
    and whose normaliser is `rank` (canonical_rrf): computed from the log in pandas."""
    log = pd.read_parquet(LOG)
    k, rank_base = 60.0, 1
    parts = []
    for source, hits in log.groupby("source"):
        by_parent = hits.groupby(["query_id", "parent_id"]).agg(
            raw=("score", "max"), best_rank=("rank", "min"), hits=("score", "size")
        )
        by_parent = by_parent.reset_index().sort_values(
            ["query_id", "raw", "best_rank", "parent_id"], ascending=[True, False, True, True]
        )
        by_parent["r"] = by_parent.groupby("query_id").cumcount() + 1
        per_query = by_parent.groupby("query_id")["raw"]
        n = by_parent.groupby("query_id")["r"].transform("size")
        low, high = per_query.transform("min"), per_query.transform("max")
        frame = pd.DataFrame(
            {
                "query_id": by_parent["query_id"],
                "target_id": by_parent["parent_id"],
                f"present@{source}": 1.0,
                f"rrf@{source}": 1.0 / (by_parent["r"] + k - 1 + rank_base),
                f"norm@{source}": 1.0 - (by_parent["r"] - 1) / n,
                f"raw@{source}": by_parent["raw"],
                f"minmax@{source}": np.where(
                    high > low, (by_parent["raw"] - low) / (high - low).where(high > low), 1.0
                ),
                f"gap@{source}": high - by_parent["raw"],
                f"hits@{source}": by_parent["hits"].astype(float),
            }
        )
        parts.append(frame.set_index(["query_id", "target_id"]))
    table = pd.concat(parts, axis=1)
    for source in sorted(log["source"].unique()):
        table[f"present@{source}"] = table[f"present@{source}"].fillna(0.0)
        table[f"hits@{source}"] = table[f"hits@{source}"].fillna(0.0)
        by_query = table.groupby(level="query_id")
        table[f"top@{source}"] = by_query[f"raw@{source}"].transform("max")
        table[f"list_n@{source}"] = by_query[f"raw@{source}"].transform("count").astype(float)
    sources = sorted(log["source"].unique())
    table["n_sources"] = table[[f"present@{s}" for s in sources]].sum(axis=1)
    table["candidates"] = table.groupby(level="query_id")["n_sources"].transform("size")
    return table.astype(float).reset_index()


def sql_features(recipe: Any, log: Any = LOG) -> tuple[list[str], pd.DataFrame]:
    """The ltr_features stage of `recipe` turned ltr with every default feature: names, table."""
    base = load_recipe(recipe)
    with Session() as session:
        _, base_plan = open_log(session, log, base)
        names = feature_names(list(DEFAULT_FEATURES), base_plan.sources)
        model = {"kind": "linear", "intercept": 0.0, "weights": [0.0] * len(names)}
        overrides = [
            "discover_sources=false",
            *(f"sources.{s}.weight=1.0" for s in base_plan.sources),
            "fusion.method=ltr",
            f"ltr={dump_yaml({'features': names, 'model': model}, flow=True, width=10_000)}",
        ]
        learned = load_recipe(recipe, overrides)
        learned_plan = plan(learned, base_plan.sources, base_plan.has_rank, base_plan.log_view)
        rendered = render_fused(learned_plan, final="ltr_features", explain=False)
        columns = ", ".join(f"ltr_{j + 1} AS {duckdb_name(n)}" for j, n in enumerate(names))
        frame = session.frame(f"SELECT query_id, target_id, {columns} FROM ({rendered.text})")
    return names, frame


def duckdb_name(name: str) -> str:
    return '"' + name + '"'


def test_every_feature_equals_its_definition_recomputed_in_pandas() -> None:
    names, got = sql_features("canonical_rrf")
    assert {name.split("@")[0] for name in names} == set(FEATURES)
    expected = independent_features("canonical_rrf")
    merged = got.merge(expected, on=["query_id", "target_id"], suffixes=("", "_expected"))
    assert len(merged) == len(got) == len(expected) == 40282
    for name in names:
        a, b = merged[name].to_numpy(float), merged[f"{name}_expected"].to_numpy(float)
        assert np.array_equal(np.isnan(a), np.isnan(b)), name  # NULL exactly where not returned
        assert np.allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=1e-12, atol=0), name


def recipe_refusal(tmp_path: Path, text: str) -> str:
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(PolicyError) as refused:
        load_policy(FUSE_RECIPE, str(path))
    return str(refused.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ((TINY_RECIPE[TINY_RECIPE.index("ltr:") :], ""), "fusion.method ltr needs an ltr block"),
        (("fusion: {method: ltr}", "fusion: {method: rrf}"), "ltr: a learned model is read by"),
        (("present@a", "present@z"), "present@z reads source 'z', which sources does not declare"),
        (("present@a", "present"), "'present' is a feature of one source"),
        (("n_sources]", "n_sources@a]"), "n_sources is one value for every source"),
        (("present@a", "presence@a"), "'presence@a' is not a feature"),
        (("0.5, 0.125]", "0.5]"), "3 weights for 4 features"),
        (("fusion: {method: ltr}", "fusion: {method: ltr, missing: skip}"), "leave missing"),
        (("sources: {a: {}, b: {}}", "sources: {a: {normalize: borda}, b: {}}"), "borda"),
        (("[present@a, rrf@b,", "[present@a, present@a,"), "'present@a' is listed twice"),
        (("kind: linear", "kind: forest"), "ltr.model.kind: one of linear, trees"),
    ],
)
def test_bad_ltr_blocks_name_the_key(change: tuple[str, str], message: str, tmp_path: Path) -> None:
    old, new = change
    assert old in TINY_RECIPE
    assert message in recipe_refusal(tmp_path, TINY_RECIPE.replace(old, new))


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"left_child": [-1, -2], "right_child": [-3, -3]}, "do not make one binary tree"),
        ({"left_child": [1, -2], "right_child": [0, -3]}, "do not make one binary tree"),
        ({"leaf_value": [1.0, 2.0]}, "expected 3 leaves for 2 splits"),
        ({"missing": ["nan", "null"]}, "each is one of none, zero, nan"),
        ({"default_left": [True, 1]}, "expected true or false per split"),
        ({"threshold": [0.5]}, "threshold: expected 2 entries"),
        ({"split_feature": [0, 7]}, "split_feature: a feature index is not 0..1"),
        ({"threshold": [0.5, ".inf"]}, "expected a finite number"),
    ],
)
def test_bad_trees_name_the_array(arrays: dict[str, Any], message: str, tmp_path: Path) -> None:
    model = {**TWO_SPLITS["trees"][0], **arrays}
    shown = dump_yaml({"kind": "trees", "trees": [model]}, flow=True, width=10_000).strip()
    text = (
        TINY_RECIPE.replace("[present@a, rrf@b, minmax@a, n_sources]", "[minmax@a, rrf@b]")
        .replace("{kind: linear, intercept: 0.25, weights: [1.0, 62.0, 0.5, 0.125]}", shown)
        .replace("'.inf'", ".inf")
    )
    assert message in recipe_refusal(tmp_path, text)


def random_tree(rng: np.random.Generator, splits: int, features: int) -> dict[str, Any]:
    """A tree grown as LightGBM grows one: split i turns a leaf into node i, its left child that
    leaf and its right child the new leaf i + 1."""
    left: list[int] = []
    right: list[int] = []
    pointing: dict[int, tuple[list[int], int] | None] = {0: None}  # leaf -> the child slot
    for i in range(splits):
        leaf = int(rng.choice(sorted(pointing)))
        slot = pointing.pop(leaf)
        if slot is not None:
            slot[0][slot[1]] = i
        left.append(~leaf)
        right.append(~(i + 1))
        pointing[leaf], pointing[i + 1] = (left, i), (right, i)
    return {
        "split_feature": [int(rng.integers(features)) for _ in range(splits)],
        "threshold": [float(rng.normal()) for _ in range(splits)],
        "default_left": [bool(rng.random() < 0.5) for _ in range(splits)],
        "missing": [str(rng.choice(["none", "zero", "nan"])) for _ in range(splits)],
        "left_child": left,
        "right_child": right,
        "leaf_value": [float(rng.normal()) for _ in range(splits + 1)],
    }


@pytest.mark.extended  # 22 s: make test's 15 minutes (docs/testing.md)
@pytest.mark.slow
def test_the_sql_of_a_large_ensemble_transpiles_for_spark_and_postgres() -> None:
    """100 trees of 31 leaves (the largest the docs advise), every split kind: sqlglot parses
    the DuckDB SQL and writes it for Spark and PostgreSQL, and DuckDB runs it on SciFact."""
    rng = np.random.default_rng(0)
    names = feature_names(list(DEFAULT_FEATURES), ["dense", "sparse", "summary"])
    trees = [random_tree(rng, 30, len(names)) for _ in range(100)]
    parameters = _learned_parameters(names, {"kind": "trees", "trees": trees})
    recipe = load_recipe("canonical_rrf", parameters)
    learned_plan = plan(recipe, ["dense", "sparse", "summary"], True)
    rendered: RenderedSQL = render_fused(learned_plan, explain=False)
    cases = sqlglot.parse_one(rendered.text, read="duckdb").find_all(sqlglot.exp.Case)
    assert sum(1 for _ in cases) >= 100 * 30
    for dialect in ("spark", "postgres"):
        assert "model_1" in to_dialect(rendered, dialect)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW retrieval_log AS SELECT *, NULL::VARCHAR AS snippet FROM '{LOG}'")
    (items,) = con.execute(f"SELECT count(*) FROM ({rendered.text})").fetchone()
    assert items == 40282


def _learned_parameters(names: list[str], model: dict[str, Any]) -> list[str]:
    return [
        "discover_sources=false",
        *(f"sources.{s}.weight=1.0" for s in ("dense", "sparse", "summary")),
        "fusion.method=ltr",
        f"ltr={dump_yaml({'features': names, 'model': model}, flow=True, width=10**7)}",
    ]


BLOCK_LOG = """query_id,source,item_id,parent_id,score,rank
q1,a,P:0,P,0.9,1
q1,a,P:1,P,0.8,2
q1,a,Q:0,Q,0.7,3
q1,b,P:1,P,0.6,1
"""


@pytest.mark.parametrize(
    ("granularity", "expected"),
    [
        # a document target: P holds two of a's hits and one of b's, Q one of a's
        ("doc", {"P": 2 + 10 * 1, "Q": 1 + 10 * 0}),
        # a block target: every item is one hit of each source that returned it
        ("block", {"P:0": 1 + 10 * 0, "P:1": 1 + 10 * 1, "Q:0": 1 + 10 * 0}),
    ],
)
def test_hits_count_the_hits_aligned_into_an_item(
    granularity: str, expected: dict[str, float], tmp_path: Path
) -> None:
    """score = hits@a + 10 · hits@b: a's blocks of the parent, or 1 per item at block level;
    0 where the source returned nothing."""
    log = write(tmp_path / "log.csv", BLOCK_LOG)
    text = (
        TINY_RECIPE.replace("[present@a, rrf@b, minmax@a, n_sources]", "[hits@a, hits@b]")
        .replace(
            "intercept: 0.25, weights: [1.0, 62.0, 0.5, 0.125]",
            "intercept: 0.0, weights: [1.0, 10.0]",
        )
        .replace(
            "discover_sources: false", f"discover_sources: false\ntarget_granularity: {granularity}"
        )
    )
    recipe = write(tmp_path / "hits.yaml", text)
    fuse(str(log), tmp_path / "out", str(recipe))
    fused = pd.read_parquet(tmp_path / "out" / "fused.parquet")
    assert dict(zip(fused["item_id"], fused["fused_score"])) == expected
