"""Integer query keys (issue 52 §3, core/keys.py): `run` reads query_id as a dense INTEGER code
in the ids' byte order and decodes it in every output. The oracles are Python's: codes are
ranks in sorted(UTF-8 bytes), and a run over renamed ids is the run over the original ids,
renamed, each output in the renamed ids' byte order."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

import duckscore as ds
from duckscore.core.graph import Publication
from duckscore.core.keys import encode_query_ids

from ..helpers import SCIFACT

# byte order is neither numeric nor case-blind: 'Q1' < 'a' < 'a query…' < 'e' < 'q1' < 'q1 ' <
# 'q10' < 'q9' < ('zz', in the second view only) < 'é'
IDS = ["q9", "q10", "Q1", "q1", "q1 ", "é", "e", "a", "a query id longer than twelve bytes"]


def test_codes_are_dense_in_the_ids_byte_order_and_decode_back() -> None:
    con = duckdb.connect()
    hits = [(query_id, n) for n in (2, 1) for query_id in IDS]
    con.execute("CREATE TEMP TABLE hit_rows (query_id VARCHAR, n INTEGER)")
    con.executemany("INSERT INTO hit_rows VALUES (?, ?)", hits)
    con.execute("CREATE TEMP VIEW hits AS SELECT query_id, n FROM hit_rows")
    con.execute("CREATE TEMP VIEW listed AS SELECT * FROM (VALUES ('zz'), ('q9')) AS t (query_id)")
    keys = encode_query_ids(con, ["hits", "listed"])
    in_order = sorted({*IDS, "zz"}, key=lambda query_id: query_id.encode())
    codes = dict(con.execute("SELECT query_id, query_key FROM query_keys").fetchall())
    assert codes == {query_id: code for code, query_id in enumerate(in_order, 1)}
    assert con.execute("SELECT DISTINCT typeof(query_id) FROM hits").fetchall() == [("INTEGER",)]
    assert sorted(con.execute("SELECT query_id FROM listed").fetchall()) == [(8,), (9,)]
    ordered = Publication("hits.parquet", order=("query_id", "n"))
    decoded = con.execute(keys.decoded("SELECT * FROM hits", ordered)).fetchall()
    assert decoded == sorted(hits, key=lambda row: (row[0].encode(), row[1]))


def renamed(query_id: str) -> str:
    """SciFact's numeric ids made ids whose byte order is another one: a third upper-case and
    long, a third accented."""
    kind = int(query_id) % 3
    return f"Q{query_id}-{'x' * 16}" if kind == 0 else f"é{query_id}" if kind == 1 else query_id


def test_a_run_reads_integer_keys_and_writes_the_ids(tmp_path: Path) -> None:
    log = tmp_path / "renamed.parquet"
    con = duckdb.connect()
    con.create_function("renamed", renamed, ["VARCHAR"], "VARCHAR")
    source = str(SCIFACT / "retrieval_log.parquet")
    con.execute(
        f"COPY (SELECT * REPLACE (renamed(query_id) AS query_id) FROM read_parquet('{source}')) "
        f"TO '{log}'"
    )
    ds.run(str(log), out=tmp_path / "renamed", con=con)
    # the run's typed view of the log held codes, not strings
    assert con.execute("SELECT typeof(query_id) FROM retrieval_log LIMIT 1").fetchone() == (
        "INTEGER",
    )
    ds.run(source, out=tmp_path / "original")
    rows = {name: contract_rows(tmp_path / name) for name in ("renamed", "original")}
    expected = sorted(
        (row | {"query_id": renamed(row["query_id"])} for row in rows["original"]),
        key=lambda row: row["query_id"].encode(),
    )
    assert rows["renamed"] == expected
    fused = {
        name: duckdb.execute(
            "SELECT query_id, item_id, fused_score, rank FROM read_parquet(?)",
            [str(tmp_path / name / "fused.parquet")],
        ).fetchall()
        for name in ("renamed", "original")
    }
    assert [row[0] for row in fused["renamed"]] == sorted(
        (row[0] for row in fused["renamed"]), key=str.encode
    )
    assert sorted(fused["renamed"]) == sorted(
        (renamed(query_id), *rest) for query_id, *rest in fused["original"]
    )


def contract_rows(out: Path) -> list[dict[str, object]]:
    lines = (out / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]
