"""benchmarks/keys_micro.py (issue 52 §3): the three variants give the same rows — integer codes
in the ids' sorted order change no rank and no tie-break — and the comparison it rests on tells
two different files apart."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from benchmarks import keys_micro

from ..helpers import SCIFACT

pytestmark = pytest.mark.slow


def test_the_variants_agree_on_scifact_and_are_timed() -> None:
    summary = keys_micro.main([str(SCIFACT / "retrieval_log.parquet"), "--repeat", "1"])
    assert set(summary) == set(keys_micro.VARIANTS)
    assert summary["strings"]["ratio"] == 1.0
    assert all(row["cpu_s"] > 0 for row in summary.values())


def test_every_variant_names_each_parent_once_in_rank_order(tmp_path: Path) -> None:
    log = str(SCIFACT / "retrieval_log.parquet")
    for variant in keys_micro.VARIANTS:
        out = str(tmp_path / f"{variant}.parquet")
        keys_micro._run(variant, log, out, threads=1)
        rows = duckdb.sql(
            f"SELECT count(*), count(DISTINCT (query_id, parent_id)), "
            f"bool_and(rank = expected) FROM (SELECT *, row_number() OVER (PARTITION BY query_id "
            f"ORDER BY fused DESC, parent_id) AS expected FROM '{out}')"
        ).fetchall()
        distinct = duckdb.sql(
            f"SELECT count(*) FROM (SELECT DISTINCT query_id, parent_id FROM read_parquet('{log}'))"
        ).fetchall()
        assert rows == [(distinct[0][0], distinct[0][0], True)]
    strings, moved = str(tmp_path / "strings.parquet"), str(tmp_path / "moved.parquet")
    duckdb.sql(
        f"COPY (SELECT * REPLACE (CASE WHEN rank = 1 AND query_id = (SELECT min(query_id) FROM "
        f"'{strings}') THEN fused + 1e-15 ELSE fused END AS fused) FROM '{strings}') TO '{moved}'"
    )
    assert keys_micro.equal(strings, strings) and not keys_micro.equal(strings, moved)
