"""Tests written for mutants of sql/fuse/ that survived the other tests (tests/mutants/, issue 37).

- The query analyzer's boost (`THEN {{ boost }}` made `THEN 1.0` in fused.sql): checked on every
  fused row of the 19 SciFact queries whose text says "cancer", against a pandas RRF written from
  fixtures/scifact/README.md, and on a small log computed by hand.
- `bounds_clip: false` (ignored in components/normalizer/bounds.sql): the `bounds` normaliser is
  (s − lo)/(hi − lo), clipped to [0, 1] only when bounds_clip (docs/fusion-semantics.md step 3).
- The fixed64 rrf_sum (`/ scale` made `* scale` in _rrf_part.sql): only slow tests read it.
- The precision of the two exact sums (DECIMAL(38, 24) made (38, 25), and the decimal sum used
  for fixed64 too): at everyday weights they differ in the last bit of a few parents only; a
  weight of 1e-12 makes 10^-24 coarse, so each way's documented rounding shows.
- The `sum` normaliser's eps (made 1.0 in components/normalizer/sum.sql).
- The ranking's rounding (`round(fused_score, 12)` made 13 in fused.sql): no fused scores of the
  other tests differed in the 13th decimal only.
- The list statistics' order (`list_rank ASC` made DESC in stats' and softmax's windows): a
  double sum's last bits depend on its order, which no other test pinned.
- The delayed aligner's block order (fused score, NULL last, then block id): it orders a
  parent's contributions and picks its best provenance; the oracle compares contributions as a
  multiset there.
- The full run's normaliser survivors: options at values other than the defaults (softmax
  temperature, sigmoid center and scale: a division made a product, a sign flipped) and the
  degenerate cases at their edges (`sum` of equal scores, `l2` at eps, zscore and dbsf of one
  item and of equal items, dbsf of two, dbsf where 6·sd is exactly 1).
- A row without `granularity` (`item_id = parent_id` made `<>` in fused.sql): a log without the
  column fuses as the same log with it written by the documented rule, at block target and with
  delayed alignment (where granularity decides what is expanded).
"""

from __future__ import annotations

import math
import re
import statistics
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

from duckscore.core.connection import EngineSettings
from duckscore.fusion.pipeline import fuse
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run

from ..helpers import SCIFACT

LOG = SCIFACT / "retrieval_log.parquet"
CANCER = '[{match: "(?i)cancer", boost: {sparse: 2.0}}]'


def fused(log: pd.DataFrame, folder: Path, recipe: str, sets: list[str]) -> pd.DataFrame:
    out = folder / f"out{len(list(folder.iterdir()))}"
    fuse(log, out, recipe, sets)
    return pd.read_parquet(out / "fused.parquet")


def rrf_by_hand(log: pd.DataFrame, weight: pd.Series) -> pd.Series:
    """canonical_rrf as fixtures/scifact/README.md states it: a document's rank in a source is
    the order of its best item (max score, ties by the log's rank, then parent_id);
    RRF(d) = Σ w / (60 + doc_rank). `weight` is indexed by (query_id, source)."""
    best = log.groupby(["query_id", "source", "parent_id"], as_index=False).agg(
        score=("score", "max"), rank=("rank", "min")
    )
    best = best.sort_values(
        ["query_id", "source", "score", "rank", "parent_id"],
        ascending=[True, True, False, True, True],
    )
    best["doc_rank"] = best.groupby(["query_id", "source"]).cumcount() + 1
    keys = pd.MultiIndex.from_frame(best[["query_id", "source"]])
    best["part"] = weight.reindex(keys).to_numpy() / (60 + best["doc_rank"])
    return best.groupby(["query_id", "parent_id"])["part"].sum()


@pytest.fixture(scope="module")
def scifact() -> pd.DataFrame:
    return pd.read_parquet(LOG)


