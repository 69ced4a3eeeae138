"""The input tables of `duckscore eval` and `duckscore labels`: a run (ranked documents per query)
and relevance judgments (qrels); QRELS, the qrels as calibrate and the demo read them; and the
tables `eval --loc` reads (its gold as a table, the entities' files).

Both tables name the document column in one of several ways, so the contract is built for the
column actually present: a run's document is `doc_id`, else `parent_id`, else `item_id`; a
qrels' is `doc_id`, else `parent_id`. Errors then name the column as the user wrote it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..core.errors import InputError
from ..core.inputs import Table, open_input
from ..core.render import ident
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.tables import Column, OpenedInput, TableContract
from .catalog import LOC_LEVELS

logger = module_logger(__name__)

RUN_DOC_COLUMNS = ("doc_id", "parent_id", "item_id")
QRELS_DOC_COLUMNS = ("doc_id", "parent_id")
RUN_ORDER_COLUMNS = ("rank", "score")

# Opens a table without checking any column, to see which columns it has before choosing the
# contract (the one column is optional and never present).
PROBE_COLUMN = "__duckscore_probe"

# the run's queries that the qrels do not judge (counted and reported, not evaluated)
UNJUDGED_RUN_QUERIES = (
    "SELECT count(*) FROM (SELECT query_id FROM eval_run GROUP BY query_id) AS r "
    "ANTI JOIN (SELECT query_id FROM eval_qrels GROUP BY query_id) AS q ON q.query_id = r.query_id"
)

QRELS = TableContract(
    name="qrels",
    columns=(Column("query_id", "id"), Column("parent_id", "id"), Column("relevance", "number")),
    key=("query_id", "parent_id"),
)

# `eval --loc`: gold locations as a table (an instance's revision: the commit its locations are
# at, optional), and the files of `duckscore entities`' table at their revisions
LOC_GOLD_TABLE = TableContract(
    name="loc_gold_table",
    columns=(
        Column("instance_id", "id"),
        Column("level", "text", choices=tuple(LOC_LEVELS)),
        Column("location", "id"),
        Column("revision", "text", required=False, nullable=True),
    ),
    key=("instance_id", "level", "location"),
)
LOC_ENTITY_FILES = TableContract(
    name="loc_entities",
    columns=(Column("file_path", "id"), Column("revision", "text", required=False, nullable=True)),
)


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


@dataclass(frozen=True)
class JudgedRun:
    """A run and its judgments, opened as the views eval_run and eval_qrels."""

    run: OpenedInput
    qrels: OpenedInput
    order_by: str  # 'rank' or 'score'
    run_doc_column: str
    qrels_doc_column: str


def open_judged_run(
    session: Session, run: Table, qrels: Table, run_label: str = "--run"
) -> JudgedRun:
    """The views eval_run and eval_qrels, each checked against its contract."""
    logger.info("checking inputs")
    run_input, order_by, run_doc = open_run(session, run, run_label)
    qrels_input, qrels_doc = open_qrels(session, qrels)
    return JudgedRun(run_input, qrels_input, order_by, run_doc, qrels_doc)


def open_run(session: Session, given: Table, label: str = "--run") -> tuple[OpenedInput, str, str]:
    """Create the view eval_run(query_id, doc_id, score, rank); return the opened input, the
    ordering used ('rank' or 'score') and the column read as the document id."""
    opened, doc, names, shown = _open_judged(
        session, "run", given, label, RUN_DOC_COLUMNS, run_contract, "eval_run", "score, rank"
    )
    order_by = first_present(names, RUN_ORDER_COLUMNS)
    if order_by is None:
        raise InputError(
            f"{label} ({shown}): needs a rank or a score column "
            f"(columns: {', '.join(names) or 'none'})"
        )
    return opened, order_by, doc


def open_qrels(session: Session, given: Table) -> tuple[OpenedInput, str]:
    """Create the view eval_qrels(query_id, doc_id, relevance)."""
    opened, doc, _, _ = _open_judged(
        session,
        "qrels",
        given,
        "--qrels",
        QRELS_DOC_COLUMNS,
        qrels_contract,
        "eval_qrels",
        "relevance",
    )
    return opened, doc


def _open_judged(
    session: Session,
    name: str,
    given: Table,
    label: str,
    doc_columns: tuple[str, ...],
    contract_for: Callable[[str], TableContract],
    view: str,
    columns: str,
) -> tuple[OpenedInput, str, list[str], str]:
    """Open a run or qrels input whose document column is the first of `doc_columns` present,
    and create `view` as SELECT query_id, <doc> AS doc_id, `columns`. Returns the opened input,
    the document column, the column names and the input as shown in messages."""
    probe = f"{view}_probe"
    # the reader's own checks first (file found, readable, not empty); not an input of the run
    shown = open_input(session.con, probe_contract(probe), given, label).given
    names = [c for c in session.schema(f"__raw_{probe}") if not c.startswith("__duckscore")]
    doc = first_present(names, doc_columns)
    if doc is None:
        others = ", ".join(repr(c) for c in doc_columns[1:])
        raise InputError(
            f"{label} ({shown}): missing column 'doc_id' (or {others}) "
            f"(columns: {', '.join(names) or 'none'})"
        )
    opened = session.open(name, contract_for(doc), given, label)
    session.execute(
        f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT query_id, {ident(doc)} AS doc_id, "
        f"{columns} FROM {view}_input"
    )
    return opened, doc, names, shown
