"""The fusion SQL against peers' published vectors and the independent plain-Python oracle.

`tests/fuse/peer_vectors.yaml` holds values from ranx runs and from Elasticsearch,
OpenSearch, Qdrant and Weaviate tests; `tests/fuse/fusion_reference.py` was written from
docs/fusion-semantics.md without reading the SQL.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from duckscore.fuse.pipeline import fuse
from duckscore.fuse.recipe import FUSIONS, NORMALIZERS

from .fusion_reference import fuse_reference, recipe_with

PEERS = yaml.safe_load((Path(__file__).parent / "peer_vectors.yaml").read_text(encoding="utf-8"))[
    "cases"
]
EXTRA_KEYS = {
    "parent_features": {"max_score": "minmax"},
    "query_analyzer": {"enabled": False, "rules": []},
}


def recipe_file(recipe: dict[str, Any], folder: Path) -> Path:
    document = copy.deepcopy(recipe)
    document["fusion"].pop("gamma", None)
    for key, value in EXTRA_KEYS.items():
        document.setdefault(key, value)
    document["recipe_id"] = "oracle_case"
    path = folder / f"recipe{len(list(folder.glob('recipe*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def log_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for optional in ("rank", "block_type", "granularity"):
        if optional in frame and frame[optional].isna().all():
            frame = frame.drop(columns=[optional])
    return frame


def run_sql(rows: list[dict], recipe: dict[str, Any], folder: Path) -> pd.DataFrame:
    out = folder / f"out{len(list(folder.glob('out*')))}"
    fuse(log_frame(rows), out, str(recipe_file(recipe, folder)))
    return pd.read_parquet(out / "fused.parquet")


@pytest.mark.parametrize("case", PEERS, ids=[c["title"][:70] for c in PEERS])
def test_peer_vector(case: dict, tmp_path: Path) -> None:
    recipe = recipe_with(case.get("recipe_overrides") or {})
    fused = run_sql(case["rows"], recipe, tmp_path)
    got = {(r.query_id, r.item_id): r.fused_score for r in fused.itertuples()}
    expected = {(q, d): s for q, docs in case["expected"].items() for d, s in docs.items()}
    if not case.get("partial"):
        assert set(got) == set(expected)
    for key, value in expected.items():
        if value is None:
            assert got[key] is None or got[key] != got[key], key
        else:
            assert got[key] == pytest.approx(value, abs=case.get("tolerance", 1e-9)), key
    for query_id, order in (case.get("expected_order") or {}).items():
        ranked = fused[fused["query_id"] == query_id].sort_values("rank")["item_id"].tolist()
        assert ranked[: len(order)] == order


def random_log(rng: random.Random) -> list[dict]:
    rows = []
    for q in range(rng.randint(1, 3)):
        parents = [f"p{i}" for i in range(rng.randint(1, 6))]
        blocks = {p: [f"{p}:{j}" for j in range(rng.randint(1, 3))] for p in parents}
        for source in ("bm25", "dense"):
            items = rng.sample(
                [b for p in parents for b in blocks[p]],
                rng.randint(1, sum(map(len, blocks.values()))),
            )
            scores = rng.sample(range(1, 5000), len(items))
            for item, score in zip(items, scores):
                rows.append(
                    {
                        "query_id": f"q{q}",
                        "source": source,
                        "item_id": item,
                        "parent_id": item.split(":")[0],
                        "score": score / 100,
                        "granularity": "block",
                        "block_type": "body",
                    }
                )
        chosen = rng.sample(parents, rng.randint(1, len(parents)))
        scores = rng.sample(range(1, 5000), len(chosen))
        for parent, score in zip(chosen, scores):
            rows.append(
                {
                    "query_id": f"q{q}",
                    "source": "summary",
                    "item_id": parent,
                    "parent_id": parent,
                    "score": score / 1000,
                    "granularity": "doc",
                    "block_type": "summary",
                }
            )
    return rows


SCENARIOS = (
    [(n, m) for n in NORMALIZERS if n != "bounds" for m in ("weighted_sum", "combmnz")]
    + [("minmax", m) for m in FUSIONS]
    + [("rank", "rrf"), ("none", "isr")]
)


@pytest.mark.parametrize(("normalizer", "method"), SCENARIOS)
def test_sql_matches_oracle_on_random_logs(normalizer: str, method: str, tmp_path: Path) -> None:
    rng = random.Random(f"{normalizer}-{method}")
    for trial in range(3):
        rows = random_log(rng)
        recipe = recipe_with(
            {
                "sources": {},
                "source_defaults.normalize": normalizer,
                "fusion.method": method,
                "aligner.method": rng.choice(["max", "sum", "mean", "sum_top_n", "max_decay"]),
                "aligner.order": rng.choice(["before_fusion", "after_fusion"]),
                "target_granularity": rng.choice(["doc", "doc", "block"]),
                "fusion.missing": rng.choice(["default", "zero", "skip", "list_min"]),
                "sources.dense.weight": rng.choice([0.5, 1.0, 2.0]),
            }
        )
        expected = fuse_reference(rows, recipe)
        actual = run_sql(rows, recipe, tmp_path)
        got = {(r.query_id, r.item_id): (r.fused_score, r.rank) for r in actual.itertuples()}
        want = {(r["query_id"], r["item_id"]): (r["fused_score"], r["rank"]) for r in expected}
        context = (
            f"trial {trial}: {recipe['aligner']} {recipe['fusion']} {recipe['target_granularity']}"
        )
        assert set(got) == set(want), context
        for key, (score, rank) in want.items():
            if score is None:
                assert got[key][0] is None or got[key][0] != got[key][0], (key, context)
            else:
                assert got[key][0] == pytest.approx(score, rel=1e-9, abs=1e-12), (key, context)
            assert got[key][1] == rank, (key, context)
