"""The benchmark's Polars pipeline (config h) gives duckscore's numbers, and `compare` notices when
it does not: on SciFact, on a small log full of edge cases and on a synthetic log."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from benchmarks.pandas_pipeline import TABLES, compare
from benchmarks.polars_pipeline import main, run_polars
from benchmarks.synthetic_log import generate
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run as duckscore_run
from tests.benchmarks.test_pandas_pipeline import edge_case_log

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def rows_written(folder: Path) -> dict[str, int]:
    return {
        name: len((folder / name).read_text().splitlines())
        if name.endswith(".jsonl")
        else pl.scan_parquet(folder / name).select(pl.len()).collect().item()
        for name in TABLES
    }


def both(log: Path, tmp_path: Path) -> tuple[Path, Path]:
    duckscore_run(log, tmp_path / "duckscore", Job(recipe="hybrid_v1", policy="overall_v1"))
    assert run_polars(log, tmp_path / "polars") == rows_written(tmp_path / "duckscore")
    return tmp_path / "duckscore", tmp_path / "polars"


def test_scifact_gives_the_same_numbers(tmp_path: Path) -> None:
    assert compare(*both(FIXTURES / "scifact" / "retrieval_log.parquet", tmp_path)) == []


@pytest.mark.parametrize(
    "dropped",
    [[], ["rank"], ["granularity"], ["granularity", "block_type", "total_chunks"]],
    ids=["every column", "no rank", "no granularity", "no optional hit columns"],
)
def test_edge_cases_give_the_same_numbers(tmp_path: Path, dropped: list[str]) -> None:
    path = tmp_path / "log.parquet"
    edge_case_log().drop(columns=dropped).to_parquet(path, index=False)
    assert compare(*both(path, tmp_path)) == []


def test_a_synthetic_log_gives_the_same_numbers(tmp_path: Path) -> None:
    path = tmp_path / "log.parquet"
    generate(str(path), 20_000)
    assert compare(*both(path, tmp_path)) == []


def test_compare_reports_a_changed_score_a_flipped_flag_a_missing_row_and_a_reordered_top(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.parquet"
    edge_case_log().to_parquet(log, index=False)
    duckscore_dir, polars_dir = both(log, tmp_path)
    changed = tmp_path / "changed"
    shutil.copytree(polars_dir, changed)
    parent = pl.col("parent_id")
    pl.read_parquet(changed / "parents.parquet").with_columns(
        overall_score=pl.when(parent == "x")
        .then(pl.col("overall_score") * (1 + 1e-6))
        .otherwise("overall_score"),
        flag_sparse_evidence=pl.col("flag_sparse_evidence") ^ (parent == "é文"),
    ).write_parquet(changed / "parents.parquet")
    pl.read_parquet(changed / "fused.parquet").filter(pl.col("item_id") != "d3").write_parquet(
        changed / "fused.parquet"
    )
    pl.read_ndjson(changed / "contract.jsonl").with_columns(
        top_parents=pl.when(pl.col("query_id") == "q1")
        .then(pl.col("top_parents").list.reverse())
        .otherwise("top_parents")
    ).write_ndjson(changed / "contract.jsonl")

    problems = compare(duckscore_dir, changed)

    assert problems[:2] == [
        "fused.parquet: 1 keys only in duckscore, 0 only in pandas",
        "parents.parquet: flag_sparse_evidence differs on 1 rows, e.g. query_id='q2', "
        "parent_id='é文': duckscore False, pandas True",
    ]
    assert problems[2].startswith(
        "parents.parquet: overall_score differs on 1 rows, e.g. query_id='q3', parent_id='x'"
    )
    assert problems[3].startswith(
        "contract.jsonl: top_parent_ids differs on 1 rows, e.g. query_id='q1'"
    )
    assert len(problems) == 4
    # a looser tolerance lets the 1e-6 change through, never the flipped flag or the order
    assert compare(duckscore_dir, changed, rel_tol=1e-3) == [problems[0], problems[1], problems[3]]


def test_the_command_line_checks_against_a_duckscore_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.parquet"
    edge_case_log().to_parquet(log, index=False)
    duckscore_dir = tmp_path / "duckscore"
    duckscore_run(log, duckscore_dir, Job(recipe="hybrid_v1", policy="overall_v1"))
    assert main([str(log), str(tmp_path / "polars"), "--check", str(duckscore_dir)]) == 0
    assert capsys.readouterr().out.endswith(f"same as {duckscore_dir}\n")
    # a duckscore run of another log: the check fails
    other = tmp_path / "other.parquet"
    edge_case_log().query("query_id != 'q2'").to_parquet(other, index=False)
    assert main([str(other), str(tmp_path / "other"), "--check", str(duckscore_dir)]) == 1
    assert "contract.jsonl: 1 keys only in duckscore" in capsys.readouterr().out
