"""Self-tests of the plain-Python fusion oracle (``tests/fuse/fusion_reference.py``).

1. ranx's published test vectors (fusion-peers.md c1) reproduced exactly (closed forms).
2. Every case of ``tests/fuse/peer_vectors.yaml`` (ranx runs, fusion-peers c2/c3 published
   numbers, Elasticsearch / OpenSearch / Qdrant unit tests) within the case's tolerance.
3. Randomised agreement with ranx 0.3.21 (``ranx.fuse``) for every normaliser and every
   fusion method ranx shares with the contract, compared per (query, doc) to 1e-9.
4. Hand-computed cases (arithmetic in the comments) for the aligners, delayed alignment, missing
   policies, the non-ranx normalisers, degenerate lists, distances, top_k, rank derivation and
   the tie rule, plus the documented disagreements with peers.
"""

from __future__ import annotations

import math
import random
import warnings
from typing import Any

import pytest

from .fusion_reference import (
    DEFAULT_RECIPE,
    fuse_reference,
    recipe_with,
    scores_by_query,
)
from .peer_cases import CASES as PEER_CASES
from .peer_cases import PEER_VECTORS, case_recipe

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def doc_rows(
    runs: dict[str, dict[str, dict[str, float]]],
    ranks: dict[str, dict[str, dict[str, int]]] | None = None,
) -> list[dict]:
    """{source: {query: {doc: score}}} -> doc-granularity log rows (rank None = derived)."""
    rows = []
    for src, run in runs.items():
        for q, docs in run.items():
            for d, s in docs.items():
                rows.append(
                    {
                        "query_id": q,
                        "source": src,
                        "item_id": d,
                        "parent_id": d,
                        "score": float(s),
                        "rank": None if ranks is None else ranks[src][q][d],
                        "granularity": "doc",
                        "block_type": None,
                    }
                )
    return rows


def block_row(
    q: str, src: str, item: str, parent: str, score: float, rank: int | None = None
) -> dict:
    return {
        "query_id": q,
        "source": src,
        "item_id": item,
        "parent_id": parent,
        "score": float(score),
        "rank": rank,
        "granularity": "block",
        "block_type": "text",
    }


def srcs(**spec: Any) -> dict[str, dict]:
    """srcs(a=("minmax", 1.0), b=("none", .5, True, 10)) -> a full ``sources`` mapping."""
    out = {}
    for name, t in spec.items():
        norm, w = t[0], t[1]
        dist = t[2] if len(t) > 2 else False
        top_k = t[3] if len(t) > 3 else None
        out[name] = {"top_k": top_k, "normalize": norm, "weight": float(w), "distance": dist}
    return out


def recipe(sources: dict, method: str, **over: Any) -> dict:
    o: dict[str, Any] = {"sources": sources, "fusion.method": method, "discover_sources": False}
    o.update({k.replace("__", "."): v for k, v in over.items()})
    return recipe_with(o)


def fused(rows: list[dict], rec: dict, q: str = "q") -> dict[str, float | None]:
    return scores_by_query(fuse_reference(rows, rec))[q]


def order(rows: list[dict], rec: dict, q: str = "q") -> list[str]:
    return [r["item_id"] for r in fuse_reference(rows, rec) if r["query_id"] == q]


def approx(x: float | None, y: float | None, tol: float = 1e-12) -> bool:
    if x is None or y is None:
        return x is None and y is None
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)


def assert_scores(got: dict, expected: dict, tol: float = 1e-12) -> None:
    assert set(got) == set(expected), (got, expected)
    for k, v in expected.items():
        assert approx(got[k], v, tol), (k, got[k], v)


# ---------------------------------------------------------------------------------------------
# 1. ranx's c1 vectors, exactly (closed forms)
# ---------------------------------------------------------------------------------------------

C1 = {
    "run_1": {"q1": {"d1": 1, "d2": 2, "d3": 3}, "q2": {"d1": 1, "d2": 2}},
    "run_2": {"q1": {"d1": 3, "d2": 2}, "q2": {"d1": 1, "d3": 3}},
    "run_3": {"q1": {"d3": 1}, "q2": {"d2": 2, "d3": 3}},
}
C1_NONE = srcs(run_1=("none", 1), run_2=("none", 1), run_3=("none", 1))

C1_TABLE: dict[str, dict[str, dict[str, float]]] = {
    # ranks: q1 run_1 d3,d2,d1; run_2 d1,d2; run_3 d3 -- q2 run_1 d2,d1; run_2 d3,d1; run_3 d3,d2
    "rrf": {
        "q1": {"d1": 1 / 63 + 1 / 61, "d2": 1 / 62 + 1 / 62, "d3": 1 / 61 + 1 / 61},
        "q2": {"d1": 1 / 62 + 1 / 62, "d2": 1 / 61 + 1 / 62, "d3": 1 / 61 + 1 / 61},
    },
    "combsum": {"q1": {"d1": 4, "d2": 4, "d3": 4}, "q2": {"d1": 2, "d2": 4, "d3": 6}},
    "combmnz": {"q1": {"d1": 8, "d2": 8, "d3": 8}, "q2": {"d1": 4, "d2": 8, "d3": 12}},
    "combanz": {"q1": {"d1": 2, "d2": 2, "d3": 2}, "q2": {"d1": 1, "d2": 2, "d3": 3}},
    "combmed": {"q1": {"d1": 2, "d2": 2, "d3": 2}, "q2": {"d1": 1, "d2": 2, "d3": 3}},
    "combmax": {"q1": {"d1": 3, "d2": 2, "d3": 3}, "q2": {"d1": 1, "d2": 2, "d3": 3}},
    "combmin": {"q1": {"d1": 1, "d2": 2, "d3": 1}, "q2": {"d1": 1, "d2": 2, "d3": 3}},
    # (sum 1/r^2) * n_d: q1 d1 (1/9 + 1)*2 = 20/9; d2 (1/4 + 1/4)*2; d3 (1 + 1)*2 ...
    "isr": {"q1": {"d1": 20 / 9, "d2": 1.0, "d3": 4.0}, "q2": {"d1": 1.0, "d2": 2.5, "d3": 4.0}},
}


@pytest.mark.parametrize("method", sorted(C1_TABLE))
def test_ranx_c1_table(method: str) -> None:
    got = scores_by_query(fuse_reference(doc_rows(C1), recipe(C1_NONE, method)))
    for q in ("q1", "q2"):
        assert_scores(got[q], C1_TABLE[method][q])


