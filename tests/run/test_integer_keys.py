"""Integer keys (issue 52 §3, core/keys.py; tried, measured, dropped): `run` reads query_id,
item_id and parent_id as dense INTEGER codes — items and parents through one dictionary — in
the ids' byte order, and decodes them in every output, nested ones included. The oracles are
Python's: codes are ranks in sorted(UTF-8 bytes) of the union of both columns' ids, and a run over
renamed ids is the run over the original ids, renamed (values: the Parquet files' nullability of
the id columns is not kept, one reason the design was dropped)."""

from __future__ import annotations

from pathlib import Path

import duckdb

import duckscore as ds
from duckscore.core.graph import Publication
from duckscore.core.keys import encode_ids

from ..helpers import SCIFACT

# byte order is neither numeric nor case-blind
IDS = ["q9", "q10", "Q1", "q1", "q1 ", "é", "e", "a", "a query id longer than twelve bytes"]


def test_items_and_parents_share_one_dictionary_in_byte_order() -> None:
    con = duckdb.connect()
    hits = [(q, i, p) for q in ("b", "a") for i, p in zip(IDS, reversed(IDS), strict=True)]
    con.execute("CREATE TEMP TABLE hit_rows (query_id VARCHAR, item_id VARCHAR, parent_id VARCHAR)")
    con.executemany("INSERT INTO hit_rows VALUES (?, ?, ?)", hits)
    con.execute("CREATE TEMP VIEW hits AS SELECT * FROM hit_rows")
    keys = encode_ids(con, ["hits"])
    in_order = sorted(set(IDS), key=str.encode)
    codes = dict(con.execute("SELECT id, code FROM duckscore_item_keys").fetchall())
    assert codes == {item: code for code, item in enumerate(in_order, 1)}
    same = con.execute("SELECT count(*) FROM hits WHERE item_id = parent_id").fetchone()
    assert same == (sum(i == p for _, i, p in hits),)
    nested = (
        "SELECT query_id, [{'original_id': item_id, 'n': 1}] AS contributions, "
        "{'original_id': parent_id} AS best_provenance FROM hits"
    )
    rows = con.execute(keys.decoded(nested, Publication("x.parquet", order=("query_id",))))
    assert sorted(rows.fetchall(), key=repr) == sorted(
        ((q, [{"original_id": i, "n": 1}], {"original_id": p}) for q, i, p in hits), key=repr
    )


def renamed(query_id: str) -> str:
    """SciFact's numeric query ids made ids whose byte order is another one."""
    kind = int(query_id) % 3
    return f"Q{query_id}-{'x' * 16}" if kind == 0 else f"é{query_id}" if kind == 1 else query_id


def prefixed(item: str) -> str:
    """An item or parent id renamed in its own order (ties among parents break by id)."""
    return f"é-{item}"


def test_a_run_over_renamed_ids_is_the_run_renamed(tmp_path: Path) -> None:
    log = tmp_path / "renamed.parquet"
    con = duckdb.connect()
    con.create_function("renamed", renamed, ["VARCHAR"], "VARCHAR")
    con.create_function("prefixed", prefixed, ["VARCHAR"], "VARCHAR")
    source = str(SCIFACT / "retrieval_log.parquet")
    con.execute(
        "COPY (SELECT * REPLACE (renamed(query_id) AS query_id, prefixed(item_id) AS item_id, "
        f"prefixed(parent_id) AS parent_id) FROM read_parquet('{source}')) TO '{log}'"
    )
    ds.run(str(log), out=tmp_path / "renamed")
    ds.run(source, out=tmp_path / "original")
    outputs = (("parents", "*"), ("fused", "query_id, item_id, fused_score, rank"))
    for name, columns_read in outputs:
        got = duckdb.execute(
            f"SELECT {columns_read} FROM read_parquet('{tmp_path / 'renamed' / name}.parquet')"
        ).fetchall()
        original = duckdb.execute(
            f"SELECT {columns_read} FROM read_parquet('{tmp_path / 'original' / name}.parquet')"
        )
        columns = [d[0] for d in original.description or ()]
        expected = [
            tuple(
                renamed(v) if c == "query_id" else prefixed(v) if c.endswith("_id") else v
                for c, v in zip(columns, row, strict=True)
            )
            for row in original.fetchall()
        ]
        assert sorted(got, key=repr) == sorted(expected, key=repr)
        assert [row[0] for row in got] == sorted((row[0] for row in got), key=str.encode)
