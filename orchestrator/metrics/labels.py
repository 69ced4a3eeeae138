"""`duckscore labels`: one label per judged query from a run and its relevance judgments.

The labels (issue 4, seed 000 §9.1) are computed in SQL (sql/metrics/labels.sql, one CTE per
stage) over the views `duckscore eval` opens (`open_run`, `open_qrels` of metrics/tables.py), so the
order of a query's documents and its ties are exactly those of `duckscore eval`:

- the run orders a query's documents by `rank` ascending when it has a rank column, else by
  `score` descending; ties by document id ascending (as text). Positions are 1, 2, …
- a query is labelled when the qrels judge at least one of its documents; relevant means
  relevance > 0. Run rows of queries absent from the qrels get no label (they are counted).
- `good`: the document at position 1 is relevant; `bad`: no relevant document at positions
  1..k (so also a judged query absent from the run, or one with no relevant judgment);
  `ambiguous`: otherwise (the first relevant document is at a position from 2 to k).

Output columns: query_id, label, top1_doc_id (null when the query is absent from the run),
first_relevant_rank (position of the first relevant document in the whole run, null when there is
none; it may exceed k for a `bad` query), n_relevant (relevant judgments of the query).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.connection import EngineSettings
from ..core.errors import DuckscoreError
from ..core.inputs import Table
from ..core.outputs import write_frame
from ..core.render import ColumnParameter, RenderedSQL, render
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.tables import OpenedInput
from .catalog import DEFAULT_LABEL_K, MAX_K
from .tables import UNJUDGED_RUN_QUERIES, open_judged_run

logger = module_logger(__name__)

LABELS = ("good", "ambiguous", "bad")
COLUMNS = ("query_id", "label", "top1_doc_id", "first_relevant_rank", "n_relevant")
STAGES = ("ranked", "judgments", "judged", "judged_run", "run_stats", "labels")


class CutoffError(DuckscoreError):
    """--k is not a whole number from 1 to MAX_K."""


@dataclass(frozen=True)
class LabelsResult:
    labels: pd.DataFrame
    counts: dict[str, int]
    k: int
    queries_without_run: int
    run_queries_unlabelled: int
    order_by: str
    run_doc_column: str
    qrels_doc_column: str
    inputs: dict[str, OpenedInput]
    rendered: RenderedSQL

    @property
    def queries(self) -> int:
        return len(self.labels)


def check_k(k: object) -> int:
    """`k` as an int, or CutoffError: a whole number from 1 to MAX_K (not a bool)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise CutoffError(f"--k: must be a whole number from 1 to {MAX_K}, got {k!r}")
    return k


def render_labels(k: int | ColumnParameter, order_by: str, final: str = "labels") -> RenderedSQL:
    """The labels SQL over the views eval_run and eval_qrels; `final` selects one stage. `k` may
    be a column or a macro's parameter (the macro pack's ds_labels)."""
    return render(
        "metrics/labels.sql",
        k=k if isinstance(k, ColumnParameter) else check_k(k),
        order_by=order_by,
        final=final,
        inputs={"run": "eval_run", "qrels": "eval_qrels"},
    )


def make_labels(
    run: Table, qrels: Table, k: int = DEFAULT_LABEL_K, settings: EngineSettings | None = None
) -> pd.DataFrame:
    """Label every judged query of `run` (each input a path, glob, folder or DataFrame).

    Returns one row per query judged in `qrels`, ordered by query_id, with the columns
    query_id, label ('good', 'ambiguous' or 'bad'), top1_doc_id, first_relevant_rank (nullable
    Int64) and n_relevant. Raises a DuckscoreError subclass naming the problem for a bad k or
    bad inputs.
    """
    return run_labels(run, qrels, k, settings).labels


def run_labels(
    run: Table,
    qrels: Table,
    k: int = DEFAULT_LABEL_K,
    settings: EngineSettings | None = None,
) -> LabelsResult:
    """`make_labels` with everything the CLI reports: counts, columns used, rendered SQL."""
    k = check_k(k)
    with Session(settings) as session:
        judged = open_judged_run(session, run, qrels)
        logger.info(
            f"labelling {judged.run.rows:,} run rows against {judged.qrels.rows:,} judgments"
        )
        rendered = render_labels(k, judged.order_by)
        session.create("query_labels", rendered)
        frame = session.frame("SELECT * FROM query_labels ORDER BY query_id")
        unlabelled = session.first_row(UNJUDGED_RUN_QUERIES)
    frame = _typed(frame)
    counts = {label: int((frame["label"] == label).sum()) for label in LABELS}
    return LabelsResult(
        labels=frame,
        counts=counts,
        k=k,
        queries_without_run=int(frame["top1_doc_id"].isna().sum()),
        run_queries_unlabelled=int(unlabelled[0]) if unlabelled else 0,
        order_by=judged.order_by,
        run_doc_column=judged.run_doc_column,
        qrels_doc_column=judged.qrels_doc_column,
        inputs=dict(session.inputs),
        rendered=rendered,
    )


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Stable column types whatever the nulls: ids and labels as objects (None for null),
    first_relevant_rank as nullable Int64, n_relevant as int64."""
    frame = frame.loc[:, list(COLUMNS)].reset_index(drop=True)
    for column in ("query_id", "label", "top1_doc_id"):
        frame[column] = pd.Series(
            [None if pd.isna(v) else str(v) for v in frame[column]], dtype=object
        )
    frame["first_relevant_rank"] = frame["first_relevant_rank"].astype("Int64")
    frame["n_relevant"] = frame["n_relevant"].astype("int64")
    return frame


def write_labels(
    frame: pd.DataFrame, path: str | Path, inputs: Mapping[str, Any] | None = None
) -> None:
    """Write the labels in the format the suffix of `path` names (Parquet, CSV, TSV or JSON
    Lines; docs/outputs.md), atomically: a temporary sibling, then a rename. On failure, or when
    `path` would replace or be read as one of `inputs` (option -> given, or OpenedInput), the
    destination is left as it was."""
    write_frame(
        frame,
        Path(path),
        select=(
            "SELECT CAST(query_id AS VARCHAR) AS query_id, CAST(label AS VARCHAR) AS label, "
            "CAST(top1_doc_id AS VARCHAR) AS top1_doc_id, "
            "CAST(first_relevant_rank AS BIGINT) AS first_relevant_rank, "
            "CAST(n_relevant AS BIGINT) AS n_relevant FROM frame"
        ),
        inputs=inputs,
    )


def format_summary(result: LabelsResult) -> str:
    """The one line `duckscore labels` prints: counts per label and the queries not labelled."""
    counts = ", ".join(f"{label} {result.counts[label]:,}" for label in LABELS)
    return (
        f"{result.queries:,} queries labelled at k={result.k}: {counts} "
        f"({result.queries_without_run:,} without run rows); "
        f"{result.run_queries_unlabelled:,} run queries without judgments not labelled"
    )