def test_rrf_by_hand_is_the_scifact_reference(scifact: pd.DataFrame) -> None:
    """The hand-written RRF below is the reference's (so it can judge the boosted run)."""
    ones = pd.Series(1.0, index=pd.MultiIndex.from_frame(scifact[["query_id", "source"]]))
    ones = ones[~ones.index.duplicated()]
    mine = rrf_by_hand(scifact, ones)
    reference = pd.read_parquet(SCIFACT / "reference_rrf_k60.parquet")
    theirs = reference.set_index(["query_id", "parent_id"])["rrf_score"]
    assert len(mine) == len(theirs) == 40282
    assert (mine.reindex(theirs.index) - theirs).abs().max() < 1e-15


def test_the_boost_reaches_every_matching_scifact_query(
    scifact: pd.DataFrame, tmp_path: Path
) -> None:
    sets = ["query_analyzer.enabled=true", f"query_analyzer.rules={CANCER}"]
    out = fused(scifact, tmp_path, "canonical_rrf", sets)
    texts = scifact.groupby("query_id")["query_text"].first()
    matching = {q for q, text in texts.items() if re.search("(?i)cancer", text)}
    assert len(matching) == 19
    pairs = scifact[["query_id", "source"]].drop_duplicates()
    weight = pd.Series(
        [2.0 if s == "sparse" and q in matching else 1.0 for q, s in pairs.itertuples(index=False)],
        index=pd.MultiIndex.from_frame(pairs),
    )
    expected = rrf_by_hand(scifact, weight)
    got = out.set_index(["query_id", "item_id"])["fused_score"]
    assert len(got) == len(expected)
    assert (got - expected.reindex(got.index)).abs().max() < 1e-15
    boosted = out[out["query_id"].isin(matching)]
    assert len(boosted) > 2000  # every row of the matching queries, not a head of the file
    for row in boosted.itertuples():
        for part in row.contributions:
            assert part["weight"] == (2.0 if part["source"] == "sparse" else 1.0)
    ranks = expected.round(12).reset_index(name="score")
    ranks = ranks.sort_values(["query_id", "score", "parent_id"], ascending=[True, False, True])
    ranks["rank"] = ranks.groupby("query_id").cumcount() + 1
    expected_rank = ranks.set_index(["query_id", "parent_id"])["rank"]
    assert (
        out.set_index(["query_id", "item_id"])["rank"] == expected_rank.reindex(got.index)
    ).all()


def test_several_rules_multiply_and_only_matching_queries_are_boosted(tmp_path: Path) -> None:
    log = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q1", "q2", "q2"],
            "query_text": ["Cancer risk"] * 3 + ["heart"] * 2,
            "source": ["a", "a", "b", "a", "b"],
            "item_id": ["x", "y", "y", "x", "x"],
            "parent_id": ["x", "y", "y", "x", "x"],
            "score": [2.0, 1.0, 0.9, 2.0, 0.9],
            "rank": [1, 2, 1, 1, 1],
        }
    )
    rules = '[{match: "(?i)cancer", boost: {a: 2.0}}, {match: "risk", boost: {a: 1.5, b: 0.5}}]'
    out = fused(
        log,
        tmp_path,
        "canonical_rrf",
        ["query_analyzer.enabled=true", f"query_analyzer.rules={rules}"],
    )
    scores = out.set_index(["query_id", "item_id"])["fused_score"].to_dict()
    # q1 matches both rules: a's weight 2.0 · 1.5 = 3.0, b's 0.5. x: a rank 1 → 3/61;
    # y: a rank 2, b rank 1 → 3/62 + 0.5/61 = 0.05658… > 3/61 = 0.04918…, so y ranks first.
    # q2 matches neither: x = 1/61 + 1/61.
    assert scores == pytest.approx(
        {("q1", "x"): 3 / 61, ("q1", "y"): 3 / 62 + 0.5 / 61, ("q2", "x"): 2 / 61}, abs=1e-15
    )
    assert out[out["query_id"] == "q1"].sort_values("rank")["item_id"].tolist() == ["y", "x"]
    weights = {
        (row.query_id, part["source"]) for row in out.itertuples() for part in row.contributions
        if part["weight"] != 1.0
    }  # fmt: skip
    assert weights == {("q1", "a"), ("q1", "b")}


