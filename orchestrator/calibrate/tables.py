"""The labels `duckscore calibrate` learns from: one label per query, good / ambiguous / bad."""

from __future__ import annotations

import pandas as pd

from ..core.errors import InputError
from ..core.inputs import Table
from ..core.session import Session
from ..core.tables import Column, OpenedInput, TableContract

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
