"""Integer query keys (issue 52 §3): the typed views of a run's inputs read with `query_id` as
a dense INTEGER code, decoded as each output is written.

The codes number the distinct ids of every encoded view in the ids' sorted order (DuckDB's
VARCHAR order), so every ORDER BY, tie-break and window orders the codes as it ordered the ids,
while each grouping, join and window partition over a query compares integers. The views keep
their names (the string-typed view is renamed beside them), so the templates render, and are
recorded, as they are for string ids; only query_id is encoded, the one id no template parses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .graph import Publication
from .render import ident

if TYPE_CHECKING:
    import duckdb

QUERY_KEYS = "query_keys"  # the dictionary: query_id (VARCHAR), query_key (INTEGER)
STRINGS = "_strings"  # the suffix of an encoded view's string-typed original


@dataclass(frozen=True)
class QueryKeys:
    """The dictionary of a connection's encoded views."""

    dictionary: str = QUERY_KEYS

    def decoded(self, rows: str, output: Publication) -> str:
        """`output`'s rows from the query `rows` (whose query_id is a code), query_id decoded in
        its place, ordered by `output.order` (the codes order as the ids do)."""
        order = ", ".join(f"s.{ident(column)}" for column in output.order)
        return (
            f"SELECT s.* REPLACE (k.query_id AS query_id) FROM ({rows}) AS s "
            f"JOIN {ident(self.dictionary)} AS k ON k.query_key = s.query_id"
            + (f" ORDER BY {order}" if order else "")
        )


def encode_query_ids(con: duckdb.DuckDBPyConnection, views: Sequence[str]) -> QueryKeys:
    """`views` (typed views, each with a VARCHAR query_id) re-created under their names with
    query_id an INTEGER code of the dictionary built from all of them."""
    keys = QueryKeys()
    for view in views:
        con.execute(f"DROP VIEW IF EXISTS {ident(view + STRINGS)}")
        con.execute(f"ALTER VIEW {ident(view)} RENAME TO {ident(view + STRINGS)}")
    ids = " UNION ".join(f"SELECT DISTINCT query_id FROM {ident(view + STRINGS)}" for view in views)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {ident(keys.dictionary)} AS SELECT query_id, "
        "CAST(row_number() OVER (ORDER BY query_id ASC NULLS LAST) AS INTEGER) AS query_key "
        f"FROM ({ids}) AS ids"
    )
    for view in views:
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW {ident(view)} AS "
            f"SELECT v.* REPLACE (k.query_key AS query_id) FROM {ident(view + STRINGS)} AS v "
            f"JOIN {ident(keys.dictionary)} AS k ON k.query_id = v.query_id"
        )
    return keys
