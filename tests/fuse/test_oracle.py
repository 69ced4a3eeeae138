"""The fusion SQL against peers' vectors and the independent plain-Python oracle.

`tests/fuse/peer_vectors.yaml` holds values from ranx runs, from Elasticsearch, OpenSearch and
Qdrant tests, and peers' formulas re-implemented (each case's `provenance`);
`tests/fuse/fusion_reference.py` was written from docs/fusion-semantics.md without reading the
SQL. The random logs draw the hard inputs: ties within a list, ranks given against the scores,
rank-only logs (no score column), values <= 0 (NULL geometric and harmonic means), `top_k`,
distance sources, mixed normalisers, `bounds` with and without clipping, k and rank_base, and the
query analyzer (rules matching `query_text`, boosts of 0 and above 1). Each fused item's
explanation is compared too: its contributions and the source of its best provenance.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import FUSIONS, NORMALIZERS

from .fusion_reference import fuse_reference, recipe_with
from .peer_cases import CASES as PEERS
from .peer_cases import case_recipe, set_recipe

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
    for optional in ("score", "rank", "block_type", "granularity", "query_text"):
        if optional in frame and frame[optional].isna().all():
            frame = frame.drop(columns=[optional])
    return frame


def run_sql(rows: list[dict], recipe: dict[str, Any], folder: Path) -> pd.DataFrame:
    out = folder / f"out{len(list(folder.glob('out*')))}"
    fuse(log_frame(rows), out, str(recipe_file(recipe, folder)))
    return pd.read_parquet(out / "fused.parquet")


def run_peer_case(case: dict, folder: Path) -> pd.DataFrame:
    """A case through the command: with the packaged preset it names and its overrides as
    `--set-recipe` gives them, or with the oracle's recipe written as a file."""
    if "recipe" not in case:
        return run_sql(case["rows"], case_recipe(case), folder)
    fuse(log_frame(case["rows"]), folder / "out", case["recipe"], overrides=set_recipe(case))
    return pd.read_parquet(folder / "out" / "fused.parquet")


@pytest.mark.parametrize("case", PEERS, ids=[c["title"][:70] for c in PEERS])
def test_peer_vector(case: dict, tmp_path: Path) -> None:
    fused = run_peer_case(case, tmp_path)
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


SOURCES = ("bm25", "dense", "summary")
QUERY_TEXTS = ("error code 42", "How do I fix an ERROR?", "weather today", "summary of 2024", "")
RULES = ("(?i)error", "[0-9]+", "^How", "today$", "fix|summary", "zzz")
SCORE_POOL = (-2.5, -1.0, 0.0, 0.25, 1.0, 2.0, 3.5, 7.0, 40.0)
"""Few distinct scores, negative and zero ones among them: lists with ties and values <= 0."""


def draw_scores(rng: random.Random, n: int, ties: bool) -> list[float]:
    """``n`` scores: from the small pool (ties within a list) or distinct."""
    if ties:
        return [rng.choice(SCORE_POOL) for _ in range(n)]
    return [s / 100 for s in rng.sample(range(-500, 5000), n)]


def random_log(rng: random.Random) -> list[dict]:
    """A log of 1-3 queries over block sources (bm25, dense) and a doc source (summary): ties
    within a list, given ranks that disagree with the scores, rank-only logs (no score column:
    the score is -rank), and a query_text per query for the analyzer."""
    rank_only = rng.random() < 0.2
    given_ranks = rank_only or rng.random() < 0.3
    ties = rng.random() < 0.5
    rows = []
    for q in range(rng.randint(1, 3)):
        parents = [f"p{i}" for i in range(rng.randint(1, 6))]
        blocks = {p: [f"{p}:{j}" for j in range(rng.randint(1, 3))] for p in parents}
        text = rng.choice(QUERY_TEXTS)
        for source in SOURCES:
            if source == "summary":
                items = rng.sample(parents, rng.randint(1, len(parents)))
            else:
                pool = [b for p in parents for b in blocks[p]]
                items = rng.sample(pool, rng.randint(1, len(pool)))
            scores = draw_scores(rng, len(items), ties)
            ranks = rng.sample(range(1, len(items) + 1), len(items))
            for item, score, rank in zip(items, scores, ranks, strict=True):
                block = source != "summary"
                rows.append(
                    {
                        "query_id": f"q{q}",
                        "source": source,
                        "item_id": item,
                        "parent_id": item.split(":")[0],
                        "score": None if rank_only else score,
                        "rank": rank if given_ranks else None,
                        "granularity": "block" if block else "doc",
                        "block_type": "body" if block else "summary",
                        "query_text": text,
                    }
                )
    return rows


