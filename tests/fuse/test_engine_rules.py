"""The engines' own rules as recipe options and the presets that use them (issue 48 §6,
docs/fuse.md "Reproducing the engines"): each option is off when left out (the SQL of every
existing recipe unchanged), changes what it says when set, and is refused in one line naming it
when its value is bad. The peers' numbers are in peer_vectors.yaml (test_oracle.py); these are
the edges those cases leave, each worked out by hand in its comment."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli
from duckscore.core.policy import load_policy
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import FUSE_RECIPE, load_recipe, plan
from duckscore.fusion.stages import STAGES, render_fused

PRESETS = (
    "elasticsearch_linear",
    "elasticsearch_rrf",
    "opensearch_hybrid",
    "qdrant_dbsf",
    "qdrant_rrf",
    "weaviate_relative",
)
MINMAX = ["source_defaults.normalize=minmax"]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def log(*lists: tuple[str, str, dict[str, float]]) -> pd.DataFrame:
    """(query, source, {item: score}) lists as a document-level log (ranks derived)."""
    return pd.DataFrame(
        [
            {"query_id": q, "source": s, "item_id": i, "parent_id": i, "score": float(v)}
            for q, s, items in lists
            for i, v in items.items()
        ]
    )


def fused(frame: pd.DataFrame, folder: Path, recipe: str, sets: list[str]) -> pd.DataFrame:
    out = folder / f"out{len(list(folder.glob('out*')))}"
    fuse(frame, out, recipe, sets)
    return pd.read_parquet(out / "fused.parquet")


def scores(frame: pd.DataFrame, folder: Path, recipe: str, sets: list[str]) -> dict:
    """{(query, item): fused_score} (NaN as None)."""
    table = fused(frame, folder, recipe, sets)
    return {
        (r.query_id, r.item_id): None if r.fused_score != r.fused_score else r.fused_score
        for r in table.itertuples()
    }


# -- off when left out ------------------------------------------------------------------------

OFF_VALUES = [
    "normalizer_params.zscore_at_mean=formula",
    "normalizer_params.l2_degenerate_raw=false",
    "normalizer_params.borda_points=false",
    "fusion.rrf_weight=scales_term",
    "fusion.count_empty_sources=false",
    "fusion.top_n=null",
    "fusion.min_score=null",
]
SHAPES = [
    [],
    ["source_defaults.normalize=zscore", "fusion.method=arithmetic_mean"],
    ["source_defaults.normalize=l2", "fusion.method=weighted_sum"],
    ["source_defaults.normalize=borda", "fusion.method=combsum", "fusion.missing=zero"],
    ["source_defaults.normalize=minmax", "fusion.method=arithmetic_mean"],
    ["aligner.order=after_fusion"],
]


@pytest.mark.parametrize("recipe", ["hybrid_v1", "canonical_rrf"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: " ".join(s) or "as packaged")
def test_an_option_at_its_off_value_renders_the_sql_left_out_renders(
    recipe: str, shape: list[str]
) -> None:
    """The option's `{% if %}` renders nothing when it is off, so a recipe without it runs the
    SQL it ran before the option existed."""
    plain = plan(load_recipe(recipe, shape), ["a", "b"], True)
    off = plan(load_recipe(recipe, shape + OFF_VALUES), ["a", "b"], True)
    for final in STAGES:
        assert render_fused(off, final).text == render_fused(plain, final).text, final


def test_the_packaged_recipes_keep_their_parameters() -> None:
    """Their versions are their outputs' names (and overall_v3's metadata.recipe): new keys
    left out of a file are left out of its parameters."""
    for name, digest in (
        ("hybrid_v1", "499bc5da1d519795a4cc75245132407512b7340342f9e98393ffaaee693a089f"),
        ("canonical_rrf", "685ac9690a8d2a311d8c9816d05550d937c38ea8314de9a4c45c01bf5d554a9e"),
    ):
        loaded = load_policy(FUSE_RECIPE, name)
        assert (loaded.version, loaded.parameters_sha256) == (name, digest)


# -- the presets --------------------------------------------------------------------------------


def test_the_presets_are_listed_and_fuse_by_name(tmp_path: Path) -> None:
    listed = invoke("policy", "list", "fuse")
    assert listed.exit_code == 0 and set(PRESETS) <= set(listed.stdout.split())
    path = tmp_path / "log.csv"
    log(("q", "bm25", {"a": 2.0, "b": 1.0}), ("q", "dense", {"b": 0.9})).to_csv(path, index=False)
    done = invoke(
        "fuse", "--log", str(path), "--recipe", "qdrant_rrf", "--out", str(tmp_path / "o")
    )
    assert done.exit_code == 0, done.stderr
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["recipe_id"] == "qdrant_rrf"
    assert manifest["fusion"]["rrf_weight"] == "divides_rank"
    table = pd.read_parquet(tmp_path / "o" / "fused.parquet")
    # b: 1/(2 + 1) + 1/(1 + 1) = 0.833333; a: 1/(1 + 1) = 0.5 (k = 2, 0-based positions)
    assert dict(zip(table["item_id"], table["fused_score"])) == pytest.approx(
        {"b": 5 / 6, "a": 0.5}
    )


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_stands_alone(name: str) -> None:
    """Every key spelled: a preset reads no base, so no later change of hybrid_v1 moves it."""
    loaded = load_policy(FUSE_RECIPE, name)
    assert (loaded.version, loaded.bases) == (name, ())


# -- one line naming the key --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("sources.a.lower_bound={mode: apply, score: 0.3}", "sources.a.lower_bound needs normalize: minmax, not rank"),
        ("source_defaults.upper_bound={mode: cap, score: 1}", "source_defaults.upper_bound.mode: 'cap' is not one of apply, clip, ignore"),
        ("source_defaults.lower_bound={mode: apply}", "missing key source_defaults.lower_bound.score"),
        ("fusion.top_n=0", "fusion.top_n: 0 is outside [1, inf]"),
        ("fusion.min_score=high", "fusion.min_score: expected a number, got 'high'"),
        ("fusion.rrf_weight=stretch", "fusion.rrf_weight: 'stretch' is not one of scales_term, divides_rank"),
        ("fusion.count_empty_sources=yes", "fusion.count_empty_sources: expected true or false, got 'yes'"),
        ("normalizer_params.minmax_degenerate_below=0", "normalizer_params.minmax_degenerate_below: 0 is outside (0, inf]"),
        ("normalizer_params.zscore_at_mean=max", "normalizer_params.zscore_at_mean: 'max' is not one of formula, raw_max"),
        ("normalizer_params.nonpositive_value=.nan", "normalizer_params.nonpositive_value: expected a finite number, got nan"),
    ],
)  # fmt: skip
def test_a_bad_engine_option_is_one_line_naming_the_key(
    override: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "log.csv"
    log(("q", "a", {"x": 1.0})).to_csv(path, index=False)
    done = invoke(
        "fuse", "--log", str(path), "--recipe", "hybrid_v1", "--set-recipe", override,
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.exit_code == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr, done.stderr


# -- the normalisers' edges ---------------------------------------------------------------------


def test_minmax_is_degenerate_below_the_spread_not_at_it(tmp_path: Path) -> None:
    """Elasticsearch: |max − min| < EPSILON. A spread of exactly the threshold is normalised."""
    frame = log(("at", "s", {"x": 1.0, "y": 1.5}), ("below", "s", {"x": 1.0, "y": 1.4}))
    sets = MINMAX + ["normalizer_params.minmax_degenerate_below=0.5", "normalizer_params.degenerate_value=0.7"]  # fmt: skip
    got = scores(frame, tmp_path, "hybrid_v1", sets + ["fusion.method=weighted_sum"])
    # at: (1.0 − 1.0)/0.5 = 0, (1.5 − 1.0)/0.5 = 1; below: spread 0.4 < 0.5, both 0.7
    assert got == pytest.approx(
        {("at", "x"): 0.0, ("at", "y"): 1.0, ("below", "x"): 0.7, ("below", "y"): 0.7}
    )


def test_bounds_whose_effective_range_is_empty_give_the_degenerate_value(tmp_path: Path) -> None:
    """Both bounds clip at 0.5 in [0, 0.5, 1]: 0 is clipped low (0), 1 high (1.0), and 0.5 has
    min_eff = max_eff = 0.5, OpenSearch's SINGLE_RESULT_SCORE, here degenerate_value 0.7. A
    constant list, bounds or not, is degenerate first."""
    frame = log(("q", "s", {"lo": 0.0, "mid": 0.5, "hi": 1.0}), ("c", "s", {"u": 2.0, "v": 2.0}))
    sets = MINMAX + [
        "normalizer_params.degenerate_value=0.7",
        "source_defaults.lower_bound={mode: clip, score: 0.5}",
        "source_defaults.upper_bound={mode: clip, score: 0.5}",
        "fusion.method=weighted_sum",
    ]
    got = scores(frame, tmp_path, "hybrid_v1", sets)
    assert got == pytest.approx(
        {("q", "lo"): 0.0, ("q", "mid"): 0.7, ("q", "hi"): 1.0, ("c", "u"): 0.7, ("c", "v"): 0.7}
    )


def test_a_constant_list_is_degenerate_under_the_quantile_normaliser(tmp_path: Path) -> None:
    """Three equal scores: P10 = P90 = the score, so each gets degenerate_value. DuckDB's
    quantile_cont interpolates two equal values an ulp away from them (ln 51 at P10), which
    without the [min, max] hold would lose the zero spread and clamp to 0."""
    value = math.log(51.0)
    frame = log(("c", "s", {"u": value, "v": value, "w": value}), ("q", "s", {"x": 0.0, "y": 1.0}))
    sets = [
        "source_defaults.normalize=quantile",
        "normalizer_params.degenerate_value=0.7",
        "fusion.method=weighted_sum",
    ]
    got = scores(frame, tmp_path, "hybrid_v1", sets)
    assert got == pytest.approx(
        {("c", "u"): 0.7, ("c", "v"): 0.7, ("c", "w"): 0.7, ("q", "x"): 0.0, ("q", "y"): 1.0}
    )


def test_a_degenerate_l2_list_keeps_its_raw_scores_only_when_asked(tmp_path: Path) -> None:
    """√Σs² = 0.3 < eps 0.5: degenerate_value 0.25, or (Elasticsearch) the raw 0.3."""
    frame = log(("q", "s", {"x": 0.3}))
    sets = [
        "source_defaults.normalize=l2",
        "normalizer_params.eps=0.5",
        "normalizer_params.degenerate_value=0.25",
        "fusion.method=weighted_sum",
    ]
    assert scores(frame, tmp_path, "hybrid_v1", sets) == {("q", "x"): 0.25}
    raw = sets + ["normalizer_params.l2_degenerate_raw=true"]
    assert scores(frame, tmp_path, "hybrid_v1", raw) == {("q", "x"): 0.3}


# -- sources without a hit for a query ----------------------------------------------------------

# q1 has a and b, q2 has a and c: each query has one source without a hit
EMPTY = log(
    ("q1", "a", {"x": 4.0, "y": 2.0}),
    ("q1", "b", {"x": 1.0}),
    ("q2", "a", {"x": 3.0}),
    ("q2", "c", {"y": 5.0, "x": 1.0}),
)
NONE = ["source_defaults.normalize=none"]


def test_an_empty_source_counts_in_arithmetic_mean_only_when_asked(tmp_path: Path) -> None:
    sets = NONE + ["fusion.method=arithmetic_mean", "fusion.missing=zero"]
    # without: a source without hits is no list of the query: q1 x = (4 + 1)/2, y = (2 + 0)/2
    assert scores(EMPTY, tmp_path, "hybrid_v1", sets) == pytest.approx(
        {("q1", "x"): 2.5, ("q1", "y"): 1.0, ("q2", "x"): 2.0, ("q2", "y"): 2.5}
    )
    # with: c (q1) and b (q2) add a weight and a 0: q1 x = 5/3, y = 2/3; q2 x = 4/3, y = 5/3
    counted = scores(EMPTY, tmp_path, "hybrid_v1", sets + ["fusion.count_empty_sources=true"])
    assert counted == pytest.approx(
        {("q1", "x"): 5 / 3, ("q1", "y"): 2 / 3, ("q2", "x"): 4 / 3, ("q2", "y"): 5 / 3}
    )


@pytest.mark.parametrize(
    ("method", "missing"),
    [("arithmetic_mean", "skip"), ("arithmetic_mean", "list_min"), ("geometric_mean", "zero"),
     ("harmonic_mean", "zero"), ("weighted_sum", "zero"), ("rrf", "zero")],
)  # fmt: skip
def test_an_empty_source_changes_nothing_where_a_missing_list_does_not_count(
    method: str, missing: str, tmp_path: Path
) -> None:
    """Under skip and list_min (an empty list has no minimum) nothing is added; geometric and
    harmonic means leave out a 0; a weighted sum adds 0; rrf reads ranks."""
    sets = NONE + [f"fusion.method={method}", f"fusion.missing={missing}"]
    plain = scores(EMPTY, tmp_path, "hybrid_v1", sets)
    assert scores(EMPTY, tmp_path, "hybrid_v1", sets + ["fusion.count_empty_sources=true"]) == plain


def test_an_empty_source_is_a_zero_in_combmin_under_zero(tmp_path: Path) -> None:
    sets = NONE + ["fusion.method=combmin", "fusion.missing=zero"]
    counted = scores(EMPTY, tmp_path, "hybrid_v1", sets + ["fusion.count_empty_sources=true"])
    assert set(counted.values()) == {0.0}


def test_an_empty_borda_source_ranks_every_candidate_unranked(tmp_path: Path) -> None:
    """ranx's borda of a run without a hit for the query: every candidate unranked, 0.5 −
    (0 − 1)/(2|C|) = 0.5 + 1/(2·2) = 0.75 in q1 and q2 (|C| = 2), and the list holds them."""
    sets = [
        "source_defaults.normalize=borda",
        "fusion.method=arithmetic_mean",
        "fusion.missing=zero",
        "fusion.count_empty_sources=true",
    ]
    table = fused(EMPTY, tmp_path, "hybrid_v1", sets)
    # q1: a ranks x, y (1, 0.5), b ranks x (1; y missing: 0.5 − 0/4 = 0.5), c empty (0.75)
    expected = {("q1", "x"): 2.75 / 3, ("q1", "y"): 1.75 / 3}
    got = {(r.query_id, r.item_id): r.fused_score for r in table.itertuples()}
    assert {k: got[k] for k in expected} == pytest.approx(expected)
    assert set(table["n_sources"]) == {3}


# -- Qdrant's weighted RRF ----------------------------------------------------------------------


def test_rank_dividing_weights_apply_to_rrf_only(tmp_path: Path) -> None:
    frame = log(("q", "a", {"x": 2.0, "y": 1.0}), ("q", "b", {"y": 3.0}))
    sets = ["sources.a.weight=2.0", "fusion.rrf_weight=divides_rank", "fusion.k=2", "fusion.rank_base=0"]  # fmt: skip
    # x: 1/(1/2 + 1) = 2/3; y: 1/(2/2 + 1) + 1/(1/1 + 1) = 1/2 + 1/2 = 1
    assert scores(frame, tmp_path, "hybrid_v1", sets) == pytest.approx(
        {("q", "x"): 2 / 3, ("q", "y"): 1.0}
    )
    isr = ["sources.a.weight=2.0", "fusion.method=isr"]
    assert scores(frame, tmp_path, "hybrid_v1", isr + ["fusion.rrf_weight=divides_rank"]) == (
        scores(frame, tmp_path, "hybrid_v1", isr)
    )


# -- the fused list's cut -----------------------------------------------------------------------


def test_the_cut_keeps_the_head_of_each_querys_ranking_and_its_ranks(tmp_path: Path) -> None:
    frame = log(
        ("q1", "a", {"x": 3.0, "y": 2.0, "z": 1.0}),
        ("q2", "a", {"u": 1.0, "v": 1.0, "w": 0.5}),
    )
    sets = NONE + ["fusion.method=weighted_sum"]
    table = fused(frame, tmp_path, "hybrid_v1", sets + ["fusion.top_n=2"])
    # q2's tie at 1.0 is ranked by id: u 1, v 2; w (rank 3) is cut
    assert list(zip(table["query_id"], table["item_id"], table["rank"])) == [
        ("q1", "x", 1), ("q1", "y", 2), ("q2", "u", 1), ("q2", "v", 2),
    ]  # fmt: skip
    table = fused(frame, tmp_path, "hybrid_v1", sets + ["fusion.min_score=2.0"])
    assert list(zip(table["item_id"], table["rank"])) == [("x", 1), ("y", 2)]  # 2.0 is kept


def test_min_score_cuts_an_item_without_a_score(tmp_path: Path) -> None:
    """A geometric mean over no positive value is NULL: it ranks last, and no score is at or
    above a minimum."""
    frame = log(("q", "a", {"x": 2.0, "y": -1.0}))
    sets = NONE + ["fusion.method=geometric_mean"]
    assert scores(frame, tmp_path, "hybrid_v1", sets) == {("q", "x"): 2.0, ("q", "y"): None}
    assert scores(frame, tmp_path, "hybrid_v1", sets + ["fusion.min_score=-1e9"]) == {
        ("q", "x"): 2.0
    }


def test_the_cut_applies_to_parents_after_delayed_alignment(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        [
            {"query_id": "q", "source": "a", "item_id": i, "parent_id": i.split(":")[0], "score": s}
            for i, s in (("p:0", 3.0), ("p:1", 2.5), ("r:0", 2.0), ("t:0", 1.0))
        ]
    )
    sets = NONE + ["fusion.method=weighted_sum", "aligner.order=after_fusion", "aligner.method=max"]
    table = fused(frame, tmp_path, "hybrid_v1", sets + ["fusion.top_n=2"])
    assert list(zip(table["item_id"], table["rank"])) == [("p", 1), ("r", 2)]


def test_the_cut_leaves_the_parent_features_alone(tmp_path: Path) -> None:
    frame = log(("q", "a", {"x": 3.0, "y": 2.0, "z": 1.0}), ("q", "b", {"z": 1.0}))
    features = []
    for sets in ([], ["fusion.top_n=1", "fusion.min_score=0.5"]):
        out = tmp_path / f"f{len(features)}"
        fuse(frame, out, "hybrid_v1", sets)
        features.append(pd.read_parquet(out / "parent_features.parquet"))
    pd.testing.assert_frame_equal(features[0], features[1])
