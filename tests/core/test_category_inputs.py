"""Issue 35 §3.5: a pandas `category` column (DuckDB scans it as an ENUM) was refused by the
Python API — `column 'source' has type ENUM('dense', 'sparse', 'summary'); expected text`. The
one input reader (core/inputs.py) now reads an ENUM column as its values, so a frame with
categorical columns gives exactly what the same frame with plain columns gives, fingerprint
included."""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import pytest

import duckscore as ds
from duckscore.core.errors import InputError
from duckscore.core.inputs import open_input
from duckscore.core.tables import Column, TableContract

from ..helpers import SCIFACT

LOG_TEXT = ["query_id", "source", "item_id", "parent_id", "granularity", "block_type"]


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    frame = pd.read_parquet(SCIFACT / "retrieval_log.parquet")
    return frame[frame["query_id"].isin(sorted(frame["query_id"].unique())[:8])].reset_index(
        drop=True
    )


def categorical(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame.astype(dict.fromkeys(columns, "category"))


def rows(relation: duckdb.DuckDBPyRelation, order: str) -> list[Any]:
    return relation.order(order).fetchall()


def test_run_reads_categorical_columns_as_their_values(log: pd.DataFrame) -> None:
    plain = ds.run(log)
    coded = ds.run(categorical(log, LOG_TEXT))
    order = "query_id"
    assert rows(coded.queries, order) == rows(plain.queries, order)
    assert rows(coded.fused, "query_id, rank") == rows(plain.fused, "query_id, rank")
    # the same fingerprint (the memory each frame reports differs: categories are smaller)
    (coded_log,), (plain_log,) = (
        coded.manifest["inputs"]["log"]["files"],
        plain.manifest["inputs"]["log"]["files"],
    )
    assert coded_log["sha256"] == plain_log["sha256"]
    assert coded.manifest["inputs"]["log"]["rows"] == plain.manifest["inputs"]["log"]["rows"]


def test_fuse_score_and_eval_read_categorical_columns(log: pd.DataFrame) -> None:
    fused = ds.fuse(categorical(log, ["source", "query_id"]))
    plain_fused = ds.fuse(log)
    assert rows(fused.fused, "query_id, rank") == rows(plain_fused.fused, "query_id, rank")
    assert fused.parent_features is not None and plain_fused.parent_features is not None
    features = fused.parent_features.df()
    scored = ds.score(categorical(features, ["query_id", "parent_id"]))
    plain_scored = ds.score(features)
    assert rows(scored.parents, "query_id, parent_id") == rows(
        plain_scored.parents, "query_id, parent_id"
    )
    run = fused.fused.df()[["query_id", "item_id", "rank"]]
    qrels = pd.read_parquet(SCIFACT / "qrels.parquet")
    means = ds.eval(categorical(run, ["query_id", "item_id"]),
                    categorical(qrels, ["query_id", "parent_id"]), "ndcg@10").means  # fmt: skip
    assert means == ds.eval(run, qrels, "ndcg@10").means


def test_categories_of_numbers_and_missing_values() -> None:
    """Category columns of numbers keep their numbers; a missing category is NULL, and the
    contract refuses it as it refuses a missing value of a plain column."""
    contract = TableContract(
        "t", (Column("query_id", "id"), Column("score", "number"), Column("label", "text"))
    )
    frame = pd.DataFrame(
        {"query_id": pd.Categorical([7, 8]), "score": pd.Categorical([0.5, 1.5]),
         "label": pd.Categorical(["a", "b"])}
    )  # fmt: skip
    con = duckdb.connect()
    opened = open_input(con, contract, frame, "--t")
    assert opened.rows == 2
    assert con.execute("FROM t ORDER BY score").fetchall() == [("7", 0.5, "a"), ("8", 1.5, "b")]
    frame["label"] = pd.Categorical(["a", None])
    with pytest.raises(InputError) as no:
        open_input(con, contract, frame, "--t")
    assert "label" in str(no.value) and "ENUM" not in str(no.value)


def test_a_duckdb_enum_column_is_read_as_its_values() -> None:
    con = duckdb.connect()
    con.execute("CREATE TYPE kind AS ENUM ('x', 'y')")
    relation = con.sql(
        "SELECT 'q' || i AS query_id, CAST(CASE WHEN i % 2 = 0 THEN 'x' ELSE 'y' END AS kind) "
        "AS label, i * 0.5 AS score FROM range(4) AS t(i)"
    )
    contract = TableContract(
        "t", (Column("query_id", "id"), Column("score", "number"), Column("label", "text"))
    )
    open_input(con, contract, relation, "--t")
    assert con.execute("SELECT DISTINCT typeof(label) FROM t").fetchall() == [("VARCHAR",)]