def test_ranx_c1_wsum() -> None:
    # wsum [.3,.2,.5]: q1 d1 .3*1 + .2*3 = .9; d2 .3*2 + .2*2 = 1.0; d3 .3*3 + .5*1 = 1.4
    #                  q2 d1 .3 + .2 = .5; d2 .6 + .5*2 = 1.6; d3 .2*3 + .5*3 = 2.1
    rec = recipe(
        srcs(run_1=("none", 0.3), run_2=("none", 0.2), run_3=("none", 0.5)), "weighted_sum"
    )
    got = scores_by_query(fuse_reference(doc_rows(C1), rec))
    assert_scores(got["q1"], {"d1": 0.9, "d2": 1.0, "d3": 1.4})
    assert_scores(got["q2"], {"d1": 0.5, "d2": 1.6, "d3": 2.1})


NF = {"run": {"q1": {"d1": 1, "d2": 2, "d3": 3}, "q2": {"d1": 1, "d2": 2}}}
NF_TABLE = [
    ("minmax", False, {"q1": {"d1": 0, "d2": 0.5, "d3": 1}, "q2": {"d1": 0, "d2": 1}}),
    ("minmax", True, {"q1": {"d1": 1, "d2": 0.5, "d3": 0}, "q2": {"d1": 1, "d2": 0}}),  # inverted
    ("max", False, {"q1": {"d1": 1 / 3, "d2": 2 / 3, "d3": 1}, "q2": {"d1": 0.5, "d2": 1}}),
    ("sum", False, {"q1": {"d1": 0, "d2": 1 / 3, "d3": 2 / 3}, "q2": {"d1": 0, "d2": 1}}),
    ("rank", False, {"q1": {"d1": 1 / 3, "d2": 2 / 3, "d3": 1}, "q2": {"d1": 0.5, "d2": 1}}),
    (
        "zscore",
        False,
        {
            "q1": {d: (x - 2) / 0.816496580927726 for d, x in (("d1", 1), ("d2", 2), ("d3", 3))},
            "q2": {"d1": (1 - 1.5) / 0.5, "d2": (2 - 1.5) / 0.5},
        },
    ),
]


@pytest.mark.parametrize(
    "norm,distance,expected",
    NF_TABLE,
    ids=[f"{n}{'-inverted' if d else ''}" for n, d, _ in NF_TABLE],
)
def test_ranx_normalisation_fixture(norm: str, distance: bool, expected: dict) -> None:
    # a single list fused by weighted_sum w=1 returns its normalised scores
    rec = recipe(
        {"run": {"top_k": None, "normalize": norm, "weight": 1.0, "distance": distance}},
        "weighted_sum",
    )
    got = scores_by_query(fuse_reference(doc_rows(NF), rec))
    for q in ("q1", "q2"):
        assert_scores(got[q], expected[q], 1e-12)


def test_ranx_borda_norm_fixture() -> None:
    # ranx borda over the c1 runs, run_3 q1 = {d3}: |C| = 3, n = 1:
    # d3 = 1 - 0/3 = 1; d1 = d2 = 0.5 - (1 - 1)/(2*3) = 1.5/3
    rec = recipe(srcs(run_1=("borda", 0), run_2=("borda", 0), run_3=("borda", 1)), "weighted_sum")
    got = scores_by_query(fuse_reference(doc_rows(C1), rec))
    assert_scores(got["q1"], {"d1": 0.5, "d2": 0.5, "d3": 1.0})


# ---------------------------------------------------------------------------------------------
# 2. peer vectors as data
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", PEER_CASES, ids=[c["title"] for c in PEER_CASES])
def test_peer_vectors(case: dict) -> None:
    rec = case_recipe(case)
    result = fuse_reference(case["rows"], rec)
    got = scores_by_query(result)
    tol = float(case["tolerance"])
    for q, exp in case["expected"].items():
        if not case.get("partial"):
            assert set(got[q]) == set(exp), (q, got[q], exp)
        for item, value in exp.items():
            assert got[q][item] is not None and abs(got[q][item] - value) <= tol, (
                q,
                item,
                got[q][item],
                value,
            )
    for q, prefix in (case.get("expected_order") or {}).items():
        ranked = [r["item_id"] for r in result if r["query_id"] == q]
        assert ranked[: len(prefix)] == prefix


def test_peer_vectors_file_shape() -> None:
    assert len(PEER_CASES) >= 50
    keys = {"title", "peer", "provenance", "rows", "recipe_overrides", "expected", "tolerance"}
    for c in PEER_CASES:
        assert set(c) >= keys
        assert "oracle" not in c["peer"].lower()
        # the header's three provenances, each as the case's peer line says
        ran, reimpl = "ran at fixture generation" in c["peer"], "(re-impl)" in c["peer"]
        assert c["provenance"] == ("ran" if ran else "re-implementation" if reimpl else "published")
        if c["tolerance"] == 0:  # exact only for a peer's own number
            assert c["provenance"] == "published", c["title"]
    counts = {p: sum(c["provenance"] == p for c in PEER_CASES) for p in ("ran", "published")}
    header = PEER_VECTORS.read_text(encoding="utf-8").split("\ncases:")[0]
    reimpl = len(PEER_CASES) - sum(counts.values())
    assert f"re-implementation ({reimpl} cases)" in header
    for provenance, count in counts.items():
        assert f"{provenance} ({count} cases)" in header


HY = {"bm25": {"q": {"a": 12, "b": 9, "c": 3}}, "dense": {"q": {"b": 0.91, "d": 0.85, "a": 0.40}}}


def test_opensearch_min_max_floor_differs() -> None:
    """OpenSearch maps a min-max 0 to 0.001 (MIN_SCORE); the contract keeps 0. Where a
    normalised 0 is involved, the c2 table and the contract differ (re-impl values)."""
    hy_rows = doc_rows(HY)
    minmax = srcs(bm25=("minmax", 0.3), dense=("minmax", 0.7))
    # arithmetic (zero policy): a = .3*1 + .7*0 = .3 (OpenSearch .3*1 + .7*.001 = .3007);
    #                           c = .3*0 + .7*0 (missing) = 0 (OpenSearch .3*.001 = .0003)
    got = fused(hy_rows, recipe(minmax, "arithmetic_mean"))
    assert approx(got["a"], 0.3) and approx(got["c"], 0.0)
    # geometric: a's dense 0 is not counted -> exp(.3 ln 1 / .3) = 1.0 (OpenSearch
    # exp((.3 ln 1 + .7 ln .001)/1) = .001^.7 = .007943); c has only bm25 0 -> NULL (OS .001)
    got = fused(hy_rows, recipe(minmax, "geometric_mean"))
    assert approx(got["a"], 1.0) and got["c"] is None
    assert approx(0.001**0.7, 0.007943, 1e-4)
    # harmonic: a -> .3/(.3/1) = 1.0 (OpenSearch 1/(.3 + .7/.001) = .001428); c NULL
    got = fused(hy_rows, recipe(minmax, "harmonic_mean"))
    assert approx(got["a"], 1.0) and got["c"] is None
    assert approx(1 / (0.3 + 0.7 / 0.001), 0.001428, 1e-3)
    # and NULL ranks last: b .869565, d .882353 ... order d, b, a? a = 1.0 first.
    assert order(hy_rows, recipe(minmax, "harmonic_mean")) == ["a", "d", "b", "c"]