def _bounds_log() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": ["q"] * 4,
            "source": ["a"] * 4,
            "item_id": ["high", "top", "mid", "low"],
            "parent_id": ["high", "top", "mid", "low"],
            "score": [15.0, 10.0, 4.0, -5.0],
            "rank": [1, 2, 3, 4],
        }
    )


@pytest.mark.parametrize(
    ("clip", "expected"),
    [
        # (s − 0) / (10 − 0): 1.5, 1.0, 0.4, −0.5; clipped to [0, 1]: 1.0, 1.0, 0.4, 0.0
        (True, {"high": 1.0, "top": 1.0, "mid": 0.4, "low": 0.0}),
        (False, {"high": 1.5, "top": 1.0, "mid": 0.4, "low": -0.5}),
    ],
)
def test_bounds_clip_false_leaves_values_outside_zero_one(
    clip: bool, expected: dict[str, float], tmp_path: Path
) -> None:
    sets = [
        "source_defaults.normalize=bounds",
        "normalizer_params.bounds=[0, 10]",
        f"normalizer_params.bounds_clip={str(clip).lower()}",
        "fusion.method=weighted_sum",
    ]
    out = fused(_bounds_log(), tmp_path, "canonical_rrf", sets)
    norm = {row.item_id: row.contributions[0]["norm_score"] for row in out.itertuples()}
    assert norm == pytest.approx(expected, abs=1e-15)
    # one source of weight 1: the fused score is the normalised score
    assert out.set_index("item_id")["fused_score"].to_dict() == pytest.approx(expected, abs=1e-15)


def test_bounds_clip_false_with_bounds_that_do_not_start_at_zero(tmp_path: Path) -> None:
    sets = [
        "source_defaults.normalize=bounds",
        "normalizer_params.bounds=[-2, 3]",
        "normalizer_params.bounds_clip=false",
        "fusion.method=weighted_sum",
    ]
    out = fused(_bounds_log(), tmp_path, "canonical_rrf", sets)
    # (s + 2) / 5: 17/5, 12/5, 6/5, −3/5
    expected = {"high": 3.4, "top": 2.4, "mid": 1.2, "low": -0.6}
    assert out.set_index("item_id")["fused_score"].to_dict() == pytest.approx(expected, abs=1e-12)


def _block_log() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": ["q"] * 5,
            "source": ["a", "a", "a", "b", "b"],
            "granularity": ["block"] * 5,
            "item_id": ["P:1", "Q:1", "P:2", "P:1", "Q:1"],
            "parent_id": ["P", "Q", "P", "P", "Q"],
            "score": [0.9, 0.8, 0.7, 0.6, 0.5],
            "rank": [1, 2, 3, 1, 2],
            "total_chunks": [2, 1, 2, 2, 1],
        }
    )


def test_list_sums_are_taken_in_list_order(tmp_path: Path) -> None:
    """docs/fusion-semantics.md step 3: `sum` is (s − min)/max(Σs − n·min, eps) with Σ a double
    sum in list order. Over 0.3, 0.2, 0.1 that order gives 0.6 and the reverse 0.6000000000000001,
    so the normalised values show which order was taken, to the last bit."""
    scores = [0.3, 0.2, 0.1]
    assert (scores[0] + scores[1]) + scores[2] != (scores[2] + scores[1]) + scores[0]
    sets = ["source_defaults.normalize=sum", "fusion.method=weighted_sum"]
    out = fused(_one_list(scores), tmp_path, "canonical_rrf", sets)
    norm = {row.item_id: row.contributions[0]["norm_score"] for row in out.itertuples()}
    total = (scores[0] + scores[1]) + scores[2]
    low = min(scores)
    expected = {f"d{i}": (s - low) / max(total - 3 * low, 1e-9) for i, s in enumerate(scores)}
    assert norm == expected


