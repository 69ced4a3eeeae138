"""The input table contracts of `duckscore eval`: a run (ranked documents per query) and
relevance judgments (qrels).

Both tables name the document column in one of several ways, so the contract is built for the
column actually present: a run's document is `doc_id`, else `parent_id`, else `item_id`; a
qrels' is `doc_id`, else `parent_id`. Errors then name the column as the user wrote it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .inputs import Column, TableContract

RUN_DOC_COLUMNS = ("doc_id", "parent_id", "item_id")
QRELS_DOC_COLUMNS = ("doc_id", "parent_id")
RUN_ORDER_COLUMNS = ("rank", "score")

# Opens a table without checking any column, to see which columns it has before choosing the
# contract (the one column is optional and never present).
PROBE_COLUMN = "__duckscore_probe"


def probe_contract(name: str) -> TableContract:
    return TableContract(name=name, columns=(Column(PROBE_COLUMN, "text", required=False),))


def run_contract(doc_column: str) -> TableContract:
    """One row per retrieved document: `rank` (smaller is better) and/or `score` (larger is
    better) order the documents of a query; only their order is used."""
    return TableContract(
        name="eval_run_input",
        columns=(
            Column("query_id", "id"),
            Column(doc_column, "id"),
            Column("score", "number", required=False),
            Column("rank", "number", required=False),
        ),
        key=("query_id", doc_column),
    )


def qrels_contract(doc_column: str) -> TableContract:
    """One row per judged (query, document); relevance > 0 is relevant, larger is more relevant."""
    return TableContract(
        name="eval_qrels_input",
        columns=(
            Column("query_id", "id"),
            Column(doc_column, "id"),
            Column("relevance", "number"),
        ),
        key=("query_id", doc_column),
    )


def first_present(columns: Iterable[str], choices: tuple[str, ...]) -> str | None:
    """The first of `choices` among `columns` (compared case-insensitively, like the contracts)."""
    present = {c.lower() for c in columns}
    return next((c for c in choices if c in present), None)