def test_max_of_a_constant_list_follows_ranx() -> None:
    # contract (revised): max has no zero-spread rule, as ranx: s/s = 1.0 whatever degenerate_value
    rows = doc_rows({"s": {"q": {"x": 2.0, "y": 2.0}}})
    assert_scores(fused(rows, recipe(srcs(s=("max", 1)), "weighted_sum")), {"x": 1.0, "y": 1.0})
    rec = recipe(srcs(s=("max", 1)), "weighted_sum", normalizer_params__degenerate_value=0.25)
    assert_scores(fused(rows, rec), {"x": 1.0, "y": 1.0})


# ---------------------------------------------------------------------------------------------
# 3. randomised agreement with ranx
# ---------------------------------------------------------------------------------------------

RANX_NORMS = {  # ranx name -> (contract normaliser, distance)
    None: ("none", False),
    "min-max": ("minmax", False),
    "min-max-inverted": ("minmax", True),
    "max": ("max", False),
    "sum": ("sum", False),
    "zmuv": ("zscore", False),
    "rank": ("rank", False),
    "borda": ("borda", False),
}
RANX_METHODS = {  # ranx name -> contract method
    "rrf": "rrf",
    "isr": "isr",
    "wsum": "weighted_sum",
    "sum": "combsum",
    "mnz": "combmnz",
    "anz": "combanz",
    "max": "combmax",
    "min": "combmin",
    "med": "combmed",
}


def random_runs(rng: random.Random, n_sources: int) -> dict[str, dict[str, dict[str, float]]]:
    """2-3 queries, lists of 2-6 docs out of 8, distinct positive scores (no degenerate list,
    so ranx's arbitrary tie order and its max-norm of constant lists never matter)."""
    runs: dict[str, dict[str, dict[str, float]]] = {f"s{i}": {} for i in range(n_sources)}
    for qi in range(rng.randint(2, 3)):
        for per_query in runs.values():
            docs = rng.sample([f"d{j}" for j in range(8)], rng.randint(2, 6))
            scores = rng.sample(range(1, 10_000), len(docs))
            per_query[f"q{qi}"] = {d: s / 1000.0 for d, s in zip(docs, scores)}
    return runs


