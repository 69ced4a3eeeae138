"""The benchmark's pandas pipeline (config c) gives duckscore's numbers, and `compare` notices when
it does not: on SciFact, on a small log full of edge cases and on a synthetic log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.pandas_pipeline import compare, run_pandas
from benchmarks.synthetic_log import generate
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run as duckscore_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def both(log: Path, tmp_path: Path) -> tuple[Path, Path]:
    duckscore_run(log, tmp_path / "duckscore", Job(recipe="hybrid_v1", policy="overall_v1"))
    run_pandas(log, tmp_path / "pandas")
    return tmp_path / "duckscore", tmp_path / "pandas"


def edge_case_log() -> pd.DataFrame:
    rows = [
        # q1: tied scores and ranks across sources, a summary (doc) hit, a chunk hit twice in one list
        ("q1", "dense", "d1#1", "d1", 0.9, 1, "block", "intro", 4),
        ("q1", "dense", "d2#1", "d2", 0.9, 2, "block", "body", 4),
        ("q1", "dense", "d1#2", "d1", 0.5, 3, "block", "body", 4),
        ("q1", "sparse", "d2#1", "d2", 12.0, 1, "block", "body", 4),
        ("q1", "sparse", "d1#1", "d1", 12.0, 2, "block", "intro", 4),
        ("q1", "sparse", "d3#7", "d3", 3.5, 3, "block", "body", 80),
        ("q1", "summary", "d3", "d3", 0.7, 1, "doc", "summary", 80),
        ("q1", "summary", "d1", "d1", 0.7, 2, "doc", "summary", 4),
        # q2: one candidate, one source
        ("q2", "dense", "é文#0", "é文", 0.3, 1, "block", "intro", 1),
        # q3: every score equal, negative and zero scores, a huge document
        ("q3", "sparse", "x#1", "x", 0.0, 1, "block", "body", 500),
        ("q3", "sparse", "y#1", "y", 0.0, 2, "block", "body", 2),
        ("q3", "dense", "y#1", "y", -0.2, 1, "block", "body", 2),
        ("q3", "dense", "x#2", "x", -0.4, 2, "block", "body", 500),
        ("q3", "dense", "z", "z", -0.4, 3, "doc", "body", 3),
    ]
    columns = [
        "query_id",
        "source",
        "item_id",
        "parent_id",
        "score",
        "rank",
        "granularity",
        "block_type",
        "total_chunks",
    ]
    return pd.DataFrame(rows, columns=columns).astype({"total_chunks": "Int32", "rank": "int32"})


def test_scifact_gives_the_same_numbers(tmp_path: Path) -> None:
    assert compare(*both(FIXTURES / "scifact" / "retrieval_log.parquet", tmp_path)) == []


@pytest.mark.parametrize(
    "dropped",
    [[], ["rank"], ["granularity", "block_type", "total_chunks"]],
    ids=["every column", "no rank", "no optional hit columns"],
)
def test_edge_cases_give_the_same_numbers(tmp_path: Path, dropped: list[str]) -> None:
    path = tmp_path / "log.parquet"
    edge_case_log().drop(columns=dropped).to_parquet(path, index=False)
    assert compare(*both(path, tmp_path)) == []


def test_a_synthetic_log_gives_the_same_numbers(tmp_path: Path) -> None:
    path = tmp_path / "log.parquet"
    generate(str(path), 20_000)
    assert compare(*both(path, tmp_path)) == []


def test_compare_reports_a_changed_value_a_flipped_flag_and_a_missing_row(tmp_path: Path) -> None:
    log = tmp_path / "log.parquet"
    edge_case_log().to_parquet(log, index=False)
    duckscore_dir, pandas_dir = both(log, tmp_path)
    changed = tmp_path / "changed"
    shutil.copytree(pandas_dir, changed)
    parents = pd.read_parquet(changed / "parents.parquet")
    parents.loc[parents["parent_id"] == "x", "s_coverage"] *= 1 + 1e-6
    parents.loc[parents["parent_id"] == "é文", "flag_sparse_evidence"] ^= True
    parents.to_parquet(changed / "parents.parquet", index=False)
    fused = pd.read_parquet(changed / "fused.parquet")
    fused[fused["item_id"] != "d3"].to_parquet(changed / "fused.parquet", index=False)

    problems = compare(duckscore_dir, changed)

    assert problems[:2] == [
        "fused.parquet: 1 keys only in duckscore, 0 only in pandas",
        "parents.parquet: flag_sparse_evidence differs on 1 rows, e.g. query_id='q2', parent_id='é文': "
        "duckscore False, pandas True",
    ]
    assert problems[2].startswith(
        "parents.parquet: s_coverage differs on 1 rows, e.g. query_id='q3', parent_id='x'"
    )
    assert len(problems) == 3
    # a looser tolerance lets the 1e-6 change through, never the flipped flag
    assert compare(duckscore_dir, changed, rel_tol=1e-3) == problems[:2]
