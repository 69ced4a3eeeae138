"""Issue 48 §5: the re-ranker stage (recipe key rerank; sql/fuse/reranked.sql), against a plain
Python re-ranking of the fused list written apart from the SQL."""

from __future__ import annotations

import json
import math
from itertools import groupby
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

import duckscore as ds
from duckscore.cli import cli
from duckscore.core.errors import DuckscoreError, InputError, PolicyError
from duckscore.core.policy import available_policies, load_policy
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import FUSE_RECIPE, load_recipe, plan
from duckscore.fusion.stages import FUSED_ITEMS, LOG, RERANKED_ITEMS, fuse_graph
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run

RECIPE = "canonical_rrf"
FUSED_COLUMNS = ["query_id", "item_id", "fused_score", "rank", "n_sources"]

# q1: six items over two sources (x1, x4 tie in fusion); q2: two items the re-ranker leaves
# unscored; q3: one item
LOG_ROWS = [
    ("q1", "a", "x1", 6.0), ("q1", "a", "x2", 5.0), ("q1", "a", "x3", 4.0),
    ("q1", "a", "x5", 3.0), ("q1", "b", "x4", 9.0), ("q1", "b", "x6", 8.0),
    ("q1", "b", "x3", 7.0), ("q2", "a", "y1", 2.0), ("q2", "a", "y2", 1.0),
    ("q3", "b", "z1", 1.0),
]  # fmt: skip
SNIPPETS = {
    "x1": "a red fox", "x2": "the quick fox jumps", "x3": "quick brown fox",
    "x4": "lazy dog", "x5": "fox jumps quick", "x6": "nothing here",
    "y1": "cats", "y2": "dogs", "z1": "quick",
}  # fmt: skip
QUERY_TEXTS = {"q1": "quick fox jumps", "q2": "birds", "q3": "quick"}
# ties (x2, x5 at 2.0), an item the re-ranker did not score (x6), scores of items beyond a
# small top_n, one of an item not fused (x9); nothing for q2
SCORES = {("q1", "x1"): 1.0, ("q1", "x2"): 2.0, ("q1", "x3"): -1.5, ("q1", "x4"): 0.5,
          ("q1", "x5"): 2.0, ("q1", "x9"): 99.0, ("q3", "z1"): 3.0}  # fmt: skip
MODES = [
    ("replace", None, 1),
    ("replace", None, 3),
    ("replace", None, 50),
    ("weight", 0.5, 3),
    ("weight", 0.0, 4),
    ("weight", 1.0, 50),
    ("weight", 0.3, 1),
    ("weight", 0.75, 6),
]


def hits() -> pd.DataFrame:
    rows = [
        {"query_id": q, "source": s, "item_id": i, "parent_id": i, "score": v,
         "snippet": SNIPPETS[i], "query_text": QUERY_TEXTS[q]}
        for q, s, i, v in LOG_ROWS
    ]  # fmt: skip
    return pd.DataFrame(rows)


def scores_table(scores: dict[tuple[str, str], float] = SCORES) -> pd.DataFrame:
    return pd.DataFrame(
        [{"query_id": q, "item_id": i, "rerank_score": v} for (q, i), v in scores.items()]
    )


def rerank_sets(mode: str, weight: float | None, top_n: int) -> list[str]:
    sets = [f"rerank.top_n={top_n}", f"rerank.mode={mode}"]
    return sets + ([f"rerank.weight={weight}"] if weight is not None else [])


