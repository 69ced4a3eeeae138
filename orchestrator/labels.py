"""`duckscore labels`: one label per judged query from a run and its relevance judgments.

The labels (issue 4, seed 000 §9.1) are computed in SQL (sql/labels/labels.sql, one CTE per
stage) over the views `duckscore eval` opens (`open_run`, `open_qrels` of evaluate.py), so the
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

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
import duckdb

from .engine import EngineSettings, connect
from .errors import DuckscoreError
from .evaluate import MAX_K, open_qrels, open_run
from .options import engine_options, run_and_qrels_options
from .progress import SILENT, Progress

if TYPE_CHECKING:  # pandas, Jinja and sqlglot load on first use: `duckscore --help` stays fast
    import pandas as pd

    from .inputs import OpenedInput
    from .render import RenderedSQL

DEFAULT_K = 10
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


def render_labels(k: int, order_by: str, final: str = "labels") -> RenderedSQL:
    """The labels SQL over the views eval_run and eval_qrels; `final` selects one stage."""
    from .render import render

    return render("labels/labels.sql", k=check_k(k), order_by=order_by, final=final,
                  inputs={"run": "eval_run", "qrels": "eval_qrels"})


def make_labels(run: str | Path | pd.DataFrame, qrels: str | Path | pd.DataFrame,
                k: int = DEFAULT_K, settings: EngineSettings | None = None) -> pd.DataFrame:
    """Label every judged query of `run` (each input a path, glob, folder or DataFrame).

    Returns one row per query judged in `qrels`, ordered by query_id, with the columns
    query_id, label ('good', 'ambiguous' or 'bad'), top1_doc_id, first_relevant_rank (nullable
    Int64) and n_relevant. Raises a DuckscoreError subclass naming the problem for a bad k or
    bad inputs.
    """
    return run_labels(run, qrels, k, settings).labels


def run_labels(run: str | Path | pd.DataFrame, qrels: str | Path | pd.DataFrame,
               k: int = DEFAULT_K, settings: EngineSettings | None = None,
               progress: Progress = SILENT) -> LabelsResult:
    """`make_labels` with everything the CLI reports: counts, columns used, rendered SQL."""
    from .inputs import schema_of
    from .runner import execute, first_row
    from .sqlcheck import check_sql

    k = check_k(k)
    con = connect(settings)
    try:
        progress.step("checking inputs")
        run_input, order_by, run_doc = open_run(con, run)
        qrels_input, qrels_doc = open_qrels(con, qrels)
        progress.step(f"labelling {run_input.rows:,} run rows against {qrels_input.rows:,} judgments")
        rendered = render_labels(k, order_by)
        check_sql(rendered, {"eval_run": schema_of(con, "eval_run"),
                             "eval_qrels": schema_of(con, "eval_qrels")})
        execute(con, f"CREATE OR REPLACE TEMP TABLE query_labels AS {rendered.text}", rendered)
        frame = con.execute("SELECT * FROM query_labels ORDER BY query_id").df()
        unlabelled = first_row(
            con,
            "SELECT count(*) FROM (SELECT query_id FROM eval_run GROUP BY query_id) AS r "
            "ANTI JOIN (SELECT query_id FROM eval_qrels GROUP BY query_id) AS q "
            "ON q.query_id = r.query_id")
    finally:
        con.close()
    frame = _typed(frame)
    counts = {label: int((frame["label"] == label).sum()) for label in LABELS}
    return LabelsResult(
        labels=frame, counts=counts, k=k,
        queries_without_run=int(frame["top1_doc_id"].isna().sum()),
        run_queries_unlabelled=int(unlabelled[0]) if unlabelled else 0,
        order_by=order_by, run_doc_column=run_doc, qrels_doc_column=qrels_doc,
        inputs={"run": run_input, "qrels": qrels_input}, rendered=rendered,
    )


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Stable column types whatever the nulls: ids and labels as objects (None for null),
    first_relevant_rank as nullable Int64, n_relevant as int64."""
    import pandas as pd

    frame = frame.loc[:, list(COLUMNS)].reset_index(drop=True)
    for column in ("query_id", "label", "top1_doc_id"):
        frame[column] = pd.Series([None if pd.isna(v) else str(v) for v in frame[column]],
                                  dtype=object)
    frame["first_relevant_rank"] = frame["first_relevant_rank"].astype("Int64")
    frame["n_relevant"] = frame["n_relevant"].astype("int64")
    return frame