def test_softmax_sums_its_terms_in_list_order(tmp_path: Path) -> None:
    """softmax: exp((s − max)/T) / Σ exp((s − max)/T), Σ in list order (step 3). The top term is
    1 and the others are below 2^-53 each: in list order each is lost against 1, so the top
    item's value is exactly 1.0; summed the other way round they add up to 2^-52 first."""
    scores = [0.0, -36.9, -36.95]
    terms = [math.exp(s) for s in scores]
    assert (terms[0] + terms[1]) + terms[2] == 1.0 < (terms[2] + terms[1]) + terms[0]
    sets = ["source_defaults.normalize=softmax", "fusion.method=weighted_sum"]
    out = fused(_one_list(scores), tmp_path, "canonical_rrf", sets).set_index("item_id")
    assert out.loc["d0", "contributions"][0]["norm_score"] == 1.0


def _delayed_contributions(out: pd.DataFrame, query_id: str) -> list[tuple[str, str]]:
    (row,) = out[out["query_id"] == query_id].itertuples()
    return [(part["source"], part["original_id"]) for part in row.contributions]


def test_delayed_contributions_list_the_best_fused_block_first(tmp_path: Path) -> None:
    """After_fusion (docs/fuse.md, the contributions row): a parent's entries are its blocks',
    the best fused block first, ties by block id; best_provenance is the best block's.
    q1: D:1 = 1/61 + 1/62 (s1 rank 1, s2 rank 2) beats D:2 = 1/61 (s2 rank 1). q2: E:1 (s1 rank
    1) and E:2 (s2 rank 1) tie at 1/61, so E:1 comes first."""
    log = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q1", "q2", "q2"],
            "source": ["s1", "s2", "s2", "s1", "s2"],
            "item_id": ["D:1", "D:2", "D:1", "E:1", "E:2"],
            "parent_id": ["D", "D", "D", "E", "E"],
            "score": [1.0, 0.9, 0.8, 1.0, 1.0],
            "rank": [1, 1, 2, 1, 1],
        }
    )
    out = fused(log, tmp_path, "canonical_rrf", ["aligner.order=after_fusion"])
    assert _delayed_contributions(out, "q1") == [("s1", "D:1"), ("s2", "D:1"), ("s2", "D:2")]
    assert _delayed_contributions(out, "q2") == [("s1", "E:1"), ("s2", "E:2")]
    provenance = out.set_index("query_id")["best_provenance"]
    assert (provenance["q2"]["source"], provenance["q2"]["original_id"]) == ("s1", "E:1")


def test_delayed_blocks_without_a_fused_score_come_last(tmp_path: Path) -> None:
    """geometric_mean leaves out values ≤ 0, so block D:2 (score −1, its only list) has a NULL
    fused score and ranks after D:1 among D's blocks (NULL last, step 5)."""
    log = pd.DataFrame(
        {
            "query_id": ["q", "q"],
            "source": ["s", "s"],
            "item_id": ["D:1", "D:2"],
            "parent_id": ["D", "D"],
            "score": [2.0, -1.0],
        }
    )
    sets = [
        "aligner.order=after_fusion",
        "fusion.method=geometric_mean",
        "source_defaults.normalize=none",
    ]
    out = fused(log, tmp_path, "canonical_rrf", sets)
    assert _delayed_contributions(out, "q") == [("s", "D:1"), ("s", "D:2")]
    assert out["fused_score"].tolist() == pytest.approx([2.0], rel=1e-15)


def test_ranks_order_fused_scores_rounded_to_12_decimals(tmp_path: Path) -> None:
    """docs/fusion-semantics.md step 5: fused scores are ranked rounded to 12 decimals, ties by
    id. 0.5 and 0.5 + 3e-13 round alike, so `d0` ranks before `d1` though d1's score is larger;
    `d2`, 2e-12 above, ranks first. The scores are stored unrounded."""
    log = _one_list([0.5, 0.5 + 3e-13, 0.5 + 2e-12])
    assert round(log["score"][0], 12) == round(log["score"][1], 12) < round(log["score"][2], 12)
    sets = ["source_defaults.normalize=none", "fusion.method=weighted_sum"]
    out = fused(log, tmp_path, "canonical_rrf", sets).set_index("item_id")
    assert out["rank"].to_dict() == {"d2": 1, "d0": 2, "d1": 3}
    assert out["fused_score"].to_dict() == log.set_index("item_id")["score"].to_dict()


