"""Parent features against the plain-Python oracle (parent_features_reference.py), on random
logs, along each way the SQL computes them: `duckscore fuse` with the (query, source, parent)
aggregate fusion keeps and a block-type mask, with more block types than a mask holds (the third
grouping level), after fusion's delayed alignment (no shared aggregate), and the portable SQL
(`inputs.hits` alone, what the live scorer and `duckscore sql` render)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from duckscore.core.session import Session
from duckscore.fusion.log import open_log
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import load_recipe
from duckscore.fusion.stages import (
    FUSE_HITS,
    MASKED_BLOCK_TYPES,
    PARENT_FEATURES,
    fuse_graph,
    hit_block_types,
)

from .parent_features_reference import hits_of, parent_features

OVERRIDES = ["sources.dense.weight=2.0", "sources.sparse.top_k=6", "fusion.k=20"]
WEIGHTS = {"dense": 2.0, "sparse": 1.0, "summary": 1.0}
TOP_K = {"sparse": 6}
RRF_OFFSET = 20 - 1 + 1  # k − 1 + rank_base
COLUMNS = (
    "rrf_sum",
    "max_score",
    "coverage",
    "total_chunks",
    "coverage_ratio",
    "parent_rrf",
    "source_agreement",
    "score_lead",
)


def random_log(rng: random.Random, block_types: int, with_rank: bool) -> pd.DataFrame:
    kinds = [f"kind-{n}" for n in range(block_types)] + [None]
    rows: list[dict[str, Any]] = []
    for q in range(4):
        parents = [f"p{n}" if n % 3 else f"dōc{n}" for n in range(rng.randint(1, 9))]
        chunks = {p: rng.choice([None, 0, 2, 5, 40]) for p in parents}
        for source in ("dense", "sparse", "summary"):
            if rng.random() < 0.15:
                continue  # a source that returned nothing for this query
            items = (
                [(p, p) for p in parents]
                if source == "summary"
                else [(f"{p}#c{c}", p) for p in parents for c in range(rng.randint(0, 4))]
            )
            chosen = rng.sample(items, rng.randint(1, len(items))) if items else []
            for rank, (item, parent) in enumerate(chosen, start=1):
                rows.append(
                    {
                        "query_id": f"q{q}",
                        "source": source,
                        "item_id": item,
                        "parent_id": parent,
                        # a few ties, and negative scores (a BM25 variant, a distance)
                        "score": round(rng.uniform(-1, 3), rng.choice([1, 6])),
                        "rank": rank,
                        "block_type": rng.choice(kinds),
                        "total_chunks": chunks[parent],
                    }
                )
    frame = pd.DataFrame(rows)
    if not with_rank:
        frame = frame.drop(columns=["rank"])
    else:  # ranks follow the scores, as a retriever's do
        frame = frame.sort_values(["query_id", "source", "score", "item_id"])
        frame["rank"] = frame.groupby(["query_id", "source"]).cumcount(ascending=False) + 1
    return frame.reset_index(drop=True)


def expected(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    reference = parent_features(hits_of(rows, WEIGHTS, TOP_K), RRF_OFFSET)
    return pd.DataFrame(reference).set_index(["query_id", "parent_id"]).sort_index()


def by_fuse(frame: pd.DataFrame, out: Path, *extra: str) -> pd.DataFrame:
    fuse(frame, out, "hybrid_v1", overrides=[*OVERRIDES, *extra])
    got = pd.read_parquet(out / "parent_features.parquet")
    return got.set_index(["query_id", "parent_id"]).sort_index()


def by_portable_sql(frame: pd.DataFrame) -> pd.DataFrame:
    recipe = load_recipe("hybrid_v1", OVERRIDES)
    with Session() as session:
        _, fuse_plan = open_log(session, frame, recipe)
        graph = fuse_graph(fuse_plan, portable=True)  # no block-type mask: the third level
        session.materialise(graph.subgraph([FUSE_HITS]))
        got = session.frame(graph.render(PARENT_FEATURES, ordered=True))
    return got.set_index(["query_id", "parent_id"]).sort_index()


def assert_same(got: pd.DataFrame, want: pd.DataFrame, context: str) -> None:
    assert list(got.index) == list(want.index), context
    for column in COLUMNS:
        for key, value in want[column].items():
            assert got.at[key, column] == pytest.approx(value, rel=1e-12, abs=1e-15), (
                context,
                key,
                column,
            )


@pytest.mark.parametrize("with_rank", [True, False], ids=["ranked", "scores-only"])
@pytest.mark.parametrize("block_types", [3, MASKED_BLOCK_TYPES + 6], ids=["masked", "many-types"])
def test_parent_features_match_the_oracle(
    block_types: int, with_rank: bool, tmp_path: Path
) -> None:
    rng = random.Random(f"{block_types}-{with_rank}")
    for trial in range(3):
        frame = random_log(rng, block_types, with_rank)
        want = expected(frame)
        context = f"trial {trial}, {block_types} block types"
        assert_same(by_fuse(frame, tmp_path / f"shared{trial}"), want, f"{context}: shared")
        delayed = by_fuse(frame, tmp_path / f"delayed{trial}", "aligner.order=after_fusion")
        assert_same(delayed, want, f"{context}: delayed alignment")
        assert_same(by_portable_sql(frame), want, f"{context}: portable SQL")


def test_more_block_types_than_a_mask_holds_take_the_third_level() -> None:
    with Session() as session:
        for count, masked in ((MASKED_BLOCK_TYPES, True), (MASKED_BLOCK_TYPES + 1, False)):
            session.execute(
                "CREATE OR REPLACE TEMP TABLE fuse_hits AS SELECT 'kind-' || n AS block_type "
                f"FROM range({count - 1}) AS t(n) UNION ALL SELECT NULL"
            )
            found = hit_block_types(session)
            assert (found is not None) == masked
            if found is not None:
                assert len(found) == count and "unknown" in found and found == sorted(found)