def output_format(path: str | Path) -> str:
    """'csv' when the file name ends with .csv (any case), else 'parquet'."""
    return "csv" if str(path).lower().endswith(".csv") else "parquet"


def write_labels(frame: pd.DataFrame, path: str | Path) -> None:
    """Write the labels as Parquet (CSV when `path` ends with .csv), atomically: a temporary
    sibling, then a rename. On failure the destination is left as it was."""
    from .outputs import atomic_output_file
    from .render import lit

    target = Path(path)
    options = "FORMAT parquet" if output_format(target) == "parquet" else "FORMAT csv, HEADER true"
    with atomic_output_file(target) as staging:
        con = duckdb.connect(":memory:")
        con.register("labels_frame", frame)
        con.execute(
            "COPY (SELECT CAST(query_id AS VARCHAR) AS query_id, CAST(label AS VARCHAR) AS label, "
            "CAST(top1_doc_id AS VARCHAR) AS top1_doc_id, "
            "CAST(first_relevant_rank AS BIGINT) AS first_relevant_rank, "
            "CAST(n_relevant AS BIGINT) AS n_relevant FROM labels_frame) "
            f"TO {lit(str(staging))} ({options})")
        con.close()


def format_summary(result: LabelsResult) -> str:
    """The one line `duckscore labels` prints: counts per label and the queries not labelled."""
    counts = ", ".join(f"{label} {result.counts[label]:,}" for label in LABELS)
    return (f"{result.queries:,} queries labelled at k={result.k}: {counts} "
            f"({result.queries_without_run:,} without run rows); "
            f"{result.run_queries_unlabelled:,} run queries without judgments not labelled")


@click.command(name="labels")
@run_and_qrels_options
@click.option("--out", "out_path", required=True, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the labels: Parquet, or CSV when FILE ends with .csv "
                   "(replaced atomically).")
@click.option("--k", "k", default=DEFAULT_K, show_default=True, type=click.IntRange(min=1, max=MAX_K),
              help="Cutoff: a query with no relevant document in the top k is bad.")
@engine_options
@click.pass_context
def labels_command(ctx: click.Context, run_path: str, qrels_path: str, out_path: Path, k: int,
                   settings: EngineSettings) -> None:
    """Label each judged query good, ambiguous or bad from a run and relevance judgments.

    \b
    good       the top-1 document of the run is relevant (relevance > 0)
    bad        no relevant document in the top k (also: a judged query
               absent from the run, or with no relevant judgment)
    ambiguous  otherwise: the first relevant document is at rank 2..k

    \b
    Order within a query, as in `duckscore eval`: rank ascending when the run has a
    rank column, else score descending; ties by document id ascending (as text).
    Each (query_id, document) appears at most once in the run and in the qrels.

    \b
    Queries: a query is labelled when the qrels judge one of its documents. Run
    queries without any judgment get no label (they are counted in the summary).

    \b
    Output (--out, one row per labelled query, ordered by query_id):
      query_id, label, top1_doc_id (null when absent from the run),
      first_relevant_rank (position of the first relevant document in the whole
      run; null if none), n_relevant (relevant judgments of the query).
    Prints one summary line of the counts per label on stdout.
    """
    progress = ctx.find_object(Progress) or SILENT
    result = run_labels(run_path, qrels_path, k, settings, progress)
    write_labels(result.labels, out_path)
    click.echo(format_summary(result))
    progress.step(f"done: {result.queries:,} queries labelled -> {out_path}")