def _ranx_case(ranx, runs, norm, method, params):
    """ranx's normalisation (``ranx.normalize``; borda over all runs), then ``ranx.fuse`` with
    ``norm=None`` on runs rebuilt from the normalised dicts: the same numbers as
    ``ranx.fuse(runs, norm=norm, ...)``, but numba compiles every fusion method only once (a
    normalised run has another numba type, which would cost a second compilation per method)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx_runs = [ranx.Run(r, name=n) for n, r in runs.items()]
        if norm == "borda":
            from ranx.normalization import borda_norm

            ranx_runs = [ranx.Run(r.to_dict()) for r in borda_norm(ranx_runs)]
        elif norm is not None:
            ranx_runs = [ranx.Run(ranx.normalize(r, norm).to_dict()) for r in ranx_runs]
        out = ranx.fuse(ranx_runs, norm=None, method=method, params=params)
    return {q: {d: float(v) for d, v in docs.items()} for q, docs in out.to_dict().items()}


@pytest.fixture(scope="session")
def ranx_mod():
    """Import ranx once and JIT-compile what the agreement tests use (~80 s with a cold numba
    cache, ~10 s once ranx's on-disk cache is warm)."""
    import ranx

    runs = random_runs(random.Random(0), 2)
    for norm in RANX_NORMS:
        _ranx_case(ranx, runs, norm, "wsum", {"weights": [1.0, 1.0]})
    for m in RANX_METHODS:
        _ranx_case(ranx, runs, None, m, {"weights": [1.0, 1.0]} if m == "wsum" else {})
    return ranx


@pytest.mark.xdist_group("ranx")  # ranx compiles once, on one worker (with every ranx oracle)
def test_ranx_random_agreement(ranx_mod) -> None:
    rng = random.Random(20240806)
    checked = 0
    for case in range(4):
        runs = random_runs(rng, 2 + case % 2)
        weights = [round(rng.uniform(0.1, 2.0), 3) for _ in runs]
        k = rng.choice([1, 10, 60])
        for ranx_norm, (norm, distance) in RANX_NORMS.items():
            for ranx_m, method in RANX_METHODS.items():
                if ranx_m in ("rrf", "isr") and ranx_norm == "borda":
                    continue  # ranx ranks a borda run in candidate order (not by score)
                params: dict[str, Any] = {}
                sources = {}
                for (name, _), w in zip(runs.items(), weights):
                    wi = w if ranx_m == "wsum" else 1.0
                    sources[name] = {
                        "top_k": None,
                        "normalize": norm,
                        "weight": wi,
                        "distance": distance,
                    }
                if ranx_m == "wsum":
                    params = {"weights": weights}
                if ranx_m == "rrf":
                    params = {"k": k}
                expected = _ranx_case(ranx_mod, runs, ranx_norm, ranx_m, params)
                rec = recipe(
                    sources,
                    method,
                    fusion__k=k,
                    fusion__rank_base=1,
                    normalizer_params__zscore_ddof=0,
                )
                got = scores_by_query(fuse_reference(doc_rows(runs), rec))
                for q, exp in expected.items():
                    assert set(got[q]) == set(exp), (ranx_norm, ranx_m, q)
                    for d, v in exp.items():
                        assert math.isclose(got[q][d], v, rel_tol=1e-9, abs_tol=1e-9), (
                            case,
                            ranx_norm,
                            ranx_m,
                            q,
                            d,
                            got[q][d],
                            v,
                        )
                        checked += 1
    assert checked > 1000


@pytest.mark.xdist_group("ranx")
def test_ranx_max_norm_constant_list_agreement(ranx_mod) -> None:
    """ranx max-norm of a constant list is 1.0 (s/s), and so is the (revised) contract's."""
    # two-character ids like the random runs (a new string width costs a numba recompilation)
    runs = {"s0": {"q0": {"dx": 2.0, "dy": 2.0}}, "s1": {"q0": {"dx": 1.0, "dz": 3.0}}}
    expected = _ranx_case(ranx_mod, runs, "max", "wsum", {"weights": [1.0, 1.0]})["q0"]
    got = fused(doc_rows(runs), recipe(srcs(s0=("max", 1), s1=("max", 1)), "weighted_sum"), "q0")
    # ranx and contract: dx = 2/2 + 1/3, dy = 1, dz = 3/3 = 1
    assert approx(expected["dx"], 4 / 3, 1e-9) and approx(got["dx"], 4 / 3)
    assert approx(expected["dy"], 1.0, 1e-9) and approx(got["dy"], 1.0)
    assert approx(got["dz"], expected["dz"])


# ---------------------------------------------------------------------------------------------
# 4. hand-computed cases
# ---------------------------------------------------------------------------------------------

# one block source; derived ranks: A#1 .9 r1, B#1 .8 r2, A#2 .6 r3, C#1 .5 r4, C#2 .5 r5,
# A#3 .3 r6 (C#1 before C#2 by item id)
BLOCKS = [
    block_row("q", "dense", "A#1", "A", 0.9),
    block_row("q", "dense", "A#2", "A", 0.6),
    block_row("q", "dense", "A#3", "A", 0.3),
    block_row("q", "dense", "B#1", "B", 0.8),
    block_row("q", "dense", "C#1", "C", 0.5),
    block_row("q", "dense", "C#2", "C", 0.5),
]
DENSE_NONE = srcs(dense=("none", 1))

ALIGNER_CASES = [
    # max: A .9, B .8, C .5
    ({"aligner.method": "max"}, {"A": 0.9, "B": 0.8, "C": 0.5}),
    # sum: A .9+.6+.3 = 1.8, B .8, C 1.0
    ({"aligner.method": "sum"}, {"A": 1.8, "B": 0.8, "C": 1.0}),
    # mean: A 1.8/3 = .6, B .8, C .5
    ({"aligner.method": "mean"}, {"A": 0.6, "B": 0.8, "C": 0.5}),
    # sum_top_n n=2: A .9+.6 = 1.5, B .8, C 1.0
    ({"aligner.method": "sum_top_n", "aligner.top_n": 2}, {"A": 1.5, "B": 0.8, "C": 1.0}),
    # sum_top_n n=null: all = sum
    ({"aligner.method": "sum_top_n", "aligner.top_n": None}, {"A": 1.8, "B": 0.8, "C": 1.0}),
    # max_decay d=.5 n=3: A .9 + .5*.6 + .25*.3 = 1.275, B .8, C .5 + .5*.5 = .75
    (
        {"aligner.method": "max_decay", "aligner.decay": 0.5, "aligner.top_n": 3},
        {"A": 1.275, "B": 0.8, "C": 0.75},
    ),
    # max_decay d=.5 n=2: A .9 + .3 = 1.2
    (
        {"aligner.method": "max_decay", "aligner.decay": 0.5, "aligner.top_n": 2},
        {"A": 1.2, "B": 0.8, "C": 0.75},
    ),
]


@pytest.mark.parametrize(
    "over,expected",
    ALIGNER_CASES,
    ids=[f"{o['aligner.method']}-{o.get('aligner.top_n', '')}" for o, _ in ALIGNER_CASES],
)
def test_aligners(over: dict, expected: dict) -> None:
    rec = recipe(DENSE_NONE, "weighted_sum", **{k.replace(".", "__"): v for k, v in over.items()})
    result = fuse_reference(BLOCKS, rec)
    assert_scores(scores_by_query(result)["q"], expected)
    # the contribution carries the aligned raw score and the rank in the aligned list
    ranked = sorted(expected, key=lambda p: (-expected[p], p))
    for r in result:
        (c,) = r["contributions"]
        assert approx(c["raw_score"], expected[r["item_id"]])
        assert c["rank"] == ranked.index(r["item_id"]) + 1


def test_aligned_rerank_ties_by_best_original_rank_then_parent() -> None:
    # explicit ranks: A#1 r1 .9, D#1 r2 .8, B#1 r3 .8, E#1 r4 .7, F#1 r5 .7
    rows = [
        block_row("q", "s", "A#1", "A", 0.9, 1),
        block_row("q", "s", "D#1", "D", 0.8, 2),
        block_row("q", "s", "B#1", "B", 0.8, 3),
        block_row("q", "s", "F#1", "F", 0.7, 4),
        block_row("q", "s", "E#1", "E", 0.7, 4),
    ]
    # aligned (max): A .9; B = D = .8 -> best rank D 2 < B 3 -> D r2, B r3;
    # E = F = .7 with equal best rank 4 -> parent id: E r4, F r5
    # rrf k=60: A 1/61, D 1/62, B 1/63, E 1/64, F 1/65
    got = fused(rows, recipe(srcs(s=("none", 1)), "rrf"))
    assert_scores(got, {"A": 1 / 61, "D": 1 / 62, "B": 1 / 63, "E": 1 / 64, "F": 1 / 65})


# delayed alignment: dense blocks A#1 .9 r1, B#1 .7 r2, A#2 .4 r3; summary docs B .8 r1,
# A .6 r2, C .5 r3 (C has no block in the log -> pseudo-block "C")
DELAYED_ROWS = [
    block_row("q", "dense", "A#1", "A", 0.9),
    block_row("q", "dense", "B#1", "B", 0.7),
    block_row("q", "dense", "A#2", "A", 0.4),
] + doc_rows({"summary": {"q": {"B": 0.8, "A": 0.6, "C": 0.5}}})
RRF2 = srcs(dense=("none", 1), summary=("none", 1))


def test_delayed_alignment_max() -> None:
    # block level rrf k=60 (summary rows expanded, keeping their rank):
    #   A#1 = 1/61 (dense r1) + 1/62 (summary A r2); A#2 = 1/63 + 1/62
    #   B#1 = 1/62 (dense r2) + 1/61 (summary B r1); C = 1/63
    # max per parent: A = 1/61 + 1/62 = B -> tie, A before B by id; C = 1/63
    rec = recipe(RRF2, "rrf", aligner__order="after_fusion", aligner__method="max")
    result = fuse_reference(DELAYED_ROWS, rec)
    assert_scores(
        scores_by_query(result)["q"], {"A": 1 / 61 + 1 / 62, "B": 1 / 62 + 1 / 61, "C": 1 / 63}
    )
    assert [r["item_id"] for r in result] == ["A", "B", "C"]
    a = result[0]["contributions"]
    assert [(c["source"], c["block_id"], c["rank"]) for c in a] == [
        ("dense", "A#1", 1),
        ("dense", "A#2", 3),
        ("summary", "A#1", 2),
        ("summary", "A#2", 2),
    ]


def test_delayed_alignment_sum_differs_from_before_fusion() -> None:
    # after_fusion, sum: A = (1/61 + 1/62) + (1/63 + 1/62); B = 1/62 + 1/61; C = 1/63
    rec = recipe(RRF2, "rrf", aligner__order="after_fusion", aligner__method="sum")
    assert_scores(
        fused(DELAYED_ROWS, rec), {"A": 1 / 61 + 2 / 62 + 1 / 63, "B": 1 / 62 + 1 / 61, "C": 1 / 63}
    )
    # before_fusion, sum: dense aligned A 1.3 r1, B .7 r2; summary B r1, A r2, C r3
    # -> A = 1/61 + 1/62, B = 1/62 + 1/61, C = 1/63
    rec = recipe(RRF2, "rrf", aligner__order="before_fusion", aligner__method="sum")
    assert_scores(
        fused(DELAYED_ROWS, rec), {"A": 1 / 61 + 1 / 62, "B": 1 / 62 + 1 / 61, "C": 1 / 63}
    )


def test_delayed_alignment_normalises_the_expanded_list() -> None:
    # weighted_sum, minmax on both lists at block level.
    # dense blocks: A#1 .9, B#1 .7, A#2 .4 -> (s - .4)/.5: A#1 1, B#1 .6, A#2 0
    # summary expanded: B#1 .8, A#1 .6, A#2 .6, C .5 -> (s - .5)/.3: B#1 1, A#1 A#2 1/3, C 0
    # blocks: A#1 1 + 1/3, A#2 0 + 1/3, B#1 .6 + 1, C 0 + 0
    # mean per parent: A = (4/3 + 1/3)/2 = 5/6, B = 1.6, C = 0
    rec = recipe(
        srcs(dense=("minmax", 1), summary=("minmax", 1)),
        "weighted_sum",
        aligner__order="after_fusion",
        aligner__method="mean",
    )
    assert_scores(fused(DELAYED_ROWS, rec), {"A": 5 / 6, "B": 1.6, "C": 0.0})


# missing policies: s1 {a:3, b:2, c:1}, s2 {a:5, d:4}; ranks s1 a1 b2 c3, s2 a1 d2
MP_ROWS = doc_rows({"s1": {"q": {"a": 3, "b": 2, "c": 1}}, "s2": {"q": {"a": 5, "d": 4}}})
MP_NONE = srcs(s1=("none", 1), s2=("none", 1))
MISSING_CASES = [
    # weighted_sum zero (default): a 3+5, b 2, c 1, d 4 ; skip numerically the same
    ("weighted_sum", "default", {"a": 8, "b": 2, "c": 1, "d": 4}, None),
    ("weighted_sum", "skip", {"a": 8, "b": 2, "c": 1, "d": 4}, None),
    # list_min: s1 min 1, s2 min 4: b 2+4, c 1+4, d 4+1 -> c, d tie at 5 -> c first
    ("weighted_sum", "list_min", {"a": 8, "b": 6, "c": 5, "d": 5}, ["a", "b", "c", "d"]),
    # combmnz skip (default): a 8*2, b 2*1, c 1, d 4
    ("combmnz", "default", {"a": 16, "b": 2, "c": 1, "d": 4}, None),
    # combmnz list_min: n_d stays the real count: b (2+4)*1, c (1+4)*1, d (4+1)*1
    ("combmnz", "list_min", {"a": 16, "b": 6, "c": 5, "d": 5}, None),
    # combmin zero: b min(2, 0) = 0, c 0, d min(0, 4) = 0 -> tie b, c, d by id
    ("combmin", "zero", {"a": 3, "b": 0, "c": 0, "d": 0}, ["a", "b", "c", "d"]),
    ("combmin", "default", {"a": 3, "b": 2, "c": 1, "d": 4}, ["d", "a", "b", "c"]),
    ("combmin", "list_min", {"a": 3, "b": 2, "c": 1, "d": 1}, None),
    # combanz zero == skip (n_d unchanged): a 8/2, b 2, c 1, d 4/1 -> a, d tie at 4
    ("combanz", "zero", {"a": 4, "b": 2, "c": 1, "d": 4}, ["a", "d", "b", "c"]),
    # combmed zero: a med(3,5) = 4, b med(2,0) = 1, c .5, d med(0,4) = 2
    ("combmed", "zero", {"a": 4, "b": 1, "c": 0.5, "d": 2}, None),
    # combmax zero = skip for positive scores
    ("combmax", "zero", {"a": 5, "b": 2, "c": 1, "d": 4}, None),
    # rrf list_min: last ranks s1 3, s2 2: a 2/61, b 1/62 + 1/62, c 1/63 + 1/62, d 1/62 + 1/63
    (
        "rrf",
        "list_min",
        {"a": 2 / 61, "b": 2 / 62, "c": 1 / 63 + 1 / 62, "d": 1 / 62 + 1 / 63},
        ["a", "b", "c", "d"],
    ),
    # rrf skip = zero: b 1/62, c 1/63, d 1/62
    ("rrf", "skip", {"a": 2 / 61, "b": 1 / 62, "c": 1 / 63, "d": 1 / 62}, ["a", "b", "d", "c"]),
    # isr zero: a (1 + 1)*2 = 4, b 1/4, c 1/9, d 1/4 -> b, d tie
    ("isr", "default", {"a": 4, "b": 0.25, "c": 1 / 9, "d": 0.25}, ["a", "b", "d", "c"]),
    # isr list_min: b (1/4 + 1/2^2)*1 = .5, c (1/9 + 1/4)*1, d (1/4 + 1/9)*1
    ("isr", "list_min", {"a": 4, "b": 0.5, "c": 1 / 9 + 1 / 4, "d": 1 / 4 + 1 / 9}, None),
]


@pytest.mark.parametrize(
    "method,missing,expected,ranked",
    MISSING_CASES,
    ids=[f"{m}-{p}" for m, p, _, _ in MISSING_CASES],
)
def test_missing_policies(method: str, missing: str, expected: dict, ranked: list | None) -> None:
    rec = recipe(MP_NONE, method, fusion__missing=missing)
    assert_scores(fused(MP_ROWS, rec), expected)
    if ranked:
        assert order(MP_ROWS, rec) == ranked


def test_arithmetic_mean_zero_and_skip() -> None:
    # weights s1 1, s2 3. zero: a (3 + 3*5)/4 = 4.5, b 2/4, c 1/4, d 3*4/4 = 3
    # skip: a 4.5, b 2/1, c 1/1, d 12/3 = 4
    ws = srcs(s1=("none", 1), s2=("none", 3))
    assert_scores(
        fused(MP_ROWS, recipe(ws, "arithmetic_mean")), {"a": 4.5, "b": 0.5, "c": 0.25, "d": 3}
    )
    assert_scores(
        fused(MP_ROWS, recipe(ws, "arithmetic_mean", fusion__missing="skip")),
        {"a": 4.5, "b": 2, "c": 1, "d": 4},
    )
    # list_min: b (2 + 3*4)/4 = 3.5, c (1 + 12)/4 = 3.25, d (1 + 12)/4 = 3.25
    assert_scores(
        fused(MP_ROWS, recipe(ws, "arithmetic_mean", fusion__missing="list_min")),
        {"a": 4.5, "b": 3.5, "c": 3.25, "d": 3.25},
    )


def test_geometric_harmonic_null_ranks_last() -> None:
    # s1 {a: 2, b: 0}, s2 {a: 8, c: .5}, w = 1: geometric a = sqrt(2*8) = 4, c = .5,
    # b: its only value is 0 -> not counted -> NULL, ranked last
    rows = doc_rows({"s1": {"q": {"a": 2, "b": 0}}, "s2": {"q": {"a": 8, "c": 0.5}}})
    rec = recipe(srcs(s1=("none", 1), s2=("none", 1)), "geometric_mean")
    assert_scores(fused(rows, rec), {"a": 4.0, "b": None, "c": 0.5})
    assert order(rows, rec) == ["a", "c", "b"]
    # harmonic a = 2/(1/2 + 1/8) = 3.2
    rec = recipe(srcs(s1=("none", 1), s2=("none", 1)), "harmonic_mean")
    assert_scores(fused(rows, rec), {"a": 3.2, "b": None, "c": 0.5})
    # list_min (s2 min .5) gives b a value: geometric sqrt(.5) (0 still not counted)
    rec = recipe(srcs(s1=("none", 1), s2=("none", 1)), "geometric_mean", fusion__missing="list_min")
    got = fused(rows, rec)
    assert approx(got["b"], 0.5) and approx(got["c"], 0.5)  # c: s1 min is 0 -> not counted


# single list {a: 1, b: 2, c: 3} unless given
def _single(norm: str, docs: dict | None = None, **params: Any) -> dict:
    rows = doc_rows({"s": {"q": docs or {"a": 1, "b": 2, "c": 3}}})
    over = {f"normalizer_params__{k}": v for k, v in params.items()}
    return fused(rows, recipe(srcs(s=(norm, 1)), "weighted_sum", **over))


def test_softmax() -> None:
    # T = 1: exp(-2), exp(-1), exp(0) over Z = 1 + e^-1 + e^-2 = 1.5032147244
    z = 1 + math.exp(-1) + math.exp(-2)
    assert_scores(_single("softmax"), {"a": math.exp(-2) / z, "b": math.exp(-1) / z, "c": 1 / z})
    assert approx(1 / z, 0.665240955775, 1e-11)
    # T = 2: exp(-1), exp(-.5), 1
    z2 = math.exp(-1) + math.exp(-0.5) + 1
    assert_scores(
        _single("softmax", softmax_temperature=2.0),
        {"a": math.exp(-1) / z2, "b": math.exp(-0.5) / z2, "c": 1 / z2},
    )


def test_sigmoid() -> None:
    # center 0, scale 1: 1/(1 + e^-1) = .731059, 1/(1 + e^-2) = .880797, 1/(1 + e^-3) = .952574
    got = _single("sigmoid")
    assert approx(got["a"], 0.7310585786300049) and approx(got["b"], 0.8807970779778823)
    # center 2, scale 2: a 1/(1 + e^.5) = .377541, b .5, c 1/(1 + e^-.5) = .622459
    got = _single("sigmoid", sigmoid_center=2.0, sigmoid_scale=2.0)
    assert_scores(got, {"a": 1 / (1 + math.exp(0.5)), "b": 0.5, "c": 1 / (1 + math.exp(-0.5))})


def test_quantile() -> None:
    # [0, 10, 20, 30, 40]: P10 at h = .4 -> 4; P90 at h = 3.6 -> 30 + .6*10 = 36; range 32
    # 0 -> clamp(-4/32) = 0; 10 -> 6/32; 20 -> 16/32; 30 -> 26/32; 40 -> clamp(36/32) = 1
    got = _single("quantile", {"a": 0, "b": 10, "c": 20, "d": 30, "e": 40})
    assert_scores(got, {"a": 0, "b": 6 / 32, "c": 0.5, "d": 26 / 32, "e": 1.0}, 1e-9)
    # P25/P75 on [1, 2, 3, 4]: h .75 -> 1.75; h 2.25 -> 3.25; 2 -> .25/1.5; 3 -> 1.25/1.5
    got = _single(
        "quantile", {"a": 1, "b": 2, "c": 3, "d": 4}, quantile_p_lo=0.25, quantile_p_hi=0.75
    )
    assert_scores(got, {"a": 0, "b": 0.25 / 1.5, "c": 1.25 / 1.5, "d": 1.0}, 1e-9)


def test_quantile_zero_spread_of_the_quantile_range() -> None:
    # [1, 5 x 9, 9] (n = 11): P10 at h = 1 -> 5, P90 at h = 9 -> 5: P_hi - P_lo = 0
    # s = 5 -> degenerate_value (.25); 1 -> (1 - 5)/eps -> clamp 0; 9 -> 4/eps -> clamp 1
    docs = {"lo": 1, "hi": 9, **{f"m{i}": 5 for i in range(9)}}
    got = _single("quantile", docs, degenerate_value=0.25)
    assert got["lo"] == 0.0 and got["hi"] == 1.0
    assert all(got[f"m{i}"] == 0.25 for i in range(9))


def test_l2() -> None:
    # {3, 4}: sqrt(9 + 16) = 5 -> .6, .8
    assert_scores(_single("l2", {"a": 3, "b": 4}), {"a": 0.6, "b": 0.8})
    # all zero: sqrt(0) < eps -> degenerate_value
    assert_scores(_single("l2", {"a": 0, "b": 0}, degenerate_value=0.3), {"a": 0.3, "b": 0.3})


def test_bounds_clip_and_no_clip() -> None:
    # [0, 10]: 12 -> 1.2, 5 -> .5, -1 -> -.1 ; clipped -> 1, .5, 0
    docs = {"a": 12, "b": 5, "c": -1}
    assert_scores(
        _single("bounds", docs, bounds=[0, 10], bounds_clip=True), {"a": 1.0, "b": 0.5, "c": 0.0}
    )
    assert_scores(
        _single("bounds", docs, bounds=[0, 10], bounds_clip=False), {"a": 1.2, "b": 0.5, "c": -0.1}
    )
    with pytest.raises(ValueError):
        _single("bounds", docs)  # bounds: null


def test_zscore_ddof_and_dbsf() -> None:
    # {1, 2, 3}: mean 2; ddof 1 -> s = 1: -1, 0, 1 ; ddof 0 -> sigma = sqrt(2/3)
    assert_scores(_single("zscore", zscore_ddof=1), {"a": -1, "b": 0, "c": 1})
    sd = math.sqrt(2 / 3)
    assert_scores(_single("zscore", zscore_ddof=0), {"a": -1 / sd, "b": 0, "c": 1 / sd})
    # dbsf ddof 1: (s - (2 - 3))/6 -> 2/6, 3/6, 4/6
    assert_scores(_single("dbsf"), {"a": 1 / 3, "b": 0.5, "c": 2 / 3})
    # dbsf constant list -> dbsf_degenerate_value
    assert_scores(_single("dbsf", {"a": 2, "b": 2}), {"a": 0.5, "b": 0.5})


ONE_ITEM = [  # single list {a: 4.0}; degenerate_value .25, dbsf_degenerate_value .75
    ("none", {}, 4.0),
    ("rank", {}, 1.0),  # 1 - 0/1
    ("minmax", {}, 0.25),
    ("max", {}, 1.0),  # ranx: 4/4, no zero-spread rule (contract revised)
    ("sum", {}, 0.25),
    ("zscore", {"zscore_ddof": 0}, 0.25),  # sigma = 0
    ("zscore", {"zscore_ddof": 1}, 0.25),  # n - ddof = 0
    ("l2", {}, 1.0),  # READING R5: 4/sqrt(16), not degenerate
    ("softmax", {}, 1.0),  # exp(0)/exp(0)
    ("sigmoid", {}, 1 / (1 + math.exp(-4))),  # no list statistic: .982014
    ("quantile", {}, 0.25),  # P_lo = P_hi = s
    ("dbsf", {}, 0.75),
    ("bounds", {"bounds": [0, 8]}, 0.5),  # fixed bounds: (4 - 0)/8
    ("borda", {}, 1.0),  # 1 - 0/|C|, |C| = 1
]


@pytest.mark.parametrize(
    "norm,params,expected",
    ONE_ITEM,
    ids=[f"{n}{'-' + str(p) if p else ''}" for n, p, _ in ONE_ITEM],
)
def test_degenerate_one_item_list(norm: str, params: dict, expected: float) -> None:
    got = _single(norm, {"a": 4.0}, degenerate_value=0.25, dbsf_degenerate_value=0.75, **params)
    assert approx(got["a"], expected)


def test_distance_source() -> None:
    # distances a .2, b .5, c .9 -> scores -.2, -.5, -.9; derived ranks a1 b2 c3
    # minmax (-s - (-.9))/.7: a 1, b .4/.7, c 0 (= ranx min-max-inverted)
    rows = doc_rows({"v": {"q": {"a": 0.2, "b": 0.5, "c": 0.9}}})
    rec = recipe(srcs(v=("minmax", 1, True)), "weighted_sum")
    result = fuse_reference(rows, rec)
    assert_scores(scores_by_query(result)["q"], {"a": 1.0, "b": 0.4 / 0.7, "c": 0.0})
    c = {r["item_id"]: r["contributions"][0] for r in result}
    assert approx(c["a"]["raw_score"], -0.2) and c["a"]["rank"] == 1 and c["c"]["rank"] == 3
    # rrf: the smallest distance is rank 1
    assert_scores(
        fused(rows, recipe(srcs(v=("none", 1, True)), "rrf")),
        {"a": 1 / 61, "b": 1 / 62, "c": 1 / 63},
    )


def test_top_k() -> None:
    # s1 {a 5, b 4, c 3, d 2} top_k 2 keeps a (r1), b (r2); s2 {c: 1}
    # rrf: a 1/61, b 1/62, c 1/61 (from s2 only) -> a, c tie -> a first
    rows = doc_rows({"s1": {"q": {"a": 5, "b": 4, "c": 3, "d": 2}}, "s2": {"q": {"c": 1}}})
    rec = recipe(srcs(s1=("none", 1, False, 2), s2=("none", 1)), "rrf")
    assert_scores(fused(rows, rec), {"a": 1 / 61, "b": 1 / 62, "c": 1 / 61})
    assert order(rows, rec) == ["a", "c", "b"]
    # top_k on given ranks: ranks d1, c2, b3, a4 -> top_k 2 keeps d and c
    ranks = {"s1": {"q": {"d": 1, "c": 2, "b": 3, "a": 4}}, "s2": {"q": {"c": 1}}}
    rows = doc_rows({"s1": {"q": {"a": 5, "b": 4, "c": 3, "d": 2}}, "s2": {"q": {"c": 1}}}, ranks)
    # the aligned list re-ranks by score (READING R3): c .. 3 r1, d 2 r2 -> c 1/61 + 1/61, d 1/62
    assert_scores(fused(rows, rec), {"c": 2 / 61, "d": 1 / 62})


def test_rank_derived_from_score_when_none() -> None:
    # {b: 1.0, a: 1.0, c: 2.0}: score desc, ties by item id -> c r1, a r2, b r3
    rows = doc_rows({"s": {"q": {"b": 1.0, "a": 1.0, "c": 2.0}}})
    result = fuse_reference(rows, recipe(srcs(s=("none", 1)), "rrf"))
    assert [(r["item_id"], r["contributions"][0]["rank"]) for r in result] == [
        ("c", 1),
        ("a", 2),
        ("b", 3),
    ]
    assert_scores(scores_by_query(result)["q"], {"c": 1 / 61, "a": 1 / 62, "b": 1 / 63})
    # target block keeps the log ranks (no re-ranking); the same rows as blocks
    brows = [block_row("q", "s", i, "P", s) for i, s in (("b", 1.0), ("a", 1.0), ("c", 2.0))]
    rec = recipe(srcs(s=("rank", 1)), "weighted_sum", target_granularity="block")
    # rank normaliser 1 - p/3: c 1, a 2/3, b 1/3
    assert_scores(fused(brows, rec), {"c": 1.0, "a": 2 / 3, "b": 1 / 3})


def test_rank_only_rows_score_minus_rank() -> None:
    # READING R12: no score -> score = -rank: a r1 -1, b r2 -2, c r3 -3
    # minmax (s + 3)/2: a 1, b .5, c 0
    rows = [{**r, "score": None} for r in doc_rows({"s": {"q": {"a": 0, "b": 0, "c": 0}}})]
    for r, rank in zip(rows, (1, 2, 3), strict=True):
        r["rank"] = rank
    assert_scores(
        fused(rows, recipe(srcs(s=("minmax", 1)), "weighted_sum")), {"a": 1.0, "b": 0.5, "c": 0.0}
    )
    # distance: a rank is best-first whatever the scores would be, so the score -rank is not
    # negated: the same fused scores, and the same order for rrf
    rec = recipe(srcs(s=("minmax", 1, True)), "weighted_sum")
    assert_scores(fused(rows, rec), {"a": 1.0, "b": 0.5, "c": 0.0})
    assert_scores(
        fused(rows, recipe(srcs(s=("none", 1, True)), "rrf")),
        {"a": 1 / 61, "b": 1 / 62, "c": 1 / 63},
    )


def test_query_analyzer_boosts() -> None:
    # READING R13: s1 {a: 2, b: 1}, s2 {b: 2}; weighted_sum of raw scores, weights 1
    # q1 "Error 7" matches both rules: s1 x 2 x 1.5 = 3, s2 x 0 -> a 6, b 3
    # q2 "fine" matches none -> a 2, b 1 + 2 = 3
    runs = {
        "s1": {"q1": {"a": 2, "b": 1}, "q2": {"a": 2, "b": 1}},
        "s2": {"q1": {"b": 2}, "q2": {"b": 2}},
    }
    texts = {"q1": "Error 7", "q2": "fine"}
    rows = [{**r, "query_text": texts[r["query_id"]]} for r in doc_rows(runs)]
    rules = [
        {"match": "(?i)error", "boost": {"s1": 2.0}},
        {"match": "[0-9]", "boost": {"s1": 1.5, "s2": 0.0}},
    ]
    rec = recipe(
        srcs(s1=("none", 1), s2=("none", 1)),
        "weighted_sum",
        query_analyzer={"enabled": True, "rules": rules},
    )
    result = fuse_reference(rows, rec)
    assert_scores(scores_by_query(result)["q1"], {"a": 6.0, "b": 3.0})
    assert_scores(scores_by_query(result)["q2"], {"a": 2.0, "b": 3.0})
    b = next(r for r in result if (r["query_id"], r["item_id"]) == ("q1", "b"))
    assert [c["weight"] for c in b["contributions"]] == [3.0, 0.0]
    # arithmetic_mean: q1 b (3 x 1 + 0 x 2)/(3 + 0) = 1; disabled, the rules change nothing
    rec["fusion"]["method"] = "arithmetic_mean"
    assert approx(scores_by_query(fuse_reference(rows, rec))["q1"]["b"], 1.0)
    rec["query_analyzer"]["enabled"] = False
    assert_scores(scores_by_query(fuse_reference(rows, rec))["q1"], {"a": 1.0, "b": 1.5})


def test_tie_broken_by_item_id_after_rounding() -> None:
    # weighted_sum: z = .1 + .2 = 0.30000000000000004, m = .3 -> unrounded z > m, but
    # round(., 12) ties them -> item id order: m before z
    rows = doc_rows({"s1": {"q": {"z": 0.1, "m": 0.3}}, "s2": {"q": {"z": 0.2}}})
    rec = recipe(srcs(s1=("none", 1), s2=("none", 1)), "weighted_sum")
    got = fused(rows, rec)
    assert got["z"] > got["m"]
    assert order(rows, rec) == ["m", "z"]
    # code point order: "B" < "a"
    rows = doc_rows({"s1": {"q": {"a": 1.0}}, "s2": {"q": {"B": 1.0}}})
    result = fuse_reference(rows, recipe(srcs(s1=("none", 1), s2=("none", 1)), "rrf"))
    assert [(r["item_id"], r["rank"]) for r in result] == [("B", 1), ("a", 2)]


def test_contributions_shape() -> None:
    # c2 hybrid, rrf: b is bm25 rank 2 (score 9) and dense rank 1 (.91)
    result = fuse_reference(doc_rows(HY), recipe(srcs(bm25=("none", 2), dense=("none", 1)), "rrf"))
    b = next(r for r in result if r["item_id"] == "b")
    assert b["contributions"] == [
        {"source": "bm25", "raw_score": 9.0, "norm_score": 9.0, "rank": 2, "weight": 2.0},
        {"source": "dense", "raw_score": 0.91, "norm_score": 0.91, "rank": 1, "weight": 1.0},
    ]
    assert approx(b["fused_score"], 2 / 62 + 1 / 61)
    assert [r["rank"] for r in result] == [1, 2, 3, 4]
    c = next(r for r in result if r["item_id"] == "c")
    assert [x["source"] for x in c["contributions"]] == ["bm25"]


def test_recipe_helpers() -> None:
    rec = recipe_with({"fusion.k": 2, "sources.dense.weight": 0.7})
    assert rec["fusion"]["k"] == 2 and rec["fusion"]["method"] == DEFAULT_RECIPE["fusion"]["method"]
    assert rec["sources"]["dense"] == {
        "top_k": None,
        "normalize": "none",
        "weight": 0.7,
        "distance": False,
    }
    assert rec["sources"]["sparse"]["normalize"] == "rank"
    assert DEFAULT_RECIPE["fusion"]["k"] == 60  # not mutated
    # sources as a list with name:, undeclared sources dropped when discover_sources is false
    rows = doc_rows({"bm25": {"q": {"a": 1.0}}, "other": {"q": {"b": 5.0}}})
    rec = recipe_with(
        {
            "sources": [{"name": "bm25", "normalize": "none"}],
            "discover_sources": False,
            "fusion.method": "combsum",
        }
    )
    assert fused(rows, rec) == {"a": 1.0}
    rec = recipe_with(
        {
            "sources": [{"name": "bm25", "normalize": "none"}],
            "discover_sources": True,
            "fusion.method": "combsum",
        }
    )
    assert fused(rows, rec) == {"a": 1.0, "b": 5.0}  # "other" uses source_defaults (none, w 1)