def reference(
    fused: list[dict[str, Any]],
    scores: dict[tuple[str, str], float],
    mode: str,
    weight: float | None,
    top_n: int,
) -> dict[tuple[str, str], tuple[int, float | None, float | None]]:
    """(query, item) -> (rank, score, rerank_score), re-ranked as docs/fuse.md says."""
    expected = {}
    by_query = sorted(fused, key=lambda row: (row["query_id"], row["rank"]))
    for query, group in groupby(by_query, key=lambda row: row["query_id"]):
        rows = list(group)
        top, rest = rows[:top_n], rows[top_n:]
        given = {row["item_id"]: scores.get((query, row["item_id"])) for row in top}
        final: dict[str, float | None]
        if mode == "replace":
            final = dict(given)
        else:
            assert weight is not None
            fused_scores = [row["fused_score"] for row in top if not is_null(row["fused_score"])]
            f_lo, f_hi = (min(fused_scores), max(fused_scores)) if fused_scores else (0.0, 0.0)
            present = [v for v in given.values() if v is not None]
            r_lo, r_hi = (min(present), max(present)) if present else (0.0, 0.0)
            final = {}
            for row in top:
                f = row["fused_score"]
                f_norm = 0.0 if is_null(f) else 1.0 if f_hi == f_lo else (f - f_lo) / (f_hi - f_lo)
                r = given[row["item_id"]]
                r_norm = 0.0 if r is None else 1.0 if r_hi == r_lo else (r - r_lo) / (r_hi - r_lo)
                final[row["item_id"]] = (1.0 - weight) * f_norm + weight * r_norm
        ordered = sorted(
            top,
            key=lambda row: (
                final[row["item_id"]] is None,
                -round(final[row["item_id"]] or 0.0, 12),
                row["rank"],
                row["item_id"],
            ),
        )
        for position, row in enumerate(ordered, 1):
            item = row["item_id"]
            expected[(query, item)] = (position, final[item], given[item])
        for row in rest:
            expected[(query, row["item_id"])] = (row["rank"], None, None)
    return expected


def is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("plain") / "out"
    fuse(hits(), out, RECIPE)
    return pd.read_parquet(out / "fused.parquet")


def fused_with(tmp_path: Path, sets: list[str], scores: Any = None) -> tuple[pd.DataFrame, Any]:
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
    result = fuse(
        hits(), out, RECIPE, sets, rerank_scores=scores_table() if scores is None else scores
    )
    return pd.read_parquet(out / "fused.parquet"), result


def same(actual: float | None, expected: float | None) -> bool:
    if expected is None:
        return actual is None or (isinstance(actual, float) and math.isnan(actual))
    return actual is not None and abs(actual - expected) <= 1e-12


@pytest.mark.parametrize(("mode", "weight", "top_n"), MODES)
def test_the_stage_reranks_as_the_reference(
    tmp_path: Path, plain: pd.DataFrame, mode: str, weight: float | None, top_n: int
) -> None:
    reranked, result = fused_with(tmp_path, rerank_sets(mode, weight, top_n))
    expected = reference(plain.to_dict("records"), SCORES, mode, weight, top_n)
    assert len(reranked) == len(plain) == len(expected)
    assert list(reranked.columns) == [
        *FUSED_COLUMNS, "contributions", "best_provenance", "fused_rank", "rerank_score", "score",
    ]  # fmt: skip
    for row in reranked.to_dict("records"):
        rank, score, rerank_score = expected[(row["query_id"], row["item_id"])]
        assert row["rank"] == rank, row
        assert same(row["score"], score), row
        assert same(row["rerank_score"], rerank_score), row
    # the fused columns are the fused list's, and fused.parquet is sorted by the final rank
    merged = reranked.merge(plain, on=["query_id", "item_id"], suffixes=("", "_plain"))
    assert (merged["fused_rank"] == merged["rank_plain"]).all()
    assert (merged["fused_score"] == merged["fused_score_plain"]).all()
    assert (merged["n_sources"] == merged["n_sources_plain"]).all()
    assert list(zip(reranked["query_id"], reranked["rank"], strict=True)) == sorted(
        zip(reranked["query_id"], reranked["rank"], strict=True)
    )
    assert result.manifest["rerank"] == {"top_n": top_n, "mode": mode} | (
        {"weight": weight} if weight is not None else {}
    )
    assert result.manifest["inputs"]["rerank_scores"]["rows"] == len(SCORES)


# raw scores fused by weighted_sum (fused scores 1 apart) and geometric_mean (NULL fused scores,
# of items whose every score is ≤ 0)
RAW_ROWS = [
    ("q1", "a", "p1", 3.0), ("q1", "a", "p2", 2.0), ("q1", "a", "p3", -1.0),
    ("q1", "a", "p4", -2.0), ("q1", "b", "p2", 2.0), ("q1", "b", "p5", 0.5),
]  # fmt: skip
RAW_SCORES = {("q1", "p1"): 0.0, ("q1", "p3"): 1.0, ("q1", "p4"): 4.0, ("q1", "p5"): 2.0}


