"""`evaluate()`: retrieval metrics of a run against relevance judgments, computed in SQL.

Metrics are defined as trec_eval and ranx define them (nDCG with gain 2^rel − 1 as ranx's
`ndcg_burges`, which equals trec_eval's `ndcg_cut` for binary judgments): the SQL is
sql/metrics/per_query.sql (one CTE per stage) and sql/metrics/means.sql.

Conventions (as in trec_eval and ranx):
- the run orders a query's documents by `rank` ascending when it has a rank column, else by
  `score` descending; ties by document id ascending (as text). Positions are 1, 2, … in that order.
- a query is evaluated when the qrels judge at least one of its documents; relevant means
  relevance > 0. Run rows of queries absent from the qrels are ignored. An evaluated query with
  no run row, or with no relevant document, scores 0 on every metric.
- each mean is over the evaluated queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ..core.connection import EngineSettings
from ..core.errors import InputError
from ..core.inputs import Table
from ..core.outputs import write_frame
from ..core.render import RenderedSQL, render
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.tables import OpenedInput
from .catalog import DEFAULT_METRICS, Metric, parse_metrics
from .tables import UNJUDGED_RUN_QUERIES, open_judged_run

if TYPE_CHECKING:
    import pandas as pd

logger = module_logger(__name__)


@dataclass(frozen=True)
class EvalResult:
    means: dict[str, float]
    per_query: pd.DataFrame
    metrics: list[Metric]
    queries: int
    queries_without_run: int
    run_queries_ignored: int
    order_by: str
    run_doc_column: str
    qrels_doc_column: str
    inputs: dict[str, OpenedInput]
    rendered: list[RenderedSQL]

    @property
    def queries_covered(self) -> int:
        """The evaluated (judged) queries the run has a row for; the others score 0."""
        return self.queries - self.queries_without_run


def no_coverage(result: EvalResult) -> str | None:
    """`--run (PATH): covers none of the N judged queries` when the run has no row for any query
    the qrels judge (the input named as the user gave it), else None."""
    if result.queries_covered or not result.queries:
        return None
    run = result.inputs["run"]
    return f"{run.label} ({run.given}): covers none of the {result.queries:,} judged queries"


def refuse_no_shared_query(result: EvalResult) -> None:
    """Plain `eval` of a run that shares no query with the qrels: refused in one line naming
    both inputs, since every metric would be 0 (the run's query ids are not the qrels')."""
    if no_coverage(result) is None:
        return
    run, qrels = result.inputs["run"], result.inputs["qrels"]
    judged = f"{result.queries:,} judged quer{'y' if result.queries == 1 else 'ies'}"
    raise InputError(
        f"{run.label} ({run.given}) and {qrels.label} ({qrels.given}) share no query: the run "
        f"has no row for any of the {judged}, so every metric would be 0 (are its query ids "
        "the qrels'?)"
    )


def render_per_query(metrics: list[Metric], order_by: str, final: str = "per_query") -> RenderedSQL:
    cutoffs = sorted({m.k for m in metrics}, key=lambda k: (k is None, k or 0))
    return render_metrics(
        [m.context for m in metrics],
        [{"k": k, "suffix": Metric("", "", k).suffix} for k in cutoffs],
        order_by,
        final,
    )


def render_metrics(
    metrics: list[dict[str, Any]],
    cutoffs: list[dict[str, Any]],
    order_by: str,
    final: str = "per_query",
) -> RenderedSQL:
    """sql/metrics/per_query.sql over the views eval_run and eval_qrels: `metrics` and `cutoffs`
    as Metric.context writes them (a cutoff may be a column: the macro pack's ds_eval)."""
    return render(
        "metrics/per_query.sql",
        final=final,
        order_by=order_by,
        metrics=metrics,
        cutoffs=cutoffs,
        inputs={"run": "eval_run", "qrels": "eval_qrels"},
    )


def render_means(metrics: list[Metric]) -> RenderedSQL:
    return render(
        "metrics/means.sql",
        metrics=[m.context for m in metrics],
        inputs={"per_query": "eval_per_query"},
    )


def evaluate(
    run: Table,
    qrels: Table,
    metrics: str | Sequence[str] = DEFAULT_METRICS,
    settings: EngineSettings | None = None,
) -> tuple[dict[str, float], pd.DataFrame]:
    """Evaluate `run` against `qrels` (each a path, glob, folder or DataFrame).

    Returns the means keyed by metric name exactly as given (in the given order) and one row per
    evaluated query: query_id, n_relevant, n_retrieved and one column per metric.
    Raises a DuckscoreError subclass naming the problem for bad metrics or inputs.
    """
    result = run_evaluation(run, qrels, metrics, settings)
    return result.means, result.per_query


def run_evaluation(
    run: Table,
    qrels: Table,
    metrics: str | Sequence[str] = DEFAULT_METRICS,
    settings: EngineSettings | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    run_label: str = "--run",
) -> EvalResult:
    """`evaluate` with everything the CLI reports: query counts, columns used, rendered SQL."""
    parsed = parse_metrics(metrics)
    with Session(settings, connection=connection) as session:
        judged = open_judged_run(session, run, qrels, run_label)
        logger.info(
            f"evaluating {judged.run.rows:,} run rows against {judged.qrels.rows:,} judgments"
        )
        per_query_sql = render_per_query(parsed, judged.order_by)
        session.create("eval_per_query", per_query_sql)
        means_sql = render_means(parsed)
        session.create("eval_means", means_sql)
        frame = session.frame("SELECT * FROM eval_per_query ORDER BY query_id")
        frame = frame.rename(columns={m.column: m.key for m in parsed})
        values = session.frame("SELECT * FROM eval_means").iloc[0].to_dict()
        ignored = session.first_row(UNJUDGED_RUN_QUERIES)
    return EvalResult(
        means={m.key: float(values[m.column]) for m in parsed},
        per_query=frame,
        metrics=parsed,
        queries=int(values["n_queries"]),
        queries_without_run=int((frame["n_retrieved"] == 0).sum()),
        run_queries_ignored=int(ignored[0]) if ignored else 0,
        order_by=judged.order_by,
        run_doc_column=judged.run_doc_column,
        qrels_doc_column=judged.qrels_doc_column,
        inputs=dict(session.inputs),
        rendered=[per_query_sql, means_sql],
    )


def write_per_query(
    frame: pd.DataFrame, path: str | Path, inputs: Mapping[str, Any] | None = None
) -> None:
    """Write the per-query table in the format the suffix of `path` names (Parquet, CSV, TSV or
    JSON Lines; docs/outputs.md), atomically (a temporary sibling, then a rename); refused when
    it would replace or be read as one of `inputs` (option -> given, or OpenedInput)."""
    write_frame(frame, Path(path), "--per-query", inputs=inputs)


def format_table(result: EvalResult) -> str:
    """The plain-text table of `duckscore eval`: one line per metric, in the order given."""
    width = max(len("metric"), *(len(m.key) for m in result.metrics)) + 2
    lines = [f"{'metric':<{width}}{'mean':>10}"]
    for metric in result.metrics:
        lines.append(f"{metric.key:<{width}}{result.means[metric.key]:>10.6f}")
    lines += [
        "",
        f"{result.queries:,} queries evaluated ({result.queries_without_run:,} without "
        f"run rows); {result.run_queries_ignored:,} run queries without judgments ignored",
    ]
    return "\n".join(lines)
