"""The fusion SQL against ranx itself, on random runs: every normaliser and fusion method that
ranx also has gives ranx's numbers (scores per (query, doc); ranx breaks ties arbitrarily, so
runs have distinct scores and ranks are not compared)."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest
import ranx

from duckscore.fusion.pipeline import fuse

# one worker compiles ranx (numba) for every ranx oracle: its cold cache costs over a minute
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ranx")]

NORMS = {
    "min-max": "minmax",
    "max": "max",
    "sum": "sum",
    "zmuv": "zscore",
    "rank": "rank",
    "borda": "borda",
}
METHODS = {
    "rrf": ("rrf", {}),
    "wsum": ("weighted_sum", {"weights": [0.2, 0.5, 0.3]}),
    "sum": ("combsum", {}),
    "mnz": ("combmnz", {}),
    "anz": ("combanz", {}),
    "max": ("combmax", {}),
    "min": ("combmin", {}),
    "med": ("combmed", {}),
    "isr": ("isr", {}),
}
SOURCES = ["a", "b", "c"]


def random_runs(seed: int) -> dict[str, dict[str, dict[str, float]]]:
    rng = random.Random(seed)
    runs: dict[str, dict[str, dict[str, float]]] = {s: {} for s in SOURCES}
    for q in range(6):
        docs = [f"d{i}" for i in range(rng.randint(2, 12))]
        for source in SOURCES:
            chosen = rng.sample(docs, rng.randint(1, len(docs)))
            scores = rng.sample(range(1, 10_000), len(chosen))
            runs[source][f"q{q}"] = {d: s / 100 - 20 for d, s in zip(chosen, scores)}
    return runs


def as_log(runs: dict[str, dict[str, dict[str, float]]]) -> pd.DataFrame:
    rows = [
        {
            "query_id": q,
            "source": source,
            "item_id": d,
            "parent_id": d,
            "score": s,
            "granularity": "doc",
        }
        for source, by_query in runs.items()
        for q, docs in by_query.items()
        for d, s in docs.items()
    ]
    return pd.DataFrame(rows)


def sql_scores(runs, tmp_path: Path, sets: list[str]) -> dict[tuple[str, str], float]:
    out = tmp_path / f"o{len(list(tmp_path.iterdir()))}"
    fuse(as_log(runs), out, "canonical_rrf", sets)
    frame = pd.read_parquet(out / "fused.parquet")
    return {(r.query_id, r.item_id): r.fused_score for r in frame.itertuples()}


def ranx_scores(runs, norm: str | None, method: str, params: dict) -> dict[tuple[str, str], float]:
    ranx_runs = [ranx.Run.from_dict(runs[s], name=s) for s in SOURCES]
    fused = ranx.fuse(runs=ranx_runs, norm=norm, method=method, params=params)
    return {(q, d): s for q, docs in fused.to_dict().items() for d, s in docs.items()}


def assert_same(sql: dict, reference: dict) -> None:
    assert sql.keys() == reference.keys()
    for key, value in reference.items():
        assert sql[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key


def weights_sets(params: dict) -> list[str]:
    return [f"sources.{s}.weight={w}" for s, w in zip(SOURCES, params.get("weights", []))]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("ranx_method", sorted(METHODS))
def test_fusion_methods_match_ranx(ranx_method: str, seed: int, tmp_path: Path) -> None:
    # Compared on min-max-normalised runs: ranx 0.3.21's comb_* and wsum drop documents when
    # fed un-normalised runs (norm=None), e.g. every document of a query; see docs/testing.md.
    runs = random_runs(seed)
    method, params = METHODS[ranx_method]
    sets = [f"fusion.method={method}", "source_defaults.normalize=minmax"] + weights_sets(params)
    assert_same(sql_scores(runs, tmp_path, sets), ranx_scores(runs, "min-max", ranx_method, params))


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.parametrize("ranx_norm", sorted(NORMS))
def test_normalisers_match_ranx(ranx_norm: str, seed: int, tmp_path: Path) -> None:
    runs = random_runs(seed)
    params = {"weights": [0.2, 0.5, 0.3]}
    sets = [
        f"source_defaults.normalize={NORMS[ranx_norm]}",
        "fusion.method=weighted_sum",
    ] + weights_sets(params)
    assert_same(sql_scores(runs, tmp_path, sets), ranx_scores(runs, ranx_norm, "wsum", params))


# ranx's own unit-test fixture (tests/unit/ranx/fusion; docs/reference/fusion-peers.md c1) and
# the closed forms its tests assert with ==, on the raw scores. Ranks: q1 a d3 d2 d1, b d1 d2,
# c d3; q2 a d2 d1, b d3 d1, c d3 d2.
RANX_FIXTURE = {
    "a": {"q1": {"d1": 1, "d2": 2, "d3": 3}, "q2": {"d1": 1, "d2": 2}},
    "b": {"q1": {"d1": 3, "d2": 2}, "q2": {"d1": 1, "d3": 3}},
    "c": {"q1": {"d3": 1}, "q2": {"d2": 2, "d3": 3}},
}
RANX_PUBLISHED: dict[str, tuple[list[str], dict[str, list[float]]]] = {
    # method: (overrides, {query: [d1, d2, d3]})
    "rrf": (
        [],
        {
            "q1": [1 / 63 + 1 / 61, 1 / 62 + 1 / 62, 1 / 61 + 1 / 61],
            "q2": [1 / 62 + 1 / 62, 1 / 61 + 1 / 62, 1 / 61 + 1 / 61],
        },
    ),
    "combsum": ([], {"q1": [4, 4, 4], "q2": [2, 4, 6]}),
    "combmnz": ([], {"q1": [8, 8, 8], "q2": [4, 8, 12]}),
    "combanz": ([], {"q1": [2, 2, 2], "q2": [1, 2, 3]}),
    "combmed": ([], {"q1": [2, 2, 2], "q2": [1, 2, 3]}),
    "combmax": ([], {"q1": [3, 2, 3], "q2": [1, 2, 3]}),
    "combmin": ([], {"q1": [1, 2, 1], "q2": [1, 2, 3]}),
    # (sum 1/r^2) * n_d: q1 d1 (1/9 + 1) * 2, d2 (1/4 + 1/4) * 2, d3 (1 + 1) * 2
    "isr": ([], {"q1": [20 / 9, 1, 4], "q2": [1, 2.5, 4]}),
    # weights .3 .2 .5: q1 d1 .3 * 1 + .2 * 3, d2 .3 * 2 + .2 * 2, d3 .3 * 3 + .5 * 1
    "weighted_sum": (
        weights_sets({"weights": [0.3, 0.2, 0.5]}),
        {"q1": [0.9, 1.0, 1.4], "q2": [0.5, 1.6, 2.1]},
    ),
}


@pytest.mark.parametrize("method", sorted(RANX_PUBLISHED))
def test_ranx_published_vectors(method: str, tmp_path: Path) -> None:
    """ranx's unit-test fixture: rrf, comb_sum, comb_mnz, comb_anz, comb_med, comb_max,
    comb_min, isr and wsum [.3, .2, .5], each equal to the closed form ranx's tests assert."""
    overrides, want = RANX_PUBLISHED[method]
    sets = [f"fusion.method={method}", "source_defaults.normalize=none", *overrides]
    got = sql_scores(RANX_FIXTURE, tmp_path, sets)
    expected = {
        (q, f"d{i}"): float(value)
        for q, values in want.items()
        for i, value in enumerate(values, 1)
    }
    assert_same(got, expected)


def test_ranx_drops_documents_on_unnormalised_runs() -> None:
    """Why the comparisons above normalise first: a ranx 0.3.21 defect, kept visible here."""
    a = ranx.Run.from_dict({"q": {"d1": 1.0, "d2": 5.0}, "r": {"d1": 1.0}}, name="a")
    b = ranx.Run.from_dict({"q": {"d11": 2.0}, "r": {"d2": 1.0}}, name="b")
    fused = ranx.fuse([a, b], norm=None, method="sum").to_dict()
    assert "d11" not in fused["q"] or fused["r"] == {}, "ranx fixed: compare on raw runs again"