@pytest.mark.parametrize("method", ["weighted_sum", "geometric_mean"])
@pytest.mark.parametrize(("mode", "weight", "top_n"), [("weight", 0.5, 5), ("weight", 0.25, 2)])
def test_raw_and_null_fused_scores(
    tmp_path: Path, method: str, mode: str, weight: float, top_n: int
) -> None:
    log = pd.DataFrame(
        [{"query_id": q, "source": s, "item_id": i, "parent_id": i, "score": v}
         for q, s, i, v in RAW_ROWS]
    )  # fmt: skip
    sets = [f"fusion.method={method}", "source_defaults.normalize=none", "fusion.missing=skip"]
    fuse(log, tmp_path / "plain", RECIPE, sets)
    plain = pd.read_parquet(tmp_path / "plain" / "fused.parquet")
    if method == "geometric_mean":
        assert plain["fused_score"].isna().any()
    else:
        assert 1.0 in set(plain["fused_score"].max() - plain["fused_score"])
    fuse(log, tmp_path / "reranked", RECIPE, sets + rerank_sets(mode, weight, top_n),
         rerank_scores=scores_table(RAW_SCORES))  # fmt: skip
    reranked = pd.read_parquet(tmp_path / "reranked" / "fused.parquet")
    records = [
        {**row, "fused_score": None if is_null(row["fused_score"]) else row["fused_score"]}
        for row in plain.to_dict("records")
    ]
    expected = reference(records, RAW_SCORES, mode, weight, top_n)
    for row in reranked.to_dict("records"):
        rank, score, rerank_score = expected[(row["query_id"], row["item_id"])]
        assert row["rank"] == rank and same(row["score"], score), row
        assert same(row["rerank_score"], rerank_score), row


@pytest.mark.parametrize("second", [1.0000000000004, 1.000000000004])
def test_scores_tie_at_twelve_digits_as_fusion_ranks(tmp_path: Path, second: float) -> None:
    """round(score, 12), as fused.sql ranks: 1 and 1 + 4e-13 tie (the fused order stands), 1
    and 1 + 4e-12 do not."""
    log = pd.DataFrame(
        [{"query_id": "q", "source": "a", "item_id": i, "parent_id": i, "score": v}
         for i, v in (("m1", 2.0), ("m2", 1.0))]
    )  # fmt: skip
    scores = {("q", "m1"): 1.0, ("q", "m2"): second}
    fuse(log, tmp_path / "plain", RECIPE)
    plain = pd.read_parquet(tmp_path / "plain" / "fused.parquet")
    fuse(log, tmp_path / "out", RECIPE, rerank_sets("replace", None, 2),
         rerank_scores=scores_table(scores))  # fmt: skip
    reranked = pd.read_parquet(tmp_path / "out" / "fused.parquet")
    expected = reference(plain.to_dict("records"), scores, "replace", None, 2)
    assert {(r["item_id"], r["rank"]) for r in reranked.to_dict("records")} == {
        (item, found[0]) for (_, item), found in expected.items()
    }
    assert list(reranked["item_id"]) == (["m1", "m2"] if second < 1.000000000001 else ["m2", "m1"])


def test_the_reference_is_not_the_fused_order(plain: pd.DataFrame) -> None:
    """The cases above move items: the oracle is not the identity."""
    expected = reference(plain.to_dict("records"), SCORES, "replace", None, 50)
    assert any(rank != row["rank"] for row in plain.to_dict("records")
               for rank in [expected[(row["query_id"], row["item_id"])][0]])  # fmt: skip


def test_an_empty_score_table_keeps_the_fused_order(tmp_path: Path, plain: pd.DataFrame) -> None:
    empty = pd.DataFrame(
        {"query_id": pd.Series([], dtype=str), "item_id": pd.Series([], dtype=str),
         "rerank_score": pd.Series([], dtype=float)}
    )  # fmt: skip
    for sets in (rerank_sets("weight", 0.5, 3), rerank_sets("replace", None, 50)):
        reranked, _ = fused_with(tmp_path, sets, empty)
        assert reranked["rerank_score"].isna().all()
        pd.testing.assert_frame_equal(reranked[FUSED_COLUMNS], plain[FUSED_COLUMNS])