@pytest.mark.parametrize("rrf_sum", ["decimal", "fixed64"])
def test_rrf_sum_is_the_sum_over_the_parents_hits(rrf_sum: str, tmp_path: Path) -> None:
    """parent_features' rrf_sum = Σ over a parent's hits of weight / (k + rank − 1 + rank_base)
    (sql/fuse/parent_features.sql), both ways of summing (sql/fuse/_rrf_part.sql); the fast
    tests checked the fixed64 sum nowhere (tests/run/test_opt_in_speedups.py is slow)."""
    job = Job(
        recipe="hybrid_v1",
        recipe_overrides=(f"parent_features.rrf_sum={rrf_sum}",),
        allow_recipe_mismatch=True,
    )
    run(_block_log(), tmp_path / "out", job)
    features = pd.read_parquet(tmp_path / "out" / "parent_features.parquet")
    got = features.set_index("parent_id")["rrf_sum"].to_dict()
    # P: a ranks 1 and 3, b rank 1 → 1/61 + 1/63 + 1/61; Q: a rank 2, b rank 2 → 2/62
    expected = {"P": 1 / 61 + 1 / 63 + 1 / 61, "Q": 2 / 62}
    assert got == pytest.approx(expected, rel=1e-15, abs=0)


@pytest.mark.parametrize("rrf_sum", ["decimal", "fixed64"])
def test_rrf_sum_rounds_as_documented_where_the_ways_differ(rrf_sum: str, tmp_path: Path) -> None:
    """docs/fuse.md (faster sums): `decimal` rounds each term to 10^-24 and sums exactly;
    `fixed64` counts each term in units of 2^-s (s = 62 - ceil(log2(largest term)), here 107:
    the doubles' terms are counted without rounding) and gives the correctly rounded sum. With
    a weight of 1e-12 the terms are about 1.6e-14, so the two differ from the 12th digit on."""
    log = pd.DataFrame(
        {
            "query_id": ["q"] * 5,
            "source": ["a"] * 5,
            "granularity": ["block"] * 5,
            "item_id": [f"P:{rank}" for rank in range(1, 6)],
            "parent_id": ["P"] * 5,
            "score": [5.0, 4.0, 3.0, 2.0, 1.0],
            "rank": [1, 2, 3, 4, 5],
        }
    )
    job = Job(
        recipe="hybrid_v1",
        recipe_overrides=(f"parent_features.rrf_sum={rrf_sum}", "source_defaults.weight=1e-12"),
        allow_recipe_mismatch=True,
    )
    run(log, tmp_path / "out", job)
    (got,) = pd.read_parquet(tmp_path / "out" / "parent_features.parquet")["rrf_sum"]
    terms = [1e-12 / (60 + rank) for rank in range(1, 6)]
    exact = float(sum(Fraction(term) for term in terms))
    to_24_places = float(sum(Decimal(term).quantize(Decimal("1e-24")) for term in terms))
    to_25_places = float(sum(Decimal(term).quantize(Decimal("1e-25")) for term in terms))
    assert min(abs(to_24_places - exact), abs(to_24_places - to_25_places)) > 1e-12 * exact
    assert got == pytest.approx(to_24_places if rrf_sum == "decimal" else exact, rel=1e-15, abs=0)


@pytest.mark.parametrize(
    ("eps", "expected"),
    [
        # Σ(s − min) = 0.2 + 0.1 + 0 = 0.3 > eps: (s − min) / 0.3
        (1e-9, {"x": 0.2 / 0.3, "y": 0.1 / 0.3, "z": 0.0}),
        # eps 0.5 floors the denominator: (s − min) / 0.5
        (0.5, {"x": 0.4, "y": 0.2, "z": 0.0}),
    ],
)
def test_the_sum_normaliser_floors_its_denominator_at_eps(
    eps: float, expected: dict[str, float], tmp_path: Path
) -> None:
    """`sum`: (s − min) / max(Σ(s − min), eps) (docs/fusion-semantics.md step 3); the random
    logs' sums were all above 1, so eps made the constant 1.0 survived."""
    log = pd.DataFrame(
        {
            "query_id": ["q"] * 3,
            "source": ["a"] * 3,
            "item_id": ["x", "y", "z"],
            "parent_id": ["x", "y", "z"],
            "score": [0.3, 0.2, 0.1],
            "rank": [1, 2, 3],
        }
    )
    sets = [
        "source_defaults.normalize=sum",
        f"normalizer_params.eps={eps}",
        "fusion.method=weighted_sum",
    ]
    out = fused(log, tmp_path, "canonical_rrf", sets)
    assert out.set_index("item_id")["fused_score"].to_dict() == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("types", [63, 64, 65])
