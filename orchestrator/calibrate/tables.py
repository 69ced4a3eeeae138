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
    columns=(
        Column("query_id", "id"),
        Column("label", "text"),
        # the query's kinds, comma-separated (seed 000 §9.1's kinds: SEED_KINDS, or your own)
        Column("kind", "text", required=False, nullable=True),
    ),
    key=("query_id",),
)
# seed 000 §9.1's query kinds a calibration set covers: 推荐 / 教学 / 问答, 宽泛 / 细节
SEED_KINDS = ("recommendation", "tutorial", "qa", "broad", "detailed")
MIN_LABELS_PER_KIND = 10  # §9.1's 50 queries at the least, over its five kinds


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


def kind_counts(session: Session, opened: OpenedInput) -> dict[str, int] | None:
    """Of the kept labels (cal_labels), how many are of each kind: the seed's kinds first, in
    SEED_KINDS' order, then the others by name. None when the labels have no `kind` column.
    A kind the seed names that is missing or has fewer than MIN_LABELS_PER_KIND labels is a
    warning (§9.1: the set covers every kind)."""
    if "kind" not in opened.columns:
        return None
    found = session.frame(
        "SELECT kind, count(DISTINCT l.query_id) AS n FROM cal_labels AS l "
        "JOIN (SELECT query_id, trim(unnest(string_split(lower(kind), ','))) AS kind "
        "FROM labels) AS k ON k.query_id = l.query_id WHERE kind <> '' GROUP BY kind"
    )
    given = {str(kind): int(n) for kind, n in zip(found["kind"], found["n"], strict=True)}
    counts = {kind: given.get(kind, 0) for kind in SEED_KINDS}
    counts |= {kind: given[kind] for kind in sorted(given) if kind not in SEED_KINDS}
    short = [f"{kind} {counts[kind]}" for kind in SEED_KINDS if counts[kind] < MIN_LABELS_PER_KIND]
    if short:
        logger.warning(
            f"--labels: seed 000 §9.1's query kinds are covered unevenly: {', '.join(short)} "
            f"labels (fewer than {MIN_LABELS_PER_KIND}); thresholds fitted on them may not hold "
            "for those queries"
        )
    return counts
