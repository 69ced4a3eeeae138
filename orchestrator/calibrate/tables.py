"""The labels `duckscore calibrate` learns from: one label per query, good / ambiguous / bad, of
the queries that occur in its input."""

from __future__ import annotations

import pandas as pd

from ..core.errors import InputError
from ..core.inputs import Table
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.tables import Column, OpenedInput, TableContract

logger = module_logger(__name__)

LABELS = TableContract(
    name="labels",
    columns=(Column("query_id", "id"), Column("label", "text")),
    key=("query_id",),
)


def open_labels(session: Session, given: Table) -> tuple[OpenedInput, pd.DataFrame]:
    """The labels, checked, as the temp table cal_labels and as a frame ordered by query_id."""
    opened = session.open("labels", LABELS, given, "--labels")
    bad = session.first_row(
        "SELECT query_id, label FROM labels WHERE label NOT IN ('good', 'ambiguous', 'bad') "
        "ORDER BY query_id LIMIT 1"
    )
    if bad is not None:
        raise InputError(
            f"--labels ({opened.given}, query_id={bad[0]!r}): column 'label' is "
            f"{bad[1]!r}, expected good, ambiguous or bad"
        )
    session.execute("CREATE OR REPLACE TEMP TABLE cal_labels AS SELECT query_id, label FROM labels")
    return opened, session.frame("SELECT query_id, label FROM cal_labels ORDER BY query_id")


def keep_labels_in(
    session: Session,
    labels_where: str,
    table: str,
    input_option: str,
    given: str,
    doing: str = "calibrating",
) -> tuple[pd.DataFrame, int]:
    """Keep in cal_labels the labelled queries that occur in `table` (the input of
    `input_option`, given as `given`): refuse when none does, warn how many do not (`doing` on
    the others). The kept labels as a frame ordered by query_id, and how many were left out."""
    absent = f"NOT EXISTS (SELECT 1 FROM {table} AS t WHERE t.query_id = l.query_id)"
    row = session.first_row(f"SELECT count(*), count(*) FILTER ({absent}) FROM cal_labels AS l")
    assert row is not None
    labelled, missing = int(row[0]), int(row[1])
    if missing == labelled:
        raise InputError(
            f"{labels_where}: none of the {labelled} labelled query ids occurs in "
            f"{input_option} ({given}); labelled e.g. {_examples(session, 'cal_labels')}, there "
            f"e.g. {_examples(session, table)}"
        )
    if missing:
        logger.warning(
            f"--labels: {missing} of {labelled} labelled query ids do not occur in "
            f"{input_option}; {doing} on the other {labelled - missing}"
        )
        session.execute(f"DELETE FROM cal_labels AS l WHERE {absent}")
    return session.frame("SELECT query_id, label FROM cal_labels ORDER BY query_id"), missing


def _examples(session: Session, table: str) -> str:
    frame = session.frame(f"SELECT DISTINCT query_id FROM {table} ORDER BY query_id LIMIT 3")
    return ", ".join(repr(q) for q in frame["query_id"])
