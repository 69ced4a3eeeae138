"""`duckscore tune` (issue 24): the grid parsed as documented, the fold choice against a plain
Python selection, every grid point's per-query metric against `duckscore fuse --set-recipe` +
`evaluate()` run separately, the written recipe run by `duckscore fuse --recipe`, and the
refusals (one line each)."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from duckscore.calibrate.tune import tune
from duckscore.calibrate.tune_grid import (
    TuneError,
    assign_folds,
    grid_points,
    parse_axis,
    parse_grid,
    select,
)
from duckscore.cli import cli
from duckscore.fusion.pipeline import fuse
from duckscore.metrics.retrieval import evaluate
from duckscore.metrics.significance import compare_runs

from ..helpers import SCIFACT

LOG = str(SCIFACT / "retrieval_log.parquet")
QRELS = str(SCIFACT / "qrels.parquet")


def test_ranges_lists_and_values_parse_as_documented() -> None:
    assert parse_axis("fusion.k=2,10,20,60").values == (2, 10, 20, 60)
    assert parse_axis("sources.dense.weight=0:1:0.1").values == tuple(i / 10 for i in range(11))
    assert parse_axis("sources.dense.weight=0:1:0.3").values == (0.0, 0.3, 0.6, 0.9)
    assert parse_axis("fusion.k=10:60:25").values == (10, 35, 60)
    assert parse_axis("x=0.5:0.5:1").values == (0.5,)
    assert parse_axis("sources.sparse.normalize=rank,minmax, zscore").values == (
        "rank",
        "minmax",
        "zscore",
    )
    assert parse_axis("sources.dense.distance=true,false").values == (True, False)
    axes = parse_grid(["a=1,2", "b=x,y,z"])
    points = grid_points(axes)
    assert len(points) == 6 and points[:2] == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}]


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (["fusion.k="], "--grid 'fusion.k=': no values"),
        (["fusion.k"], "--grid 'fusion.k': expected KEY=VALUES"),
        (["fusion.k=1:2"], "a range is start:stop:step, three numbers"),
        (["fusion.k=1:x:1"], "a range is start:stop:step, three numbers"),
        (["fusion.k=5:1:1"], "a range needs step > 0 and start <= stop"),
        (["fusion.k=1:5:0"], "a range needs step > 0 and start <= stop"),
        (["fusion.k=1,,2"], "an empty value"),
        (["fusion.k=1,1"], "a value is listed twice"),
        (["fusion.k=1", "fusion.k=2"], "the key fusion.k is given twice"),
        ([], "give at least one"),
    ],
)
def test_bad_grids_are_refused(grid: list[str], message: str) -> None:
    with pytest.raises(TuneError, match=message.replace("(", r"\(").replace("+", r"\+")):
        parse_grid(grid)


def _plain_choice(
    values: list[dict[str, float]], folds: dict[str, int]
) -> tuple[list[int], float, int]:
    def mean(g: int, queries: list[str]) -> float:
        return sum(values[g][q] for q in queries) / len(queries)

    def best(queries: list[str]) -> int:
        means = [mean(g, queries) for g in range(len(values))]
        return means.index(max(means))  # the first of equal means

    chosen, held_out = [], []
    for fold in sorted(set(folds.values())):
        train = [q for q, f in folds.items() if f != fold]
        test = [q for q, f in folds.items() if f == fold]
        chosen.append(best(train))
        held_out += [values[chosen[-1]][q] for q in test]
    return chosen, sum(held_out) / len(held_out), best(list(folds))


@pytest.mark.parametrize("seed", range(20))
def test_fold_choice_matches_a_plain_selection(seed: int) -> None:
    rng = random.Random(seed)
    queries = [f"q{i}" for i in range(rng.randint(4, 40))]
    # eighths: sums are exact, so equal means are equal and the first grid point must win
    values = [{q: rng.randint(0, 8) / 8 for q in queries} for _ in range(rng.randint(1, 6))]
    folds = assign_folds(queries, rng.randint(2, 4), seed)
    got = select(values, folds)
    chosen, cross_validated, overall = _plain_choice(values, folds)
    assert [f.grid_point for f in got.folds] == chosen
    assert got.cross_validated == pytest.approx(cross_validated, abs=1e-15)
    assert got.best == overall


def test_folds_are_seeded_round_robin_and_balanced() -> None:
    queries = [str(i) for i in range(23)]
    folds = assign_folds(queries, 5, 7)
    assert folds == assign_folds(list(reversed(queries)), 5, 7)  # input order does not matter
    assert sorted(pd.Series(folds).value_counts()) == [4, 4, 5, 5, 5]
    assert folds != assign_folds(queries, 5, 8)


@pytest.mark.slow
def test_every_grid_point_equals_fuse_and_eval_run_separately(tmp_path: Path) -> None:
    grid = ["fusion.k=10,60", "sources.dense.weight=0.5,1"]
    result = tune(LOG, QRELS, grid, tmp_path / "tuned.yaml", folds=3, seed=1, permutations=200)
    overrides = [[], *(
        [f"fusion.k={p['fusion.k']}", f"sources.dense.weight={p['sources.dense.weight']}"]
        for p in result.points
    )]  # fmt: skip
    oracle: list[dict[str, float]] = []
    for index, chosen in enumerate(overrides):
        out = tmp_path / f"fused{index}"
        fuse(LOG, out, "canonical_rrf", chosen, explain=False)
        _, per_query = evaluate(str(out / "fused.parquet"), QRELS, "ndcg@10")
        oracle.append(dict(zip(per_query["query_id"], per_query["ndcg@10"])))
        mine = result.per_query[result.per_query["grid_point"] == index]
        assert dict(zip(mine["query_id"], mine["value"])) == oracle[-1], chosen
    chosen_folds, cross_validated, overall = _plain_choice(oracle[1:], result.folds)
    assert [f.grid_point for f in result.selection.folds] == chosen_folds
    assert result.selection.cross_validated == pytest.approx(cross_validated, abs=1e-12)
    assert result.selection.best == overall
    assert result.base_mean == pytest.approx(sum(oracle[0].values()) / len(oracle[0]), abs=1e-12)


@pytest.mark.slow
def test_scifact_tuning_beats_canonical_rrf_and_its_recipe_runs(tmp_path: Path) -> None:
    recipe, report = tmp_path / "tuned.yaml", tmp_path / "report"
    done = CliRunner().invoke(
        cli,
        ["-q", "tune", "--log", LOG, "--qrels", QRELS, "--grid", "fusion.k=10,60",
         "--grid", "sources.dense.weight=1:2:0.5", "--out", str(recipe), "--report", str(report)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    document = yaml.safe_load(recipe.read_text())
    assert document["recipe_id"] == "canonical_rrf_tuned"
    tuned = document["metadata"]["tune"]
    assert tuned["grid"] == {"fusion.k": [10, 60], "sources.dense.weight": [1.0, 1.5, 2.0]}
    cv = tuned["cross_validated"]
    # the grid holds canonical RRF itself (k = 60, weight 1), so tuning cannot do worse on it
    assert cv["base"] == pytest.approx(0.6604601182827838, abs=1e-12)
    assert cv["tuned"] >= cv["base"]
    assert f"{cv['tuned']:.6f}" in done.output and f"{cv['difference']:+.6f}" in done.output
    grid = pd.read_csv(report / "grid.csv")
    assert len(grid) == 7 * 6  # base + 6 grid points, each on all queries and 5 folds
    folds = pd.read_csv(report / "folds.csv")
    assert folds["test_queries"].sum() == 300
    # the recipe runs as written, and eval --baseline states its gain on all queries
    fused = tmp_path / "fused"
    ran = CliRunner().invoke(
        cli, ["-q", "fuse", "--log", LOG, "--recipe", str(recipe), "--out", str(fused)]
    )
    assert ran.exit_code == 0, ran.output
    fuse(LOG, tmp_path / "rrf", "canonical_rrf", explain=False)
    compared = compare_runs(
        fused / "fused.parquet", tmp_path / "rrf" / "fused.parquet", QRELS, "ndcg@10"
    ).metrics[0]
    assert compared.run == pytest.approx(tuned["all_queries"]["tuned"], abs=1e-12)
    assert compared.difference == pytest.approx(
        tuned["all_queries"]["tuned"] - tuned["all_queries"]["base"], abs=1e-12
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grid", "fusion.k="], "--grid 'fusion.k=': no values"),
        (["--grid", "fusion.kk=1,2"], "--grid fusion.kk: unknown key 'fusion.kk'"),
        (["--grid", "fusion.k=1:2"], "a range is start:stop:step"),
        (
            ["--grid", "fusion.k=0,1"],
            "--grid point fusion.k=0: fuse policy canonical_rrf: fusion.k",
        ),
        (["--grid", "fusion.k=1,2", "--folds", "1"], "--folds 1: at least 2"),
        (["--grid", "fusion.k=1,2", "--metric", "ndcg@10,map"], "give one metric"),
        (["--grid", "fusion.k=1,2", "--version", "a+b"], "--version 'a+b'"),
    ],
)
def test_refusals_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "r.yaml"
    done = CliRunner().invoke(
        cli, ["-q", "tune", "--log", LOG, "--qrels", QRELS, "--out", str(out), *args]
    )
    assert done.exit_code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("duckscore: error: ") and message in lines[0]
    assert not out.exists()