def random_recipe(rng: random.Random, normalizer: str, method: str) -> dict[str, Any]:
    """Per source: ``top_k``, ``distance`` and the weight, sometimes another normaliser; the
    analyzer on or off with random rules; ``bounds`` (clip on and off); k and rank_base."""
    sources = {
        name: {
            "top_k": rng.choice([None, None, 1, 2, 4]),
            "normalize": normalizer if rng.random() < 0.8 else rng.choice(NORMALIZERS),
            "weight": rng.choice([0.5, 1.0, 2.0]),
            "distance": rng.random() < 0.3,
        }
        for name in SOURCES
    }
    rules = [
        {
            "match": rng.choice(RULES),
            "boost": {
                s: rng.choice([0.0, 0.5, 1.5, 3.0]) for s in rng.sample(SOURCES, rng.randint(0, 3))
            },
        }
        for _ in range(rng.randint(0, 3))
    ]
    lo = rng.choice([-3.0, 0.0, 0.5, 1.0])
    return recipe_with(
        {
            "sources": sources,
            "fusion.method": method,
            "fusion.k": rng.choice([60, 2]),
            "fusion.rank_base": rng.choice([0, 1]),
            "fusion.missing": rng.choice(["default", "zero", "skip", "list_min"]),
            "aligner.method": rng.choice(["max", "sum", "mean", "sum_top_n", "max_decay"]),
            "aligner.top_n": rng.choice([None, 1, 2]),
            "aligner.order": rng.choice(["before_fusion", "after_fusion"]),
            "target_granularity": rng.choice(["doc", "doc", "block"]),
            "normalizer_params.bounds": [lo, lo + rng.choice([0.5, 5.0, 50.0])],
            "normalizer_params.bounds_clip": rng.random() < 0.5,
            "query_analyzer": {"enabled": rng.random() < 0.6, "rules": rules},
        }
    )


SCENARIOS = (
    [(n, m) for n in NORMALIZERS for m in ("weighted_sum", "combmnz")]
    + [("minmax", m) for m in FUSIONS if m != "ltr"]  # ltr's model: tests/fuse/test_ltr.py
    + [("rank", "rrf"), ("none", "isr"), ("bounds", "geometric_mean")]
    # a borda source builds the candidate grid, where rank methods count only real membership
    + [("borda", "rrf"), ("borda", "isr")]
)


@pytest.mark.parametrize(("normalizer", "method"), SCENARIOS)
def test_sql_matches_oracle_on_random_logs(normalizer: str, method: str, tmp_path: Path) -> None:
    rng = random.Random(f"{normalizer}-{method}")
    for trial in range(3):
        rows = random_log(rng)
        recipe = random_recipe(rng, normalizer, method)
        assert_matches_oracle(rows, recipe, tmp_path, f"trial {trial}")


def with_engine_rules(rng: random.Random, recipe: dict[str, Any]) -> dict[str, Any]:
    """The engines' own rules (docs/fuse.md), each on or off: the normalisers' (R14, R15, R17),
    a minmax source's bounds in any mode (R16), Qdrant's RRF weighting (R18), empty sources
    counted (R19) and a cut of the ranking (R20)."""
    engine = copy.deepcopy(recipe)
    params, fusion = engine["normalizer_params"], engine["fusion"]
    for key, values in (
        ("nonpositive_value", [None, 0.001, -1.0]),
        ("minmax_degenerate_below", [None, 1e-6, 2.0]),
        ("zscore_at_mean", [None, "formula", "raw_max"]),
        ("l2_degenerate_raw", [None, True, False]),
        ("borda_points", [None, True]),
    ):
        params[key] = rng.choice(values)
    if params["l2_degenerate_raw"]:  # an eps a list of small scores falls below
        params["eps"] = rng.choice([1e-9, 0.5])
    if rng.random() < 0.5:  # where an empty source counts
        fusion["missing"] = "zero"
    for key, values in (
        ("rrf_weight", [None, "scales_term", "divides_rank"]),
        ("count_empty_sources", [None, True, True]),
        ("top_n", [None, 1, 2, 4]),
        ("min_score", [None, 0.0, 0.5, 1.0]),
    ):
        fusion[key] = rng.choice(values)
    for entry in engine["sources"].values():
        if entry["normalize"] == "minmax":
            for side in ("lower_bound", "upper_bound"):
                if rng.random() < 0.6:
                    mode = rng.choice(["apply", "clip", "ignore"])
                    entry[side] = {"mode": mode, "score": rng.choice([-1.0, 0.0, 0.3, 2.0, 10.0])}
    for group in (params, fusion):
        for key in [k for k, v in group.items() if v is None]:
            del group[key]
    return engine