def test_coverage_counts_every_block_type_up_to_the_masks_last_bit(
    types: int, tmp_path: Path
) -> None:
    """coverage = the number of distinct block types among a parent's hits. Up to 64 types it is
    the bit count of a UBIGINT mask (parent_features.sql: `1 << index`); `1` made `2` shifted the
    64th type out of the mask, and no test had 64 types."""
    log = pd.DataFrame(
        {
            "query_id": ["q"] * types,
            "source": ["a"] * types,
            "granularity": ["block"] * types,
            "item_id": [f"P:{i}" for i in range(types)],
            "parent_id": ["P"] * types,
            "block_type": [f"t{i:02d}" for i in range(types)],
            "score": [1.0 - i / 100 for i in range(types)],
            "rank": list(range(1, types + 1)),
            "total_chunks": [types] * types,
        }
    )
    fuse(log, tmp_path / "out", "canonical_rrf")
    features = pd.read_parquet(tmp_path / "out" / "parent_features.parquet")
    assert features.set_index("parent_id")["coverage"].to_dict() == {"P": types}


def _one_list(scores: list[float]) -> pd.DataFrame:
    n = len(scores)
    items = [f"d{i}" for i in range(n)]
    return pd.DataFrame({"query_id": ["q"] * n, "source": ["a"] * n, "item_id": items,
                         "parent_id": items, "score": scores, "rank": range(1, n + 1)})  # fmt: skip


def _softmax(scores: list[float], temperature: float) -> list[float]:
    top = max(scores)
    terms = [math.exp((s - top) / temperature) for s in scores]
    return [t / sum(terms) for t in terms]


def _sigmoid(scores: list[float], center: float, scale: float) -> list[float]:
    return [1.0 / (1.0 + math.exp(-(s - center) / scale)) for s in scores]


def _dbsf(scores: list[float], ddof: int = 1) -> list[float]:
    """(s − (mean − 3·sd)) / (6·sd), sd the sample (dbsf_ddof 1) or population (0) one."""
    mean = statistics.fmean(scores)
    sd = statistics.stdev(scores) if ddof else statistics.pstdev(scores)
    return [(s - (mean - 3 * sd)) / (6 * sd) for s in scores]