def test_a_rerank_block_needs_scores_and_scores_a_block(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="give the re-ranker's scores with --rerank-scores"):
        fuse(hits(), tmp_path / "a", RECIPE, rerank_sets("replace", None, 3))
    with pytest.raises(InputError, match="--rerank-scores: recipe canonical_rrf has no rerank"):
        fuse(hits(), tmp_path / "b", RECIPE, rerank_scores=scores_table())


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["rerank.top_n=0", "rerank.mode=replace"], "rerank.top_n: 0 is outside"),
        (["rerank.top_n=2.5", "rerank.mode=replace"], "rerank.top_n"),
        (["rerank.top_n=3", "rerank.mode=sum"], "rerank.mode"),
        (["rerank.top_n=3", "rerank.mode=weight"], "rerank.weight .in .0, 1.. is needed"),
        (rerank_sets("weight", 1.5, 3), "rerank.weight"),
        (rerank_sets("replace", None, 3) + ["rerank.weight=0.5"], "read only with rerank.mode"),
    ],
)
def test_rerank_keys_are_checked(sets: list[str], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        load_policy(FUSE_RECIPE, RECIPE, sets)


def test_repeated_and_non_finite_scores_are_refused_naming_the_row(tmp_path: Path) -> None:
    repeated = pd.concat([scores_table(), scores_table().head(1)])
    with pytest.raises(InputError, match=r"duplicate \(query_id, item_id\).*query_id='q1'"):
        fused_with(tmp_path, rerank_sets("replace", None, 3), repeated)
    for bad in (math.nan, math.inf):
        broken = scores_table().assign(rerank_score=[1.0, bad, 0, 0, 0, 0, 0])
        with pytest.raises(InputError, match=r"item_id='x2'.*rerank_score"):
            fused_with(tmp_path, rerank_sets("replace", None, 3), broken)


def test_a_recipe_without_rerank_renders_nothing_new() -> None:
    """Every packaged recipe: no rerank key (its version hash is unchanged), fused_items
    streamed into fused.parquet as before, no input but the log."""
    for name in available_policies(FUSE_RECIPE):
        recipe = load_recipe(name)
        assert "rerank" not in recipe.policy.parameters
        graph = fuse_graph(plan(recipe, ["dense", "sparse"], has_rank=False))
        assert RERANKED_ITEMS not in graph and graph.inputs == (LOG,)
        assert graph[FUSED_ITEMS].keep == "stream"
        assert [p.file for p in graph[FUSED_ITEMS].publications] == ["fused.parquet"]


def test_cli_fuse_and_run_read_rerank_scores(tmp_path: Path, plain: pd.DataFrame) -> None:
    hits().to_parquet(tmp_path / "log.parquet")
    scores_table().to_csv(tmp_path / "scores.csv", index=False)
    sets = [arg for s in rerank_sets("weight", 0.5, 3) for arg in ("--set-recipe", s)]
    common = ["--log", str(tmp_path / "log.parquet"), "--recipe", RECIPE, *sets,
              "--rerank-scores", str(tmp_path / "scores.csv")]  # fmt: skip
    runner = CliRunner()
    for command in ("fuse", "run"):
        out = tmp_path / command
        result = runner.invoke(cli, [command, *common, "--out", str(out)])
        assert result.exit_code == 0, result.output
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["rerank"] == {"top_n": 3, "mode": "weight", "weight": 0.5}
        assert manifest["inputs"]["rerank_scores"]["files"][0]["sha256"]
        reranked = pd.read_parquet(out / "fused.parquet")
        expected = reference(plain.to_dict("records"), SCORES, "weight", 0.5, 3)
        assert [expected[(q, i)][0] for q, i in zip(reranked["query_id"], reranked["item_id"],
                                                    strict=True)] == list(reranked["rank"])  # fmt: skip
    # the parent features read the hits: the same with and without the re-ranker
    unranked = tmp_path / "unranked"
    fuse(hits(), unranked, RECIPE)
    pd.testing.assert_frame_equal(
        pd.read_parquet(unranked / "parent_features.parquet"),
        pd.read_parquet(tmp_path / "fuse" / "parent_features.parquet"),
    )
    refused = runner.invoke(cli, ["fuse", *common[:4], "--out", str(tmp_path / "x"),
                                  "--rerank-scores", str(tmp_path / "scores.csv")])  # fmt: skip
    assert refused.exit_code != 0 and "no rerank block" in refused.output


def test_run_with_a_reranker_decides_as_without(tmp_path: Path) -> None:
    job = Job(recipe=RECIPE, policy="overall_v3")
    reranked_job = Job(
        recipe=RECIPE,
        policy="overall_v3",
        recipe_overrides=tuple(rerank_sets("replace", None, 3)),
    )
    plain_run = run(hits(), tmp_path / "plain", job)
    reranked_run = run(hits(), tmp_path / "reranked", reranked_job, rerank_scores=scores_table())
    for name in ("parents.parquet", "queries.parquet"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "plain" / name),
            pd.read_parquet(tmp_path / "reranked" / name),
        )
    assert plain_run.decisions == reranked_run.decisions