ENGINE_SCENARIOS = [
    ("minmax", "arithmetic_mean"),
    ("minmax", "geometric_mean"),
    ("minmax", "weighted_sum"),
    ("minmax", "combmin"),
    ("zscore", "arithmetic_mean"),
    ("l2", "weighted_sum"),
    ("borda", "combsum"),
    ("borda", "arithmetic_mean"),
    ("rank", "rrf"),
    ("none", "rrf"),
]


@pytest.mark.parametrize(("normalizer", "method"), ENGINE_SCENARIOS)
def test_sql_matches_oracle_with_the_engines_rules(
    normalizer: str, method: str, tmp_path: Path
) -> None:
    """As above, with the engine rules drawn, and a source now and then without a hit for a
    query (count_empty_sources' case)."""
    rng = random.Random(f"engines-{normalizer}-{method}")
    for trial in range(5):
        rows = random_log(rng)
        dropped = (rng.choice(SOURCES), "q0") if rng.random() < 0.7 else None
        kept = [r for r in rows if (r["source"], r["query_id"]) != dropped]
        if {r["source"] for r in kept} == set(SOURCES):  # q0 is not the log's only query
            rows = kept
        recipe = with_engine_rules(rng, random_recipe(rng, normalizer, method))
        assert_matches_oracle(rows, recipe, tmp_path, f"trial {trial}, {dropped} empty")


def assert_matches_oracle(rows: list[dict], recipe: dict, tmp_path: Path, trial: str) -> None:
    """The command's fused items equal the oracle's: scores, ranks and explanations."""
    expected = fuse_reference(rows, recipe)
    actual = run_sql(rows, recipe, tmp_path)
    got = {(r.query_id, r.item_id): (r.fused_score, r.rank) for r in actual.itertuples()}
    want = {(r["query_id"], r["item_id"]): (r["fused_score"], r["rank"]) for r in expected}
    context = f"{trial}: {recipe}\nrows: {rows}"
    assert set(got) == set(want), context
    for key, (score, rank) in want.items():
        if score is None:
            assert got[key][0] is None or got[key][0] != got[key][0], (key, context)
        else:
            assert got[key][0] == pytest.approx(score, rel=1e-9, abs=1e-12), (key, context)
        assert got[key][1] == rank, (key, context)
    explained = {(r.query_id, r.item_id): r for r in actual.itertuples()}
    delayed = recipe["aligner"]["order"] == "after_fusion"
    delayed = delayed and recipe.get("target_granularity", "doc") == "doc"
    for item in expected:
        row = explained[(item["query_id"], item["item_id"])]
        assert_explained(row, item["contributions"], delayed, context)


CONTRIBUTION_FIELDS = ("source", "raw_score", "norm_score", "rank", "weight")


def contribution_key(entry: dict) -> tuple:
    return tuple(entry[name] for name in CONTRIBUTION_FIELDS)


def assert_explained(row: Any, want: list[dict], delayed: bool, context: str) -> None:
    """The row's contributions are the oracle's (a borda list's missing-item entries, with no
    rank, left out); its best_provenance is the source of the lowest list rank, ties to the
    first source by name. With the delayed aligner the entries are the parent's blocks', in
    the order of the blocks' fused scores, so they are compared as a multiset."""
    got = [contribution_key(c) for c in row.contributions if c["rank"] is not None]
    expected = [contribution_key(c) for c in want]
    if delayed:
        got, expected = sorted(got, key=repr), sorted(expected, key=repr)
    assert len(got) == len(expected), (row.item_id, got, expected, context)
    for mine, theirs in zip(got, expected, strict=True):
        assert mine == pytest.approx(theirs, rel=1e-9, abs=1e-12), (row.item_id, context)
    if not delayed:
        best = min(want, key=lambda c: c["rank"])["source"] if want else None
        provenance = row.best_provenance["source"] if row.best_provenance else None
        assert provenance == best, (row.item_id, want, context)
