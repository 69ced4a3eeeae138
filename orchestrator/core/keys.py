"""Integer keys (issue 52 §3): the typed views of a run's inputs read with `query_id`, `item_id`
and `parent_id` as dense INTEGER codes, decoded as each output is written.

Two dictionaries: the queries', and one the items and parents share (the union of both
columns' ids), so `item_id = parent_id` compares codes of one dictionary. Each numbers its ids
in DuckDB's VARCHAR (byte) order, so every ORDER BY, tie-break and window orders the codes as it
ordered the ids, while each grouping, join and partition compares integers. The views keep their
names (the string-typed view is renamed beside them), so the templates render, and are recorded,
as they are for string ids. An output's id fields, top-level or nested in structs and lists
(contributions, best_provenance, top_parents), are found by name (DECODED) and decoded by
indexing the dictionary's list of ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from .render import ident

if TYPE_CHECKING:
    import duckdb
    from duckdb.sqltypes import DuckDBPyType

    from .graph import Publication

QUERY_KEYS = "duckscore_query_keys"  # the dictionaries: id (VARCHAR), code (INTEGER)
ITEM_KEYS = "duckscore_item_keys"
NAMES = "duckscore_key_names"  # one row: each dictionary's ids as a list, in code order
ENCODED = {"query_id": QUERY_KEYS, "item_id": ITEM_KEYS, "parent_id": ITEM_KEYS}
# an output field holding a code, and its dictionary
DECODED = ENCODED | {"best_parent_id": ITEM_KEYS, "original_id": ITEM_KEYS}
STRINGS = "_strings"  # the suffix of an encoded view's string-typed original


def _decode(value: str, name: str, dtype: DuckDBPyType) -> str | None:
    """`value` (of field `name`, type `dtype`) with its codes decoded; None if it holds none."""
    if dtype.id == "integer" and name in DECODED:
        return f"n.{ident(DECODED[name])}[{value}]"
    if dtype.id == "list":
        inner = _decode("x", name, dtype.child)
        return None if inner is None else f"list_transform({value}, lambda x: {inner})"
    if dtype.id == "struct":
        fields = [
            (field, _decode(f"{value}.{ident(field)}", field, cast("DuckDBPyType", t)))
            for field, t in dtype.children
        ]
        if all(decoded is None for _, decoded in fields):
            return None
        packed = ", ".join(
            f"{ident(field)} := {decoded or f'{value}.{ident(field)}'}" for field, decoded in fields
        )
        return f"CASE WHEN {value} IS NULL THEN NULL ELSE struct_pack({packed}) END"
    return None


@dataclass(frozen=True)
class Keys:
    """The encoding of a connection's input views; decodes a query's rows."""

    con: duckdb.DuckDBPyConnection

    def decoded(self, rows: str, output: Publication) -> str:
        """`output`'s rows from the query `rows`, each code decoded, ordered by `output.order`
        (the codes order as the ids do)."""
        described = self.con.execute(f"SELECT * FROM ({rows}) LIMIT 0").description or ()
        columns = ", ".join(
            f"{_decode(f's.{ident(name)}', name, dtype) or f's.{ident(name)}'} AS {ident(name)}"
            for name, dtype, *_ in described
        )
        order = ", ".join(f"s.{ident(column)}" for column in output.order)
        return f"SELECT {columns} FROM ({rows}) AS s, {NAMES} AS n" + (
            f" ORDER BY {order}" if order else ""
        )


def encode_ids(con: duckdb.DuckDBPyConnection, views: Sequence[str]) -> Keys:
    """`views` (typed views) re-created under their names with each id column of ENCODED an
    INTEGER code of the dictionary it names, built from that dictionary's columns of all of
    them."""
    columns: dict[str, list[str]] = {}
    for view in views:
        described = con.execute(f"SELECT * FROM {ident(view)} LIMIT 0").description or ()
        columns[view] = [name for name, *_ in described if name in ENCODED]
        con.execute(f"DROP VIEW IF EXISTS {ident(view + STRINGS)}")
        con.execute(f"ALTER VIEW {ident(view)} RENAME TO {ident(view + STRINGS)}")
    dictionaries = dict.fromkeys(ENCODED.values())
    for key in dictionaries:
        ids = " UNION ".join(
            f"SELECT DISTINCT {ident(column)} AS id FROM {ident(view + STRINGS)}"
            for view in views
            for column in columns[view]
            if ENCODED[column] == key
        )
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {ident(key)} AS SELECT id, CAST(row_number() OVER "
            f"(ORDER BY id ASC NULLS LAST) AS INTEGER) AS code FROM ({ids}) AS ids "
            "WHERE id IS NOT NULL"
        )
    lists = ", ".join(
        f"(SELECT list(id ORDER BY code) FROM {ident(key)}) AS {ident(key)}" for key in dictionaries
    )
    con.execute(f"CREATE OR REPLACE TEMP TABLE {NAMES} AS SELECT {lists}")
    for view in views:
        joins = " ".join(
            f"JOIN {ident(ENCODED[column])} AS k{i} ON k{i}.id = v.{ident(column)}"
            for i, column in enumerate(columns[view])
        )
        codes = ", ".join(f"k{i}.code AS {ident(column)}" for i, column in enumerate(columns[view]))
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {ident(view)} AS "
            f"SELECT v.* REPLACE ({codes}) FROM {ident(view + STRINGS)} AS v {joins}"
        )
    return Keys(con)