# docs/fusion-semantics.md step 3, by hand, with option values that are not the defaults (the
# default temperature 1, center 0 and scale 1 hide a division made a product or a sign flipped);
# the degenerate cases take degenerate_value 0.25: all-equal scores for `sum`, an L2 norm equal
# to eps for `l2` (eps 1.0: 0.6² + 0.8² is 1.0 exactly, and "below eps" is strict)
NORMALISED = [
    ("softmax", [0.9, 0.5, 0.2], ["normalizer_params.softmax_temperature=2.0"],
     _softmax([0.9, 0.5, 0.2], 2.0)),
    ("sigmoid", [0.9, 0.5, 0.2],
     ["normalizer_params.sigmoid_center=0.25", "normalizer_params.sigmoid_scale=0.5"],
     _sigmoid([0.9, 0.5, 0.2], 0.25, 0.5)),
    ("sum", [0.3, 0.3, 0.3], ["normalizer_params.degenerate_value=0.25"], [0.25, 0.25, 0.25]),
    ("l2", [0.6, 0.8], ["normalizer_params.eps=1.0", "normalizer_params.degenerate_value=0.25"],
     [0.6, 0.8]),
    # zscore's sd is NULL for one item with ddof 1, 0 for equal items; dbsf's the same with ddof 1
    ("zscore", [0.7], ["normalizer_params.zscore_ddof=1", "normalizer_params.degenerate_value=0.25"],
     [0.25]),
    ("zscore", [0.3, 0.3], ["normalizer_params.degenerate_value=0.25"], [0.25, 0.25]),
    ("dbsf", [0.7], ["normalizer_params.dbsf_degenerate_value=0.3"], [0.3]),
    ("dbsf", [0.3, 0.3], ["normalizer_params.dbsf_degenerate_value=0.3"], [0.3, 0.3]),
    ("dbsf", [0.9, 0.5], [], _dbsf([0.9, 0.5])),
    # 6·sd is 1.0 exactly here (the denominator's NULLIF(…, 0) must not catch it)
    ("dbsf", [1 / 3, 0.0], ["normalizer_params.dbsf_ddof=0"], _dbsf([1 / 3, 0.0], ddof=0)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("normaliser", "scores", "options", "expected"),
    NORMALISED,
    ids=[f"{n[0]}-{len(n[1])}-{n[1][0]}" for n in NORMALISED],
)
def test_normaliser_options_by_hand(
    normaliser: str, scores: list[float], options: list[str], expected: list[float], tmp_path: Path
) -> None:
    sets = [f"source_defaults.normalize={normaliser}", "fusion.method=weighted_sum", *options]
    out = fused(_one_list(scores), tmp_path, "canonical_rrf", sets).set_index("item_id")
    got = [out.at[f"d{i}", "fused_score"] for i in range(len(scores))]
    assert got == pytest.approx(expected, rel=1e-12, abs=0.0)


@pytest.mark.parametrize(
    "sets", [["target_granularity=block"], ["aligner.order=after_fusion"]], ids=["block", "delayed"]
)
def test_a_log_without_granularity_reads_a_row_as_a_doc_when_item_is_parent(
    sets: list[str], tmp_path: Path
) -> None:
    # docs/fusion-semantics.md: a row without `granularity` is a doc when item_id = parent_id,
    # else a block; the bundled log's column says the same, so dropping it changes nothing
    log = pd.read_parquet(SCIFACT / "retrieval_log.parquet").query("query_id in ['1', '3']")
    is_doc = log["item_id"] == log["parent_id"]
    assert (log["granularity"] == is_doc.map({True: "doc", False: "block"})).all()
    assert is_doc.any() and not is_doc.all()
    given = fused(log, tmp_path, "canonical_rrf", sets)
    derived = fused(log.drop(columns="granularity"), tmp_path, "canonical_rrf", sets)
    pd.testing.assert_frame_equal(derived, given)


@pytest.mark.parametrize("method", ["arithmetic_mean", "combmin"])
def test_skip_leaves_a_missing_list_out_beside_a_borda_list(method: str, tmp_path: Path) -> None:
    """A borda source builds the candidate grid; with `missing: skip` the other lists still
    leave out a document they lack (docs/fusion-semantics.md): y, in a's list only, fuses as its
    one contribution, not as its mean (or min) with a 0 from b."""
    log = pd.DataFrame({"query_id": ["q"] * 3, "source": ["a", "a", "b"], "item_id": ["x", "y", "x"],
                        "parent_id": ["x", "y", "x"], "score": [2.0, 1.0, 0.4], "rank": [1, 2, 1]})  # fmt: skip
    sets = ["sources.a.normalize=borda", f"fusion.method={method}", "fusion.missing=skip"]
    out = fused(log, tmp_path, "hybrid_v1", sets).set_index("item_id")
    (part,) = out.loc["y", "contributions"]
    assert part["source"] == "a" and part["norm_score"] > 0
    assert out.loc["y", "fused_score"] == part["norm_score"]


@pytest.mark.parametrize("memory_limit", [None, "2GB"], ids=["mask", "portable"])
def test_one_chunk_parents_and_a_source_spanning_exactly_one(
    memory_limit: str | None, tmp_path: Path
) -> None:
    """docs/fuse.md's parent features at the edges the other tests never reached: a parent of
    one chunk whose one chunk was hit covers it all (1/1), one of one chunk hit only as a
    document (source b's) covers none (0/1); a source whose scores span exactly 1 (2.0 to 1.0)
    gives its best parent a max_score of 1 and its worst 0 (minmax), a source of one hit 1.
    Both ways of counting coverage: the block-type mask, and the portable grouping used under a
    memory limit."""
    log = pd.DataFrame({"query_id": ["q"] * 3, "source": ["a", "a", "b"],
                        "item_id": ["C:1", "E:1", "D"], "parent_id": ["C", "E", "D"],
                        "granularity": ["block", "block", "doc"], "score": [2.0, 1.0, 1.0],
                        "rank": [1, 2, 1], "total_chunks": [1, 1, 1]})  # fmt: skip
    fuse(log, tmp_path / "out", "canonical_rrf", None, EngineSettings(memory_limit=memory_limit))
    features = pd.read_parquet(tmp_path / "out" / "parent_features.parquet").set_index("parent_id")
    assert features["coverage_ratio"].to_dict() == {"C": 1.0, "D": 0.0, "E": 1.0}
    assert features["max_score"].to_dict() == {"C": 1.0, "D": 1.0, "E": 0.0}
    raw = tmp_path / "raw"
    fuse(log, raw, "canonical_rrf", ["parent_features.max_score=raw"])
    features = pd.read_parquet(raw / "parent_features.parquet").set_index("parent_id")
    assert features["max_score"].to_dict() == {"C": 2.0, "D": 1.0, "E": 1.0}  # as given


def test_a_parents_contribution_names_its_best_hit(tmp_path: Path) -> None:
    """docs/fuse.md: a source's contribution to a parent, and its best provenance, name the
    best of its hits — the highest score, then the lowest rank: P:c2 (0.9, rank 1) over P:c1
    (0.9, rank 2) and P:c3 (0.5)."""
    log = pd.DataFrame({"query_id": ["q"] * 3, "source": ["a"] * 3,
                        "item_id": ["P:c1", "P:c2", "P:c3"], "parent_id": ["P"] * 3,
                        "score": [0.9, 0.9, 0.5], "rank": [2, 1, 3],
                        "snippet": ["one", "two", "three"]})  # fmt: skip
    (row,) = fused(log, tmp_path, "canonical_rrf", []).itertuples()
    assert [(c["source"], c["original_id"]) for c in row.contributions] == [("a", "P:c2")]
    best = row.best_provenance
    assert (best["original_id"], best["original_score"], best["snippet"]) == ("P:c2", 0.9, "two")


@pytest.mark.parametrize("order", ["before_fusion", "after_fusion"])
def test_without_explanations_only_the_explanations_are_null(order: str, tmp_path: Path) -> None:
    """`explain=False` (--no-explain): contributions and best_provenance are NULL, the scores
    and ranks those of an explained run (docs/fuse.md)."""
    log = pd.read_parquet(LOG).head(3000)
    sets = [f"aligner.order={order}"]
    fuse(log, tmp_path / "bare", "canonical_rrf", sets, explain=False)
    fuse(log, tmp_path / "explained", "canonical_rrf", sets)
    bare, explained = (pd.read_parquet(tmp_path / name / "fused.parquet")
                       for name in ("bare", "explained"))  # fmt: skip
    assert bare["contributions"].isna().all() and bare["best_provenance"].isna().all()
    columns = ["query_id", "item_id", "fused_score", "rank", "n_sources"]
    pd.testing.assert_frame_equal(bare[columns], explained[columns])


def test_a_delayed_documents_expanded_blocks_name_the_document(tmp_path: Path) -> None:
    """After_fusion: a document-level hit (summary: D) is expanded to the parent's blocks hit by
    other sources (D:1), and its contribution names the row the log gave, D, not the block."""
    log = pd.DataFrame({"query_id": ["q", "q"], "source": ["summary", "dense"],
                        "item_id": ["D", "D:1"], "parent_id": ["D", "D"],
                        "granularity": ["doc", "block"], "score": [0.7, 0.9], "rank": [1, 1]})  # fmt: skip
    out = fused(log, tmp_path, "canonical_rrf", ["aligner.order=after_fusion"])
    assert sorted(_delayed_contributions(out, "q")) == [("dense", "D:1"), ("summary", "D")]