def words_in_common(query_text: str, candidates: list[str]) -> list[float | None]:
    """A deterministic re-ranker: how many of the query's words each snippet holds (none for
    a query it does not know)."""
    if query_text == "birds":
        return [None] * len(candidates)
    asked = set(query_text.split())
    return [float(len(asked & set(text.split()))) for text in candidates]


@pytest.mark.parametrize(("mode", "weight", "top_n"), [("replace", None, 3), ("weight", 0.5, 2)])
def test_the_live_scorer_calls_the_reranker(
    tmp_path: Path, plain: pd.DataFrame, mode: str, weight: float | None, top_n: int
) -> None:
    sets = rerank_sets(mode, weight, top_n)
    # the re-ranker's table, computed here from the fused list and the snippets
    scores = {}
    for row in plain[plain["rank"] <= top_n].to_dict("records"):
        given = words_in_common(QUERY_TEXTS[row["query_id"]], [SNIPPETS[row["item_id"]]])[0]
        if given is not None:
            scores[(row["query_id"], row["item_id"])] = given
    expected = reference(plain.to_dict("records"), scores, mode, weight, top_n)
    with ds.scorer(RECIPE, set_recipe=sets, reranker=words_in_common) as scorer:
        live = scorer.score(hits(), tables=True)
        assert live.fused is not None
        fused = live.fused.to_pandas()
        for row in fused.to_dict("records"):
            rank, score, rerank_score = expected[(row["query_id"], row["item_id"])]
            assert row["rank"] == rank and same(row["score"], score), row
            assert same(row["rerank_score"], rerank_score), row
        assert scorer.score(hits()).contract == live.contract
    with ds.scorer(RECIPE) as plain_scorer:
        assert plain_scorer.score(hits()).contract == live.contract


def test_the_live_scorer_refuses_what_the_reranker_cannot_read() -> None:
    sets = rerank_sets("replace", None, 3)
    with pytest.raises(PolicyError, match=r"give scorer\(\.\.\., reranker=callable\)"):
        ds.scorer(RECIPE, set_recipe=sets)
    with pytest.raises(PolicyError, match="no rerank block"):
        ds.scorer(RECIPE, reranker=words_in_common)
    with ds.scorer(RECIPE, set_recipe=sets, reranker=words_in_common) as scorer:
        for column in ("snippet", "query_text"):
            with pytest.raises(InputError, match=f"{column} missing"):
                scorer.score(hits().drop(columns=[column]), tables=True)
        with pytest.raises(InputError, match="1 scores for 3 candidates"):
            ds.scorer(RECIPE, set_recipe=sets, reranker=lambda q, c: [1.0]).score(
                hits(), tables=True
            )


def test_consumers_without_scores_refuse_a_rerank_block(tmp_path: Path) -> None:
    from duckscore.pack.table import table_macros

    recipe = load_recipe(RECIPE, rerank_sets("replace", None, 3))
    with pytest.raises(DuckscoreError, match="rerank is not supported by the macro pack"):
        table_macros(None, recipe, None, ["a"])  # type: ignore[arg-type]
